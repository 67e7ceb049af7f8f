//! TEMPORARY kinds, small on purpose: Service and EndpointSlice until `weft-services`
//! provides its compact types, NetworkPolicy until `weft-policy` does. They exist so the
//! stores, both sources and `weft bench agent` cover all six kinds; nothing reconciles
//! them. Replace each by swapping its type in `kinds.rs` and deleting it here.

use std::net::IpAddr;
use std::sync::Arc;

use serde::Deserialize;
use weft_model::{intern, null_default, Issue, KindInfo, Meta, MetaView, Watched};

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServiceWire {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: Meta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: ServiceWireSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServiceWireSpec {
    #[serde(rename = "clusterIPs", default, deserialize_with = "null_default")]
    pub cluster_ips: Vec<String>,
}

/// Placeholder: a Service's cluster IPs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub cluster_ips: Box<[IpAddr]>,
}

impl Watched for Service {
    const KIND: KindInfo = KindInfo {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        namespaced: true,
    };
    type Wire = ServiceWire;
    fn meta(wire: &ServiceWire) -> MetaView<'_> {
        wire.metadata.view()
    }
    fn from_wire(wire: &ServiceWire) -> Result<Service, Vec<Issue>> {
        Ok(Service {
            // "None" (headless) and anything else unparsable carries no address.
            cluster_ips: wire
                .spec
                .cluster_ips
                .iter()
                .filter_map(|ip| ip.parse().ok())
                .collect(),
        })
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct EndpointSliceWire {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: Meta,
    #[serde(default, deserialize_with = "null_default")]
    pub endpoints: Vec<EndpointWire>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct EndpointWire {
    #[serde(default, deserialize_with = "null_default")]
    pub addresses: Vec<String>,
}

/// Placeholder: the Service a slice belongs to and its endpoints' addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSlice {
    pub service: Option<Arc<str>>,
    pub addresses: Box<[IpAddr]>,
}

impl Watched for EndpointSlice {
    const KIND: KindInfo = KindInfo {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        namespaced: true,
    };
    type Wire = EndpointSliceWire;
    fn meta(wire: &EndpointSliceWire) -> MetaView<'_> {
        wire.metadata.view()
    }
    fn from_wire(wire: &EndpointSliceWire) -> Result<EndpointSlice, Vec<Issue>> {
        Ok(EndpointSlice {
            service: wire
                .metadata
                .labels
                .get("kubernetes.io/service-name")
                .map(|s| intern::str(s)),
            addresses: wire
                .endpoints
                .iter()
                .flat_map(|e| &e.addresses)
                .filter_map(|a| a.parse().ok())
                .collect(),
        })
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NetworkPolicyWire {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: Meta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: NetworkPolicyWireSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicyWireSpec {
    #[serde(default, deserialize_with = "null_default")]
    pub policy_types: Vec<String>,
}

/// Placeholder: a policy's types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPolicy {
    pub policy_types: Box<[Arc<str>]>,
}

impl Watched for NetworkPolicy {
    const KIND: KindInfo = KindInfo {
        group: "networking.k8s.io",
        version: "v1",
        kind: "NetworkPolicy",
        plural: "networkpolicies",
        namespaced: true,
    };
    type Wire = NetworkPolicyWire;
    fn meta(wire: &NetworkPolicyWire) -> MetaView<'_> {
        wire.metadata.view()
    }
    fn from_wire(wire: &NetworkPolicyWire) -> Result<NetworkPolicy, Vec<Issue>> {
        Ok(NetworkPolicy {
            policy_types: wire
                .spec
                .policy_types
                .iter()
                .map(|t| intern::str(t))
                .collect(),
        })
    }
}
