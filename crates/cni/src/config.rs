//! The plugin request configuration a runtime sends on stdin (one plugin of a list).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

use crate::command::Command;
use crate::error::{CniError, INVALID_CONFIG};
use crate::gc::{self, GcAttachment, LEGACY_ATTACHMENTS_KEY, VALID_ATTACHMENTS_KEY};
use crate::json::{self, FieldError, FieldResult, Obj};
use crate::result::{CniResult, Dns};
use crate::runtime_config::RuntimeConfig;
use crate::version::{self, Version};

/// A plugin request configuration: the common fields typed, everything else kept raw so the
/// plugin can read its own section with [`NetConf::plugin_config`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetConf {
    /// `cniVersion` as declared.
    pub cni_version: String,
    /// `cniVersions` (1.1) as declared.
    pub cni_versions: Vec<String>,
    /// The version to speak: `cniVersion` when supported, else the highest of `cniVersions`.
    /// Results and errors go out in this version.
    pub version: Version,
    /// `name`: the network name.
    pub name: String,
    /// `type`: the plugin binary name.
    pub plugin_type: String,
    /// `disableCheck`.
    pub disable_check: bool,
    /// `disableGC`.
    pub disable_gc: bool,
    /// `capabilities`.
    pub capabilities: BTreeMap<String, bool>,
    /// `runtimeConfig` (empty when absent).
    pub runtime_config: RuntimeConfig,
    /// `args` (conventions: under `cni`).
    pub args: Option<Map<String, Value>>,
    /// `prevResult`, read in its own `cniVersion` (the config's version when it has none).
    pub prev_result: Option<CniResult>,
    /// `cni.dev/valid-attachments` (GC). `None` when the runtime sent no list; see
    /// [`crate::gc`] for why that is not the same as an empty list.
    pub valid_attachments: Option<Vec<GcAttachment>>,
    /// `ipam`.
    pub ipam: Option<Ipam>,
    /// `dns` (empty when absent).
    pub dns: Dns,
    raw: Map<String, Value>,
}

/// The `ipam` section: its `type` plus the whole object for the IPAM implementation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ipam {
    /// `ipam.type`, when set and non-empty.
    pub plugin_type: Option<String>,
    /// The whole `ipam` object.
    pub raw: Map<String, Value>,
}

/// The spec's rule for network names: an ASCII alphanumeric, then alphanumerics, `_`, `.`, `-`.
pub(crate) fn check_network_name(name: &str, path: &str) -> FieldResult<()> {
    let mut bytes = name.bytes();
    let first_ok = bytes.next().is_some_and(|b| b.is_ascii_alphanumeric());
    let rest_ok = bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if first_ok && rest_ok {
        Ok(())
    } else {
        Err(FieldError::invalid(
            path,
            format!("{name:?} is not a valid network name (a letter or digit, then letters, digits, '_', '.' or '-')"),
        ))
    }
}

/// A plugin type names a binary: non-empty, no path separators or NUL.
pub(crate) fn check_plugin_type(plugin_type: &str, path: &str) -> FieldResult<()> {
    if plugin_type.is_empty()
        || plugin_type.contains(['/', '\\', '\0'])
        || plugin_type == ".."
        || plugin_type == "."
    {
        return Err(FieldError::invalid(
            path,
            format!(
                "{plugin_type:?} is not a valid plugin type (a binary name without '/' or '\\')"
            ),
        ));
    }
    Ok(())
}

/// Reads `cniVersion` (required) and `cniVersions` and negotiates.
/// `for_request` picks the version a plugin answers in (the declared one first); otherwise the
/// highest offered, as a runtime negotiates for a whole list.
pub(crate) fn read_versions(
    obj: &Obj<'_>,
    for_request: bool,
) -> Result<(String, Vec<String>, Version), CniError> {
    let cni_version = obj
        .req_str("cniVersion")
        .map_err(|e| e.into_cni(INVALID_CONFIG))?
        .to_owned();
    let cni_versions = obj
        .string_list("cniVersions")
        .map_err(|e| e.into_cni(INVALID_CONFIG))?;
    let version = if for_request {
        version::negotiate_request(&cni_version, &cni_versions)?
    } else {
        version::negotiate(&cni_version, &cni_versions)?
    };
    Ok((cni_version, cni_versions, version))
}

impl NetConf {
    /// A minimal config, e.g. for tests or for building a request.
    pub fn new(version: Version, name: impl Into<String>, plugin_type: impl Into<String>) -> Self {
        NetConf {
            cni_version: version.to_string(),
            cni_versions: Vec::new(),
            version,
            name: name.into(),
            plugin_type: plugin_type.into(),
            disable_check: false,
            disable_gc: false,
            capabilities: BTreeMap::new(),
            runtime_config: RuntimeConfig::default(),
            args: None,
            prev_result: None,
            valid_attachments: None,
            ipam: None,
            dns: Dns::default(),
            raw: Map::new(),
        }
    }

    /// Reads a request config from stdin bytes.
    ///
    /// Codes: 6 for bytes that are not a JSON object; 7 for a missing or wrong-typed field
    /// (named, e.g. `prevResult.ips[0].address`); 1 when no declared version is supported
    /// (including a `cniVersion` that is not a version at all, like `"abc"`). `cniVersion`,
    /// `name` and `type` are required. Unknown fields are kept.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, CniError> {
        let map = json::decode_object(bytes, "network configuration")?;
        Self::from_value(&Value::Object(map))
    }

    /// [`NetConf::from_slice`], then refuses a command the negotiated version does not define
    /// (code 1: CHECK needs 0.4.0, STATUS and GC 1.1.0). VERSION does not use a NetConf: read
    /// its request with [`crate::requested_version`].
    pub fn from_slice_for(command: Command, bytes: &[u8]) -> Result<Self, CniError> {
        let config = Self::from_slice(bytes)?;
        version::require_command_support(config.version, command)?;
        Ok(config)
    }

    /// [`NetConf::from_slice`] for an already decoded value (code 6 if it is not an object).
    pub fn from_value(value: &Value) -> Result<Self, CniError> {
        let obj = Obj::new(value, "")
            .map_err(|_| CniError::decoding("network configuration must be a JSON object"))?;
        let (cni_version, cni_versions, version) = read_versions(&obj, true)?;
        let prev_result = match obj.get("prevResult") {
            None => None,
            Some(prev) => Some(CniResult::parse(
                prev,
                "prevResult",
                Some(version),
                INVALID_CONFIG,
            )?),
        };
        Self::parse_common(&obj, cni_version, cni_versions, version, prev_result)
            .map_err(|e| e.into_cni(INVALID_CONFIG))
    }

    fn parse_common(
        obj: &Obj<'_>,
        cni_version: String,
        cni_versions: Vec<String>,
        version: Version,
        prev_result: Option<CniResult>,
    ) -> FieldResult<Self> {
        let name = obj.req_str("name")?;
        check_network_name(name, "name")?;
        let plugin_type = obj.req_str("type")?;
        check_plugin_type(plugin_type, "type")?;
        let capabilities = match obj.opt_object("capabilities")? {
            None => BTreeMap::new(),
            Some(caps) => caps
                .map
                .iter()
                .map(|(key, value)| match value {
                    Value::Bool(flag) => Ok((key.clone(), *flag)),
                    _ => Err(FieldError::invalid(&caps.path_of(key), "must be a boolean")),
                })
                .collect::<FieldResult<_>>()?,
        };
        let runtime_config = match obj.get("runtimeConfig") {
            None => RuntimeConfig::default(),
            Some(value) => RuntimeConfig::parse(value, "runtimeConfig")?,
        };
        let ipam = match obj.opt_object("ipam")? {
            None => None,
            Some(section) => {
                let plugin_type = section.opt_nonempty_string("type")?;
                if let Some(plugin_type) = &plugin_type {
                    check_plugin_type(plugin_type, "ipam.type")?;
                }
                Some(Ipam {
                    plugin_type,
                    raw: section.map.clone(),
                })
            }
        };
        Ok(NetConf {
            cni_version,
            cni_versions,
            version,
            name: name.to_owned(),
            plugin_type: plugin_type.to_owned(),
            disable_check: obj.opt_bool("disableCheck")?.unwrap_or(false),
            disable_gc: obj.opt_bool("disableGC")?.unwrap_or(false),
            capabilities,
            runtime_config,
            args: obj.opt_object("args")?.map(|args| args.map.clone()),
            prev_result,
            valid_attachments: gc::parse_valid_attachments(obj)?,
            ipam,
            dns: match obj.opt_object("dns")? {
                Some(dns) => Dns::parse(&dns)?,
                None => Dns::default(),
            },
            raw: obj.map.clone(),
        })
    }

    /// The whole object as received (empty for [`NetConf::new`]).
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// A top-level field as received.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.raw.get(key)
    }

    /// Deserializes the plugin's own view of the whole config; failure is code 7.
    pub fn plugin_config<T: DeserializeOwned>(&self) -> Result<T, CniError> {
        serde_json::from_value(self.to_value()).map_err(|error| {
            CniError::invalid_config(format!(
                "invalid {} configuration: {error}",
                self.plugin_type
            ))
        })
    }

    /// Whether the config enables `capability` (`capabilities: {<name>: true}`).
    pub fn has_capability(&self, capability: &str) -> bool {
        self.capabilities.get(capability).copied().unwrap_or(false)
    }

    /// Whether `(container_id, ifname)` is listed as still valid; `None` when no list was sent.
    pub fn is_valid_attachment(&self, container_id: &str, ifname: &str) -> Option<bool> {
        self.valid_attachments.as_ref().map(|list| {
            list.iter()
                .any(|a| a.container_id == container_id && a.ifname == ifname)
        })
    }

    /// The config as JSON: unknown fields as received, common fields from the typed values
    /// (absent or default ones omitted), `prevResult` written in [`NetConf::version`].
    pub fn to_value(&self) -> Value {
        let mut out = self.raw.clone();
        out.insert("cniVersion".into(), json!(self.cni_version));
        set_or_remove(
            &mut out,
            "cniVersions",
            (!self.cni_versions.is_empty()).then(|| json!(self.cni_versions)),
        );
        out.insert("name".into(), json!(self.name));
        out.insert("type".into(), json!(self.plugin_type));
        set_or_remove(
            &mut out,
            "disableCheck",
            self.disable_check.then_some(Value::Bool(true)),
        );
        set_or_remove(
            &mut out,
            "disableGC",
            self.disable_gc.then_some(Value::Bool(true)),
        );
        set_or_remove(
            &mut out,
            "capabilities",
            (!self.capabilities.is_empty()).then(|| json!(self.capabilities)),
        );
        set_or_remove(
            &mut out,
            "runtimeConfig",
            (!self.runtime_config.is_empty()).then(|| self.runtime_config.to_value()),
        );
        set_or_remove(&mut out, "args", self.args.clone().map(Value::Object));
        set_or_remove(
            &mut out,
            "prevResult",
            self.prev_result
                .as_ref()
                .map(|prev| prev.to_value(self.version)),
        );
        out.remove(LEGACY_ATTACHMENTS_KEY);
        set_or_remove(
            &mut out,
            VALID_ATTACHMENTS_KEY,
            self.valid_attachments
                .as_ref()
                .map(|list| Value::Array(list.iter().map(GcAttachment::to_value).collect())),
        );
        set_or_remove(
            &mut out,
            "ipam",
            self.ipam.as_ref().map(|ipam| {
                let mut section = ipam.raw.clone();
                set_or_remove(
                    &mut section,
                    "type",
                    ipam.plugin_type.as_ref().map(|t| json!(t)),
                );
                Value::Object(section)
            }),
        );
        set_or_remove(
            &mut out,
            "dns",
            (!self.dns.is_empty()).then(|| self.dns.to_value()),
        );
        Value::Object(out)
    }

    /// [`NetConf::to_value`] as a string.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }
}

pub(crate) fn set_or_remove(out: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    match value {
        Some(value) => {
            out.insert(key.into(), value);
        }
        None => {
            out.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// The tuning request from the spec's ADD example (step 2), with a podman-style
    /// capability and a plugin section.
    fn spec_example() -> Value {
        json!({
            "cniVersion": "1.1.0",
            "name": "dbnet",
            "type": "tuning",
            "sysctl": {"net.core.somaxconn": "500"},
            "capabilities": {"mac": true},
            "runtimeConfig": {"mac": "00:11:22:33:44:66"},
            "prevResult": {
                "ips": [{"address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 2}],
                "routes": [{"dst": "0.0.0.0/0"}],
                "interfaces": [
                    {"name": "cni0", "mac": "00:11:22:33:44:55"},
                    {"name": "veth3243", "mac": "55:44:33:22:11:11"},
                    {"name": "eth0", "mac": "99:88:77:66:55:44", "sandbox": "/var/run/netns/blue"}
                ],
                "dns": {"nameservers": ["10.1.0.1"]}
            }
        })
    }

    fn parse(value: Value) -> Result<NetConf, CniError> {
        NetConf::from_slice(value.to_string().as_bytes())
    }

    #[test]
    fn reads_the_spec_example() {
        let config = parse(spec_example()).unwrap();
        assert_eq!(config.version, Version::V1_1_0);
        assert_eq!(config.name, "dbnet");
        assert_eq!(config.plugin_type, "tuning");
        assert!(config.has_capability("mac"));
        assert_eq!(
            config.runtime_config.mac.as_deref(),
            Some("00:11:22:33:44:66")
        );
        let prev = config.prev_result.as_ref().unwrap();
        // No cniVersion inside prevResult: it takes the config's.
        assert_eq!(prev.cni_version, Version::V1_1_0);
        assert_eq!(
            prev.interfaces[2].sandbox.as_deref(),
            Some("/var/run/netns/blue")
        );
        assert_eq!(
            config.get("sysctl"),
            Some(&json!({"net.core.somaxconn": "500"}))
        );
    }

    #[test]
    fn plugin_reads_its_own_section() {
        #[derive(Deserialize)]
        struct Tuning {
            name: String,
            sysctl: BTreeMap<String, String>,
        }
        let config = parse(spec_example()).unwrap();
        let tuning: Tuning = config.plugin_config().unwrap();
        assert_eq!(tuning.name, "dbnet");
        assert_eq!(tuning.sysctl["net.core.somaxconn"], "500");

        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct NeedsMtu {
            mtu: u32,
        }
        let error = config.plugin_config::<NeedsMtu>().unwrap_err();
        assert_eq!(error.code, 7);
        assert!(error.msg.contains("mtu"), "{}", error.msg);
    }

    #[test]
    fn prev_result_keeps_its_own_version() {
        let mut value = spec_example();
        value["cniVersion"] = json!("1.1.0");
        value["prevResult"]["cniVersion"] = json!("1.0.0");
        assert_eq!(
            parse(value).unwrap().prev_result.unwrap().cni_version,
            Version::V1_0_0
        );

        // podman: a 0.4.0 config carrying a 0.4.0 prevResult with per-IP versions.
        let podman = json!({
            "cniVersion": "0.4.0", "name": "podman", "type": "bridge",
            "prevResult": {"cniVersion": "0.4.0",
                           "ips": [{"version": "4", "address": "10.88.0.5/16", "gateway": "10.88.0.1"}]}
        });
        let config = parse(podman).unwrap();
        assert_eq!(config.version, Version::V0_4_0);
        assert_eq!(config.to_value()["prevResult"]["ips"][0]["version"], "4");
    }

    #[test]
    fn gc_config() {
        let config = NetConf::from_slice_for(
            Command::Gc,
            json!({"cniVersion": "1.1.0", "name": "n", "type": "weft",
                   "cni.dev/valid-attachments": [{"containerID": "c1", "ifname": "eth0"}]})
            .to_string()
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(config.is_valid_attachment("c1", "eth0"), Some(true));
        assert_eq!(config.is_valid_attachment("c2", "eth0"), Some(false));
        let without = parse(json!({"cniVersion": "1.1.0", "name": "n", "type": "weft"})).unwrap();
        assert_eq!(without.is_valid_attachment("c1", "eth0"), None);
    }

    #[test]
    fn command_gates() {
        let v100 = json!({"cniVersion": "1.0.0", "name": "n", "type": "weft"}).to_string();
        assert!(NetConf::from_slice_for(Command::Check, v100.as_bytes()).is_ok());
        assert_eq!(
            NetConf::from_slice_for(Command::Gc, v100.as_bytes())
                .unwrap_err()
                .code,
            1
        );
        assert_eq!(
            NetConf::from_slice_for(Command::Status, v100.as_bytes())
                .unwrap_err()
                .code,
            1
        );
        // The runtime declared 1.0.0 and will parse our reply as 1.0.0: STATUS does not exist there.
        let offered = json!({"cniVersion": "1.0.0", "cniVersions": ["1.0.0", "1.1.0"], "name": "n", "type": "weft"});
        let error =
            NetConf::from_slice_for(Command::Status, offered.to_string().as_bytes()).unwrap_err();
        assert_eq!(error.code, 1);
        let fallback = json!({"cniVersion": "0.3.1", "cniVersions": ["1.0.0", "1.1.0"], "name": "n", "type": "weft"});
        let config =
            NetConf::from_slice_for(Command::Status, fallback.to_string().as_bytes()).unwrap();
        assert_eq!(config.version, Version::V1_1_0);
    }

    #[test]
    fn round_trips_unknown_fields_and_typed_edits() {
        let mut value = spec_example();
        value["prevResult"]["cniVersion"] = json!("1.1.0");
        value["ipam"] = json!({"type": "weft-ipam", "pool": "a"});
        value["x-extra"] = json!([1, 2, 3]);
        let config = parse(value.clone()).unwrap();
        assert_eq!(config.to_value(), value);

        let mut edited = config.clone();
        edited.disable_check = true;
        edited.prev_result = None;
        let out = edited.to_value();
        assert_eq!(out["disableCheck"], true);
        assert!(out.get("prevResult").is_none());
        assert_eq!(out["x-extra"], json!([1, 2, 3]));

        let built = NetConf::new(Version::V1_0_0, "n", "weft").to_value();
        assert_eq!(
            built,
            json!({"cniVersion": "1.0.0", "name": "n", "type": "weft"})
        );
    }

    #[test]
    fn wrong_typed_fields_name_the_field() {
        let base = json!({"cniVersion": "1.0.0", "name": "n", "type": "weft"});
        let cases = [
            ("name", json!(5), "name"),
            ("type", json!("a/b"), "type"),
            ("disableCheck", json!("true"), "disableCheck"),
            (
                "capabilities",
                json!({"portMappings": "yes"}),
                "capabilities.portMappings",
            ),
            ("ipam", json!([]), "ipam"),
            ("ipam", json!({"type": 3}), "ipam.type"),
            ("dns", json!({"search": [1]}), "dns.search[0]"),
            ("args", json!("x"), "args"),
            ("cniVersions", json!("1.0.0"), "cniVersions"),
            (
                "runtimeConfig",
                json!({"bandwidth": 1}),
                "runtimeConfig.bandwidth",
            ),
        ];
        for (key, bad, field) in cases {
            let mut value = base.clone();
            value[key] = bad;
            let error = parse(value).unwrap_err();
            assert_eq!(error.code, 7, "{key}");
            assert!(
                error.msg.contains(&format!("{field:?}")),
                "{field}: {}",
                error.msg
            );
        }
    }
}
