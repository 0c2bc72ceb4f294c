//! Request plumbing shared by the handlers: streaming the body (raw or multipart) into
//! staging files under the decompressed-size limit, and the listings' `?limit=`. No
//! upload is held whole in memory. (Bearer tokens: `api::auth`.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{header, HeaderMap};
use bytes::Bytes;
use futures::StreamExt;
use worker::store::{StagedBlob, Staging};

use super::problem::ApiError;

/// Streams the (already decompressing) body into a staging file while hashing it,
/// failing as soon as it passes `limit` bytes: a gzip bomb is inflated at most `limit`
/// bytes, onto disk, and the file is removed with the error.
pub async fn stage_body(body: Body, limit: u64, staging: &Staging) -> Result<StagedBlob, ApiError> {
    let mut file = staging.create()?;
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| undecodable(&e))?;
        if file.size().saturating_add(chunk.len() as u64) > limit {
            return Err(ApiError::DecompressedTooLarge { limit });
        }
        file.write(&chunk).await?;
    }
    Ok(file.finish().await?)
}

fn undecodable(e: &dyn std::fmt::Display) -> ApiError {
    ApiError::BadRequest {
        code: "bad-encoding",
        detail: format!("the request body could not be read or decoded: {e}"),
    }
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

/// What to do with one multipart field, decided from its name and file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Stream it into a staging file.
    File,
    /// Keep it in memory (a short text field; all of them together at most
    /// [`MAX_TEXT_BYTES`]).
    Text,
    /// Read past it.
    Drop,
}

/// The content of one multipart field.
#[derive(Debug)]
pub enum PartData {
    File(StagedBlob),
    Text(Bytes),
    Dropped,
}

/// One field of a multipart body.
#[derive(Debug)]
pub struct Part {
    pub name: String,
    pub file_name: Option<String>,
    pub data: PartData,
}

/// Most bytes of in-memory text fields in one multipart request.
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// Why the body stream under the multipart parser stopped, so the parser's error can be
/// answered with the real reason.
#[derive(Debug)]
enum BodyFailure {
    TooLarge,
    Undecodable(String),
}

/// Streams a multipart body (at most `max_parts` fields, `limit` bytes after
/// decompression): file fields into staging files, text fields into memory, as `keep`
/// says per field. On any error every staged file is removed.
pub async fn read_multipart(
    body: Body,
    boundary: String,
    limit: u64,
    max_parts: usize,
    staging: &Staging,
    keep: impl Fn(&str, Option<&str>) -> Keep,
) -> Result<Vec<Part>, ApiError> {
    let failure = Arc::new(Mutex::new(None::<BodyFailure>));
    let seen = failure.clone();
    let mut total = 0u64;
    let stream = body.into_data_stream().map(move |chunk| {
        let fail = |why: BodyFailure| {
            if let Ok(mut slot) = seen.lock() {
                slot.get_or_insert(why);
            }
            Err(std::io::Error::other("the request body stopped"))
        };
        match chunk {
            Ok(c) => {
                total = total.saturating_add(c.len() as u64);
                if total > limit {
                    fail(BodyFailure::TooLarge)
                } else {
                    Ok(c)
                }
            }
            Err(e) => fail(BodyFailure::Undecodable(e.to_string())),
        }
    });
    let mut mp = multer::Multipart::new(stream, boundary);
    let bad = |e: multer::Error| {
        let why = failure.lock().ok().and_then(|mut slot| slot.take());
        match why {
            Some(BodyFailure::TooLarge) => ApiError::DecompressedTooLarge { limit },
            Some(BodyFailure::Undecodable(e)) => undecodable(&e),
            None => ApiError::BadRequest {
                code: "bad-multipart",
                detail: format!("the multipart body is malformed: {e}"),
            },
        }
    };
    let mut parts = Vec::new();
    let mut text_bytes = 0usize;
    while let Some(mut field) = mp.next_field().await.map_err(bad)? {
        if parts.len() >= max_parts {
            return Err(ApiError::BadRequest {
                code: "bad-multipart",
                detail: format!("more than {max_parts} parts"),
            });
        }
        let name = field.name().unwrap_or("").to_string();
        let file_name = field.file_name().map(str::to_string);
        let data = match keep(&name, file_name.as_deref()) {
            Keep::File => {
                let mut file = staging.create()?;
                while let Some(chunk) = field.chunk().await.map_err(bad)? {
                    file.write(&chunk).await?;
                }
                PartData::File(file.finish().await?)
            }
            Keep::Text => {
                let mut text = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(bad)? {
                    text_bytes = text_bytes.saturating_add(chunk.len());
                    if text_bytes > MAX_TEXT_BYTES {
                        return Err(ApiError::FieldsTooLarge {
                            limit: MAX_TEXT_BYTES as u64,
                        });
                    }
                    text.extend_from_slice(&chunk);
                }
                PartData::Text(Bytes::from(text))
            }
            Keep::Drop => {
                while field.chunk().await.map_err(bad)?.is_some() {}
                PartData::Dropped
            }
        };
        parts.push(Part {
            name,
            file_name,
            data,
        });
    }
    Ok(parts)
}

/// A listing's `?limit=`: `default` when absent, else an integer from 1 to 1000.
pub fn parse_limit(q: &HashMap<String, String>, default: i64) -> Result<i64, ApiError> {
    match q.get("limit") {
        None => Ok(default),
        Some(v) => v
            .parse::<i64>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| ApiError::BadRequest {
                code: "bad-request",
                detail: format!("limit must be an integer from 1 to 1000, not {v:?}"),
            }),
    }
}
