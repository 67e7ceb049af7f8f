//! What a fenced pod's containers may hold, read from its spec and checked before the fence
//! is called enforced.
//!
//! The nftables fence confines sockets by their owner's UID. Two kinds of process walk
//! around it, so the guard refuses pods that could run either (fail closed):
//!
//! - **a process that holds CAP_NET_RAW or CAP_NET_ADMIN.** AF_PACKET frames never reach
//!   netfilter's output hook (with `PACKET_QDISC_BYPASS` they skip tc as well), raw IP
//!   sockets can forge packets that conntrack files under another UID's established flow,
//!   and CAP_NET_ADMIN deletes the fence. containerd's and Docker's default capability
//!   set includes NET_RAW, so a container keeps it unless it drops it. A node with a BPF
//!   LSM that the guard loads could refuse these in the kernel; this build has none (the
//!   test kernel refuses BPF LSM programs), so every node is in this fail-closed mode.
//! - **a process that can become the proxy UID.** Root (with the default CAP_SETUID), a
//!   container that adds SETUID/SETGID, one that may gain privileges through set-user-ID
//!   executables or file capabilities (`allowPrivilegeEscalation` not false), or one whose
//!   UID is not known to differ from the proxy's (no `runAsUser`: the image decides).
//!
//! Capability names are compared the way containerd applies them: case-insensitively,
//! with `CAP_` added. A `drop` entry written `CAP_NET_RAW` becomes `CAP_CAP_NET_RAW` there
//! and drops nothing, so it does not count as dropping NET_RAW; an `add` entry counts
//! with or without the prefix (fail closed both ways).

use serde_json::Value;

use crate::annotations::{Resolved, Source};
use crate::config::{GuardConfig, GUARANTEE_ADMISSION_POLICY};
use crate::error::GuardError;

/// Capabilities that, added to any container, let its processes leave or remove the fence:
/// raw frames, the fence's own table, other namespaces and programs, the proxy's memory.
const UNFENCEABLE_ADDS: [&str; 7] = [
    "ALL",
    "NET_RAW",
    "NET_ADMIN",
    "SYS_ADMIN",
    "BPF",
    "SYS_MODULE",
    "SYS_PTRACE",
];
/// Capabilities that, added to a container other than the proxy's, let it become the proxy.
const IDENTITY_ADDS: [&str; 2] = ["SETUID", "SETGID"];

/// Why nothing in the kernel stops a process in the pod from going around the fence on
/// this node, which is why its spec must guarantee that none can.
pub const WHY: &str = "no BPF LSM confines the pod's processes on this node, so one holding CAP_NET_RAW sends AF_PACKET frames past the fence and one that can become the proxy UID is not fenced at all";

/// Whether an opted-in pod may be fenced: its spec (read from the API server) must not let
/// any container around the fence, and a pod whose spec the plugin did not read (annotations
/// from runtimeConfig) needs the netconf's `podSecurityGuarantee`.
pub fn admit(resolved: &Resolved, proxy_uid: u32, config: &GuardConfig) -> Result<(), GuardError> {
    match (&resolved.source, &resolved.security) {
        (Source::ApiServer, Some(Ok(security))) => {
            let violations = security.violations(proxy_uid);
            if violations.is_empty() {
                return Ok(());
            }
            Err(GuardError::PodSecurity(format!(
                "pod refused: {WHY}: {}",
                violations.join("; ")
            )))
        }
        (Source::ApiServer, Some(Err(why))) => Err(GuardError::PodSecurity(format!(
            "pod refused: its spec cannot be read ({why}), so whether its containers can go around the fence is unknown"
        ))),
        _ if config.admission_guarantee => Ok(()),
        _ => Err(GuardError::PodSecurity(format!(
            "pod refused: its annotations came through runtimeConfig, so the plugin cannot see its containers' capabilities and UIDs, and {WHY}; bind deploy/guard's ValidatingAdmissionPolicy to the pod's namespaces and set \"podSecurityGuarantee\": \"{GUARANTEE_ADMISSION_POLICY}\" in the netconf, or let the guard read the pod from the API server (\"namespaces\" and \"kubeconfig\")"
        ))),
    }
}

/// Which list of the pod spec a container comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerKind {
    Init,
    Regular,
    Ephemeral,
}

impl ContainerKind {
    fn field(self) -> &'static str {
        match self {
            ContainerKind::Init => "initContainers",
            ContainerKind::Regular => "containers",
            ContainerKind::Ephemeral => "ephemeralContainers",
        }
    }
}

/// The parts of one container's `securityContext` the guard reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerSecurity {
    pub kind: Option<ContainerKind>,
    pub name: String,
    pub run_as_user: Option<u32>,
    pub privileged: Option<bool>,
    pub allow_privilege_escalation: Option<bool>,
    pub add: Vec<String>,
    pub drop: Vec<String>,
}

/// The parts of a pod spec the guard reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSecurity {
    pub host_network: bool,
    /// `spec.securityContext.runAsUser`, the default of every container.
    pub run_as_user: Option<u32>,
    pub containers: Vec<ContainerSecurity>,
}

impl PodSecurity {
    /// Reads a Pod object (as the API server returns it). Absent fields take the API's
    /// defaults; a field of the wrong type is an error naming it.
    pub fn from_pod(pod: &Value) -> Result<PodSecurity, String> {
        let spec = match pod.get("spec") {
            Some(Value::Object(_)) => &pod["spec"],
            None => return Err("the pod has no spec".into()),
            Some(other) => return Err(format!("spec is {other}, not an object")),
        };
        let mut security = PodSecurity {
            host_network: opt_bool(spec, "hostNetwork", "spec.hostNetwork")?.unwrap_or(false),
            run_as_user: match object(spec, "securityContext", "spec.securityContext")? {
                Some(context) => uid(context, "spec.securityContext.runAsUser")?,
                None => None,
            },
            containers: Vec::new(),
        };
        for kind in [
            ContainerKind::Init,
            ContainerKind::Regular,
            ContainerKind::Ephemeral,
        ] {
            let list = match spec.get(kind.field()) {
                None | Some(Value::Null) => continue,
                Some(Value::Array(list)) => list,
                Some(other) => return Err(format!("spec.{} is {other}, not a list", kind.field())),
            };
            for (index, container) in list.iter().enumerate() {
                let at = format!("spec.{}[{index}]", kind.field());
                security
                    .containers
                    .push(ContainerSecurity::from_container(kind, container, &at)?);
            }
        }
        Ok(security)
    }

    /// Everything that keeps this pod from being fenced for `proxy_uid`, each naming the
    /// container, what it holds and what to change. Empty when the pod may be fenced.
    pub fn violations(&self, proxy_uid: u32) -> Vec<String> {
        let mut out = Vec::new();
        if self.host_network {
            out.push(
                "spec.hostNetwork is true: the pod shares the node's network namespace, which the guard does not fence; remove hostNetwork".to_string(),
            );
        }
        for c in &self.containers {
            let who = format!("container {:?}", c.name);
            if c.privileged == Some(true) {
                out.push(format!(
                    "{who} is privileged (every capability, the node's devices): set securityContext.privileged: false"
                ));
            }
            for added in c.add.iter().map(|a| normalized(a, true)) {
                if UNFENCEABLE_ADDS.contains(&added.as_str()) {
                    out.push(format!(
                        "{who} adds capability {added}, which lets it send around or remove the fence: remove it from securityContext.capabilities.add"
                    ));
                }
            }
            let dropped = |cap: &str| {
                c.drop
                    .iter()
                    .map(|d| normalized(d, false))
                    .any(|d| d == cap || d == "ALL")
            };
            if !dropped("NET_RAW") {
                out.push(format!(
                    "{who} keeps CAP_NET_RAW (the runtime's default set includes it; AF_PACKET frames skip the fence): add NET_RAW (or ALL) to securityContext.capabilities.drop"
                ));
            }
            let uid = c.run_as_user.or(self.run_as_user);
            if uid == Some(proxy_uid) {
                // The proxy's own container: trusted with the proxy's identity.
                continue;
            }
            match uid {
                None => out.push(format!(
                    "{who} sets no runAsUser (neither it nor the pod): the image's user could be root or the proxy uid {proxy_uid}; set securityContext.runAsUser to a UID other than 0 and {proxy_uid}"
                )),
                Some(0) => out.push(format!(
                    "{who} runs as root, which can switch to the proxy uid {proxy_uid} (CAP_SETUID) or remove the fence: set securityContext.runAsUser to a UID other than 0 and {proxy_uid}"
                )),
                Some(_) => {}
            }
            if c.allow_privilege_escalation != Some(false) {
                out.push(format!(
                    "{who} may gain privileges (set-user-ID executables, file capabilities) and so become the proxy uid {proxy_uid}: set securityContext.allowPrivilegeEscalation: false"
                ));
            }
            for added in c.add.iter().map(|a| normalized(a, true)) {
                if IDENTITY_ADDS.contains(&added.as_str()) {
                    out.push(format!(
                        "{who} adds capability {added}, which lets it become the proxy uid {proxy_uid}: remove it from securityContext.capabilities.add"
                    ));
                }
            }
        }
        out
    }
}

impl ContainerSecurity {
    fn from_container(
        kind: ContainerKind,
        container: &Value,
        at: &str,
    ) -> Result<ContainerSecurity, String> {
        if !container.is_object() {
            return Err(format!("{at} is {container}, not an object"));
        }
        let name = match container.get("name") {
            Some(Value::String(name)) => name.clone(),
            None => return Err(format!("{at}.name is missing")),
            Some(other) => return Err(format!("{at}.name is {other}, not a string")),
        };
        let mut out = ContainerSecurity {
            kind: Some(kind),
            name,
            ..Default::default()
        };
        let context_at = format!("{at}.securityContext");
        let Some(context) = object(container, "securityContext", &context_at)? else {
            return Ok(out);
        };
        out.run_as_user = uid(context, &format!("{context_at}.runAsUser"))?;
        out.privileged = opt_bool(context, "privileged", &format!("{context_at}.privileged"))?;
        out.allow_privilege_escalation = opt_bool(
            context,
            "allowPrivilegeEscalation",
            &format!("{context_at}.allowPrivilegeEscalation"),
        )?;
        let caps_at = format!("{context_at}.capabilities");
        if let Some(caps) = object(context, "capabilities", &caps_at)? {
            out.add = strings(caps, "add", &format!("{caps_at}.add"))?;
            out.drop = strings(caps, "drop", &format!("{caps_at}.drop"))?;
        }
        Ok(out)
    }
}

/// A capability name as the runtime applies it. In `add`, a `CAP_` prefix is ignored (so
/// the entry counts); in `drop` it is kept (containerd would drop `CAP_CAP_...`).
fn normalized(name: &str, strip_prefix: bool) -> String {
    let upper = name.trim().to_ascii_uppercase();
    match upper.strip_prefix("CAP_") {
        Some(rest) if strip_prefix => rest.to_string(),
        _ => upper,
    }
}

fn object<'a>(parent: &'a Value, key: &str, at: &str) -> Result<Option<&'a Value>, String> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v)),
        Some(other) => Err(format!("{at} is {other}, not an object")),
    }
}

fn opt_bool(parent: &Value, key: &str, at: &str) -> Result<Option<bool>, String> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(format!("{at} is {other}, not a boolean")),
    }
}

fn uid(context: &Value, at: &str) -> Result<Option<u32>, String> {
    match context.get("runAsUser") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| format!("{at} is {v}, not a UID")),
    }
}

fn strings(parent: &Value, key: &str, at: &str) -> Result<Vec<String>, String> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("{at}[{i}] is {item}, not a string"))
            })
            .collect(),
        Some(other) => Err(format!("{at} is {other}, not a list")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PROXY: u32 = 1337;

    /// A pod the guard accepts: the proxy and an agent, both hardened.
    fn good() -> Value {
        json!({"kind": "Pod", "spec": {
            "securityContext": {"runAsUser": 1000},
            "containers": [
                {"name": "proxy", "securityContext": {"runAsUser": PROXY,
                    "capabilities": {"drop": ["ALL"]}}},
                {"name": "agent", "securityContext": {"allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["net_raw"]}}}
            ]
        }})
    }

    fn violations(pod: &Value) -> Vec<String> {
        PodSecurity::from_pod(pod).unwrap().violations(PROXY)
    }

    fn with(pod: Value, pointer: &str, value: Value) -> Value {
        let mut pod = pod;
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        pod.pointer_mut(parent).unwrap()[key] = value;
        pod
    }

    #[test]
    fn a_hardened_pod_is_accepted() {
        assert_eq!(violations(&good()), Vec::<String>::new());
    }

    #[test]
    fn each_way_around_the_fence_is_named() {
        let cases = [
            ("/spec/hostNetwork", json!(true), "hostNetwork"),
            (
                "/spec/containers/1/securityContext/privileged",
                json!(true),
                "\"agent\" is privileged",
            ),
            (
                "/spec/containers/1/securityContext/capabilities/drop",
                json!([]),
                "\"agent\" keeps CAP_NET_RAW",
            ),
            (
                "/spec/containers/1/securityContext/capabilities/drop",
                json!(["CAP_NET_RAW"]),
                "\"agent\" keeps CAP_NET_RAW",
            ),
            (
                "/spec/containers/0/securityContext/capabilities/drop",
                json!(["CHOWN"]),
                "\"proxy\" keeps CAP_NET_RAW",
            ),
            (
                "/spec/containers/0/securityContext/capabilities/add",
                json!(["CAP_NET_ADMIN"]),
                "\"proxy\" adds capability NET_ADMIN",
            ),
            (
                "/spec/containers/1/securityContext/capabilities/add",
                json!(["net_raw"]),
                "\"agent\" adds capability NET_RAW",
            ),
            (
                "/spec/containers/1/securityContext/capabilities/add",
                json!(["SETUID"]),
                "become the proxy uid 1337",
            ),
            (
                "/spec/containers/1/securityContext/runAsUser",
                json!(0),
                "\"agent\" runs as root",
            ),
            (
                "/spec/securityContext/runAsUser",
                json!(0),
                "\"agent\" runs as root",
            ),
            (
                "/spec/containers/1/securityContext/allowPrivilegeEscalation",
                json!(true),
                "may gain privileges",
            ),
        ];
        for (pointer, value, expect) in cases {
            let found = violations(&with(good(), pointer, value.clone()));
            assert_eq!(found.len(), 1, "{pointer}={value}: {found:#?}");
            assert!(found[0].contains(expect), "{pointer}={value}: {}", found[0]);
        }
    }

    #[test]
    fn an_unknown_uid_may_be_the_proxy() {
        let mut pod = good();
        pod["spec"]["securityContext"] = json!({"runAsNonRoot": true});
        let found = violations(&pod);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("sets no runAsUser"), "{}", found[0]);
    }

    #[test]
    fn init_and_ephemeral_containers_count() {
        let mut pod = good();
        pod["spec"]["initContainers"] = json!([{"name": "init"}]);
        pod["spec"]["ephemeralContainers"] = json!([{"name": "debug",
            "securityContext": {"capabilities": {"drop": ["ALL"]}, "allowPrivilegeEscalation": false}}]);
        let found = violations(&pod);
        // init: keeps NET_RAW, may escalate (uid 1000 from the pod); debug: nothing.
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(found.iter().all(|v| v.contains("\"init\"")), "{found:#?}");
    }

    #[test]
    fn wrong_types_are_named() {
        let cases = [
            ("/spec/hostNetwork", json!("yes"), "spec.hostNetwork"),
            (
                "/spec/containers/1/securityContext/runAsUser",
                json!(-1),
                "spec.containers[1].securityContext.runAsUser",
            ),
            (
                "/spec/containers/1/securityContext/capabilities/add",
                json!([5]),
                "spec.containers[1].securityContext.capabilities.add[0]",
            ),
            (
                "/spec/containers/0/securityContext/privileged",
                json!(1),
                "spec.containers[0].securityContext.privileged",
            ),
            ("/spec/containers", json!({}), "spec.containers"),
        ];
        for (pointer, value, field) in cases {
            let error = PodSecurity::from_pod(&with(good(), pointer, value)).unwrap_err();
            assert!(error.starts_with(field), "{pointer}: {error}");
        }
        assert!(PodSecurity::from_pod(&json!({"kind": "Pod"})).is_err());
    }
}
