//! The command-line interface (everything but the CNI plugin).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Print the version.
    Version,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Version => {
            println!("weft {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
    }
}
