//! The `weft` plugin's own netconf fields (documented in docs/cni.md), read from the request
//! and validated with errors that name the field.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use weft_cni::{CniError, NetConf};
use weft_ipam::IpamConfig;

/// Where IPAM keeps reservations when the netconf names no `ipam.dataDir`.
pub const DEFAULT_IPAM_DATA_DIR: &str = "/var/lib/weft/ipam";
/// The pods' IPv4 next hop. Link-local, so it never collides with a cluster address; every
/// pod reaches it through a static neighbour entry, so nothing has to answer ARP for it.
pub const DEFAULT_GATEWAY_V4: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 1);
/// The pods' IPv6 next hop, likewise link-local and resolved by a static neighbour entry.
pub const DEFAULT_GATEWAY_V6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
/// The MTU when the netconf sets none: a plain Ethernet node without an overlay. The agent
/// always writes the overlay-adjusted MTU into the conflist it generates.
pub const DEFAULT_MTU: u32 = 1500;
/// IPv6 needs links of at least 1280 bytes; weft refuses smaller MTUs for both families so a
/// dual-stack pod never half-works.
const MIN_MTU: u32 = 1280;
const MAX_MTU: u32 = 65535;

/// Every host-side pod veth carries this MAC. Pods resolve their gateway to it statically, so
/// one well-known address means no per-pod neighbour state to keep in sync (and the kernel's
/// fallback path accepts the frames as addressed to the host).
pub const HOST_VETH_MAC: [u8; 6] = [0xee, 0xee, 0xee, 0xee, 0xee, 0xee];

/// The `weft` plugin's own entry in a conflist. The agent serialises this struct into the
/// conflist it writes and the plugin parses the same struct, so the two cannot drift; the
/// plugin then validates it into a [`PluginConfig`]. docs/cni.md documents the fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WeftNetConf {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_v4: Option<Ipv4Addr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_v6: Option<Ipv6Addr>,
    pub ipam: IpamSection,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datapath: Option<DatapathSection>,
}

/// `ipam`: host-local-shaped range sets (one per family) and the reservations directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpamSection {
    pub ranges: Vec<Vec<RangeSection>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
}

/// One range of a range set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RangeSection {
    pub subnet: IpNet,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_start: Option<IpAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_end: Option<IpAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
}

impl RangeSection {
    pub fn subnet(subnet: IpNet) -> RangeSection {
        RangeSection {
            subnet,
            range_start: None,
            range_end: None,
            gateway: None,
        }
    }
}

/// `datapath`: present when the node runs weft's eBPF datapath.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DatapathSection {
    pub pin_root: PathBuf,
    /// Written only when it is not `auto`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "attach_mode_name"
    )]
    pub attach_mode: Option<weft_datapath::AttachMode>,
}

/// `attachMode` as its name (`auto`, `tcx`, `clsact`).
mod attach_mode_name {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};
    use weft_datapath::AttachMode;

    pub fn serialize<S: Serializer>(mode: &Option<AttachMode>, s: S) -> Result<S::Ok, S::Error> {
        match mode {
            Some(mode) => s.serialize_str(mode.name()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<AttachMode>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(text) => text
                .parse()
                .map(Some)
                .map_err(|_| D::Error::custom(format!("{text:?} is not one of auto, tcx, clsact"))),
        }
    }
}

/// The validated plugin configuration.
#[derive(Debug, Clone)]
pub struct PluginConfig {
    pub network: String,
    pub mtu: u32,
    pub ipam: IpamConfig,
    pub gateway_v4: Ipv4Addr,
    pub gateway_v6: Ipv6Addr,
    /// When set, the eBPF datapath is in use: the plugin writes the pod's entries into the
    /// maps pinned here and attaches the pod program to the host veth.
    pub pin_root: Option<PathBuf>,
    /// How the pod program attaches (`datapath.attachMode`, written by the agent when it
    /// is not `auto`).
    pub attach_mode: weft_datapath::AttachMode,
}

impl PluginConfig {
    pub fn from_netconf(conf: &NetConf) -> Result<PluginConfig, CniError> {
        // The ipam section first: weft-ipam's messages for it are the most specific.
        let ipam_raw = conf
            .ipam
            .as_ref()
            .map(|i| serde_json::Value::Object(i.raw.clone()))
            .ok_or_else(|| CniError::invalid_config("ipam: missing (weft needs ipam.ranges)"))?;
        if let Some(kind) = conf.ipam.as_ref().and_then(|i| i.plugin_type.as_deref()) {
            return Err(CniError::invalid_config(format!(
                "ipam.type: {kind:?} is not supported; weft allocates addresses itself (remove ipam.type)"
            )));
        }
        let ipam = IpamConfig::from_json(&ipam_raw, Path::new(DEFAULT_IPAM_DATA_DIR))
            .map_err(|e| CniError::invalid_config(format!("ipam: {e}")))?;
        let own: WeftNetConf = serde_path_to_error::deserialize(conf.to_value())
            .map_err(|e| CniError::invalid_config(format!("{}: {}", e.path(), e.inner())))?;

        let mtu = match own.mtu {
            None => DEFAULT_MTU,
            Some(m) if (MIN_MTU..=MAX_MTU).contains(&m) => m,
            Some(m) => {
                return Err(CniError::invalid_config(format!(
                    "mtu: {m} is not between {MIN_MTU} and {MAX_MTU}"
                )))
            }
        };
        let gateway_v4 = match own.gateway_v4 {
            None => DEFAULT_GATEWAY_V4,
            Some(a) if a.is_link_local() => a,
            Some(a) => {
                return Err(CniError::invalid_config(format!(
                    "gatewayV4: {a} is not an IPv4 link-local address (169.254.0.0/16)"
                )))
            }
        };
        let gateway_v6 = match own.gateway_v6 {
            None => DEFAULT_GATEWAY_V6,
            Some(a) if a.is_unicast_link_local() => a,
            Some(a) => {
                return Err(CniError::invalid_config(format!(
                    "gatewayV6: {a} is not an IPv6 link-local address (fe80::/10)"
                )))
            }
        };
        let (pin_root, attach_mode) = match own.datapath {
            None => (None, weft_datapath::AttachMode::Auto),
            Some(dp) => {
                if !dp.pin_root.is_absolute() {
                    return Err(CniError::invalid_config(format!(
                        "datapath.pinRoot: {:?} must be absolute",
                        dp.pin_root
                    )));
                }
                (Some(dp.pin_root), dp.attach_mode.unwrap_or_default())
            }
        };
        Ok(PluginConfig {
            network: conf.name.clone(),
            mtu,
            ipam,
            gateway_v4,
            gateway_v6,
            pin_root,
            attach_mode,
        })
    }

    /// The gateway of an address's family.
    pub fn gateway_for(&self, addr: IpAddr) -> IpAddr {
        match addr {
            IpAddr::V4(_) => IpAddr::V4(self.gateway_v4),
            IpAddr::V6(_) => IpAddr::V6(self.gateway_v6),
        }
    }
}
