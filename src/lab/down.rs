//! `weft lab down`: stop the agents and remove everything the lab made, including what a
//! failed `up` left half-built.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::netns;
use super::state::LabState;
use super::topology::Topology;

pub fn down(name: &str, dir: &Path) -> anyhow::Result<()> {
    match LabState::load(dir) {
        Ok(state) => down_state(&state),
        // No state file: still remove whatever carries the lab's name.
        Err(_) => cleanup(name, dir, &[]),
    }
}

pub fn down_state(state: &LabState) -> anyhow::Result<()> {
    let pids: Vec<i32> = state.nodes.iter().filter_map(|n| n.agent_pid).collect();
    cleanup(&state.name, &state.dir, &pids)
}

fn cleanup(name: &str, dir: &Path, agent_pids: &[i32]) -> anyhow::Result<()> {
    let namespaces = netns::list_with_prefix(&format!("{name}-"));
    // Agents first (politely, then not), and anything else still running in the lab's
    // namespaces (test servers, iperf3), so the namespaces can go away.
    let mut pids: Vec<i32> = agent_pids.to_vec();
    for ns in &namespaces {
        pids.extend(netns::pids_in(&netns::path_of(ns)));
    }
    pids.sort_unstable();
    pids.dedup();
    for &pid in &pids {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while pids.iter().any(|&p| super::process_alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for &pid in &pids {
        if super::process_alive(pid) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    let mut errors = Vec::new();
    for ns in &namespaces {
        if let Err(e) = netns::delete(ns) {
            errors.push(format!("{ns}: {e}"));
        }
    }
    let pins = Topology::new(name).pin_base();
    if pins.exists() {
        if let Err(e) = std::fs::remove_dir_all(&pins) {
            errors.push(format!("{}: {e}", pins.display()));
        }
    }
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            errors.push(format!("{}: {e}", dir.display()));
        }
    }
    anyhow::ensure!(
        errors.is_empty(),
        "lab down left things behind: {}",
        errors.join("; ")
    );
    Ok(())
}
