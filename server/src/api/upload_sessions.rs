//! Uploads of symbol files too large for one request, or over connections that drop:
//! `POST /api/v1/binaries/missing` (which of these files does the caller's project lack?) and the
//! upload sessions `POST /api/v1/upload-sessions` → `PUT …/{id}?offset=N` (chunks of the
//! compressed file, appended in order) → `POST …/{id}/finish`, used by `postmortem upload`.
//!
//! A session's bytes go straight into a staging file ([`worker::store::StagingWriter`]),
//! never into memory beyond one buffer; a chunk cut short keeps what arrived, and the
//! client resumes from the session's byte count (`GET …/{id}`, or the `Upload-Offset`
//! header of a refused chunk), so no byte is sent twice. On finish the file is
//! decompressed (at most its declared size), its size and sha256 checked against what
//! the client declared, and stored by the same path as `POST /api/v1/binaries`
//! (`binaries::store_files`): identification, first upload wins, requeued crashes. A
//! session declared as a build's source bundle is checked and stored as one instead
//! (`source_bundles::store`).
//!
//! A session stores its file in the project its creation named (issue 41); `missing`
//! answers what that project sees, so a file only another project holds is `missing` (its
//! bytes are sent again, and stored once). Source bundles are not kept per project yet:
//! sessions and queries of them take a server-wide token.
//!
//! Bounds: sessions per token and in all, a session's lifetime, its declared size, the
//! chunk size (under the body limit), the `missing` query's size. Sessions live in this
//! process's memory: a restarted server has none (the client starts the file again), and
//! servers behind one address need sticky routing for them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
use worker::store::staged::StagingWriter;
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

/// The open sessions of this process, and the bytes their chunks brought.
#[derive(Debug)]
pub struct Sessions {
    per_token: usize,
    max_open: usize,
    ttl: Duration,
    max_bytes: u64,
    open: Mutex<HashMap<String, Arc<Session>>>,
    /// Every byte read from chunk bodies since the start (what the wire brought).
    received: AtomicU64,
}

impl Sessions {
    /// An empty registry bounded as `args` say.
    pub fn new(args: &SessionArgs) -> Sessions {
        Sessions {
            per_token: args.upload_sessions_per_token.max(1),
            max_open: args.max_upload_sessions.max(1),
            ttl: Duration::from_secs(args.upload_session_ttl_secs.max(1)),
            max_bytes: args.max_upload_session_mb.saturating_mul(1 << 20),
            open: Mutex::new(HashMap::new()),
            received: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        // a panic while holding it left a map of whole entries: keep using it
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes expired sessions (their staged bytes go with them).
    fn reap(&self) {
        let now = Instant::now();
        self.lock().retain(|_, s| s.expires > now);
    }

    /// The open session `id` of `owner` (another token's session is not found).
    fn get(&self, id: &str, owner: &str) -> Result<Arc<Session>, SessionError> {
        self.reap();
        self.lock()
            .get(id)
            .filter(|s| s.owner == owner)
            .cloned()
            .ok_or_else(|| SessionError::NoSuchSession(id.to_string()))
    }

    fn remove(&self, id: &str) {
        self.lock().remove(id);
    }
}

/// One upload in progress.
#[derive(Debug)]
struct Session {
    id: String,
    /// Who created it: a digest of its token ("" without tokens).
    owner: String,
    /// The project its file is stored in.
    project: String,
    file_name: Option<String>,
    size: u64,
    sha256: String,
    encoding: Compression,
    compressed_size: u64,
    compressed_sha256: String,
    expires: Instant,
    expires_at_ms: i64,
    /// The build-id whose source bundle this is; `None` for a binary or debug file.
    source_bundle: Option<String>,
    /// The staged compressed bytes; `None` once finished or broken. A chunk holds it.
    writer: tokio::sync::Mutex<Option<StagingWriter>>,
    /// The staged byte count, readable while a chunk holds the writer.
    offset: AtomicU64,
    /// Bytes read from this session's chunk bodies.
    received: AtomicU64,
}

impl Session {
    fn to_json(&self, chunk_size: u64) -> Value {
        json!({
            "id": self.id, "file_name": self.file_name, "size": self.size,
            "sha256": self.sha256, "encoding": self.encoding.name(),
            "compressed_size": self.compressed_size,
            "compressed_sha256": self.compressed_sha256,
            "offset": self.offset.load(Ordering::Acquire),
            "received_bytes": self.received.load(Ordering::Acquire),
            "chunk_size": chunk_size, "expires_at": self.expires_at_ms,
            "source_bundle": self.source_bundle,
        })
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
/// of `source_bundles`, `present` (a bundle is stored for it: first upload wins) or
/// `missing`.
async fn missing(
    State(s): State<AppState>,
    caller: Caller<Symbols>,
    body: Body,
) -> Result<Json<Value>, SessionError> {
    let q: MissingQuery = json_body(body).await?;
    if !q.source_bundles.is_empty() {
        bundles_need_server_wide(&caller.who)?;
    }
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
    let stored = source_bundles::by_build_ids(&s.db, &refs).await?;
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

/// Source bundles are not kept per project yet: a project token may not send or ask
/// about them.
fn bundles_need_server_wide(who: &Who) -> Result<(), ApiError> {
    match who.server_wide {
        true => Ok(()),
        false => Err(ApiError::ServerWideOnly),
    }
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
    if req.source_bundle.is_some() {
        bundles_need_server_wide(&caller.who)?;
    }
    let sessions = &s.upload_sessions;
    check_hex("sha256", &req.sha256, 64)?;
    check_hex("compressed_sha256", &req.compressed_sha256, 64)?;
    let encoding = match req.encoding.as_str() {
        "gzip" => Compression::Gzip,
        "zstd" => Compression::Zstd,
        other => {
            return Err(SessionError::Bad(format!(
                "encoding must be gzip or zstd, not {other:?}"
            )))
        }
    };
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
    sessions.reap();
    let sha = req.sha256.to_ascii_lowercase();
    let csha = req.compressed_sha256.to_ascii_lowercase();
    let mut open = sessions.lock();
    if let Some(same) = open.values().find(|x| {
        x.owner == owner
            && x.project == project
            && x.sha256 == sha
            && x.compressed_sha256 == csha
            && x.file_name == req.file_name
            && x.source_bundle == source_bundle
    }) {
        let mut v = same.to_json(chunk_size(&s));
        v["resumed"] = Value::Bool(true);
        return Ok((StatusCode::OK, Json(v)));
    }
    let mine = open.values().filter(|x| x.owner == owner).count();
    if mine >= sessions.per_token || open.len() >= sessions.max_open {
        return Err(SessionError::TooMany(format!(
            "{mine} upload sessions are open for this token and {} in all (at most {} per token, \
             {} in all): finish or cancel one, or wait until they expire",
            open.len(),
            sessions.per_token,
            sessions.max_open
        )));
    }
    let session = Arc::new(Session {
        id: worker::store::crashes::new_id(),
        owner,
        project,
        file_name: req.file_name,
        size: req.size,
        sha256: sha,
        encoding,
        compressed_size: req.compressed_size,
        compressed_sha256: csha,
        expires: Instant::now() + sessions.ttl,
        expires_at_ms: worker::store::now_ms()
            .saturating_add(i64::try_from(sessions.ttl.as_millis()).unwrap_or(i64::MAX)),
        source_bundle,
        writer: tokio::sync::Mutex::new(Some(s.staging.create()?)),
        offset: AtomicU64::new(0),
        received: AtomicU64::new(0),
    });
    open.insert(session.id.clone(), session.clone());
    let mut v = session.to_json(chunk_size(&s));
    v["resumed"] = Value::Bool(false);
    Ok((StatusCode::CREATED, Json(v)))
}

/// `GET /api/v1/upload-sessions`: this token's open sessions, and the bytes chunk
/// requests brought this server since it started.
async fn list(
    State(s): State<AppState>,
    _caller: Caller<Symbols>,
    headers: HeaderMap,
) -> Result<Json<Value>, SessionError> {
    let owner = owner(&s, &headers)?;
    s.upload_sessions.reap();
    let cs = chunk_size(&s);
    let items: Vec<Value> = s
        .upload_sessions
        .lock()
        .values()
        .filter(|x| x.owner == owner)
        .map(|x| x.to_json(cs))
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
    let session = s.upload_sessions.get(&id, &owner)?;
    Ok(Json(session.to_json(chunk_size(&s))))
}

/// `DELETE /api/v1/upload-sessions/{id}`: drops the session and its staged bytes.
async fn cancel(
    State(s): State<AppState>,
    _caller: Caller<Symbols>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, SessionError> {
    let owner = owner(&s, &headers)?;
    let session = s.upload_sessions.get(&id, &owner)?;
    s.upload_sessions.remove(&session.id);
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /api/v1/upload-sessions/{id}?offset=N`: appends the body, which must start at
/// the session's byte count. What arrives before a connection drops is kept.
async fn chunk(
    State(s): State<AppState>,
    _caller: Caller<Symbols>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    body: Body,
) -> Result<Json<Value>, SessionError> {
    let owner = owner(&s, &headers)?;
    let session = s.upload_sessions.get(&id, &owner)?;
    let got = q
        .get("offset")
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| {
            SessionError::Bad("?offset=N (the chunk's first byte) is required".into())
        })?;
    let mut guard = session.writer.try_lock().map_err(|_| SessionError::Busy)?;
    let writer = guard
        .as_mut()
        .ok_or_else(|| SessionError::NoSuchSession(id.clone()))?;
    let expected = writer.size();
    if got != expected {
        return Err(SessionError::OffsetMismatch { expected, got });
    }
    let limit = chunk_size(&s);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared {
        check_room(n, limit, expected, session.compressed_size)?;
    }
    let written = append(&s, &session, writer, body, limit).await;
    if let Err(SessionError::Api(ApiError::Store(_))) = &written {
        // the staging file may hold part of a write: this session cannot go on
        *guard = None;
        s.upload_sessions.remove(&session.id);
    }
    written?;
    Ok(Json(session.to_json(limit)))
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

/// Streams `body` onto the session's staged bytes, at most `limit` bytes and never past
/// the declared size; a body cut short keeps what arrived.
async fn append(
    s: &AppState,
    session: &Session,
    writer: &mut StagingWriter,
    body: Body,
    limit: u64,
) -> Result<(), SessionError> {
    let start = writer.size();
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
        let this_chunk = writer.size() - start;
        check_room(
            this_chunk.saturating_add(n),
            limit,
            start,
            session.compressed_size,
        )?;
        s.upload_sessions.received.fetch_add(n, Ordering::AcqRel);
        session.received.fetch_add(n, Ordering::AcqRel);
        writer.write(&piece).await?;
        session.offset.store(writer.size(), Ordering::Release);
    }
    Ok(())
}

/// `POST /api/v1/upload-sessions/{id}/finish`: decompresses the staged bytes, checks them
/// against the declared size and sha256, and stores the file as `POST /api/v1/binaries`
/// does (its answer, with the session's byte counts).
async fn finish(
    State(s): State<AppState>,
    _caller: Caller<Symbols>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, SessionError> {
    let owner = owner(&s, &headers)?;
    let session = s.upload_sessions.get(&id, &owner)?;
    let mut guard = session.writer.try_lock().map_err(|_| SessionError::Busy)?;
    let have = guard.as_ref().map(StagingWriter::size).unwrap_or_default();
    if have != session.compressed_size {
        return Err(SessionError::Incomplete {
            have,
            size: session.compressed_size,
        });
    }
    let writer = guard
        .take()
        .ok_or_else(|| SessionError::NoSuchSession(id.clone()))?;
    // whatever happens next, the session is over (a mismatch is not fixed by resending)
    s.upload_sessions.remove(&session.id);
    let compressed = writer.finish().await?;
    if compressed.sha256() != session.compressed_sha256 {
        return Err(SessionError::Mismatch(format!(
            "the bytes received hash to {}, not the declared compressed_sha256 {}",
            compressed.sha256(),
            session.compressed_sha256
        )));
    }
    let staging = s.staging.clone();
    let (format, limit) = (session.encoding, session.size);
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
    if file.size() != session.size || file.sha256() != session.sha256 {
        return Err(SessionError::Mismatch(format!(
            "the file decompresses to {} bytes with sha256 {}, not the declared {} bytes with {}",
            file.size(),
            file.sha256(),
            session.size,
            session.sha256
        )));
    }
    let (status, Json(mut v)) = match &session.source_bundle {
        Some(build_id) => super::source_bundles::store(&s, &headers, build_id, file).await?,
        None => {
            let files = vec![(session.file_name.clone(), file)];
            super::binaries::store_files(&s, &headers, &session.project, files).await?
        }
    };
    v["session"] = session.to_json(chunk_size(&s));
    Ok((status, Json(v)).into_response())
}
