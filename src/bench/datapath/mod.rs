//! `weft bench datapath`: throughput and latency of weft's eBPF datapath beside the limits
//! and references measured in the same run, interleaved:
//!
//! 1. a bare veth pair (the limit for same-node pod-to-pod);
//! 2. weft same-node (`bpf_redirect_peer`);
//! 3. Debian's `bridge` plugin same-node;
//! 4. weft cross-node (eBPF steering into the fixed-VNI VXLAN device);
//! 5. the flannel-style kernel VXLAN reference cross-node;
//! 6. weft same-node again through a ClusterIP (from_pod's per-packet translation).
//!
//! Method and caveats: docs/benchmarks.md. Nothing here asserts timing.

mod configs;
mod interrupt;
mod iperf;
mod reference;
mod report;
mod rr;
mod threads;
mod world;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};

use configs::order;
use report::{Results, Run, Setup};
use world::{World, WorldOptions, POD_MTU};

/// Options of `weft bench datapath`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Interleaved repetitions; each runs every configuration once.
    #[arg(long, default_value_t = 7)]
    pub reps: usize,
    /// Length of each iperf3 run, in seconds.
    #[arg(long, default_value_t = 5)]
    pub seconds: u32,
    /// Smoke run: 2 repetitions of 2 s.
    #[arg(long, conflicts_with_all = ["reps", "seconds"])]
    pub quick: bool,
    /// Turn off UDP-tunnel segmentation offload on the nodes' uplinks, so tunnel packets
    /// cross the underlay MTU-sized (like a NIC without that offload) instead of as 64 KB
    /// GSO packets.
    #[arg(long)]
    pub segmented_underlay: bool,
    /// Give the reference nodes the netfilter tables every weft node has (masquerade of the
    /// pod CIDR, notrack of the tunnel port), as flannel's masquerade rules and kube-proxy
    /// would; by default they have none, as in the research recipe.
    #[arg(long)]
    pub reference_netfilter: bool,
    /// How the weft nodes attach their programs: auto (TCX where the kernel has it), tcx, or
    /// clsact (the cls_bpf fallback).
    #[arg(long, default_value = "auto")]
    pub attach_mode: weft_datapath::AttachMode,
    /// Nice value of the measured processes and threads (iperf3 ends, latency probe). On a
    /// small machine shared with busy neighbours their CPU time otherwise decides the
    /// spread; 0 runs them like everything else.
    #[arg(long, default_value_t = -10, allow_hyphen_values = true,
          value_parser = clap::value_parser!(i32).range(-20..=19))]
    pub nice: i32,
    /// Leave the namespaces, agents and servers in place at the end (for profiling); the
    /// bench prints the `weft lab down` command that removes them.
    #[arg(long)]
    pub keep: bool,
}

/// Both iperf3 ends on CPU0: with a veth on two CPUs, ACKs sent from the receiver's CPU
/// reorder segments and cause hundreds of thousands of spurious retransmits, and all the
/// softirq work lands on one core, so throughput is inversely the CPU cost per byte.
const IPERF_AFFINITY: (usize, usize) = (0, 0);

pub fn run(args: &Args) -> anyhow::Result<()> {
    let (reps, seconds) = if args.quick {
        (2, 2)
    } else {
        (args.reps, args.seconds)
    };
    anyhow::ensure!(reps >= 1, "--reps: at least 1");
    anyhow::ensure!(seconds >= 1, "--seconds: at least 1");
    preflight()?;
    interrupt::install()?;

    let started = Instant::now();
    let name = format!("weftbench-{}", std::process::id());
    let dir = PathBuf::from(format!("/run/weft/{name}"));
    eprintln!(
        "building the bench under lab name {name} ({})",
        dir.display()
    );
    let world = World::build(&WorldOptions {
        name: name.clone(),
        dir,
        weft_bin: std::env::current_exe().context("find the weft binary")?,
        segmented_underlay: args.segmented_underlay,
        reference_netfilter: args.reference_netfilter,
        attach_mode: args.attach_mode,
        nice: args.nice,
        keep: args.keep,
    })?;
    eprintln!(
        "built in {:.1} s; {reps} repetitions x {} configurations x {seconds} s",
        started.elapsed().as_secs_f64(),
        configs::Config::ALL.len()
    );

    let rr_opts = rr::RrOptions {
        nice: args.nice,
        ..rr::RrOptions::default()
    };
    let client = iperf::ClientOptions {
        seconds,
        affinity: IPERF_AFFINITY,
        nice: args.nice,
    };
    let results = match measure(&world, reps, &client, rr_opts) {
        Ok(results) => results,
        // Ctrl-C also reaches iperf3 and makes the current step fail; say what happened.
        Err(_) if interrupt::requested() => {
            drop(world);
            bail!("interrupted; everything the bench made is removed");
        }
        Err(e) => return Err(e),
    };

    let setup = Setup {
        reps,
        seconds,
        affinity: IPERF_AFFINITY,
        warmup: rr_opts.warmup,
        timed: rr_opts.timed,
        client_cpu: rr_opts.client_cpu,
        server_cpu: rr_opts.server_cpu,
        pod_mtu: POD_MTU,
        nice: args.nice,
        attach_mode: args.attach_mode.name(),
        reference: if args.reference_netfilter {
            "with the weft nodes' netfilter tables (masquerade, tunnel notrack)"
        } else {
            "no netfilter tables (as the research recipe)"
        },
        underlay: if args.segmented_underlay {
            "veth, UDP-tunnel segmentation offload off (MTU-sized outer packets)"
        } else {
            "veth, default offloads (64 KB GSO tunnel packets cross it whole)"
        },
    };
    drop(world);
    print!("{}", report::render(&setup, &results));
    println!(
        "took {:.0} s (setup, measurement and cleanup)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Every repetition, every configuration in the repetition's order: throughput, then
/// latency, with the weft counters read around the weft runs.
fn measure(
    world: &World,
    reps: usize,
    client: &iperf::ClientOptions,
    rr_opts: rr::RrOptions,
) -> anyhow::Result<Results> {
    let mut results = Results::default();
    for rep in 0..reps {
        for config in order(rep) {
            interrupt::check()?;
            let pair = world.pair(config)?;
            let before = if config.is_weft() {
                Some(world.weft_counters()?)
            } else {
                None
            };
            let throughput = iperf::run_client(&pair.client_netns, pair.connect_ip, client)
                .with_context(|| format!("{} throughput", config.label()))?;
            interrupt::check()?;
            let server = std::net::SocketAddrV4::new(pair.server_ip, RR_PORT);
            let connect = std::net::SocketAddrV4::new(pair.connect_ip, RR_PORT);
            let latency = rr::run(
                &pair.client_netns,
                &pair.server_netns,
                server,
                connect,
                rr_opts,
            )
            .with_context(|| format!("{} latency", config.label()))?;
            if let Some(before) = before {
                let after = world.weft_counters()?;
                results.add_counters(config, &counter_growth(&before, &after));
            }
            eprintln!(
                "rep {}/{reps} {:<22} {:>6.2} Gbit/s {:>6} retr   RR p50 {:>6.1} µs p99 {:>6.1} µs",
                rep + 1,
                config.label(),
                throughput.gbps,
                throughput.retransmits,
                latency.p50_us,
                latency.p99_us
            );
            results.push(
                config,
                Run {
                    rep,
                    throughput,
                    latency,
                },
            );
        }
    }
    Ok(results)
}

/// Port of the latency probe's server (iperf3 has 5201 on the same address).
const RR_PORT: u16 = 5202;

/// What must be there before anything is built, each named.
fn preflight() -> anyhow::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("weft bench datapath needs root (namespaces, netlink, BPF)");
    }
    if !on_path("iperf3") {
        bail!("iperf3 is not on PATH (Debian package iperf3)");
    }
    for plugin in ["bridge", "host-local"] {
        let path = Path::new(reference::REFERENCE_PLUGIN_DIR).join(plugin);
        if !path.is_file() {
            bail!(
                "{} is missing (Debian package containernetworking-plugins)",
                path.display()
            );
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rr = rr::RrOptions::default();
    if cpus <= rr.client_cpu.max(rr.server_cpu) {
        bail!(
            "the latency probe pins its ends to CPU{} and CPU{}; this process may use {cpus} CPU(s)",
            rr.client_cpu,
            rr.server_cpu
        );
    }
    Ok(())
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|p| p.join(tool).is_file()))
        .unwrap_or(false)
}

/// Per counter name, how much it grew between two snapshots of every node.
fn counter_growth(
    before: &[weft_datapath::Counters],
    after: &[weft_datapath::Counters],
) -> Vec<(&'static str, u64)> {
    let mut growth: Vec<(&'static str, u64)> = Vec::new();
    for (b, a) in before.iter().zip(after) {
        for ((name, old), (_, new)) in b.iter().zip(a.iter()) {
            let d = new.saturating_sub(old);
            match growth.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => *v += d,
                None => growth.push((name, d)),
            }
        }
    }
    growth
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn defaults_and_quick() {
        let a = Cli::try_parse_from(["x"]).unwrap().args;
        assert_eq!((a.reps, a.seconds, a.quick, a.nice), (7, 5, false, -10));
        let n = Cli::try_parse_from(["x", "--nice", "-5"]).unwrap().args;
        assert_eq!(n.nice, -5);
        assert!(Cli::try_parse_from(["x", "--nice", "-21"]).is_err());
        let q = Cli::try_parse_from(["x", "--quick"]).unwrap().args;
        assert!(q.quick);
        assert!(Cli::try_parse_from(["x", "--quick", "--reps", "3"]).is_err());
    }

    #[test]
    fn counter_growth_sums_nodes() {
        let zero = weft_datapath::Counters::default();
        let growth = counter_growth(&[zero, zero], &[zero, zero]);
        assert!(growth.iter().all(|(_, v)| *v == 0));
        assert!(growth.iter().any(|(n, _)| *n == "local_delivery"));
    }
}
