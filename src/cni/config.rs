//! The `weft` plugin's own netconf fields (documented in docs/cni.md), read from the request
//! and validated with errors that name the field.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use serde::Deserialize;
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

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Raw {
    mtu: Option<serde_json::Value>,
    gateway_v4: Option<String>,
    gateway_v6: Option<String>,
    datapath: Option<RawDatapath>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawDatapath {
    pin_root: Option<String>,
    attach_mode: Option<String>,
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
        let raw: Raw = conf.plugin_config()?;
        let mtu = match raw.mtu {
            None => DEFAULT_MTU,
            Some(v) => v
                .as_u64()
                .filter(|m| (MIN_MTU as u64..=MAX_MTU as u64).contains(m))
                .map(|m| m as u32)
                .ok_or_else(|| {
                    CniError::invalid_config(format!(
                        "mtu: {v} is not an integer between {MIN_MTU} and {MAX_MTU}"
                    ))
                })?,
        };
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
        let gateway_v4 = match raw.gateway_v4 {
            None => DEFAULT_GATEWAY_V4,
            Some(text) => match text.parse::<Ipv4Addr>() {
                Ok(a) if a.is_link_local() => a,
                _ => {
                    return Err(CniError::invalid_config(format!(
                        "gatewayV4: {text:?} is not an IPv4 link-local address (169.254.0.0/16)"
                    )))
                }
            },
        };
        let gateway_v6 = match raw.gateway_v6 {
            None => DEFAULT_GATEWAY_V6,
            Some(text) => match text.parse::<Ipv6Addr>() {
                Ok(a) if a.is_unicast_link_local() => a,
                _ => {
                    return Err(CniError::invalid_config(format!(
                        "gatewayV6: {text:?} is not an IPv6 link-local address (fe80::/10)"
                    )))
                }
            },
        };
        let mut attach_mode = weft_datapath::AttachMode::Auto;
        let pin_root = match raw.datapath {
            None => None,
            Some(dp) => {
                if let Some(mode) = &dp.attach_mode {
                    attach_mode = mode.parse().map_err(|_| {
                        CniError::invalid_config(format!(
                            "datapath.attachMode: {mode:?} is not one of auto, tcx, clsact"
                        ))
                    })?;
                }
                let root = dp
                    .pin_root
                    .ok_or_else(|| CniError::invalid_config("datapath.pinRoot: missing"))?;
                let root = PathBuf::from(root);
                if !root.is_absolute() {
                    return Err(CniError::invalid_config(format!(
                        "datapath.pinRoot: {root:?} must be absolute"
                    )));
                }
                Some(root)
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
