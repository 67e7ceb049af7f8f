//! The node's CNI configuration, written only once the datapath is ready (so no pod is
//! created against a node that cannot carry its traffic) and only when its content changes
//! (runtimes reload on every write). Written to a temporary file and renamed, so a runtime
//! never reads half a file. The plugin's entry is `cni::config::WeftNetConf`, the very type
//! the plugin parses.

use std::path::Path;

use serde::Serialize;
use weft_model::{KindId, NodeSpec};

use super::Changes;
use crate::agent::config::Settings;
use crate::agent::node::NodeEnv;
use crate::agent::plan::NodePlan;
use crate::agent::reconcile::{Input, Reconciler};
use crate::cni::config::{DatapathSection, IpamSection, RangeSection, WeftNetConf};

/// Everything a pod needs must be in place before the runtime may use the node.
pub const WRITTEN_AFTER: &[&str] = &[
    "overlay-device",
    "overlay-program",
    "datapath-routes",
    "overlay-peers",
    "masquerade",
];

pub struct CniConfig;

impl Reconciler<NodeEnv> for CniConfig {
    fn name(&self) -> &'static str {
        "cni-config"
    }

    fn reads(&self) -> Vec<KindId> {
        vec![KindId::of::<NodeSpec>()]
    }

    fn after(&self) -> &'static [&'static str] {
        WRITTEN_AFTER
    }

    fn reconcile(&mut self, env: &mut NodeEnv, input: &Input<'_>) -> anyhow::Result<Changes> {
        let device = env.device()?;
        let plan = env.plan(input.stores)?;
        let conflist = render(&plan, &env.settings, device.pod_mtu);
        ensure(
            &env.settings.cni_conf_dir,
            &env.settings.cni_conf_file,
            &conflist,
        )
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfList<'a> {
    cni_version: &'a str,
    cni_versions: &'a [&'a str],
    name: &'a str,
    plugins: Vec<PluginEntry<'a>>,
}

#[derive(Serialize)]
struct PluginEntry<'a> {
    #[serde(rename = "type")]
    plugin_type: &'a str,
    #[serde(flatten)]
    conf: &'a WeftNetConf,
}

/// The plugin's netconf for this node.
pub fn netconf(plan: &NodePlan, settings: &Settings, pod_mtu: u32) -> WeftNetConf {
    WeftNetConf {
        mtu: Some(pod_mtu),
        gateway_v4: None,
        gateway_v6: None,
        ipam: IpamSection {
            ranges: plan
                .local
                .pod_cidrs
                .iter()
                .map(|c| vec![RangeSection::subnet(*c)])
                .collect(),
            data_dir: Some(settings.ipam_data_dir.clone()),
        },
        datapath: Some(DatapathSection {
            pin_root: settings.pin_root.clone(),
            attach_mode: Some(settings.attach_mode)
                .filter(|m| *m != weft_datapath::AttachMode::Auto),
        }),
    }
}

/// The conflist for this node. `cniVersion` stays 1.0.0 because containerd 1.6 and podman
/// 4.3 reject 1.1.0 results; `cniVersions` lets newer runtimes pick 1.1.0 (STATUS and GC).
pub fn render(plan: &NodePlan, settings: &Settings, pod_mtu: u32) -> String {
    let conf = netconf(plan, settings, pod_mtu);
    let list = ConfList {
        cni_version: "1.0.0",
        cni_versions: &["1.0.0", "1.1.0"],
        name: &settings.network_name,
        plugins: vec![PluginEntry {
            plugin_type: crate::plugin::PLUGIN_TYPE,
            conf: &conf,
        }],
    };
    let mut text = serde_json::to_string_pretty(&list).expect("the conflist always serializes");
    text.push('\n');
    text
}

pub fn ensure(dir: &Path, file: &str, content: &str) -> anyhow::Result<Changes> {
    let path = dir.join(file);
    match std::fs::read_to_string(&path) {
        Ok(existing) if existing == content => return Ok(Changes::default()),
        _ => {}
    }
    let existed = path.exists();
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{file}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, content)?;
    std::fs::rename(&tmp, &path)?;
    Ok(if existed {
        Changes {
            updated: 1,
            ..Changes::default()
        }
    } else {
        Changes {
            added: 1,
            ..Changes::default()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::args::AgentArgs;
    use crate::agent::config::{ConfigFile, Settings};
    use crate::cni::config::PluginConfig;

    fn plan(cidrs: &[&str]) -> NodePlan {
        let json = serde_json::json!({
            "metadata": {"name": "n1"},
            "spec": {"podCIDRs": cidrs},
            "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.1"}]}
        });
        let node = weft_model::decode::decode_str::<NodeSpec>(&json.to_string())
            .value
            .unwrap();
        let settings = settings("auto");
        let (model, _) = weft_model::Model::build(&settings.cluster, [&node]);
        crate::agent::plan::plan(&model, &settings.cluster, "n1").unwrap()
    }

    fn settings(attach_mode: &str) -> Settings {
        let args = AgentArgs {
            node_name: Some("n1".into()),
            source: Some("dir:/etc/weft/cluster".into()),
            cluster_cidrs: vec![
                "10.244.0.0/16".parse().unwrap(),
                "fd00:10:244::/48".parse().unwrap(),
            ],
            pin_root: Some("/sys/fs/bpf/weft-test".into()),
            ipam_data_dir: Some("/var/lib/weft-test/ipam".into()),
            attach_mode: Some(attach_mode.into()),
            ..AgentArgs::default()
        };
        Settings::resolve(&args, ConfigFile::default()).unwrap()
    }

    /// The agent's conflist and the plugin's reading of it cannot drift: the plugin parses
    /// what the agent wrote back into the very values the agent put in.
    #[test]
    fn the_plugin_reads_back_exactly_what_the_agent_writes() {
        for mode in ["auto", "clsact"] {
            let settings = settings(mode);
            let plan = plan(&["10.244.1.0/24", "fd00:10:244:1::/64"]);
            let text = render(&plan, &settings, 1450);
            let list = weft_cni::NetConfList::from_slice(text.as_bytes()).unwrap();
            let confs = list.plugin_netconfs().unwrap();
            assert_eq!(confs.len(), 1);
            let wrote = netconf(&plan, &settings, 1450);
            let read: WeftNetConf = serde_json::from_value(confs[0].to_value()).unwrap();
            assert_eq!(read, wrote);
            let cfg = PluginConfig::from_netconf(&confs[0]).unwrap();
            assert_eq!(cfg.network, "weft");
            assert_eq!(cfg.mtu, 1450);
            assert_eq!(cfg.pin_root.as_deref(), Some(settings.pin_root.as_path()));
            assert_eq!(cfg.attach_mode, settings.attach_mode);
            assert_eq!(cfg.ipam.data_dir, settings.ipam_data_dir);
            let subnets: Vec<_> = cfg
                .ipam
                .ranges
                .iter()
                .map(|set| set.ranges[0].subnet)
                .collect();
            assert_eq!(subnets, plan.local.pod_cidrs);
            assert_eq!(text.contains("attachMode"), mode != "auto");
        }
    }
}
