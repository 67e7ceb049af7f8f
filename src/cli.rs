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
    /// Side-by-side benchmarks against a baseline measured in the same run.
    #[command(subcommand)]
    Bench(BenchCmd),
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
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Cmd::Bench(BenchCmd::Cni(args)) => bench::cni::run(&args),
        Cmd::Bench(BenchCmd::Guard(args)) => bench::guard::run(&args),
        Cmd::Bench(BenchCmd::Datapath(args)) => bench::datapath::run(&args),
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
