//! The process's health for orchestrators and monitoring: `/healthz` (alive), `/readyz`
//! (the database answers) and `/metrics` (Prometheus text). The first two need no token;
//! `/metrics` names the symbol sources and counts the service's work, so when tokens are
//! configured it takes one with the `admin` scope, as the other reads of the service's
//! state do (a scraper sends it as `Authorization: Bearer TOKEN`).

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use worker::jobs::{JobMetrics, LATENCY_BUCKETS};
use worker::prometheus::{Exposition, Histogram, Kind};

use super::auth::{Admin, ServerWide};
use super::problem::ApiError;
use super::state::{AppState, Metrics};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

async fn readyz(State(s): State<AppState>) -> Result<&'static str, ApiError> {
    s.db.ping().await.map_err(ApiError::Unavailable)?;
    Ok("ready\n")
}

/// The refusals of each project's quota: `throttled` (crashes a minute) and `refused`
/// (bytes a day).
fn quota_lines(out: &mut Exposition, s: &AppState) {
    out.family(
        "postmortem_quota_refusals_total",
        Kind::Counter,
        "Crash uploads a project's quota refused (429), by project and limit: throttled (crashes a minute), refused (bytes a day).",
    );
    for (project, c) in s.quotas.counts() {
        for (kind, n) in [("throttled", c.throttled), ("refused", c.refused)] {
            out.sample(
                "postmortem_quota_refusals_total",
                &[("project", project.as_str()), ("kind", kind)],
                n,
            );
        }
    }
}

/// What each project's scrubbing changed (`api::scrub`).
fn scrub_lines(out: &mut Exposition, s: &AppState) {
    out.family(
        "postmortem_scrubbed_matches_total",
        Kind::Counter,
        "Scrubbing rule matches overwritten in crash uploads, by project and where: dump (memory and strings of the dump), fields (the upload's text fields).",
    );
    let counts = s.scrubbing.counts();
    for (project, c) in &counts {
        for (place, n) in [("dump", c.dump_matches), ("fields", c.field_matches)] {
            out.sample(
                "postmortem_scrubbed_matches_total",
                &[("project", project.as_str()), ("in", place)],
                n,
            );
        }
    }
    out.family(
        "postmortem_scrubbed_heap_segments_total",
        Kind::Counter,
        "Core memory segments dropped as heap (--scrub-core-heap), by project.",
    );
    for (project, c) in &counts {
        out.sample(
            "postmortem_scrubbed_heap_segments_total",
            &[("project", project.as_str())],
            c.heap_segments,
        );
    }
}

/// The crash counts by project (issue 41): crashes stored by this process, and the
/// database's crashes by state (a project with none in a state has no line for it).
async fn project_lines(out: &mut Exposition, s: &AppState) -> Result<(), ApiError> {
    out.family(
        "postmortem_project_crash_uploads_total",
        Kind::Counter,
        "Crash uploads accepted by this process, by project.",
    );
    let by: Vec<(String, u64)> = s
        .metrics
        .crash_uploads_by_project
        .lock()
        .map(|by| by.iter().map(|(p, n)| (p.clone(), *n)).collect())
        .unwrap_or_default();
    for (project, n) in &by {
        out.sample(
            "postmortem_project_crash_uploads_total",
            &[("project", project.as_str())],
            n,
        );
    }
    out.family(
        "postmortem_project_crashes",
        Kind::Gauge,
        "Crashes in the database, by project and state.",
    );
    let counts = worker::store::crashes::count_by_project_and_status(&s.db).await?;
    for (project, state, n) in counts {
        out.sample(
            "postmortem_project_crashes",
            &[("project", project.as_str()), ("state", state.as_str())],
            n,
        );
    }
    Ok(())
}

/// Disk used per project (issue 41): the bytes of the dumps its crashes keep and of the
/// symbol files it holds (a blob two projects name counts in both; shared files under
/// `*`), and its crashes whose dump was removed, by reason.
async fn usage_lines(out: &mut Exposition, s: &AppState) -> Result<(), ApiError> {
    use worker::store::usage;
    out.family(
        "postmortem_project_bytes",
        Kind::Gauge,
        "Bytes of the blobs a project names, by kind (dumps, symbols); a blob two projects name counts in both, shared symbol files count under project \"*\".",
    );
    for b in usage::bytes(&s.db, None).await? {
        for (kind, n) in [("dumps", b.dumps), ("symbols", b.symbols)] {
            out.sample(
                "postmortem_project_bytes",
                &[("project", b.project.as_str()), ("kind", kind)],
                n,
            );
        }
    }
    out.family(
        "postmortem_project_dumps_removed",
        Kind::Gauge,
        "Crashes whose dump was removed while the report stays, by project and reason (sampled, retention).",
    );
    for (project, reason, n) in usage::dumps_gone(&s.db, None).await? {
        out.sample(
            "postmortem_project_dumps_removed",
            &[("project", project.as_str()), ("reason", reason.as_str())],
            n,
        );
    }
    Ok(())
}

/// What the API took and refused.
fn upload_lines(out: &mut Exposition, m: &Metrics) {
    out.family(
        "postmortem_uploads_total",
        Kind::Counter,
        "Uploads accepted, by kind.",
    );
    for (kind, n) in [("crash", &m.crash_uploads), ("binary", &m.binary_uploads)] {
        out.sample(
            "postmortem_uploads_total",
            &[("kind", kind)],
            n.load(Ordering::Relaxed),
        );
    }
    out.family(
        "postmortem_uploads_rejected_total",
        Kind::Counter,
        "Uploads refused (4xx).",
    )
    .sample(
        "postmortem_uploads_rejected_total",
        &[],
        m.rejected_uploads.load(Ordering::Relaxed),
    );
}

/// The queue in the database and what this process's workers finished.
async fn job_lines(out: &mut Exposition, s: &AppState) -> Result<(), ApiError> {
    out.family(
        "postmortem_jobs",
        Kind::Gauge,
        "Crashes in the queue, by state (whole database).",
    );
    let counts = worker::store::crashes::count_by_status(&s.db).await?;
    for state in ["pending", "processing", "done", "failed"] {
        let n = counts
            .iter()
            .find(|(k, _)| k == state)
            .map_or(0, |(_, n)| *n);
        out.sample("postmortem_jobs", &[("state", state)], n);
    }
    let jm = &s.job_metrics;
    out.family(
        "postmortem_jobs_finished_total",
        Kind::Counter,
        "Jobs finished by this process's workers, by outcome.",
    );
    for (outcome, v) in [
        ("done", &jm.processed),
        ("failed", &jm.failed),
        ("retried", &jm.retried),
        ("lease-lost", &jm.lost_leases),
    ] {
        out.sample(
            "postmortem_jobs_finished_total",
            &[("outcome", outcome)],
            v.load(Ordering::Relaxed),
        );
    }
    Ok(())
}

/// What the workers asked of remote symbol sources, and what fetching cost.
fn symbol_source_lines(out: &mut Exposition, jm: &JobMetrics) {
    out.family(
        "postmortem_symbol_lookups_total",
        Kind::Counter,
        "Files this process's workers asked of remote symbol sources, by source and answer (fetched, not-found, error).",
    );
    if let Ok(lookups) = jm.lookups.lock() {
        for ((source, result), n) in lookups.iter() {
            out.sample(
                "postmortem_symbol_lookups_total",
                &[("source", source.as_str()), ("result", result)],
                n,
            );
        }
    }
    out.family(
        "postmortem_symbol_fetched_bytes_total",
        Kind::Counter,
        "Bytes of the files fetched from each remote symbol source.",
    );
    let fetches: Vec<(String, (u64, u64, f64))> = jm
        .fetches
        .lock()
        .map(|f| f.iter().map(|(k, v)| (k.clone(), *v)).collect())
        .unwrap_or_default();
    for (source, (_, bytes, _)) in &fetches {
        out.sample(
            "postmortem_symbol_fetched_bytes_total",
            &[("source", source.as_str())],
            bytes,
        );
    }
    out.family(
        "postmortem_symbol_fetch_seconds",
        Kind::Summary,
        "Time from asking the sources to holding a fetched file, by the source that gave it.",
    );
    for (source, (n, _, secs)) in &fetches {
        out.sample(
            "postmortem_symbol_fetch_seconds_sum",
            &[("source", source.as_str())],
            format_args!("{secs:.6}"),
        );
        out.sample(
            "postmortem_symbol_fetch_seconds_count",
            &[("source", source.as_str())],
            n,
        );
    }
}

/// How long a crash takes, whole and step by step.
fn latency_lines(out: &mut Exposition, jm: &JobMetrics) {
    let counts: Vec<u64> = jm
        .latency_buckets
        .iter()
        .map(|b| b.load(Ordering::Relaxed))
        .collect();
    out.family(
        "postmortem_processing_seconds",
        Kind::Histogram,
        "Time to process one crash.",
    )
    .histogram(
        "postmortem_processing_seconds",
        &[],
        Histogram {
            bounds: LATENCY_BUCKETS,
            counts: counts.get(..LATENCY_BUCKETS.len()).unwrap_or(&[]),
            count: jm.latency_count.load(Ordering::Relaxed),
            sum: jm.latency_sum_ms.load(Ordering::Relaxed) as f64 / 1000.0,
        },
    );
    jm.steps.render(out);
}

/// The in-memory cache of built tables.
async fn cache_lines(out: &mut Exposition, s: &AppState) {
    let c = s.cache.stats();
    for (name, help, n) in [
        (
            "postmortem_tables_cache_hits_total",
            "Table lookups served from memory.",
            &c.hits,
        ),
        (
            "postmortem_tables_cache_misses_total",
            "Table lookups not in memory.",
            &c.misses,
        ),
    ] {
        out.family(name, Kind::Counter, help)
            .sample(name, &[], n.load(Ordering::Relaxed));
    }
    out.family(
        "postmortem_tables_cache_bytes",
        Kind::Gauge,
        "Bytes of tables held in memory.",
    )
    .sample(
        "postmortem_tables_cache_bytes",
        &[],
        s.cache.weighted_bytes().await,
    );
    out.family(
        "postmortem_tables_built_total",
        Kind::Counter,
        "Build-ids whose tables were built from binaries.",
    )
    .sample(
        "postmortem_tables_built_total",
        &[],
        c.built.load(Ordering::Relaxed),
    );
}

async fn metrics(
    State(s): State<AppState>,
    _caller: ServerWide<Admin>,
) -> Result<impl IntoResponse, ApiError> {
    let mut out = Exposition::new();
    upload_lines(&mut out, &s.metrics);
    quota_lines(&mut out, &s);
    scrub_lines(&mut out, &s);
    job_lines(&mut out, &s).await?;
    project_lines(&mut out, &s).await?;
    usage_lines(&mut out, &s).await?;
    symbol_source_lines(&mut out, &s.job_metrics);
    latency_lines(&mut out, &s.job_metrics);
    cache_lines(&mut out, &s).await;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        out.finish(),
    ))
}
