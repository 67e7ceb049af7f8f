//! The agent's Prometheus metrics (OpenMetrics text on /metrics).

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChangeLabel {
    pub change: String,
}

/// Everything the agent updates as it works.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    pub reconciles: Family<ResultLabel, Counter>,
    pub changes: Family<ChangeLabel, Counter>,
    pub ready: Gauge<i64, std::sync::atomic::AtomicI64>,
    pub nodes: Gauge<i64, std::sync::atomic::AtomicI64>,
    pub model_issues: Gauge<i64, std::sync::atomic::AtomicI64>,
    pub last_reconcile_changes: Gauge<u64, AtomicU64>,
}

impl Metrics {
    pub fn register(&self, registry: &mut Registry, pin_root: PathBuf) {
        registry.register(
            "weft_agent_reconciles",
            "Reconcile passes by result",
            self.reconciles.clone(),
        );
        registry.register(
            "weft_agent_changes",
            "Objects the agent created, updated or removed",
            self.changes.clone(),
        );
        registry.register(
            "weft_agent_ready",
            "1 when the node is programmed and its CNI configuration written",
            self.ready.clone(),
        );
        registry.register("weft_agent_nodes", "Nodes in the model", self.nodes.clone());
        registry.register(
            "weft_agent_model_issues",
            "Objects left out of the model because they are invalid",
            self.model_issues.clone(),
        );
        registry.register(
            "weft_agent_last_reconcile_changes",
            "Objects changed by the last reconcile pass (0 when the node was already as planned)",
            self.last_reconcile_changes.clone(),
        );
        registry.register_collector(Box::new(DatapathCounters { pin_root }));
    }
}

/// Reads the datapath's per-CPU counters at scrape time, so the numbers are the programs'
/// own and survive agent restarts (the maps are pinned).
#[derive(Debug)]
struct DatapathCounters {
    pin_root: PathBuf,
}

impl Collector for DatapathCounters {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Ok(counters) = weft_datapath::Tables::open(&self.pin_root).and_then(|t| t.counters())
        else {
            return Ok(());
        };
        let mut family = encoder.encode_descriptor(
            "weft_datapath_packets",
            "Packets seen by the eBPF programs, by outcome (drop_* outcomes name the drop reason)",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (outcome, value) in counters.iter() {
            let labels = vec![("outcome".to_string(), outcome.to_string())];
            ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
