//! Pods, every one in the cluster: policy needs their labels and addresses, Services their
//! named ports, and this node its own pods.

use std::net::IpAddr;
use std::sync::Arc;

use serde::Deserialize;

use crate::intern::{self, Labels};
use crate::issue::Issue;
use crate::kind::{KindInfo, ObjectKey, Watched};
use crate::meta::{null_default, Meta, MetaView};

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodWire {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: Meta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: PodWireSpec,
    #[serde(default, deserialize_with = "null_default")]
    pub status: PodWireStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodWireSpec {
    #[serde(default, deserialize_with = "null_default")]
    pub node_name: String,
    #[serde(default, deserialize_with = "null_default")]
    pub host_network: bool,
    #[serde(default, deserialize_with = "null_default")]
    pub containers: Vec<ContainerWire>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContainerWire {
    #[serde(default, deserialize_with = "null_default")]
    pub ports: Vec<ContainerPortWire>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPortWire {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub protocol: Option<String>,
    #[serde(default)]
    pub container_port: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodWireStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub phase: String,
    #[serde(rename = "podIP", default, deserialize_with = "null_default")]
    pub pod_ip: String,
    #[serde(rename = "podIPs", default, deserialize_with = "null_default")]
    pub pod_ips: Vec<PodIpWire>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodIpWire {
    #[serde(default)]
    pub ip: String,
}

/// A container port's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    pub fn parse(text: &str) -> Option<Protocol> {
        match text {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }
}

/// A named container port (what a Service's or a policy's named `targetPort` resolves to).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NamedPort {
    pub name: Arc<str>,
    pub protocol: Protocol,
    pub port: u16,
}

/// A pod's UID: 16 bytes when it is a UUID (the API server's always are). Bytes rather
/// than a `u128`, whose 16-byte alignment would pad every stored pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Uid {
    Uuid([u8; 16]),
    Other(Box<str>),
}

impl Uid {
    pub fn parse(text: &str) -> Uid {
        let hex: String = text.chars().filter(|c| *c != '-').collect();
        match (text.len(), u128::from_str_radix(&hex, 16)) {
            (36, Ok(v)) if hex.len() == 32 => Uid::Uuid(v.to_be_bytes()),
            _ => Uid::Other(text.into()),
        }
    }
}

/// A pod as weft keeps it (namespace and name are the store key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub uid: Uid,
    /// `spec.nodeName` (interned); `None` until the pod is scheduled.
    pub node_name: Option<Arc<str>>,
    pub labels: Labels,
    /// `status.podIPs` (or `status.podIP`), in the API server's order.
    pub ips: Box<[IpAddr]>,
    pub host_network: bool,
    /// `Succeeded` or `Failed`: its addresses may already belong to another pod.
    pub terminal: bool,
    /// The containers' named ports (shared between pods of one template).
    pub named_ports: Arc<[NamedPort]>,
}

impl Watched for Pod {
    const KIND: KindInfo = KindInfo {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        namespaced: true,
    };
    type Wire = PodWire;

    fn meta(wire: &PodWire) -> MetaView<'_> {
        wire.metadata.view()
    }

    fn from_wire(wire: &PodWire) -> Result<Pod, Vec<Issue>> {
        let object = ObjectKey::of(wire.metadata.view(), true)
            .map(|k| Pod::KIND.object_name(&k))
            .unwrap_or_else(|| "Pod/<unnamed>".into());
        let mut issues = Vec::new();

        let mut ips = Vec::new();
        let listed: Vec<(String, &str)> = if wire.status.pod_ips.is_empty() {
            Some(("status.podIP".to_string(), wire.status.pod_ip.as_str()))
                .filter(|(_, ip)| !ip.is_empty())
                .into_iter()
                .collect()
        } else {
            wire.status
                .pod_ips
                .iter()
                .enumerate()
                .map(|(i, p)| (format!("status.podIPs[{i}].ip"), p.ip.as_str()))
                .collect()
        };
        for (field, text) in listed {
            match text.parse::<IpAddr>() {
                Ok(ip) => ips.push(ip),
                Err(_) => issues.push(Issue::new(
                    &object,
                    field,
                    format!("{text:?} is not an IP address"),
                )),
            }
        }

        let mut named = Vec::new();
        for (c, container) in wire.spec.containers.iter().enumerate() {
            for (p, port) in container.ports.iter().enumerate() {
                let field = format!("spec.containers[{c}].ports[{p}]");
                let protocol = match port.protocol.as_deref() {
                    None | Some("") => Some(Protocol::Tcp),
                    Some(text) => Protocol::parse(text),
                };
                let Some(protocol) = protocol else {
                    issues.push(Issue::new(
                        &object,
                        format!("{field}.protocol"),
                        format!("{:?} is not TCP, UDP or SCTP", port.protocol),
                    ));
                    continue;
                };
                let Some(number) = u16::try_from(port.container_port).ok().filter(|n| *n > 0)
                else {
                    issues.push(Issue::new(
                        &object,
                        format!("{field}.containerPort"),
                        format!("{} is not a port (1-65535)", port.container_port),
                    ));
                    continue;
                };
                if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
                    named.push(NamedPort {
                        name: intern::str(name),
                        protocol,
                        port: number,
                    });
                }
            }
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        named.sort();
        Ok(Pod {
            uid: Uid::parse(&wire.metadata.uid),
            node_name: Some(wire.spec.node_name.as_str())
                .filter(|n| !n.is_empty())
                .map(intern::str),
            labels: Labels::new(&wire.metadata.labels),
            ips: ips.into_boxed_slice(),
            host_network: wire.spec.host_network,
            terminal: matches!(wire.status.phase.as_str(), "Succeeded" | "Failed"),
            named_ports: intern::ports(named),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::decode_str;

    #[test]
    fn a_realistic_pod_keeps_only_what_weft_reads() {
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-1", "namespace": "shop", "uid": "8d3c6b0e-2f51-4c6e-9d1e-0a2b3c4d5e6f",
                "resourceVersion": "42", "labels": {"app": "web", "pod-template-hash": "abc"},
                "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
                "ownerReferences": [{"kind": "ReplicaSet", "name": "web-abc", "uid": "x"}]
            },
            "spec": {
                "nodeName": "node1",
                "containers": [{"name": "c", "image": "i", "ports": [
                    {"name": "http", "containerPort": 8080},
                    {"containerPort": 9090, "protocol": "UDP"}
                ]}]
            },
            "status": {
                "phase": "Running", "podIP": "10.244.1.5",
                "podIPs": [{"ip": "10.244.1.5"}, {"ip": "fd00:10:244:1::5"}],
                "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0}]
            }
        });
        let decoded = decode_str::<Pod>(&pod.to_string());
        assert_eq!(decoded.key, Some(ObjectKey::namespaced("shop", "web-1")));
        assert_eq!(decoded.resource_version, "42");
        let pod = decoded.value.unwrap();
        assert_eq!(
            pod.uid,
            Uid::Uuid(0x8d3c6b0e_2f51_4c6e_9d1e_0a2b3c4d5e6fu128.to_be_bytes())
        );
        assert_eq!(pod.node_name.as_deref(), Some("node1"));
        assert_eq!(pod.labels.get("app"), Some("web"));
        assert_eq!(pod.ips.len(), 2);
        assert!(!pod.terminal && !pod.host_network);
        assert_eq!(
            &pod.named_ports[..],
            &[NamedPort {
                name: "http".into(),
                protocol: Protocol::Tcp,
                port: 8080
            }]
        );
    }

    #[test]
    fn malformed_pods_are_named_with_the_field() {
        let bad_type = r#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},
            "spec":{"containers":[{"ports":[{"containerPort":"eighty"}]}]}}"#;
        let decoded = decode_str::<Pod>(bad_type);
        assert_eq!(decoded.key, Some(ObjectKey::namespaced("ns", "p")));
        assert_eq!(decoded.resource_version, "7");
        let issue = &decoded.value.unwrap_err()[0];
        assert_eq!(issue.object, "Pod/ns/p");
        assert_eq!(issue.field, "spec.containers[0].ports[0].containerPort");
        assert!(!issue.message.contains("line"), "{issue}");

        let bad_value = r#"{"metadata":{"name":"q","namespace":"ns"},
            "status":{"podIPs":[{"ip":"10.0.0.1"},{"ip":"nope"}]}}"#;
        let issue = &decode_str::<Pod>(bad_value).value.unwrap_err()[0];
        assert_eq!(
            issue.to_string(),
            "Pod/ns/q status.podIPs[1].ip: \"nope\" is not an IP address"
        );
    }
}
