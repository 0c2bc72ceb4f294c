//! Crash groups (admin): list them, merge two and split one (issue 37; Sentry's
//! merge/unmerge). The decisions are stored (`worker::store::groups`) and outlive
//! reprocessing and signature-rule changes.
//!
//! - `GET /api/v1/groups`: groups in signature order, a page at a time (`after`, `limit`);
//! - `POST /api/v1/groups/merge` `{"into": G, "groups": [H, …]}`: every H's crashes join G;
//! - `POST /api/v1/groups/split` `{"group": G, "crashes": [id, …], "name"?: N}`: the
//!   crashes leave G for a new group (N, or "G (split)"); or `{"group": G,
//!   "undo_merge_of": H}`: what a merge of H into G brought goes back to H.
//!
//! Groups belong to a project (issue 41, migration 0026). A project token lists and
//! changes its project's groups only: another project's group answers as one that does
//! not exist (404, the same body). A server-wide token lists the groups of the project it
//! names with `?project=` (or the header), or every project's when it names none (as the
//! crash list does; each group then says its project), and its merges and splits act in
//! the project it names, else in the one project that has the groups named (400
//! `project-required` when several have them).
//!
//! The writes take the `admin` scope, as reprocessing does, and like every JSON endpoint
//! refuse a body a cross-site form could send when the server runs without tokens.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};
use worker::store::dashboard::{self as q, GroupQuery, GroupSort};
use worker::store::groups::{self, DecisionError, Moved};

use super::auth::{Admin, Caller, Who};
use super::origin::require_json;
use super::problem::ApiError;
use super::state::AppState;

/// Groups per page by default, and at most.
const PAGE: i64 = 100;
const MAX_PAGE: i64 = 1000;
/// Crashes one split may name.
pub const MAX_SPLIT: usize = 1000;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/groups", get(list))
        .route("/api/v1/groups/merge", post(merge))
        .route("/api/v1/groups/split", post(split))
}

#[derive(Deserialize)]
struct ListParams {
    after: Option<String>,
    after_project: Option<String>,
    limit: Option<i64>,
}

async fn list(
    State(s): State<AppState>,
    Caller { who, .. }: Caller<Admin>,
    Query(p): Query<ListParams>,
) -> Result<Json<Value>, ApiError> {
    let limit = p.limit.unwrap_or(PAGE).clamp(1, MAX_PAGE);
    let query = GroupQuery {
        project: who.project.clone(),
        after_project: p.after_project.filter(|a| !a.is_empty()),
        since: None,
        until: None,
        product: None,
        version: None,
        kind: None,
        sort: GroupSort::Signature,
        descending: false,
        after: p.after.filter(|a| !a.is_empty()).map(|a| (0, a)),
        limit,
    };
    let rows = q::groups(&s.db, &query).await?;
    let last = rows.last().filter(|_| rows.len() as i64 == limit);
    let next = last.map(|g| g.signature.clone());
    // across projects, the next page also starts after the last group's project
    let next_project = last
        .filter(|_| who.project.is_none())
        .map(|g| g.project.clone());
    let groups: Vec<Value> = rows
        .iter()
        .map(|g| {
            json!({ "group": g.signature, "project": g.project, "count": g.count,
                    "first_seen": g.first_seen, "last_seen": g.last_seen })
        })
        .collect();
    Ok(Json(
        json!({ "groups": groups, "next": next, "next_project": next_project }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MergeBody {
    into: String,
    groups: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SplitBody {
    group: String,
    #[serde(default)]
    crashes: Vec<String>,
    name: Option<String>,
    undo_merge_of: Option<String>,
}

fn bad(detail: String) -> ApiError {
    ApiError::BadRequest {
        code: "bad-request",
        detail,
    }
}

/// A refused decision of `project` as the API answers it: a group missing from the
/// project, whether another project has one of that name or not, is the same 404.
pub fn decision_error(project: &str, e: DecisionError) -> ApiError {
    match e {
        DecisionError::NoGroup(g) => {
            ApiError::NotFound(format!("no crash group {g:?} in project {project:?}"))
        }
        DecisionError::Invalid(detail) => ApiError::Unprocessable {
            code: "bad-decision",
            detail,
        },
        DecisionError::Store(e) => ApiError::Store(e),
    }
}

/// The project a decision of `who` on `groups` acts in: its project (a project token's,
/// or the one a server-wide token names), else the one project that has every one of
/// `groups`. None has them: the 404 of a missing group; several: 400 `project-required`.
pub async fn decision_project(
    s: &AppState,
    who: &Who,
    groups: &[&str],
) -> Result<String, ApiError> {
    if let Some(p) = &who.project {
        return Ok(p.clone());
    }
    let mut found = groups::projects_with(&s.db, groups).await?;
    match found.len() {
        0 => Err(ApiError::NotFound(format!(
            "no project has the crash groups {groups:?}"
        ))),
        1 => Ok(found.remove(0)),
        _ => Err(ApiError::BadRequest {
            code: "project-required",
            detail: format!(
                "the crash groups {groups:?} are in several projects ({}): name one with \
                 ?project=",
                found.join(", ")
            ),
        }),
    }
}

/// Merges each of `from` into `into`, groups of `project`, in order; the crashes moved
/// in all.
pub async fn merge_all(
    s: &AppState,
    project: &str,
    into: &str,
    from: &[String],
) -> Result<Moved, ApiError> {
    let mut moved = Moved {
        group: into.to_string(),
        crashes: 0,
    };
    for g in from.iter().filter(|g| g.as_str() != into) {
        let m = groups::merge(&s.db, project, into, g)
            .await
            .map_err(|e| decision_error(project, e))?;
        moved.crashes = moved.crashes.saturating_add(m.crashes);
    }
    Ok(moved)
}

async fn merge(
    State(s): State<AppState>,
    Caller { who, .. }: Caller<Admin>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Moved>, ApiError> {
    require_json(&s, &headers)?;
    let b: MergeBody =
        serde_json::from_slice(&body).map_err(|e| bad(format!("the body is not a merge: {e}")))?;
    if b.groups.is_empty() || b.groups.len() > MAX_PAGE as usize {
        return Err(bad(format!(
            "groups must name 1 to {MAX_PAGE} groups to merge into {:?}",
            b.into
        )));
    }
    let mut named: Vec<&str> = vec![b.into.as_str()];
    named.extend(b.groups.iter().map(String::as_str));
    let project = decision_project(&s, &who, &named).await?;
    Ok(Json(merge_all(&s, &project, &b.into, &b.groups).await?))
}

async fn split(
    State(s): State<AppState>,
    Caller { who, .. }: Caller<Admin>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Moved>, ApiError> {
    require_json(&s, &headers)?;
    let b: SplitBody =
        serde_json::from_slice(&body).map_err(|e| bad(format!("the body is not a split: {e}")))?;
    let project = &decision_project(&s, &who, &[b.group.as_str()]).await?;
    let moved = match (&b.undo_merge_of, b.crashes.is_empty()) {
        (Some(from), true) => groups::unmerge(&s.db, project, &b.group, from).await,
        (None, false) if b.crashes.len() <= MAX_SPLIT => {
            groups::split(&s.db, project, &b.group, &b.crashes, b.name.as_deref()).await
        }
        (None, false) => {
            return Err(bad(format!(
                "a split moves at most {MAX_SPLIT} crashes, not {}",
                b.crashes.len()
            )))
        }
        _ => {
            return Err(bad(
                "a split names either crashes or undo_merge_of (one of the two)".into(),
            ))
        }
    };
    Ok(Json(moved.map_err(|e| decision_error(project, e))?))
}
