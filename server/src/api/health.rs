//! `/healthz`, `/readyz`, `/metrics` (Prometheus text), `/api/v1/openapi.yaml` and the
//! missing-modules index.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use worker::jobs::LATENCY_BUCKETS;
use worker::store::missing;

use super::extract::authorize;
use super::problem::ApiError;
use super::state::{AppState, Scope};

const OPENAPI: &str = include_str!("../../../openapi.yaml");

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/api/v1/openapi.yaml", get(openapi))
        .route("/api/v1/modules/missing", get(missing_modules))
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI)
}

async fn readyz(State(s): State<AppState>) -> Result<&'static str, ApiError> {
    s.db.ping().await.map_err(ApiError::Unavailable)?;
    Ok("ready\n")
}

pub(crate) fn parse_limit(q: &HashMap<String, String>, default: i64) -> Result<i64, ApiError> {
    match q.get("limit") {
        None => Ok(default),
        Some(v) => v
            .parse::<i64>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| ApiError::BadRequest {
                code: "bad-request",
                detail: format!("limit must be an integer from 1 to 1000, not {v:?}"),
            }),
    }
}

async fn missing_modules(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    authorize(&s, &headers, Scope::Admin)?;
    let limit = parse_limit(&q, 100)?;
    let rows = missing::list(&s.db, limit).await?;
    let modules: Vec<_> = rows
        .into_iter()
        .map(|m| json!({"build_id": m.build_id, "name": m.module_name, "crash_count": m.crash_count, "last_seen": m.last_seen}))
        .collect();
    Ok(Json(json!({ "modules": modules })))
}

async fn metrics(State(s): State<AppState>) -> Result<impl IntoResponse, ApiError> {
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
