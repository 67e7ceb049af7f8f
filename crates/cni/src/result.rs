//! The ADD success result (also `prevResult`), readable from 0.4.0 and 1.x JSON and writable as
//! any supported version.
//!
//! Output follows libcni's converters so every runtime reads it the way it reads the reference
//! plugins: empty lists, empty strings and absent options are omitted (never `null`); 0.4.0
//! output adds `version` to each IP and keeps only `name`, `mac` and `sandbox` per interface;
//! routes carry all their fields in every version (libcni shares one route type across them).
//! Unknown fields in an input result are ignored.

use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::{json, Map, Value};

use crate::error::{CniError, DECODING_FAILURE};
use crate::json::{self, FieldError, FieldResult, Obj};
use crate::version::Version;

/// An ADD result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniResult {
    /// The version the result was read in or built for. Output uses the version given to
    /// [`CniResult::to_value`], not this one.
    pub cni_version: Version,
    /// Interfaces created by the attachment, host side included.
    pub interfaces: Vec<Interface>,
    /// Addresses assigned.
    pub ips: Vec<IpConfig>,
    /// Routes created.
    pub routes: Vec<Route>,
    /// DNS settings.
    pub dns: Dns,
}

/// One interface of a result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interface {
    /// Interface name.
    pub name: String,
    /// Hardware address, as text (not only Ethernet: InfiniBand has 20 bytes).
    pub mac: Option<String>,
    /// MTU (1.1.0).
    pub mtu: Option<u32>,
    /// Netns path for container interfaces; `None` on the host.
    pub sandbox: Option<String>,
    /// Socket path, e.g. vhost-user (1.1.0).
    pub socket_path: Option<String>,
    /// PCI device ID (1.1.0).
    pub pci_id: Option<String>,
}

/// One assigned address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpConfig {
    /// Address with prefix, host bits kept (`10.1.0.5/16`).
    pub address: IpNet,
    /// Default gateway for the subnet.
    pub gateway: Option<IpAddr>,
    /// Index into `interfaces`. IPAM plugins leave it out.
    pub interface: Option<usize>,
}

/// One route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Destination prefix.
    pub dst: IpNet,
    /// Next hop; when absent the IP's gateway may be used.
    pub gw: Option<IpAddr>,
    /// Path MTU (1.1.0).
    pub mtu: Option<u32>,
    /// MSS to advertise (1.1.0).
    pub advmss: Option<u32>,
    /// Route priority, lower first (1.1.0).
    pub priority: Option<u32>,
    /// Routing table (1.1.0).
    pub table: Option<u32>,
    /// Route scope: 0 global, 253 link, 254 host (1.1.0).
    pub scope: Option<u32>,
}

/// DNS settings, in results and in network configs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dns {
    /// Name servers, in priority order (IPv4 or IPv6 address text).
    pub nameservers: Vec<String>,
    /// Local domain.
    pub domain: Option<String>,
    /// Search domains, in priority order.
    pub search: Vec<String>,
    /// Resolver options.
    pub options: Vec<String>,
}

impl Dns {
    /// True when nothing is set; an empty DNS section is omitted from output.
    pub fn is_empty(&self) -> bool {
        self.nameservers.is_empty()
            && self.domain.is_none()
            && self.search.is_empty()
            && self.options.is_empty()
    }

    pub(crate) fn parse(obj: &Obj<'_>) -> FieldResult<Dns> {
        Ok(Dns {
            nameservers: obj.string_list("nameservers")?,
            domain: obj.opt_nonempty_string("domain")?,
            search: obj.string_list("search")?,
            options: obj.string_list("options")?,
        })
    }

    /// The DNS object with empty parts omitted.
    pub fn to_value(&self) -> Value {
        let mut out = Map::new();
        put_list(&mut out, "nameservers", &self.nameservers);
        put_opt(&mut out, "domain", self.domain.as_ref());
        put_list(&mut out, "search", &self.search);
        put_list(&mut out, "options", &self.options);
        Value::Object(out)
    }
}

fn put_list(out: &mut Map<String, Value>, key: &str, items: &[String]) {
    if !items.is_empty() {
        out.insert(key.into(), json!(items));
    }
}

fn put_opt<T: serde::Serialize>(out: &mut Map<String, Value>, key: &str, item: Option<&T>) {
    if let Some(item) = item {
        out.insert(key.into(), json!(item));
    }
}

impl CniResult {
    /// An empty result for `version`.
    pub fn new(version: Version) -> Self {
        Self {
            cni_version: version,
            interfaces: Vec::new(),
            ips: Vec::new(),
            routes: Vec::new(),
            dns: Dns::default(),
        }
    }

    /// Reads a standalone result (e.g. a plugin's stdout). `cniVersion` is required. Bytes that
    /// are not a result are code 6 (decode failure); an unsupported version is code 1.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, CniError> {
        let value = json::decode(bytes, "result")?;
        Self::from_value(&value, None)
    }

    /// Reads a result from JSON, using `fallback` when it has no `cniVersion` (libcni assumes the
    /// config's version for a prevResult without one). Shape errors are code 6.
    pub fn from_value(value: &Value, fallback: Option<Version>) -> Result<Self, CniError> {
        Self::parse(value, "", fallback, DECODING_FAILURE)
    }

    /// Shared reader: `path` prefixes field names in errors, `shape_code` is the code for a
    /// malformed field (6 standalone, 7 inside a network config).
    pub(crate) fn parse(
        value: &Value,
        path: &str,
        fallback: Option<Version>,
        shape_code: u32,
    ) -> Result<Self, CniError> {
        let obj = Obj::new(value, path).map_err(|e| e.into_cni(shape_code))?;
        let version_path = obj.path_of("cniVersion");
        let version = match obj
            .opt_str("cniVersion")
            .map_err(|e| e.into_cni(shape_code))?
        {
            Some(text) if !text.is_empty() => text.parse::<Version>().map_err(|_| {
                CniError::incompatible_version(format!(
                    "{version_path:?} {text:?} is not a CNI version"
                ))
            })?,
            _ => fallback.ok_or_else(|| FieldError::missing(&version_path).into_cni(shape_code))?,
        };
        if !version.is_supported() {
            return Err(CniError::incompatible_version(format!(
                "{version_path:?} is {version}, which weft does not support"
            )));
        }
        Self::parse_body(&obj, version).map_err(|e| e.into_cni(shape_code))
    }

    fn parse_body(obj: &Obj<'_>, version: Version) -> FieldResult<Self> {
        let each = |key: &str| -> FieldResult<Vec<Obj<'_>>> {
            let path = obj.path_of(key);
            obj.opt_array(key)?
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(position, item)| Obj::new(item, json::index(&path, position)))
                .collect()
        };
        Ok(CniResult {
            cni_version: version,
            interfaces: each("interfaces")?
                .iter()
                .map(Interface::parse)
                .collect::<FieldResult<_>>()?,
            ips: each("ips")?
                .iter()
                .map(|ip| IpConfig::parse(ip, version))
                .collect::<FieldResult<_>>()?,
            routes: each("routes")?
                .iter()
                .map(Route::parse)
                .collect::<FieldResult<_>>()?,
            dns: match obj.opt_object("dns")? {
                Some(dns) => Dns::parse(&dns)?,
                None => Dns::default(),
            },
        })
    }

    /// The result as JSON in `version` (see the module notes for what each version carries).
    pub fn to_value(&self, version: Version) -> Value {
        let legacy = version.uses_legacy_result();
        let mut out = Map::new();
        out.insert("cniVersion".into(), json!(version.to_string()));
        if !self.interfaces.is_empty() {
            let interfaces = self.interfaces.iter().map(|i| i.to_value(legacy)).collect();
            out.insert("interfaces".into(), Value::Array(interfaces));
        }
        if !self.ips.is_empty() {
            let ips = self.ips.iter().map(|ip| ip.to_value(legacy)).collect();
            out.insert("ips".into(), Value::Array(ips));
        }
        if !self.routes.is_empty() {
            let routes = self.routes.iter().map(Route::to_value).collect();
            out.insert("routes".into(), Value::Array(routes));
        }
        if !self.dns.is_empty() {
            out.insert("dns".into(), self.dns.to_value());
        }
        Value::Object(out)
    }

    /// [`CniResult::to_value`] as a string, ready for stdout.
    pub fn to_json(&self, version: Version) -> String {
        self.to_value(version).to_string()
    }

    /// This result as it reads after a trip through `version`: the version is set and, for
    /// 0.4.0, the interface fields 0.4.0 lacks are dropped.
    pub fn as_version(&self, version: Version) -> CniResult {
        let mut converted = self.clone();
        converted.cni_version = version;
        if version.uses_legacy_result() {
            for interface in &mut converted.interfaces {
                interface.mtu = None;
                interface.socket_path = None;
                interface.pci_id = None;
            }
        }
        converted
    }
}

impl Interface {
    fn parse(obj: &Obj<'_>) -> FieldResult<Self> {
        Ok(Interface {
            // libcni accepts a missing name as empty; a chained plugin should not be stricter.
            name: obj.opt_str("name")?.unwrap_or_default().to_owned(),
            mac: obj.opt_nonempty_string("mac")?,
            mtu: obj.opt_u32("mtu")?,
            sandbox: obj.opt_nonempty_string("sandbox")?,
            socket_path: obj.opt_nonempty_string("socketPath")?,
            pci_id: obj.opt_nonempty_string("pciID")?,
        })
    }

    fn to_value(&self, legacy: bool) -> Value {
        let mut out = Map::new();
        out.insert("name".into(), json!(self.name));
        put_opt(&mut out, "mac", self.mac.as_ref());
        put_opt(&mut out, "sandbox", self.sandbox.as_ref());
        if !legacy {
            put_opt(&mut out, "mtu", self.mtu.as_ref());
            put_opt(&mut out, "socketPath", self.socket_path.as_ref());
            put_opt(&mut out, "pciID", self.pci_id.as_ref());
        }
        Value::Object(out)
    }
}

/// An optional address where `""` means absent (Go's `net.IP` decodes `""` as nil).
fn opt_addr(obj: &Obj<'_>, key: &str) -> FieldResult<Option<IpAddr>> {
    match obj.opt_str(key)? {
        None | Some("") => Ok(None),
        Some(_) => obj.opt_parsed(key, "an IP address"),
    }
}

fn req_cidr(obj: &Obj<'_>, key: &str) -> FieldResult<IpNet> {
    obj.opt_parsed(key, "an address in CIDR notation")?
        .ok_or_else(|| FieldError::missing(&obj.path_of(key)))
}

impl IpConfig {
    fn parse(obj: &Obj<'_>, version: Version) -> FieldResult<Self> {
        let address = req_cidr(obj, "address")?;
        if version.uses_legacy_result() {
            // 0.4.0 labels each IP with its family; when present it must be right, so a
            // corrupted cached result is caught rather than converted silently.
            let family = if address.addr().is_ipv4() { "4" } else { "6" };
            match obj.opt_str("version")? {
                None => {}
                Some(label) if label == family => {}
                Some(label) => {
                    return Err(FieldError::invalid(
                        &obj.path_of("version"),
                        format!("is {label:?} but the address is IPv{family}"),
                    ))
                }
            }
        }
        let interface =
            match obj.opt_u64("interface")? {
                None => None,
                Some(position) => Some(usize::try_from(position).map_err(|_| {
                    FieldError::invalid(&obj.path_of("interface"), "is out of range")
                })?),
            };
        Ok(IpConfig {
            address,
            gateway: opt_addr(obj, "gateway")?,
            interface,
        })
    }

    fn to_value(&self, legacy: bool) -> Value {
        let mut out = Map::new();
        if legacy {
            let family = if self.address.addr().is_ipv4() {
                "4"
            } else {
                "6"
            };
            out.insert("version".into(), json!(family));
        }
        out.insert("address".into(), json!(self.address.to_string()));
        put_opt(
            &mut out,
            "gateway",
            self.gateway.map(|gw| gw.to_string()).as_ref(),
        );
        put_opt(&mut out, "interface", self.interface.as_ref());
        Value::Object(out)
    }
}

impl Route {
    /// A route to `dst` with nothing else set.
    pub fn to(dst: IpNet) -> Self {
        Route {
            dst,
            gw: None,
            mtu: None,
            advmss: None,
            priority: None,
            table: None,
            scope: None,
        }
    }

    fn parse(obj: &Obj<'_>) -> FieldResult<Self> {
        Ok(Route {
            dst: req_cidr(obj, "dst")?,
            gw: opt_addr(obj, "gw")?,
            mtu: obj.opt_u32("mtu")?,
            advmss: obj.opt_u32("advmss")?,
            priority: obj.opt_u32("priority")?,
            table: obj.opt_u32("table")?,
            scope: obj.opt_u32("scope")?,
        })
    }

    fn to_value(&self) -> Value {
        let mut out = Map::new();
        out.insert("dst".into(), json!(self.dst.to_string()));
        put_opt(&mut out, "gw", self.gw.map(|gw| gw.to_string()).as_ref());
        put_opt(&mut out, "mtu", self.mtu.as_ref());
        put_opt(&mut out, "advmss", self.advmss.as_ref());
        put_opt(&mut out, "priority", self.priority.as_ref());
        put_opt(&mut out, "table", self.table.as_ref());
        put_opt(&mut out, "scope", self.scope.as_ref());
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bridge result from the spec's ADD example, plus 1.1 fields.
    fn sample_v110() -> Value {
        json!({
            "cniVersion": "1.1.0",
            "interfaces": [
                {"name": "cni0", "mac": "00:11:22:33:44:55"},
                {"name": "veth3243", "mac": "55:44:33:22:11:11", "mtu": 1450},
                {"name": "eth0", "mac": "99:88:77:66:55:44", "sandbox": "/var/run/netns/blue",
                 "mtu": 1450, "socketPath": "/run/vhost.sock", "pciID": "0000:04:00.5"}
            ],
            "ips": [
                {"address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 2},
                {"address": "2001:db8::5/64", "interface": 2}
            ],
            "routes": [
                {"dst": "0.0.0.0/0"},
                {"dst": "2001:db8:1::/48", "gw": "2001:db8::1", "mtu": 1400, "advmss": 1360,
                 "priority": 10, "table": 100, "scope": 0}
            ],
            "dns": {"nameservers": ["10.1.0.1"], "domain": "cluster.local",
                    "search": ["svc.cluster.local"], "options": ["ndots:5"]}
        })
    }

    #[test]
    fn reads_and_writes_1_1_0_exactly() {
        let result = CniResult::from_value(&sample_v110(), None).unwrap();
        assert_eq!(result.cni_version, Version::V1_1_0);
        assert_eq!(result.interfaces.len(), 3);
        assert_eq!(result.ips[0].address.to_string(), "10.1.0.5/16");
        assert_eq!(result.ips[0].interface, Some(2));
        assert_eq!(result.routes[1].scope, Some(0));
        assert_eq!(result.to_value(Version::V1_1_0), sample_v110());
    }

    #[test]
    fn writes_0_4_0_with_ip_versions_and_short_interfaces() {
        let result = CniResult::from_value(&sample_v110(), None).unwrap();
        let legacy = result.to_value(Version::V0_4_0);
        assert_eq!(legacy["cniVersion"], "0.4.0");
        assert_eq!(legacy["ips"][0]["version"], "4");
        assert_eq!(legacy["ips"][1]["version"], "6");
        assert_eq!(
            legacy["interfaces"][2],
            json!({"name": "eth0", "mac": "99:88:77:66:55:44", "sandbox": "/var/run/netns/blue"})
        );
        let back = CniResult::from_value(&legacy, None).unwrap();
        assert_eq!(back, result.as_version(Version::V0_4_0));
        // 0.4.0 -> 1.0.0 -> 1.1.0 keeps everything 0.4.0 had.
        let v100 = CniResult::from_value(&back.to_value(Version::V1_0_0), None).unwrap();
        assert_eq!(v100, back.as_version(Version::V1_0_0));
        assert!(v100.to_value(Version::V1_0_0)["ips"][0]
            .get("version")
            .is_none());
    }

    #[test]
    fn omits_empty_parts_and_never_writes_null() {
        let mut result = CniResult::new(Version::V1_0_0);
        assert_eq!(
            result.to_value(Version::V1_0_0),
            json!({"cniVersion": "1.0.0"})
        );
        result.interfaces.push(Interface {
            name: "eth0".into(),
            ..Interface::default()
        });
        result.ips.push(IpConfig {
            address: "10.0.0.2/24".parse().unwrap(),
            gateway: None,
            interface: None,
        });
        assert_eq!(
            result.to_value(Version::V1_0_0),
            json!({"cniVersion": "1.0.0", "interfaces": [{"name": "eth0"}],
                   "ips": [{"address": "10.0.0.2/24"}]})
        );
        assert!(!result.to_json(Version::V0_4_0).contains("null"));
    }

    #[test]
    fn lenient_where_libcni_is() {
        let value = json!({
            "cniVersion": "0.4.0",
            "interfaces": [{"mac": ""}],
            "ips": [{"address": "10.0.0.2/24", "gateway": "", "unknown": true}],
            "routes": [{"dst": "0.0.0.0/0", "gw": null}],
            "dns": {},
            "extra": "ignored"
        });
        let result = CniResult::from_value(&value, None).unwrap();
        assert_eq!(result.interfaces[0], Interface::default());
        assert_eq!(result.ips[0].gateway, None);
        assert_eq!(result.routes[0].gw, None);
        // An IPAM-style result without cniVersion takes the fallback.
        let ipam = json!({"ips": [{"address": "10.1.0.5/16", "gateway": "10.1.0.1"}]});
        let result = CniResult::from_value(&ipam, Some(Version::V1_0_0)).unwrap();
        assert_eq!(result.cni_version, Version::V1_0_0);
    }

    #[test]
    fn malformed_results() {
        let cases = [
            (json!([]), 6),
            (json!({"ips": []}), 6),
            (json!({"cniVersion": "0.3.1"}), 1),
            (json!({"cniVersion": "x"}), 1),
            (json!({"cniVersion": 1}), 6),
            (
                json!({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.1"}]}),
                6,
            ),
            (
                json!({"cniVersion": "1.0.0", "ips": [{"gateway": "10.0.0.1"}]}),
                6,
            ),
            (
                json!({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.1/8", "interface": -1}]}),
                6,
            ),
            (
                json!({"cniVersion": "1.0.0", "routes": [{"dst": "0.0.0.0/0", "mtu": "1500"}]}),
                6,
            ),
            (json!({"cniVersion": "1.0.0", "interfaces": {}}), 6),
            (
                json!({"cniVersion": "1.0.0", "dns": {"nameservers": "10.0.0.1"}}),
                6,
            ),
            (
                json!({"cniVersion": "0.4.0", "ips": [{"version": "6", "address": "10.0.0.1/8"}]}),
                6,
            ),
            (
                json!({"cniVersion": "0.4.0", "ips": [{"version": 4, "address": "10.0.0.1/8"}]}),
                6,
            ),
        ];
        for (value, code) in cases {
            let error = CniResult::from_value(&value, None).unwrap_err();
            assert_eq!(error.code, code, "{value}: {error}");
        }
        let error = CniResult::from_value(
            &json!({"cniVersion": "1.0.0", "ips": [{"address": "bad"}]}),
            None,
        )
        .unwrap_err();
        assert!(error.msg.contains("ips[0].address"), "{}", error.msg);
    }

    #[test]
    fn from_slice_rejects_non_json() {
        assert_eq!(
            CniResult::from_slice(b"{\"cniVersion\":").unwrap_err().code,
            6
        );
        assert!(CniResult::from_slice(br#"{"cniVersion":"1.1.0"}"#).is_ok());
    }
}
