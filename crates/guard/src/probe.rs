//! The active probe: proof, from inside the pod, that a UID other than the proxy's is
//! refused.
//!
//! A thread enters the pod's network namespace, drops its own credentials to another UID
//! with the raw `setresgid`/`setresuid` system calls (glibc's wrappers would change every
//! thread of the process), and sends one UDP datagram to a TEST-NET-1 address through the
//! pod's interface. The fence must refuse it with EPERM. The socket is bound to the
//! interface so routing finds a way out even when the pod has no route (yet); only a
//! missing or down interface makes the probe inconclusive, which counts as a failure.

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
pub fn require_refused(ifname: &str, proxy_uid: u32) -> Result<(), String> {
    let uid = probe_uid(proxy_uid);
    match run(ifname, uid) {
        Ok(Outcome::Refused) => Ok(()),
        Ok(Outcome::Sent) => Err(format!(
            "probe: a UDP datagram from uid {uid} to {PROBE_DESTINATION} via {ifname} was NOT refused"
        )),
        Ok(Outcome::Inconclusive(why)) => Err(format!(
            "probe from uid {uid} to {PROBE_DESTINATION} via {ifname} proves nothing: {why}"
        )),
        Err(e) => Err(format!("probe could not run: {e}")),
    }
}

/// Runs on its own thread, inside the pod's namespace; it changes only this thread's
/// credentials, and the thread ends right after.
fn send_as(uid: u32, ifname: &str) -> Outcome {
    if let Err(e) = drop_thread_credentials(uid) {
        return Outcome::Inconclusive(format!("cannot switch the probe thread to uid {uid}: {e}"));
    }
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
/// (in that order: after the uid changes the others can no longer be changed).
fn drop_thread_credentials(uid: u32) -> io::Result<()> {
    let gid = uid;
    // SAFETY: raw system calls with integer arguments; they affect only the calling
    // thread's credentials, which is the point (glibc's wrappers would signal every
    // thread to change them all).
    unsafe {
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
    Ok(())
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
