//! The sig-network "Netpol" e2e cases as data, for our unit tests and for a lab runner that
//! drives them through kubectl.
//!
//! `scenarios/netpol/world.yaml` is the world every scenario starts from: namespaces x, y, z
//! (labelled `ns: <name>`) each with pods a, b, c (labelled `pod: <name>`), every pod
//! serving ports 80 and 81 over TCP, UDP and SCTP with named container ports
//! `serve-<port>-<protocol>`. Each `scenarios/netpol/<name>.yaml` is one case: steps that
//! apply Kubernetes objects, delete them or relabel pods and namespaces, each followed by
//! the expected reachability matrix of the nine pods for some probes (`TCP/80`, ...).
//!
//! Objects are real manifests with three placeholders, filled at run time by [`render`]:
//! `{{ns x}}` the real name of model namespace x, `{{host x/b}}` pod x/b's address as a
//! host CIDR (`/32` or `/128`, of the family being probed), `{{net x/b 4}}` the network of
//! that prefix length containing it. A matrix is written as upstream builds its truth
//! tables: everything allowed, then rules in order, each overriding the earlier ones:
//! `deny * -> x/*`, `allow x/b -> x/a`, `deny */a -> y/*`. Connections from a pod to itself
//! are not probed (upstream ignores loopback, kubernetes#95879).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;

use crate::view::{ContainerPort, Protocol};

pub const NAMESPACES: [&str; 3] = ["x", "y", "z"];
pub const PODS: [&str; 3] = ["a", "b", "c"];

/// The world's manifests (templated namespace names).
pub const WORLD: &str = include_str!("../scenarios/netpol/world.yaml");

macro_rules! scenarios {
    ($($name:literal),* $(,)?) => {
        /// Every scenario file: (name, YAML).
        pub const FILES: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("../scenarios/netpol/", $name, ".yaml")))),*
        ];
    };
}

scenarios!(
    "default-deny-ingress",
    "default-deny-all",
    "allow-from-pods-in-server-namespace",
    "allow-ingress-for-a-target",
    "allow-from-all-namespaces",
    "allow-only-from-another-namespace",
    "pod-selector-match-expressions",
    "namespace-selector-match-expressions",
    "pod-selector-or-namespace-selector",
    "pod-selector-and-namespace-selector",
    "multiple-pod-and-namespace-selectors",
    "any-pod-selectors",
    "pod-in-another-namespace-by-both-selectors",
    "based-on-ports",
    "stacked-policies-overlapping-selectors",
    "allow-all",
    "ingress-on-a-named-port",
    "ingress-from-namespace-on-a-named-port",
    "egress-on-a-named-port",
    "updated-policy",
    "ingress-from-updated-namespace",
    "ingress-from-updated-pod",
    "deny-ingress-from-other-namespaces",
    "deny-ingress-to-updated-pod",
    "deny-egress-by-pod-selector",
    "deny-egress-from-a-namespace",
    "ingress-and-egress-together",
    "egress-denied-on-the-client-side",
    "egress-to-another-namespace-by-both-selectors",
    "ingress-any-port-of-a-protocol",
    "ingress-allow-all-precedence",
    "egress-allow-all-precedence",
    "stop-enforcing-after-delete",
    "egress-to-a-cidr-block",
    "egress-cidr-except",
    "egress-cidr-and-except-overlap",
    "ingress-and-egress-independent",
    "sctp-is-not-tcp",
    "sctp-only-policy-isolates",
    "udp-only-policy-blocks-tcp",
    "namespace-name-label-match-labels",
    "namespace-name-label-match-expressions",
    "udp-default-deny-ingress",
    "udp-based-on-ports",
    "udp-pod-and-namespace-selectors",
    "sctp-default-deny-ingress",
    "sctp-based-on-ports",
    "sctp-pod-and-namespace-selectors",
);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError(pub String);

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

fn err(message: impl Into<String>) -> ScenarioError {
    ScenarioError(message.into())
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// The upstream test's title (`network_policy.go`).
    pub upstream: String,
    pub steps: Vec<Step>,
}

/// One step: its actions in this order (apply, delete, relabel pods, relabel namespaces),
/// then the matrices to expect once they are in force.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    pub name: String,
    /// Manifests to create or replace (`kubectl apply`), templated.
    #[serde(default)]
    pub apply: Vec<serde_json::Value>,
    #[serde(default)]
    pub delete: Vec<ObjectRef>,
    #[serde(default)]
    pub label_pods: Vec<PodLabels>,
    #[serde(default)]
    pub label_namespaces: Vec<NamespaceLabels>,
    pub expect: Vec<Expectation>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectRef {
    pub kind: String,
    /// A model namespace (x, y, z).
    pub namespace: String,
    pub name: String,
}

/// Labels to add or overwrite on a pod (`kubectl label --overwrite`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodLabels {
    /// `x/b`.
    pub pod: String,
    pub set: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceLabels {
    pub namespace: String,
    pub set: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expectation {
    /// `TCP/80`, `UDP/81`, `SCTP/80`.
    pub probes: Vec<String>,
    /// Overrides of "everything allowed", in order.
    #[serde(default)]
    pub rules: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Probe {
    pub protocol: Protocol,
    pub port: u16,
}

impl Probe {
    pub fn parse(s: &str) -> Result<Probe, ScenarioError> {
        let (proto, port) = s
            .split_once('/')
            .ok_or_else(|| err(format!("probe {s:?} is not PROTOCOL/PORT")))?;
        Ok(Probe {
            protocol: Protocol::parse(proto)
                .ok_or_else(|| err(format!("probe {s:?}: unknown protocol")))?,
            port: port
                .parse()
                .map_err(|_| err(format!("probe {s:?}: bad port")))?,
        })
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.protocol, self.port)
    }
}

/// Every pod of the world, `x/a` first.
pub fn pod_names() -> Vec<String> {
    NAMESPACES
        .iter()
        .flat_map(|ns| PODS.iter().map(move |p| format!("{ns}/{p}")))
        .collect()
}

/// Who may reach whom: `from` rows, `to` columns, over [`pod_names`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    pub pods: Vec<String>,
    allowed: Vec<bool>,
}

impl Matrix {
    pub fn new(pods: Vec<String>, allowed: bool) -> Matrix {
        let n = pods.len();
        Matrix {
            pods,
            allowed: vec![allowed; n * n],
        }
    }

    fn index(&self, pod: &str) -> Option<usize> {
        self.pods.iter().position(|p| p == pod)
    }

    pub fn get(&self, from: &str, to: &str) -> Option<bool> {
        let (f, t) = (self.index(from)?, self.index(to)?);
        Some(self.allowed[f * self.pods.len() + t])
    }

    pub fn set(&mut self, from: &str, to: &str, allowed: bool) {
        if let (Some(f), Some(t)) = (self.index(from), self.index(to)) {
            let n = self.pods.len();
            self.allowed[f * n + t] = allowed;
        }
    }

    /// The (from, to) pairs where two matrices differ, a pod to itself excepted.
    pub fn differences(&self, other: &Matrix) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for from in &self.pods {
            for to in &self.pods {
                if from != to && self.get(from, to) != other.get(from, to) {
                    out.push((from.clone(), to.clone()));
                }
            }
        }
        out
    }
}

/// The truth table, as upstream prints it: `.` reachable, `X` not, `-` not probed.
impl fmt::Display for Matrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "    ")?;
        for to in &self.pods {
            write!(f, " {to}")?;
        }
        writeln!(f)?;
        for from in &self.pods {
            write!(f, "{from}")?;
            for to in &self.pods {
                let c = if from == to {
                    '-'
                } else if self.get(from, to) == Some(true) {
                    '.'
                } else {
                    'X'
                };
                write!(f, "   {c}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// `*`, `x/*`, `*/a` or `x/a`.
fn pattern_matches(pattern: &str, pod: &str) -> Result<bool, ScenarioError> {
    if pattern == "*" {
        return Ok(true);
    }
    let (pns, ppod) = pattern
        .split_once('/')
        .ok_or_else(|| err(format!("peer {pattern:?} is not *, ns/*, */pod or ns/pod")))?;
    let (ns, name) = pod.split_once('/').unwrap_or((pod, ""));
    Ok((pns == "*" || pns == ns) && (ppod == "*" || ppod == name))
}

impl Expectation {
    pub fn probes(&self) -> Result<Vec<Probe>, ScenarioError> {
        self.probes.iter().map(|p| Probe::parse(p)).collect()
    }

    /// The matrix this expectation describes.
    pub fn matrix(&self) -> Result<Matrix, ScenarioError> {
        let mut m = Matrix::new(pod_names(), true);
        for rule in &self.rules {
            let words: Vec<&str> = rule.split_whitespace().collect();
            let [verb, from, "->", to] = words.as_slice() else {
                return Err(err(format!("rule {rule:?} is not `allow|deny FROM -> TO`")));
            };
            let allowed = match *verb {
                "allow" => true,
                "deny" => false,
                other => {
                    return Err(err(format!(
                        "rule {rule:?}: {other:?} is not allow or deny"
                    )))
                }
            };
            for f in pod_names() {
                for t in pod_names() {
                    if pattern_matches(from, &f)? && pattern_matches(to, &t)? {
                        m.set(&f, &t, allowed);
                    }
                }
            }
        }
        Ok(m)
    }
}

/// What placeholders stand for in one run.
#[derive(Debug, Clone, Default)]
pub struct Bindings {
    /// Model namespace (x) → real name.
    pub namespaces: BTreeMap<String, String>,
    /// Model pod (x/b) → its address in the family being probed.
    pub addresses: BTreeMap<String, IpAddr>,
}

impl Bindings {
    /// Namespaces named as in the model.
    pub fn with_model_namespaces() -> Bindings {
        Bindings {
            namespaces: NAMESPACES
                .iter()
                .map(|n| (n.to_string(), n.to_string()))
                .collect(),
            addresses: BTreeMap::new(),
        }
    }

    pub fn namespace(&self, model: &str) -> Result<&str, ScenarioError> {
        self.namespaces
            .get(model)
            .map(String::as_str)
            .ok_or_else(|| err(format!("no namespace bound to {model:?}")))
    }

    fn address(&self, pod: &str) -> Result<IpAddr, ScenarioError> {
        self.addresses
            .get(pod)
            .copied()
            .ok_or_else(|| err(format!("no address bound to pod {pod:?}")))
    }
}

/// Fills the placeholders of one string.
pub fn render_str(s: &str, b: &Bindings) -> Result<String, ScenarioError> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| err(format!("unclosed placeholder in {s:?}")))?;
        let words: Vec<&str> = after[..end].split_whitespace().collect();
        let value = match words.as_slice() {
            ["ns", model] => b.namespace(model)?.to_string(),
            ["host", pod] => IpNet::from(b.address(pod)?).to_string(),
            ["net", pod, len] => {
                let len: u8 = len
                    .parse()
                    .map_err(|_| err(format!("bad prefix length in {s:?}")))?;
                IpNet::new(b.address(pod)?, len)
                    .map_err(|_| err(format!("bad prefix length in {s:?}")))?
                    .trunc()
                    .to_string()
            }
            _ => {
                return Err(err(format!(
                    "unknown placeholder {{{{{}}}}}",
                    &after[..end]
                )))
            }
        };
        out.push_str(&value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Fills the placeholders of every string (keys included) of a manifest.
pub fn render(v: &serde_json::Value, b: &Bindings) -> Result<serde_json::Value, ScenarioError> {
    use serde_json::Value;
    Ok(match v {
        Value::String(s) => Value::String(render_str(s, b)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| render(i, b))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, item) in map {
                out.insert(render_str(k, b)?, render(item, b)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

impl Scenario {
    pub fn parse(yaml: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = serde_yaml::from_str(yaml).map_err(|e| err(format!("scenario: {e}")))?;
        for step in &s.steps {
            for e in &step.expect {
                e.probes()?;
                e.matrix()?;
            }
        }
        Ok(s)
    }

    /// Every scenario, in file order.
    pub fn all() -> Result<Vec<Scenario>, ScenarioError> {
        FILES
            .iter()
            .map(|(name, yaml)| {
                let s = Scenario::parse(yaml).map_err(|e| err(format!("{name}.yaml: {e}")))?;
                if s.name != *name {
                    return Err(err(format!("{name}.yaml is named {:?}", s.name)));
                }
                Ok(s)
            })
            .collect()
    }
}

/// A pod of the world, as its manifest declares it.
#[derive(Debug, Clone)]
pub struct WorldPod {
    /// Model namespace.
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub ports: Vec<ContainerPort>,
}

#[derive(Debug, Clone)]
pub struct World {
    /// Model namespace → its labels.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub pods: Vec<WorldPod>,
    /// The manifests themselves (templated), for `kubectl apply`.
    pub objects: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

impl World {
    /// Reads `world.yaml`; namespaces stay as model names.
    pub fn load() -> Result<World, ScenarioError> {
        let b = Bindings::with_model_namespaces();
        let mut world = World {
            namespaces: BTreeMap::new(),
            pods: Vec::new(),
            objects: Vec::new(),
        };
        for doc in serde_yaml::Deserializer::from_str(WORLD) {
            let value =
                serde_json::Value::deserialize(doc).map_err(|e| err(format!("world.yaml: {e}")))?;
            let rendered = render(&value, &b)?;
            let kind = rendered["kind"].as_str().unwrap_or_default().to_string();
            let meta: Meta = serde_json::from_value(rendered["metadata"].clone())
                .map_err(|e| err(format!("world.yaml metadata: {e}")))?;
            match kind.as_str() {
                "Namespace" => {
                    world.namespaces.insert(meta.name, meta.labels);
                }
                "Pod" => {
                    let mut ports = Vec::new();
                    for c in rendered["spec"]["containers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        for p in c["ports"].as_array().into_iter().flatten() {
                            let name = p["name"].as_str().unwrap_or_default();
                            let protocol = Protocol::parse(p["protocol"].as_str().unwrap_or("TCP"))
                                .ok_or_else(|| err("world.yaml: bad container port protocol"))?;
                            let port = p["containerPort"]
                                .as_u64()
                                .and_then(|n| u16::try_from(n).ok())
                                .ok_or_else(|| err("world.yaml: bad containerPort"))?;
                            if !name.is_empty() {
                                ports.push(ContainerPort {
                                    name: name.to_string(),
                                    protocol,
                                    port,
                                });
                            }
                        }
                    }
                    world.pods.push(WorldPod {
                        namespace: meta.namespace,
                        name: meta.name,
                        labels: meta.labels,
                        ports,
                    });
                }
                other => return Err(err(format!("world.yaml: unexpected kind {other:?}"))),
            }
            world.objects.push(value);
        }
        Ok(world)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_fill_in() {
        let mut b = Bindings::with_model_namespaces();
        b.namespaces.insert("y".into(), "netpol-1-y".into());
        b.addresses
            .insert("x/b".into(), "10.244.1.7".parse().unwrap());
        b.addresses
            .insert("y/a".into(), "fd00:10:244:1::7".parse().unwrap());
        assert_eq!(render_str("{{ns y}}", &b).unwrap(), "netpol-1-y");
        assert_eq!(render_str("{{host x/b}}", &b).unwrap(), "10.244.1.7/32");
        assert_eq!(render_str("{{net x/b 4}}", &b).unwrap(), "0.0.0.0/4");
        assert_eq!(
            render_str("{{host y/a}}", &b).unwrap(),
            "fd00:10:244:1::7/128"
        );
        assert_eq!(render_str("{{net y/a 4}}", &b).unwrap(), "f000::/4");
        assert_eq!(render_str("a-{{ns x}}-b", &b).unwrap(), "a-x-b");
        assert!(render_str("{{ip x/b}}", &b).is_err());
        assert!(render_str("{{host q/q}}", &b).is_err());
        assert!(render_str("{{ns x", &b).is_err());
    }

    #[test]
    fn matrices_are_built_in_rule_order() {
        let e = Expectation {
            probes: vec!["TCP/80".into()],
            rules: vec!["deny * -> x/a".into(), "allow x/b -> x/a".into()],
        };
        let m = e.matrix().unwrap();
        assert_eq!(m.get("x/b", "x/a"), Some(true));
        assert_eq!(m.get("y/b", "x/a"), Some(false));
        assert_eq!(m.get("y/b", "x/b"), Some(true));
        let e = Expectation {
            probes: vec![],
            rules: vec!["deny */a -> y/*".into()],
        };
        let m = e.matrix().unwrap();
        assert_eq!(m.get("z/a", "y/c"), Some(false));
        assert_eq!(m.get("z/b", "y/c"), Some(true));
        assert!(m.to_string().contains("x/a   -   ."));
        let bad = Expectation {
            probes: vec![],
            rules: vec!["block * -> *".into()],
        };
        assert!(bad.matrix().is_err());
    }

    #[test]
    fn every_scenario_file_is_listed_and_parses() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/netpol");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "world.yaml")
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = FILES.iter().map(|(n, _)| format!("{n}.yaml")).collect();
        listed.sort();
        assert_eq!(on_disk, listed);
        let all = Scenario::all().unwrap();
        assert_eq!(all.len(), 48);
        let world = World::load().unwrap();
        assert_eq!(world.pods.len(), 9);
        assert_eq!(world.pods[0].ports.len(), 6);
        assert_eq!(world.namespaces["y"]["ns"], "y");
    }
}
