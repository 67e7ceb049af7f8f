//! Wire types: the parts of Service and EndpointSlice JSON that weft reads, under their
//! Kubernetes field names. Everything else (annotations, managedFields, selectors, status
//! conditions, ...) is skipped by the decoder without being stored, so decoding a large
//! object costs little. `null` is accepted wherever Kubernetes may write it.
//!
//! Nothing here is validated: [`crate::Service::from_wire`] and
//! [`crate::EndpointSlice::from_wire`] turn these into compact, checked values.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireMeta {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// RFC 3339, as the API server writes it: on a frontend clash the older Service wins.
    pub creation_timestamp: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceWire {
    #[serde(default, deserialize_with = "nullable")]
    pub metadata: WireMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: ServiceSpecWire,
    #[serde(default, deserialize_with = "nullable")]
    pub status: ServiceStatusWire,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpecWire {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    #[serde(rename = "clusterIP")]
    pub cluster_ip: Option<String>,
    #[serde(rename = "clusterIPs", default, deserialize_with = "nullable")]
    pub cluster_ips: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub ports: Vec<ServicePortWire>,
    #[serde(rename = "externalIPs", default, deserialize_with = "nullable")]
    pub external_ips: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub load_balancer_source_ranges: Vec<String>,
    pub external_traffic_policy: Option<String>,
    pub internal_traffic_policy: Option<String>,
    pub session_affinity: Option<String>,
    pub session_affinity_config: Option<SessionAffinityConfigWire>,
    pub health_check_node_port: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePortWire {
    pub name: Option<String>,
    pub protocol: Option<String>,
    pub port: Option<i64>,
    pub node_port: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct SessionAffinityConfigWire {
    #[serde(rename = "clientIP")]
    pub client_ip: Option<ClientIpConfigWire>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientIpConfigWire {
    pub timeout_seconds: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatusWire {
    #[serde(default, deserialize_with = "nullable")]
    pub load_balancer: LoadBalancerStatusWire,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct LoadBalancerStatusWire {
    #[serde(default, deserialize_with = "nullable")]
    pub ingress: Vec<LoadBalancerIngressWire>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerIngressWire {
    pub ip: Option<String>,
    /// `VIP` (or absent): the LB delivers packets still addressed to the VIP, so the node
    /// must capture them. `Proxy`: the LB connects to the node itself; nothing to capture.
    pub ip_mode: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSliceWire {
    #[serde(default, deserialize_with = "nullable")]
    pub metadata: WireMeta,
    pub address_type: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub ports: Vec<EndpointPortWire>,
    #[serde(default, deserialize_with = "nullable")]
    pub endpoints: Vec<EndpointWire>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct EndpointPortWire {
    pub name: Option<String>,
    pub protocol: Option<String>,
    pub port: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointWire {
    #[serde(default, deserialize_with = "nullable")]
    pub addresses: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub conditions: EndpointConditionsWire,
    pub node_name: Option<String>,
    pub hints: Option<EndpointHintsWire>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct EndpointConditionsWire {
    pub ready: Option<bool>,
    pub serving: Option<bool>,
    pub terminating: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointHintsWire {
    #[serde(default, deserialize_with = "nullable")]
    pub for_zones: Vec<HintWire>,
    #[serde(default, deserialize_with = "nullable")]
    pub for_nodes: Vec<HintWire>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct HintWire {
    pub name: Option<String>,
}
