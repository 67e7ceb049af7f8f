//! Finding and ending the processes a runtime leaves running (shims, conmon).

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// Processes whose command line mentions `needle` (e.g. our private containerd socket,
/// which every shim we caused to start carries in `-address`). Never this process.
pub fn pids_mentioning(needle: &str) -> Vec<Pid> {
    let own = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|raw| {
                    let line: Vec<u8> =
                        raw.iter().map(|&b| if b == 0 { b' ' } else { b }).collect();
                    String::from_utf8_lossy(&line).contains(needle)
                })
                .unwrap_or(false)
        })
        .filter_map(|pid| i32::try_from(pid).ok().map(Pid::from_raw))
        .collect()
}

/// Processes whose cgroup path mentions `needle` (a container id), so that container
/// processes orphaned by a killed shim are found too.
pub fn pids_in_cgroup_mentioning(needle: &str) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .map(|cgroups| cgroups.contains(needle))
                .unwrap_or(false)
        })
        .map(Pid::from_raw)
        .collect()
}

/// Sends `signal` to each process, then waits (bounded) until they are gone.
/// Returns the ones still alive. Best effort: this runs from Drop.
pub fn kill_and_wait(pids: &[Pid], signal: Signal, patience: Duration) -> Vec<Pid> {
    for &pid in pids {
        let _ = kill(pid, signal);
    }
    let deadline = Instant::now() + patience;
    loop {
        let alive: Vec<Pid> = pids.iter().copied().filter(|&pid| is_alive(pid)).collect();
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Alive and not a zombie (a zombie child of ours counts as gone: it holds nothing).
fn is_alive(pid: Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state letter follows the parenthesised command name.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('Z') | Some('X') | None)
        }
        Err(_) => false,
    }
}

/// SIGTERM, a short grace period, then SIGKILL for the stubborn ones.
pub fn terminate(pids: &[Pid]) {
    let left = kill_and_wait(pids, Signal::SIGTERM, Duration::from_secs(3));
    let left = kill_and_wait(&left, Signal::SIGKILL, Duration::from_secs(3));
    for pid in left {
        eprintln!("warning: process {pid} survived SIGKILL");
    }
}
