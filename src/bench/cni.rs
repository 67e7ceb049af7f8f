//! `weft bench cni`.

/// Options of `weft bench cni`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args) -> anyhow::Result<()> {
    anyhow::bail!("weft bench cni is not implemented yet")
}
