//! `POST /api/v1/crashes` (Crashpad/Breakpad multipart, raw dumps, gzip/zstd bodies),
//! `GET /api/v1/crashes/{id}`, `GET /api/v1/crashes` (keyset pagination, newest first),
//! `GET /api/v1/crashes/{id}/dump` (the dump as uploaded, streamed from the store), and
//! `DELETE /api/v1/crashes/{id}` (`api::crash_delete`).
//!
//! Every route acts in the caller's project (`api::auth`): an upload is filed under it
//! (within its quota, `api::quota`; scrubbed by its rules before it is stored,
//! `api::scrub`), and another project's crash is answered exactly as a missing one.
//!
//! The dashboard's crash page links to the dump, so that route also takes the dashboard's
//! credentials (HTTP Basic with the token as password) and answers a missing one with
//! the dashboard's Basic challenge.
//!
//! Nothing is parsed on the request path beyond the cheap structural checks of
//! `dump_check`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use engine::dump::compressed::{Compression, DecompressError};
use serde_json::{json, Value};
use worker::store::crashes::{self, CrashRow, CrashSummary, ListQuery, NewCrash};
use worker::store::{now_ms, StagedBlob, StoreError};

use super::auth::{Caller, Ingest, Read, Who};
use super::browser_auth::{dash_caller, DashError};
use super::extract::{multipart_boundary, parse_limit, read_multipart, stage_body, Keep, PartData};
use super::problem::ApiError;
use super::quota::{Over, Refusal};
use super::state::AppState;
use super::{dump_check, upload_fields};

/// Most parts (dump + annotations) in one Crashpad upload.
const MAX_PARTS: usize = 1024;
/// Longest `?wait=`.
const MAX_WAIT_SECS: u64 = 60;

/// The `wait` query parameter: seconds to wait for the crash to be processed (0 to
/// [`MAX_WAIT_SECS`]; 0 when absent).
fn wait_secs(q: &HashMap<String, String>) -> Result<u64, ApiError> {
    match q.get("wait") {
        None => Ok(0),
        Some(w) => w
            .parse::<u64>()
            .ok()
            .filter(|w| *w <= MAX_WAIT_SECS)
            .ok_or_else(|| ApiError::BadRequest {
                code: "bad-request",
                detail: format!(
                    "wait must be a number of seconds from 0 to {MAX_WAIT_SECS}, not {w:?}"
                ),
            }),
    }
}

/// An upload's dump, staged (and decompressed where the file itself is compressed), with
/// its form fields.
struct Staged {
    dump: StagedBlob,
    /// Whether it came as Crashpad's multipart form (which expects a plain-text answer).
    crashpad: bool,
    /// The form's text fields as sent, bounded later by [`upload_fields::bound`].
    fields: Vec<(String, Vec<u8>)>,
}

/// Stages the request body: the `upload_file_minidump` part and the text fields of a
/// Crashpad/Breakpad multipart form, or the whole body as the dump.
async fn stage_upload(s: &AppState, headers: &HeaderMap, body: Body) -> Result<Staged, ApiError> {
    let limit = s.config.max_decompressed_bytes;
    let mut fields = Vec::new();
    let (dump, crashpad): (StagedBlob, bool) = match multipart_boundary(headers)? {
        Some(boundary) => {
            let parts = read_multipart(
                body,
                boundary,
                limit,
                MAX_PARTS,
                &s.staging,
                |name, file| {
                    match (name, file) {
                        ("upload_file_minidump", _) => Keep::File,
                        (_, None) => Keep::Text,
                        // Other attached files are not kept.
                        (_, Some(_)) => Keep::Drop,
                    }
                },
            )
            .await?;
            let mut dump = None;
            for part in parts {
                match part.data {
                    PartData::File(file) => dump = Some(file),
                    PartData::Text(text) => fields.push((part.name, text.to_vec())),
                    PartData::Dropped => {}
                }
            }
            let dump = dump.ok_or_else(|| ApiError::BadRequest {
                code: "missing-minidump",
                detail: "the multipart upload has no `upload_file_minidump` part".into(),
            })?;
            (dump, true)
        }
        None => (stage_body(body, limit, &s.staging).await?, false),
    };
    let dump = decompressed(s, dump, limit).await?;
    Ok(Staged {
        dump,
        crashpad,
        fields,
    })
}

/// A dump uploaded compressed as systems store it (systemd-coredump's `.zst`, `.xz`,
/// `.lz4`; `.bz2`; `.gz`), told by its magic bytes, decompressed into a new staged file
/// (at most `limit` bytes, the limit of a decompressed request body): the stored dump,
/// its sha256 and size are the dump's own, as a walk of it reads it. Any other upload is
/// returned as it is.
async fn decompressed(s: &AppState, dump: StagedBlob, limit: u64) -> Result<StagedBlob, ApiError> {
    let head = dump.read_at(0, 8).await?;
    let Some(format) = Compression::of(&head) else {
        return Ok(dump);
    };
    let staging = s.staging.clone();
    let path = dump.path().display().to_string();
    let out = tokio::task::spawn_blocking(move || staging.decompressed(&dump, format, limit))
        .await
        .map_err(|e| {
            ApiError::Store(StoreError::Staging {
                path,
                source: std::io::Error::other(e.to_string()),
            })
        })??;
    out.map_err(|e| match e {
        DecompressError::TooLarge { limit, .. } => ApiError::DecompressedTooLarge { limit },
        e => ApiError::Unprocessable {
            code: "malformed-dump",
            detail: format!("not a readable crash dump: {e}"),
        },
    })
}

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/crashes", get(list).post(upload))
        .route(
            "/api/v1/crashes/{id}",
            get(get_one).delete(super::crash_delete::delete),
        )
        .route("/api/v1/crashes/{id}/dump", get(dump))
}

fn summary(row: &CrashSummary) -> Value {
    let annotations: Value = serde_json::from_str(&row.annotations).unwrap_or_else(|_| json!({}));
    json!({
        "id": row.id, "status": row.status, "received_at": row.received_at,
        "dump": {
            "sha256": row.dump_sha256, "size": row.dump_size, "format": row.dump_format,
            "gone": row.dump_gone, "gone_at": row.dump_gone_at,
        },
        "attempts": row.attempts, "error": row.error, "signature": row.signature,
        "computed_signature": row.computed_signature,
        "annotations": annotations, "finished_at": row.finished_at,
        "processing_ms": row.processing_ms, "processing_us": row.processing_us,
        "project": row.project,
    })
}

/// A crash with its report: the stored report text is embedded as it is (checked to be
/// JSON, never parsed into a tree: a report may be tens of MiB).
#[derive(serde::Serialize)]
struct Full<'r> {
    #[serde(flatten)]
    summary: Value,
    report: Option<&'r serde_json::value::RawValue>,
}

/// `row` with `report`, its report as served (with the upload's fields; see
/// [`CrashRow::served_report`]).
fn full<'r>(row: &CrashRow, report: Option<&'r str>) -> Full<'r> {
    Full {
        summary: summary(&row.summary()),
        report: report.and_then(|r| serde_json::from_str(r).ok()),
    }
}

async fn upload(
    State(s): State<AppState>,
    Caller { who, .. }: Caller<Ingest>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    body: Body,
) -> Result<Response, ApiError> {
    let result = upload_inner(&s, &who, &headers, &q, body).await;
    if result.is_err() {
        s.metrics.rejected_uploads.fetch_add(1, Ordering::Relaxed);
    }
    result
}

/// A quota's refusal as the answer: 429 with the wait.
fn over_quota(project: &str, r: Refusal) -> ApiError {
    let what = match r.over {
        Over::CrashesPerMinute => "crashes a minute",
        Over::BytesPerDay => "dump bytes a day",
    };
    ApiError::TooManyRequests {
        detail: format!(
            "project {project:?} is over its quota of {what}; retry in {} s",
            r.retry_after_secs
        ),
        retry_after_secs: r.retry_after_secs,
    }
}

async fn upload_inner(
    s: &AppState,
    who: &Who,
    headers: &HeaderMap,
    q: &HashMap<String, String>,
    body: Body,
) -> Result<Response, ApiError> {
    let project = who.upload_project();
    let wait = wait_secs(q)?;
    // Checked before the body is read: a malformed key costs no staging.
    let key = idempotency_key(headers)?;
    s.quotas
        .take_crash(project)
        .map_err(|r| over_quota(project, r))?;
    let Staged {
        dump,
        crashpad,
        fields,
    } = stage_upload(s, headers, body).await?;
    if let Err(r) = s.quotas.take_bytes(project, dump.size(), now_ms()) {
        s.quotas.give_back_crash(project);
        return Err(over_quota(project, r));
    }
    let format = dump_check::check(&dump).await?;
    // Before anything is stored or compared: the secret never reaches the store.
    let dump = s.scrubbing.dump(&s.staging, project, dump).await?;
    let fields = s.scrubbing.fields(project, fields);
    let size = i64::try_from(dump.size()).unwrap_or(i64::MAX);
    let bounded = upload_fields::bound(fields, s.config.field_limits);
    let annotations = serde_json::to_string(&bounded.fields).unwrap_or_else(|_| "{}".into());
    // A retry of an upload already stored (its answer was lost) gets the first crash.
    let first = match &key {
        Some(k) => crashes::by_idempotency_key(&s.db, project, k).await?,
        None if !s.config.dedup_window.is_zero() => {
            let window = i64::try_from(s.config.dedup_window.as_millis()).unwrap_or(i64::MAX);
            let since = now_ms().saturating_sub(window);
            crashes::same_upload_since(&s.db, project, dump.sha256(), &annotations, since).await?
        }
        None => None,
    };
    let (id, replayed) = match first {
        Some(row) => (replayed(&row, dump.sha256())?, true),
        None => {
            let sha256 = s.blobs.put_staged(&dump).await?;
            drop(dump);
            let new = NewCrash {
                id: crashes::new_id(),
                received_at: now_ms(),
                dump_sha256: sha256,
                dump_size: size,
                dump_format: format.to_string(),
                annotations,
                annotations_cut: bounded.cut,
            };
            let raced = match &key {
                Some(k) => crashes::insert_keyed(&s.db, &new, project, k).await?,
                None => {
                    crashes::insert_in(&s.db, &new, project).await?;
                    None
                }
            };
            match raced {
                // A concurrent upload with the same key was stored first.
                Some(row) => (replayed(&row, &new.dump_sha256)?, true),
                None => {
                    s.metrics.crash_stored(project);
                    s.wake.notify_one();
                    tracing::info!(crash_id = %new.id, format, size, "crash queued");
                    (new.id, false)
                }
            }
        }
    };

    if crashpad {
        // Crashpad and Breakpad clients read the report id from a plain-text body.
        return Ok((
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{id}\n"),
        )
            .into_response());
    }
    if wait > 0 {
        if let Some(finished) = wait_finished(s, &id, wait).await? {
            return Ok(finished);
        }
    }
    if replayed {
        let status = crashes::summary(&s.db, &id)
            .await?
            .map_or_else(|| "pending".to_string(), |r| r.status);
        return Ok((
            StatusCode::OK,
            [(IDEMPOTENT_REPLAYED, "true")],
            Json(json!({ "id": id, "status": status })),
        )
            .into_response());
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "id": id, "status": "pending" })),
    )
        .into_response())
}

/// Waits up to `wait` seconds for crash `id` to finish (`?wait=`): its answer with the
/// report then, else `None`. Polled by the crash's summary: the report is read once.
async fn wait_finished(s: &AppState, id: &str, wait: u64) -> Result<Option<Response>, ApiError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait);
    loop {
        let finished = crashes::summary(&s.db, id)
            .await?
            .is_some_and(|r| r.status == "done" || r.status == "failed");
        if finished {
            if let Some(row) = crashes::get(&s.db, id).await? {
                let served = row.served_report(s.config.max_report_bytes);
                let answer = Json(full(&row, served.as_deref()));
                return Ok(Some((StatusCode::OK, answer).into_response()));
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The header a client names one upload with, so that its retries are recognised.
const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Set on the answer to a retry: the crash is the first upload's.
const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
/// Longest idempotency key, bytes.
const MAX_KEY_BYTES: usize = 255;

/// The request's `Idempotency-Key`: 1 to 255 visible ASCII characters.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    let key = v
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|k| !k.is_empty() && k.len() <= MAX_KEY_BYTES)
        .filter(|k| k.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| ApiError::BadRequest {
            code: "bad-idempotency-key",
            detail: format!(
                "Idempotency-Key must be 1 to {MAX_KEY_BYTES} visible ASCII characters"
            ),
        })?;
    Ok(Some(key.to_string()))
}

/// The id to answer a retry with: the first upload's, if it was the same dump.
fn replayed(first: &CrashSummary, sha256: &str) -> Result<String, ApiError> {
    if first.dump_sha256 != sha256 {
        return Err(ApiError::Unprocessable {
            code: "idempotency-key-reused",
            detail: format!(
                "this Idempotency-Key was used for crash {} with a different dump",
                first.id
            ),
        });
    }
    Ok(first.id.clone())
}

async fn get_one(
    State(s): State<AppState>,
    Caller { who, .. }: Caller<Read>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let row = crash_or_404(&s, &id, who.filter()).await?;
    let served = row.served_report(s.config.max_report_bytes);
    match q.get("format").map(String::as_str) {
        None | Some("postmortem") => Ok(Json(full(&row, served.as_deref())).into_response()),
        // minidump-stackwalk's `--json` document, made from the stored report, for
        // pipelines that read that schema (Socorro's processor, crash-stats tooling)
        Some("stackwalk-json") => {
            let report: engine::report::Report = served
                .as_deref()
                .and_then(|r| serde_json::from_str(r).ok())
                .ok_or_else(|| {
                    ApiError::NotFound(format!(
                        "crash {id:?} has no report yet (status {})",
                        row.status
                    ))
                })?;
            Ok(Json(engine::report::stackwalk::document(&report)).into_response())
        }
        Some(other) => Err(ApiError::BadRequest {
            code: "bad-format",
            detail: format!("format must be postmortem or stackwalk-json, not {other:?}"),
        }),
    }
}

/// The crash `id` of `project` (none: any), or a 404 that names it: the same 404 for
/// another project's crash as for a missing one.
pub(crate) async fn crash_or_404(
    s: &AppState,
    id: &str,
    project: Option<&str>,
) -> Result<CrashRow, ApiError> {
    crashes::get_in(&s.db, id, project)
        .await?
        .ok_or_else(|| not_found(id))
}

/// The answer for a crash of the caller's whose dump was removed for `reason`.
pub(crate) fn dump_gone(id: &str, reason: &str) -> ApiError {
    ApiError::DumpGone {
        detail: format!(
            "crash {id:?}: {}",
            worker::store::dump_gone::explain(reason)
        ),
        reason: reason.to_string(),
    }
}

/// The answer for a crash that is not there (or not the caller's).
pub(crate) fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no crash with id {id:?}"))
}

async fn dump(
    State(s): State<AppState>,
    headers: HeaderMap,
    uri: axum::http::Uri,
    Path(id): Path<String>,
) -> Result<Response, DashError> {
    let who = dash_caller(&s, &headers, &uri)?;
    let row = crash_or_404(&s, &id, who.filter()).await?;
    if let Some(reason) = &row.dump_gone {
        return Err(dump_gone(&id, reason).into());
    }
    // Streamed from the store: six downloads of a 300 MB dump must not hold 1.8 GB.
    let blob = s.blobs.get_stream(&row.dump_sha256).await?;
    let ext = match row.dump_format.as_str() {
        "minidump" => "dmp",
        "apple-ips" => "ips",
        "apple-crash" => "crash",
        "android-tombstone" => "txt",
        "android-tombstone-proto" => "pb",
        "microdump" => "txt",
        _ => "core",
    };
    // The id is ours (hex), but it came through the URL: keep the header value plain.
    let safe: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{safe}.{ext}\""),
            ),
            (header::CONTENT_LENGTH, blob.size.to_string()),
        ],
        Body::from_stream(blob.pieces),
    )
        .into_response())
}

fn bad(detail: String) -> ApiError {
    ApiError::BadRequest {
        code: "bad-request",
        detail,
    }
}

fn parse_ms(q: &HashMap<String, String>, key: &str) -> Result<Option<i64>, ApiError> {
    q.get(key)
        .map(|v| {
            v.parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| bad(format!("{key} must be Unix milliseconds, not {v:?}")))
        })
        .transpose()
}

async fn list(
    State(s): State<AppState>,
    Caller { who, .. }: Caller<Read>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let limit = parse_limit(&q, 50)?;
    let status = q.get("status").cloned();
    if let Some(st) = &status {
        if !matches!(st.as_str(), "pending" | "processing" | "done" | "failed") {
            return Err(bad(format!(
                "status must be pending, processing, done or failed, not {st:?}"
            )));
        }
    }
    let after = match q.get("cursor") {
        None => None,
        Some(c) => {
            let (ms, id) = c
                .split_once('_')
                .ok_or_else(|| bad(format!("bad cursor {c:?}")))?;
            let ms = ms
                .parse::<i64>()
                .map_err(|_| bad(format!("bad cursor {c:?}")))?;
            Some((ms, id.to_string()))
        }
    };
    let query = ListQuery {
        project: who.project,
        signature: q.get("signature").cloned(),
        status,
        since: parse_ms(&q, "since")?,
        until: parse_ms(&q, "until")?,
        product: q.get("product").cloned(),
        version: q.get("version").cloned(),
        module: q.get("module").cloned(),
        function: q.get("function").cloned(),
        kind: q.get("kind").cloned(),
        after,
        limit: limit + 1,
    };
    let mut rows = crashes::list(&s.db, &query).await?;
    let next = if rows.len() > usize::try_from(limit).unwrap_or(usize::MAX) {
        rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        rows.last().map(|r| format!("{}_{}", r.received_at, r.id))
    } else {
        None
    };
    let items: Vec<Value> = rows.iter().map(summary).collect();
    Ok(Json(json!({ "crashes": items, "next_cursor": next })))
}
