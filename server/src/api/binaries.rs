//! `POST /api/v1/binaries` (raw or multipart, one or many files), `GET /api/v1/binaries`,
//! `GET /api/v1/binaries/{build_id}`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use worker::store::binaries::{self, BinaryRow};
use worker::store::identify::{identify_file, BinaryInfo, IdentifyError};
use worker::store::{missing, now_ms, tables, StagedBlob, StoreError};

use super::extract::{authorize, multipart_boundary, read_multipart, stage_body, Keep, PartData};
use super::health::parse_limit;
use super::problem::ApiError;
use super::state::{AppState, Scope};

/// Most files in one multipart upload.
const MAX_FILES: usize = 64;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/binaries", get(list).post(upload))
        .route("/api/v1/binaries/{build_id}", get(by_build_id))
}

fn to_json(row: &BinaryRow, created: Option<bool>) -> Value {
    let mut v = json!({
        "build_id": row.build_id, "sha256": row.sha256, "arch": row.arch, "kind": row.kind,
        "file_name": row.file_name, "size": row.size, "sections": row.section_list(),
        "uploaded_at": row.uploaded_at,
    });
    if let (Some(created), Some(obj)) = (created, v.as_object_mut()) {
        obj.insert("created".into(), Value::Bool(created));
    }
    v
}

async fn upload(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    authorize(&s, &headers, Scope::Symbols)?;
    let result = upload_inner(&s, &headers, body).await;
    if result.is_err() {
        s.metrics.rejected_uploads.fetch_add(1, Ordering::Relaxed);
    }
    result
}

async fn upload_inner(
    s: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let limit = s.config.max_decompressed_bytes;
    let files: Vec<(Option<String>, StagedBlob)> = match multipart_boundary(headers)? {
        Some(boundary) => read_multipart(body, boundary, limit, MAX_FILES, &s.staging, |_, _| {
            Keep::File
        })
        .await?
        .into_iter()
        .filter_map(|p| match p.data {
            PartData::File(f) if !f.is_empty() => {
                Some((p.file_name.or(Some(p.name)).filter(|n| !n.is_empty()), f))
            }
            _ => None,
        })
        .collect(),
        None => {
            let name = headers
                .get("x-file-name")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            vec![(name, stage_body(body, limit, &s.staging).await?)]
        }
    };
    if files.is_empty() || files.iter().all(|(_, f)| f.is_empty()) {
        return Err(ApiError::BadRequest {
            code: "empty-upload",
            detail: "the upload holds no file".into(),
        });
    }
    // Identify every file before storing any, so a bad file stores nothing.
    let mut identified = Vec::new();
    for (name, staged) in files {
        let info = identify_staged(&staged).await?.map_err(|e| match &name {
            Some(n) => ApiError::Unprocessable {
                code: e.code(),
                detail: format!("{n}: {e}"),
            },
            None => ApiError::Identify(e),
        })?;
        identified.push((name, staged, info));
    }
    let mut out = Vec::new();
    let mut any_created = false;
    for (name, staged, info) in identified {
        let size = i64::try_from(staged.size()).unwrap_or(i64::MAX);
        let sha256 = s.blobs.put_staged(&staged).await?;
        let row = BinaryRow {
            sha256,
            build_id: info.build_id.clone(),
            arch: info.arch.map(str::to_string),
            kind: info.kind.to_string(),
            file_name: name,
            size,
            sections: info.sections.join(","),
            uploaded_at: now_ms(),
        };
        let (stored, created) = binaries::insert(&s.db, &row).await?;
        if created {
            any_created = true;
            s.metrics.binary_uploads.fetch_add(1, Ordering::Relaxed);
            // New file for this build-id: its tables must be rebuilt from all its files,
            // and the crashes that missed it processed again.
            tables::invalidate(&s.db, &info.build_id).await?;
            s.cache.invalidate_build_id(&info.build_id);
            let requeued = missing::requeue_for(&s.db, &info.build_id).await?;
            if requeued > 0 {
                tracing::info!(build_id = %info.build_id, requeued, "crashes requeued");
                s.wake.notify_waiters();
            }
        }
        out.push(to_json(&stored, Some(created)));
    }
    let status = if any_created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(json!({ "binaries": out }))))
}

/// Identifies a staged upload from its file, on the blocking pool (it reads headers
/// from disk).
async fn identify_staged(
    staged: &StagedBlob,
) -> Result<Result<BinaryInfo, IdentifyError>, ApiError> {
    let file = staged.open()?;
    tokio::task::spawn_blocking(move || identify_file(&file))
        .await
        .map_err(|e| {
            ApiError::Store(StoreError::Staging {
                path: staged.path().display().to_string(),
                source: std::io::Error::other(e),
            })
        })
}

fn check_build_id(id: &str) -> Result<String, ApiError> {
    let ok = (2..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit());
    if !ok {
        return Err(ApiError::BadRequest {
            code: "bad-request",
            detail: format!("build_id must be 2 to 128 hex digits, not {id:?}"),
        });
    }
    Ok(id.to_ascii_lowercase())
}

async fn list(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    authorize(&s, &headers, Scope::Symbols)?;
    let limit = parse_limit(&q, 100)?;
    let rows = match q.get("build_id") {
        Some(id) => binaries::by_build_id(&s.db, &check_build_id(id)?).await?,
        None => binaries::recent(&s.db, limit).await?,
    };
    let items: Vec<Value> = rows.iter().map(|r| to_json(r, None)).collect();
    Ok(Json(json!({ "binaries": items })))
}

async fn by_build_id(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(build_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    authorize(&s, &headers, Scope::Symbols)?;
    let id = check_build_id(&build_id)
        .map_err(|_| ApiError::NotFound(format!("no binary with build-id {build_id:?}")))?;
    let rows = binaries::by_build_id(&s.db, &id).await?;
    if rows.is_empty() {
        return Err(ApiError::NotFound(format!("no binary with build-id {id}")));
    }
    let items: Vec<Value> = rows.iter().map(|r| to_json(r, None)).collect();
    Ok(Json(json!({ "build_id": id, "binaries": items })))
}
