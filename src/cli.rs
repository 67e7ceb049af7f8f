//! The command-line interface (everything but the CNI plugin).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::bench;

#[derive(Debug, Parser)]
#[command(
    name = "weft",
    version,
    about = "weft: a Kubernetes network plane with an eBPF datapath"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run the node agent: load the datapath and reconcile the node from the cluster state.
    Agent(Box<crate::agent::AgentArgs>),
    /// A simulated cluster on this machine: up, status, check, down.
    Lab(crate::lab::LabArgs),
    /// Side-by-side benchmarks against a baseline measured in the same run.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Report this node's weft: CNI configuration, plugins, datapath, agent, egress guard.
    Status(crate::status::StatusArgs),
    /// Print the version.
    Version,
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// CNI ADD/DEL latency of weft against Debian's bridge + host-local.
    Cni(bench::cni::Args),
    /// ADD latency added by chaining weft-guard.
    Guard(bench::guard::Args),
    /// Throughput and latency of weft's datapath against raw veth, bridge and kernel VXLAN.
    Datapath(bench::datapath::Args),
    /// The agent against an in-memory API server with a synthetic cluster: sync, memory,
    /// event latency.
    Agent(bench::agent::Args),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Cmd::Agent(args) => {
            init_logging();
            crate::agent::run(*args)
        }
        Cmd::Lab(args) => crate::lab::main(args),
        Cmd::Bench(BenchCmd::Cni(args)) => bench::cni::run(&args),
        Cmd::Bench(BenchCmd::Guard(args)) => bench::guard::run(&args),
        Cmd::Bench(BenchCmd::Datapath(args)) => bench::datapath::run(&args),
        Cmd::Bench(BenchCmd::Agent(args)) => bench::agent::run(&args),
        Cmd::Status(args) => match crate::status::run(&args) {
            Ok(true) => Ok(()),
            Ok(false) => Err(anyhow::anyhow!(
                "something weft is configured to use is missing or broken (see above)"
            )),
            Err(e) => Err(e),
        },
        Cmd::Version => {
            println!("weft {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    // kube-rs logs every failed request and dropped watch itself; the agent's sources
    // report the same once, with the kind.
    let filter = tracing_subscriber::EnvFilter::try_from_env("WEFT_LOG")
        .unwrap_or_else(|_| "info,kube_client=error,kube_client::client::builder=off".into());
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}
