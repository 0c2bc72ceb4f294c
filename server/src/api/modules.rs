//! `GET /api/v1/modules/missing` (admin): the modules crashes needed and nobody uploaded,
//! most-needed first — what to upload next; a project's admin sees what its project's
//! crashes missed, counted over its crashes only (issue 41). The index is kept by the workers
//! (`worker::store::missing`) and emptied for a build-id when a file for it arrives.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use worker::store::missing;

use super::auth::{Admin, Caller};
use super::extract::parse_limit;
use super::problem::ApiError;
use super::state::AppState;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route("/api/v1/modules/missing", get(list_missing))
}

async fn list_missing(
    State(s): State<AppState>,
    caller: Caller<Admin>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let limit = parse_limit(&q, 100)?;
    let rows = missing::list_in(&s.db, caller.who.filter(), limit).await?;
    let modules: Vec<_> = rows
        .into_iter()
        .map(|m| json!({"build_id": m.build_id, "name": m.module_name, "crash_count": m.crash_count, "last_seen": m.last_seen}))
        .collect();
    Ok(Json(json!({ "modules": modules })))
}
