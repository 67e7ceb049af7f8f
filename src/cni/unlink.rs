//! Deleting a pod's host veth without making DEL wait for the kernel to free it.
//!
//! `RTM_DELLINK` returns only when the kernel has finished unregistering the device, and
//! that includes an `rcu_barrier` (measured here: ~20 ms of a ~23 ms DEL, off-CPU). The
//! device is unlisted, with its routes and neighbour entries, a few milliseconds in, and the
//! kernel announces that moment to link listeners. So DEL forks a child that sends the
//! delete and carries the wait, with its standard streams detached so the runtime does not
//! wait for it, while the plugin waits only for the announcement, then releases the
//! addresses. The order of the invariant is kept: the interface is gone before its
//! addresses can be handed out again.

use std::time::Duration;

use weft_cni::CniError;
use weft_netlink::{Handle, LinkEvents};

use super::errors::netlink;

/// How long to wait for the kernel's announcement before looking at the link directly.
const ANNOUNCEMENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Deletes the link `name` in the current network namespace; `Ok(false)` when there was none.
pub fn delete_link(host: &mut Handle, name: &str) -> Result<bool, CniError> {
    // Subscribe first: an announcement between the lookup and the wait cannot be missed.
    let mut events = LinkEvents::subscribe().map_err(|e| netlink("subscribe to link events", e))?;
    let Some(link) = host
        .link_by_name(name)
        .map_err(|e| netlink("find host veth", e))?
    else {
        return Ok(false);
    };
    // SAFETY: the plugin is single-threaded and holds no locks here (IPAM locks are taken
    // and dropped per call), so the child may run arbitrary code; it only opens a netlink
    // socket, sends one request and exits without unwinding.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            detach_stdio();
            let code = match Handle::new().and_then(|mut h| h.delete_link(link.index)) {
                Ok(()) => 0,
                Err(_) => 1,
            };
            // SAFETY: _exit skips atexit handlers and destructors shared with the parent.
            unsafe { libc::_exit(code) }
        }
        Ok(nix::unistd::ForkResult::Parent { .. }) => {}
        // No child: delete in this process and pay the wait.
        Err(_) => {
            host.delete_link(link.index)
                .map_err(|e| netlink("delete host veth", e))?;
            return Ok(true);
        }
    }
    if events
        .wait_removed(link.index, ANNOUNCEMENT_TIMEOUT)
        .map_err(|e| netlink("wait for host veth removal", e))?
    {
        return Ok(true);
    }
    // No announcement (timeout, or lost notifications): trust only what the kernel lists now.
    match host.link_by_index(link.index).map_err(|e| netlink("look up host veth", e))? {
        None => Ok(true),
        Some(still) => Err(CniError::internal(format!(
            "host veth {} (index {}) still exists after deleting it; keeping its addresses reserved",
            still.name, link.index
        ))),
    }
}

/// Points the child's standard streams at /dev/null: the runtime reads the plugin's stdout
/// until every writer has closed it, and the child must not hold it open.
fn detach_stdio() {
    // SAFETY: open/dup2/close on descriptors this process owns.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..=2 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
}
