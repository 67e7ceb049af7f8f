//! The active probe: proof, from inside the pod, that a UID other than the proxy's is
//! refused.
//!
//! A thread enters the pod's network namespace, drops its own credentials to another UID
//! with the raw `setresgid`/`setresuid` system calls (glibc's wrappers would change every
//! thread of the process), and sends one UDP datagram to a TEST-NET-1 address through the
//! pod's interface. The fence must refuse it with EPERM. The socket is bound to the
//! interface so routing finds a way out even when the pod has no route (yet); only a
//! missing or down interface makes the probe inconclusive, which counts as a failure.
//!
//! When the namespace has a frame fence ([`crate::frames`]), the thread keeps CAP_NET_RAW
//! (and nothing else) across the switch and also writes one raw Ethernet frame on the
//! interface through an AF_PACKET socket with `PACKET_QDISC_BYPASS`, the way that skips
//! tc: the frame fence must drop it (`send` fails with ENOBUFS).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

/// TEST-NET-1 (RFC 5737): never a real destination.
pub const PROBE_DESTINATION: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 9);
/// The UID the probe sends as (nobody), or [`FALLBACK_UID`] when that is the proxy's.
pub const PROBE_UID: u32 = 65534;
pub const FALLBACK_UID: u32 = 65533;

/// What happened to the probe datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `send` failed with EPERM: the fence refused it.
    Refused,
    /// The datagram left: nothing refused it.
    Sent,
    /// Some other error; the probe proves nothing.
    Inconclusive(String),
}

/// The UID to probe with for a fence exempting `proxy_uid`.
pub fn probe_uid(proxy_uid: u32) -> u32 {
    if proxy_uid == PROBE_UID {
        FALLBACK_UID
    } else {
        PROBE_UID
    }
}

/// Sends the probe as `uid` through `ifname`, from a new thread that starts in the
/// calling thread's network namespace (the pod's: the caller has entered it).
pub fn run(ifname: &str, uid: u32) -> Result<Outcome, String> {
    std::thread::scope(|scope| scope.spawn(|| send_as(uid, ifname)).join())
        .map_err(|_| "probe thread panicked".to_string())
}

/// Runs the probe and turns anything but a refusal into an error naming what happened.
/// With `frames`, the raw-frame probe must be refused too.
pub fn require_refused(ifname: &str, proxy_uid: u32, frames: bool) -> Result<(), String> {
    let uid = probe_uid(proxy_uid);
    let outcomes = std::thread::scope(|scope| scope.spawn(|| probe_as(uid, ifname, frames)).join())
        .map_err(|_| "probe thread panicked".to_string())?;
    let mut failures = Vec::new();
    match outcomes.datagram {
        Outcome::Refused => {}
        Outcome::Sent => failures.push(format!(
            "probe: a UDP datagram from uid {uid} to {PROBE_DESTINATION} via {ifname} was NOT refused"
        )),
        Outcome::Inconclusive(why) => failures.push(format!(
            "probe from uid {uid} to {PROBE_DESTINATION} via {ifname} proves nothing: {why}"
        )),
    }
    match outcomes.frame {
        None | Some(Outcome::Refused) => {}
        Some(Outcome::Sent) => failures.push(format!(
            "probe: a raw frame from uid {uid} (CAP_NET_RAW, PACKET_QDISC_BYPASS) via {ifname} was NOT dropped"
        )),
        Some(Outcome::Inconclusive(why)) => failures.push(format!(
            "raw-frame probe from uid {uid} via {ifname} proves nothing: {why}"
        )),
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// What the probe thread saw.
struct Outcomes {
    datagram: Outcome,
    frame: Option<Outcome>,
}

/// Runs on its own thread, inside the pod's namespace: the datagram probe, and with
/// `frames` the raw-frame probe, as `uid` (keeping CAP_NET_RAW for the frame).
fn probe_as(uid: u32, ifname: &str, frames: bool) -> Outcomes {
    let inconclusive = |why: String| Outcomes {
        datagram: Outcome::Inconclusive(why.clone()),
        frame: frames.then(|| Outcome::Inconclusive(why)),
    };
    if let Err(e) = drop_thread_credentials(uid, frames) {
        return inconclusive(format!("cannot switch the probe thread to uid {uid}: {e}"));
    }
    let datagram = send_datagram(ifname);
    let frame = frames.then(|| send_frame(ifname));
    Outcomes { datagram, frame }
}

/// Runs on its own thread, inside the pod's namespace; it changes only this thread's
/// credentials, and the thread ends right after.
fn send_as(uid: u32, ifname: &str) -> Outcome {
    if let Err(e) = drop_thread_credentials(uid, false) {
        return Outcome::Inconclusive(format!("cannot switch the probe thread to uid {uid}: {e}"));
    }
    send_datagram(ifname)
}

/// One UDP datagram to [`PROBE_DESTINATION`] through `ifname`.
fn send_datagram(ifname: &str) -> Outcome {
    // The socket's owner is fixed when it is created: after the switch.
    let socket = match UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)) {
        Ok(socket) => socket,
        Err(e) => return Outcome::Inconclusive(format!("UDP socket: {e}")),
    };
    if let Err(e) = bind_to_device(&socket, ifname) {
        return Outcome::Inconclusive(format!("SO_BINDTODEVICE {ifname}: {e}"));
    }
    match socket.send_to(&[0u8], PROBE_DESTINATION) {
        Ok(_) => Outcome::Sent,
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Outcome::Refused,
        Err(e) => Outcome::Inconclusive(format!("send: {e}")),
    }
}

/// Gives up root for the calling thread only: no supplementary groups, then gid, then uid
/// (in that order: after the uid changes the others can no longer be changed). With
/// `keep_net_raw`, CAP_NET_RAW (only) stays effective, as in a container that keeps it.
fn drop_thread_credentials(uid: u32, keep_net_raw: bool) -> io::Result<()> {
    let gid = uid;
    // SAFETY: raw system calls with integer arguments; they affect only the calling
    // thread's credentials, which is the point (glibc's wrappers would signal every
    // thread to change them all).
    unsafe {
        if keep_net_raw && libc::syscall(libc::SYS_prctl, libc::PR_SET_KEEPCAPS, 1usize) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_setresgid, gid, gid, gid) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    if keep_net_raw {
        set_thread_capabilities(1 << CAP_NET_RAW)?;
    }
    Ok(())
}

/// `CAP_NET_RAW` (linux/capability.h).
const CAP_NET_RAW: u32 = 13;

/// Makes `caps` (bits of the first capability word) the calling thread's effective and
/// permitted set, and nothing else.
fn set_thread_capabilities(caps: u32) -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // _LINUX_CAPABILITY_VERSION_3: two words of each set.
    let header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let none = Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    };
    let data = [
        Data {
            effective: caps,
            permitted: caps,
            inheritable: 0,
        },
        none,
    ];
    // SAFETY: header and data are the layouts capset(2) reads; pid 0 is this thread.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `PACKET_QDISC_BYPASS` (linux/if_packet.h).
const PACKET_QDISC_BYPASS: libc::c_int = 20;
/// The probe frame's EtherType: IEEE 802 local experimental, never a real protocol.
const PROBE_ETHERTYPE: u16 = 0x88b5;

/// One raw Ethernet frame through an AF_PACKET socket on `ifname`, past the qdisc layer.
fn send_frame(ifname: &str) -> Outcome {
    use std::os::fd::{FromRawFd, OwnedFd};
    let Ok(name) = std::ffi::CString::new(ifname) else {
        return Outcome::Inconclusive(format!("{ifname:?} is not an interface name"));
    };
    // SAFETY: if_nametoindex reads a NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Outcome::Inconclusive(format!("no interface {ifname}"));
    }
    // SAFETY: plain socket(2); the result is checked and owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            0, // protocol 0: this socket receives nothing
        )
    };
    if fd < 0 {
        return Outcome::Inconclusive(format!(
            "AF_PACKET socket (with CAP_NET_RAW): {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: a new descriptor the kernel just returned.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let on: libc::c_int = 1;
    // SAFETY: the option value is an int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_PACKET,
            PACKET_QDISC_BYPASS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Outcome::Inconclusive(format!(
            "PACKET_QDISC_BYPASS: {}",
            io::Error::last_os_error()
        ));
    }
    // Locally administered addresses that name no station; then the EtherType, and a
    // minimum-size payload of zeros.
    let mut frame = [0u8; 60];
    frame[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x00]);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    frame[12..14].copy_from_slice(&PROBE_ETHERTYPE.to_be_bytes());
    // SAFETY: zeroed sockaddr_ll, then filled; passed with its exact size.
    let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    to.sll_family = libc::AF_PACKET as u16;
    to.sll_protocol = PROBE_ETHERTYPE.to_be();
    to.sll_ifindex = ifindex as i32;
    to.sll_halen = 6;
    // SAFETY: frame and `to` are valid for the lengths given.
    let sent = unsafe {
        libc::sendto(
            fd,
            frame.as_ptr().cast(),
            frame.len(),
            0,
            (&to as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    drop(socket);
    if sent >= 0 {
        return Outcome::Sent;
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // What a drop at the egress hook returns to the sender.
        Some(libc::ENOBUFS) => Outcome::Refused,
        _ => Outcome::Inconclusive(format!("send: {e}")),
    }
}

fn bind_to_device(socket: &UdpSocket, ifname: &str) -> io::Result<()> {
    let name = ifname.as_bytes();
    // SAFETY: the option value is the interface name's bytes with their exact length.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_uid_is_never_the_proxy() {
        assert_eq!(probe_uid(1337), PROBE_UID);
        assert_eq!(probe_uid(PROBE_UID), FALLBACK_UID);
    }
}
