//! `ApiError` → `application/problem+json` (RFC 9457) with a stable `code`: the only place
//! errors meet HTTP. Server-side failures are logged here and answered with a generic
//! detail. [`everywhere`] gives the same shape to the errors the framework answers by
//! itself (unknown route, wrong method, a body over an extractor's limit, a refused
//! coding), and [`panicked`] to a handler that panicked.

use std::any::Any;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use engine::identify::IdentifyError;
use serde_json::json;
use worker::store::StoreError;

/// The content codings a request body may use (for `Accept-Encoding` on a 415).
pub const ACCEPTED_ENCODINGS: &str = "gzip, zstd";

/// Everything a handler can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("a bearer token is required (Authorization: Bearer TOKEN)")]
    Unauthorized,
    #[error("this token lacks the `{0}` scope")]
    Forbidden(&'static str),
    #[error("this token belongs to another project")]
    WrongProject,
    #[error("this route takes a server-wide token (one without a project) for now")]
    ServerWideOnly,
    #[error("{0}")]
    CrossSite(String),
    #[error(
        "this server does not answer to the host name {0:?} (configure it with --allowed-host)"
    )]
    HostNotAllowed(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{detail}")]
    BadRequest { code: &'static str, detail: String },
    #[error("the request body is larger than the limit of {limit} bytes")]
    BodyTooLarge { limit: u64 },
    #[error("the decompressed request body is larger than the limit of {limit} bytes")]
    DecompressedTooLarge { limit: u64 },
    #[error("the multipart text fields are larger than the limit of {limit} bytes")]
    FieldsTooLarge { limit: u64 },
    #[error(
        "the request headers are {bytes} bytes in {fields} fields; \
         the limit is {max_bytes} bytes and {max_fields} fields"
    )]
    HeadersTooLarge {
        bytes: usize,
        fields: usize,
        max_bytes: usize,
        max_fields: usize,
    },
    #[error("no byte of the request body arrived for {secs} s")]
    BodyTimeout { secs: u64 },
    #[error("the request took longer than the limit of {secs} s")]
    RequestTimeout { secs: u64 },
    #[error("unsupported Content-Encoding {0:?}: use gzip, zstd or none")]
    UnsupportedEncoding(String),
    #[error("this endpoint takes a JSON body (Content-Type: application/json), not {0:?}")]
    NotJson(String),
    #[error("{detail}")]
    Unprocessable { code: &'static str, detail: String },
    #[error("{detail}")]
    TooManyRequests {
        detail: String,
        retry_after_secs: u64,
    },
    /// Another file already holds this identity in this role (first upload wins).
    #[error("{detail}")]
    Conflict {
        detail: String,
        existing_sha256: String,
    },
    /// The crash's dump was removed (retention, sampling): it cannot be downloaded or
    /// processed again; `reason` is the stored word.
    #[error("{detail}")]
    DumpGone { detail: String, reason: String },
    #[error(transparent)]
    Identify(#[from] IdentifyError),
    #[error("the database is unreachable")]
    Unavailable(#[source] StoreError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::WrongProject => (StatusCode::FORBIDDEN, "wrong-project"),
            ApiError::ServerWideOnly => (StatusCode::FORBIDDEN, "server-wide-token-required"),
            ApiError::CrossSite(_) => (StatusCode::FORBIDDEN, "cross-site"),
            ApiError::HostNotAllowed(_) => (StatusCode::MISDIRECTED_REQUEST, "host-not-allowed"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not-found"),
            ApiError::BadRequest { code, .. } => (StatusCode::BAD_REQUEST, code),
            ApiError::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "body-too-large"),
            ApiError::DecompressedTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, "decompressed-too-large")
            }
            ApiError::FieldsTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "fields-too-large"),
            ApiError::HeadersTooLarge { .. } => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers-too-large",
            ),
            ApiError::BodyTimeout { .. } => (StatusCode::REQUEST_TIMEOUT, "body-timeout"),
            ApiError::RequestTimeout { .. } => (StatusCode::REQUEST_TIMEOUT, "request-timeout"),
            ApiError::UnsupportedEncoding(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-encoding")
            }
            ApiError::NotJson(_) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "json-required"),
            ApiError::Unprocessable { code, .. } => (StatusCode::UNPROCESSABLE_ENTITY, code),
            ApiError::TooManyRequests { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate-limited"),
            ApiError::Conflict { .. } => (StatusCode::CONFLICT, "file-conflict"),
            ApiError::DumpGone { .. } => (StatusCode::GONE, "dump-gone"),
            ApiError::Identify(e) => (StatusCode::UNPROCESSABLE_ENTITY, e.code()),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "database-unavailable"),
            ApiError::Store(e) if e.is_storage_write() => {
                (StatusCode::INSUFFICIENT_STORAGE, "storage-unavailable")
            }
            ApiError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

/// A problem+json response.
pub fn problem(status: StatusCode, code: &str, detail: &str) -> Response {
    problem_body(status, code, detail, json!({}))
}

/// A problem+json response with one extension member (RFC 9457, section 3.2).
fn problem_with(status: StatusCode, code: &str, detail: &str, (k, v): (&str, &str)) -> Response {
    problem_body(status, code, detail, json!({ k: v }))
}

fn problem_body(
    status: StatusCode,
    code: &str,
    detail: &str,
    extension: serde_json::Value,
) -> Response {
    let mut body = json!({
        "type": format!("https://postmortem.invalid/problems/{code}"),
        "title": status.canonical_reason().unwrap_or("error"),
        "status": status.as_u16(),
        "detail": detail,
        "code": code,
    });
    if let (Some(body), Some(ext)) = (body.as_object_mut(), extension.as_object()) {
        for (k, v) in ext {
            body.insert(k.clone(), v.clone());
        }
    }
    let mut res = (status, body.to_string()).into_response();
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    res
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.parts();
        let detail = match &self {
            ApiError::Store(e) if e.is_storage_write() => {
                tracing::error!(error = %e, code = e.code(), "storing an upload failed");
                "the server cannot store data right now (storage full or not writable); \
                 retry later"
                    .to_string()
            }
            ApiError::Store(e) => {
                tracing::error!(error = %e, code = e.code(), "request failed");
                "an internal error occurred; it has been logged".to_string()
            }
            ApiError::Unavailable(e) => {
                tracing::warn!(error = %e, "database unreachable");
                self.to_string()
            }
            _ => self.to_string(),
        };
        let mut res = match &self {
            ApiError::Conflict {
                existing_sha256, ..
            } => problem_with(status, code, &detail, ("existing_sha256", existing_sha256)),
            ApiError::DumpGone { reason, .. } => {
                problem_with(status, code, &detail, ("reason", reason))
            }
            _ => problem(status, code, &detail),
        };
        match status {
            StatusCode::UNAUTHORIZED => {
                res.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            StatusCode::UNSUPPORTED_MEDIA_TYPE if code == "unsupported-encoding" => {
                res.headers_mut().insert(
                    header::ACCEPT_ENCODING,
                    HeaderValue::from_static(ACCEPTED_ENCODINGS),
                );
            }
            _ => {}
        }
        if let ApiError::TooManyRequests {
            retry_after_secs, ..
        } = &self
        {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
        }
        res
    }
}

/// Most bytes of a framework error's text kept as the problem's detail.
const MAX_FRAMEWORK_DETAIL: usize = 4096;

/// The outer layer: an error answered by the framework rather than a handler (no
/// problem+json content type) is rewritten as a problem with the same status and
/// headers, its text (if any) as the detail.
pub async fn everywhere(req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    let status = res.status();
    let is_problem = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let text = axum::body::to_bytes(body, MAX_FRAMEWORK_DETAIL)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let (code, default) = match status {
        StatusCode::NOT_FOUND => ("not-found", "there is no such route"),
        StatusCode::METHOD_NOT_ALLOWED => (
            "method-not-allowed",
            "this route does not take this method (see Allow)",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => ("body-too-large", "the request body is too large"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            "unsupported-media-type",
            "unsupported Content-Type or Content-Encoding",
        ),
        StatusCode::REQUEST_TIMEOUT => ("request-timeout", "the request took too long"),
        s if s.is_server_error() => ("internal", "an internal error occurred"),
        _ => ("bad-request", "the request is malformed"),
    };
    let detail = if text.is_empty() { default } else { &text };
    let fresh = problem(status, code, detail);
    let (fresh_parts, fresh_body) = fresh.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    if let Some(ct) = fresh_parts.headers.get(header::CONTENT_TYPE) {
        parts.headers.insert(header::CONTENT_TYPE, ct.clone());
    }
    if parts.headers.contains_key(header::ACCEPT_ENCODING) {
        parts.headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static(ACCEPTED_ENCODINGS),
        );
    }
    Response::from_parts(parts, Body::new(fresh_body))
}

/// The answer to a handler that panicked (the panic is logged): a problem+json 500 rather
/// than a connection closed without a word.
pub fn panicked(err: Box<dyn Any + Send + 'static>) -> Response {
    let what = err
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| err.downcast_ref::<&str>().copied())
        .unwrap_or("?");
    tracing::error!(panic = what, "a request handler panicked");
    problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "an internal error occurred; it has been logged",
    )
}
