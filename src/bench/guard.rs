//! `weft bench guard`.

/// Options of `weft bench guard`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args) -> anyhow::Result<()> {
    anyhow::bail!("weft bench guard is not implemented yet")
}
