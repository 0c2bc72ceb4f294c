//! Who a browser is: the dashboard's pages and the dump download it links to take a
//! bearer token or HTTP Basic auth with the token as password (any user name), since a
//! browser can send only the latter on its own. A missing credential is answered with a
//! Basic challenge ([`DashError`]) so that the browser asks for it. This is the API's
//! authentication, one layer under the dashboard, which only uses it.

use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};

use super::auth::{self, Who};
use super::problem::ApiError;
use super::state::{AppState, Scope};

/// The caller with the `read` scope, by bearer token or HTTP Basic auth, in the project
/// the request names (`?project=` or the header) or its token's: for the dump download
/// the crash page links to.
pub fn dash_caller(
    s: &AppState,
    headers: &HeaderMap,
    uri: &axum::http::Uri,
) -> Result<Who, DashError> {
    let named = auth::named_project(uri, headers)?;
    caller(s, headers, Scope::Read, named)
}

/// The caller with `scope`, by bearer token or HTTP Basic auth (password = token), in
/// the project `named`.
pub fn caller(
    s: &AppState,
    headers: &HeaderMap,
    scope: Scope,
    named: Option<String>,
) -> Result<Who, DashError> {
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b64| decode_base64(b64.trim()))
        .and_then(|raw| String::from_utf8(raw).ok())
        .and_then(|up| up.split_once(':').map(|(_, pw)| pw.to_string()));
    let result = match basic {
        Some(token) => {
            let mut h = headers.clone();
            let value = format!("Bearer {token}")
                .parse()
                .map_err(|_| DashError(ApiError::Unauthorized))?;
            h.insert(header::AUTHORIZATION, value);
            auth::identify(s, &h, scope, named)
        }
        None => auth::identify(s, headers, scope, named),
    };
    result.map_err(DashError)
}

/// An API error, answered with a Basic-auth challenge when credentials are missing so
/// that a browser asks for them.
pub struct DashError(ApiError);

impl From<ApiError> for DashError {
    fn from(e: ApiError) -> Self {
        DashError(e)
    }
}

impl From<worker::store::StoreError> for DashError {
    fn from(e: worker::store::StoreError) -> Self {
        DashError(ApiError::Store(e))
    }
}

impl IntoResponse for DashError {
    fn into_response(self) -> Response {
        let challenge = matches!(self.0, ApiError::Unauthorized);
        let mut r = self.0.into_response();
        if challenge {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Basic realm=\"postmortem\", charset=\"UTF-8\""),
            );
        }
        r
    }
}

fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().take_while(|&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64() {
        assert_eq!(
            decode_base64("dTpzM2NyZXQ=").as_deref(),
            Some(&b"u:s3cret"[..])
        );
        assert_eq!(decode_base64("YWJj").as_deref(), Some(&b"abc"[..]));
        assert_eq!(decode_base64("YQ").as_deref(), Some(&b"a"[..]));
        assert_eq!(decode_base64("a b"), None);
    }
}
