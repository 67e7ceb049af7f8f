//! The active probe: proof, from inside the pod, that a UID other than the proxy's is
//! refused.
//!
//! The plugin's thread, already inside the pod's network namespace, switches its own
//! credentials to another UID with the raw `setresgid`/`setresuid` system calls (glibc's
//! wrappers would change every thread of the process), sends one UDP datagram to a
//! TEST-NET-1 address through the pod's interface, and switches back. The fence must refuse
//! the datagram with EPERM. The socket is bound to the interface so routing finds a way out
//! even when the pod has no route (yet); only a missing or down interface makes the probe
//! inconclusive, which counts as a failure.
//!
//! For CHECK of a namespace with a frame fence ([`crate::frames`]), only CAP_NET_RAW stays
//! effective across the switch, and the probe also writes one raw Ethernet frame on the
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

/// Runs the probe and turns anything but a refusal into an error naming what happened.
/// With `frames`, the raw-frame probe must be refused too. The calling thread must be in
/// the pod's namespace; it runs the probe itself, as another UID, and is root again after.
pub fn require_refused(ifname: &str, proxy_uid: u32, frames: bool) -> Result<(), String> {
    let uid = probe_uid(proxy_uid);
    let keep = if frames { 1 << CAP_NET_RAW } else { 0 };
    let (datagram, frame) = as_uid(uid, keep, || {
        (send_datagram(ifname), frames.then(|| send_frame(ifname)))
    })
    .map_err(|e| format!("probe as uid {uid}: {e}"))?;
    let mut failures = Vec::new();
    match datagram {
        Outcome::Refused => {}
        Outcome::Sent => failures.push(format!(
            "probe: a UDP datagram from uid {uid} to {PROBE_DESTINATION} via {ifname} was NOT refused"
        )),
        Outcome::Inconclusive(why) => failures.push(format!(
            "probe from uid {uid} to {PROBE_DESTINATION} via {ifname} proves nothing: {why}"
        )),
    }
    match frame {
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

/// `CAP_NET_RAW` (linux/capability.h).
const CAP_NET_RAW: u32 = 13;

/// A thread's capability sets, as capget(2)/capset(2) see them (two 32-bit words each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Caps {
    effective: u64,
    permitted: u64,
    inheritable: u64,
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// _LINUX_CAPABILITY_VERSION_3.
const CAP_VERSION_3: u32 = 0x2008_0522;

fn capget() -> io::Result<Caps> {
    let header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: header and two data words are what capget(2) reads and writes.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &header, data.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let join = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    Ok(Caps {
        effective: join(data[0].effective, data[1].effective),
        permitted: join(data[0].permitted, data[1].permitted),
        inheritable: join(data[0].inheritable, data[1].inheritable),
    })
}

fn capset(caps: Caps) -> io::Result<()> {
    let header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let word = |set: u64, high: bool| (if high { set >> 32 } else { set }) as u32;
    let data = [false, true].map(|high| CapData {
        effective: word(caps.effective, high),
        permitted: word(caps.permitted, high),
        inheritable: word(caps.inheritable, high),
    });
    // SAFETY: header and two data words are what capset(2) reads; pid 0 is this thread.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Raw system calls that change only the calling thread's credentials (glibc's wrappers
/// would signal every thread of the process to change them all).
fn sys(result: libc::c_long) -> io::Result<()> {
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's credentials, to put back after the probe.
struct Saved {
    uids: [libc::uid_t; 3],
    gids: [libc::gid_t; 3],
    groups: Vec<libc::gid_t>,
    caps: Caps,
    keep_caps: libc::c_long,
}

fn save() -> io::Result<Saved> {
    let (mut ru, mut eu, mut su): (libc::uid_t, libc::uid_t, libc::uid_t) = (0, 0, 0);
    let (mut rg, mut eg, mut sg): (libc::gid_t, libc::gid_t, libc::gid_t) = (0, 0, 0);
    // SAFETY: each call writes three ids into the variables given.
    unsafe {
        sys(libc::syscall(
            libc::SYS_getresuid,
            &mut ru,
            &mut eu,
            &mut su,
        ))?;
        sys(libc::syscall(
            libc::SYS_getresgid,
            &mut rg,
            &mut eg,
            &mut sg,
        ))?;
    }
    let (uids, gids) = ([ru, eu, su], [rg, eg, sg]);
    let mut groups = vec![0 as libc::gid_t; 256];
    // SAFETY: the kernel writes at most `groups.len()` ids.
    let n = unsafe { libc::syscall(libc::SYS_getgroups, groups.len(), groups.as_mut_ptr()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    groups.truncate(n as usize);
    // SAFETY: PR_GET_KEEPCAPS takes no pointer.
    let keep_caps = unsafe { libc::syscall(libc::SYS_prctl, libc::PR_GET_KEEPCAPS, 0, 0, 0, 0) };
    Ok(Saved {
        uids,
        gids,
        groups,
        caps: capget()?,
        keep_caps,
    })
}

/// Runs `work` on the calling thread as `uid` (and gid `uid`, no supplementary groups),
/// with only the capabilities in `effective` usable, then puts every credential back. The
/// permitted set is kept meanwhile, so the way back needs nothing from outside. Running on
/// the calling thread avoids waking another one: on a busy node a new thread waited 1-2 ms
/// for a CPU, most of ADD's own time. `Err` when the switch, or the way back, failed; a
/// thread that could not be put back is not left running as the probe UID: the process
/// exits.
fn as_uid<T>(uid: u32, effective: u64, work: impl FnOnce() -> T) -> Result<T, String> {
    let saved = save().map_err(|e| format!("reading the plugin's credentials: {e}"))?;
    let switched = (|| -> io::Result<()> {
        // SAFETY: raw credential system calls with integer or null arguments.
        unsafe {
            sys(libc::syscall(
                libc::SYS_prctl,
                libc::PR_SET_KEEPCAPS,
                1,
                0,
                0,
                0,
            ))?;
            sys(libc::syscall(
                libc::SYS_setgroups,
                0usize,
                std::ptr::null::<libc::gid_t>(),
            ))?;
            sys(libc::syscall(libc::SYS_setresgid, uid, uid, uid))?;
            sys(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
        }
        capset(Caps {
            effective: effective & saved.caps.permitted,
            permitted: saved.caps.permitted,
            inheritable: 0,
        })
    })();
    let outcome = switched.map(|()| work());
    if let Err(e) = restore(&saved) {
        // Carrying on as the probe UID (or half way back) would make every later step
        // fail in confusing ways, or worse; the runtime sees the plugin fail instead.
        eprintln!("weft-guard: could not restore the plugin's credentials after the probe: {e}");
        std::process::exit(1);
    }
    outcome.map_err(|e| format!("cannot switch to uid {uid}: {e}"))
}

fn restore(saved: &Saved) -> io::Result<()> {
    // Back to the full permitted set first: it holds CAP_SETUID and CAP_SETGID.
    capset(Caps {
        effective: saved.caps.permitted,
        permitted: saved.caps.permitted,
        inheritable: saved.caps.inheritable,
    })?;
    let [ru, eu, su] = saved.uids;
    let [rg, eg, sg] = saved.gids;
    // SAFETY: raw credential system calls; `groups` is valid for its length.
    unsafe {
        sys(libc::syscall(libc::SYS_setresuid, ru, eu, su))?;
        sys(libc::syscall(libc::SYS_setresgid, rg, eg, sg))?;
        sys(libc::syscall(
            libc::SYS_setgroups,
            saved.groups.len(),
            saved.groups.as_ptr(),
        ))?;
        sys(libc::syscall(
            libc::SYS_prctl,
            libc::PR_SET_KEEPCAPS,
            saved.keep_caps,
            0,
            0,
            0,
        ))?;
    }
    capset(saved.caps)?;
    let now = save()?;
    if now.uids != saved.uids || now.gids != saved.gids || now.caps != saved.caps {
        return Err(io::Error::other("credentials differ after restoring them"));
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
