//! The agent's settings: the configuration file (`--config`), the flags, and the defaults,
//! merged (flag > file > default) and validated into [`Settings`]. The file is typed and
//! refuses unknown keys, and every error names the key (and the flag), so a hand-written
//! ConfigMap is as safe as a rendered one.
//!
//! ```yaml
//! nodeName: node1                    # usually NODE_NAME from the pod spec instead
//! source: kubernetes                 # or dir:/etc/weft/cluster
//! kubeconfig: /etc/weft/kubeconfig   # optional: the in-cluster service account otherwise
//! cluster:
//!   podCIDRs: [10.244.0.0/16, fd00:10:244::/48]   # required
//!   serviceCIDRs: [10.96.0.0/12]                  # required where Services are served
//!   nodePortRange: 30000-32767
//! overlay: {vni: 1, port: 8472, mtu: 1450}
//! datapath: {pinRoot: /sys/fs/bpf/weft, attachMode: auto, cgroupRoot: /run/weft/cgroupv2}
//! cni: {confDir: /etc/cni/net.d, confFile: 10-weft.conflist, networkName: weft,
//!       ipamDataDir: /var/lib/weft/ipam}
//! listen: 127.0.0.1:9962
//! resyncSeconds: 30
//! egressGuard: false
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;
use weft_datapath::AttachMode;
use weft_model::ClusterConfig;

use super::args::AgentArgs;

/// The configuration file. Every key is optional here; [`Settings::resolve`] says which
/// settings are required.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigFile {
    pub node_name: Option<String>,
    pub source: Option<String>,
    pub kubeconfig: Option<PathBuf>,
    #[serde(default)]
    pub cluster: ClusterSection,
    #[serde(default)]
    pub overlay: OverlaySection,
    #[serde(default)]
    pub datapath: DatapathSection,
    #[serde(default)]
    pub cni: CniSection,
    pub listen: Option<SocketAddr>,
    pub resync_seconds: Option<u64>,
    pub egress_guard: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterSection {
    #[serde(rename = "podCIDRs")]
    pub pod_cidrs: Option<Vec<IpNet>>,
    #[serde(rename = "serviceCIDRs")]
    pub service_cidrs: Option<Vec<IpNet>>,
    pub node_port_range: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OverlaySection {
    pub vni: Option<u32>,
    pub port: Option<u16>,
    pub mtu: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DatapathSection {
    pub pin_root: Option<PathBuf>,
    pub attach_mode: Option<String>,
    pub cgroup_root: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CniSection {
    pub conf_dir: Option<PathBuf>,
    pub conf_file: Option<String>,
    pub network_name: Option<String>,
    pub ipam_data_dir: Option<PathBuf>,
}

/// Where the cluster state comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSetting {
    /// The API server: this kubeconfig, or the in-cluster service account.
    Kubernetes { kubeconfig: Option<PathBuf> },
    /// A directory of Kubernetes-format YAML.
    Dir(PathBuf),
}

/// Every agent setting, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub node_name: String,
    pub source: SourceSetting,
    pub cluster: ClusterConfig,
    /// Empty until configured; the Service datapath refuses to start without them.
    pub service_cidrs: Vec<IpNet>,
    pub node_port_range: (u16, u16),
    /// Required by the socket programs (Services) when they are enabled.
    pub cgroup_root: Option<PathBuf>,
    pub pin_root: PathBuf,
    pub attach_mode: AttachMode,
    pub cni_conf_dir: PathBuf,
    pub cni_conf_file: String,
    pub network_name: String,
    pub ipam_data_dir: PathBuf,
    pub vxlan_vni: u32,
    pub vxlan_port: u16,
    pub mtu: Option<u32>,
    pub listen: SocketAddr,
    pub resync: Duration,
    pub egress_guard: bool,
}

/// The VXLAN header overhead on an IPv4 underlay: outer IPv4 (20) + UDP (8) + VXLAN (8)
/// + inner Ethernet (14).
pub const VXLAN_OVERHEAD: u32 = 50;
/// The overlay device's name.
pub const VXLAN_DEVICE: &str = "weft.vxlan";
/// Kubernetes' default NodePort range.
pub const DEFAULT_NODE_PORT_RANGE: (u16, u16) = (30000, 32767);
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9962";

/// A setting is missing or wrong; the message names the key and the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn bad(key: &str, flag: &str, message: impl std::fmt::Display) -> ConfigError {
    if flag.is_empty() {
        ConfigError(format!("{key}: {message}"))
    } else {
        ConfigError(format!("{key} ({flag}): {message}"))
    }
}

impl ConfigFile {
    /// Reads and parses `path`; errors name the file and the key path.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        ConfigFile::parse(&text).map_err(|e| ConfigError(format!("{}: {}", path.display(), e.0)))
    }

    /// Parses YAML or JSON (JSON is YAML).
    pub fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        if text.trim().is_empty() {
            return Ok(ConfigFile::default());
        }
        let de = serde_yaml::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let message = e.inner().to_string();
            if path == "." {
                ConfigError(message)
            } else {
                ConfigError(format!("{path}: {message}"))
            }
        })
    }
}

impl Settings {
    /// Flags win over the file, the file over the defaults.
    pub fn resolve(args: &AgentArgs, file: ConfigFile) -> Result<Settings, ConfigError> {
        let node_name = args
            .node_name
            .clone()
            .or(file.node_name)
            .ok_or_else(|| bad("nodeName", "--node-name", "required (or NODE_NAME)"))?;
        if node_name.is_empty() {
            return Err(bad("nodeName", "--node-name", "empty"));
        }

        let source_text = args
            .source
            .clone()
            .or(file.source)
            .ok_or_else(|| bad("source", "--source", "required: kubernetes or dir:PATH"))?;
        let kubeconfig = args.kubeconfig.clone().or(file.kubeconfig);
        let source = parse_source(&source_text, kubeconfig)?;

        let pod_cidrs = if args.cluster_cidrs.is_empty() {
            file.cluster.pod_cidrs.unwrap_or_default()
        } else {
            args.cluster_cidrs.clone()
        };
        let cluster = ClusterConfig::new(pod_cidrs)
            .map_err(|e| bad("cluster.podCIDRs", "--cluster-cidr", e))?;
        let service_cidrs = if args.service_cidrs.is_empty() {
            file.cluster.service_cidrs.unwrap_or_default()
        } else {
            args.service_cidrs.clone()
        };
        if !service_cidrs.is_empty() {
            ClusterConfig::new(service_cidrs.clone())
                .map_err(|e| bad("cluster.serviceCIDRs", "--service-cidr", e))?;
            for s in &service_cidrs {
                if let Some(p) = cluster
                    .cluster_cidrs
                    .iter()
                    .find(|p| p.contains(s) || s.contains(*p))
                {
                    return Err(bad(
                        "cluster.serviceCIDRs",
                        "--service-cidr",
                        format!("{s} overlaps the pod CIDR {p}"),
                    ));
                }
            }
        }
        let node_port_range = match args
            .node_port_range
            .clone()
            .or(file.cluster.node_port_range)
        {
            None => DEFAULT_NODE_PORT_RANGE,
            Some(text) => parse_port_range(&text)
                .map_err(|m| bad("cluster.nodePortRange", "--node-port-range", m))?,
        };

        let cgroup_root = args.cgroup_root.clone().or(file.datapath.cgroup_root);
        if let Some(root) = &cgroup_root {
            absolute(root, "datapath.cgroupRoot", "--cgroup-root")?;
        }
        let pin_root = args
            .pin_root
            .clone()
            .or(file.datapath.pin_root)
            .unwrap_or_else(|| PathBuf::from(weft_datapath::DEFAULT_PIN_ROOT));
        absolute(&pin_root, "datapath.pinRoot", "--pin-root")?;
        let attach_mode = match args.attach_mode.clone().or(file.datapath.attach_mode) {
            None => AttachMode::Auto,
            Some(text) if text.trim().is_empty() => AttachMode::Auto,
            Some(text) => text.parse().map_err(|_| {
                bad(
                    "datapath.attachMode",
                    "--attach-mode",
                    format!("{text:?} is not one of auto, tcx, clsact"),
                )
            })?,
        };

        let cni_conf_dir = args
            .cni_conf_dir
            .clone()
            .or(file.cni.conf_dir)
            .unwrap_or_else(|| PathBuf::from("/etc/cni/net.d"));
        absolute(&cni_conf_dir, "cni.confDir", "--cni-conf-dir")?;
        let cni_conf_file = args
            .cni_conf_file
            .clone()
            .or(file.cni.conf_file)
            .unwrap_or_else(|| "10-weft.conflist".into());
        if cni_conf_file.contains('/') || !cni_conf_file.ends_with(".conflist") {
            return Err(bad(
                "cni.confFile",
                "--cni-conf-file",
                format!("{cni_conf_file:?} must be a file name ending in .conflist"),
            ));
        }
        let network_name = args
            .network_name
            .clone()
            .or(file.cni.network_name)
            .unwrap_or_else(|| "weft".into());
        let name_ok = !network_name.is_empty()
            && network_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !name_ok {
            return Err(bad(
                "cni.networkName",
                "--network-name",
                format!("{network_name:?}: use letters, digits, '_', '.' and '-'"),
            ));
        }
        let ipam_data_dir = args
            .ipam_data_dir
            .clone()
            .or(file.cni.ipam_data_dir)
            .unwrap_or_else(|| PathBuf::from(crate::cni::config::DEFAULT_IPAM_DATA_DIR));
        absolute(&ipam_data_dir, "cni.ipamDataDir", "--ipam-data-dir")?;

        let vxlan_vni = args.vxlan_vni.or(file.overlay.vni).unwrap_or(1);
        if !(1..(1 << 24)).contains(&vxlan_vni) {
            return Err(bad(
                "overlay.vni",
                "--vxlan-vni",
                format!("{vxlan_vni} is not in 1..16777215"),
            ));
        }
        let vxlan_port = args.vxlan_port.or(file.overlay.port).unwrap_or(8472);
        if vxlan_port == 0 {
            return Err(bad("overlay.port", "--vxlan-port", "0 is not a port"));
        }
        let mtu = args.mtu.or(file.overlay.mtu);
        if let Some(mtu) = mtu {
            if !(1280..=65485).contains(&mtu) {
                return Err(bad(
                    "overlay.mtu",
                    "--mtu",
                    format!("{mtu} is not between 1280 and 65485"),
                ));
            }
        }
        let listen = match args.listen.or(file.listen) {
            Some(l) => l,
            None => DEFAULT_LISTEN
                .parse()
                .map_err(|e| bad("listen", "--listen", e))?,
        };
        let resync_seconds = args.resync_seconds.or(file.resync_seconds).unwrap_or(30);
        if resync_seconds == 0 {
            return Err(bad(
                "resyncSeconds",
                "--resync-seconds",
                "must be at least 1",
            ));
        }
        Ok(Settings {
            node_name,
            source,
            cluster,
            service_cidrs,
            node_port_range,
            cgroup_root,
            pin_root,
            attach_mode,
            cni_conf_dir,
            cni_conf_file,
            network_name,
            ipam_data_dir,
            vxlan_vni,
            vxlan_port,
            mtu,
            listen,
            resync: Duration::from_secs(resync_seconds),
            egress_guard: args.egress_guard || file.egress_guard.unwrap_or(false),
        })
    }

    /// The settings from the command line and, if it names one, the configuration file.
    pub fn from_args(args: &AgentArgs) -> Result<Settings, ConfigError> {
        let file = match &args.config {
            Some(path) => ConfigFile::load(path)?,
            None => ConfigFile::default(),
        };
        Settings::resolve(args, file)
    }
}

fn parse_source(text: &str, kubeconfig: Option<PathBuf>) -> Result<SourceSetting, ConfigError> {
    if text == "kubernetes" {
        if let Some(path) = &kubeconfig {
            absolute(path, "kubeconfig", "--kubeconfig")?;
        }
        return Ok(SourceSetting::Kubernetes { kubeconfig });
    }
    if let Some(dir) = text.strip_prefix("dir:") {
        if kubeconfig.is_some() {
            return Err(bad(
                "kubeconfig",
                "--kubeconfig",
                "only used with source kubernetes",
            ));
        }
        let dir = PathBuf::from(dir);
        absolute(&dir, "source", "--source")?;
        return Ok(SourceSetting::Dir(dir));
    }
    Err(bad(
        "source",
        "--source",
        format!("{text:?} is neither kubernetes nor dir:PATH"),
    ))
}

fn parse_port_range(text: &str) -> Result<(u16, u16), String> {
    let (a, b) = text
        .split_once('-')
        .ok_or_else(|| format!("{text:?} is not FIRST-LAST"))?;
    let port = |s: &str| {
        s.trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("{s:?} is not a port"))
    };
    let (first, last) = (port(a)?, port(b)?);
    if first > last {
        return Err(format!("{first} is after {last}"));
    }
    Ok((first, last))
}

fn absolute(path: &Path, key: &str, flag: &str) -> Result<(), ConfigError> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(bad(key, flag, format!("{path:?} must be absolute")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> AgentArgs {
        AgentArgs {
            node_name: Some("n1".into()),
            source: Some("dir:/etc/weft/cluster".into()),
            cluster_cidrs: vec!["10.244.0.0/16".parse().unwrap()],
            ..AgentArgs::default()
        }
    }

    #[test]
    fn flags_alone_are_enough_and_defaults_fill_the_rest() {
        let s = Settings::resolve(&args(), ConfigFile::default()).unwrap();
        assert_eq!(s.source, SourceSetting::Dir("/etc/weft/cluster".into()));
        assert_eq!(s.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(s.node_port_range, DEFAULT_NODE_PORT_RANGE);
        assert_eq!(s.cni_conf_file, "10-weft.conflist");
        assert!(s.service_cidrs.is_empty() && s.cgroup_root.is_none());
    }

    #[test]
    fn the_file_covers_every_setting_and_flags_win() {
        let file = ConfigFile::parse(
            r#"
nodeName: from-file
source: kubernetes
kubeconfig: /etc/weft/kubeconfig
cluster:
  podCIDRs: [10.244.0.0/16, "fd00:10:244::/48"]
  serviceCIDRs: [10.96.0.0/12]
  nodePortRange: 31000-31999
overlay: {vni: 7, port: 4789, mtu: 1400}
datapath: {pinRoot: /sys/fs/bpf/x, attachMode: clsact, cgroupRoot: /run/weft/cg}
cni: {confDir: /etc/cni/x, confFile: 05-x.conflist, networkName: x, ipamDataDir: /var/lib/x}
listen: 127.0.0.1:9999
resyncSeconds: 5
egressGuard: true
"#,
        )
        .unwrap();
        let only_node = AgentArgs {
            node_name: Some("from-flag".into()),
            ..AgentArgs::default()
        };
        let s = Settings::resolve(&only_node, file).unwrap();
        assert_eq!(s.node_name, "from-flag", "the flag wins");
        assert_eq!(
            s.source,
            SourceSetting::Kubernetes {
                kubeconfig: Some("/etc/weft/kubeconfig".into())
            }
        );
        assert_eq!(s.cluster.cluster_cidrs.len(), 2);
        assert_eq!(
            s.service_cidrs,
            vec!["10.96.0.0/12".parse::<IpNet>().unwrap()]
        );
        assert_eq!(s.node_port_range, (31000, 31999));
        assert_eq!((s.vxlan_vni, s.vxlan_port, s.mtu), (7, 4789, Some(1400)));
        assert_eq!(s.attach_mode, AttachMode::Clsact);
        assert_eq!(s.cgroup_root, Some("/run/weft/cg".into()));
        assert_eq!(s.cni_conf_file, "05-x.conflist");
        assert_eq!(s.resync, Duration::from_secs(5));
        assert!(s.egress_guard);
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("overlay: {vnii: 3}", "overlay: unknown field `vnii`"),
            ("colour: blue", "unknown field `colour`"),
            ("overlay: {vni: many}", "overlay.vni: invalid type"),
            ("cluster: {podCIDRs: [10.0.0.0/33]}", "cluster.podCIDRs[0]"),
            ("listen: everywhere", "listen:"),
        ];
        for (text, expected) in cases {
            let error = ConfigFile::parse(text).unwrap_err().0;
            assert!(error.contains(expected), "{text}: {error}");
        }
        let resolve = |text: &str| {
            let no_flags = AgentArgs::default();
            Settings::resolve(&no_flags, ConfigFile::parse(text).unwrap())
                .unwrap_err()
                .0
        };
        let base = "nodeName: n\nsource: dir:/d\ncluster: {podCIDRs: [10.244.0.0/16]}\n";
        for (extra, expected) in [
            ("", ""),
            ("overlay: {vni: 0}", "overlay.vni (--vxlan-vni)"),
            (
                "datapath: {pinRoot: relative}",
                "datapath.pinRoot (--pin-root)",
            ),
            ("cni: {confFile: x.conf}", "cni.confFile (--cni-conf-file)"),
            ("resyncSeconds: 0", "resyncSeconds"),
        ] {
            if expected.is_empty() {
                assert!(
                    Settings::resolve(&AgentArgs::default(), ConfigFile::parse(base).unwrap())
                        .is_ok()
                );
                continue;
            }
            let error = resolve(&format!("{base}{extra}"));
            assert!(error.contains(expected), "{extra}: {error}");
        }
        assert!(resolve("source: dir:/d\n").contains("nodeName (--node-name): required"));
        assert!(
            resolve("nodeName: n\nsource: dir:/d\n").contains("cluster.podCIDRs (--cluster-cidr)")
        );
        assert!(
            resolve("nodeName: n\nsource: etcd\ncluster: {podCIDRs: [10.244.0.0/16]}")
                .contains("source (--source)")
        );
        assert!(resolve(
            "nodeName: n\nsource: dir:/d\ncluster: {podCIDRs: [10.244.0.0/16], serviceCIDRs: [10.244.0.0/20]}"
        )
        .contains("overlaps the pod CIDR"));
        assert!(resolve(
            "nodeName: n\nsource: dir:/d\ncluster: {podCIDRs: [10.244.0.0/16], nodePortRange: 9-3}"
        )
        .contains("cluster.nodePortRange"));
    }
}
