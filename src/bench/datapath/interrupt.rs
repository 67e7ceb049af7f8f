//! Ctrl-C during a bench: instead of dying with namespaces, agents and iperf3 servers left
//! behind, the bench notices the request between steps, returns an error and its Drop guards
//! clean up.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{signal, SigHandler, Signal};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn note(_: nix::libc::c_int) {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Routes SIGINT and SIGTERM to the flag for the rest of the process's life.
pub fn install() -> anyhow::Result<()> {
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { signal(sig, SigHandler::Handler(note)) }?;
    }
    Ok(())
}

/// Whether the user asked the bench to stop.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// An error once the user asked the bench to stop.
pub fn check() -> anyhow::Result<()> {
    anyhow::ensure!(!requested(), "interrupted; cleaning up");
    Ok(())
}
