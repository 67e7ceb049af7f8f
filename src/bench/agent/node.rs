//! The benchmark's node: a network namespace whose uplink carries node0's address, a pin
//! root and a state directory of its own, and the agent process running in it. Everything
//! is removed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use weft_netlink::{AddrFlags, Handle, VethSpec};

use super::synthetic;
use crate::lab::{self, netns};

/// Where the agent serves /status, /readyz and /metrics inside the node.
pub const LISTEN: &str = "127.0.0.1:9962";

pub struct BenchNode {
    pub name: String,
    pub netns: PathBuf,
    pub dir: PathBuf,
    pub pin_root: PathBuf,
}

impl BenchNode {
    pub fn create() -> anyhow::Result<BenchNode> {
        let name = format!("weftbenchag{}", std::process::id());
        let path = netns::create(&name)?;
        let node = BenchNode {
            dir: PathBuf::from(format!("/run/weft/{name}")),
            pin_root: PathBuf::from(format!("/sys/fs/bpf/{name}")),
            netns: path.clone(),
            name,
        };
        std::fs::create_dir_all(&node.dir)?;
        // node0's underlay address on one end of a veth pair inside the namespace: the
        // agent finds its uplink by that address, and peers' overlay entries need no more.
        let address: ipnet::IpNet = format!("{}/32", synthetic::node_ip(0)).parse()?;
        netns::in_netns(&path, move || {
            let mut h = Handle::new()?;
            let index = h.create_veth(&VethSpec {
                name: "weftup0",
                up: true,
                peer_name: "weftup1",
                ..Default::default()
            })?;
            h.add_address(index, address, AddrFlags::default())?;
            if let Some(peer) = h.link_by_name("weftup1")? {
                h.set_up(peer.index)?;
            }
            Ok(())
        })?;
        Ok(node)
    }

    /// `weft agent --source kubernetes` in the node, with the benchmark's settings.
    pub fn start_agent(&self, kubeconfig: &Path) -> anyhow::Result<Agent> {
        let weft = std::env::current_exe()?;
        let log = self.dir.join("agent.log");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let mut cmd = Command::new(weft);
        cmd.arg("agent")
            .args(["--source", "kubernetes", "--kubeconfig"])
            .arg(kubeconfig)
            .args(["--node-name", &synthetic::node_name(0)])
            .args(["--cluster-cidr", synthetic::POD_CIDR])
            .args(["--service-cidr", synthetic::SERVICE_CIDR])
            .arg("--pin-root")
            .arg(&self.pin_root)
            .arg("--cni-conf-dir")
            .arg(self.dir.join("cni"))
            .arg("--ipam-data-dir")
            .arg(self.dir.join("ipam"))
            .args(["--listen", LISTEN])
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        crate::netns_exec::enter_netns_before_exec(&mut cmd, &self.netns);
        let child = cmd.spawn().context("start the agent")?;
        Ok(Agent {
            child,
            log,
            started: Instant::now(),
        })
    }

    /// GET `path` from the agent, inside the node.
    pub fn get(&self, path: &'static str) -> anyhow::Result<(u16, String)> {
        netns::in_netns(&self.netns, move || lab::http_get(LISTEN, path))
    }
}

impl Drop for BenchNode {
    fn drop(&mut self) {
        for pid in netns::pids_in(&self.netns) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = netns::delete(&self.name);
        let _ = std::fs::remove_dir_all(&self.pin_root);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub struct Agent {
    child: Child,
    log: PathBuf,
    pub started: Instant,
}

impl Agent {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn ensure_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!(
                "the agent exited ({status}); its log:\n{}",
                lab::log_tail(&self.log)
            );
        }
        Ok(())
    }

    /// Resident and peak resident memory, in MiB.
    pub fn rss_mib(&self) -> anyhow::Result<(f64, f64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        let field = |name: &str| -> anyhow::Result<f64> {
            let kib: f64 = status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .context("no such field")?
                .parse()?;
            Ok(kib / 1024.0)
        };
        Ok((field("VmRSS:")?, field("VmHWM:")?))
    }

    pub fn stop(mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What /status says of one store: objects, generation, synced.
pub fn store_line(status: &str, kind: &str) -> Option<(u64, u64, bool)> {
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("store {kind}:")))?;
    let number = |after: &str| -> Option<u64> {
        line.split(after)
            .nth(1)?
            .split([' ', ','])
            .find(|w| !w.is_empty())?
            .parse()
            .ok()
    };
    let objects: u64 = line.split(": ").nth(1)?.split(' ').next()?.parse().ok()?;
    Some((
        objects,
        number("generation ")?,
        !line.contains("not synced"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_status_lines() {
        let status = "reconciler x: ok\nstore Pod: 50000 objects, 2 refused, generation 17\nstore Node: 3 objects, 0 refused, generation 0, not synced yet\n";
        assert_eq!(store_line(status, "Pod"), Some((50000, 17, true)));
        assert_eq!(store_line(status, "Node"), Some((3, 0, false)));
        assert_eq!(store_line(status, "Service"), None);
    }
}
