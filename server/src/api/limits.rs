//! Bounds on a request as it arrives, so that a hostile or broken client holds neither
//! memory, disk nor a connection for long: the size of the headers, the content codings
//! accepted, the wire-size limit counted on the bytes actually read (a `Content-Length`
//! over it is refused before reading, a chunked body is cut when it passes it), the
//! body's inactivity timeout and the whole-request timeout.
//!
//! A body cut short fails under the handler like a broken connection, so the handler
//! drops its staging files at once; this layer then answers with the real reason (413
//! or 408) instead of the handler's error.
//!
//! An answer given before the request body was read to its end (a refusal from the
//! headers, a dump refused from its first bytes) says `Connection: close`: the server
//! will not read the rest, so the connection cannot carry another request, and a client
//! that pooled it would send its next request into a closing socket and lose it.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, BodyDataStream};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::problem::ApiError;
use super::state::AppState;

/// Most bytes of request headers (names, values and separators) accepted.
pub(crate) const MAX_HEADER_BYTES: usize = 64 << 10;
/// Most header fields accepted.
pub(crate) const MAX_HEADERS: usize = 100;

/// hyper's own bounds on a request head, set on the connection (`cli/conn.rs`) above ours
/// so that this layer, not hyper, answers an oversized head, with a problem+json 431 that
/// says what was sent. hyper must parse a head whole before any layer sees it, and past
/// either bound it answers by itself (an empty 431, or a reset if the client is still
/// sending) with no way to change that answer: those heads get no problem+json.
///
/// Memory, per connection: the read buffer holding the head, at most
/// [`WIRE_MAX_HEAD_BYTES`] of data (its allocation at most twice that); the parsed
/// fields point into it. While a head is parsed, a scratch table of
/// [`WIRE_MAX_HEADERS`] × 64 bytes (512 KiB) is allocated and freed within the parse
/// (never held while waiting for bytes, so at most one per runtime thread). The header
/// timeout bounds how long a connection holds an unfinished head.
///
/// The read buffer's largest size, which bounds the request line and headers: hyper's
/// default (408 KiB), stated here because the memory bound above depends on it (the same
/// buffer carries body reads).
pub(crate) const WIRE_MAX_HEAD_BYTES: usize = 8192 + 4096 * 100;
/// The header fields hyper parses per request: enough that a head under
/// [`MAX_HEADER_BYTES`] reaches this layer unless its fields average under 8 bytes
/// (`X-A: 1` and its CRLF), and a head up to [`WIRE_MAX_HEAD_BYTES`] unless they average
/// under 51.
pub(crate) const WIRE_MAX_HEADERS: usize = 8192;

/// What happened to the request body under the handler: cut (and why), and whether it
/// was read to its end.
#[derive(Debug, Default)]
struct Fate(AtomicU8, AtomicBool);

const INTACT: u8 = 0;
const TOO_LARGE: u8 = 1;
const STALLED: u8 = 2;

impl Fate {
    fn set(&self, what: u8) {
        let _ = self
            .0
            .compare_exchange(INTACT, what, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// The layer: checks the headers and the declared size, normalises the content coding,
/// watches the body and bounds the whole request.
pub async fn guard(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let has_body = declares_body(req.headers());
    // an answer before the body is read ends the connection (see the module doc)
    let unread = |res: Response| if has_body { close(res) } else { res };
    if let Err(e) = check_headers(req.headers()) {
        return unread(e.into_response());
    }
    let limit = state.config.max_body_bytes;
    if let Some(len) = req.headers().get(header::CONTENT_LENGTH) {
        let declared = len.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok());
        if declared.is_none_or(|n| n > limit) {
            return close(ApiError::BodyTooLarge { limit }.into_response());
        }
    }
    if let Err(e) = normalize_encoding(req.headers_mut()) {
        return unread(e.into_response());
    }
    let fate = Arc::new(Fate::default());
    let idle = state.config.body_idle_timeout;
    let (parts, body) = req.into_parts();
    let body = watch_body(body, limit, idle, fate.clone());
    let req = Request::from_parts(parts, body);
    let res = match tokio::time::timeout(state.config.request_timeout, next.run(req)).await {
        Ok(res) => res,
        Err(_) => {
            return close(
                ApiError::RequestTimeout {
                    secs: state.config.request_timeout.as_secs(),
                }
                .into_response(),
            )
        }
    };
    if res.status().is_success() {
        return res;
    }
    match fate.0.load(Ordering::Acquire) {
        TOO_LARGE => close(ApiError::BodyTooLarge { limit }.into_response()),
        STALLED => close(
            ApiError::BodyTimeout {
                secs: idle.as_secs(),
            }
            .into_response(),
        ),
        _ if !fate.1.load(Ordering::Acquire) => unread(res),
        _ => res,
    }
}

/// Whether the request says a body follows: a non-zero `Content-Length`, or any
/// `Transfer-Encoding` (chunked).
fn declares_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0")
}

/// The connection is not reused after a body that was not read to its end.
fn close(mut res: Response) -> Response {
    res.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    res
}

/// Refuses more than [`MAX_HEADERS`] fields or [`MAX_HEADER_BYTES`] in all.
fn check_headers(headers: &HeaderMap) -> Result<(), ApiError> {
    let bytes = headers.iter().fold(0usize, |n, (name, value)| {
        n.saturating_add(name.as_str().len() + value.len() + 4)
    });
    let fields = headers.len();
    if bytes > MAX_HEADER_BYTES || fields > MAX_HEADERS {
        return Err(ApiError::HeadersTooLarge {
            bytes,
            fields,
            max_bytes: MAX_HEADER_BYTES,
            max_fields: MAX_HEADERS,
        });
    }
    Ok(())
}

/// Content codings are case-insensitive (RFC 9110): `GZIP` and `x-gzip` are `gzip` for
/// the decompression layer, which matches exact lower-case names; `identity` or an empty
/// header is no coding at all. Anything else is refused here, with the list of what is
/// accepted.
fn normalize_encoding(headers: &mut HeaderMap) -> Result<(), ApiError> {
    let Some(enc) = headers.get(header::CONTENT_ENCODING) else {
        return Ok(());
    };
    let enc = enc.to_str().unwrap_or("?").trim().to_ascii_lowercase();
    match enc.as_str() {
        "gzip" | "x-gzip" => {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        "zstd" => {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("zstd"));
        }
        "identity" | "" => {
            headers.remove(header::CONTENT_ENCODING);
        }
        _ => return Err(ApiError::UnsupportedEncoding(enc)),
    }
    Ok(())
}

/// The request body as it is read: each chunk counted against `limit`, and no more than
/// `idle` between two chunks. Either failure ends the body with an error and is recorded
/// in `fate`.
fn watch_body(body: Body, limit: u64, idle: Duration, fate: Arc<Fate>) -> Body {
    struct Watch {
        inner: BodyDataStream,
        read: u64,
        done: bool,
    }
    let start = Watch {
        inner: body.into_data_stream(),
        read: 0,
        done: false,
    };
    let stream = futures::stream::unfold(start, move |mut w| {
        let fate = fate.clone();
        async move {
            if w.done {
                return None;
            }
            let item = match tokio::time::timeout(idle, w.inner.next()).await {
                Ok(None) => {
                    fate.1.store(true, Ordering::Release);
                    return None;
                }
                Ok(Some(Ok(chunk))) => {
                    w.read = w.read.saturating_add(chunk.len() as u64);
                    if w.read > limit {
                        fate.set(TOO_LARGE);
                        w.done = true;
                        Err(std::io::Error::other(
                            "the request body passed the wire-size limit",
                        ))
                    } else {
                        Ok(chunk)
                    }
                }
                Ok(Some(Err(e))) => {
                    w.done = true;
                    Err(std::io::Error::other(e))
                }
                Err(_) => {
                    fate.set(STALLED);
                    w.done = true;
                    Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the request body stalled",
                    ))
                }
            };
            Some((item, w))
        }
    })
    // The decompressor polls again after the end.
    .fuse();
    Body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn headers_over_either_limit_are_refused_with_what_was_sent() {
        let mut h = HeaderMap::new();
        for i in 0..MAX_HEADERS {
            h.append("x-h", HeaderValue::from(i));
        }
        assert!(check_headers(&h).is_ok());
        h.append("x-h", HeaderValue::from_static("one more"));
        let e = check_headers(&h).unwrap_err().to_string();
        assert!(e.contains("101 fields"), "{e}");
        let mut h = HeaderMap::new();
        h.insert(
            "x-huge",
            HeaderValue::from_str(&"h".repeat(MAX_HEADER_BYTES)).unwrap(),
        );
        let e = check_headers(&h).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{} bytes", MAX_HEADER_BYTES + 10)),
            "{e}"
        );
    }

    #[test]
    fn encodings_are_case_insensitive() {
        for (given, want) in [
            ("GZIP", Some("gzip")),
            ("x-gzip", Some("gzip")),
            (" Zstd ", Some("zstd")),
            ("identity", None),
        ] {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_ENCODING, given.parse().unwrap());
            normalize_encoding(&mut h).unwrap();
            assert_eq!(
                h.get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap()),
                want
            );
        }
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_ENCODING, "br".parse().unwrap());
        assert!(normalize_encoding(&mut h).is_err());
    }
}
