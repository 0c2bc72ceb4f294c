//! The job runner: leases crashes from the queue, processes each into a report, and
//! records the outcome.
//!
//! A worker loop ([`Runner::run`]) sweeps leases that expired after their last attempt
//! and leases a batch of jobs in one transaction ([`crashes::claim_batch`]), hands each
//! to [`process::process_job`], and stores the batch's results in one transaction: the
//! queue and the store cost a few statements per batch, not per job ([`steps`] measures
//! each step). Neither is on the path from one job to the next: the next batch is
//! leased while the current one is processed, and a batch's results are stored by a
//! task of their own while the next batches are processed. Engine work runs on a
//! blocking thread under a time limit and `catch_unwind`, so a panicking or endless job
//! fails that job only. Store errors are transient: the job goes back to the queue until
//! its attempts run out.

pub mod batch_lookups;
pub mod fetch;
pub mod new_file;
pub mod process;
pub mod recent_use;
pub mod role_keys;
pub mod source_bundles;
pub mod source_links;
pub mod source_servers;
pub mod steps;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use crate::cache::TablesCache;
use crate::store::{crashes, now_ms, Blobs, Db, StoreError};
use steps::Step;

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
    /// Source-link mappings asked for a frame's source after the uploaded bundles
    /// (`--source-link`; none by default).
    pub source_links: Option<Arc<sources::source_link::SourceLinks>>,
    /// Jobs a worker leases at once; their results are stored together when the last
    /// is done, so a larger batch saves statements and adds up to a batch's processing
    /// time to each crash's wait for its report. With a backlog a worker asks for up to
    /// four times as many (`BatchSize`).
    pub batch: usize,
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
            source_links: None,
            batch: DEFAULT_BATCH,
        }
    }
}

/// Jobs leased at once by default: with a crash processed in ~1–5 ms, 8 makes the queue's
/// and the store's statements per job an eighth, for at most a few tens of milliseconds
/// more from upload to report.
pub const DEFAULT_BATCH: usize = 8;

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
    /// Where the jobs' wall time goes, step by step.
    pub steps: steps::StepMetrics,
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

/// A processed batch: its leases, and each job's outcome and the time it took.
type Processed = (Vec<crashes::Lease>, Vec<(crashes::Outcome, Duration)>);

/// What a worker holds between two batches: the next batch, leased while the last one
/// was processed, the last batch's results, not yet handed to a store, and the batches
/// whose results are being stored.
#[derive(Debug, Default)]
struct Held {
    next: Vec<crashes::Lease>,
    /// How many jobs `next` was claimed with (a full batch is a backlog).
    next_asked: usize,
    /// How many jobs the next claim asks for.
    size: BatchSize,
    /// Stored once the claim after them has run ([`Runner::step`]).
    unstored: Option<Processed>,
    storing: std::collections::VecDeque<Storing>,
}

/// A batch's results being stored by a task of their own.
#[derive(Debug)]
struct Storing {
    /// The batch's crashes: a claim skips them until they are stored.
    ids: Vec<String>,
    task: tokio::task::JoinHandle<()>,
}

/// Stores a worker lets run beside its jobs; with one more done, it waits for the
/// oldest. Two: a store slower than a batch's jobs (PostgreSQL's round trips, SQLite's
/// lock) overlaps two batches before it slows the worker.
const STORES_IN_FLIGHT: usize = 2;

/// Reports stored by this process between two refreshes of SQLite's planner statistics
/// ([`Runner::refresh_statistics`]).
const STATISTICS_EVERY: u64 = 1_000;

/// Times a batch's results are stored when PostgreSQL ends the store as a deadlock (a
/// store is one transaction, rolled back whole, so trying it again is safe); after the
/// last, the batch's leases expire and other attempts take its crashes, as after any
/// failed store.
const STORE_TRIES: u32 = 3;

/// A claim asks for at most this many times the configured batch.
const BACKLOG_GROWTH: usize = 4;

/// How many jobs a worker's next claim asks for: the configured batch
/// ([`JobConfig::batch`]), doubled after each claim the queue filled, up to
/// [`BACKLOG_GROWTH`] times it, and back to it after a claim the queue could not fill.
///
/// With a backlog every crash waits anyway, and a larger batch takes the queue's claim
/// and the store's transaction (on SQLite, each a turn at the one writer, shared with
/// every other worker and upload) fewer times per crash: the writer, not the jobs, set
/// the pace of a drain (issue 40). Without one, batches stay small, so that no crash
/// waits behind many others' jobs for its report.
#[derive(Debug, Default, Clone, Copy)]
struct BatchSize {
    /// The configured batch (0 until the first claim: then taken from the config).
    base: usize,
    now: usize,
}

impl BatchSize {
    /// How many jobs to ask for now, with `base` the configured batch.
    fn ask(&mut self, base: usize) -> usize {
        let base = base.max(1);
        if self.base != base {
            *self = BatchSize { base, now: base };
        }
        self.now
    }

    /// After a claim that asked for `asked` jobs and leased `got`.
    fn claimed(&mut self, asked: usize, got: usize) {
        self.now = if got >= asked {
            asked
                .saturating_mul(2)
                .min(self.base.saturating_mul(BACKLOG_GROWTH))
        } else {
            self.base
        };
    }
}

impl Held {
    /// The crashes whose results the worker holds, not yet stored, and `current`.
    fn held_ids(&self, current: &[crashes::Lease]) -> Vec<String> {
        let unstored = self.unstored.iter().flat_map(|(leases, _)| leases);
        let storing = self.storing.iter().flat_map(|s| s.ids.iter().cloned());
        current
            .iter()
            .chain(unstored)
            .map(|l| l.id.clone())
            .chain(storing)
            .collect()
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
    /// The symbol files' uses this process recorded lately (each written twice an hour).
    pub recent_use: Arc<recent_use::RecentUse>,
}

impl Runner {
    /// Runs one worker loop until `shutdown` turns true. `name` identifies the lease holder
    /// and must be unique across every process sharing the queue.
    ///
    /// While a worker processes a batch, the next batch is leased beside it
    /// ([`Runner::ahead`]), and the previous batches' results are stored by tasks of
    /// their own ([`Runner::spawn_store`]): the claim's commit and the store's — a sync
    /// of SQLite's log, a round trip to PostgreSQL — are off the path from one job to the
    /// next as long as the database keeps up. A stopping worker waits for its stores and
    /// gives the batch it leased ahead back to the queue ([`crashes::release`]).
    pub async fn run(self, name: String, mut shutdown: watch::Receiver<bool>) {
        info!(worker = %name, "worker started");
        let mut held = Held::default();
        while !*shutdown.borrow() {
            match self.step(&name, &mut held).await {
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
        if let Some(unstored) = held.unstored.take() {
            held.storing.push_back(self.spawn_store(&name, unstored));
        }
        while let Some(storing) = held.storing.pop_front() {
            if let Err(e) = storing.task.await {
                warn!(worker = %name, error = %e, "a store of results did not end");
            }
        }
        let next = std::mem::take(&mut held.next);
        if let Err(e) = crashes::release(&self.db, &name, &next).await {
            warn!(worker = %name, error = %e, "could not give back the batch leased ahead");
        }
        info!(worker = %name, "worker stopped");
    }

    /// Processes the batch leased ahead, or leases one if there is none (after an idle
    /// spell), while the next batch is leased beside it ([`Runner::ahead`]); keeps its
    /// results for a store of their own. Returns whether there was a job.
    ///
    /// The last batch's results go to their store ([`Runner::spawn_store`]) once the
    /// claim that follows them has run, not before it: the claim is what the worker will
    /// wait for, the store is not, and on SQLite, whose one writer takes them in turn, a
    /// claim queued behind the store waited for the whole of it (issue 40).
    async fn step(&self, name: &str, held: &mut Held) -> Result<bool, StoreError> {
        let lease_ms = i64::try_from(self.config.lease.as_millis()).unwrap_or(i64::MAX);
        held.storing.retain(|s| !s.task.is_finished());
        let (leases, asked) = if held.next.is_empty() {
            let ids = held.held_ids(&[]);
            let skip: Vec<&str> = ids.iter().map(String::as_str).collect();
            let asked = held.size.ask(self.config.batch);
            let claimed = self
                .metrics
                .steps
                .timed(Step::Claim, self.claim(name, lease_ms, &skip, asked))
                .await;
            if let Some(unstored) = held.unstored.take() {
                held.storing.push_back(self.spawn_store(name, unstored));
            }
            let claimed = claimed?;
            held.size.claimed(asked, claimed.len());
            if claimed.is_empty() {
                return Ok(false);
            }
            (claimed, asked)
        } else {
            (std::mem::take(&mut held.next), held.next_asked)
        };
        // the next batch is leased only when this one is full, a backlog: a batch the
        // queue could not fill says the queue is short, and crashes queued from then on
        // are left to idle workers rather than made to wait behind this batch's jobs
        let ahead_asked = (leases.len() >= asked).then(|| held.size.ask(self.config.batch));
        let ahead = self.ahead(name, lease_ms, held.held_ids(&leases), ahead_asked);
        let unstored = held.unstored.take();
        let mut stored = None;
        let ahead = async {
            let next = ahead.await;
            stored = unstored.map(|p| self.spawn_store(name, p));
            next
        };
        let (ended, next, waited) = self
            .process_with_renewal(&leases, name, lease_ms, ahead)
            .await;
        held.storing.extend(stored);
        if let Some(asked) = ahead_asked {
            held.size.claimed(asked, next.len());
            held.next_asked = asked;
        }
        held.next = next;
        held.unstored = Some((leases, ended));
        let waited = waited + self.stores_in_flight(name, held).await;
        self.metrics.steps.observe(Step::Wait, waited);
        Ok(true)
    }

    /// The claim of the next batch, `asked` jobs (none when `asked` is None: the current
    /// batch was not full), run beside the jobs of this one: it skips the crashes the
    /// worker holds (`held`). A failed claim leases nothing here: the next step claims
    /// again, and reports the error.
    async fn ahead(
        &self,
        name: &str,
        lease_ms: i64,
        held: Vec<String>,
        asked: Option<usize>,
    ) -> Vec<crashes::Lease> {
        let Some(asked) = asked else {
            return Vec::new();
        };
        let skip: Vec<&str> = held.iter().map(String::as_str).collect();
        let claimed = self
            .metrics
            .steps
            .timed(Step::Claim, self.claim(name, lease_ms, &skip, asked))
            .await;
        claimed.unwrap_or_else(|e| {
            warn!(worker = %name, error = %e, "could not lease the next batch ahead");
            Vec::new()
        })
    }

    /// Stores a processed batch's results in a task of its own, beside the next batches'
    /// jobs.
    fn spawn_store(&self, name: &str, (leases, ended): Processed) -> Storing {
        let ids = leases.iter().map(|l| l.id.clone()).collect();
        let (runner, worker) = (self.clone(), name.to_string());
        let task = tokio::spawn(async move {
            runner.store_logged(&worker, Some((leases, ended))).await;
        });
        Storing { ids, task }
    }

    /// With more than [`STORES_IN_FLIGHT`] stores running, waits for the oldest. How
    /// long it waited.
    async fn stores_in_flight(&self, name: &str, held: &mut Held) -> Duration {
        let started = Instant::now();
        while held.storing.len() > STORES_IN_FLIGHT {
            let Some(oldest) = held.storing.pop_front() else {
                break;
            };
            if let Err(e) = oldest.task.await {
                warn!(worker = %name, error = %e, "a store of results did not end");
            }
        }
        started.elapsed()
    }

    /// Refreshes SQLite's planner statistics in a task of its own
    /// ([`crate::store::statistics::refresh`]: a bounded `ANALYZE` of the tables that
    /// changed size tenfold, nothing otherwise), every [`STATISTICS_EVERY`] reports this
    /// process stored, beside the sweep's rounds. The plans of a store's statements come
    /// from the statistics of the server's start: of a store that was small then, a burst
    /// of crashes outgrew them within seconds, and its batches' statements slowed as the
    /// index tables grew (a drain of 10,000 crashes fell from 400 to 220 a second; issue
    /// 40), where the sweep's next round was a minute away.
    fn refresh_statistics(&self) {
        let db = self.db.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::store::statistics::refresh(&db).await {
                warn!(error = %e, "refreshing the planner's statistics failed");
            }
        });
    }

    /// Stores a batch's results, if any, saying so in the log when that fails: the jobs
    /// stay leased, and another attempt takes them once their leases expire.
    async fn store_logged(&self, name: &str, processed: Option<Processed>) {
        if let Some((leases, ended)) = processed {
            if let Err(e) = self.store(name, &leases, &ended).await {
                warn!(worker = %name, error = %e, "could not store a batch's results");
            }
        }
    }

    /// Stores a processed batch's results in one transaction and counts them.
    async fn store(
        &self,
        name: &str,
        leases: &[crashes::Lease],
        ended: &[(crashes::Outcome, Duration)],
    ) -> Result<(), StoreError> {
        let finished: Vec<crashes::Finished<'_>> = leases
            .iter()
            .zip(ended)
            .map(|(lease, (outcome, took))| crashes::Finished {
                lease,
                outcome,
                processing_us: Some(i64::try_from(took.as_micros()).unwrap_or(i64::MAX)),
            })
            .collect();
        let mut tries = 1;
        let kept = loop {
            let stored = self
                .metrics
                .steps
                .timed(
                    Step::Store,
                    crashes::finish_batch(
                        &self.db,
                        name,
                        now_ms(),
                        self.config.max_attempts,
                        &finished,
                    ),
                )
                .await;
            match stored {
                // another worker's batch took the same groups' rows in the other order
                // and PostgreSQL rolled this one back whole: its leases still hold
                Err(e) if tries < STORE_TRIES && e.is_deadlock() => {
                    warn!(worker = %name, tries, "a batch's store met a deadlock; storing it again");
                    tries += 1;
                }
                other => break other?,
            }
        };
        for ((lease, (outcome, took)), kept) in leases.iter().zip(ended).zip(kept) {
            if kept {
                let counter = match outcome {
                    crashes::Outcome::Done(_) => &self.metrics.processed,
                    crashes::Outcome::Retry { .. } => &self.metrics.retried,
                    crashes::Outcome::Failed { .. } => &self.metrics.failed,
                };
                let before = counter.fetch_add(1, Ordering::Relaxed);
                if matches!(outcome, crashes::Outcome::Done(_))
                    && (before + 1) % STATISTICS_EVERY == 0
                {
                    self.refresh_statistics();
                }
                self.metrics.observe(*took);
            } else {
                warn!(crash_id = %lease.id, "lease lost before the job finished; result dropped");
                self.metrics.lost_leases.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Fails the jobs whose attempts ran out, then leases a batch of up to `n` jobs (one
    /// transaction). `skip`: the crashes whose results this worker holds, not yet stored.
    async fn claim(
        &self,
        name: &str,
        lease_ms: i64,
        skip: &[&str],
        n: usize,
    ) -> Result<Vec<crashes::Lease>, StoreError> {
        let claim = crashes::Claim {
            skip,
            worker: name,
            now: now_ms(),
            lease_ms,
            max_attempts: self.config.max_attempts,
            n,
        };
        let (exhausted, leases) = crashes::claim_batch(&self.db, &claim).await?;
        if exhausted > 0 {
            self.metrics.failed.fetch_add(exhausted, Ordering::Relaxed);
        }
        Ok(leases)
    }

    /// Processes a batch of leased jobs in turn ([`Runner::process_batch`]) while `ahead`
    /// runs beside them, renewing the batch's leases, and those `ahead` leased, every
    /// third of their length until both are done. Each job's outcome and the time it
    /// took, what `ahead` leased, and how long the worker waited for it after its jobs.
    async fn process_with_renewal(
        &self,
        leases: &[crashes::Lease],
        name: &str,
        lease_ms: i64,
        ahead: impl std::future::Future<Output = Vec<crashes::Lease>>,
    ) -> (
        Vec<(crashes::Outcome, Duration)>,
        Vec<crashes::Lease>,
        Duration,
    ) {
        let jobs = self.process_batch(leases);
        tokio::pin!(jobs, ahead);
        let mut ended: Option<(Vec<(crashes::Outcome, Duration)>, Instant)> = None;
        let mut next: Option<Vec<crashes::Lease>> = None;
        let mut renewing: Option<futures::future::BoxFuture<'_, ()>> = None;
        let mut tick = tokio::time::interval(self.config.lease / 3);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        let (done, next, waited) = loop {
            tokio::select! {
                done = &mut jobs, if ended.is_none() => {
                    if let Some(next) = next.take() {
                        break (done, next, Duration::ZERO);
                    }
                    ended = Some((done, Instant::now()));
                }
                leased = &mut ahead, if next.is_none() => {
                    if let Some((done, since)) = ended.take() {
                        break (done, leased, since.elapsed());
                    }
                    next = Some(leased);
                }
                Some(()) = futures::future::OptionFuture::from(renewing.as_mut()) => {
                    renewing = None;
                }
                _ = tick.tick(), if renewing.is_none() => {
                    let held = leases.iter().chain(next.iter().flatten()).cloned().collect();
                    renewing = Some(Box::pin(self.renew_all(held, name, lease_ms)));
                }
            }
        };
        if let Some(renewal) = renewing {
            renewal.await;
        }
        (done, next, waited)
    }

    /// Extends `held`'s leases to `lease_ms` from now, one statement each.
    ///
    /// Run beside the batch's jobs and the claim ahead, never in their place: on SQLite a
    /// renewal takes the writer's turn ([`Db::write_turn`]), which the claim ahead may hold
    /// while it waits to be polled; a renewal awaited in a `select!` arm stopped that claim
    /// from being polled, and each waited for the other for ever (the worker and SQLite's
    /// connection thread with it).
    async fn renew_all(&self, held: Vec<crashes::Lease>, name: &str, lease_ms: i64) {
        let until = now_ms().saturating_add(lease_ms);
        for lease in &held {
            if let Err(e) = crashes::renew(&self.db, lease, name, until).await {
                warn!(crash_id = %lease.id, error = %e, "could not renew lease");
            }
        }
    }

    /// Processes a batch of leased jobs in turn, each under the time limit (the whole
    /// job's deadline, from its own start: gathering tables counts as much as the
    /// engine's steps, each of which is bounded too). Each job's outcome and the time it
    /// took.
    async fn process_batch(&self, leases: &[crashes::Lease]) -> Vec<(crashes::Outcome, Duration)> {
        let limit = self.config.time_limit;
        let mut ended = Vec::with_capacity(leases.len());
        // what the batch's jobs looked up, for its later jobs of the same modules; never
        // kept across batches (`batch_lookups`)
        let batch = batch_lookups::BatchLookups::default();
        for lease in leases {
            let started = Instant::now();
            let outcome = tokio::time::timeout(limit, process::process_job(self, lease, &batch))
                .await
                .unwrap_or(Err(JobError::TimeLimit(limit)));
            let outcome = match outcome {
                Ok(report) => crashes::Outcome::Done(report),
                Err(e) if e.is_transient() => crashes::Outcome::Retry {
                    reason: e.to_string(),
                },
                Err(e) => crashes::Outcome::Failed {
                    reason: e.to_string(),
                },
            };
            ended.push((outcome, started.elapsed()));
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::BatchSize;

    #[test]
    fn a_batch_grows_while_the_queue_fills_it_and_falls_back_when_it_does_not() {
        let mut size = BatchSize::default();
        let mut asked = Vec::new();
        // a backlog: every claim comes back full
        for _ in 0..4 {
            let n = size.ask(8);
            asked.push(n);
            size.claimed(n, n);
        }
        assert_eq!(asked, [8, 16, 32, 32], "doubles up to four times the batch");
        // the queue runs short: back to the configured batch at once
        let n = size.ask(8);
        size.claimed(n, 5);
        assert_eq!(size.ask(8), 8);
        // an empty queue leaves it there
        size.claimed(8, 0);
        assert_eq!(size.ask(8), 8);
    }

    #[test]
    fn a_batch_of_one_grows_to_four_and_a_new_configuration_starts_over() {
        let mut size = BatchSize::default();
        for want in [1, 2, 4, 4] {
            let n = size.ask(1);
            assert_eq!(n, want);
            size.claimed(n, n);
        }
        assert_eq!(
            size.ask(16),
            16,
            "another configured batch starts from itself"
        );
        assert_eq!(size.ask(0), 1, "a batch of 0 asks for one");
    }
}
