//! `postmortem reprocess`: queues the finished crashes matching a filter again, in
//! batches, and follows the run with a progress bar until every one is processed (by the
//! workers of `serve`/`worker`, or with `--process` by workers in this process).
//!
//! The run is recorded in the database: interrupted (Ctrl-C, SIGKILL) and started again
//! with the same filter, it resumes and skips the crashes it already queued.

use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::watch;
use worker::store::{now_ms, reprocess, Db};

use super::{JobArgs, StorageArgs};

/// Arguments of `postmortem reprocess`.
#[derive(Debug, clap::Args)]
pub struct ReprocessArgs {
    #[command(flatten)]
    pub storage: StorageArgs,
    #[command(flatten)]
    pub jobs: JobArgs,
    /// Only crashes with this signature.
    #[arg(long)]
    pub signature: Option<String>,
    /// Only crashes received at or after T (Unix ms, or `7d`, `12h`, `30m` ago).
    #[arg(long, value_parser = parse_time)]
    pub since: Option<i64>,
    /// Only crashes received before T (Unix ms, or `7d`, `12h`, `30m` ago).
    #[arg(long, value_parser = parse_time)]
    pub until: Option<i64>,
    /// Only crashes that used or missed this build-id (hex).
    #[arg(long)]
    pub build_id: Option<String>,
    /// Only crashes that still miss a module.
    #[arg(long)]
    pub missing_only: bool,
    /// Only crashes with this status (`done` or `failed`).
    #[arg(long)]
    pub status: Option<String>,
    /// Every finished crash (required when no other filter is given).
    #[arg(long)]
    pub all: bool,
    /// Only this project's crashes.
    #[arg(long)]
    pub project: Option<String>,
    /// Count the matching crashes and exit without queuing them.
    #[arg(long)]
    pub dry_run: bool,
    /// Crashes queued per batch; the next batch is queued when fewer remain queued.
    #[arg(long, default_value_t = 500)]
    pub batch: i64,
    /// Process the crashes in this process (`--workers` tasks) instead of waiting for the
    /// workers of `serve`/`worker`.
    #[arg(long)]
    pub process: bool,
}

/// `N` (Unix ms) or `N[dhm]` (that long ago).
fn parse_time(s: &str) -> Result<i64, String> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    let unit = match s.chars().last() {
        Some('d') => 86_400_000,
        Some('h') => 3_600_000,
        Some('m') => 60_000,
        _ => {
            return Err(format!(
                "{s:?}: expected Unix ms or a duration like 7d, 12h, 30m"
            ))
        }
    };
    let n: i64 = s[..s.len() - 1]
        .parse()
        .map_err(|_| format!("{s:?}: expected Unix ms or a duration like 7d, 12h, 30m"))?;
    Ok(now_ms().saturating_sub(n.saturating_mul(unit)))
}

impl ReprocessArgs {
    fn filter(&self) -> reprocess::Filter {
        reprocess::Filter {
            signature: self.signature.clone(),
            since: self.since,
            until: self.until,
            build_id: self.build_id.clone(),
            missing_only: self.missing_only,
            status: self.status.clone(),
            annotations: std::collections::BTreeMap::new(),
            all: self.all,
            project: self.project.clone(),
        }
    }
}

/// Runs (or resumes) a reprocess run to its end, then prints its summary.
pub async fn run(args: ReprocessArgs) -> anyhow::Result<()> {
    let filter = args.filter();
    filter.check().map_err(anyhow::Error::msg)?;
    let db = args.storage.db().await?;
    db.migrate().await.context("migrating the database")?;
    if args.dry_run {
        let n = reprocess::count_remaining(&db, "", &filter).await?;
        println!("{n} crashes match; nothing queued (--dry-run)");
        return Ok(());
    }
    let run = reprocess::start_run(&db, &filter).await?;
    println!(
        "reprocess run {} ({})",
        run.id,
        if run.resumed { "resumed" } else { "new" }
    );

    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    if args.process {
        let runner = super::runner(&db, &args.storage, &args.jobs)?;
        tasks = super::spawn_workers(&runner, args.jobs.workers.max(1), &stopped);
    }

    let outcome = tokio::select! {
        r = follow(&db, &run.id, &filter, args.batch.max(1)) => r.map(Some),
        _ = super::shutdown_signal() => Ok(None),
    };
    let _ = stop.send(true);
    for t in tasks {
        let _ = t.await;
    }
    let Some((processed, elapsed)) = outcome? else {
        eprintln!(
            "interrupted: run the same command again to resume run {}",
            run.id
        );
        db.close().await;
        return Ok(());
    };
    reprocess::finish_run(&db, &run.id).await?;
    let s = reprocess::summary(&db, &run.id).await?;
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        processed as f64 / secs
    } else {
        0.0
    };
    println!(
        "run {}: {} crashes reprocessed ({} failed)",
        run.id, s.finished, s.failed
    );
    println!("this process followed {processed} crashes in {secs:.1} s: {rate:.1} crashes/s");
    println!("signature changed: {}", s.signature_changed);
    println!("gained symbolized frames: {}", s.gained_frames);
    if s.still_missing.is_empty() {
        println!("still missing: none");
    } else {
        println!("still missing:");
        for (build_id, name, n) in &s.still_missing {
            println!("  {build_id} {name} ({n} crashes)");
        }
    }
    db.close().await;
    Ok(())
}

/// Queues batches while fewer than `batch` crashes of the run wait, until none match and
/// none wait. Returns how many finished while following, and how long it took.
async fn follow(
    db: &Db,
    run: &str,
    filter: &reprocess::Filter,
    batch: i64,
) -> anyhow::Result<(u64, Duration)> {
    let remaining = reprocess::count_remaining(db, run, filter).await?;
    let (queued, finished0) = reprocess::progress(db, run).await?;
    let total =
        u64::try_from(remaining.saturating_add(queued).saturating_add(finished0)).unwrap_or(0);
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} crashes  {rate}  ETA {eta}  {msg}")
            .context("progress bar template")?
            .with_key(
                "rate",
                |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.1} crashes/s", state.per_sec());
                },
            ),
    );
    bar.set_position(u64::try_from(finished0).unwrap_or(0));
    bar.reset_eta();
    let started = Instant::now();
    let mut cursor: Option<String> = None;
    let mut exhausted = false;
    loop {
        let (queued, finished) = reprocess::progress(db, run).await?;
        bar.set_position(u64::try_from(finished).unwrap_or(0));
        if !exhausted && queued < batch {
            let (n, last) =
                reprocess::enqueue_batch(db, run, filter, cursor.as_deref(), batch).await?;
            if n == 0 {
                exhausted = true;
            } else {
                cursor = last;
                continue;
            }
        }
        if exhausted && queued == 0 {
            bar.finish_with_message("done");
            let done = u64::try_from(finished.saturating_sub(finished0)).unwrap_or(0);
            return Ok((done, started.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
