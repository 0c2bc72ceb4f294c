//! `POST /api/v1/reprocess` (admin): queues the finished crashes matching a filter again
//! (of the caller's project only, when it has one),
//! the same filter as `postmortem reprocess`, and returns how many were queued.
//!
//! The crashes are queued in batches of [`BATCH`] under one run id (see
//! `worker::store::reprocess`); the workers of every process sharing the queue take them
//! after every new crash (reprocessing has the lower queue priority), and a crash already
//! queued is not queued again. Runs are rate-limited per token (`api::rate`), and one
//! request queues at most `--reprocess-max-crashes`: past it the answer says `more`, the
//! run stays open, and the same filter posted again resumes it with the next crashes.
//!
//! `POST /api/v1/crashes/{id}/reprocess` (admin) queues one finished crash of the
//! caller's project again. A crash whose dump was removed (retention, sampling; issue 41)
//! cannot be: it is answered 410 `dump-gone` with the reason, and a filter's run skips
//! such crashes.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use bytes::Bytes;
use serde_json::{json, Value};
use worker::store::reprocess::{self, Filter};

use super::auth::{Admin, Caller};
use super::origin::require_json;
use super::problem::ApiError;
use super::state::AppState;

/// Crashes queued per statement.
const BATCH: i64 = 1000;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/reprocess", post(start))
        .route("/api/v1/crashes/{id}/reprocess", post(one))
}

/// Queues crash `id` again: `{"id", "queued"}` (false: it is pending or being processed
/// already), 404 for none of the caller's, 410 `dump-gone` when its dump was removed.
async fn one(
    State(s): State<AppState>,
    Caller { who, .. }: Caller<Admin>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let row = worker::store::crashes::summary_in(&s.db, &id, who.filter())
        .await?
        .ok_or_else(|| super::crashes::not_found(&id))?;
    if let Some(reason) = &row.dump_gone {
        return Err(super::crashes::dump_gone(&id, reason));
    }
    let queued = worker::store::dashboard::requeue(&s.db, &id).await?;
    if queued {
        s.wake.notify_one();
    }
    Ok(Json(json!({ "id": row.id, "queued": queued })))
}

async fn start(
    State(s): State<AppState>,
    Caller { who, .. }: Caller<Admin>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    require_json(&s, &headers)?;
    s.reprocess_rate
        .check(&headers)
        .map_err(|secs| ApiError::TooManyRequests {
            detail: format!("this token queued a reprocess run too recently; retry in {secs} s"),
            retry_after_secs: secs,
        })?;
    let bad = |detail: String| ApiError::BadRequest {
        code: "bad-request",
        detail,
    };
    let mut filter: Filter = serde_json::from_slice(&body)
        .map_err(|e| bad(format!("the body is not a reprocess filter: {e}")))?;
    // A project's caller reprocesses its own crashes only.
    filter.project = who.project;
    filter.check().map_err(bad)?;
    let run = reprocess::start_run(&s.db, &filter).await?;
    let bound = match s.reprocess_max_crashes {
        0 => u64::MAX,
        n => n,
    };
    let mut queued: u64 = 0;
    let mut cursor: Option<String> = None;
    while queued < bound {
        let room = i64::try_from(bound - queued).unwrap_or(BATCH).min(BATCH);
        let (n, last) =
            reprocess::enqueue_batch(&s.db, &run.id, &filter, cursor.as_deref(), room).await?;
        if n == 0 {
            break;
        }
        queued = queued.saturating_add(n);
        cursor = last;
        s.wake.notify_waiters();
    }
    let more = queued >= bound && reprocess::count_remaining(&s.db, &run.id, &filter).await? > 0;
    if !more {
        // Everything is queued: the run is complete as far as queuing goes.
        reprocess::finish_run(&s.db, &run.id).await?;
    }
    Ok(Json(
        json!({ "run_id": run.id, "queued": queued, "more": more }),
    ))
}
