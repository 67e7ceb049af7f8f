//! A lab for a test: unique name, torn down on drop even when the test fails.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use weft::lab::{self, netns, LabState, UpOptions};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A lab with a unique name, torn down on drop even when the test fails.
pub struct TestLab {
    pub state: LabState,
}

impl TestLab {
    pub fn up(nodes: u32, pods_per_node: u32) -> TestLab {
        Self::up_with(nodes, pods_per_node, weft_datapath::AttachMode::Auto)
    }

    pub fn up_with(
        nodes: u32,
        pods_per_node: u32,
        attach_mode: weft_datapath::AttachMode,
    ) -> TestLab {
        weft_testkit::require_root();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("weftt{:x}{n}", std::process::id() % 0xfffff);
        let dir = PathBuf::from(format!("/run/weft/{name}"));
        let opts = UpOptions {
            name,
            dir,
            nodes,
            pods_per_node,
            weft_bin: PathBuf::from(env!("CARGO_BIN_EXE_weft")),
            attach_mode,
        };
        let state = lab::up::up(&opts).unwrap_or_else(|e| panic!("lab up failed: {e:#}"));
        TestLab { state }
    }

    pub fn pod(&self, name: &str) -> &lab::state::PodState {
        self.state
            .pods
            .iter()
            .find(|p| p.name == name)
            .expect("pod exists")
    }

    pub fn metric(&self, node: u32, name: &str) -> Option<f64> {
        let n = self.state.node(node).unwrap();
        let listen = n.agent_listen.clone();
        let (_, body) = netns::in_netns(&netns::path_of(&n.netns), move || {
            lab::http_get(&listen, "/metrics")
        })
        .unwrap_or_else(|e| panic!("scrape node{node}: {e:#}"));
        let value = body
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().last()?.parse().ok());
        if value.is_none() {
            eprintln!("node{node} metrics have no {name}:\n{body}");
        }
        value
    }
}

impl Drop for TestLab {
    fn drop(&mut self) {
        if let Err(e) = lab::down::down_state(&self.state) {
            eprintln!("lab down: {e:#}");
        }
    }
}
