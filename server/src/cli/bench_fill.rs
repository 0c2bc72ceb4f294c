//! `postmortem bench store`'s fill: crashes inserted, leased and finished in batches through
//! the store's own statements (`crashes::insert`, `lease_batch`, `finish_batch`), by
//! several fillers at once on PostgreSQL as several workers and uploaders would, and
//! resumed where an interrupted fill stopped (a million crashes take an hour or more on a
//! loaded machine).
//!
//! Crash `i` of the fill is the same whatever the filler, the run or the number of
//! fillers: its signature and version come from one deterministic sequence drawn up
//! front, its time from `i`, and its dump's hash is `i` itself (64 hex digits), from which
//! whoever leases the crash finds its signature.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use worker::store::crashes::{self, Finished, NewCrash, Outcome, StoredReport};
use worker::store::{Backend, Db};

/// Crashes inserted, leased and finished per batch.
const BATCH: u64 = 1_000;
const DAY_MS: i64 = 86_400_000;
/// The worker name of the fill's leases.
const WORKER: &str = "bench";
/// Uploads in flight at once per filler on PostgreSQL, as concurrent clients upload:
/// each insert is its own transaction, and concurrent commits share the log's flushes.
/// SQLite has one writer: one at a time.
const INSERTS_IN_FLIGHT: usize = 8;
/// Times a batch's finish is tried when PostgreSQL ends it as a deadlock (two fillers'
/// batches updating the same groups' rows in another order): the transaction was rolled
/// back and the leases are still held, so it is simply run again.
const FINISH_TRIES: usize = 20;

/// What to fill.
pub struct Plan<'a> {
    pub crashes: u64,
    pub signatures: u64,
    pub days: u64,
    /// Batches in flight at once (each inserts, leases and finishes its own).
    pub fillers: usize,
    /// The reports, one per signature.
    pub reports: &'a [StoredReport],
    pub now: i64,
}

/// Signature and version of crash `i`, for every `i` of the fill: the sequence a single
/// generator gives (the store's shape does not depend on who fills it).
struct Draws {
    sig: Vec<u32>,
    ver: Vec<u8>,
}

/// A small deterministic generator (xorshift64*): the same store on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Draws {
    /// The signature of crash `i` is `S × u³` for a uniform `u` (a few hot, a long tail);
    /// its version a uniform tenth.
    fn new(crashes: u64, signatures: u64) -> Draws {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let n = usize::try_from(crashes).unwrap_or(0);
        let (mut sig, mut ver) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let k = ((signatures as f64) * rng.unit().powi(3)) as u64;
            sig.push(u32::try_from(k.min(signatures - 1)).unwrap_or(0));
            ver.push((rng.next() % 10) as u8);
        }
        Draws { sig, ver }
    }
}

/// Where the fillers' time went, summed over them.
#[derive(Default)]
struct Phases {
    insert: Duration,
    lease: Duration,
    finish: Duration,
    deadlocks: u64,
}

/// Shared by the fillers: the next crash to insert, the crashes finished, the times.
struct Progress {
    next: AtomicU64,
    done: AtomicU64,
    phases: Mutex<Phases>,
    started: Instant,
    /// Crashes already in the store when this run began.
    before: u64,
}

/// Fills the store up to `plan.crashes` crashes (those already in it count: an
/// interrupted fill goes on from where it stopped), printing at every 100,000 the rate
/// and where the time went.
pub async fn fill(db: &Db, plan: &Plan<'_>) -> anyhow::Result<()> {
    let signatures = plan.signatures.max(1);
    let draws = Draws::new(plan.crashes, signatures);
    let before = resume(db).await?;
    let fillers = match db.backend() {
        Backend::Postgres(_) => plan.fillers.max(1),
        Backend::Sqlite(_) => 1,
    };
    println!(
        "filling from {before} to {} crashes with {fillers} filler(s)",
        plan.crashes
    );
    let progress = Progress {
        next: AtomicU64::new(before),
        done: AtomicU64::new(before),
        phases: Mutex::new(Phases::default()),
        started: Instant::now(),
        before,
    };
    let runs = (0..fillers).map(|_| filler(db, plan, &draws, &progress));
    futures::future::try_join_all(runs).await?;
    // what a filler leased of another's batch leaves as many of its own pending
    drain(db, plan, &draws, &progress).await?;
    report(&progress, plan.crashes, true);
    Ok(())
}

/// Gives back the leases a killed fill held (they would otherwise wait out their lease),
/// and says how many crashes the store holds.
async fn resume(db: &Db) -> anyhow::Result<u64> {
    let sql = "UPDATE crashes SET status = 'pending', attempts = attempts - 1, \
               lease_until = NULL, leased_by = NULL \
               WHERE status = 'processing' AND leased_by = $1";
    let given = worker::on_pool!(db, p => sqlx::query(sql)
        .bind(WORKER)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    if given > 0 {
        println!("gave back {given} leases of an interrupted fill");
    }
    let n: i64 = crashes::count_by_status(db)
        .await?
        .iter()
        .map(|(_, n)| *n)
        .sum();
    Ok(u64::try_from(n).unwrap_or(0))
}

/// One filler: takes the next batch of crash numbers, inserts them, leases as many and
/// finishes them, until the fill's end.
async fn filler(
    db: &Db,
    plan: &Plan<'_>,
    draws: &Draws,
    progress: &Progress,
) -> anyhow::Result<()> {
    loop {
        let first = progress.next.fetch_add(BATCH, Ordering::SeqCst);
        if first >= plan.crashes {
            return Ok(());
        }
        let last = (first + BATCH).min(plan.crashes);
        let t = Instant::now();
        let batch = (first..last)
            .map(|i| new_crash(plan, draws, i))
            .collect::<anyhow::Result<Vec<_>>>()?;
        insert_all(db, &batch).await?;
        let inserted = t.elapsed();
        let n = usize::try_from(last - first).unwrap_or(0);
        lease_and_finish(db, plan, draws, progress, n).await?;
        if let Ok(mut p) = progress.phases.lock() {
            p.insert += inserted;
        }
    }
}

/// Leases and finishes what is left pending, until nothing is.
async fn drain(db: &Db, plan: &Plan<'_>, draws: &Draws, progress: &Progress) -> anyhow::Result<()> {
    while lease_and_finish(db, plan, draws, progress, BATCH as usize).await? > 0 {}
    Ok(())
}

/// Leases up to `n` crashes and finishes each with its signature's report; how many.
async fn lease_and_finish(
    db: &Db,
    plan: &Plan<'_>,
    draws: &Draws,
    progress: &Progress,
    n: usize,
) -> anyhow::Result<u64> {
    let t = Instant::now();
    let leases = crashes::lease_batch(db, WORKER, plan.now, 600_000, 3, n).await?;
    let leased = t.elapsed();
    let t = Instant::now();
    // (`finish_batch` takes a batch's signatures' advisory locks in one order, so that
    // concurrent fillers do not deadlock on the groups' rows, as they did several times a
    // minute with three fillers)
    let by_signature = leases
        .iter()
        .map(|l| {
            let i = crash_number(&l.dump_sha256)?;
            Ok((draws.sig.get(i).copied().unwrap_or(0) as usize, l))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let leases: Vec<&crashes::Lease> = by_signature.iter().map(|(_, l)| *l).collect();
    let outcomes = by_signature
        .iter()
        .map(|(k, _)| {
            let report = plan.reports.get(*k).context("no report for a signature")?;
            Ok(Outcome::Done(report.clone()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let jobs: Vec<Finished> = leases
        .iter()
        .zip(&outcomes)
        .map(|(&lease, outcome)| Finished {
            lease,
            outcome,
            processing_us: Some(4000),
        })
        .collect();
    let mut deadlocks = 0;
    for tried in 1.. {
        match crashes::finish_batch(db, WORKER, plan.now, 3, &jobs).await {
            Ok(_) => break,
            Err(e) if tried < FINISH_TRIES && e.is_deadlock() => deadlocks += 1,
            Err(e) => return Err(e.into()),
        }
    }
    let finished = t.elapsed();
    let count = leases.len() as u64;
    if let Ok(mut p) = progress.phases.lock() {
        p.lease += leased;
        p.finish += finished;
        p.deadlocks += deadlocks;
    }
    let before = progress.done.fetch_add(count, Ordering::SeqCst);
    if (before + count) / 100_000 > before / 100_000 {
        report(progress, before + count, false);
    }
    Ok(count)
}

/// The number of the crash whose dump hash is `sha` (the fill writes `i` there).
fn crash_number(sha: &str) -> anyhow::Result<usize> {
    let i = u64::from_str_radix(sha, 16).with_context(|| format!("not a fill's crash: {sha}"))?;
    usize::try_from(i).context("crash number out of range")
}

/// Crash `i` of the fill: its time, dump hash, product and version.
fn new_crash(plan: &Plan<'_>, draws: &Draws, i: u64) -> anyhow::Result<NewCrash> {
    let span_ms = i64::try_from(plan.days.max(1)).unwrap_or(90) * DAY_MS;
    let step = span_ms / i64::try_from(plan.crashes.max(1)).unwrap_or(1).max(1);
    let at = usize::try_from(i).context("crash number out of range")?;
    let (k, v) = (
        draws.sig.get(at).copied().unwrap_or(0),
        draws.ver.get(at).copied().unwrap_or(0),
    );
    let annotations = serde_json::json!({
        "prod": format!("App{}", k % 3),
        "ver": format!("1.{v}"),
    });
    Ok(NewCrash {
        id: crashes::new_id(),
        received_at: plan.now - span_ms + step * i64::try_from(i).unwrap_or(0),
        dump_sha256: format!("{i:064x}"),
        dump_size: 1 << 20,
        dump_format: "minidump".into(),
        annotations: annotations.to_string(),
        annotations_cut: None,
    })
}

/// Inserts `batch` through [`crashes::insert`], the upload's own statement.
async fn insert_all(db: &Db, batch: &[NewCrash]) -> anyhow::Result<()> {
    use futures::stream::{self, StreamExt, TryStreamExt};
    let in_flight = match db.backend() {
        Backend::Postgres(_) => INSERTS_IN_FLIGHT,
        Backend::Sqlite(_) => 1,
    };
    stream::iter(batch.iter().map(|c| crashes::insert(db, c)))
        .buffer_unordered(in_flight)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Prints the rate since this run began and where the fillers' time went per crash
/// (summed over the fillers: with several, more than the wall time).
fn report(progress: &Progress, done: u64, last: bool) {
    let secs = progress.started.elapsed().as_secs_f64();
    let this_run = done.saturating_sub(progress.before).max(1);
    let Ok(p) = progress.phases.lock() else {
        return;
    };
    let per = |d: Duration| d.as_secs_f64() * 1e3 / this_run as f64;
    println!(
        "{} {done} crashes in {secs:.0} s ({:.0}/s; per crash: insert {:.2} ms, \
         lease {:.2} ms, finish {:.2} ms; deadlocks retried: {})",
        if last { "filled, in all," } else { "filled" },
        this_run as f64 / secs.max(1e-9),
        per(p.insert),
        per(p.lease),
        per(p.finish),
        p.deadlocks
    );
}
