//! `weft agent`: the node agent. It loads (or adopts) the pinned eBPF datapath, fills one
//! store per kind from its source (the API server's watches, or a directory of YAML), and
//! runs the reconcilers whenever what they read changes, plus a periodic resync that
//! repairs drift. Stopping or killing the agent changes nothing on the node: every map,
//! program and link is pinned, and everything else is kernel state.
//!
//! The loop owns the stores: sources send updates over a channel, the loop applies them,
//! then runs one round of the reconcilers that are due (so a burst of events is one run).

pub mod api;
pub mod apply;
pub mod args;
pub mod config;
mod health;
pub mod kinds;
mod metrics;
pub mod node;
pub mod placeholder;
pub mod plan;
pub mod readiness;
pub mod reconcile;
pub mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};
use weft_datapath::{Datapath, ProgramChange};
use weft_kubeconfig::ApiTarget;
use weft_model::{Issue, Stores};
use weft_netlink::Handle;

pub use args::AgentArgs;
use config::{Settings, SourceSetting};
use node::{NodeEnv, NodeView};
use reconcile::{Round, Runner};
use source::SourceMsg;

/// Source messages (batches of up to 512 updates) queued before sources wait for the loop:
/// small, so a burst waits in the sockets, not in the agent's memory.
const SOURCE_QUEUE: usize = 16;
/// Messages applied before the reconcilers get a turn.
const MAX_DRAIN: usize = 64;

pub fn run(args: AgentArgs) -> anyhow::Result<()> {
    let settings = Settings::from_args(&args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(agent(settings))
}

async fn agent(settings: Settings) -> anyhow::Result<()> {
    info!(node = %settings.node_name, source = ?settings.source, pin_root = %settings.pin_root.display(), "weft agent starting");
    let metrics = metrics::Metrics::default();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry, settings.pin_root.clone());
    let (ready_tx, ready_rx) = watch::channel(Err("starting".to_string()));
    let (status_tx, status_rx) = watch::channel(String::from("starting\n"));
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("--listen {}", settings.listen))?;
    tokio::spawn(health::serve(
        listener,
        health::Views {
            ready: ready_rx,
            status: status_rx,
        },
        Arc::new(registry),
    ));

    let mut datapath =
        Datapath::load_or_adopt(&settings.pin_root).context("load the eBPF datapath")?;
    datapath.set_attach_mode(settings.attach_mode);
    log_programs(&datapath);
    let handle = Handle::new().context("open netlink")?;

    let kinds = kinds::all();
    let mut stores = kinds::stores(&kinds);
    let (tx, mut rx) = mpsc::channel::<SourceMsg>(SOURCE_QUEUE);
    let mut runner = Runner::new(metrics.reconcilers.clone());
    apply::node_reconcilers(&mut runner, &stores, settings.egress_guard)?;
    let gates = readiness::gates(settings.egress_guard);
    match &settings.source {
        SourceSetting::Dir(dir) => {
            let relists = kinds.iter().map(|k| k.relist).collect();
            tokio::spawn(source::dir::run(
                dir.clone(),
                relists,
                settings.resync,
                tx.clone(),
            ));
        }
        SourceSetting::Kubernetes { kubeconfig } => {
            let target = match kubeconfig {
                Some(path) => ApiTarget::from_kubeconfig(path)?,
                None => ApiTarget::in_cluster()?,
            };
            let client = source::kube::client(&target)?;
            for kind in &kinds {
                tokio::spawn((kind.watch)(client.clone(), tx.clone()));
            }
            let (desired_tx, desired_rx) = watch::channel(None);
            tokio::spawn(readiness::publish(
                client,
                settings.node_name.clone(),
                desired_rx,
            ));
            runner.add(
                &stores,
                readiness::NodeReadiness {
                    gates: gates.clone(),
                    desired: desired_tx,
                },
            )?;
        }
    }
    drop(tx);

    let mut env = NodeEnv {
        settings: settings.clone(),
        datapath,
        handle,
        nodes: NodeView::default(),
        device: None,
    };
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut resync = tokio::time::interval(settings.resync);
    resync.tick().await;
    let mut report = Report::default();
    let mut first_round = true;

    loop {
        let retry = runner.next_retry().map(tokio::time::Instant::from_std);
        tokio::select! {
            msg = rx.recv() => {
                let Some(msg) = msg else {
                    anyhow::bail!("every source stopped");
                };
                report.apply(msg, &mut stores, &metrics);
                for _ in 0..MAX_DRAIN {
                    match rx.try_recv() {
                        Ok(msg) => report.apply(msg, &mut stores, &metrics),
                        Err(_) => break,
                    }
                }
            }
            _ = resync.tick() => {
                runner.resync();
                weft_model::intern::prune();
            }
            _ = sleep_until(retry) => {}
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
        }
        // Refused objects first, so a failure they cause is logged after them.
        report.issues(&stores, &env.nodes, &metrics);
        loop {
            let round = runner.run_round(&mut env, &stores, Instant::now());
            log_round(&round, &metrics, &mut first_round);
            if !round.again {
                break;
            }
        }
        let ready = runner.health().all_ok(&gates);
        metrics.ready.set(i64::from(ready.is_ok()));
        ready_tx.send_if_modified(|r| {
            let changed = *r != ready;
            *r = ready.clone();
            changed
        });
        report.issues(&stores, &env.nodes, &metrics);
        metrics.nodes.set(env.nodes.model.nodes.len() as i64);
        let status = status_text(&runner, &stores);
        status_tx.send_if_modified(|s| {
            let changed = *s != status;
            *s = status;
            changed
        });
    }
    info!("stopping; the datapath and the node's configuration stay in place");
    Ok(())
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn log_programs(datapath: &Datapath) {
    for program in weft_datapath::Program::ALL {
        if let Some(p) = datapath.program(program) {
            match &p.change {
                ProgramChange::Adopted => {
                    info!(program = ?program, id = p.id, "adopted the pinned program")
                }
                ProgramChange::Installed => {
                    info!(program = ?program, id = p.id, "installed the program")
                }
                ProgramChange::Replaced { previous_id } => {
                    info!(program = ?program, id = p.id, previous_id, links_updated = p.links.updated, "replaced the program in place")
                }
            }
        }
    }
}

fn log_round(round: &Round, metrics: &metrics::Metrics, first: &mut bool) {
    if round.ran == 0 {
        return;
    }
    for (name, e) in &round.failed {
        error!(reconciler = name, error = %e, "reconcile failed; retrying with backoff (the node keeps its last programmed state)");
    }
    let changes = round.changes;
    if *first || changes.total() > 0 {
        info!(%changes, first_pass = *first, "node reconciled");
    }
    *first = false;
    let result = if round.failed.is_empty() {
        "ok"
    } else {
        "error"
    };
    metrics
        .reconciles
        .get_or_create(&metrics::ResultLabel {
            result: result.into(),
        })
        .inc();
    for (kind, n) in [
        ("added", changes.added),
        ("updated", changes.updated),
        ("removed", changes.removed),
    ] {
        metrics
            .changes
            .get_or_create(&metrics::ChangeLabel {
                change: kind.into(),
            })
            .inc_by(n.into());
    }
    metrics.last_reconcile_changes.set(changes.total().into());
}

/// What `/status` (and `weft status`) shows of the agent.
fn status_text(runner: &Runner<NodeEnv>, stores: &Stores) -> String {
    let mut out = String::new();
    for (name, state) in runner.health().iter() {
        out.push_str(&format!("reconciler {name}: {state}\n"));
    }
    for (id, store) in stores.iter() {
        out.push_str(&format!(
            "store {}: {} objects, {} refused, generation {}{}\n",
            id.kind(),
            store.len(),
            store.issue_count(),
            store.generation(),
            if store.synced() {
                ""
            } else {
                ", not synced yet"
            }
        ));
    }
    out
}

/// Source problems and refused objects, logged once each as they appear.
#[derive(Default)]
struct Report {
    /// Issues sources reported outside any store, by origin.
    source_issues: BTreeMap<String, Vec<Issue>>,
    /// The node model's issues when last counted.
    node_issues: Vec<Issue>,
    dirty: bool,
    logged: BTreeSet<String>,
}

impl Report {
    fn apply(&mut self, msg: SourceMsg, stores: &mut Stores, metrics: &metrics::Metrics) {
        match msg {
            SourceMsg::Update(update) => {
                let kind = update.kind();
                let label = metrics::kind(kind.kind());
                metrics
                    .stores
                    .events
                    .get_or_create(&label)
                    .inc_by(update.events() as u64);
                let applied = update.apply(stores);
                self.dirty |= applied.issues_changed;
                if applied.synced_now {
                    info!(kind = kind.kind(), "first list complete");
                }
                if let Some(store) = stores.by_id(kind) {
                    let s = &metrics.stores;
                    s.objects.get_or_create(&label).set(store.len() as i64);
                    s.issues
                        .get_or_create(&label)
                        .set(store.issue_count() as i64);
                    s.generation.get_or_create(&label).set(store.generation());
                    s.synced
                        .get_or_create(&label)
                        .set(i64::from(store.synced()));
                }
            }
            SourceMsg::Trouble { kind, error } => {
                warn!(kind, %error, "source trouble; retrying");
                metrics
                    .stores
                    .source_errors
                    .get_or_create(&metrics::kind(kind))
                    .inc();
            }
            SourceMsg::Issues { origin, issues } => {
                if self.source_issues.get(&origin) != Some(&issues) {
                    self.source_issues.insert(origin, issues);
                    self.dirty = true;
                }
            }
        }
    }

    /// Logs every new issue once and counts them all.
    fn issues(&mut self, stores: &Stores, nodes: &NodeView, metrics: &metrics::Metrics) {
        if !self.dirty && nodes.issues == self.node_issues {
            return;
        }
        self.dirty = false;
        self.node_issues = nodes.issues.clone();
        let mut all: BTreeSet<String> = nodes.issues.iter().map(ToString::to_string).collect();
        for (_, store) in stores.iter() {
            all.extend(store.issues().iter().map(ToString::to_string));
        }
        all.extend(
            self.source_issues
                .values()
                .flatten()
                .map(ToString::to_string),
        );
        for issue in all.difference(&self.logged) {
            warn!(%issue, "object refused");
        }
        let resolved = self.logged.difference(&all).count();
        if resolved > 0 {
            info!(resolved, "refused objects are fixed or gone");
        }
        metrics.model_issues.set(all.len() as i64);
        self.logged = all;
    }
}
