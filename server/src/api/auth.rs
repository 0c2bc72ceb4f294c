//! Who is calling, and in which project: the bearer token is checked once per request by
//! the [`Caller`] extractor (issue 36's "authorization as an extractor"), which gives the
//! handler the caller's project (issue 41). A handler names the scope it needs in its
//! signature, `Caller<Read>`; a route not yet kept apart per project takes
//! [`ServerWide`], which a project token never passes.
//!
//! Tokens are `SECRET:SCOPES[:PROJECT]`. A project token acts in its project only; a
//! request may name the project (`?project=` or the `X-Postmortem-Project` header), and a
//! project token may only name its own. A token without a project is server-wide: it acts
//! in the project the request names, or in every project when it names none (uploads
//! then go to `default`). Without configured tokens every request is a server-wide
//! caller (the server then listens on loopback only).
//!
//! The presented token is compared with every configured one by their SHA-256 digests in
//! constant time, so neither its bytes nor its length leak by timing. Each use of a token
//! on a route that changes something (any method but GET, HEAD and OPTIONS) is written to
//! the audit log (`worker::store::audit`), under the token's label.

use std::collections::HashMap;
use std::marker::PhantomData;

use axum::extract::{FromRequestParts, MatchedPath, Query};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method, Uri};
use sha2::{Digest, Sha256};
use worker::store::{audit, binaries, projects};

use super::problem::ApiError;
use super::state::{AppState, Scope, Token};

/// The header a request names its project with (or `?project=`).
pub const PROJECT_HEADER: &str = "x-postmortem-project";

/// The project uploads go to when a server-wide caller names none.
pub const DEFAULT_PROJECT: &str = worker::store::crashes::DEFAULT_PROJECT;

/// A scope a route needs, as a type: `Caller<Read>`.
pub trait Need: Send + Sync + 'static {
    const SCOPE: Scope;
}

/// Upload crashes.
pub struct Ingest;
/// Upload and read symbol files.
pub struct Symbols;
/// Read crashes.
pub struct Read;
/// Everything.
pub struct Admin;

impl Need for Ingest {
    const SCOPE: Scope = Scope::Ingest;
}
impl Need for Symbols {
    const SCOPE: Scope = Scope::Symbols;
}
impl Need for Read {
    const SCOPE: Scope = Scope::Read;
}
impl Need for Admin {
    const SCOPE: Scope = Scope::Admin;
}

/// The authorized caller of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    /// The project the request acts in; none: every project (a server-wide caller that
    /// named none).
    pub project: Option<String>,
    /// The token's label (`Token::label`), `none` without configured tokens.
    pub token: String,
    /// A server-wide token (or none configured): not bound to one project.
    pub server_wide: bool,
}

impl Who {
    /// The project a new crash or file of this caller goes to.
    pub fn upload_project(&self) -> &str {
        self.project.as_deref().unwrap_or(DEFAULT_PROJECT)
    }
    /// The project filter of this caller's reads (none: every project).
    pub fn filter(&self) -> Option<&str> {
        self.project.as_deref()
    }
    /// The symbol files this caller sees: its project's and the shared ones, or every
    /// file for a server-wide caller that named no project.
    pub fn sees(&self) -> binaries::Sees<'_> {
        match &self.project {
            Some(p) => binaries::Sees::Project(p),
            None => binaries::Sees::Every,
        }
    }
}

/// A caller with the scope `N` (or `admin`).
pub struct Caller<N> {
    pub who: Who,
    need: PhantomData<fn() -> N>,
}

/// A server-wide caller with the scope `N`: for the routes that are not yet kept apart
/// per project (groups, the dashboard's groups and jobs) or that act on every project
/// (marking a symbol file or a source bundle shared), which a project token may not use.
pub struct ServerWide<N> {
    need: PhantomData<fn() -> N>,
}

impl<N: Need> FromRequestParts<AppState> for Caller<N> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        let named = named_project(&parts.uri, &parts.headers)?;
        let who = identify(s, &parts.headers, N::SCOPE, named)?;
        record_use(s, parts, &who).await;
        Ok(Caller {
            who,
            need: PhantomData,
        })
    }
}

impl<N: Need> FromRequestParts<AppState> for ServerWide<N> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        let Caller { who, .. } = Caller::<N>::from_request_parts(parts, s).await?;
        if !who.server_wide {
            return Err(ApiError::ServerWideOnly);
        }
        Ok(ServerWide { need: PhantomData })
    }
}

/// The project a request names, by `?project=` or the header (the same one if both).
pub fn named_project(uri: &Uri, headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let query = Query::<HashMap<String, String>>::try_from_uri(uri)
        .map(|Query(q)| q.get("project").cloned())
        .unwrap_or(None);
    named_project_from(query, headers)
}

/// The project a request names by `query` (its `?project=` value, already read) or the
/// header (the same one if both), checked as [`named_project`] checks it.
pub fn named_project_from(
    query: Option<String>,
    headers: &HeaderMap,
) -> Result<Option<String>, ApiError> {
    let bad = |detail: String| ApiError::BadRequest {
        code: "bad-project",
        detail,
    };
    let header = match headers.get(PROJECT_HEADER) {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| bad("the project header is not ASCII".into()))?
                .trim()
                .to_string(),
        ),
    };
    let named = match (query, header) {
        (Some(q), Some(h)) if q != h => {
            return Err(bad(format!(
                "?project={q:?} and the {PROJECT_HEADER} header {h:?} differ"
            )))
        }
        (q, h) => q.or(h),
    };
    if let Some(p) = &named {
        if !projects::valid_name(p) {
            return Err(bad(format!(
                "a project name is 1 to {} of a-z, 0-9, '-', '_' and '.', not {p:?}",
                projects::MAX_NAME_BYTES
            )));
        }
    }
    Ok(named)
}

/// The caller of a request with these headers, if it may act with `scope` in the
/// project `named` (none: its own, or every project for a server-wide caller).
pub fn identify(
    s: &AppState,
    headers: &HeaderMap,
    scope: Scope,
    named: Option<String>,
) -> Result<Who, ApiError> {
    let token = presented_token(s, headers)?;
    if let Some(t) = token {
        if !(t.scopes.contains(&scope) || t.scopes.contains(&Scope::Admin)) {
            return Err(ApiError::Forbidden(scope.as_str()));
        }
    }
    let label = token.map_or_else(|| "none".to_string(), Token::label);
    match token.and_then(|t| t.project.as_ref()) {
        Some(own) => {
            if named.as_ref().is_some_and(|n| n != own) {
                return Err(ApiError::WrongProject);
            }
            Ok(Who {
                project: Some(own.clone()),
                token: label,
                server_wide: false,
            })
        }
        None => {
            if let Some(n) = &named {
                if !s.config.projects.contains(n) {
                    return Err(ApiError::NotFound(format!("no project named {n:?}")));
                }
            }
            Ok(Who {
                project: named,
                token: label,
                server_wide: true,
            })
        }
    }
}

/// The configured token the request presents; `None` when no tokens are configured.
fn presented_token<'s>(
    s: &'s AppState,
    headers: &HeaderMap,
) -> Result<Option<&'s Token>, ApiError> {
    if s.config.tokens.is_empty() {
        return Ok(None);
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
        .ok_or(ApiError::Unauthorized)?;
    let presented = Sha256::digest(presented.as_bytes());
    let mut found = None;
    for t in &s.config.tokens {
        let same = constant_time_eq(&Sha256::digest(t.secret.as_bytes()), &presented);
        if same && found.is_none() {
            found = Some(t);
        }
    }
    found.map(Some).ok_or(ApiError::Unauthorized)
}

/// Writes the token's use to the audit log when the request changes something. A failed
/// write is logged, not answered: the audit log must not take the API down with it. A
/// server without tokens has no token to name (every caller is `none`): it writes none,
/// and its uploads take SQLite's one writer once, not twice (issue 40).
async fn record_use(s: &AppState, parts: &Parts, who: &Who) {
    if matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS)
        || s.config.tokens.is_empty()
    {
        return;
    }
    let path = parts
        .extensions
        .get::<MatchedPath>()
        .map_or_else(|| parts.uri.path().to_string(), |m| m.as_str().to_string());
    let route = format!("{} {path}", parts.method);
    let e = audit::entry(&who.token, who.filter(), "token-use", &route, None);
    if let Err(err) = audit::record(&s.db, &e).await {
        tracing::warn!(error = %err, route, "writing the audit log failed");
    }
}

/// The credentials of `Bearer TOKEN`, the scheme in any case.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim().split_once([' ', '\t'])?;
    let token = rest.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Equality of two digests in time independent of where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bearer_scheme_in_any_case() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer abc"), Some("abc"));
        assert_eq!(bearer("BEARER   abc "), Some("abc"));
        assert_eq!(bearer("Bearer\tabc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer "), None);
    }

    #[test]
    fn the_project_is_named_once() {
        let uri: Uri = "/api/v1/crashes?project=team-a".parse().unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(named_project(&uri, &h).unwrap().as_deref(), Some("team-a"));
        h.insert(PROJECT_HEADER, "team-b".parse().unwrap());
        assert!(named_project(&uri, &h).is_err());
        let plain: Uri = "/api/v1/crashes".parse().unwrap();
        assert_eq!(
            named_project(&plain, &h).unwrap().as_deref(),
            Some("team-b")
        );
        let bad: Uri = "/x?project=..%2F".parse().unwrap();
        assert!(named_project(&bad, &HeaderMap::new()).is_err());
    }
}
