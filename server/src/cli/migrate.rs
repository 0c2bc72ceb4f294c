//! `postmortem migrate`: apply the embedded migrations and exit.

use anyhow::Context;

use super::StorageArgs;

/// Arguments of `postmortem migrate`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub storage: StorageArgs,
}

/// Applies the migrations of the database's dialect.
pub async fn run(args: MigrateArgs) -> anyhow::Result<()> {
    let db = args.storage.db().await?;
    db.migrate().await.context("migrating the database")?;
    tracing::info!(backend = db.kind(), "database migrated");
    db.close().await;
    Ok(())
}
