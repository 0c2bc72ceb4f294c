//! Uploads of symbol files too large for one request, or over connections that drop:
//! `POST /api/v1/binaries/missing` (which of these files does the server lack?) and the
//! upload sessions `POST /api/v1/upload-sessions` → `PUT …/{id}?offset=N` (chunks of the
//! compressed file, appended in order) → `POST …/{id}/finish`, used by `postmortem upload`.
//!
//! A chunk's bytes go straight into a staging file ([`worker::store::StagingWriter`]),
//! never into memory beyond one buffer, and then into a blob; a chunk cut short keeps
//! what arrived, and the client resumes from the session's byte count (`GET …/{id}`, or
//! the `Upload-Offset` header of a refused chunk), so no byte is sent twice. On finish the file is
//! decompressed (at most its declared size), its size and sha256 checked against what
//! the client declared, and stored by the same path as `POST /api/v1/binaries`
//! (`binaries::store_files`): identification, first upload wins, requeued crashes. A
//! session declared as a build's source bundle is checked and stored as one instead
//! (`source_bundles::store`).
//!
//! A session stores its file in the project its creation named (issue 41); `missing`
//! answers what that project sees, so a file only another project holds is `missing` (its
//! bytes are sent again, and stored once). Source bundles too: a bundle's session stores
//! it for its project, and `missing` answers the bundles the project sees (its own and
//! the shared ones).
//!
//! Sessions live in the store (`worker::store::upload_sessions`, migration 0028): a row
//! per session and a blob per chunk received, so a session survives a restart of the
//! server, and any server on the same database and blob store takes its next chunk.
//! Bounds: sessions per token and in all, a session's lifetime (an expired one is removed
//! with its chunks, here and by the sweep), its declared size, the chunk size (under the
//! body limit), the `missing` query's size.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use engine::dump::compressed::{Compression, DecompressError};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use worker::store::binaries::{self, BinaryRow};
use worker::store::source_bundles;
use worker::store::staged::{StagedBlob, StagingWriter};
use worker::store::upload_sessions::{self, AssembleError, SessionRow};
use worker::store::StoreError;

use super::auth::{Caller, Symbols, Who};
use super::binaries::check_build_id;
use super::problem::{problem, ApiError};
use super::state::AppState;

/// Most files one `missing` query may ask about.
pub const MAX_MISSING_FILES: usize = 5000;
/// Most bytes of a `missing` query or a session's creation request.
const MAX_QUERY_BYTES: usize = 4 << 20;
/// The largest chunk a session takes, whatever the body limit (which may lower it).
pub const MAX_CHUNK_BYTES: u64 = 8 << 20;
/// Room left under the body limit for a chunk (the limit counts every byte read).
const CHUNK_SLACK: u64 = 4 << 10;

/// The flags of `postmortem serve` that bound upload sessions.
#[derive(Debug, Clone, clap::Args)]
pub struct SessionArgs {
    /// Upload sessions (resumable chunked uploads, `postmortem upload`) one token may
    /// hold open at once; a further one is refused 429 `too-many-sessions`.
    #[arg(long, default_value_t = 4)]
    pub upload_sessions_per_token: usize,
    /// Upload sessions open at once on this server, all tokens together.
    #[arg(long, default_value_t = 64)]
    pub max_upload_sessions: usize,
    /// Seconds an upload session lives from its creation; an unfinished one is then
    /// removed with its staged bytes.
    #[arg(long, default_value_t = 3600)]
    pub upload_session_ttl_secs: u64,
    /// Largest file an upload session takes (decompressed, and compressed), MiB.
    #[arg(long, default_value_t = 8192)]
    pub max_upload_session_mb: u64,
}

/// The bounds of upload sessions, the sessions a request of this process is writing,
/// and the bytes chunks brought this process. The sessions themselves are in the store
/// (`worker::store::upload_sessions`).
#[derive(Debug)]
pub struct Sessions {
    per_token: usize,
    max_open: usize,
    ttl: Duration,
    max_bytes: u64,
    /// Sessions a chunk or finish request of this process holds.
    busy: Mutex<HashSet<String>>,
    /// Every byte read from chunk bodies since the start (what the wire brought).
    received: AtomicU64,
}

impl Sessions {
    /// Bounded as `args` say.
    pub fn new(args: &SessionArgs) -> Sessions {
        Sessions {
            per_token: args.upload_sessions_per_token.max(1),
            max_open: args.max_upload_sessions.max(1),
            ttl: Duration::from_secs(args.upload_session_ttl_secs.max(1)),
            max_bytes: args.max_upload_session_mb.saturating_mul(1 << 20),
            busy: Mutex::new(HashSet::new()),
            received: AtomicU64::new(0),
        }
    }

    /// Holds session `id` for one request of this process; `Busy` while another holds it.
    fn hold(&self, id: &str) -> Result<Held<'_>, SessionError> {
        // a panic while holding it left a set of whole entries: keep using it
        let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        if !busy.insert(id.to_string()) {
            return Err(SessionError::Busy);
        }
        Ok(Held {
            sessions: self,
            id: id.to_string(),
        })
    }
}

/// A session held by one request; released when dropped.
struct Held<'a> {
    sessions: &'a Sessions,
    id: String,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut busy = self.sessions.busy.lock().unwrap_or_else(|p| p.into_inner());
        busy.remove(&self.id);
    }
}

/// The open session `id` of `owner` (another token's session is not found).
async fn session_of(s: &AppState, id: &str, owner: &str) -> Result<SessionRow, SessionError> {
    upload_sessions::get(&s.db, id)
        .await?
        .filter(|x| x.owner == owner)
        .ok_or_else(|| SessionError::NoSuchSession(id.to_string()))
}

/// A stored count as bytes (never negative).
fn bytes(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The session as the API answers it.
fn to_json(x: &SessionRow, chunk_size: u64) -> Value {
    json!({
        "id": x.id, "file_name": x.file_name, "size": bytes(x.size),
        "sha256": x.sha256, "encoding": x.encoding,
        "compressed_size": bytes(x.compressed_size),
        "compressed_sha256": x.compressed_sha256,
        "offset": bytes(x.staged),
        "received_bytes": bytes(x.received),
        "chunk_size": chunk_size, "expires_at": x.expires_at,
        "source_bundle": x.source_bundle,
    })
}

fn encoding_of(name: &str) -> Result<Compression, SessionError> {
    match name {
        "gzip" => Ok(Compression::Gzip),
        "zstd" => Ok(Compression::Zstd),
        other => Err(SessionError::Bad(format!(
            "encoding must be gzip or zstd, not {other:?}"
        ))),
    }
}

/// Why a session request was refused: each with its own problem `code`.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no open upload session {0:?} for this token (finished, expired, or never created)")]
    NoSuchSession(String),
    #[error(
        "the chunk starts at {got}, but the session holds {expected} bytes: send from {expected}"
    )]
    OffsetMismatch { expected: u64, got: u64 },
    #[error("another request is writing to this session; retry once it ends")]
    Busy,
    #[error("a chunk is at most {limit} bytes")]
    ChunkTooLarge { limit: u64 },
    #[error("the chunk goes past the session's declared compressed size of {size} bytes")]
    PastEnd { size: u64 },
    #[error("{0}")]
    TooMany(String),
    #[error("the session holds {have} of its {size} bytes: send the rest before finishing")]
    Incomplete { have: u64, size: u64 },
    #[error("{0}")]
    Mismatch(String),
    #[error("{0}")]
    Bad(String),
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl From<StoreError> for SessionError {
    fn from(e: StoreError) -> Self {
        SessionError::Api(ApiError::Store(e))
    }
}

impl SessionError {
    /// The status, problem code and byte count to send from (if any) of a refusal.
    fn parts(&self) -> (StatusCode, &'static str, Option<u64>) {
        match self {
            SessionError::NoSuchSession(_) => (StatusCode::NOT_FOUND, "no-such-session", None),
            SessionError::OffsetMismatch { expected, .. } => {
                (StatusCode::CONFLICT, "offset-mismatch", Some(*expected))
            }
            SessionError::Busy => (StatusCode::CONFLICT, "session-busy", None),
            SessionError::ChunkTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, "chunk-too-large", None)
            }
            SessionError::PastEnd { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "past-end", None),
            SessionError::TooMany(_) => (StatusCode::TOO_MANY_REQUESTS, "too-many-sessions", None),
            SessionError::Incomplete { have, .. } => {
                (StatusCode::CONFLICT, "session-incomplete", Some(*have))
            }
            SessionError::Mismatch(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "content-mismatch", None)
            }
            SessionError::Bad(_) => (StatusCode::BAD_REQUEST, "bad-session-request", None),
            SessionError::Api(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal", None),
        }
    }
}

impl IntoResponse for SessionError {
    fn into_response(self) -> Response {
        if let SessionError::Api(e) = self {
            return e.into_response();
        }
        let (status, code, offset) = self.parts();
        let mut res = problem(status, code, &self.to_string());
        if let Some(n) = offset {
            res.headers_mut()
                .insert("upload-offset", HeaderValue::from(n));
        }
        res
    }
}

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/binaries/missing", post(missing))
        .route("/api/v1/upload-sessions", get(list).post(create))
        .route(
            "/api/v1/upload-sessions/{id}",
            get(status).put(chunk).delete(cancel),
        )
        .route("/api/v1/upload-sessions/{id}/finish", post(finish))
}

/// Who is asking: a digest of the bearer token, after the `Caller<Symbols>` extractor
/// let it through.
fn owner(s: &AppState, headers: &HeaderMap) -> Result<String, ApiError> {
    if s.config.tokens.is_empty() {
        return Ok(String::new());
    }
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once([' ', '\t']))
        .map(|(_, t)| t.trim())
        .unwrap_or_default();
    Ok(hex::encode(Sha256::digest(token.as_bytes())))
}

/// The largest chunk this server takes.
fn chunk_size(s: &AppState) -> u64 {
    MAX_CHUNK_BYTES.min(s.config.max_body_bytes.saturating_sub(CHUNK_SLACK).max(1))
}

/// A JSON request body of at most [`MAX_QUERY_BYTES`].
async fn json_body<T: serde::de::DeserializeOwned>(body: Body) -> Result<T, SessionError> {
    let bytes = axum::body::to_bytes(body, MAX_QUERY_BYTES)
        .await
        .map_err(|e| {
            SessionError::Bad(format!(
                "reading the request (at most {MAX_QUERY_BYTES} bytes): {e}"
            ))
        })?;
    serde_json::from_slice(&bytes).map_err(|e| SessionError::Bad(format!("bad JSON: {e}")))
}

/// One file of a `missing` query: the identity `postmortem upload` read from it with the
/// engine's identification (`engine::identify`), as the server would.
#[derive(Debug, Deserialize)]
struct Described {
    sha256: String,
    format: String,
    kind: String,
    build_id: Option<String>,
    debug_id: Option<String>,
    code_id: Option<String>,
    code_file: Option<String>,
    file_name: Option<String>,
    #[serde(default)]
    sections: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct MissingQuery {
    #[serde(default)]
    files: Vec<Described>,
    /// Build-ids whose source bundle the client could send.
    #[serde(default)]
    source_bundles: Vec<String>,
}

fn check_hex(what: &str, v: &str, max: usize) -> Result<(), SessionError> {
    let ok = (1..=max).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_hexdigit());
    if ok {
        Ok(())
    } else {
        Err(SessionError::Bad(format!(
            "{what} must be 1 to {max} hex digits, not {v:?}"
        )))
    }
}

fn check_text(what: &str, v: &str) -> Result<(), SessionError> {
    if v.len() > 256 || v.chars().any(char::is_control) {
        return Err(SessionError::Bad(format!(
            "{what} is over 256 bytes or holds control characters"
        )));
    }
    Ok(())
}

/// The row the server would store for `d` (as `binaries::checked_file` builds it), for
/// the first-upload-wins rule.
fn row_of(d: &Described) -> Result<BinaryRow, SessionError> {
    check_hex("sha256", &d.sha256, 64)?;
    if d.sha256.len() != 64 {
        return Err(SessionError::Bad("sha256 must be 64 hex digits".into()));
    }
    for (what, v, max) in [
        ("build_id", &d.build_id, 128),
        ("debug_id", &d.debug_id, 64),
        ("code_id", &d.code_id, 64),
    ] {
        if let Some(v) = v {
            check_hex(what, v, max)?;
        }
    }
    for (what, v) in [
        ("format", Some(&d.format)),
        ("kind", Some(&d.kind)),
        ("code_file", d.code_file.as_ref()),
        ("file_name", d.file_name.as_ref()),
    ] {
        if let Some(v) = v {
            check_text(what, v)?;
        }
    }
    if d.sections.len() > 64 {
        return Err(SessionError::Bad("at most 64 sections".into()));
    }
    for sec in &d.sections {
        check_text("section", sec)?;
    }
    Ok(BinaryRow {
        sha256: d.sha256.to_ascii_lowercase(),
        build_id: d
            .build_id
            .as_deref()
            .unwrap_or_default()
            .to_ascii_lowercase(),
        arch: None,
        kind: d.kind.clone(),
        file_name: d.file_name.clone(),
        size: 0,
        sections: d.sections.join(","),
        uploaded_at: 0,
        debug_id: d.debug_id.as_deref().map(str::to_ascii_uppercase),
        format: d.format.clone(),
        source: None,
        code_id: d.code_id.as_deref().map(str::to_ascii_uppercase),
        code_file: d.code_file.clone(),
    })
}

/// `POST /api/v1/binaries/missing`: for each described file, `present` (the server holds
/// these bytes, under this name for a Windows image), `conflict` (another file holds its
/// identity in its role: an upload would be refused 409) or `missing`; for each build-id
/// of `source_bundles`, `present` (the caller's project holds a bundle of it, or one is
/// shared: first upload wins within a project) or `missing`.
async fn missing(
    State(s): State<AppState>,
    caller: Caller<Symbols>,
    body: Body,
) -> Result<Json<Value>, SessionError> {
    let q: MissingQuery = json_body(body).await?;
    if q.files.len() > MAX_MISSING_FILES || q.source_bundles.len() > MAX_MISSING_FILES {
        return Err(SessionError::Bad(format!(
            "at most {MAX_MISSING_FILES} files and {MAX_MISSING_FILES} source bundles per \
             query, not {} and {}",
            q.files.len(),
            q.source_bundles.len()
        )));
    }
    let bundle_ids = q
        .source_bundles
        .iter()
        .map(|id| check_build_id(id))
        .collect::<Result<Vec<_>, _>>()?;
    let rows = q.files.iter().map(row_of).collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::with_capacity(rows.len());
    let (mut lacking, mut present) = (0usize, 0usize);
    for row in &rows {
        let answer = state_of(&s, &caller.who, row).await?;
        match answer["state"].as_str() {
            Some("missing") => lacking += 1,
            Some("present") => present += 1,
            _ => {}
        }
        out.push(answer);
    }
    let refs: Vec<&str> = bundle_ids.iter().map(String::as_str).collect();
    let stored = source_bundles::by_build_ids(&s.db, caller.who.sees(), &refs).await?;
    let bundles: Vec<Value> = bundle_ids
        .iter()
        .map(|id| {
            let state = if stored.contains_key(id) {
                "present"
            } else {
                "missing"
            };
            json!({ "build_id": id, "state": state })
        })
        .collect();
    Ok(Json(json!({
        "files": out, "missing": lacking, "present": present, "source_bundles": bundles,
    })))
}

/// What the caller's project has of the file `row` describes (another project's file,
/// even of these very bytes, is `missing` to it).
async fn state_of(s: &AppState, who: &Who, row: &BinaryRow) -> Result<Value, ApiError> {
    if binaries::is_visible(&s.db, who.sees(), &row.sha256).await? {
        // an image is found by each name it was sent under: a new name is worth sending
        let named = match (&row.file_name, row.format == "pe") {
            (Some(name), true) => binaries::names_of(&s.db, &row.sha256)
                .await?
                .iter()
                .any(|n| n.eq_ignore_ascii_case(name)),
            _ => true,
        };
        if named {
            return Ok(json!({ "state": "present" }));
        }
    }
    if let Some(holder) = binaries::holder_of(&s.db, row, who.upload_project()).await? {
        return Ok(json!({
            "state": "conflict", "role": row.role(), "existing_sha256": holder.sha256,
        }));
    }
    Ok(json!({ "state": "missing" }))
}

#[derive(Debug, Deserialize)]
struct CreateRequest {
    file_name: Option<String>,
    size: u64,
    sha256: String,
    encoding: String,
    compressed_size: u64,
    compressed_sha256: String,
    /// The build-id, when the file is that build's source bundle (a zip of
    /// `engine::source_bundle`'s layout), stored as such on finish.
    #[serde(default)]
    source_bundle: Option<String>,
}

/// `POST /api/v1/upload-sessions`: opens a session (201), or answers the open session of
/// this token for the same bytes (200, `resumed`), with the offset to send from.
async fn create(
    State(s): State<AppState>,
    caller: Caller<Symbols>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Value>), SessionError> {
    let owner = owner(&s, &headers)?;
    let project = caller.who.upload_project().to_string();
    let req: CreateRequest = json_body(body).await?;
    let sessions = &s.upload_sessions;
    check_hex("sha256", &req.sha256, 64)?;
    check_hex("compressed_sha256", &req.compressed_sha256, 64)?;
    let encoding = encoding_of(&req.encoding)?;
    if let Some(name) = &req.file_name {
        super::file_name::check(name)?;
    }
    let source_bundle = req
        .source_bundle
        .as_deref()
        .map(check_build_id)
        .transpose()?;
    let limit = sessions.max_bytes;
    if req.size > limit || req.compressed_size > limit {
        return Err(ApiError::DecompressedTooLarge { limit }.into());
    }
    if req.size == 0 || req.compressed_size == 0 {
        return Err(SessionError::Bad(
            "an empty file has nothing to upload".into(),
        ));
    }
    upload_sessions::expire(&s.db, &s.blobs).await?;
    let sha = req.sha256.to_ascii_lowercase();
    let csha = req.compressed_sha256.to_ascii_lowercase();
    let open = upload_sessions::of_owner(&s.db, &owner).await?;
    if let Some(same) = open.iter().find(|x| {
        x.project == project
            && x.sha256 == sha
            && x.compressed_sha256 == csha
            && x.file_name == req.file_name
            && x.source_bundle == source_bundle
    }) {
        let mut v = to_json(same, chunk_size(&s));
        v["resumed"] = Value::Bool(true);
        return Ok((StatusCode::OK, Json(v)));
    }
    let all = usize::try_from(upload_sessions::count_open(&s.db).await?).unwrap_or(usize::MAX);
    let mine = open.len();
    if mine >= sessions.per_token || all >= sessions.max_open {
        return Err(SessionError::TooMany(format!(
            "{mine} upload sessions are open for this token and {all} in all (at most {} per \
             token, {} in all): finish or cancel one, or wait until they expire",
            sessions.per_token, sessions.max_open
        )));
    }
    let now = worker::store::now_ms();
    let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let row = SessionRow {
        id: worker::store::crashes::new_id(),
        owner,
        project,
        file_name: req.file_name,
        size: as_i64(req.size),
        sha256: sha,
        encoding: encoding.name().to_string(),
        compressed_size: as_i64(req.compressed_size),
        compressed_sha256: csha,
        source_bundle,
        staged: 0,
        received: 0,
        created_at: now,
        expires_at: now.saturating_add(i64::try_from(sessions.ttl.as_millis()).unwrap_or(i64::MAX)),
    };
    upload_sessions::insert(&s.db, &row).await?;
    let mut v = to_json(&row, chunk_size(&s));
    v["resumed"] = Value::Bool(false);
    Ok((StatusCode::CREATED, Json(v)))
}

/// `GET /api/v1/upload-sessions`: this token's open sessions, and the bytes chunk
/// requests brought this server process since it started.
async fn list(
    State(s): State<AppState>,
    _caller: Caller<Symbols>,
    headers: HeaderMap,
) -> Result<Json<Value>, SessionError> {
    let owner = owner(&s, &headers)?;
    let cs = chunk_size(&s);
    let items: Vec<Value> = upload_sessions::of_owner(&s.db, &owner)
        .await?
        .iter()
        .map(|x| to_json(x, cs))
        .collect();
    Ok(Json(json!({
        "sessions": items,
        "received_bytes": s.upload_sessions.received.load(Ordering::Acquire),
    })))
}

/// `GET /api/v1/upload-sessions/{id}`: the session, with the offset to send from.
async fn status(
    State(s): State<AppState>,
    _caller: Caller<Symbols>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, SessionError> {
    let owner = owner(&s, &headers)?;
    let session = session_of(&s, &id, &owner).await?;
    Ok(Json(to_json(&session, chunk_size(&s))))
}

/// `DELETE /api/v1/upload-sessions/{id}`: drops the session and its chunks.
async fn cancel(
    State(s): State<AppState>,
    _caller: Caller<Symbols>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, SessionError> {
    let owner = owner(&s, &headers)?;
    let session = session_of(&s, &id, &owner).await?;
    let _held = s.upload_sessions.hold(&session.id)?;
    upload_sessions::discard(&s.db, &s.blobs, &session.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /api/v1/upload-sessions/{id}?offset=N`: appends the body, which must start at
/// the session's byte count. What arrives before a connection drops is kept: the bytes
/// of the request are a chunk blob, recorded in the store with the session's new count.
async fn chunk(
    State(s): State<AppState>,
    _caller: Caller<Symbols>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    body: Body,
) -> Result<Json<Value>, SessionError> {
    let owner = owner(&s, &headers)?;
    let got = q
        .get("offset")
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| {
            SessionError::Bad("?offset=N (the chunk's first byte) is required".into())
        })?;
    session_of(&s, &id, &owner).await?;
    let _held = s.upload_sessions.hold(&id)?;
    // read again once held: a request that just ended may have moved it on
    let session = session_of(&s, &id, &owner).await?;
    let expected = bytes(session.staged);
    if got != expected {
        return Err(SessionError::OffsetMismatch { expected, got });
    }
    let limit = chunk_size(&s);
    let size = bytes(session.compressed_size);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared {
        check_room(n, limit, expected, size)?;
    }
    let mut writer = s.staging.create()?;
    let mut received = 0u64;
    let written = append(
        &s,
        &mut writer,
        &mut received,
        body,
        (limit, expected, size),
    )
    .await;
    if let Err(SessionError::Api(ApiError::Store(e))) = written {
        // the staging file may hold part of a write: nothing of this chunk is kept
        return Err(SessionError::Api(ApiError::Store(e)));
    }
    if writer.size() > 0 {
        let blob = writer.finish().await?;
        let sha = s.blobs.put_staged(&blob).await?;
        let n = i64::try_from(blob.size()).unwrap_or(i64::MAX);
        let r = i64::try_from(received).unwrap_or(i64::MAX);
        if !upload_sessions::add_chunk(&s.db, &id, session.staged, n, &sha, r).await? {
            // another server wrote this session meanwhile (the blob is swept if unnamed)
            let now = session_of(&s, &id, &owner).await?;
            let expected = bytes(now.staged);
            return Err(SessionError::OffsetMismatch { expected, got });
        }
    }
    // a chunk cut short is refused once what arrived of it is kept
    written?;
    Ok(Json(to_json(&session_of(&s, &id, &owner).await?, limit)))
}

fn check_room(n: u64, limit: u64, offset: u64, size: u64) -> Result<(), SessionError> {
    if n > limit {
        return Err(SessionError::ChunkTooLarge { limit });
    }
    if offset.saturating_add(n) > size {
        return Err(SessionError::PastEnd { size });
    }
    Ok(())
}

/// Streams `body` into `writer`, at most `limit` bytes and never past the declared
/// `size` from `start` (`bounds`); counts what the body brought in `received`. A body
/// cut short keeps what arrived (the error says why it ended).
async fn append(
    s: &AppState,
    writer: &mut StagingWriter,
    received: &mut u64,
    body: Body,
    (limit, start, size): (u64, u64, u64),
) -> Result<(), SessionError> {
    let mut stream = body.into_data_stream();
    while let Some(piece) = stream.next().await {
        let piece = match piece {
            Ok(p) => p,
            // the connection dropped (or the limits layer cut it): keep what arrived
            Err(e) => {
                return Err(ApiError::BadRequest {
                    code: "bad-encoding",
                    detail: format!("the chunk was cut short: {e}"),
                }
                .into())
            }
        };
        let n = piece.len() as u64;
        check_room(writer.size().saturating_add(n), limit, start, size)?;
        s.upload_sessions.received.fetch_add(n, Ordering::AcqRel);
        *received = received.saturating_add(n);
        writer.write(&piece).await?;
    }
    Ok(())
}

/// `POST /api/v1/upload-sessions/{id}/finish`: puts the session's chunks together,
/// decompresses them, checks them against the declared size and sha256, and stores the
/// file as `POST /api/v1/binaries` does (its answer, with the session's byte counts).
async fn finish(
    State(s): State<AppState>,
    _caller: Caller<Symbols>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, SessionError> {
    let owner = owner(&s, &headers)?;
    session_of(&s, &id, &owner).await?;
    let _held = s.upload_sessions.hold(&id)?;
    let session = session_of(&s, &id, &owner).await?;
    if session.staged != session.compressed_size {
        return Err(SessionError::Incomplete {
            have: bytes(session.staged),
            size: bytes(session.compressed_size),
        });
    }
    let assembled = upload_sessions::assemble(&s.db, &s.blobs, &s.staging, &session).await;
    // whatever happens next, the session is over (a mismatch is not fixed by resending)
    upload_sessions::discard(&s.db, &s.blobs, &session.id).await?;
    let compressed = match assembled {
        Ok(c) => c,
        Err(AssembleError::Gap { size, at }) => {
            return Err(SessionError::Mismatch(format!(
                "the session's chunks do not cover bytes 0..{size}: {at}"
            )))
        }
        Err(AssembleError::Store(e)) => return Err(e.into()),
    };
    let session_json = to_json(&session, chunk_size(&s));
    if compressed.sha256() != session.compressed_sha256 {
        return Err(SessionError::Mismatch(format!(
            "the bytes received hash to {}, not the declared compressed_sha256 {}",
            compressed.sha256(),
            session.compressed_sha256
        )));
    }
    let file = decompress(&s, compressed, &session).await?;
    let (status, Json(mut v)) = match &session.source_bundle {
        Some(build_id) => {
            super::source_bundles::store(&s, &headers, &session.project, build_id, file).await?
        }
        None => {
            let files = vec![(session.file_name.clone(), file)];
            super::binaries::store_files(&s, &headers, &session.project, files).await?
        }
    };
    v["session"] = session_json;
    Ok((status, Json(v)).into_response())
}

/// The session's file: `compressed` decompressed (at most its declared size), its size
/// and sha256 checked against the declared ones.
async fn decompress(
    s: &AppState,
    compressed: StagedBlob,
    session: &SessionRow,
) -> Result<StagedBlob, SessionError> {
    let staging = s.staging.clone();
    let (format, limit) = (encoding_of(&session.encoding)?, bytes(session.size));
    let file =
        tokio::task::spawn_blocking(move || staging.decompressed(&compressed, format, limit))
            .await
            .map_err(|e| SessionError::Bad(format!("decompressing: {e}")))??;
    let file = file.map_err(|e| match e {
        DecompressError::TooLarge { .. } => SessionError::Mismatch(format!(
            "the file decompresses to more than its declared size of {limit} bytes"
        )),
        e => SessionError::Mismatch(e.to_string()),
    })?;
    if file.size() != limit || file.sha256() != session.sha256 {
        return Err(SessionError::Mismatch(format!(
            "the file decompresses to {} bytes with sha256 {}, not the declared {} bytes with {}",
            file.size(),
            file.sha256(),
            limit,
            session.sha256
        )));
    }
    Ok(file)
}
