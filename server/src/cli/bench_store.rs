//! `postmortem bench store`: a store filled with many crashes through its own insert path,
//! and the time of every query a dashboard page or a reprocess selection runs on it.
//!
//! The fill ([`super::bench_fill`]) inserts `--crashes` pending crashes spread evenly over
//! the last `--days` days, in `--signatures` signatures (a few hot, a long tail), three
//! products and ten versions in their annotations, then leases and finishes them in
//! batches with [`crashes::finish_batch`] — the worker's own statements, search index and
//! group counts included — then analyzes (the service's own `PRAGMA optimize` on SQLite,
//! `VACUUM ANALYZE` on PostgreSQL: [`worker::store::statistics`]). Each signature's report
//! is the `--report` document (a real processed crash) with that signature and a crashing
//! function of its own (`crash_site_K`), so that the function filter selects one
//! signature's crashes.
//!
//! The timing runs each query `--runs` times and prints the median and the slowest, and
//! the database's bytes per crash. `--fill-only` and `--time-only` split the two (a fill of
//! a million crashes takes an hour; timing it again takes seconds).

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use worker::store::crashes::DEFAULT_PROJECT;
use worker::store::crashes::{self, ListQuery, StoredReport};
use worker::store::dashboard::{self, GroupQuery, GroupSort};
use worker::store::{Backend, Db};

/// What `bench store` fills and times.
#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    /// The database: `sqlite://PATH?mode=rwc` or `postgres://…/DB`.
    #[arg(long)]
    pub db: String,
    /// A processed report (`postmortem walk DUMP --format json`): every stored report is
    /// this one with its own signature and crashing function.
    #[arg(long)]
    pub report: Option<std::path::PathBuf>,
    /// Crashes to insert.
    #[arg(long, default_value_t = 1_000_000)]
    pub crashes: u64,
    /// Distinct signatures.
    #[arg(long, default_value_t = 5_000)]
    pub signatures: u64,
    /// The crashes' `received_at` spread evenly over this many days before now.
    #[arg(long, default_value_t = 90)]
    pub days: u64,
    /// Repetitions of each timed query (the median and the slowest are printed).
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// Batches filled at once on PostgreSQL, as several workers finish theirs (each
    /// inserts its uploads, leases as many crashes and finishes them); SQLite has one
    /// writer and is filled by one.
    #[arg(long, default_value_t = 1)]
    pub fillers: usize,
    /// Fill, do not time.
    #[arg(long)]
    pub fill_only: bool,
    /// Time the store as it is, do not fill.
    #[arg(long)]
    pub time_only: bool,
}

const DAY_MS: i64 = 86_400_000;

/// Runs `bench store`; its lines are printed as they come (a fill is long).
pub async fn run(args: StoreArgs) -> anyhow::Result<()> {
    let db = Db::connect(&args.db)
        .await
        .with_context(|| format!("opening {}", args.db))?;
    db.migrate().await?;
    let now = worker::store::now_ms();
    if !args.time_only {
        let Some(report) = &args.report else {
            bail!("--report FILE is needed to fill the store");
        };
        let template: serde_json::Value = serde_json::from_slice(
            &std::fs::read(report).with_context(|| format!("reading {}", report.display()))?,
        )
        .context("--report is not JSON")?;
        let reports = (0..args.signatures.max(1))
            .map(|k| report_for(&template, k))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let plan = super::bench_fill::Plan {
            crashes: args.crashes,
            signatures: args.signatures,
            days: args.days,
            fillers: args.fillers,
            reports: &reports,
            now,
        };
        super::bench_fill::fill(&db, &plan).await?;
        // what the service's own refresh (SQLite) or autovacuum (PostgreSQL) would do a
        // little later, now: the store is timed at once
        let t = Instant::now();
        worker::store::statistics::analyze_now(&db).await?;
        println!("analyzed in {:.1} s", t.elapsed().as_secs_f64());
    }
    if !args.fill_only {
        time_queries(&db, &args, now).await?;
        println!("bytes per crash: {}", bytes_per_crash(&db, &args).await?);
    }
    Ok(())
}

/// The signature of crash `k` of `signatures`.
fn signature(k: u64) -> String {
    format!("crash_site_{k} | caller_{} | main", k % 97)
}

/// The stored report of signature `k`: the template with that signature and crashing
/// function.
fn report_for(template: &serde_json::Value, k: u64) -> anyhow::Result<StoredReport> {
    let mut r = template.clone();
    r["signature"] = serde_json::json!({ "text": signature(k) });
    if let Some(threads) = r["threads"].as_array_mut() {
        let crashed = threads.iter_mut().find(|t| t["crashed"] == true);
        if let Some(frame) = crashed.and_then(|t| t["frames"].get_mut(0)) {
            frame["function"] = serde_json::json!(format!("crash_site_{k}"));
        }
    }
    Ok(StoredReport::from_json(
        serde_json::to_string(&r)?,
        Some(signature(k)),
    ))
}

/// Times `query` `runs` times: (median, slowest).
async fn timed<F, Fut, T>(runs: usize, mut query: F) -> anyhow::Result<(Duration, Duration)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, worker::store::StoreError>>,
{
    let mut times = Vec::with_capacity(runs.max(1));
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        query().await?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok((times[times.len() / 2], times[times.len() - 1]))
}

/// A row of the timing table: the query's name, its median and slowest time.
type Timed = (&'static str, (Duration, Duration));

/// The queries of the dashboard's pages and of a reprocess selection, timed.
async fn time_queries(db: &Db, args: &StoreArgs, now: i64) -> anyhow::Result<()> {
    let hot = signature(0);
    let tail = signature(args.signatures.saturating_sub(1) / 2);
    let r = args.runs;
    let mut rows: Vec<Timed> = Vec::new();
    for (name, q) in group_queries(now) {
        rows.push((name, timed(r, || dashboard::groups(db, &q)).await?));
    }
    for (name, q) in list_queries(now, &hot, &tail) {
        rows.push((name, timed(r, || crashes::list(db, &q)).await?));
    }
    rows.push((
        "group chart, hot signature, 90 days",
        timed(r, || {
            dashboard::group_days(db, DEFAULT_PROJECT, &hot, now - 90 * DAY_MS, now)
        })
        .await?,
    ));
    let newest = crashes::list(db, &list_query(|_| {})).await?;
    if let Some(c) = newest.first() {
        rows.push(("crash page", timed(r, || crashes::get(db, &c.id)).await?));
    }
    for (name, filter) in reprocess_filters(&hot, now) {
        rows.push((
            name,
            timed(r, || {
                worker::store::reprocess::count_remaining(db, "bench-selection", &filter)
            })
            .await?,
        ));
    }
    rows.extend(time_counts(db, r).await?);
    println!("{:<44} {:>10} {:>10}", "query", "median", "slowest");
    for (name, (median, slowest)) in rows {
        println!(
            "{name:<44} {:>8.1}ms {:>8.1}ms",
            median.as_secs_f64() * 1e3,
            slowest.as_secs_f64() * 1e3
        );
    }
    Ok(())
}

/// The counts the jobs page, `/metrics` and a project's crash list read.
async fn time_counts(db: &Db, r: usize) -> anyhow::Result<Vec<Timed>> {
    use worker::store::usage;
    Ok(vec![
        (
            "counts by status (jobs page)",
            timed(r, || crashes::count_by_status(db)).await?,
        ),
        (
            "counts by project and status (/metrics)",
            timed(r, || crashes::count_by_project_and_status(db)).await?,
        ),
        (
            "dump bytes per project (/metrics)",
            timed(r, || usage::bytes(db, None)).await?,
        ),
        (
            "dumps removed per project (/metrics)",
            timed(r, || usage::dumps_gone(db, None)).await?,
        ),
    ])
}

/// The groups queries timed: the page's windows, filters and orders.
fn group_queries(now: i64) -> Vec<(&'static str, GroupQuery)> {
    let groups = |days: Option<i64>, f: &dyn Fn(&mut GroupQuery)| {
        let mut q = GroupQuery {
            project: None,
            after_project: None,
            since: days.map(|d| now - d * DAY_MS),
            until: None,
            product: None,
            version: None,
            kind: None,
            sort: GroupSort::Count,
            descending: true,
            after: None,
            limit: 50,
        };
        f(&mut q);
        q
    };
    vec![
        ("groups, all time", groups(None, &|_| {})),
        ("groups, 30 days", groups(Some(30), &|_| {})),
        ("groups, 90 days", groups(Some(90), &|_| {})),
        (
            "groups, 90 days, one product",
            groups(Some(90), &|q| q.product = Some("App1".into())),
        ),
        (
            "groups, 90 days, one version",
            groups(Some(90), &|q| q.version = Some("1.3".into())),
        ),
        (
            "groups, 30 days, one kind",
            groups(Some(30), &|q| q.kind = Some("null-pointer".into())),
        ),
        (
            "groups, 30 days, one project",
            groups(Some(30), &|q| q.project = Some(DEFAULT_PROJECT.into())),
        ),
        (
            "groups, 30 days, last seen first",
            groups(Some(30), &|q| q.sort = GroupSort::LastSeen),
        ),
        (
            "groups, 90 days, by signature",
            groups(Some(90), &|q| {
                q.sort = GroupSort::Signature;
                q.descending = false;
            }),
        ),
    ]
}

/// A crash list of 50, with `f`'s filters.
fn list_query(f: impl Fn(&mut ListQuery)) -> ListQuery {
    let mut q = ListQuery {
        limit: 50,
        ..ListQuery::default()
    };
    f(&mut q);
    q
}

/// The crash lists timed: each filter of the page.
fn list_queries(now: i64, hot: &str, tail: &str) -> Vec<(&'static str, ListQuery)> {
    vec![
        ("crash list, newest", list_query(|_| {})),
        (
            "crash list, hot signature",
            list_query(|q| q.signature = Some(hot.to_string())),
        ),
        (
            "crash list, tail signature",
            list_query(|q| q.signature = Some(tail.to_string())),
        ),
        (
            "crash list, function filter",
            list_query(|q| q.function = Some("crash_site_17".into())),
        ),
        (
            "crash list, module filter",
            list_query(|q| q.module = Some("libc.so.6".into())),
        ),
        (
            "crash list, one product, 7 days",
            list_query(|q| {
                q.product = Some("App2".into());
                q.since = Some(now - 7 * DAY_MS);
            }),
        ),
        (
            "crash list, one version",
            list_query(|q| q.version = Some("1.3".into())),
        ),
        (
            "crash list, status done",
            list_query(|q| q.status = Some("done".into())),
        ),
        (
            "crash list, one kind",
            list_query(|q| q.kind = Some("null-pointer".into())),
        ),
        (
            "crash list, one project",
            list_query(|q| q.project = Some(DEFAULT_PROJECT.into())),
        ),
    ]
}

/// The reprocess selections timed: by signature, by the last day, by build-id.
fn reprocess_filters(hot: &str, now: i64) -> Vec<(&'static str, worker::store::reprocess::Filter)> {
    use worker::store::reprocess::Filter;
    vec![
        (
            "reprocess selection, hot signature",
            Filter {
                signature: Some(hot.to_string()),
                ..Filter::default()
            },
        ),
        (
            "reprocess selection, last day",
            Filter {
                since: Some(now - DAY_MS),
                ..Filter::default()
            },
        ),
        (
            "reprocess selection, one build-id",
            Filter {
                build_id: Some("00112233445566778899aabbccddeeff00112233".into()),
                ..Filter::default()
            },
        ),
    ]
}

/// The database's size divided by its crashes.
async fn bytes_per_crash(db: &Db, args: &StoreArgs) -> anyhow::Result<u64> {
    let n = crashes::count_by_status(db)
        .await?
        .iter()
        .map(|(_, n)| *n)
        .sum::<i64>()
        .max(1);
    let bytes: i64 = match db.backend() {
        Backend::Sqlite(p) => {
            sqlx::query_scalar(
                "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
            )
            .fetch_one(p)
            .await?
        }
        Backend::Postgres(p) => {
            sqlx::query_scalar("SELECT pg_database_size(current_database())")
                .fetch_one(p)
                .await?
        }
    };
    let _ = args;
    Ok(u64::try_from(bytes / n).unwrap_or(0))
}
