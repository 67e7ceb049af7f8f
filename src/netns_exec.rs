//! Running a child process inside another network namespace.
//!
//! Only the network namespace is entered (setns in the child before exec). `ip netns exec`
//! is avoided on purpose: it also remounts /sys, which hides the host's bpffs, so BPF pins
//! made under it would silently land in a throw-away mount.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// Makes `cmd` enter the network namespace at `netns` between fork and exec.
pub fn enter_netns_before_exec(cmd: &mut Command, netns: &Path) {
    let path = netns.to_path_buf();
    // SAFETY: the hook only opens a file and calls setns, both async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let f = std::fs::File::open(&path)?;
            nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(std::io::Error::from)?;
            Ok(())
        });
    }
}
