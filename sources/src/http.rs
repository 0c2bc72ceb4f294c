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
use std::time::Duration;

use std::fs::File;

use tempfile::NamedTempFile;

use crate::cabinet::CabError;
use crate::check::Refused;
use crate::config::Limits;
use crate::s3::{self, BucketAnswer, S3Error};

/// Why a server gave no usable file.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("HTTP status {0}")]
    Status(u16),
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

/// One HTTP source.
pub struct Server {
    base: String,
    /// Set for an S3 bucket: objects are asked at presigned URLs.
    bucket: Option<s3::Bucket>,
    /// Made at the first fetch: a walk whose files are all on hand or cached pays nothing
    /// for HTTP and TLS set-up.
    agent: OnceLock<ureq::Agent>,
    timeout: Duration,
    max_fetch: Duration,
    max_bytes: u64,
}

impl Server {
    /// The server at `base` (no trailing `/`), its fetches within `limits` (its own:
    /// each server has its timeouts and size cap).
    pub fn new(base: &str, limits: &Limits) -> Server {
        Server {
            base: base.to_string(),
            bucket: None,
            agent: OnceLock::new(),
            timeout: limits.timeout,
            max_fetch: limits.max_fetch,
            max_bytes: limits.max_bytes,
        }
    }

    /// The S3 bucket `bucket`, its fetches within `limits`; named by its `s3://` URL.
    pub fn bucket(bucket: s3::Bucket, limits: &Limits) -> Server {
        Server {
            base: bucket.url().to_string(),
            bucket: Some(bucket),
            ..Server::new("", limits)
        }
    }

    fn agent(&self) -> &ureq::Agent {
        self.agent.get_or_init(|| {
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(self.timeout))
                .timeout_recv_response(Some(self.timeout))
                .timeout_per_read(Some(self.timeout))
                .timeout_global(Some(self.max_fetch))
                .user_agent(concat!("postmortem/", env!("CARGO_PKG_VERSION")))
                .build()
                .into()
        })
    }

    /// The server's base URL (a bucket's `s3://` URL), as configured.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The largest file fetched (or extracted from a fetched archive), in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The file at `path` (below the base URL, already escaped), written to a new
    /// temporary file in `dir` and accepted by `check`; `None` when the server does not
    /// have it.
    pub fn fetch(
        &self,
        path: &str,
        dir: &Path,
        check: &dyn Fn(&File) -> Result<(), Refused>,
    ) -> Result<Option<NamedTempFile>, FetchError> {
        let Some(out) = self.download(path, dir)? else {
            return Ok(None);
        };
        check(out.as_file())?;
        Ok(Some(out))
    }

    /// The file at `path` as [`Server::fetch`] gives it, unchecked: for a file that is
    /// not the one asked for but holds it (a symbol server's compressed `NAME.pd_`).
    pub fn download(&self, path: &str, dir: &Path) -> Result<Option<NamedTempFile>, FetchError> {
        let url = match &self.bucket {
            Some(bucket) => bucket.get_url(path)?,
            None => format!("{}/{path}", self.base),
        };
        let mut response = self
            .agent()
            .get(&url)
            .call()
            .map_err(|e| self.classify(e))?;
        match (response.status().as_u16(), &self.bucket) {
            (200, _) => {}
            (status, Some(_)) => {
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
            (404 | 410, None) => return Ok(None),
            (s, None) => return Err(FetchError::Status(s)),
        }
        let body = response.body_mut();
        if body.content_length().is_some_and(|n| n > self.max_bytes) {
            return Err(FetchError::TooLarge {
                limit: self.max_bytes,
            });
        }
        let mut out = NamedTempFile::new_in(dir).map_err(FetchError::Disk)?;
        let mut reader = body
            .with_config()
            .limit(self.max_bytes.saturating_add(1))
            .reader();
        self.copy(&mut reader, out.as_file_mut())?;
        out.as_file_mut().flush().map_err(FetchError::Disk)?;
        Ok(Some(out))
    }

    /// Copies the body to `to`, at most the cap.
    fn copy(&self, from: &mut impl Read, to: &mut impl Write) -> Result<(), FetchError> {
        let mut buf = vec![0u8; 1 << 16];
        let mut total: u64 = 0;
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.classify(ureq::Error::from(e))),
            };
            total = total.saturating_add(n as u64);
            if total > self.max_bytes {
                return Err(FetchError::TooLarge {
                    limit: self.max_bytes,
                });
            }
            to.write_all(buf.get(..n).unwrap_or_default())
                .map_err(FetchError::Disk)?;
        }
    }

    fn classify(&self, e: ureq::Error) -> FetchError {
        match e {
            ureq::Error::Timeout(_) => FetchError::Timeout(self.timeout),
            ureq::Error::BodyExceedsLimit(_) => FetchError::TooLarge {
                limit: self.max_bytes,
            },
            ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
                FetchError::Connect(e.to_string())
            }
            ureq::Error::Io(io) => match io.kind() {
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
                    FetchError::Timeout(self.timeout)
                }
                io::ErrorKind::UnexpectedEof => FetchError::Truncated(io.to_string()),
                io::ErrorKind::ConnectionRefused
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::NotConnected => FetchError::Connect(io.to_string()),
                _ => FetchError::Transport(io.to_string()),
            },
            other => FetchError::Transport(other.to_string()),
        }
    }
}
