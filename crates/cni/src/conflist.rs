//! A network configuration list (`.conflist` file): what the agent writes and a runtime reads.

use serde_json::{json, Map, Value};

use crate::config::{check_network_name, check_plugin_type, read_versions, set_or_remove, NetConf};
use crate::error::{CniError, INVALID_CONFIG};
use crate::json::{self, FieldError, FieldResult, Obj};
use crate::version::Version;

/// A `.conflist`: list-level fields typed, each plugin kept as its raw object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetConfList {
    /// `cniVersion` as declared.
    pub cni_version: String,
    /// `cniVersions` (1.1) as declared.
    pub cni_versions: Vec<String>,
    /// The highest supported of `cniVersion` and `cniVersions`: what a runtime would send.
    pub version: Version,
    /// `name`.
    pub name: String,
    /// `disableCheck`.
    pub disable_check: bool,
    /// `disableGC`.
    pub disable_gc: bool,
    /// `plugins`, in order; each has a valid string `type`.
    pub plugins: Vec<Map<String, Value>>,
    raw: Map<String, Value>,
}

impl NetConfList {
    /// A list to write. Plugins need a `type`; `name` and `cniVersion` are injected per request.
    pub fn new(
        version: Version,
        name: impl Into<String>,
        plugins: Vec<Map<String, Value>>,
    ) -> Self {
        NetConfList {
            cni_version: version.to_string(),
            cni_versions: Vec::new(),
            version,
            name: name.into(),
            disable_check: false,
            disable_gc: false,
            plugins,
            raw: Map::new(),
        }
    }

    /// Reads a conflist. Codes as for [`NetConf::from_slice`]: 6 not a JSON object, 7 a bad
    /// field (named), 1 no supported version. `plugins` must be a non-empty array of objects,
    /// each with a valid `type`.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, CniError> {
        let map = json::decode_object(bytes, "network configuration list")?;
        Self::from_value(&Value::Object(map))
    }

    /// [`NetConfList::from_slice`] for an already decoded value.
    pub fn from_value(value: &Value) -> Result<Self, CniError> {
        let obj = Obj::new(value, "")
            .map_err(|_| CniError::decoding("network configuration list must be a JSON object"))?;
        let (cni_version, cni_versions, version) = read_versions(&obj, false)?;
        Self::parse_rest(&obj, cni_version, cni_versions, version)
            .map_err(|e| e.into_cni(INVALID_CONFIG))
    }

    fn parse_rest(
        obj: &Obj<'_>,
        cni_version: String,
        cni_versions: Vec<String>,
        version: Version,
    ) -> FieldResult<Self> {
        let name = obj.req_str("name")?;
        check_network_name(name, "name")?;
        let items = obj
            .opt_array("plugins")?
            .ok_or_else(|| FieldError::missing("plugins"))?;
        if items.is_empty() {
            return Err(FieldError::invalid(
                "plugins",
                "must list at least one plugin",
            ));
        }
        let plugins = items
            .iter()
            .enumerate()
            .map(|(position, item)| {
                let plugin = Obj::new(item, json::index("plugins", position))?;
                check_plugin_type(plugin.req_str("type")?, &plugin.path_of("type"))?;
                Ok(plugin.map.clone())
            })
            .collect::<FieldResult<_>>()?;
        Ok(NetConfList {
            cni_version,
            cni_versions,
            version,
            name: name.to_owned(),
            disable_check: obj.opt_bool("disableCheck")?.unwrap_or(false),
            disable_gc: obj.opt_bool("disableGC")?.unwrap_or(false),
            plugins,
            raw: obj.map.clone(),
        })
    }

    /// The whole object as received (empty for [`NetConfList::new`]).
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// The request config a runtime sends to each plugin, in list order: the plugin object
    /// with `name` and `cniVersion` (the negotiated version) injected over whatever it had.
    /// Attachment extras (`runtimeConfig`, `prevResult`) are per call and not added here.
    pub fn plugin_requests(&self) -> Vec<Map<String, Value>> {
        self.plugins
            .iter()
            .map(|plugin| {
                let mut request = plugin.clone();
                request.insert("cniVersion".into(), json!(self.version.to_string()));
                request.insert("name".into(), json!(self.name));
                request
            })
            .collect()
    }

    /// [`NetConfList::plugin_requests`] read as [`NetConf`]s.
    pub fn plugin_netconfs(&self) -> Result<Vec<NetConf>, CniError> {
        self.plugin_requests()
            .into_iter()
            .map(|request| NetConf::from_value(&Value::Object(request)))
            .collect()
    }

    /// The list as JSON: unknown fields as received, typed fields from their values.
    pub fn to_value(&self) -> Value {
        let mut out = self.raw.clone();
        out.insert("cniVersion".into(), json!(self.cni_version));
        set_or_remove(
            &mut out,
            "cniVersions",
            (!self.cni_versions.is_empty()).then(|| json!(self.cni_versions)),
        );
        out.insert("name".into(), json!(self.name));
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
        let plugins = self.plugins.iter().cloned().map(Value::Object).collect();
        out.insert("plugins".into(), Value::Array(plugins));
        Value::Object(out)
    }

    /// [`NetConfList::to_value`] pretty-printed, as a file would hold it.
    pub fn to_json_pretty(&self) -> String {
        // Serializing a Value cannot fail (keys are strings); fall back to compact just in case.
        serde_json::to_string_pretty(&self.to_value())
            .unwrap_or_else(|_| self.to_value().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dbnet() -> Value {
        json!({
            "cniVersion": "1.0.0",
            "cniVersions": ["0.4.0", "1.0.0", "1.1.0"],
            "name": "dbnet",
            "disableCheck": true,
            "loadOnlyInlinedPlugins": false,
            "plugins": [
                {"type": "weft", "ipam": {"type": "host-local", "subnet": "10.1.0.0/16"}},
                {"type": "portmap", "capabilities": {"portMappings": true}, "name": "stale", "cniVersion": "0.3.1"}
            ]
        })
    }

    #[test]
    fn reads_and_injects_per_plugin() {
        let list = NetConfList::from_value(&dbnet()).unwrap();
        assert_eq!(list.version, Version::V1_1_0);
        assert!(list.disable_check);
        let requests = list.plugin_requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[1]["name"], "dbnet");
        assert_eq!(requests[1]["cniVersion"], "1.1.0");
        assert_eq!(requests[1]["capabilities"], json!({"portMappings": true}));
        let configs = list.plugin_netconfs().unwrap();
        assert_eq!(
            configs[0].ipam.as_ref().unwrap().plugin_type.as_deref(),
            Some("host-local")
        );
        assert_eq!(configs[1].plugin_type, "portmap");
    }

    #[test]
    fn round_trips() {
        let list = NetConfList::from_value(&dbnet()).unwrap();
        assert_eq!(list.to_value(), dbnet());
        let reread = NetConfList::from_slice(list.to_json_pretty().as_bytes()).unwrap();
        assert_eq!(reread, list);

        let mut plugin = Map::new();
        plugin.insert("type".into(), json!("weft"));
        let written = NetConfList::new(Version::V1_1_0, "weft", vec![plugin]);
        assert_eq!(
            written.to_value(),
            json!({"cniVersion": "1.1.0", "name": "weft", "plugins": [{"type": "weft"}]})
        );
        assert_eq!(
            NetConfList::from_value(&written.to_value())
                .unwrap()
                .plugins,
            written.plugins
        );
    }

    #[test]
    fn malformed_lists() {
        let cases = [
            (json!([]), 6),
            (json!({"name": "n", "plugins": [{"type": "a"}]}), 7),
            (
                json!({"cniVersion": "0.3.1", "name": "n", "plugins": [{"type": "a"}]}),
                1,
            ),
            (
                json!({"cniVersion": "1.0.0", "plugins": [{"type": "a"}]}),
                7,
            ),
            (json!({"cniVersion": "1.0.0", "name": "n"}), 7),
            (
                json!({"cniVersion": "1.0.0", "name": "n", "plugins": []}),
                7,
            ),
            (
                json!({"cniVersion": "1.0.0", "name": "n", "plugins": [{}]}),
                7,
            ),
            (
                json!({"cniVersion": "1.0.0", "name": "n", "plugins": ["weft"]}),
                7,
            ),
            (
                json!({"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "../x"}]}),
                7,
            ),
        ];
        for (value, code) in cases {
            let error = NetConfList::from_value(&value).unwrap_err();
            assert_eq!(error.code, code, "{value}: {error}");
        }
        let error = NetConfList::from_value(&json!({"cniVersion": "1.0.0", "name": "n",
                                                    "plugins": [{"type": "a"}, {"type": 1}]}))
        .unwrap_err();
        assert!(error.msg.contains("plugins[1].type"), "{}", error.msg);
    }
}
