//! A private containerd 1.6 with its CRI plugin, configured the way this machine needs
//! (see research/cni-clients.md §3), that never touches the system's /run/containerd
//! state or /var/lib/containerd.

use crate::command::{checked, command_in, Output};
use crate::cri::CriClient;
use crate::error::{io_context, HarnessError, Result};
use crate::fs::ScratchDir;
use crate::images::{Images, PAUSE_IMAGE};
use crate::procs::{pids_in_cgroup_mentioning, pids_mentioning, terminate};
use crate::wait::{wait_for, Attempt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// A running containerd. Drop stops and removes every pod sandbox through the CRI (so
/// the CNI plugin gets its DELs), stops containerd, ends any shim or container process it
/// left, detaches its mounts and removes its directories.
///
/// The CNI conf and bin dirs must outlive it: containerd's DEL uses the conflist in force
/// at DEL time.
pub struct Containerd {
    // Field order is drop order after `Drop::drop` ran: client, process, then the dir.
    cri: CriClient,
    process: Child,
    socket: PathBuf,
    log: PathBuf,
    dir: ScratchDir,
}

impl std::fmt::Debug for Containerd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Containerd")
            .field("socket", &self.socket)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl Containerd {
    /// Starts containerd in the caller's network namespace, with the CRI reading CNI
    /// configs from `cni_conf_dir` and plugins from `cni_bin_dir`.
    pub fn start(cni_bin_dir: &Path, cni_conf_dir: &Path) -> Result<Containerd> {
        Self::launch(None, cni_bin_dir, cni_conf_dir)
    }

    /// Starts containerd inside the network namespace at `netns`, so that the CNI plugins
    /// it runs (and the host-side interfaces they make) live there: a simulated node.
    pub fn start_in_netns(
        netns: &Path,
        cni_bin_dir: &Path,
        cni_conf_dir: &Path,
    ) -> Result<Containerd> {
        Self::launch(Some(netns), cni_bin_dir, cni_conf_dir)
    }

    fn launch(netns: Option<&Path>, cni_bin_dir: &Path, cni_conf_dir: &Path) -> Result<Containerd> {
        let images = Images::ensure()?;
        let dir = ScratchDir::new("cd")?;
        for sub in ["root", "state", "opt", "pods"] {
            std::fs::create_dir_all(dir.join(sub))
                .map_err(io_context(format!("create {sub} dir")))?;
        }
        let socket = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        std::fs::write(
            &config,
            config_toml(dir.path(), &socket, cni_bin_dir, cni_conf_dir),
        )
        .map_err(io_context("write containerd config"))?;
        let log = dir.join("containerd.log");
        let log_file = std::fs::File::create(&log).map_err(io_context("create containerd log"))?;
        let log_err = log_file
            .try_clone()
            .map_err(io_context("dup containerd log"))?;
        let mut process = command_in(netns, "containerd")
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .map_err(io_context("spawn containerd (apt-get install containerd)"))?;

        let socket_up = wait_for("containerd socket", STARTUP_TIMEOUT, || {
            if let Ok(Some(status)) = process.try_wait() {
                return Attempt::Ready(Err(status));
            }
            if socket.exists() {
                Attempt::Ready(Ok(()))
            } else {
                Attempt::NotYet("no socket yet".into())
            }
        });
        let failure = match socket_up {
            Ok(Ok(())) => None,
            Ok(Err(status)) => Some(HarnessError::Unexpected {
                what: "containerd exit".into(),
                detail: format!("{status}; log:\n{}", tail(&log)),
            }),
            Err(e) => Some(e),
        };
        let cri = match failure {
            None => CriClient::connect(&socket, &dir.join("pods")),
            Some(e) => Err(e),
        };
        let cri = match cri {
            Ok(cri) => cri,
            Err(e) => {
                let _ = process.kill();
                let _ = process.wait();
                return Err(e);
            }
        };
        let containerd = Containerd {
            cri,
            process,
            socket,
            log,
            dir,
        };
        containerd
            .cri
            .wait_ready(false, STARTUP_TIMEOUT)
            .map_err(|e| containerd.with_log(e))?;
        for (tarball, base_name) in images.oci_imports() {
            containerd
                .ctr(&[
                    "-n",
                    "k8s.io",
                    "image",
                    "import",
                    "--base-name",
                    base_name,
                    &tarball.to_string_lossy(),
                ])
                .map_err(|e| containerd.with_log(e))?;
        }
        Ok(containerd)
    }

    /// The CRI client talking to this containerd.
    pub fn cri(&self) -> &CriClient {
        &self.cri
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The private directory (root, state, logs) of this instance.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `ctr -a <socket> args…`, failing on a non-zero exit.
    pub fn ctr(&self, args: &[&str]) -> Result<Output> {
        checked(Command::new("ctr").arg("-a").arg(&self.socket).args(args))
    }

    /// The last lines of containerd's log, for failure messages.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }

    /// Adds containerd's log tail to an error, since most CRI failures are only
    /// explained there.
    pub fn with_log(&self, error: HarnessError) -> HarnessError {
        HarnessError::Unexpected {
            what: "containerd failure".into(),
            detail: format!(
                "{error}\n--- containerd log (tail) ---\n{}",
                self.log_tail()
            ),
        }
    }

    /// Stops and removes every sandbox, as a kubelet would when draining. Returns the
    /// first error but tries them all.
    pub fn remove_all_pods(&self) -> Result<()> {
        let mut first_error = None;
        for id in self.cri.list_pod_sandboxes()? {
            let outcome = self
                .cri
                .stop_pod_sandbox(&id)
                .and_then(|()| self.cri.remove_pod_sandbox(&id));
            if let Err(e) = outcome {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn shutdown(&mut self) {
        // What the runtime knows, so leftovers can be found even if removal fails.
        let sandboxes = self.cri.list_pod_sandboxes().unwrap_or_default();
        let containers = self.cri.list_containers().unwrap_or_default();
        let netns_paths: Vec<PathBuf> = sandboxes
            .iter()
            .filter_map(|id| self.cri.pod_netns_path(id).ok())
            .collect();
        if let Err(e) = self.remove_all_pods() {
            eprintln!(
                "warning: removing pods at containerd shutdown: {e}\n{}",
                self.log_tail()
            );
        }

        terminate(&[nix::unistd::Pid::from_raw(self.process.id() as i32)]);
        let _ = self.process.wait();

        // Shims outlive containerd by design; ours carry our socket path in `-address`.
        let socket = self.socket.to_string_lossy().into_owned();
        terminate(&pids_mentioning(&socket));
        for id in sandboxes.iter().chain(&containers) {
            terminate(&pids_in_cgroup_mentioning(id));
        }
        for path in netns_paths.iter().filter(|p| p.exists()) {
            eprintln!(
                "warning: pod netns {} left behind; removing it",
                path.display()
            );
            let _ = nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH);
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.shutdown();
        // `dir` (a ScratchDir) then detaches leftover mounts and removes the tree.
    }
}

fn config_toml(dir: &Path, socket: &Path, cni_bin_dir: &Path, cni_conf_dir: &Path) -> String {
    let p = |path: &Path| toml_string(&path.to_string_lossy());
    format!(
        r#"version = 2
root = {root}
state = {state}
# Snapshotters we do not use only slow start-up down and log noise.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = {socket}

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = {pause}
    # Root lacks CAP_SYS_RESOURCE here, so the sandbox's default oom_score_adj (-998)
    # cannot be set and runc fails; this clamps it to ours.
    restrict_oom_score_adj = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = {bin_dir}
      conf_dir = {conf_dir}
      max_conf_num = 1
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        # runc's state would otherwise go to the system's /run/containerd/runc.
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          Root = {runc_root}
  [plugins."io.containerd.internal.v1.opt"]
    path = {opt}
"#,
        root = p(&dir.join("root")),
        state = p(&dir.join("state")),
        socket = p(socket),
        pause = toml_string(PAUSE_IMAGE),
        bin_dir = p(cni_bin_dir),
        conf_dir = p(cni_conf_dir),
        opt = p(&dir.join("opt")),
        runc_root = p(&dir.join("runc")),
    )
}

/// A TOML basic string (JSON string escaping is a valid subset).
fn toml_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut last: Vec<&str> = text.lines().rev().take(40).collect();
    last.reverse();
    last.join("\n")
}
