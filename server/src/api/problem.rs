//! `ApiError` → `application/problem+json` (RFC 9457) with a stable `code`: the only place
//! errors meet HTTP. Server-side failures are logged here and answered with a generic
//! detail.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use worker::store::identify::IdentifyError;
use worker::store::StoreError;

/// Everything a handler can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("a bearer token is required (Authorization: Bearer TOKEN)")]
    Unauthorized,
    #[error("this token lacks the `{0}` scope")]
    Forbidden(&'static str),
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
    #[error("unsupported Content-Encoding {0:?}: use gzip, zstd or none")]
    UnsupportedEncoding(String),
    #[error("{detail}")]
    Unprocessable { code: &'static str, detail: String },
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
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not-found"),
            ApiError::BadRequest { code, .. } => (StatusCode::BAD_REQUEST, code),
            ApiError::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "body-too-large"),
            ApiError::DecompressedTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, "decompressed-too-large")
            }
            ApiError::FieldsTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "fields-too-large"),
            ApiError::UnsupportedEncoding(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-encoding")
            }
            ApiError::Unprocessable { code, .. } => (StatusCode::UNPROCESSABLE_ENTITY, code),
            ApiError::Identify(e) => (StatusCode::UNPROCESSABLE_ENTITY, e.code()),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "database-unavailable"),
            ApiError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.parts();
        let detail = match &self {
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
        let body = json!({
            "type": format!("https://postmortem.invalid/problems/{code}"),
            "title": status.canonical_reason().unwrap_or("error"),
            "status": status.as_u16(),
            "detail": detail,
            "code": code,
        });
        let mut res = (status, body.to_string()).into_response();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/problem+json"),
        );
        if status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        res
    }
}
