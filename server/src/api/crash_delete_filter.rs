//! `POST /api/v1/crashes/delete` (issue 41): deletes every crash of one project that a
//! filter matches — a privacy request ("every crash whose annotation `user_id` is X") —
//! or, with `dry_run`, only says how many and which.
//!
//! The filter is the reprocess route's (`worker::store::reprocess::Filter`: signature,
//! time, build-id, status, missing modules, annotations), and as there an empty filter is
//! refused unless it says `"all": true`. It takes the `admin` scope and acts in exactly
//! one project: a project token's own, or the one a server-wide token names
//! (`?project=` or the header; naming none is refused: a deletion never spans projects).
//! The crashes are found a batch at a time in id order and each is deleted as
//! `DELETE /api/v1/crashes/{id}` deletes it (`api::crash_delete`): its rows, its blob when
//! nothing else names the bytes, and an audit entry that carries the filter. One request
//! deletes at most [`MAX_PER_REQUEST`] crashes: past it the answer says `more`, and the
//! same request again goes on.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};
use worker::store::audit;
use worker::store::delete_filter;
use worker::store::reprocess::Filter;

use super::auth::{Admin, Caller};
use super::origin::require_json;
use super::problem::ApiError;
use super::state::AppState;

/// The route as the audit log names it.
const ROUTE: &str = "POST /api/v1/crashes/delete";

/// Crashes looked up per statement.
const BATCH: i64 = 200;

/// Most crashes one request deletes.
pub const MAX_PER_REQUEST: u64 = 10_000;

/// Most ids an answer lists.
const IDS_SHOWN: i64 = 100;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route("/api/v1/crashes/delete", post(start))
}

/// The request's body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteRequest {
    filter: Filter,
    /// Count and list the matching crashes, delete nothing.
    #[serde(default)]
    dry_run: bool,
}

async fn start(
    State(s): State<AppState>,
    Caller { who, .. }: Caller<Admin>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    require_json(&s, &headers)?;
    let bad = |code: &'static str, detail: String| ApiError::BadRequest { code, detail };
    let req: DeleteRequest = serde_json::from_slice(&body).map_err(|e| {
        bad(
            "bad-request",
            format!("the body is not a deletion request: {e}"),
        )
    })?;
    let Some(project) = who.project.clone() else {
        return Err(bad(
            "project-required",
            "a server-wide token deletes in one project at a time: name it with \
             ?project= or the X-Postmortem-Project header"
                .into(),
        ));
    };
    let mut filter = req.filter;
    // the caller's project, never one the body names (an unknown field there)
    filter.project = Some(project.clone());
    filter.check().map_err(|d| bad("bad-request", d))?;
    if req.dry_run {
        let matched = delete_filter::count(&s.db, &filter).await?;
        let ids = delete_filter::ids_after(&s.db, &filter, None, IDS_SHOWN).await?;
        return Ok(Json(json!({
            "dry_run": true, "project": project, "matched": matched, "ids": ids,
        })));
    }
    let entry = audit::entry(&who.token, Some(&project), "delete-crash", ROUTE, None)
        .with_detail(&filter.key());
    let mut deleted: u64 = 0;
    let mut shown = Vec::new();
    let mut cursor: Option<String> = None;
    while deleted < MAX_PER_REQUEST {
        let room = i64::try_from(MAX_PER_REQUEST - deleted)
            .unwrap_or(BATCH)
            .min(BATCH);
        let ids = delete_filter::ids_after(&s.db, &filter, cursor.as_deref(), room).await?;
        let Some(last) = ids.last().cloned() else {
            break;
        };
        for id in &ids {
            if super::crash_delete::delete_one(&s, id, Some(&project), &entry.for_target(id))
                .await?
            {
                deleted += 1;
                if shown.len() < usize::try_from(IDS_SHOWN).unwrap_or(0) {
                    shown.push(id.clone());
                }
            }
        }
        cursor = Some(last);
    }
    let more = deleted >= MAX_PER_REQUEST && delete_filter::count(&s.db, &filter).await? > 0;
    tracing::info!(project, deleted, more, token = %who.token, "crashes deleted by filter");
    Ok(Json(json!({
        "dry_run": false, "project": project, "deleted": deleted, "ids": shown, "more": more,
    })))
}
