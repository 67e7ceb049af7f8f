//! A small, blocking CRI client over containerd's unix socket: the calls a kubelet makes
//! to run pods, in the order it makes them. It owns a private tokio runtime so tests stay
//! synchronous.

use crate::error::{io_context, unexpected, HarnessError, Result};
use crate::wait::{wait_for, Attempt};
use hyper_util::rt::TokioIo;
use k8s_cri::v1 as api;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint, Uri};

/// Upper bound for one CRI call, so a wedged runtime fails the test instead of hanging it.
const CALL_TIMEOUT: Duration = Duration::from_secs(90);

/// Which process streams a container's log line came from; see [`CriClient::container_logs`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerLogs {
    pub stdout: String,
    pub stderr: String,
}

/// What `ExecSync` returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecResult {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The pod-level facts a kubelet puts into RunPodSandbox. Annotations reach CNI plugins
/// as runtimeConfig `io.kubernetes.cri.pod-annotations` when the conflist plugin declares
/// that capability.
#[derive(Debug, Clone, Default)]
pub struct PodSpec {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub annotations: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
}

impl PodSpec {
    /// A pod with a unique `weft…` name and uid in namespace `default`.
    pub fn unique(tag: &str) -> PodSpec {
        let name = weft_testkit::unique_name(tag);
        PodSpec {
            uid: format!("uid-{name}"),
            name,
            namespace: "default".to_string(),
            ..PodSpec::default()
        }
    }

    pub fn annotation(mut self, key: &str, value: &str) -> PodSpec {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }
}

pub struct CriClient {
    runtime: tokio::runtime::Runtime,
    channel: Channel,
    log_root: PathBuf,
    /// CreateContainer must repeat the sandbox's config, as the kubelet does.
    sandbox_configs: Mutex<HashMap<String, api::PodSandboxConfig>>,
}

impl std::fmt::Debug for CriClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CriClient")
            .field("log_root", &self.log_root)
            .finish_non_exhaustive()
    }
}

impl CriClient {
    /// Connects to the CRI (runtime service v1) on `socket`. Container logs go under
    /// `log_root/<namespace>_<name>_<uid>/`, as the kubelet lays them out.
    pub fn connect(socket: &Path, log_root: &Path) -> Result<CriClient> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(io_context("start a tokio runtime for the CRI client"))?;
        let connect_error = |detail: String| HarnessError::CriConnect {
            socket: socket.to_path_buf(),
            detail,
        };
        // The URI is a placeholder: every connection goes to the unix socket.
        let endpoint = Endpoint::try_from("http://[::1]:1")
            .map_err(|e| connect_error(e.to_string()))?
            .connect_timeout(Duration::from_secs(10));
        let path = socket.to_path_buf();
        let channel = runtime
            .block_on(
                endpoint.connect_with_connector(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, std::io::Error>(TokioIo::new(stream))
                    }
                })),
            )
            .map_err(|e| connect_error(format!("{e:?}")))?;
        Ok(CriClient {
            runtime,
            channel,
            log_root: log_root.to_path_buf(),
            sandbox_configs: Mutex::new(HashMap::new()),
        })
    }

    fn client(&self) -> RuntimeServiceClient<Channel> {
        RuntimeServiceClient::new(self.channel.clone())
    }

    fn call<T, F>(&self, name: &'static str, fut: F) -> Result<T>
    where
        F: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let outcome = self
            .runtime
            .block_on(async { tokio::time::timeout(CALL_TIMEOUT, fut).await });
        match outcome {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(HarnessError::Cri {
                call: name,
                code: status.code(),
                message: status.message().to_string(),
            }),
            Err(_) => Err(HarnessError::Timeout {
                what: format!("CRI {name}"),
                waited: CALL_TIMEOUT,
                last_seen: None,
            }),
        }
    }

    /// The runtime's conditions (`RuntimeReady`, `NetworkReady`), from the CRI Status call.
    pub fn conditions(&self) -> Result<Vec<api::RuntimeCondition>> {
        let mut client = self.client();
        let response = self.call(
            "Status",
            client.status(api::StatusRequest { verbose: false }),
        )?;
        Ok(response.status.map(|s| s.conditions).unwrap_or_default())
    }

    /// Waits until the runtime reports `RuntimeReady` and, when `network` is set, also
    /// `NetworkReady` (a loadable conflist in the CNI conf dir).
    pub fn wait_ready(&self, network: bool, timeout: Duration) -> Result<()> {
        let wanted: &[&str] = if network {
            &["RuntimeReady", "NetworkReady"]
        } else {
            &["RuntimeReady"]
        };
        wait_for("CRI runtime ready", timeout, || match self.conditions() {
            Ok(conditions) => {
                let ready = wanted
                    .iter()
                    .all(|kind| conditions.iter().any(|c| c.r#type == *kind && c.status));
                if ready {
                    Attempt::Ready(())
                } else {
                    Attempt::NotYet(format!("{conditions:?}"))
                }
            }
            Err(e) => Attempt::NotYet(e.to_string()),
        })
    }

    /// RunPodSandbox for a pod on the pod network; returns the sandbox id. This is where
    /// the runtime calls the CNI plugin's ADD.
    pub fn run_pod_sandbox(
        &self,
        name: &str,
        namespace: &str,
        uid: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<String> {
        self.run_pod(&PodSpec {
            name: name.to_string(),
            namespace: namespace.to_string(),
            uid: uid.to_string(),
            annotations: annotations.clone(),
            labels: BTreeMap::new(),
        })
    }

    /// RunPodSandbox from a [`PodSpec`].
    pub fn run_pod(&self, pod: &PodSpec) -> Result<String> {
        let log_directory = self
            .log_root
            .join(format!("{}_{}_{}", pod.namespace, pod.name, pod.uid));
        std::fs::create_dir_all(&log_directory)
            .map_err(io_context(format!("create {}", log_directory.display())))?;
        let config = api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata {
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                namespace: pod.namespace.clone(),
                attempt: 0,
            }),
            hostname: pod.name.chars().take(63).collect(),
            log_directory: log_directory.to_string_lossy().into_owned(),
            labels: pod.labels.clone().into_iter().collect(),
            annotations: pod.annotations.clone().into_iter().collect(),
            linux: Some(api::LinuxPodSandboxConfig::default()),
            ..api::PodSandboxConfig::default()
        };
        self.run_pod_sandbox_with(config)
    }

    /// RunPodSandbox with a config built by the caller, for anything [`PodSpec`] lacks.
    pub fn run_pod_sandbox_with(&self, config: api::PodSandboxConfig) -> Result<String> {
        let mut client = self.client();
        let request = api::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: String::new(),
        };
        let id = self
            .call("RunPodSandbox", client.run_pod_sandbox(request))?
            .pod_sandbox_id;
        self.sandbox_configs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(id.clone(), config);
        Ok(id)
    }

    /// PodSandboxStatus, verbose (the `info` map carries the runtime spec).
    pub fn pod_status(&self, sandbox_id: &str) -> Result<api::PodSandboxStatusResponse> {
        let mut client = self.client();
        self.call(
            "PodSandboxStatus",
            client.pod_sandbox_status(api::PodSandboxStatusRequest {
                pod_sandbox_id: sandbox_id.to_string(),
                verbose: true,
            }),
        )
    }

    /// Every IP the runtime reports for the pod (what the plugin's ADD result said).
    pub fn pod_ips(&self, sandbox_id: &str) -> Result<Vec<IpAddr>> {
        let status = self.pod_status(sandbox_id)?;
        let network = status.status.and_then(|s| s.network).unwrap_or_default();
        std::iter::once(network.ip)
            .chain(network.additional_ips.into_iter().map(|p| p.ip))
            .filter(|ip| !ip.is_empty())
            .map(|ip| {
                ip.parse::<IpAddr>()
                    .map_err(|e| unexpected("pod IP from PodSandboxStatus", format!("{ip:?}: {e}")))
            })
            .collect()
    }

    /// The pod's primary IP.
    pub fn pod_ip(&self, sandbox_id: &str) -> Result<IpAddr> {
        self.pod_ips(sandbox_id)?.into_iter().next().ok_or_else(|| {
            unexpected(
                "PodSandboxStatus",
                format!("sandbox {sandbox_id} has no IP"),
            )
        })
    }

    /// The pod's network namespace path (`/var/run/netns/cni-…`), from the runtime spec in
    /// the verbose status.
    pub fn pod_netns_path(&self, sandbox_id: &str) -> Result<PathBuf> {
        let status = self.pod_status(sandbox_id)?;
        let info = status
            .info
            .get("info")
            .ok_or_else(|| unexpected("PodSandboxStatus", "verbose status has no `info`"))?;
        netns_path_from_info(info)
    }

    /// CreateContainer + StartContainer in a sandbox; returns the container id. The
    /// container's stdout/stderr go to a log file read by [`Self::container_logs`].
    pub fn create_and_start_container(
        &self,
        sandbox_id: &str,
        image: &str,
        command: &[impl AsRef<str>],
    ) -> Result<String> {
        let sandbox_config = self
            .sandbox_configs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(sandbox_id)
            .cloned()
            .ok_or_else(|| {
                unexpected(
                    "sandbox",
                    format!("{sandbox_id} was not started by this client"),
                )
            })?;
        let name = weft_testkit::unique_name("ct");
        let config = api::ContainerConfig {
            metadata: Some(api::ContainerMetadata {
                name: name.clone(),
                attempt: 0,
            }),
            image: Some(api::ImageSpec {
                image: image.to_string(),
                ..api::ImageSpec::default()
            }),
            command: command.iter().map(|s| s.as_ref().to_string()).collect(),
            log_path: format!("{name}.log"),
            linux: Some(api::LinuxContainerConfig::default()),
            ..api::ContainerConfig::default()
        };
        let mut client = self.client();
        let id = self
            .call(
                "CreateContainer",
                client.create_container(api::CreateContainerRequest {
                    pod_sandbox_id: sandbox_id.to_string(),
                    config: Some(config),
                    sandbox_config: Some(sandbox_config),
                }),
            )?
            .container_id;
        self.call(
            "StartContainer",
            client.start_container(api::StartContainerRequest {
                container_id: id.clone(),
            }),
        )?;
        Ok(id)
    }

    /// ContainerStatus (verbose).
    pub fn container_status(&self, container_id: &str) -> Result<api::ContainerStatus> {
        let mut client = self.client();
        self.call(
            "ContainerStatus",
            client.container_status(api::ContainerStatusRequest {
                container_id: container_id.to_string(),
                verbose: false,
            }),
        )?
        .status
        .ok_or_else(|| unexpected("ContainerStatus", format!("no status for {container_id}")))
    }

    /// Waits for the container to exit and returns its exit code.
    pub fn wait_container_exit(&self, container_id: &str, timeout: Duration) -> Result<i32> {
        wait_for(
            &format!("container {container_id} to exit"),
            timeout,
            || match self.container_status(container_id) {
                Ok(status) if status.state == api::ContainerState::ContainerExited as i32 => {
                    Attempt::Ready(status.exit_code)
                }
                Ok(status) => Attempt::NotYet(format!("state {}", status.state)),
                Err(e) => Attempt::NotYet(e.to_string()),
            },
        )
    }

    /// What the container wrote so far, decoded from the CRI log format.
    pub fn container_logs(&self, container_id: &str) -> Result<ContainerLogs> {
        let status = self.container_status(container_id)?;
        let text = std::fs::read_to_string(&status.log_path).map_err(io_context(format!(
            "read container log {}",
            status.log_path
        )))?;
        Ok(parse_cri_log(&text))
    }

    /// ExecSync: runs `cmd` inside a running container and waits for it (the runtime
    /// kills it after `timeout`).
    pub fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[impl AsRef<str>],
        timeout: Duration,
    ) -> Result<ExecResult> {
        let mut client = self.client();
        let response = self.call(
            "ExecSync",
            client.exec_sync(api::ExecSyncRequest {
                container_id: container_id.to_string(),
                cmd: cmd.iter().map(|s| s.as_ref().to_string()).collect(),
                timeout: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            }),
        )?;
        Ok(ExecResult {
            exit_code: response.exit_code,
            stdout: String::from_utf8_lossy(&response.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&response.stderr).into_owned(),
        })
    }

    /// StopPodSandbox: stops its containers and tears the pod network down (CNI DEL
    /// with the netns path).
    pub fn stop_pod_sandbox(&self, sandbox_id: &str) -> Result<()> {
        let mut client = self.client();
        self.call(
            "StopPodSandbox",
            client.stop_pod_sandbox(api::StopPodSandboxRequest {
                pod_sandbox_id: sandbox_id.to_string(),
            }),
        )
        .map(drop)
    }

    /// RemovePodSandbox: removes it and its containers (containerd sends a second CNI DEL,
    /// without netns).
    pub fn remove_pod_sandbox(&self, sandbox_id: &str) -> Result<()> {
        let mut client = self.client();
        self.call(
            "RemovePodSandbox",
            client.remove_pod_sandbox(api::RemovePodSandboxRequest {
                pod_sandbox_id: sandbox_id.to_string(),
            }),
        )?;
        self.sandbox_configs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(sandbox_id);
        Ok(())
    }

    /// Ids of every sandbox the runtime knows, in any state.
    pub fn list_pod_sandboxes(&self) -> Result<Vec<String>> {
        let mut client = self.client();
        let response = self.call(
            "ListPodSandbox",
            client.list_pod_sandbox(api::ListPodSandboxRequest { filter: None }),
        )?;
        Ok(response.items.into_iter().map(|s| s.id).collect())
    }

    /// Ids of every container the runtime knows, in any state.
    pub fn list_containers(&self) -> Result<Vec<String>> {
        let mut client = self.client();
        let response = self.call(
            "ListContainers",
            client.list_containers(api::ListContainersRequest { filter: None }),
        )?;
        Ok(response.containers.into_iter().map(|c| c.id).collect())
    }
}

/// Finds the network namespace path in containerd's verbose sandbox info (JSON with the
/// OCI runtime spec of the pause container).
fn netns_path_from_info(info: &str) -> Result<PathBuf> {
    let value: serde_json::Value =
        serde_json::from_str(info).map_err(|e| unexpected("sandbox info JSON", e.to_string()))?;
    let namespaces = value
        .pointer("/runtimeSpec/linux/namespaces")
        .and_then(|n| n.as_array())
        .ok_or_else(|| unexpected("sandbox info", "no runtimeSpec.linux.namespaces"))?;
    namespaces
        .iter()
        .find(|ns| ns.get("type").and_then(|t| t.as_str()) == Some("network"))
        .and_then(|ns| ns.get("path"))
        .and_then(|p| p.as_str())
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| {
            unexpected(
                "sandbox info",
                "no network namespace path in the runtime spec",
            )
        })
}

/// Decodes the CRI log format: `<timestamp> <stream> <P|F> <text>`, where `P` marks a
/// partial line continued by the next entry.
fn parse_cri_log(text: &str) -> ContainerLogs {
    let mut logs = ContainerLogs::default();
    for line in text.lines() {
        let mut fields = line.splitn(4, ' ');
        let (Some(_time), Some(stream), Some(tag)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let content = fields.next().unwrap_or("");
        let target = match stream {
            "stdout" => &mut logs.stdout,
            "stderr" => &mut logs.stderr,
            _ => continue,
        };
        target.push_str(content);
        if tag != "P" {
            target.push('\n');
        }
    }
    logs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_log_lines_are_decoded_per_stream() {
        let text = "2026-12-02T11:00:00.1Z stdout F hello\n\
                    2026-12-02T11:00:00.2Z stderr P par\n\
                    2026-12-02T11:00:00.3Z stderr F tial\n\
                    2026-12-02T11:00:00.4Z stdout F \n\
                    garbage\n";
        let logs = parse_cri_log(text);
        assert_eq!(logs.stdout, "hello\n\n");
        assert_eq!(logs.stderr, "partial\n");
    }

    #[test]
    fn netns_path_is_found_in_sandbox_info() {
        let info = r#"{"pid":1,"runtimeSpec":{"linux":{"namespaces":[
            {"type":"pid"},{"type":"network","path":"/var/run/netns/cni-1234"}]}}}"#;
        assert_eq!(
            netns_path_from_info(info).expect("path"),
            PathBuf::from("/var/run/netns/cni-1234")
        );
        assert!(netns_path_from_info(
            r#"{"runtimeSpec":{"linux":{"namespaces":[{"type":"network"}]}}}"#
        )
        .is_err());
        assert!(netns_path_from_info("not json").is_err());
    }
}
