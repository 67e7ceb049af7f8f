//! Crash points for tests: every step of a store operation that changes the disk calls
//! [`point`]. Test builds can arm a step number; reaching it SIGKILLs the process, which is
//! exactly what an OOM kill or a runtime timeout does to a real plugin. Release builds
//! compile the calls away.

#[cfg(test)]
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(test)]
static STEPS: AtomicU64 = AtomicU64::new(0);
/// 0 means disarmed.
#[cfg(test)]
static KILL_AT: AtomicU64 = AtomicU64::new(0);

/// Kills the process when the `step`-th crash point (counting from 1 after this call) is
/// reached.
#[cfg(test)]
pub(crate) fn arm(step: u64) {
    STEPS.store(0, Ordering::SeqCst);
    KILL_AT.store(step, Ordering::SeqCst);
}

#[cfg(test)]
pub(crate) fn point(label: &'static str) {
    let n = STEPS.fetch_add(1, Ordering::SeqCst) + 1;
    if n == KILL_AT.load(Ordering::SeqCst) {
        // Tell the parent where we died; stderr is unbuffered.
        eprintln!("crash point {n}: {label}");
        let _ = nix::sys::signal::kill(nix::unistd::getpid(), nix::sys::signal::SIGKILL);
        // SIGKILL to ourselves is delivered before kill() returns; never continue.
        std::process::abort();
    }
}

#[cfg(not(test))]
#[inline(always)]
pub(crate) fn point(_label: &'static str) {}
