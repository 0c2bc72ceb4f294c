//! Request plumbing shared by the handlers: the wire-size/encoding guard, body reading
//! under the decompressed-size limit, multipart parsing, and bearer-token scopes.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::problem::ApiError;
use super::state::{AppState, Scope};

/// Outermost guard: refuses a body whose declared length exceeds the wire limit before a
/// byte of it is read, and an encoding we cannot decode.
pub async fn guard_wire_body(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let limit = state.config.max_body_bytes;
    if let Some(len) = req.headers().get(header::CONTENT_LENGTH) {
        let declared = len.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok());
        if declared.is_none_or(|n| n > limit) {
            return ApiError::BodyTooLarge { limit }.into_response();
        }
    }
    if let Some(enc) = req.headers().get(header::CONTENT_ENCODING) {
        let enc = enc.to_str().unwrap_or("").trim().to_ascii_lowercase();
        if !matches!(enc.as_str(), "gzip" | "x-gzip" | "zstd" | "identity" | "") {
            return ApiError::UnsupportedEncoding(enc).into_response();
        }
        // No encoding at all: the decompression layer answers an empty or `identity`
        // header with a bare 415, so it never sees one.
        if matches!(enc.as_str(), "identity" | "") {
            req.headers_mut().remove(header::CONTENT_ENCODING);
        }
    }
    next.run(req).await
}

/// Reads the (already decompressing) body, failing as soon as it passes `limit` bytes: a
/// gzip bomb is inflated at most `limit` bytes into memory.
pub async fn read_body(body: Body, limit: u64) -> Result<Bytes, ApiError> {
    let cap = usize::try_from(limit).unwrap_or(usize::MAX);
    match Limited::new(body, cap).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(ApiError::DecompressedTooLarge { limit })
        }
        Err(e) => Err(ApiError::BadRequest {
            code: "bad-encoding",
            detail: format!("the request body could not be read or decoded: {e}"),
        }),
    }
}

/// One part of a multipart body.
#[derive(Debug)]
pub struct Part {
    pub name: String,
    pub file_name: Option<String>,
    pub bytes: Bytes,
}

/// The multipart boundary if the request is `multipart/form-data`.
pub fn multipart_boundary(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(ct) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(None);
    };
    if !ct.to_ascii_lowercase().starts_with("multipart/") {
        return Ok(None);
    }
    multer::parse_boundary(ct)
        .map(Some)
        .map_err(|e| ApiError::BadRequest {
            code: "bad-multipart",
            detail: format!("bad multipart Content-Type: {e}"),
        })
}

/// Splits an in-memory multipart body into parts (at most `max_parts`).
pub async fn parse_multipart(
    body: Bytes,
    boundary: String,
    max_parts: usize,
) -> Result<Vec<Part>, ApiError> {
    let stream = futures::stream::once(async move { Ok::<_, std::convert::Infallible>(body) });
    let mut mp = multer::Multipart::new(stream, boundary);
    let bad = |e: multer::Error| ApiError::BadRequest {
        code: "bad-multipart",
        detail: format!("the multipart body is malformed: {e}"),
    };
    let mut parts = Vec::new();
    while let Some(field) = mp.next_field().await.map_err(bad)? {
        if parts.len() >= max_parts {
            return Err(ApiError::BadRequest {
                code: "bad-multipart",
                detail: format!("more than {max_parts} parts"),
            });
        }
        let name = field.name().unwrap_or("").to_string();
        let file_name = field.file_name().map(str::to_string);
        let bytes = field.bytes().await.map_err(bad)?;
        parts.push(Part {
            name,
            file_name,
            bytes,
        });
    }
    Ok(parts)
}

/// Checks that the request carries a token with `scope` (or `admin`). Without configured
/// tokens every request passes (the server then listens on loopback only).
pub fn authorize(state: &AppState, headers: &HeaderMap, scope: Scope) -> Result<(), ApiError> {
    if state.config.tokens.is_empty() {
        return Ok(());
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or(ApiError::Unauthorized)?;
    let token = state
        .config
        .tokens
        .iter()
        .find(|t| constant_time_eq(t.secret.as_bytes(), presented.as_bytes()))
        .ok_or(ApiError::Unauthorized)?;
    if token.scopes.contains(&scope) || token.scopes.contains(&Scope::Admin) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(scope.as_str()))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
