//! Small value types every part of the crate shares.

use std::fmt;

use serde::Serialize;

/// A Service's identity: its namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ServiceName {
    pub namespace: String,
    pub name: String,
}

impl ServiceName {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> ServiceName {
        ServiceName {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// How issues name the object: `Service/ns/name`.
    pub fn object(&self) -> String {
        format!("Service/{self}")
    }
}

impl fmt::Display for ServiceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The L4 protocols a Service port can carry. A port is keyed by (address, protocol, port):
/// the same number over TCP and UDP are two unrelated service ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// Reads the Kubernetes spelling; absent means TCP, as the API server defaults it.
    pub fn from_kubernetes(text: Option<&str>) -> Option<Protocol> {
        match text {
            None | Some("TCP") => Some(Protocol::Tcp),
            Some("UDP") => Some(Protocol::Udp),
            Some("SCTP") => Some(Protocol::Sctp),
            Some(_) => None,
        }
    }

    /// Connectionless protocols keep stale NAT state after a backend goes away: the
    /// datapath must flush it (kube-proxy's conntrack cleanup covers UDP and SCTP).
    pub fn needs_flow_flush(self) -> bool {
        matches!(self, Protocol::Udp | Protocol::Sctp)
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Family {
    V4,
    V6,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
    }
}
