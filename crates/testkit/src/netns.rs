use crate::process::{cmd_in, run, run_ok, Output};
use crate::unique_name;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A named network namespace under /var/run/netns, deleted (with every process still in
/// it killed) when dropped.
#[derive(Debug)]
pub struct Netns {
    name: String,
    path: PathBuf,
}

impl Netns {
    /// Creates a namespace with a unique `weft…` name and loopback up.
    pub fn new(tag: &str) -> Netns {
        Self::named(&unique_name(tag))
    }

    /// Creates a namespace with exactly this name (it must start with `weft`).
    pub fn named(name: &str) -> Netns {
        assert!(
            name.starts_with("weft"),
            "test namespaces start with `weft`"
        );
        run_ok(Command::new("ip").args(["netns", "add", name]));
        let ns = Netns {
            name: name.to_string(),
            path: PathBuf::from(format!("/var/run/netns/{name}")),
        };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A command that will run inside this namespace (network namespace only).
    pub fn cmd(&self, program: &str) -> Command {
        cmd_in(&self.path, program)
    }

    /// Runs a program inside the namespace and returns its output, whatever the status.
    pub fn exec(&self, program: &str, args: &[&str]) -> Output {
        run(self.cmd(program).args(args))
    }

    /// Runs a program inside the namespace and fails the test if it fails.
    pub fn exec_ok(&self, program: &str, args: &[&str]) -> Output {
        run_ok(self.cmd(program).args(args))
    }

    /// `ip -n <ns> args...`, failing the test on error.
    pub fn ip(&self, args: &[&str]) -> Output {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        run_ok(Command::new("ip").args(&full))
    }

    /// Writes a sysctl inside this namespace.
    pub fn sysctl(&self, key: &str, value: &str) {
        self.exec_ok("sysctl", &["-qw", &format!("{key}={value}")]);
    }

    fn kill_processes(&self) {
        let out = run(Command::new("ip").args(["netns", "pids", &self.name]));
        for pid in out.stdout.split_whitespace() {
            if let Ok(pid) = pid.parse::<i32>() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.kill_processes();
        let _ = run(Command::new("ip").args(["netns", "del", &self.name]));
    }
}

/// A veth pair joining two namespaces, each end addressed, for underlays and baselines.
/// Deleting either namespace removes it; nothing to do on drop.
#[derive(Debug, Clone)]
pub struct VethPair {
    pub a: String,
    pub b: String,
}

impl VethPair {
    /// Creates `a` in `ns_a` and `b` in `ns_b`, brings both up and adds the addresses
    /// (CIDR notation; pass an empty slice for none).
    pub fn new(ns_a: &Netns, addrs_a: &[&str], ns_b: &Netns, addrs_b: &[&str]) -> VethPair {
        let a = unique_name("va");
        let b = unique_name("vb");
        run_ok(Command::new("ip").args([
            "link",
            "add",
            &a,
            "netns",
            ns_a.name(),
            "type",
            "veth",
            "peer",
            "name",
            &b,
            "netns",
            ns_b.name(),
        ]));
        for (ns, dev, addrs) in [(ns_a, &a, addrs_a), (ns_b, &b, addrs_b)] {
            for addr in addrs {
                if addr.contains(':') {
                    ns.ip(&["addr", "add", addr, "dev", dev, "nodad"]);
                } else {
                    ns.ip(&["addr", "add", addr, "dev", dev]);
                }
            }
            ns.ip(&["link", "set", dev, "up"]);
        }
        VethPair { a, b }
    }
}
