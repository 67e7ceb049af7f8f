//! `runtimeConfig`: capability arguments the runtime fills in.
//!
//! Field names match case-insensitively because runtimes disagree: containerd's CRI marshals Go
//! field names (`HostPort`, `IngressRate`), podman and the conventions use `hostPort`,
//! `ingressRate`. Only field names are folded; map keys such as annotation names keep their
//! case exactly.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde_json::{json, Map, Value};

use crate::addr::{IpRequest, MacAddr};
use crate::error::{CniError, INVALID_CONFIG};
use crate::json::{self, FieldError, FieldResult, Obj};

/// The capability key containerd's CRI uses for pod annotations.
pub const POD_ANNOTATIONS_KEY: &str = "io.kubernetes.cri.pod-annotations";
const POD_ANNOTATIONS_SHORT_KEY: &str = "podAnnotations";

/// Parsed `runtimeConfig`, plus the raw object for capabilities without a typed field
/// (`dns`, `ipRanges`, `cgroupPath`, ...; see [`RuntimeConfig::get`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// `portMappings`.
    pub port_mappings: Vec<PortMapping>,
    /// `bandwidth`.
    pub bandwidth: Option<Bandwidth>,
    /// `ips`: `<ip>[/<prefix>]` strings as sent; [`RuntimeConfig::requested_ips`] parses them.
    pub ips: Vec<String>,
    /// `mac` as sent; [`RuntimeConfig::mac_addr`] parses it.
    pub mac: Option<String>,
    /// `io.kubernetes.cri.pod-annotations` (or `podAnnotations`): annotation name -> value.
    pub pod_annotations: BTreeMap<String, String>,
    raw: Map<String, Value>,
}

/// One `portMappings` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    /// Port on the host.
    pub host_port: u16,
    /// Port in the container.
    pub container_port: u16,
    /// Transport protocol.
    pub protocol: Protocol,
    /// Host address to bind; `None` for all (containerd sends `""`).
    pub host_ip: Option<IpAddr>,
}

/// Port mapping protocol. Parsed case-insensitively (Kubernetes says `TCP`, runtimes `tcp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// Lower-case name, as the conventions write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Protocol {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        [Protocol::Tcp, Protocol::Udp, Protocol::Sctp]
            .into_iter()
            .find(|protocol| text.eq_ignore_ascii_case(protocol.as_str()))
            .ok_or(())
    }
}

/// `bandwidth`: rates in bits per second, bursts in bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bandwidth {
    /// Ingress rate.
    pub ingress_rate: Option<u64>,
    /// Ingress burst.
    pub ingress_burst: Option<u64>,
    /// Egress rate.
    pub egress_rate: Option<u64>,
    /// Egress burst.
    pub egress_burst: Option<u64>,
}

impl RuntimeConfig {
    /// Reads a `runtimeConfig` object. Malformed known fields are code 7 naming the field;
    /// unknown fields are kept in the raw object.
    pub fn from_value(value: &Value) -> Result<Self, CniError> {
        Self::parse(value, "runtimeConfig").map_err(|e| e.into_cni(INVALID_CONFIG))
    }

    pub(crate) fn parse(value: &Value, path: &str) -> FieldResult<Self> {
        let obj = Obj::new(value, path)?.ignoring_case();
        let port_mappings = match obj.opt_array("portMappings")? {
            None => Vec::new(),
            Some(items) => {
                let list_path = obj.path_of("portMappings");
                items
                    .iter()
                    .enumerate()
                    .map(|(position, item)| {
                        let entry =
                            Obj::new(item, json::index(&list_path, position))?.ignoring_case();
                        PortMapping::parse(&entry)
                    })
                    .collect::<FieldResult<_>>()?
            }
        };
        let bandwidth = match obj.opt_object("bandwidth")? {
            None => None,
            Some(entry) => Some(Bandwidth {
                ingress_rate: entry.opt_u64("ingressRate")?,
                ingress_burst: entry.opt_u64("ingressBurst")?,
                egress_rate: entry.opt_u64("egressRate")?,
                egress_burst: entry.opt_u64("egressBurst")?,
            }),
        };
        let annotations_key = if obj.get(POD_ANNOTATIONS_KEY).is_some() {
            POD_ANNOTATIONS_KEY
        } else {
            POD_ANNOTATIONS_SHORT_KEY
        };
        let pod_annotations = match obj.opt_object(annotations_key)? {
            None => BTreeMap::new(),
            Some(map) => map
                .map
                .iter()
                .map(|(name, value)| match value {
                    Value::String(text) => Ok((name.clone(), text.clone())),
                    _ => Err(FieldError::invalid(
                        &map.path_of(name),
                        "must be a string (annotation values are strings)",
                    )),
                })
                .collect::<FieldResult<_>>()?,
        };
        Ok(RuntimeConfig {
            port_mappings,
            bandwidth,
            ips: obj.string_list("ips")?,
            mac: obj.opt_str("mac")?.map(str::to_owned),
            pod_annotations,
            raw: obj.map.clone(),
        })
    }

    /// The object as received.
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// A capability by name, matched case-insensitively (exact match preferred).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.raw.get(name).or_else(|| {
            self.raw
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| value)
        })
    }

    /// True when the runtime passed nothing.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
            && self.port_mappings.is_empty()
            && self.bandwidth.is_none()
            && self.ips.is_empty()
            && self.mac.is_none()
            && self.pod_annotations.is_empty()
    }

    /// `ips` parsed; a malformed entry is code 7.
    pub fn requested_ips(&self) -> Result<Vec<IpRequest>, CniError> {
        self.ips
            .iter()
            .enumerate()
            .map(|(position, text)| {
                text.parse().map_err(|error| {
                    FieldError::invalid(&format!("runtimeConfig.ips[{position}]"), error)
                        .into_cni(INVALID_CONFIG)
                })
            })
            .collect()
    }

    /// `mac` parsed; a malformed value is code 7.
    pub fn mac_addr(&self) -> Result<Option<MacAddr>, CniError> {
        self.mac
            .as_deref()
            .map(|text| {
                text.parse().map_err(|error| {
                    FieldError::invalid("runtimeConfig.mac", error).into_cni(INVALID_CONFIG)
                })
            })
            .transpose()
    }

    /// The object to send: unknown keys as received, typed fields under their canonical
    /// (spec-case) names, so edits to the typed fields take effect.
    pub fn to_value(&self) -> Value {
        const TYPED: [&str; 6] = [
            "portMappings",
            "bandwidth",
            "ips",
            "mac",
            POD_ANNOTATIONS_KEY,
            POD_ANNOTATIONS_SHORT_KEY,
        ];
        let mut out: Map<String, Value> = self
            .raw
            .iter()
            .filter(|(key, _)| !TYPED.iter().any(|typed| key.eq_ignore_ascii_case(typed)))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        if !self.port_mappings.is_empty() {
            let list = self
                .port_mappings
                .iter()
                .map(PortMapping::to_value)
                .collect();
            out.insert("portMappings".into(), Value::Array(list));
        }
        if let Some(bandwidth) = &self.bandwidth {
            out.insert("bandwidth".into(), bandwidth.to_value());
        }
        if !self.ips.is_empty() {
            out.insert("ips".into(), json!(self.ips));
        }
        if let Some(mac) = &self.mac {
            out.insert("mac".into(), json!(mac));
        }
        if !self.pod_annotations.is_empty() {
            out.insert(POD_ANNOTATIONS_KEY.into(), json!(self.pod_annotations));
        }
        Value::Object(out)
    }
}

fn port(obj: &Obj<'_>, key: &str) -> FieldResult<u16> {
    let number = obj
        .opt_u64(key)?
        .ok_or_else(|| FieldError::missing(&obj.path_of(key)))?;
    u16::try_from(number)
        .map_err(|_| FieldError::invalid(&obj.path_of(key), format!("{number} is not a port")))
}

impl PortMapping {
    fn parse(obj: &Obj<'_>) -> FieldResult<Self> {
        let protocol_text = obj.req_str("protocol")?;
        let protocol = protocol_text.parse().map_err(|()| {
            FieldError::invalid(
                &obj.path_of("protocol"),
                format!("{protocol_text:?} is not tcp, udp or sctp"),
            )
        })?;
        let host_ip = match obj.opt_str("hostIP")? {
            None | Some("") => None,
            Some(_) => obj.opt_parsed("hostIP", "an IP address")?,
        };
        Ok(PortMapping {
            host_port: port(obj, "hostPort")?,
            container_port: port(obj, "containerPort")?,
            protocol,
            host_ip,
        })
    }

    fn to_value(&self) -> Value {
        let mut out = Map::new();
        out.insert("hostPort".into(), json!(self.host_port));
        out.insert("containerPort".into(), json!(self.container_port));
        out.insert("protocol".into(), json!(self.protocol.as_str()));
        if let Some(host_ip) = self.host_ip {
            out.insert("hostIP".into(), json!(host_ip.to_string()));
        }
        Value::Object(out)
    }
}

impl Bandwidth {
    fn to_value(self) -> Value {
        let mut out = Map::new();
        let fields = [
            ("ingressRate", self.ingress_rate),
            ("ingressBurst", self.ingress_burst),
            ("egressRate", self.egress_rate),
            ("egressBurst", self.egress_burst),
        ];
        for (key, value) in fields {
            if let Some(value) = value {
                out.insert(key.into(), json!(value));
            }
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What containerd 1.6 CRI sent (research/cni-clients.md section 3.5), plus annotations.
    fn containerd_shaped() -> Value {
        json!({
            "portMappings": [{"HostPort": 28183, "ContainerPort": 80, "Protocol": "tcp", "HostIP": ""}],
            "bandwidth": {"IngressRate": 10000000u64, "IngressBurst": 4294967295u64,
                          "EgressRate": 10000000u64, "EgressBurst": 4294967295u64},
            "io.kubernetes.cri.pod-annotations": {"Example.com/Mixed-Case": "Value",
                                                  "example.com/mixed-case": "other"}
        })
    }

    /// What podman 4.3 sent (section 2.5), plus the 1.1 conventions' `ips` and `mac`.
    fn podman_shaped() -> Value {
        json!({
            "portMappings": [{"hostPort": 28184, "containerPort": 80, "protocol": "tcp"}],
            "bandwidth": {"ingressRate": 10000000u64, "ingressBurst": 4294967295u64,
                          "egressRate": 10000000u64, "egressBurst": 4294967295u64},
            "ips": ["10.93.0.77/16"],
            "mac": "02:11:22:33:44:55",
            "cgroupPath": "/kubepods/pod1"
        })
    }

    #[test]
    fn containerd_capitalised_fields() {
        let config = RuntimeConfig::from_value(&containerd_shaped()).unwrap();
        assert_eq!(
            config.port_mappings,
            vec![PortMapping {
                host_port: 28183,
                container_port: 80,
                protocol: Protocol::Tcp,
                host_ip: None
            }]
        );
        let bandwidth = config.bandwidth.unwrap();
        assert_eq!(bandwidth.ingress_rate, Some(10_000_000));
        assert_eq!(bandwidth.egress_burst, Some(4_294_967_295));
        // Annotation names keep their case; two names differing only in case stay distinct.
        assert_eq!(config.pod_annotations.len(), 2);
        assert_eq!(config.pod_annotations["Example.com/Mixed-Case"], "Value");
        assert_eq!(config.pod_annotations["example.com/mixed-case"], "other");
    }

    #[test]
    fn podman_lower_case_fields() {
        let config = RuntimeConfig::from_value(&podman_shaped()).unwrap();
        assert_eq!(config.port_mappings[0].host_port, 28184);
        assert_eq!(config.bandwidth.unwrap().ingress_burst, Some(4_294_967_295));
        assert_eq!(
            config.requested_ips().unwrap()[0].to_string(),
            "10.93.0.77/16"
        );
        assert_eq!(
            config.mac_addr().unwrap().unwrap().to_string(),
            "02:11:22:33:44:55"
        );
        assert_eq!(config.get("CGROUPPATH"), Some(&json!("/kubepods/pod1")));
    }

    #[test]
    fn both_shapes_mean_the_same() {
        let containerd = RuntimeConfig::from_value(&containerd_shaped()).unwrap();
        let podman = RuntimeConfig::from_value(&podman_shaped()).unwrap();
        assert_eq!(containerd.bandwidth, podman.bandwidth);
        assert_eq!(
            containerd.port_mappings[0].container_port,
            podman.port_mappings[0].container_port
        );
    }

    #[test]
    fn to_value_canonicalises_field_names_only() {
        let config = RuntimeConfig::from_value(&containerd_shaped()).unwrap();
        let out = config.to_value();
        assert_eq!(
            out["portMappings"],
            json!([{"hostPort": 28183, "containerPort": 80, "protocol": "tcp"}])
        );
        assert_eq!(out["bandwidth"]["ingressBurst"], 4294967295u64);
        assert_eq!(out[POD_ANNOTATIONS_KEY]["Example.com/Mixed-Case"], "Value");
        assert_eq!(
            RuntimeConfig::from_value(&out).unwrap().port_mappings,
            config.port_mappings
        );
        let podman = RuntimeConfig::from_value(&podman_shaped())
            .unwrap()
            .to_value();
        assert_eq!(podman["cgroupPath"], "/kubepods/pod1");
    }

    #[test]
    fn short_annotation_key_and_protocol_case() {
        let config = RuntimeConfig::from_value(&json!({
            "PodAnnotations": {"A": "1"},
            "portMappings": [{"hostPort": 1, "containerPort": 2, "protocol": "UDP", "hostIP": "127.0.0.1"}]
        }))
        .unwrap();
        assert_eq!(config.pod_annotations["A"], "1");
        assert_eq!(config.port_mappings[0].protocol, Protocol::Udp);
        assert_eq!(
            config.port_mappings[0].host_ip,
            Some("127.0.0.1".parse().unwrap())
        );
    }

    #[test]
    fn malformed_runtime_config_is_code_7_naming_field() {
        let cases = [
            (json!([]), "runtimeConfig"),
            (json!({"portMappings": {}}), "runtimeConfig.portMappings"),
            (
                json!({"portMappings": [{"HostPort": 70000, "containerPort": 80, "protocol": "tcp"}]}),
                "runtimeConfig.portMappings[0].hostPort",
            ),
            (
                json!({"portMappings": [{"hostPort": 1, "protocol": "tcp"}]}),
                "runtimeConfig.portMappings[0].containerPort",
            ),
            (
                json!({"portMappings": [{"hostPort": 1, "containerPort": 2, "protocol": "icmp"}]}),
                "runtimeConfig.portMappings[0].protocol",
            ),
            (
                json!({"portMappings": [{"hostPort": 1, "containerPort": 2, "protocol": "tcp", "hostIP": "x"}]}),
                "runtimeConfig.portMappings[0].hostIP",
            ),
            (
                json!({"bandwidth": {"ingressRate": -5}}),
                "runtimeConfig.bandwidth.ingressRate",
            ),
            (json!({"ips": "10.0.0.1"}), "runtimeConfig.ips"),
            (json!({"mac": 5}), "runtimeConfig.mac"),
            (
                json!({"io.kubernetes.cri.pod-annotations": {"a": 1}}),
                "runtimeConfig.io.kubernetes.cri.pod-annotations.a",
            ),
        ];
        for (value, field) in cases {
            let error = RuntimeConfig::from_value(&value).unwrap_err();
            assert_eq!(error.code, 7, "{value}");
            assert!(
                error.msg.contains(&format!("{field:?}")),
                "{field}: {}",
                error.msg
            );
        }
        let bad_ip = RuntimeConfig::from_value(&json!({"ips": ["nope"], "mac": "zz"})).unwrap();
        assert_eq!(bad_ip.requested_ips().unwrap_err().code, 7);
        assert_eq!(bad_ip.mac_addr().unwrap_err().code, 7);
    }
}
