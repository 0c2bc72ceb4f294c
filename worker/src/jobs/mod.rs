//! The job runner: leases crashes from the queue, processes each into a report, and
//! records the outcome.
//!
//! A worker loop ([`Runner::run`]) sweeps leases that expired after their last attempt,
//! leases one job, and hands it to [`process::process_job`]. Engine work runs on a
//! blocking thread under a time limit and `catch_unwind`, so a panicking or endless job
//! fails that job only. Store errors are transient: the job goes back to the queue until
//! its attempts run out.

pub mod fetch;
pub mod new_file;
pub mod process;
pub mod role_keys;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use crate::cache::TablesCache;
use crate::store::{crashes, now_ms, Blobs, Db, StoreError};

/// Why a job did not produce a report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The dump cannot be read: permanent.
    #[error("{0}")]
    Dump(#[from] engine::dump::DumpError),
    /// The engine panicked: permanent (the same input would panic again).
    #[error("the engine panicked: {0}")]
    Panic(String),
    /// The engine took longer than the job's time limit: permanent.
    #[error("processing exceeded the time limit of {0:?}")]
    TimeLimit(Duration),
    /// The database or blob store failed: transient.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The report could not be serialized (a bug): permanent.
    #[error("the report could not be serialized: {0}")]
    Serialize(String),
    /// A blocking task could not be joined (runtime shutting down): transient.
    #[error("the processing task was cancelled")]
    Cancelled,
}

impl JobError {
    /// Whether retrying could help.
    pub fn is_transient(&self) -> bool {
        matches!(self, JobError::Store(_) | JobError::Cancelled)
    }
}

/// How workers behave.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// How long a lease lasts before another worker may take the job over. It is
    /// renewed while the job runs.
    pub lease: Duration,
    /// Leases per job before it ends `failed`.
    pub max_attempts: i32,
    /// Wall-clock limit of one job, from its lease to its report (a deadline for the
    /// whole job, not per step); also the deadline of every fetch from a remote symbol
    /// source it makes.
    pub time_limit: Duration,
    /// How long an idle worker waits before looking at the queue again (it is also
    /// woken at once by an in-process upload).
    pub poll_interval: Duration,
    /// Engine options (signature rules, walker heuristics).
    pub process: engine::process::ProcessOptions,
    /// Remote symbol sources asked for what no upload gives (none by default).
    pub remote: Option<Arc<fetch::Fetcher>>,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            lease: Duration::from_secs(60),
            max_attempts: 3,
            time_limit: Duration::from_secs(30),
            poll_interval: Duration::from_millis(500),
            process: engine::process::ProcessOptions::default(),
            remote: None,
        }
    }
}

/// Upper bounds (seconds) of the processing-latency histogram.
pub const LATENCY_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Counters of this process's workers, read by `/metrics`.
#[derive(Debug, Default)]
pub struct JobMetrics {
    pub processed: AtomicU64,
    pub failed: AtomicU64,
    pub retried: AtomicU64,
    pub lost_leases: AtomicU64,
    /// Cumulative-per-bucket counts of [`LATENCY_BUCKETS`], then +Inf.
    pub latency_buckets: [AtomicU64; 12],
    pub latency_sum_ms: AtomicU64,
    pub latency_count: AtomicU64,
    /// Remote symbol source lookups by (source, result).
    pub lookups: std::sync::Mutex<std::collections::BTreeMap<(String, &'static str), u64>>,
    /// Files fetched from each remote source: (count, bytes, seconds asking).
    pub fetches: std::sync::Mutex<std::collections::BTreeMap<String, (u64, u64, f64)>>,
}

impl JobMetrics {
    /// Counts what remote sources answered.
    pub fn count_lookups(&self, lookups: &[engine::report::Lookup]) {
        if let Ok(mut m) = self.lookups.lock() {
            for l in lookups {
                *m.entry((l.source.clone(), l.result.as_str())).or_default() += 1;
            }
        }
    }

    /// Counts a file fetched from `source`: its bytes and how long asking took.
    pub fn count_fetch(&self, source: &str, bytes: u64, took: Duration) {
        if let Ok(mut m) = self.fetches.lock() {
            let e = m.entry(source.to_string()).or_default();
            e.0 += 1;
            e.1 += bytes;
            e.2 += took.as_secs_f64();
        }
    }

    fn observe(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        for (i, le) in LATENCY_BUCKETS.iter().enumerate() {
            if secs <= *le {
                self.latency_buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_buckets[LATENCY_BUCKETS.len()].fetch_add(1, Ordering::Relaxed);
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        self.latency_sum_ms.fetch_add(ms, Ordering::Relaxed);
        self.latency_count.fetch_add(1, Ordering::Relaxed);
    }
}

/// Everything a worker needs; cheap to clone.
#[derive(Debug, Clone)]
pub struct Runner {
    pub db: Db,
    pub blobs: Blobs,
    pub cache: TablesCache,
    pub config: JobConfig,
    pub metrics: Arc<JobMetrics>,
    /// Notified when a crash is queued in this process.
    pub wake: Arc<Notify>,
}

impl Runner {
    /// Runs one worker loop until `shutdown` turns true. `name` identifies the lease holder
    /// and must be unique across every process sharing the queue.
    pub async fn run(self, name: String, mut shutdown: watch::Receiver<bool>) {
        info!(worker = %name, "worker started");
        while !*shutdown.borrow() {
            match self.step(&name).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => warn!(worker = %name, error = %e, "queue error; retrying"),
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(self.config.poll_interval) => {}
                _ = shutdown.changed() => {}
            }
        }
        info!(worker = %name, "worker stopped");
    }

    /// Leases and processes at most one job. Returns whether there was one.
    pub async fn step(&self, name: &str) -> Result<bool, StoreError> {
        let now = now_ms();
        let lease_ms = i64::try_from(self.config.lease.as_millis()).unwrap_or(i64::MAX);
        let exhausted = crashes::fail_exhausted(&self.db, now, self.config.max_attempts).await?;
        if exhausted > 0 {
            self.metrics.failed.fetch_add(exhausted, Ordering::Relaxed);
        }
        let Some(lease) =
            crashes::lease(&self.db, name, now, lease_ms, self.config.max_attempts).await?
        else {
            return Ok(false);
        };
        let started = std::time::Instant::now();
        // The time limit is the whole job's deadline: gathering tables (one lookup per
        // module) counts as much as the engine's own steps, each of which is bounded too.
        let limit = self.config.time_limit;
        let outcome =
            tokio::time::timeout(limit, self.process_with_renewal(&lease, name, lease_ms))
                .await
                .unwrap_or(Err(JobError::TimeLimit(limit)));
        let elapsed = started.elapsed();
        let (outcome, counter) = match outcome {
            Ok(report) => (crashes::Outcome::Done(report), &self.metrics.processed),
            Err(e) if e.is_transient() => (
                crashes::Outcome::Retry {
                    reason: e.to_string(),
                },
                &self.metrics.retried,
            ),
            Err(e) => (
                crashes::Outcome::Failed {
                    reason: e.to_string(),
                },
                &self.metrics.failed,
            ),
        };
        let kept = crashes::finish(
            &self.db,
            &lease,
            name,
            now_ms(),
            self.config.max_attempts,
            &outcome,
        )
        .await?;
        if kept {
            counter.fetch_add(1, Ordering::Relaxed);
            self.metrics.observe(elapsed);
        } else {
            warn!(crash_id = %lease.id, "lease lost before the job finished; result dropped");
            self.metrics.lost_leases.fetch_add(1, Ordering::Relaxed);
        }
        Ok(true)
    }

    /// Processes a leased job while renewing its lease every third of its length.
    async fn process_with_renewal(
        &self,
        lease: &crashes::Lease,
        name: &str,
        lease_ms: i64,
    ) -> Result<crashes::StoredReport, JobError> {
        let job = process::process_job(self, lease);
        tokio::pin!(job);
        let mut tick = tokio::time::interval(self.config.lease / 3);
        tick.tick().await;
        loop {
            tokio::select! {
                r = &mut job => return r,
                _ = tick.tick() => {
                    let until = now_ms().saturating_add(lease_ms);
                    if let Err(e) = crashes::renew(&self.db, lease, name, until).await {
                        warn!(crash_id = %lease.id, error = %e, "could not renew lease");
                    }
                }
            }
        }
    }
}
