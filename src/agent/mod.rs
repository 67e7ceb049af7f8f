//! `weft agent`: the node agent. It loads (or adopts) the pinned eBPF datapath, then
//! reconciles the node from the state model whenever the source changes (and every
//! `--resync-seconds` to repair drift): overlay device, peers, datapath tables, masquerade,
//! and finally the node's CNI configuration. Stopping or killing the agent changes nothing
//! on the node: every map, program and link is pinned, and everything else is kernel state.

pub mod apply;
pub mod args;
mod health;
mod metrics;
pub mod plan;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{error, info, warn};
use weft_datapath::{Datapath, LinkChange, ProgramChange};
use weft_model::{standalone, ClusterConfig, Model};
use weft_netlink::Handle;

use apply::Changes;
pub use args::AgentArgs;

/// How often the source directory is checked for changes.
const POLL: Duration = Duration::from_millis(500);

pub fn run(args: AgentArgs) -> anyhow::Result<()> {
    args.validate()?;
    let cluster = ClusterConfig::new(args.cluster_cidrs.clone()).context("--cluster-cidr")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(agent(args, cluster))
}

async fn agent(args: AgentArgs, cluster: ClusterConfig) -> anyhow::Result<()> {
    info!(node = %args.node_name, pin_root = %args.pin_root.display(), "weft agent starting");
    let metrics = metrics::Metrics::default();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry, args.pin_root.clone());
    let (ready_tx, ready_rx) = tokio::sync::watch::channel(Err("starting".to_string()));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("--listen {}", args.listen))?;
    tokio::spawn(health::serve(listener, ready_rx, Arc::new(registry)));

    let mut datapath = Datapath::load_or_adopt(&args.pin_root).context("load the eBPF datapath")?;
    datapath.set_attach_mode(args.attach_mode);
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
    let mut handle = Handle::new().context("open netlink")?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let resync = Duration::from_secs(args.resync_seconds.max(1));
    let mut tick = tokio::time::interval(POLL);
    let mut last_fingerprint = None;
    let mut last_pass = Instant::now();
    let mut last_issues: Vec<String> = Vec::new();
    let mut first = true;
    let mut last_model = Model::default();

    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
        }
        let fingerprint = standalone::fingerprint(&args.source_dir);
        if !first && Some(&fingerprint) == last_fingerprint.as_ref() && last_pass.elapsed() < resync
        {
            continue;
        }
        last_fingerprint = Some(fingerprint);
        last_pass = Instant::now();

        let objects = standalone::read_dir(&args.source_dir);
        let (model, model_issues) = Model::build_after(&last_model, &cluster, &objects.nodes);
        let issues: Vec<String> = objects
            .issues
            .iter()
            .chain(&model_issues)
            .map(ToString::to_string)
            .collect();
        if issues != last_issues {
            for issue in &issues {
                warn!(%issue, "object refused");
            }
            last_issues = issues;
        }
        metrics.model_issues.set(last_issues.len() as i64);
        metrics.nodes.set(model.nodes.len() as i64);

        let outcome = reconcile(&args, &cluster, &model, &mut datapath, &mut handle);
        last_model = model;
        match outcome {
            Ok(changes) => {
                if first || changes.total() > 0 {
                    info!(%changes, first_pass = first, "node reconciled");
                }
                count(&metrics, "ok", changes);
                metrics.ready.set(1);
                let _previous = ready_tx.send_replace(Ok(()));
            }
            Err(e) => {
                error!(
                    error = format!("{e:#}"),
                    "reconcile failed; the node keeps its last programmed state"
                );
                count(&metrics, "error", Changes::default());
                metrics.ready.set(0);
                let _previous = ready_tx.send_replace(Err(format!("{e:#}")));
            }
        }
        first = false;
    }
    info!("stopping; the datapath and the node's configuration stay in place");
    Ok(())
}

fn count(metrics: &metrics::Metrics, result: &str, changes: Changes) {
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

/// One pass. The conflist comes last: a node only advertises itself to the runtime once
/// everything pods need is in place.
pub fn reconcile(
    args: &AgentArgs,
    cluster: &ClusterConfig,
    model: &Model,
    datapath: &mut Datapath,
    handle: &mut Handle,
) -> anyhow::Result<Changes> {
    let plan = plan::plan(model, cluster, &args.node_name)?;
    let mut changes = Changes::default();
    let (device, c) = apply::device::ensure(handle, &plan, args)?;
    changes.merge(c);
    match datapath
        .attach_overlay(args::VXLAN_DEVICE)
        .context("attach the overlay program")?
    {
        LinkChange::Unchanged => {}
        LinkChange::Updated => changes.updated += 1,
        LinkChange::Created => changes.added += 1,
    }
    changes.merge(
        apply::lpm::ensure(datapath.tables_mut(), &plan, device.vxlan_index)
            .context("datapath tables")?,
    );
    changes
        .merge(apply::peers::ensure(handle, &plan, device.vxlan_index).context("overlay peers")?);
    changes.merge(apply::nat::ensure(&plan, args.vxlan_port).context("nftables")?);
    let conflist = apply::cniconf::render(&plan, args, device.pod_mtu);
    changes.merge(
        apply::cniconf::ensure(&args.cni_conf_dir, &args.cni_conf_file, &conflist)
            .context("write the CNI configuration")?,
    );
    Ok(changes)
}
