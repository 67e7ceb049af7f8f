//! The agent's Prometheus metrics (OpenMetrics text on /metrics).

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChangeLabel {
    pub change: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcilerLabel {
    pub reconciler: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

fn reconciler(name: &str) -> ReconcilerLabel {
    ReconcilerLabel {
        reconciler: name.to_string(),
    }
}

pub fn kind(name: &str) -> KindLabel {
    KindLabel {
        kind: name.to_string(),
    }
}

fn duration_histogram() -> Histogram {
    // 100 µs to ~26 s.
    Histogram::new(exponential_buckets(0.0001, 4.0, 10))
}

/// Per-reconciler runs, errors, changes, duration and health.
#[derive(Debug, Clone)]
pub struct ReconcilerMetrics {
    pub runs: Family<ReconcilerLabel, Counter>,
    pub errors: Family<ReconcilerLabel, Counter>,
    pub changes: Family<ReconcilerLabel, Counter>,
    pub duration: Family<ReconcilerLabel, Histogram, fn() -> Histogram>,
    pub healthy: Family<ReconcilerLabel, Gauge<i64, AtomicI64>>,
}

impl Default for ReconcilerMetrics {
    fn default() -> ReconcilerMetrics {
        ReconcilerMetrics {
            runs: Family::default(),
            errors: Family::default(),
            changes: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            healthy: Family::default(),
        }
    }
}

impl ReconcilerMetrics {
    pub fn ran(&self, name: &str, elapsed: Duration, outcome: Result<u32, ()>) {
        let label = reconciler(name);
        self.runs.get_or_create(&label).inc();
        self.duration
            .get_or_create(&label)
            .observe(elapsed.as_secs_f64());
        match outcome {
            Ok(changes) => {
                self.changes.get_or_create(&label).inc_by(changes.into());
            }
            Err(()) => {
                self.errors.get_or_create(&label).inc();
            }
        }
    }

    pub fn set_healthy(&self, name: &str, healthy: bool) {
        self.healthy
            .get_or_create(&reconciler(name))
            .set(i64::from(healthy));
    }
}

/// Per-kind store and source figures.
#[derive(Debug, Clone, Default)]
pub struct StoreMetrics {
    pub objects: Family<KindLabel, Gauge<i64, AtomicI64>>,
    pub issues: Family<KindLabel, Gauge<i64, AtomicI64>>,
    pub generation: Family<KindLabel, Gauge<u64, AtomicU64>>,
    pub synced: Family<KindLabel, Gauge<i64, AtomicI64>>,
    pub events: Family<KindLabel, Counter>,
    pub source_errors: Family<KindLabel, Counter>,
}

/// Everything the agent updates as it works.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    pub reconciles: Family<ResultLabel, Counter>,
    pub changes: Family<ChangeLabel, Counter>,
    pub ready: Gauge<i64, AtomicI64>,
    pub nodes: Gauge<i64, AtomicI64>,
    pub model_issues: Gauge<i64, AtomicI64>,
    pub last_reconcile_changes: Gauge<u64, AtomicU64>,
    pub reconcilers: ReconcilerMetrics,
    pub stores: StoreMetrics,
}

impl Metrics {
    pub fn register(&self, registry: &mut Registry, pin_root: PathBuf) {
        registry.register(
            "weft_agent_reconciles",
            "Reconcile rounds by result (error when any reconciler of the round failed)",
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
            "Objects changed by the last reconcile round (0 when the node was already as planned)",
            self.last_reconcile_changes.clone(),
        );
        let r = &self.reconcilers;
        registry.register(
            "weft_agent_reconciler_runs",
            "Runs of each reconciler",
            r.runs.clone(),
        );
        registry.register(
            "weft_agent_reconciler_errors",
            "Failed runs of each reconciler (each is retried with backoff)",
            r.errors.clone(),
        );
        registry.register(
            "weft_agent_reconciler_changes",
            "Objects each reconciler created, updated or removed",
            r.changes.clone(),
        );
        registry.register(
            "weft_agent_reconciler_duration_seconds",
            "Duration of each reconciler's runs",
            r.duration.clone(),
        );
        registry.register(
            "weft_agent_reconciler_healthy",
            "1 when the reconciler's latest run succeeded",
            r.healthy.clone(),
        );
        let s = &self.stores;
        registry.register(
            "weft_agent_store_objects",
            "Valid objects in each store",
            s.objects.clone(),
        );
        registry.register(
            "weft_agent_store_issues",
            "Objects of each kind refused as invalid",
            s.issues.clone(),
        );
        registry.register(
            "weft_agent_store_generation",
            "Changes applied to each store since the agent started",
            s.generation.clone(),
        );
        registry.register(
            "weft_agent_store_synced",
            "1 once the first full list of the kind has arrived",
            s.synced.clone(),
        );
        registry.register(
            "weft_agent_source_events",
            "Events received from the source, by kind",
            s.events.clone(),
        );
        registry.register(
            "weft_agent_source_errors",
            "Source errors (failed lists and watches, each retried with backoff), by kind",
            s.source_errors.clone(),
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
