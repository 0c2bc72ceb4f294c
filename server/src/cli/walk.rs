//! `postmortem walk`: the lead's subcommand (stub until it lands).

/// Arguments of `postmortem walk`.
#[derive(Debug, clap::Args)]
pub struct WalkArgs {
    /// The dump to walk.
    pub dump: std::path::PathBuf,
}

/// Not yet.
pub fn run(_args: WalkArgs) -> anyhow::Result<()> {
    anyhow::bail!("`postmortem walk` is not implemented yet")
}
