//! Threads that live in another network namespace, pinned to one CPU, and the scheduling
//! priority of everything the bench measures with.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::thread::JoinHandle;

use anyhow::Context;
use nix::sched::{sched_setaffinity, setns, CloneFlags, CpuSet};
use nix::unistd::Pid;

/// Starts `f` on a new thread that first enters the network namespace at `netns` (only the
/// network namespace: the mount namespace, and with it bpffs, stays the host's). Unlike
/// `lab::netns::in_netns` this does not wait, so two such threads can talk to each other.
pub fn spawn_in_netns<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<JoinHandle<anyhow::Result<T>>> {
    let path = netns.to_path_buf();
    let file = File::open(&path).with_context(|| format!("open {}", path.display()))?;
    std::thread::Builder::new()
        .name("weft-bench-netns".into())
        .spawn(move || {
            setns(&file, CloneFlags::CLONE_NEWNET)
                .with_context(|| format!("enter {}", path.display()))?;
            f()
        })
        .context("start a thread")
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> anyhow::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu)
        .with_context(|| format!("CPU {cpu} is out of range"))?;
    // Pid 0 is the calling thread, not the whole process.
    sched_setaffinity(Pid::from_raw(0), &set)
        .with_context(|| format!("pin a thread to CPU {cpu} (does this machine have it?)"))
}

/// Sets the calling thread's nice value (on Linux nice is per thread, and `who == 0` is
/// the calling thread).
pub fn set_nice(nice: i32) -> anyhow::Result<()> {
    // SAFETY: setpriority takes no pointers; it only changes this thread's priority.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("set nice {nice}"));
    }
    Ok(())
}

/// Makes the child of `cmd` run with nice value `nice`.
pub fn nice_before_exec(cmd: &mut Command, nice: i32) {
    // SAFETY: the hook makes one system call without pointers, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpriority(libc::PRIO_PROCESS, 0, nice) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_runs_in_the_namespace_it_was_given() {
        weft_testkit::require_root();
        let ns = weft_testkit::Netns::new("th");
        let inode = |p: &str| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(p).map(|m| m.ino())
        };
        let want = inode(&ns.path().display().to_string()).unwrap();
        let got = spawn_in_netns(ns.path(), move || Ok(inode("/proc/thread-self/ns/net")?))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(got, want);
        // This thread did not move.
        assert_ne!(inode("/proc/thread-self/ns/net").unwrap(), want);
    }

    #[test]
    fn nice_applies_to_one_thread_and_to_children() {
        weft_testkit::require_root();
        let nice_of = |stat: &str| -> i32 {
            // Field 19 of /proc/<pid>/stat, counted after the parenthesised name.
            let after = stat.rsplit_once(')').unwrap().1;
            after.split_whitespace().nth(16).unwrap().parse().unwrap()
        };
        let ours = nice_of(&std::fs::read_to_string("/proc/thread-self/stat").unwrap());
        let inner = std::thread::spawn(move || {
            set_nice(-3).unwrap();
            nice_of(&std::fs::read_to_string("/proc/thread-self/stat").unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(inner, -3);
        assert_eq!(
            nice_of(&std::fs::read_to_string("/proc/thread-self/stat").unwrap()),
            ours
        );
        let mut cmd = Command::new("cat");
        cmd.arg("/proc/self/stat");
        nice_before_exec(&mut cmd, -4);
        let out = cmd.output().unwrap();
        assert_eq!(nice_of(&String::from_utf8_lossy(&out.stdout)), -4);
    }
}
