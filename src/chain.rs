//! Runs a network configuration list the way a container runtime does (libcni's order and
//! argument passing), for `weft bench`, `weft lab` and the integration tests.
//!
//! Each plugin binary is exec'd with the `CNI_*` environment and its request config on
//! stdin: the plugin object with `name` and `cniVersion` injected, `runtimeConfig` filtered
//! to the capabilities the plugin declares, and `prevResult` from the previous plugin (ADD)
//! or from the cached ADD result (DEL, CHECK). DEL runs the list in reverse.
//! Plugins can be run inside another network namespace (a simulated node) by entering only
//! its network namespace, never its mount namespace, so BPF pins stay on the host's bpffs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};

use serde_json::{json, Map, Value};
use weft_cni::{CniError, CniResult, Command, NetConfList};

/// Why running a chain failed.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("plugin {plugin:?} not found in {dirs:?}")]
    PluginNotFound { plugin: String, dirs: Vec<PathBuf> },
    #[error("could not run plugin {plugin}: {source}")]
    Exec {
        plugin: String,
        #[source]
        source: std::io::Error,
    },
    #[error("plugin {plugin} {command} failed (exit {status}): code {} {}{}", .error.code, .error.msg,
        if .error.details.is_empty() { String::new() } else { format!(" ({})", .error.details) })]
    Plugin {
        plugin: String,
        command: &'static str,
        status: i32,
        error: CniError,
    },
    #[error("plugin {plugin} {command} printed output that is not a CNI reply: {output:?} (stderr: {stderr})")]
    BadOutput {
        plugin: String,
        command: &'static str,
        output: String,
        stderr: String,
    },
}

/// One attachment: the container, its namespace and interface, and the runtime arguments.
#[derive(Debug, Clone, Default)]
pub struct Attachment {
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    /// `CNI_ARGS` as `K=V;...`.
    pub args: String,
    /// Capability arguments offered to plugins that declare the capability.
    pub runtime_config: Map<String, Value>,
}

/// A conflist plus where its plugins live and where to run them.
#[derive(Debug, Clone)]
pub struct Chain {
    pub list: NetConfList,
    pub bin_dirs: Vec<PathBuf>,
    /// Run plugins inside this network namespace (a lab node); `None` for the caller's.
    pub exec_netns: Option<PathBuf>,
}

impl Chain {
    pub fn new(list: NetConfList, bin_dirs: Vec<PathBuf>) -> Chain {
        Chain {
            list,
            bin_dirs,
            exec_netns: None,
        }
    }

    pub fn in_netns(mut self, netns: impl Into<PathBuf>) -> Chain {
        self.exec_netns = Some(netns.into());
        self
    }

    /// ADD through every plugin in order; returns the last plugin's result.
    pub fn add(&self, att: &Attachment) -> Result<CniResult, ChainError> {
        let mut prev: Option<Value> = None;
        for plugin in self.list.plugin_requests() {
            let request = self.request(plugin, att, prev.as_ref());
            let out = self.exec(Command::Add, &request, att)?;
            prev = Some(out);
        }
        let value = prev.unwrap_or_else(|| json!({"cniVersion": self.list.version.to_string()}));
        CniResult::from_value(&value, Some(self.list.version)).map_err(|error| ChainError::Plugin {
            plugin: "chain".into(),
            command: "ADD",
            status: 0,
            error,
        })
    }

    /// DEL through every plugin in reverse order, with the ADD result as prevResult when known.
    /// Every plugin runs even when an earlier one fails; the first error is returned.
    pub fn del(&self, att: &Attachment, cached: Option<&CniResult>) -> Result<(), ChainError> {
        let prev = cached.map(|r| r.to_value(self.list.version));
        let mut first_error = None;
        for plugin in self.list.plugin_requests().into_iter().rev() {
            let request = self.request(plugin, att, prev.as_ref());
            if let Err(e) = self.exec(Command::Del, &request, att) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// CHECK through every plugin in order with the cached ADD result as prevResult.
    pub fn check(&self, att: &Attachment, cached: &CniResult) -> Result<(), ChainError> {
        let prev = cached.to_value(self.list.version);
        for plugin in self.list.plugin_requests() {
            let request = self.request(plugin, att, Some(&prev));
            self.exec(Command::Check, &request, att)?;
        }
        Ok(())
    }

    /// STATUS of every plugin in order.
    pub fn status(&self) -> Result<(), ChainError> {
        for plugin in self.list.plugin_requests() {
            self.exec(
                Command::Status,
                &Value::Object(plugin),
                &Attachment::default(),
            )?;
        }
        Ok(())
    }

    /// GC of every plugin with the attachments that are still valid.
    pub fn gc(&self, valid: &[(String, String)]) -> Result<(), ChainError> {
        let list: Vec<Value> = valid
            .iter()
            .map(|(id, ifname)| json!({"containerID": id, "ifname": ifname}))
            .collect();
        for mut plugin in self.list.plugin_requests() {
            plugin.insert(
                "cni.dev/valid-attachments".into(),
                Value::Array(list.clone()),
            );
            self.exec(Command::Gc, &Value::Object(plugin), &Attachment::default())?;
        }
        Ok(())
    }

    fn request(
        &self,
        mut plugin: Map<String, Value>,
        att: &Attachment,
        prev: Option<&Value>,
    ) -> Value {
        let declared: Vec<String> = plugin
            .get("capabilities")
            .and_then(Value::as_object)
            .map(|caps| {
                caps.iter()
                    .filter(|(_, on)| on.as_bool() == Some(true))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let runtime_config: Map<String, Value> = att
            .runtime_config
            .iter()
            .filter(|(k, _)| declared.iter().any(|d| d == *k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !runtime_config.is_empty() {
            plugin.insert("runtimeConfig".into(), Value::Object(runtime_config));
        }
        if let Some(prev) = prev {
            plugin.insert("prevResult".into(), prev.clone());
        }
        Value::Object(plugin)
    }

    fn find(&self, plugin: &str) -> Result<PathBuf, ChainError> {
        self.bin_dirs
            .iter()
            .map(|d| d.join(plugin))
            .find(|p| p.is_file())
            .ok_or_else(|| ChainError::PluginNotFound {
                plugin: plugin.into(),
                dirs: self.bin_dirs.clone(),
            })
    }

    fn exec(
        &self,
        command: Command,
        request: &Value,
        att: &Attachment,
    ) -> Result<Value, ChainError> {
        let plugin = request
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let path = self.find(&plugin)?;
        let output = run_plugin(
            &path,
            command,
            request,
            att,
            &self.bin_dirs,
            self.exec_netns.as_deref(),
        )
        .map_err(|source| ChainError::Exec {
            plugin: plugin.clone(),
            source,
        })?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let parsed: Option<Value> = if stdout.trim().is_empty() {
            None
        } else {
            serde_json::from_str(&stdout).ok()
        };
        if !output.status.success() {
            let error = parsed
                .as_ref()
                .and_then(|v| {
                    Some(
                        CniError::new(v.get("code")?.as_u64()? as u32, v.get("msg")?.as_str()?)
                            .with_details(
                                v.get("details").and_then(Value::as_str).unwrap_or_default(),
                            ),
                    )
                })
                .unwrap_or_else(|| {
                    CniError::internal(format!(
                        "no error object; stdout {stdout:?}, stderr {:?}",
                        String::from_utf8_lossy(&output.stderr)
                    ))
                });
            return Err(ChainError::Plugin {
                plugin,
                command: command.as_str(),
                status: output.status.code().unwrap_or(-1),
                error,
            });
        }
        match (command, parsed) {
            (Command::Add, Some(v)) => Ok(v),
            (Command::Add, None) => Err(ChainError::BadOutput {
                plugin,
                command: command.as_str(),
                output: stdout,
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            }),
            (_, v) => Ok(v.unwrap_or(Value::Null)),
        }
    }
}

/// Execs one plugin binary with the CNI environment and `request` on stdin.
pub fn run_plugin(
    path: &Path,
    command: Command,
    request: &Value,
    att: &Attachment,
    cni_path: &[PathBuf],
    exec_netns: Option<&Path>,
) -> std::io::Result<std::process::Output> {
    let mut proc = Process::new(path);
    proc.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CNI_COMMAND", command.as_str())
        .env(
            "CNI_PATH",
            std::env::join_paths(cni_path).unwrap_or_default(),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if matches!(command, Command::Add | Command::Del | Command::Check) {
        proc.env("CNI_CONTAINERID", &att.container_id)
            .env("CNI_NETNS", &att.netns)
            .env("CNI_IFNAME", &att.ifname)
            .env("CNI_ARGS", &att.args);
    }
    if let Some(ns) = exec_netns {
        crate::netns_exec::enter_netns_before_exec(&mut proc, ns);
    }
    let mut child = proc.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(request.to_string().as_bytes())?;
    }
    child.wait_with_output()
}
