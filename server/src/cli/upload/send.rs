//! `postmortem upload`'s side of the upload API (`server/src/api/upload_sessions.rs`):
//! the one `missing` query, and each file sent compressed through an upload session in
//! chunks. A chunk that fails (a dropped connection, a timeout, a 5xx) is followed by a
//! question — how many bytes does the session hold? — and the upload goes on from there,
//! so no byte the server kept is sent again; a session the server lost (restarted,
//! expired) is opened again. The file is compressed once, into a temporary file, so that
//! every retry sends the same bytes and a re-run finds its session (same content).

use std::io::{Read, Seek, SeekFrom, Write};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::scan::Found;

/// Failed tries of a file in a row (each one without progress) before it is given up.
const MAX_TRIES: u32 = 6;
/// The `missing` query is sent in batches of this many files (the server's bound).
const MISSING_BATCH: usize = 5000;

/// Why a request or a file failed, in the classes the exit code tells apart.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The server could not be reached or kept failing (exit 3).
    #[error("{0}")]
    Unreachable(String),
    /// The token was refused (exit 4).
    #[error("{0}")]
    Auth(String),
    /// The server refused this file (exit 5): another file holds its identity, it is
    /// not a file it can index, or it did not arrive intact.
    #[error("{0}")]
    Refused(String),
}

/// One file to send: a binary or debug file found, or a build's source bundle.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    pub path: &'a std::path::Path,
    /// The name it is sent under.
    pub name: Option<&'a str>,
    pub size: u64,
    pub sha256: &'a str,
    /// The build-id whose source bundle this is.
    pub source_bundle: Option<&'a str>,
}

impl<'a> Outgoing<'a> {
    /// A binary or debug file found by the scan.
    pub fn of(f: &'a Found) -> Outgoing<'a> {
        Outgoing {
            path: &f.path,
            name: f.name.as_deref(),
            size: f.size,
            sha256: &f.sha256,
            source_bundle: None,
        }
    }
}

/// What the server says of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    Present,
    Missing,
    /// Another file (this sha256) holds the file's identity in its role.
    Conflict(String),
}

/// The server's answer to a finished upload.
#[derive(Debug)]
pub struct Sent {
    /// The file's compressed size.
    pub compressed: u64,
    /// Bytes this run sent (more than `compressed` only when a chunk was cut and the
    /// server had not received its end; less when a killed run had sent the start).
    pub sent: u64,
    /// Times the upload went on after a failed chunk, or from an earlier run's session.
    pub resumed: u32,
}

/// The server and how to reach it.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
    project: Option<String>,
}

#[derive(Debug, Deserialize)]
struct SessionInfo {
    id: String,
    offset: u64,
    chunk_size: u64,
}

impl Client {
    /// A client of the server at `base` (`http://host:port`).
    pub fn new(base: &str, token: Option<String>, project: Option<String>) -> Client {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(15)))
            .timeout_send_body(Some(Duration::from_secs(120)))
            // a finish decompresses, identifies and stores a file of up to gigabytes
            .timeout_recv_response(Some(Duration::from_secs(900)))
            .user_agent(concat!("postmortem-upload/", env!("CARGO_PKG_VERSION")))
            .build();
        Client {
            agent: config.into(),
            base: base.trim_end_matches('/').to_string(),
            token,
            project,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn with_headers<B>(&self, mut req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        // the project the files are stored in (issue 41)
        if let Some(p) = &self.project {
            req = req.header("X-Postmortem-Project", p);
        }
        req
    }

    /// Sends `body` as JSON with `method`; the status, headers' `Upload-Offset`, and the
    /// parsed answer.
    fn json(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Answer, SendError> {
        let url = self.url(path);
        let result = match (method, body) {
            ("GET", _) => self.with_headers(self.agent.get(&url)).call(),
            ("DELETE", _) => self.with_headers(self.agent.delete(&url)).call(),
            (_, Some(b)) => self
                .with_headers(self.agent.post(&url))
                .content_type("application/json")
                .send(b.to_string().as_bytes()),
            (_, None) => self.with_headers(self.agent.post(&url)).send_empty(),
        };
        Answer::read(result, &url)
    }

    /// Which of `files` the server lacks, in their order, and whether it lacks the
    /// source bundle of each build-id of `bundles` (in one request for up to 5000 of
    /// each).
    pub fn missing(
        &self,
        files: &[&Found],
        bundles: &[String],
    ) -> Result<(Vec<Presence>, Vec<bool>), SendError> {
        let mut out = Vec::with_capacity(files.len());
        let mut lacking = Vec::with_capacity(bundles.len());
        let rounds = files
            .len()
            .max(bundles.len())
            .div_ceil(MISSING_BATCH)
            .max(1);
        for round in 0..rounds {
            let batch = files.chunks(MISSING_BATCH).nth(round).unwrap_or_default();
            let ids = bundles.chunks(MISSING_BATCH).nth(round).unwrap_or_default();
            let described: Vec<Value> = batch.iter().map(|f| describe(f)).collect();
            let answer = self.json(
                "POST",
                "/api/v1/binaries/missing",
                Some(&json!({ "files": described, "source_bundles": ids })),
            )?;
            let body = answer.ok()?;
            let states = body["files"].as_array().cloned().unwrap_or_default();
            let bundle_states = body["source_bundles"].as_array().cloned();
            let bundle_states = bundle_states.unwrap_or_default();
            if states.len() != batch.len() || bundle_states.len() != ids.len() {
                return Err(SendError::Unreachable(format!(
                    "the server answered {} states for {} files and {} for {} source bundles \
                     (a server without source bundles answers none)",
                    states.len(),
                    batch.len(),
                    bundle_states.len(),
                    ids.len()
                )));
            }
            lacking.extend(bundle_states.iter().map(|s| s["state"] != "present"));
            out.extend(states.iter().map(|s| {
                match s["state"].as_str() {
                    Some("present") => Presence::Present,
                    Some("conflict") => Presence::Conflict(
                        s["existing_sha256"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    ),
                    _ => Presence::Missing,
                }
            }));
        }
        Ok((out, lacking))
    }

    /// Sends `file` through an upload session; `progress` hears the compressed bytes the
    /// server holds, and `resumed` each resumption.
    pub fn upload(
        &self,
        file: &Outgoing<'_>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Sent, SendError> {
        let packed = Packed::new(file.path)
            .map_err(|e| SendError::Refused(format!("compressing {}: {e}", file.path.display())))?;
        let mut create = json!({
            "file_name": file.name, "size": file.size, "sha256": file.sha256,
            "encoding": "gzip", "compressed_size": packed.size,
            "compressed_sha256": packed.sha256,
        });
        if let Some(build_id) = file.source_bundle {
            create["source_bundle"] = json!(build_id);
        }
        let mut tries = 0u32;
        let mut resumed = 0u32;
        let mut sent = 0u64;
        loop {
            let session: SessionInfo =
                match self.json("POST", "/api/v1/upload-sessions", Some(&create)) {
                    Ok(a) => a.parse()?,
                    Err(SendError::Unreachable(e)) if tries + 1 < MAX_TRIES => {
                        tries += 1;
                        backoff(tries, &e);
                        continue;
                    }
                    Err(e) => return Err(e),
                };
            if session.offset > 0 {
                resumed += 1;
            }
            match self.send_chunks(
                &packed,
                &session,
                &mut tries,
                &mut resumed,
                &mut sent,
                progress,
            )? {
                Some(()) => {}
                // the server lost the session: open one again
                None => continue,
            }
            let answer = self.json(
                "POST",
                &format!("/api/v1/upload-sessions/{}/finish", session.id),
                None,
            )?;
            if answer.code() == Some("session-incomplete") {
                continue;
            }
            answer.ok()?;
            return Ok(Sent {
                compressed: packed.size,
                sent,
                resumed,
            });
        }
    }

    /// Sends the chunks of `packed` from the session's offset to the end; `None` when
    /// the server no longer has the session.
    fn send_chunks(
        &self,
        packed: &Packed,
        session: &SessionInfo,
        tries: &mut u32,
        resumed: &mut u32,
        sent: &mut u64,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Option<()>, SendError> {
        let chunk = session.chunk_size.clamp(1, 64 << 20);
        let mut offset = session.offset;
        let mut buf = Vec::new();
        let path = format!("/api/v1/upload-sessions/{}", session.id);
        progress(offset, packed.size);
        while offset < packed.size {
            let n = chunk.min(packed.size - offset);
            packed
                .read(offset, n, &mut buf)
                .map_err(|e| SendError::Refused(format!("reading the compressed file: {e}")))?;
            let url = self.url(&format!("{path}?offset={offset}"));
            let result = self
                .with_headers(self.agent.put(&url))
                .content_type("application/octet-stream")
                .send(&buf[..]);
            *sent += n;
            let failure = match Answer::read(result, &url) {
                Ok(a) if a.status == 200 => {
                    offset = a.body["offset"].as_u64().unwrap_or(offset + n);
                    *tries = 0;
                    progress(offset, packed.size);
                    continue;
                }
                Ok(a) if a.code() == Some("no-such-session") => return Ok(None),
                Ok(a) if a.code() == Some("offset-mismatch") => match a.upload_offset {
                    Some(o) => {
                        offset = o;
                        continue;
                    }
                    None => a.error(),
                },
                // another request still writes (the server has not yet seen the dropped
                // connection's end): wait for it like for a failure
                Ok(a) if a.code() == Some("session-busy") => {
                    SendError::Unreachable(a.error().to_string())
                }
                Ok(a) => return Err(a.error()),
                Err(e) => e,
            };
            let why = match failure {
                SendError::Unreachable(why) => why,
                other => return Err(other),
            };
            *tries += 1;
            if *tries >= MAX_TRIES {
                return Err(SendError::Unreachable(why));
            }
            backoff(*tries, &why);
            // ask the server how much it holds, and go on from there
            match self.json("GET", &path, None) {
                Ok(a) if a.status == 200 => {
                    offset = a.body["offset"].as_u64().unwrap_or(offset);
                    *resumed += 1;
                }
                Ok(a) if a.code() == Some("no-such-session") => return Ok(None),
                _ => {}
            }
        }
        Ok(Some(()))
    }
}

/// What the server answers, read whole (answers are small JSON documents).
struct Answer {
    status: u16,
    upload_offset: Option<u64>,
    body: Value,
    url: String,
}

impl Answer {
    fn read(
        result: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
        url: &str,
    ) -> Result<Answer, SendError> {
        let mut res = result.map_err(|e| SendError::Unreachable(format!("{url}: {e}")))?;
        let upload_offset = res
            .headers()
            .get("upload-offset")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let status = res.status().as_u16();
        let text = res
            .body_mut()
            .with_config()
            .limit(16 << 20)
            .read_to_string()
            .map_err(|e| SendError::Unreachable(format!("{url}: reading the answer: {e}")))?;
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Answer {
            status,
            upload_offset,
            body,
            url: url.to_string(),
        })
    }

    fn code(&self) -> Option<&str> {
        self.body["code"].as_str()
    }

    /// The error this answer is (any status but 2xx).
    fn error(&self) -> SendError {
        let detail = self.body["detail"].as_str().unwrap_or("no detail");
        let what = format!(
            "{}: {} {}: {detail}",
            self.url,
            self.status,
            self.code().unwrap_or("error")
        );
        match self.status {
            401 | 403 => SendError::Auth(what),
            408 | 429 => SendError::Unreachable(what),
            s if s >= 500 => SendError::Unreachable(what),
            _ => SendError::Refused(what),
        }
    }

    fn ok(self) -> Result<Value, SendError> {
        if (200..300).contains(&self.status) {
            Ok(self.body)
        } else {
            Err(self.error())
        }
    }

    fn parse<T: serde::de::DeserializeOwned>(self) -> Result<T, SendError> {
        let url = self.url.clone();
        serde_json::from_value(self.ok()?)
            .map_err(|e| SendError::Unreachable(format!("{url}: unexpected answer: {e}")))
    }
}

/// Waits before try `n` (1 s, 2 s, 4 s… at most 15 s), saying why.
fn backoff(n: u32, why: &str) {
    let secs = (1u64 << n.saturating_sub(1).min(4)).min(15);
    eprintln!("postmortem upload: {why}; retrying in {secs} s");
    std::thread::sleep(Duration::from_secs(secs));
}

/// A file as the server's first-upload-wins rule sees it.
fn describe(f: &Found) -> Value {
    json!({
        "sha256": f.sha256, "format": f.info.format, "kind": f.info.kind,
        "build_id": f.info.build_id, "debug_id": f.info.debug_id,
        "code_id": f.info.code_id, "code_file": f.info.code_file,
        "file_name": f.name, "sections": f.info.sections,
    })
}

/// A file compressed with gzip into a temporary file, with the compressed size and
/// sha256 (the same bytes on every try and every run of the same flate2).
struct Packed {
    file: std::fs::File,
    size: u64,
    sha256: String,
}

impl Packed {
    fn new(path: &std::path::Path) -> std::io::Result<Packed> {
        let mut input = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
        let out = tempfile::tempfile()?;
        let hashing = HashingWriter {
            out: std::io::BufWriter::with_capacity(1 << 20, out),
            hasher: Sha256::new(),
            size: 0,
        };
        let mut gz = flate2::write::GzEncoder::new(hashing, flate2::Compression::fast());
        std::io::copy(&mut input, &mut gz)?;
        let hashing = gz.finish()?;
        let file = hashing.out.into_inner().map_err(|e| e.into_error())?;
        Ok(Packed {
            file,
            size: hashing.size,
            sha256: hex::encode(hashing.hasher.finalize()),
        })
    }

    fn read(&self, offset: u64, n: u64, buf: &mut Vec<u8>) -> std::io::Result<()> {
        let mut f = &self.file;
        f.seek(SeekFrom::Start(offset))?;
        buf.clear();
        f.take(n).read_to_end(buf)?;
        if buf.len() as u64 != n {
            return Err(std::io::Error::other(
                "the compressed file is shorter than it was",
            ));
        }
        Ok(())
    }
}

struct HashingWriter<W> {
    out: W,
    hasher: Sha256,
    size: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
