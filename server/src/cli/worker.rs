//! `postmortem worker`: workers only, sharing the queue, tables and blobs with every other
//! process on the same (PostgreSQL) database. Each also sweeps the expired misses and
//! fetch claims of the remote sources now and then, so a setup with no `serve` keeps
//! those tables small.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{watch, Notify};
use worker::cache::TablesCache;
use worker::jobs::{JobMetrics, Runner};

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
    let runner = Runner {
        db: db.clone(),
        blobs: args.storage.blobs()?,
        cache: TablesCache::new(args.jobs.cache_mb.saturating_mul(1 << 20)),
        config: args.jobs.config(&args.storage.data_dir)?,
        metrics: Arc::new(JobMetrics::default()),
        wake: Arc::new(Notify::new()),
    };
    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    for i in 0..args.jobs.workers.max(1) {
        tasks.push(tokio::spawn(
            runner.clone().run(super::worker_name(i), stopped.clone()),
        ));
    }
    let workers = tasks.len();
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
