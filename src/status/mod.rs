//! `weft status`: what this node's weft looks like, as a report, and a non-zero exit when
//! something weft is configured to use is missing or broken: the CNI configuration the
//! runtime loads, the plugin binaries, the datapath pinned by the agent, the agent itself,
//! and the egress guard with the kernel features its fence needs.

pub mod cni;
pub mod guard;

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::plugin::{GUARD_TYPE, PLUGIN_TYPE};

/// Where to look; the defaults are a standard node's.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// The runtime's CNI configuration directory.
    #[arg(long, default_value = "/etc/cni/net.d")]
    pub cni_conf_dir: PathBuf,
    /// The runtime's CNI binary directories, searched in order.
    #[arg(long = "cni-bin-dir", default_values = ["/opt/cni/bin", "/usr/lib/cni"])]
    pub cni_bin_dirs: Vec<PathBuf>,
    /// The datapath's pin root.
    #[arg(long, default_value = weft_datapath::DEFAULT_PIN_ROOT)]
    pub pin_root: PathBuf,
    /// The agent's health address.
    #[arg(long, default_value = "127.0.0.1:9962")]
    pub agent: String,
}

/// Prints the report; `Ok(false)` when something weft is configured to use is broken.
pub fn run(args: &StatusArgs) -> anyhow::Result<bool> {
    let mut out = String::new();
    let mut healthy = true;
    let scan = cni::scan_configs(&args.cni_conf_dir);
    let active_types = scan.active_types();
    let uses_weft = active_types.iter().any(|t| t == PLUGIN_TYPE);
    let uses_guard = active_types.iter().any(|t| t == GUARD_TYPE);

    writeln!(out, "CNI configuration ({}):", args.cni_conf_dir.display())?;
    match &scan.active {
        None => writeln!(
            out,
            "  no configuration file: the runtime has no network to give pods"
        )?,
        Some(active) => writeln!(
            out,
            "  {} (loaded by the runtime): plugins {}",
            active.display(),
            active_types.join(" -> ")
        )?,
    }
    for (file, error) in &scan.unreadable {
        writeln!(out, "  {}: unreadable: {error}", file.display())?;
        healthy &= scan.active.as_ref() != Some(file);
    }

    writeln!(out, "\nweft plugin:")?;
    match cni::check_binary(&args.cni_bin_dirs, PLUGIN_TYPE) {
        Ok((path, versions)) => writeln!(out, "  {} answers VERSION ({versions})", path.display())?,
        Err(e) => {
            writeln!(out, "  {e}")?;
            healthy &= !uses_weft;
        }
    }

    writeln!(out, "\ndatapath ({}):", args.pin_root.display())?;
    match weft_datapath::pod::ensure_ready(&args.pin_root) {
        Ok(()) => {
            writeln!(out, "  loaded: maps and programs pinned")?;
            if let Ok(counters) =
                weft_datapath::Tables::open(&args.pin_root).and_then(|t| t.counters())
            {
                let line: Vec<String> = counters
                    .iter()
                    .filter(|(_, v)| *v > 0)
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                writeln!(
                    out,
                    "  packets: {}",
                    if line.is_empty() {
                        "none yet".into()
                    } else {
                        line.join(" ")
                    }
                )?;
            }
        }
        Err(e) => {
            writeln!(out, "  not loaded: {e}")?;
            healthy &= !uses_weft;
        }
    }

    writeln!(out, "\nagent ({}):", args.agent)?;
    match crate::lab::http_get(&args.agent, "/readyz") {
        Ok((200, _)) => writeln!(out, "  ready")?,
        Ok((code, body)) => {
            writeln!(out, "  not ready ({code}): {}", body.trim())?;
            healthy &= !uses_weft;
        }
        Err(e) => {
            writeln!(out, "  unreachable: {e:#}")?;
            healthy &= !uses_weft;
        }
    }
    // Each reconciler's state (a failing one names its error) and each store's size.
    if let Ok((200, body)) = crate::lab::http_get(&args.agent, "/status") {
        for line in body.lines().filter(|l| !l.trim().is_empty()) {
            writeln!(out, "  {line}")?;
        }
    }

    let guard = guard::check(&guard::Options {
        conf_dir: args.cni_conf_dir.clone(),
        bin_dirs: args.cni_bin_dirs.clone(),
    });
    writeln!(out, "\n{guard}")?;
    healthy &= !uses_guard || guard.healthy();

    print!("{out}");
    Ok(healthy)
}
