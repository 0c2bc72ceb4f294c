//! `POST /api/v1/binaries` (raw or multipart, one or many files: ELF, Mach-O (a universal
//! one by slice), a zipped dSYM (by DWARF file), a dyld shared cache (by image, as `.sym` files), Breakpad `.sym`), `GET /api/v1/binaries[?build_id=|?debug_id=]`, `GET /api/v1/binaries/{build_id}`,
//! and `POST`/`DELETE /api/v1/binaries/{sha256}/shared` (an admin shares a file with every
//! project, or stops).
//!
//! Files belong to the caller's project (issue 41): an upload is stored in it (its bytes
//! once, whichever projects hold them), first upload wins within it, and the reads answer
//! the files it sees (`binaries::visible`: its own and the shared ones); another
//! project's file answers as a file that is not stored. A new file invalidates the tables
//! it changes and requeues the crashes of its project it may change
//! (`worker::jobs::new_file`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use engine::identify::{identify_file, BinaryInfo, IdentifyError, KIND_BREAKPAD};
use serde_json::{json, Value};
use worker::jobs::new_file::{file_arrived_within, NewFile};
use worker::store::binaries::{self, BinaryRow};
use worker::store::missing::Requeued;
use worker::store::{now_ms, StagedBlob, StoreError};

use super::auth::{Admin, Caller, ServerWide, Symbols};
use super::extract::{multipart_boundary, parse_limit, read_multipart, stage_body, Keep, PartData};
use super::problem::ApiError;
use super::state::AppState;

/// Most files in one multipart upload.
const MAX_FILES: usize = 64;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/binaries", get(list).post(upload))
        .route("/api/v1/binaries/{build_id}", get(by_build_id))
        .route(
            "/api/v1/binaries/{sha256}/shared",
            post(share).delete(unshare),
        )
}

/// [`to_json`], with a Windows image's `names` (every name it was uploaded under).
async fn with_names(
    s: &AppState,
    row: &BinaryRow,
    created: Option<bool>,
) -> Result<Value, ApiError> {
    let mut v = to_json(row, created);
    if row.format == "pe" {
        let names = binaries::names_of(&s.db, &row.sha256).await?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("names".into(), json!(names));
        }
    }
    Ok(v)
}

fn to_json(row: &BinaryRow, created: Option<bool>) -> Value {
    let mut v = json!({
        "build_id": row.build_id(), "debug_id": row.debug_id, "code_id": row.code_id, "code_file": row.code_file,
        "format": row.format,
        "sha256": row.sha256, "arch": row.arch, "kind": row.kind,
        "file_name": row.file_name, "size": row.size, "sections": row.section_list(),
        "uploaded_at": row.uploaded_at, "source": row.source,
    });
    if let (Some(created), Some(obj)) = (created, v.as_object_mut()) {
        obj.insert("created".into(), Value::Bool(created));
    }
    v
}

async fn upload(
    State(s): State<AppState>,
    caller: Caller<Symbols>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let result = upload_inner(&s, &headers, caller.who.upload_project(), body).await;
    if result.is_err() {
        s.metrics.rejected_uploads.fetch_add(1, Ordering::Relaxed);
    }
    result
}

async fn upload_inner(
    s: &AppState,
    headers: &HeaderMap,
    project: &str,
    body: Body,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let files = received_files(s, headers, body).await?;
    store_files(s, headers, project, files).await
}

/// Identifies, checks and stores staged files with the names they were sent under (each
/// checked by [`super::file_name::check`]) in `project`: the one store path of an upload,
/// whether it arrived in one request or in an upload session's chunks
/// (`upload_sessions`).
pub(super) async fn store_files(
    s: &AppState,
    headers: &HeaderMap,
    project: &str,
    files: Vec<(Option<String>, StagedBlob)>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    // dyld shared caches, each image's names as a `.sym` file; zipped dSYMs and
    // universal Mach-O files, each taken apart into thin files
    let files = super::dyld_upload::expand(s, files).await?;
    let files = super::apple_upload::expand(s, files).await?;
    // Identify and check every file before storing any, so a bad file stores nothing.
    let mut checked: Vec<(StagedBlob, BinaryInfo, BinaryRow)> = Vec::new();
    for (name, staged) in files {
        let (info, row) = checked_file(s, project, name, &staged).await?;
        if let Some(earlier) = checked.iter().find(|(_, _, r)| r.contests(&row)) {
            return Err(conflict(&row, &earlier.2.sha256));
        }
        checked.push((staged, info, row));
    }
    let rows: Vec<&BinaryRow> = checked.iter().map(|(_, _, r)| r).collect();
    let claimed = claim_all(s, project, &rows).await?;
    let stored = store_all(s, project, checked).await;
    if stored.is_err() {
        release_all(s, project, &claimed).await;
    }
    let (out, arrivals) = stored?;
    let any_created = arrivals.iter().any(|(_, _, new)| *new);
    // Only once every file of the request is stored, so that a crash requeued for one of
    // them is not processed before the others (a binary and its debug file) are there.
    let requeued = announce(s, headers, Some(project), arrivals).await?;
    let status = if any_created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = json!({
        "binaries": out, "requeued": requeued.requeued, "requeue_left": requeued.left,
    });
    Ok((status, Json(body)))
}

/// A stored file's answer, and what each file's arrival announces (its identity, the name
/// it was sent under, and whether it is new: a new file, or a Windows image's new name).
type Stored = (Vec<Value>, Vec<(BinaryInfo, Option<String>, bool)>);

/// Announces an upload's new files: each invalidates the tables it feeds and queues again
/// the crashes of `project` (every project's for a shared file: `None`) that missed it,
/// within the token's allowance of requeued crashes (`--requeue-per-minute`); the crashes
/// past it stay listed as missing the file, for a reprocess run (`{"missing_only":
/// true}`) or the next new file of that id.
async fn announce(
    s: &AppState,
    headers: &HeaderMap,
    project: Option<&str>,
    arrivals: Vec<(BinaryInfo, Option<String>, bool)>,
) -> Result<Requeued, ApiError> {
    let mut allowance = s.requeue_rate.take(headers, u64::MAX);
    let mut total = Requeued::default();
    for (info, name, new) in arrivals {
        if !new {
            continue;
        }
        let file = NewFile {
            build_id: info.build_id.as_deref(),
            debug_id: info.debug_id.as_deref(),
            breakpad: info.kind == KIND_BREAKPAD,
            pe: info.image(name.as_deref()),
            project,
        };
        let done = match file_arrived_within(&s.db, &s.cache, file, allowance).await {
            Ok(d) => d,
            Err(e) => {
                s.requeue_rate.give_back(headers, allowance);
                return Err(e.into());
            }
        };
        allowance = allowance.saturating_sub(done.requeued);
        total.requeued += done.requeued;
        total.left += done.left;
        if done.requeued > 0 {
            s.wake.notify_waiters();
        }
    }
    s.requeue_rate.give_back(headers, allowance);
    Ok(total)
}

/// Claims every file's identity in its role (the database's key decides between uploads
/// at the same moment: the one that loses is refused with 409, as if it came second).
/// Returns the claims made, to release if the files are then not stored.
async fn claim_all(
    s: &AppState,
    project: &str,
    rows: &[&BinaryRow],
) -> Result<Vec<BinaryRow>, ApiError> {
    let mut made: Vec<BinaryRow> = Vec::new();
    for row in rows {
        let claimed = binaries::claim(&s.db, row, project).await;
        let lost = match claimed {
            Ok(binaries::Claim::Held { new: true }) => {
                made.push((*row).clone());
                continue;
            }
            Ok(binaries::Claim::Held { new: false } | binaries::Claim::Nothing) => continue,
            Ok(binaries::Claim::Lost(holder)) => conflict(row, &holder),
            Err(e) => ApiError::from(e),
        };
        release_all(s, project, &made).await;
        return Err(lost);
    }
    Ok(made)
}

/// Releases claims whose files were not stored (best effort: a claim left behind names a
/// file that is not there, and refuses others until an admin removes it; logged).
async fn release_all(s: &AppState, project: &str, claimed: &[BinaryRow]) {
    for row in claimed {
        if let Err(e) = binaries::release(&s.db, row, project).await {
            tracing::error!(sha256 = %row.sha256, error = %e, "could not release a claim");
        }
    }
}

/// Stores the checked (and claimed) files of an upload in `project`: their blobs (once
/// whichever projects hold the bytes), their rows, the project's hold on them, a Windows
/// image's new name. A file is new (`created`) when it is new to the project.
async fn store_all(
    s: &AppState,
    project: &str,
    checked: Vec<(StagedBlob, BinaryInfo, BinaryRow)>,
) -> Result<Stored, ApiError> {
    let mut out = Vec::new();
    let mut arrivals = Vec::new();
    for (staged, info, row) in checked {
        s.blobs.put_staged(&staged).await?;
        let (stored, _) = binaries::insert(&s.db, &row).await?;
        let created = binaries::own(&s.db, &stored.sha256, project).await?;
        if created {
            s.metrics.binary_uploads.fetch_add(1, Ordering::Relaxed);
        }
        // a Windows image keeps every name it is sent under: a crash names it by any
        let new_name = match (&row.file_name, stored.format == "pe") {
            (Some(name), true) => binaries::add_name(&s.db, &stored.sha256, name).await?,
            _ => false,
        };
        arrivals.push((info, row.file_name.clone(), created || new_name));
        out.push(with_names(s, &stored, Some(created)).await?);
    }
    Ok((out, arrivals))
}

/// The files of an upload, staged, with the names they were sent under (checked by
/// [`super::file_name`]).
async fn received_files(
    s: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Vec<(Option<String>, StagedBlob)>, ApiError> {
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
            let name = match headers.get("x-file-name") {
                Some(v) => Some(super::file_name::from_header(v.as_bytes())?),
                None => None,
            };
            vec![(name, stage_body(body, limit, &s.staging).await?)]
        }
    };
    if files.is_empty() || files.iter().all(|(_, f)| f.is_empty()) {
        return Err(ApiError::BadRequest {
            code: "empty-upload",
            detail: "the upload holds no file".into(),
        });
    }
    for (name, _) in &files {
        if let Some(n) = name {
            super::file_name::check(n)?;
        }
    }
    Ok(files)
}

/// Identifies one staged file and checks it may be stored: a Windows image has a name,
/// and no other file holds its identity in its role (first upload wins: a different file
/// is refused with 409, and logged; files being stored at this moment are told apart by
/// [`claim_all`]).
async fn checked_file(
    s: &AppState,
    project: &str,
    name: Option<String>,
    staged: &StagedBlob,
) -> Result<(BinaryInfo, BinaryRow), ApiError> {
    let info = identify_staged(s, staged).await?.map_err(|e| match &name {
        Some(n) => ApiError::Unprocessable {
            code: e.code(),
            detail: format!("{n}: {e}"),
        },
        None => ApiError::Identify(e),
    })?;
    if info.code_id.is_some() && info.kind != KIND_BREAKPAD && name.is_none() {
        return Err(ApiError::BadRequest {
            code: "file-name-required",
            detail: "a Windows image is found by its file name and code id, as minidumps \
                     name modules: send its name (the multipart filename, or X-File-Name)"
                .into(),
        });
    }
    let row = BinaryRow {
        sha256: staged.sha256().to_string(),
        build_id: info.build_id.clone().unwrap_or_default(),
        arch: info.arch.map(str::to_string),
        kind: info.kind.to_string(),
        file_name: name,
        size: i64::try_from(staged.size()).unwrap_or(i64::MAX),
        sections: info.sections.join(","),
        uploaded_at: now_ms(),
        debug_id: info.debug_id.clone(),
        format: info.format.to_string(),
        source: None,
        code_id: info.code_id.clone(),
        code_file: info.code_file.clone(),
    };
    if let Some(holder) = binaries::holder_of(&s.db, &row, project).await? {
        return Err(conflict(&row, &holder.sha256));
    }
    Ok((info, row))
}

/// The 409 of a file whose identity `holder` holds in the same role; logged, since a
/// pipeline does not upload two different files for one build (a rebuild that is not
/// reproducible, or someone trying to replace the symbols).
fn conflict(row: &BinaryRow, holder: &str) -> ApiError {
    let id = row
        .build_id()
        .or(row.debug_id.as_deref())
        .or(row.code_id.as_deref())
        .unwrap_or_default();
    tracing::warn!(
        id,
        role = row.role(),
        refused = %row.sha256,
        existing = %holder,
        "upload refused: another file holds this identity in this role"
    );
    ApiError::Conflict {
        detail: format!(
            "another {} file ({}) is already stored for {id} as its {}: the first upload \
             wins, and a different file for the same build is refused",
            row.format,
            holder,
            row.role()
        ),
        existing_sha256: holder.to_string(),
    }
}

/// Identifies a staged upload from its file, on the blocking pool (it reads headers
/// from disk, or streams a `.sym` file), once one of the server's identification slots
/// is free.
async fn identify_staged(
    s: &AppState,
    staged: &StagedBlob,
) -> Result<Result<BinaryInfo, IdentifyError>, ApiError> {
    let _slot = s.identify_slots.acquire().await.map_err(|e| {
        ApiError::Store(StoreError::Staging {
            path: staged.path().display().to_string(),
            source: std::io::Error::other(e),
        })
    })?;
    let file = staged.open()?;
    tokio::task::spawn_blocking(move || identify_file(std::io::BufReader::new(file)))
        .await
        .map_err(|e| {
            ApiError::Store(StoreError::Staging {
                path: staged.path().display().to_string(),
                source: std::io::Error::other(e),
            })
        })
}

/// A build-id from a URL or query: 2 to 128 hex digits, lower-cased.
pub(super) fn check_build_id(id: &str) -> Result<String, ApiError> {
    let ok = (2..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit());
    if !ok {
        return Err(ApiError::BadRequest {
            code: "bad-request",
            detail: format!("build_id must be 2 to 128 hex digits, not {id:?}"),
        });
    }
    Ok(id.to_ascii_lowercase())
}

fn check_debug_id(id: &str) -> Result<String, ApiError> {
    let ok = (2..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit());
    if !ok {
        return Err(ApiError::BadRequest {
            code: "bad-request",
            detail: format!("debug_id must be 2 to 64 hex digits, not {id:?}"),
        });
    }
    Ok(id.to_ascii_uppercase())
}

async fn list(
    State(s): State<AppState>,
    caller: Caller<Symbols>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let limit = parse_limit(&q, 100)?;
    let sees = caller.who.sees();
    let rows = match (q.get("build_id"), q.get("debug_id")) {
        (Some(id), None) => binaries::by_build_id(&s.db, &check_build_id(id)?).await?,
        (None, Some(id)) => binaries::by_debug_id(&s.db, &check_debug_id(id)?).await?,
        (Some(b), Some(d)) => {
            let (b, d) = (check_build_id(b)?, check_debug_id(d)?);
            let mut rows = binaries::by_build_id(&s.db, &b).await?;
            rows.retain(|r| r.debug_id.as_deref() == Some(d.as_str()));
            rows
        }
        (None, None) => binaries::recent_in(&s.db, sees, limit).await?,
    };
    let rows = binaries::visible(&s.db, sees, rows).await?;
    let mut items: Vec<Value> = Vec::with_capacity(rows.len());
    for r in &rows {
        items.push(with_names(&s, r, None).await?);
    }
    Ok(Json(json!({ "binaries": items })))
}

async fn by_build_id(
    State(s): State<AppState>,
    caller: Caller<Symbols>,
    Path(build_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = check_build_id(&build_id)
        .map_err(|_| ApiError::NotFound(format!("no binary with build-id {build_id:?}")))?;
    let rows = binaries::by_build_id(&s.db, &id).await?;
    let rows = binaries::visible(&s.db, caller.who.sees(), rows).await?;
    if rows.is_empty() {
        return Err(ApiError::NotFound(format!("no binary with build-id {id}")));
    }
    let items: Vec<Value> = rows.iter().map(|r| to_json(r, None)).collect();
    Ok(Json(json!({ "build_id": id, "binaries": items })))
}

/// The stored file a `{sha256}` path names (64 hex digits, any case), or 404.
async fn stored_file(s: &AppState, sha256: &str) -> Result<BinaryRow, ApiError> {
    let missing = || ApiError::NotFound(format!("no file with sha256 {sha256:?}"));
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(missing());
    }
    binaries::by_sha256(&s.db, &sha256.to_ascii_lowercase())
        .await?
        .ok_or_else(missing)
}

/// `POST /api/v1/binaries/{sha256}/shared` (server-wide admin): every project's crashes
/// may use the file from now on (a system library's), after each project's own file of
/// its identity. Queues again every project's crashes that missed it.
async fn share(
    State(s): State<AppState>,
    _caller: ServerWide<Admin>,
    headers: HeaderMap,
    Path(sha256): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let row = stored_file(&s, &sha256).await?;
    let new = binaries::own(&s.db, &row.sha256, binaries::SHARED).await?;
    let requeued = if new {
        let image = match row.is_breakpad() {
            true => row.code_file.as_deref(),
            false => row.file_name.as_deref(),
        };
        let file = NewFile {
            build_id: row.build_id(),
            debug_id: row.debug_id.as_deref(),
            breakpad: row.is_breakpad(),
            pe: image.zip(row.code_id.as_deref()),
            project: None,
        };
        let allowance = s.requeue_rate.take(&headers, u64::MAX);
        let done = file_arrived_within(&s.db, &s.cache, file, allowance).await;
        let used = done.as_ref().map_or(0, |d| d.requeued);
        s.requeue_rate
            .give_back(&headers, allowance.saturating_sub(used));
        if used > 0 {
            s.wake.notify_waiters();
        }
        done?
    } else {
        Requeued::default()
    };
    Ok(Json(json!({
        "sha256": row.sha256, "shared": true, "changed": new,
        "requeued": requeued.requeued, "requeue_left": requeued.left,
    })))
}

/// `DELETE /api/v1/binaries/{sha256}/shared` (server-wide admin): the file serves the
/// projects that uploaded it only, from now on (reports made with it stay as they are).
async fn unshare(
    State(s): State<AppState>,
    _caller: ServerWide<Admin>,
    Path(sha256): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let row = stored_file(&s, &sha256).await?;
    let changed = binaries::disown(&s.db, &row.sha256, binaries::SHARED).await?;
    Ok(Json(
        json!({ "sha256": row.sha256, "shared": false, "changed": changed }),
    ))
}
