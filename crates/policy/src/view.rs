//! Borrowed views of the objects policy reads, so the agent's stores can feed the engine
//! without a second copy of every pod.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

/// The label every namespace carries with its own name (the API server sets it and never
/// lets anyone change it; namespaces from other sources get it here).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A set of labels, whatever the store keeps them in.
pub trait Labels {
    fn get(&self, key: &str) -> Option<&str>;
    /// Every label in key order. Identities are keyed by this sequence.
    fn each(&self, f: &mut dyn FnMut(&str, &str));
}

impl Labels for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }
    fn each(&self, f: &mut dyn FnMut(&str, &str)) {
        for (k, v) in self {
            f(k, v);
        }
    }
}

/// Labels as a slice of pairs sorted by key (how identities store them).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SortedLabels(pub Vec<(String, String)>);

impl SortedLabels {
    pub fn from_labels(labels: &dyn Labels) -> SortedLabels {
        let mut pairs = Vec::new();
        labels.each(&mut |k, v| pairs.push((k.to_string(), v.to_string())));
        pairs.sort();
        pairs.dedup_by(|a, b| a.0 == b.0);
        SortedLabels(pairs)
    }
}

impl Labels for SortedLabels {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| self.0[i].1.as_str())
    }
    fn each(&self, f: &mut dyn FnMut(&str, &str)) {
        for (k, v) in &self.0 {
            f(k, v);
        }
    }
}

impl fmt::Display for SortedLabels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, "(no labels)");
        }
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

/// A namespace's labels as selectors see them: its own labels, with
/// [`NAMESPACE_NAME_LABEL`] always equal to its name.
#[derive(Clone, Copy)]
pub struct NamespaceLabels<'a> {
    pub name: &'a str,
    pub labels: Option<&'a dyn Labels>,
}

impl Labels for NamespaceLabels<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        if key == NAMESPACE_NAME_LABEL {
            return Some(self.name);
        }
        self.labels.and_then(|l| l.get(key))
    }
    fn each(&self, f: &mut dyn FnMut(&str, &str)) {
        let mut pairs: Vec<(String, String)> = Vec::new();
        if let Some(l) = self.labels {
            l.each(&mut |k, v| {
                if k != NAMESPACE_NAME_LABEL {
                    pairs.push((k.to_string(), v.to_string()));
                }
            });
        }
        pairs.push((NAMESPACE_NAME_LABEL.to_string(), self.name.to_string()));
        pairs.sort();
        for (k, v) in &pairs {
            f(k, v);
        }
    }
}

/// The L4 protocols a NetworkPolicy port can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp];

    /// The IP protocol number, as the datapath sees it in the header.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Sctp => 132,
        }
    }

    pub fn from_number(n: u8) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.number() == n)
    }

    /// The API's spelling (`TCP`, `UDP`, `SCTP`; case-sensitive, as the API server checks).
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `tcp/80`, `udp/53`, `sctp/81`, or `proto 1` for anything without ports.
pub fn format_proto_port(protocol: u8, port: u16) -> String {
    match Protocol::from_number(protocol) {
        Some(p) => format!("{}/{port}", p.as_str().to_ascii_lowercase()),
        None => format!("proto {protocol}"),
    }
}

/// A named container port (`spec.containers[*].ports[*]` with a `name`). Unnamed ports
/// never matter to policy.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerPort {
    pub name: String,
    pub protocol: Protocol,
    pub port: u16,
}

/// A pod as policy sees it.
#[derive(Clone, Copy)]
pub struct PodView<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub labels: &'a dyn Labels,
    /// `status.podIPs`: empty until the pod has networking.
    pub ips: &'a [IpAddr],
    /// Host-network pods are never policy endpoints and never match a pod selector: their
    /// addresses are their node's.
    pub host_network: bool,
    /// `status.phase` is Succeeded or Failed: the pod is gone from policy (its addresses may
    /// already belong to a new pod).
    pub terminal: bool,
    /// `spec.nodeName`; empty while unscheduled.
    pub node: &'a str,
    pub ports: &'a [ContainerPort],
}

impl PodView<'_> {
    /// Policy applies to this pod and its addresses identify it: it is not on the host
    /// network and not finished.
    pub fn is_live(&self) -> bool {
        !self.host_network && !self.terminal
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl fmt::Debug for PodView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pod")
            .field("key", &self.key())
            .field(
                "labels",
                &SortedLabels::from_labels(self.labels).to_string(),
            )
            .field("ips", &self.ips)
            .field("host_network", &self.host_network)
            .field("terminal", &self.terminal)
            .field("node", &self.node)
            .field("ports", &self.ports)
            .finish()
    }
}

#[derive(Clone, Copy)]
pub struct NamespaceView<'a> {
    pub name: &'a str,
    pub labels: &'a dyn Labels,
}

impl fmt::Debug for NamespaceView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Namespace")
            .field("name", &self.name)
            .field(
                "labels",
                &SortedLabels::from_labels(self.labels).to_string(),
            )
            .finish()
    }
}

/// A node: every address its own stack may send from (status addresses and its VTEP
/// addresses), so traffic from it is recognised as the node's.
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    pub name: &'a str,
    pub addresses: &'a [IpAddr],
}
