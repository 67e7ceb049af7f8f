//! `weft bench datapath`.

/// Options of `weft bench datapath`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args) -> anyhow::Result<()> {
    anyhow::bail!("weft bench datapath is not implemented yet")
}
