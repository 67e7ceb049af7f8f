//! What a running lab is made of, saved as JSON in the lab directory so `status`, `check`
//! and `down` (separate processes) find it.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabState {
    pub name: String,
    pub dir: PathBuf,
    /// The agents' `--attach-mode` (auto, tcx, clsact), kept so restarted agents match.
    #[serde(default)]
    pub attach_mode: String,
    pub nodes: Vec<NodeState>,
    pub pods: Vec<PodState>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeState {
    pub index: u32,
    pub name: String,
    pub netns: String,
    pub addresses: Vec<IpAddr>,
    pub pin_root: PathBuf,
    pub agent_pid: Option<i32>,
    pub agent_listen: String,
    pub conflist: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PodState {
    pub name: String,
    pub node: u32,
    pub netns: String,
    pub container_id: String,
    pub addresses: Vec<IpAddr>,
    /// The ADD result, kept like a runtime's cache for DEL and CHECK.
    pub result: serde_json::Value,
}

pub const STATE_FILE: &str = "lab.json";

impl LabState {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(STATE_FILE)
    }

    pub fn load(dir: &Path) -> anyhow::Result<LabState> {
        let path = Self::path(dir);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("no lab at {} (read {})", dir.display(), path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a lab state file", path.display()))
    }

    pub fn save(&self) -> anyhow::Result<()> {
        let path = Self::path(&self.dir);
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(self)?)?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    }

    pub fn node(&self, index: u32) -> Option<&NodeState> {
        self.nodes.iter().find(|n| n.index == index)
    }
}
