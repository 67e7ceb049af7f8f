//! The node's CNI configuration, written only once the datapath is ready (so no pod is
//! created against a node that cannot carry its traffic) and only when its content changes
//! (runtimes reload on every write). Written to a temporary file and renamed, so a runtime
//! never reads half a file.

use std::path::Path;

use ipnet::IpNet;
use serde_json::json;

use super::Changes;
use crate::agent::args::AgentArgs;
use crate::agent::plan::NodePlan;

/// The conflist for this node. `cniVersion` stays 1.0.0 because containerd 1.6 and podman
/// 4.3 reject 1.1.0 results; `cniVersions` lets newer runtimes pick 1.1.0 (STATUS and GC).
pub fn render(plan: &NodePlan, args: &AgentArgs, pod_mtu: u32) -> String {
    let ranges: Vec<_> = plan
        .local
        .pod_cidrs
        .iter()
        .map(|c: &IpNet| json!([{ "subnet": c.to_string() }]))
        .collect();
    let list = json!({
        "cniVersion": "1.0.0",
        "cniVersions": ["1.0.0", "1.1.0"],
        "name": args.network_name,
        "plugins": [{
            "type": crate::plugin::PLUGIN_TYPE,
            "mtu": pod_mtu,
            "ipam": { "ranges": ranges, "dataDir": args.ipam_data_dir },
            "datapath": datapath_section(args),
        }],
    });
    let mut text = serde_json::to_string_pretty(&list).expect("a JSON value always serializes");
    text.push('\n');
    text
}

fn datapath_section(args: &AgentArgs) -> serde_json::Value {
    let mut section = json!({ "pinRoot": args.pin_root });
    if args.attach_mode != weft_datapath::AttachMode::Auto {
        section["attachMode"] = json!(args.attach_mode.name());
    }
    section
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
