//! Test support shared by weft's integration tests.
//!
//! Every object a test creates carries the `weft` prefix plus the test process id and a
//! counter, so tests run in parallel without colliding, and every object is removed by a
//! Drop guard even when the test panics.
//!
//! Commands run "inside" a namespace enter only its network namespace (`setns` in a
//! `pre_exec` hook). `ip netns exec` is deliberately avoided: it remounts `/sys`, which
//! hides the host's bpffs, so BPF pins made under it silently land in a throw-away mount.

mod netns;
mod process;
mod reply;

pub use netns::{Netns, VethPair};
pub use process::{cmd_in, run, run_ok, run_ok_in, Output};
pub use reply::PluginReply;

use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A name unique to this process and call, starting with `weft` and at most 15 bytes
/// (the kernel's interface-name limit), built from a short tag of the caller's choosing.
pub fn unique_name(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id() % 100_000;
    let tag: String = tag
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(2)
        .collect();
    let name = format!("weft{tag}{pid:x}{n:x}");
    assert!(name.len() <= 15, "name {name} too long for an interface");
    name
}

/// Fails the test (never skips it) when not running as root: the tests that call this
/// need namespaces, netlink or BPF, and a silent skip would hide a broken feature.
pub fn require_root() {
    if !nix::unistd::geteuid().is_root() {
        panic!("this test needs root (network namespaces, netlink, BPF); run it as root (make test does)");
    }
}

/// Fails the test with the name of the missing tool when a required binary is absent.
pub fn require_tool(tool: &str) {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|p| p.join(tool).is_file()))
        .unwrap_or(false);
    if !found {
        panic!("this test needs `{tool}` on PATH; `make test` installs it");
    }
}
