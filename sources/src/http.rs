//! One HTTP source (a debuginfod server, a Breakpad symbol store): `GET BASE/PATH`, the
//! body streamed to a file beside the cache (never held in memory), then checked to be
//! the file asked for ([`crate::check`]). "Not found" (404) is an answer; everything else
//! that is not the file — no connection, no answer in time, a 5xx, a body cut short or
//! over the size cap, a file of another build — is an error, told apart so a miss can be
//! remembered and an outage cannot. An S3 bucket is such a source too: each object is
//! asked at a presigned URL ([`crate::s3`]), and its errors carry S3's reason.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use std::fs::File;

use tempfile::NamedTempFile;

use crate::cabinet::CabError;
use crate::check::Refused;
use crate::config::Limits;
use crate::redact::{redact_in, redact_url};
use crate::redirect::{self, Hop, PrivateTarget, PublicOnly, Refusal, MAX_REDIRECTS};
use crate::s3::{self, BucketAnswer, S3Error};

/// Why a server gave no usable file.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The whole fetch took longer than the source's cap (`--fetch-max-secs`).
    #[error("the fetch took longer than its {}-second cap", .0.as_secs())]
    TooSlow(Duration),
    /// The job asking ran out of time ([`Until`]) before the file arrived.
    #[error("the crash's time limit ran out before the file arrived")]
    OutOfTime,
    #[error("HTTP status {0}")]
    Status(u16),
    /// A status that is not "not found" after a redirect: the target refused (a 401
    /// from a CDN is not the source saying it lacks the file).
    #[error("HTTP status {status} from {to} (redirected)")]
    RedirectedStatus { status: u16, to: String },
    #[error("{0}")]
    Redirect(#[from] Refusal),
    #[error("the body was cut short: {0}")]
    Truncated(String),
    #[error("the file is larger than the {limit}-byte cap")]
    TooLarge { limit: u64 },
    #[error("refused: {0}")]
    Refused(#[from] Refused),
    /// A symbol server's compressed file (at `url`) that gave no file.
    #[error("{url}: {error}")]
    Cab { url: String, error: CabError },
    #[error("cannot keep the file: {0}")]
    Disk(io::Error),
    #[error("{0}")]
    Transport(String),
    /// What an S3 bucket answered instead of the object: status, S3's code and message.
    #[error("{0}")]
    Bucket(String),
    #[error(transparent)]
    Key(#[from] S3Error),
}

/// When the one asking must have its answer (a job's deadline): each fetch ends by
/// then, whatever the source's own limits. `None`: only those limits.
pub type Until = Option<Instant>;

/// One HTTP source.
pub struct Server {
    /// The base URL as configured: used for requests only, never shown.
    base: String,
    /// The base URL's display form ([`crate::redact`]): what reports, metrics, logs and
    /// errors name the source by.
    name: String,
    /// Set for an S3 bucket: objects are asked at presigned URLs.
    bucket: Option<s3::Bucket>,
    /// Made at the first fetch: a walk whose files are all on hand or cached pays nothing
    /// for HTTP and TLS set-up. The second connects only to public addresses: for
    /// redirects to other hosts ([`crate::redirect`]).
    agents: OnceLock<(ureq::Agent, ureq::Agent)>,
    timeout: Duration,
    max_fetch: Duration,
    max_bytes: u64,
    miss_ttl: Duration,
}

/// How long one fetch may still take, and which limit that is.
#[derive(Debug, Clone, Copy)]
struct Budget {
    /// When it ends; `None` when the cap lies beyond the clock's range (and no deadline).
    ends: Option<Instant>,
    /// Whether the asker's deadline, not the source's cap, ends it.
    by_deadline: bool,
    cap: Duration,
}

impl Budget {
    fn new(started: Instant, cap: Duration, until: Until) -> Budget {
        let capped = started.checked_add(cap);
        let by_deadline = match (capped, until) {
            (Some(c), Some(u)) => u < c,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        Budget {
            ends: if by_deadline { until } else { capped },
            by_deadline,
            cap,
        }
    }

    /// What is left, or the error saying which limit ran out.
    fn left(&self) -> Result<Duration, FetchError> {
        let Some(ends) = self.ends else {
            return Ok(self.cap);
        };
        let left = ends.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(self.spent())
        } else {
            Ok(left)
        }
    }

    fn spent(&self) -> FetchError {
        if self.by_deadline {
            FetchError::OutOfTime
        } else {
            FetchError::TooSlow(self.cap)
        }
    }
}

impl Server {
    /// The server at `base` (no trailing `/`), its fetches within `limits` (its own:
    /// each server has its timeouts and size cap).
    pub fn new(base: &str, limits: &Limits) -> Server {
        Server {
            base: base.to_string(),
            name: redact_url(base),
            bucket: None,
            agents: OnceLock::new(),
            timeout: limits.timeout,
            max_fetch: limits.max_fetch,
            max_bytes: limits.max_bytes,
            miss_ttl: limits.miss_ttl,
        }
    }

    /// The S3 bucket `bucket`, its fetches within `limits`; named by its `s3://` URL.
    pub fn bucket(bucket: s3::Bucket, limits: &Limits) -> Server {
        Server {
            base: bucket.url().to_string(),
            name: redact_url(bucket.url()),
            bucket: Some(bucket),
            ..Server::new("", limits)
        }
    }

    /// The agent for the source and its own origin, and the one for other hosts.
    fn agents(&self) -> &(ureq::Agent, ureq::Agent) {
        self.agents.get_or_init(|| {
            let config = || {
                ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    // redirects are followed here, each one checked
                    .max_redirects(0)
                    .timeout_connect(Some(self.timeout))
                    .timeout_recv_response(Some(self.timeout))
                    .timeout_per_read(Some(self.timeout))
                    .timeout_global(Some(self.max_fetch))
                    .user_agent(concat!("postmortem/", env!("CARGO_PKG_VERSION")))
                    .build()
            };
            let public = ureq::Agent::with_parts(
                config(),
                ureq::unversioned::transport::DefaultConnector::new(),
                PublicOnly::new(),
            );
            (config().into(), public)
        })
    }

    /// The server's base URL (a bucket's `s3://` URL) in its display form: userinfo and
    /// query values hidden ([`crate::redact`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How long this server's "not found" is believed.
    pub fn miss_ttl(&self) -> Duration {
        self.miss_ttl
    }

    /// The largest file fetched (or extracted from a fetched archive), in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The URL of `path` below the base: before the base's query, if it has one
    /// (`https://h/s?token=T` → `https://h/s/PATH?token=T`).
    fn url_of(&self, path: &str) -> String {
        let base = self
            .base
            .split_once('#')
            .map_or(self.base.as_str(), |(b, _)| b);
        match base.split_once('?') {
            Some((prefix, query)) => format!("{}/{path}?{query}", prefix.trim_end_matches('/')),
            None => format!("{base}/{path}"),
        }
    }

    /// The URL of `path` as it may be shown ([`crate::redact`]).
    pub fn display_url(&self, path: &str) -> String {
        redact_url(&self.url_of(path))
    }

    /// The file at `path` (below the base URL, already escaped), at most `cap` bytes (and
    /// this server's cap: a source file's is far below the debug files' the server's is
    /// made for), written to a new temporary file in `dir` and accepted by `check`;
    /// `None` when the server does not have it. Ends by `until` at the latest.
    pub fn fetch(
        &self,
        path: &str,
        dir: &Path,
        check: &dyn Fn(&File) -> Result<(), Refused>,
        until: Until,
        cap: u64,
    ) -> Result<Option<NamedTempFile>, FetchError> {
        let url = match &self.bucket {
            Some(bucket) => bucket.get_url(path)?,
            None => self.url_of(path),
        };
        let Some(out) = self.download_within(&url, dir, until, cap.min(self.max_bytes))? else {
            return Ok(None);
        };
        check(out.as_file())?;
        Ok(Some(out))
    }

    /// The file at `path` as [`Server::fetch`] gives it, unchecked: for a file that is
    /// not the one asked for but holds it (a symbol server's compressed `NAME.pd_`).
    pub fn download(
        &self,
        path: &str,
        dir: &Path,
        until: Until,
    ) -> Result<Option<NamedTempFile>, FetchError> {
        let url = match &self.bucket {
            Some(bucket) => bucket.get_url(path)?,
            None => self.url_of(path),
        };
        self.download_url(&url, dir, until)
    }

    /// The file at the whole URL `url` (not below the base: a source-link mapping's,
    /// [`crate::source_link`]) as [`Server::download`] gives it, within this server's
    /// limits and redirect rules.
    pub fn download_url(
        &self,
        url: &str,
        dir: &Path,
        until: Until,
    ) -> Result<Option<NamedTempFile>, FetchError> {
        self.download_within(url, dir, until, self.max_bytes)
    }

    /// [`Server::download_url`], the body at most `max_bytes`.
    fn download_within(
        &self,
        url: &str,
        dir: &Path,
        until: Until,
        max_bytes: u64,
    ) -> Result<Option<NamedTempFile>, FetchError> {
        let url = url.to_string();
        let budget = Budget::new(Instant::now(), self.max_fetch, until);
        let (mut response, redirected) = self.get(url, &budget)?;
        match (response.status().as_u16(), &self.bucket, redirected) {
            (200, _, _) => {}
            (status, Some(_), _) => {
                // S3 says why in a small XML body: read a bounded piece of it
                let mut head = Vec::new();
                let body = response.body_mut().with_config().limit(s3::MAX_ERROR_BODY);
                let _ = body
                    .reader()
                    .take(s3::MAX_ERROR_BODY)
                    .read_to_end(&mut head);
                return match s3::answer(status, &head) {
                    BucketAnswer::Missing => Ok(None),
                    BucketAnswer::Error(why) => Err(FetchError::Bucket(why)),
                };
            }
            (404 | 410, None, _) => return Ok(None),
            (status, None, Some(to)) => return Err(FetchError::RedirectedStatus { status, to }),
            (s, None, None) => return Err(FetchError::Status(s)),
        }
        let body = response.body_mut();
        if body.content_length().is_some_and(|n| n > max_bytes) {
            return Err(FetchError::TooLarge { limit: max_bytes });
        }
        let mut out = NamedTempFile::new_in(dir).map_err(FetchError::Disk)?;
        let mut reader = body
            .with_config()
            .limit(max_bytes.saturating_add(1))
            .reader();
        self.copy(&mut reader, out.as_file_mut(), &budget, max_bytes)?;
        out.as_file_mut().flush().map_err(FetchError::Disk)?;
        Ok(Some(out))
    }

    /// The answer at `url`, redirects followed as [`crate::redirect`] allows, the whole
    /// within `budget`; and where it was redirected to (its display form), if it was.
    fn get(
        &self,
        mut url: String,
        budget: &Budget,
    ) -> Result<(ureq::http::Response<ureq::Body>, Option<String>), FetchError> {
        let (own, public) = self.agents();
        let mut agent = own;
        let mut redirected = None;
        for _ in 0..=MAX_REDIRECTS {
            let left = budget.left()?;
            let response = agent
                .get(&url)
                .config()
                .timeout_global(Some(left))
                .build()
                .call()
                .map_err(|e| self.classify(e, budget, &url))?;
            if !response.status().is_redirection() || response.status().as_u16() == 304 {
                return Ok((response, redirected));
            }
            let location = response
                .headers()
                .get(ureq::http::header::LOCATION)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            let (next, hop) = redirect::follow(&url, location.as_deref())?;
            if hop == Hop::OtherHost {
                agent = public;
            }
            redirected = Some(redact_url(&next));
            url = next;
        }
        Err(Refusal::TooMany.into())
    }

    /// Copies the body to `to`, at most `max_bytes`, within `budget` (also checked between
    /// reads, whatever the transport's timers say).
    fn copy(
        &self,
        from: &mut impl Read,
        to: &mut impl Write,
        budget: &Budget,
        max_bytes: u64,
    ) -> Result<(), FetchError> {
        let mut buf = vec![0u8; 1 << 16];
        let mut total: u64 = 0;
        loop {
            budget.left()?;
            let n = match from.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.classify(ureq::Error::from(e), budget, "")),
            };
            total = total.saturating_add(n as u64);
            if total > max_bytes {
                return Err(FetchError::TooLarge { limit: max_bytes });
            }
            to.write_all(buf.get(..n).unwrap_or_default())
                .map_err(FetchError::Disk)?;
        }
    }

    /// What a transport error means; `url` (the one asked) is hidden from its text.
    fn classify(&self, e: ureq::Error, budget: &Budget, url: &str) -> FetchError {
        match e {
            ureq::Error::Timeout(ureq::Timeout::Global) => budget.spent(),
            ureq::Error::Timeout(_) if budget.left().is_err() => budget.spent(),
            ureq::Error::Timeout(_) => FetchError::Timeout(self.timeout),
            ureq::Error::Other(e) => match e.downcast::<PrivateTarget>() {
                Ok(p) => FetchError::Transport(p.to_string()),
                Err(e) => FetchError::Transport(redact_in(&e.to_string(), &[url, &self.base])),
            },
            ureq::Error::BodyExceedsLimit(_) => FetchError::TooLarge {
                limit: self.max_bytes,
            },
            ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
                FetchError::Connect(e.to_string())
            }
            ureq::Error::Io(io) => match io.kind() {
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock if budget.left().is_err() => {
                    budget.spent()
                }
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
                    FetchError::Timeout(self.timeout)
                }
                io::ErrorKind::UnexpectedEof => FetchError::Truncated(io.to_string()),
                io::ErrorKind::ConnectionRefused
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::NotConnected => FetchError::Connect(io.to_string()),
                _ => FetchError::Transport(redact_in(&io.to_string(), &[url, &self.base])),
            },
            other => FetchError::Transport(redact_in(&other.to_string(), &[url, &self.base])),
        }
    }
}
