//! `postmortem worker`: workers only, sharing the queue, tables and blobs with every other
//! process on the same (PostgreSQL) database. Each also sweeps the expired misses and
//! fetch claims of the remote sources now and then, so a setup with no `serve` keeps
//! those tables small.

use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;

use super::{JobArgs, StorageArgs};

/// Arguments of `postmortem worker`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub storage: StorageArgs,
    #[command(flatten)]
    pub jobs: JobArgs,
    /// Seconds between sweeps of the remote sources' expired misses and fetch claims (the
    /// first at start), and between refreshes of SQLite's planner statistics.
    #[arg(long, default_value_t = 600)]
    pub sweep_interval_secs: u64,
}

/// Runs workers until SIGTERM/Ctrl-C.
pub async fn run(args: WorkerArgs) -> anyhow::Result<()> {
    let db = args.storage.db().await?;
    db.migrate().await.context("migrating the database")?;
    let runner = super::runner(&db, &args.storage, &args.jobs)?;
    let (stop, stopped) = watch::channel(false);
    let mut tasks = super::spawn_workers(&runner, args.jobs.workers.max(1), &stopped);
    let workers = tasks.len();
    tasks.push(tokio::spawn(::worker::store::queue_wake::listen(
        db.clone(),
        runner.wake.clone(),
        stopped.clone(),
    )));
    tasks.push(tokio::spawn(::worker::store::sweep::run_expired_rows(
        db.clone(),
        Duration::from_secs(args.sweep_interval_secs.max(1)),
        stopped.clone(),
    )));
    tasks.push(tokio::spawn(::worker::store::statistics::run(
        db.clone(),
        Duration::from_secs(args.sweep_interval_secs.max(1)),
        stopped.clone(),
    )));
    tracing::info!(workers, backend = db.kind(), "workers running");
    super::shutdown_signal().await;
    let _ = stop.send(true);
    for t in tasks {
        let _ = t.await;
    }
    db.close().await;
    Ok(())
}
