//! The process's health for orchestrators and monitoring: `/healthz` (alive), `/readyz`
//! (the database answers) and `/metrics` (Prometheus text). The first two need no token;
//! `/metrics` names the symbol sources and counts the service's work, so when tokens are
//! configured it takes one with the `admin` scope, as the other reads of the service's
//! state do (a scraper sends it as `Authorization: Bearer TOKEN`).

use std::fmt::Write;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use worker::jobs::LATENCY_BUCKETS;

use super::auth::{Admin, ServerWide};
use super::problem::ApiError;
use super::state::AppState;

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
fn quota_lines(out: &mut String, s: &AppState) {
    let _ = writeln!(
        out,
        "# HELP postmortem_quota_refusals_total Crash uploads a project's quota refused (429), by project and limit: throttled (crashes a minute), refused (bytes a day)."
    );
    let _ = writeln!(out, "# TYPE postmortem_quota_refusals_total counter");
    for (project, c) in s.quotas.counts() {
        for (kind, n) in [("throttled", c.throttled), ("refused", c.refused)] {
            let _ = writeln!(
                out,
                "postmortem_quota_refusals_total{{project=\"{project}\",kind=\"{kind}\"}} {n}"
            );
        }
    }
}

/// The crash counts by project (issue 41): crashes stored by this process, and the
/// database's crashes by state (a project with none in a state has no line for it).
async fn project_lines(out: &mut String, s: &AppState) -> Result<(), ApiError> {
    let _ = writeln!(
        out,
        "# HELP postmortem_project_crash_uploads_total Crash uploads accepted by this process, by project."
    );
    let _ = writeln!(out, "# TYPE postmortem_project_crash_uploads_total counter");
    if let Ok(by) = s.metrics.crash_uploads_by_project.lock() {
        for (project, n) in by.iter() {
            let _ = writeln!(
                out,
                "postmortem_project_crash_uploads_total{{project=\"{project}\"}} {n}"
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP postmortem_project_crashes Crashes in the database, by project and state."
    );
    let _ = writeln!(out, "# TYPE postmortem_project_crashes gauge");
    let counts = worker::store::crashes::count_by_project_and_status(&s.db).await?;
    for (project, state, n) in counts {
        // project names are plain (`projects::valid_name`), states are the queue's
        let _ = writeln!(
            out,
            "postmortem_project_crashes{{project=\"{project}\",state=\"{state}\"}} {n}"
        );
    }
    Ok(())
}

async fn metrics(
    State(s): State<AppState>,
    _caller: ServerWide<Admin>,
) -> Result<impl IntoResponse, ApiError> {
    let mut out = String::new();
    let m = &s.metrics;
    let jm = &s.job_metrics;
    let c = s.cache.stats();
    let _ = writeln!(
        out,
        "# HELP postmortem_uploads_total Uploads accepted, by kind."
    );
    let _ = writeln!(out, "# TYPE postmortem_uploads_total counter");
    let _ = writeln!(
        out,
        "postmortem_uploads_total{{kind=\"crash\"}} {}",
        m.crash_uploads.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "postmortem_uploads_total{{kind=\"binary\"}} {}",
        m.binary_uploads.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "# HELP postmortem_uploads_rejected_total Uploads refused (4xx)."
    );
    let _ = writeln!(out, "# TYPE postmortem_uploads_rejected_total counter");
    let _ = writeln!(
        out,
        "postmortem_uploads_rejected_total {}",
        m.rejected_uploads.load(Ordering::Relaxed)
    );
    quota_lines(&mut out, &s);
    let _ = writeln!(
        out,
        "# HELP postmortem_jobs Crashes in the queue, by state (whole database)."
    );
    let _ = writeln!(out, "# TYPE postmortem_jobs gauge");
    let counts = worker::store::crashes::count_by_status(&s.db).await?;
    for state in ["pending", "processing", "done", "failed"] {
        let n = counts
            .iter()
            .find(|(k, _)| k == state)
            .map_or(0, |(_, n)| *n);
        let _ = writeln!(out, "postmortem_jobs{{state=\"{state}\"}} {n}");
    }
    project_lines(&mut out, &s).await?;
    let _ = writeln!(out, "# HELP postmortem_jobs_finished_total Jobs finished by this process's workers, by outcome.");
    let _ = writeln!(out, "# TYPE postmortem_jobs_finished_total counter");
    for (outcome, v) in [
        ("done", &jm.processed),
        ("failed", &jm.failed),
        ("retried", &jm.retried),
        ("lease-lost", &jm.lost_leases),
    ] {
        let _ = writeln!(
            out,
            "postmortem_jobs_finished_total{{outcome=\"{outcome}\"}} {}",
            v.load(Ordering::Relaxed)
        );
    }
    let _ = writeln!(out, "# HELP postmortem_symbol_lookups_total Files this process's workers asked of remote symbol sources, by source and answer (fetched, not-found, error).");
    let _ = writeln!(out, "# TYPE postmortem_symbol_lookups_total counter");
    let label = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    if let Ok(lookups) = jm.lookups.lock() {
        for ((source, result), n) in lookups.iter() {
            let _ = writeln!(
                out,
                "postmortem_symbol_lookups_total{{source=\"{}\",result=\"{result}\"}} {n}",
                label(source)
            );
        }
    }
    let _ = writeln!(out, "# HELP postmortem_symbol_fetched_bytes_total Bytes of the files fetched from each remote symbol source.");
    let _ = writeln!(out, "# TYPE postmortem_symbol_fetched_bytes_total counter");
    let _ = writeln!(out, "# HELP postmortem_symbol_fetch_seconds Time from asking the sources to holding a fetched file, by the source that gave it.");
    let _ = writeln!(out, "# TYPE postmortem_symbol_fetch_seconds summary");
    if let Ok(fetches) = jm.fetches.lock() {
        for (source, (n, bytes, secs)) in fetches.iter() {
            let source = label(source);
            let _ = writeln!(
                out,
                "postmortem_symbol_fetched_bytes_total{{source=\"{source}\"}} {bytes}"
            );
            let _ = writeln!(
                out,
                "postmortem_symbol_fetch_seconds_sum{{source=\"{source}\"}} {secs:.6}"
            );
            let _ = writeln!(
                out,
                "postmortem_symbol_fetch_seconds_count{{source=\"{source}\"}} {n}"
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP postmortem_processing_seconds Time to process one crash."
    );
    let _ = writeln!(out, "# TYPE postmortem_processing_seconds histogram");
    for (i, le) in LATENCY_BUCKETS.iter().enumerate() {
        let _ = writeln!(
            out,
            "postmortem_processing_seconds_bucket{{le=\"{le}\"}} {}",
            jm.latency_buckets[i].load(Ordering::Relaxed)
        );
    }
    let count = jm.latency_count.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "postmortem_processing_seconds_bucket{{le=\"+Inf\"}} {count}"
    );
    let sum = jm.latency_sum_ms.load(Ordering::Relaxed) as f64 / 1000.0;
    let _ = writeln!(out, "postmortem_processing_seconds_sum {sum}");
    let _ = writeln!(out, "postmortem_processing_seconds_count {count}");
    jm.steps.render(&mut out);
    let _ = writeln!(
        out,
        "# HELP postmortem_tables_cache_hits_total Table lookups served from memory."
    );
    let _ = writeln!(out, "# TYPE postmortem_tables_cache_hits_total counter");
    let _ = writeln!(
        out,
        "postmortem_tables_cache_hits_total {}",
        c.hits.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "# HELP postmortem_tables_cache_misses_total Table lookups not in memory."
    );
    let _ = writeln!(out, "# TYPE postmortem_tables_cache_misses_total counter");
    let _ = writeln!(
        out,
        "postmortem_tables_cache_misses_total {}",
        c.misses.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "# HELP postmortem_tables_cache_bytes Bytes of tables held in memory."
    );
    let _ = writeln!(out, "# TYPE postmortem_tables_cache_bytes gauge");
    let _ = writeln!(
        out,
        "postmortem_tables_cache_bytes {}",
        s.cache.weighted_bytes().await
    );
    let _ = writeln!(
        out,
        "# HELP postmortem_tables_built_total Build-ids whose tables were built from binaries."
    );
    let _ = writeln!(out, "# TYPE postmortem_tables_built_total counter");
    let _ = writeln!(
        out,
        "postmortem_tables_built_total {}",
        c.built.load(Ordering::Relaxed)
    );
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out))
}
