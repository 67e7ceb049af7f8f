//! A private podman 4.3 using the CNI network backend, configured the way this machine
//! needs (research/cni-clients.md §2), with its own containers.conf, storage and network
//! config dir so nothing touches the host's podman state.

use crate::cni::{write_json, REFERENCE_PLUGIN_DIR};
use crate::command::{checked, command_in, output, Output};
use crate::error::{io_context, unexpected, Result};
use crate::fs::ScratchDir;
use crate::images::{Images, BUSYBOX_IMAGE};
use crate::procs::{pids_mentioning, terminate};
use serde_json::Value;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Drop removes every container it ran (the CNI plugin gets its DELs), ends any conmon
/// left, detaches storage mounts and removes the private directories.
///
/// The CNI bin dir must outlive it: DEL runs at drop.
#[derive(Debug)]
pub struct Podman {
    netns: Option<PathBuf>,
    dir: ScratchDir,
    containers: Mutex<Vec<String>>,
}

impl Podman {
    /// A podman running in the caller's network namespace. Plugins are looked up in
    /// `cni_bin_dir`, then /usr/lib/cni. The busybox image is imported.
    pub fn new(cni_bin_dir: &Path) -> Result<Podman> {
        Self::setup(None, cni_bin_dir)
    }

    /// A podman whose every command runs inside the network namespace at `netns`, so the
    /// CNI plugins it runs (and the host-side interfaces they make) live there.
    pub fn new_in_netns(netns: &Path, cni_bin_dir: &Path) -> Result<Podman> {
        Self::setup(Some(netns), cni_bin_dir)
    }

    fn setup(netns: Option<&Path>, cni_bin_dir: &Path) -> Result<Podman> {
        let images = Images::ensure()?;
        let dir = ScratchDir::new("pm")?;
        for sub in ["storage", "run", "tmp", "net.d"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(io_context(format!("create {sub}")))?;
        }
        let podman = Podman {
            netns: netns.map(Path::to_path_buf),
            dir,
            containers: Mutex::new(Vec::new()),
        };
        std::fs::write(
            podman.containers_conf(),
            podman.containers_conf_text(cni_bin_dir),
        )
        .map_err(io_context("write containers.conf"))?;
        std::fs::write(podman.storage_conf(), podman.storage_conf_text())
            .map_err(io_context("write storage.conf"))?;
        podman.import_busybox(&images)?;
        Ok(podman)
    }

    /// `podman import` of the busybox rootfs. Copying an image makes podman 4.3 write a
    /// blob-info cache to the fixed path /var/lib/containers/cache (its storage flags do
    /// not move it), so the import runs in a private mount namespace with a throw-away
    /// tmpfs over /var/lib: the host's podman state is never touched.
    fn import_busybox(&self, images: &Images) -> Result<()> {
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg(r#"mount -t tmpfs weft-scratch /var/lib && exec "$@""#)
            .arg("sh");
        self.podman_args(&mut cmd);
        cmd.args(["import", "--change", r#"CMD ["/bin/sh"]"#])
            .arg(images.busybox_rootfs_tar())
            .arg(BUSYBOX_IMAGE);
        checked(&mut cmd).map(drop)
    }

    fn containers_conf(&self) -> PathBuf {
        self.dir.join("containers.conf")
    }

    fn storage_conf(&self) -> PathBuf {
        self.dir.join("storage.conf")
    }

    /// The private directory (config, storage, run and tmp dirs) of this instance.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Where podman's CNI backend reads network configs from.
    pub fn network_config_dir(&self) -> PathBuf {
        self.dir.join("net.d")
    }

    fn containers_conf_text(&self, cni_bin_dir: &Path) -> String {
        let s = |p: &Path| toml_string(&p.to_string_lossy());
        // Root lacks CAP_SYS_RESOURCE here, so podman's default limits (nofile 1048576)
        // cannot be set; lowering to within the current hard limits always works.
        let nofile = hard_limit("Max open files").unwrap_or(20_000).min(20_000);
        let nproc = hard_limit("Max processes").unwrap_or(32_768).min(32_768);
        format!(
            r#"[containers]
default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
# crun 1.8 refuses this machine's cgroup v1/v2 hybrid layout; runc works.
runtime = "runc"
tmp_dir = {tmp}
static_dir = {static_dir}
volume_path = {volumes}

[network]
network_backend = "cni"
cni_plugin_dirs = [{bin}, {reference}]
network_config_dir = {net_d}
"#,
            tmp = s(&self.dir.join("tmp")),
            static_dir = s(&self.dir.join("storage/libpod")),
            volumes = s(&self.dir.join("storage/volumes")),
            bin = s(cni_bin_dir),
            reference = toml_string(REFERENCE_PLUGIN_DIR),
            net_d = s(&self.network_config_dir()),
        )
    }

    fn storage_conf_text(&self) -> String {
        format!(
            "[storage]\ndriver = \"overlay\"\ngraphroot = {}\nrunroot = {}\n",
            toml_string(&self.dir.join("storage").to_string_lossy()),
            toml_string(&self.dir.join("run").to_string_lossy()),
        )
    }

    fn command(&self) -> Command {
        let mut cmd = command_in(self.netns.as_deref(), "podman");
        self.podman_args(&mut cmd);
        cmd
    }

    /// The environment and global flags that make podman private, appended to `cmd`
    /// (which runs `podman` or a wrapper that execs it).
    fn podman_args(&self, cmd: &mut Command) {
        if cmd.get_program() != "podman" {
            cmd.arg("podman");
        }
        cmd.env("CONTAINERS_CONF", self.containers_conf())
            .env("CONTAINERS_STORAGE_CONF", self.storage_conf())
            .arg("--root")
            .arg(self.dir.join("storage"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .arg("--tmpdir")
            .arg(self.dir.join("tmp"));
    }

    /// `podman <args>` with the private configuration, failing on a non-zero exit.
    pub fn podman(&self, args: &[&str]) -> Result<Output> {
        checked(self.command().args(args))
    }

    /// `podman <args>` whatever its exit status.
    pub fn podman_output(&self, args: &[&str]) -> Result<Output> {
        output(self.command().args(args))
    }

    /// Writes `<network_config_dir>/<name>.conflist`; podman sees it at once.
    pub fn add_network(&self, conflist: &Value) -> Result<PathBuf> {
        let name = conflist
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| unexpected("conflist", "no `name`"))?;
        let path = self.network_config_dir().join(format!("{name}.conflist"));
        write_json(&path, conflist)?;
        Ok(path)
    }

    /// `podman run -d --network <network>` of the busybox image running `command`;
    /// returns the container's (unique) name. This is where podman calls CNI ADD.
    pub fn run(&self, network: &str, command: &[impl AsRef<str>]) -> Result<String> {
        self.run_with(network, &[] as &[&str], command)
    }

    /// As [`Self::run`], with extra `podman run` options (`--ip`, `--mac-address`, …).
    pub fn run_with(
        &self,
        network: &str,
        options: &[impl AsRef<str>],
        command: &[impl AsRef<str>],
    ) -> Result<String> {
        let name = weft_testkit::unique_name("pc");
        // Recorded first: a failed run can still leave a created container behind.
        self.containers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(name.clone());
        let mut args = vec!["run", "-d", "--name", &name, "--network", network];
        args.extend(options.iter().map(AsRef::as_ref));
        args.push(BUSYBOX_IMAGE);
        args.extend(command.iter().map(AsRef::as_ref));
        self.podman(&args)?;
        Ok(name)
    }

    /// Every IP of the container on every network, from `podman inspect`.
    pub fn container_ips(&self, name: &str) -> Result<Vec<IpAddr>> {
        let out = self.podman(&[
            "inspect",
            "--format",
            "{{json .NetworkSettings.Networks}}",
            name,
        ])?;
        parse_inspect_networks(&out.stdout)
    }

    /// The container's first IP.
    pub fn container_ip(&self, name: &str) -> Result<IpAddr> {
        self.container_ips(name)?
            .into_iter()
            .next()
            .ok_or_else(|| unexpected("podman inspect", format!("container {name} has no IP")))
    }

    /// The container's network namespace path (`/run/netns/netns-…`).
    pub fn netns_path(&self, name: &str) -> Result<PathBuf> {
        let out = self.podman(&[
            "inspect",
            "--format",
            "{{.NetworkSettings.SandboxKey}}",
            name,
        ])?;
        let path = out.stdout.trim();
        if path.is_empty() {
            return Err(unexpected(
                "podman inspect",
                format!("container {name} has no network namespace"),
            ));
        }
        Ok(PathBuf::from(path))
    }

    /// `podman exec <name> <cmd>`, whatever its exit status.
    pub fn exec(&self, name: &str, cmd: &[impl AsRef<str>]) -> Result<Output> {
        let mut args = vec!["exec", name];
        args.extend(cmd.iter().map(AsRef::as_ref));
        self.podman_output(&args)
    }

    /// `podman rm -f -t 0`: stops the container and calls CNI DEL.
    pub fn rm(&self, name: &str) -> Result<()> {
        self.podman(&["rm", "-f", "-t", "0", name])?;
        self.containers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .retain(|c| c != name);
        Ok(())
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        match self.podman_output(&["rm", "-a", "-f", "-t", "0"]) {
            Ok(out) if !out.success() => eprintln!("warning: podman rm -a failed: {}", out.stderr),
            Err(e) => eprintln!("warning: podman rm -a: {e}"),
            Ok(_) => {}
        }
        // conmon and anything else podman left carry our directory in their arguments.
        terminate(&pids_mentioning(&self.dir.path().to_string_lossy()));
        // `dir` (a ScratchDir) then detaches the storage mounts and removes the tree.
    }
}

/// Reads `{"net": {"IPAddress": "...", "GlobalIPv6Address": "..."}, ...}`.
fn parse_inspect_networks(json: &str) -> Result<Vec<IpAddr>> {
    let value: Value = serde_json::from_str(json.trim())
        .map_err(|e| unexpected("podman inspect output", format!("{e}: {json}")))?;
    let networks = value
        .as_object()
        .ok_or_else(|| unexpected("podman inspect output", format!("not an object: {json}")))?;
    let mut ips = Vec::new();
    for settings in networks.values() {
        for key in ["IPAddress", "GlobalIPv6Address"] {
            if let Some(text) = settings
                .get(key)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                let ip = text
                    .parse::<IpAddr>()
                    .map_err(|e| unexpected("IP in podman inspect", format!("{text:?}: {e}")))?;
                ips.push(ip);
            }
        }
    }
    Ok(ips)
}

/// The hard limit named `label` in /proc/self/limits; `None` when unlimited or unreadable.
fn hard_limit(label: &str) -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with(label))?;
    let mut fields = line.get(label.len()..)?.split_whitespace();
    let _soft = fields.next()?;
    fields.next()?.parse().ok()
}

fn toml_string(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inspect_networks_are_parsed() {
        let json = r#"{"weftnet":{"IPAddress":"10.1.2.3","GlobalIPv6Address":"fd00::3","IPPrefixLen":24}}"#;
        let ips = parse_inspect_networks(json).expect("parse");
        assert_eq!(
            ips,
            vec![
                "10.1.2.3".parse::<IpAddr>().expect("ip"),
                "fd00::3".parse().expect("ip")
            ]
        );
        assert!(parse_inspect_networks(r#"{"n":{"IPAddress":""}}"#)
            .expect("parse")
            .is_empty());
        assert!(parse_inspect_networks("null").is_err());
        assert!(parse_inspect_networks(r#"{"n":{"IPAddress":"nope"}}"#).is_err());
    }

    #[test]
    fn hard_limits_are_read() {
        assert!(hard_limit("Max open files").is_some());
        assert_eq!(hard_limit("No such limit"), None);
    }
}
