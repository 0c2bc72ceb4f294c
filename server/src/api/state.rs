//! `AppState`: what every handler shares. Clone is cheap (handles and `Arc`s).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use worker::cache::TablesCache;
use worker::jobs::JobMetrics;
use worker::store::{Blobs, Db, Staging};

/// What a bearer token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Upload crashes.
    Ingest,
    /// Upload and read binaries.
    Symbols,
    /// Read crashes, their reports and dumps, and list them.
    Read,
    /// Everything: read, delete and reprocess crashes, and what the other scopes allow.
    Admin,
}

impl Scope {
    /// From `ingest`, `symbols`, `read`, `admin`.
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "ingest" => Some(Scope::Ingest),
            "symbols" => Some(Scope::Symbols),
            "read" => Some(Scope::Read),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }
    /// The scope's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Symbols => "symbols",
            Scope::Read => "read",
            Scope::Admin => "admin",
        }
    }
}

/// A configured bearer token (`SECRET:SCOPES[:PROJECT]`).
#[derive(Clone)]
pub struct Token {
    pub secret: String,
    pub scopes: Vec<Scope>,
    /// The project the token belongs to; none: a server-wide token (every project).
    pub project: Option<String>,
}

impl Token {
    /// The token's name in logs and the audit log: the first 12 hex digits of the
    /// SHA-256 of its secret (never the secret).
    pub fn label(&self) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(self.secret.as_bytes());
        digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("scopes", &self.scopes)
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

/// Server configuration fixed at start.
#[derive(Debug)]
pub struct Config {
    /// Empty: no authentication (loopback only).
    pub tokens: Vec<Token>,
    /// Projects a caller may name (`?project=`, `X-Postmortem-Project`): `default`, the
    /// projects of the tokens and quotas, and those the database holds at start.
    pub projects: Vec<String>,
    /// Largest body accepted on the wire (declared or read, chunked or not).
    pub max_body_bytes: u64,
    /// Largest body after decompression.
    pub max_decompressed_bytes: u64,
    /// Longest wait for the next piece of a request body.
    pub body_idle_timeout: Duration,
    /// Longest a request may take until its answer starts.
    pub request_timeout: Duration,
    /// Without tokens: the `Host` values accepted (lower case; see `api::origin`).
    pub allowed_hosts: Vec<String>,
    /// An upload of the same dump bytes within this long of a stored one is a retry of
    /// it (zero: never).
    pub dedup_window: Duration,
    /// How much of a crash upload's text fields is stored.
    pub field_limits: super::upload_fields::FieldLimits,
    /// The workers' report budget (`--max-report-bytes`): a report is served with its
    /// upload's fields added back within it (`worker::store::served_report`).
    pub max_report_bytes: usize,
    /// The rules the workers make signatures with, for the crash page's explanation.
    pub signature_rules: Arc<engine::report::signature::SignatureRules>,
    /// Bounds on a zipped dSYM upload (`--max-zip-*`; the bytes taken out are bounded by
    /// `max_decompressed_bytes`).
    pub zip_limits: engine::dsym_zip::ZipLimits,
    /// Source-link mappings (`--source-link`): the crash page links a frame's file to its
    /// repository with them.
    pub source_links: Vec<sources::source_link::Mapping>,
}

/// Counters of the API, read by `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    pub crash_uploads: AtomicU64,
    /// `crash_uploads` by project (issue 41).
    pub crash_uploads_by_project: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    pub binary_uploads: AtomicU64,
    pub rejected_uploads: AtomicU64,
}

impl Metrics {
    /// Counts a crash stored for `project`.
    pub fn crash_stored(&self, project: &str) {
        self.crash_uploads.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut by) = self.crash_uploads_by_project.lock() {
            *by.entry(project.to_string()).or_default() += 1;
        }
    }
}

/// A project's upload limits (`--quota PROJECT:CRASHES_PER_MINUTE:BYTES_PER_DAY`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    pub project: String,
    /// Crash uploads a minute (0: no limit).
    pub crashes_per_minute: u32,
    /// Dump bytes a UTC day (0: no limit).
    pub bytes_per_day: u64,
}

/// Shared by every handler.
#[derive(Debug, Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub db: Db,
    pub blobs: Blobs,
    /// Where uploads are streamed before they are checked and stored.
    pub staging: Staging,
    pub cache: TablesCache,
    pub metrics: Arc<Metrics>,
    pub job_metrics: Arc<JobMetrics>,
    /// Wakes this process's workers when a crash is queued.
    pub wake: Arc<Notify>,
    /// `POST /api/v1/reprocess` requests per token.
    pub reprocess_rate: Arc<super::rate::RateLimit>,
    /// Most crashes one reprocess request queues (0: no bound).
    pub reprocess_max_crashes: u64,
    /// Crashes requeued by one token's symbol uploads, per minute.
    pub requeue_rate: Arc<super::rate::RateLimit>,
    /// Uploaded files identified at once (each reads its file from disk; a `.sym` file
    /// is read to its end): the rest wait their turn.
    pub identify_slots: Arc<tokio::sync::Semaphore>,
    /// Per-project upload quotas and their counts (`api::quota`).
    pub quotas: Arc<super::quota::Quotas>,
    /// Per-project scrubbing of crash uploads and its counts (`api::scrub`).
    pub scrubbing: Arc<super::scrub::Scrubbing>,
    /// Resumable uploads in progress (`api::upload_sessions`).
    pub upload_sessions: Arc<super::upload_sessions::Sessions>,
}
