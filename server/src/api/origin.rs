//! Who may drive the server from a browser. Without tokens every request is accepted and
//! the server listens on loopback only, but a web page the user visits runs on the same
//! machine: so, without tokens, requests a page could make are refused —
//!
//! - a `Host` that is not a name of this server (DNS rebinding: `attacker.example`
//!   resolving to 127.0.0.1): 421;
//! - an `Origin` that is not this server, on any method: 403;
//! - a state-changing request whose `Sec-Fetch-Site` is neither `same-origin` nor `none`
//!   (a cross-site form or fetch): 403;
//! - a body a form could send on a JSON endpoint ([`require_json`]): 415.
//!
//! Clients that send none of these headers (curl, crash reporters, HTTP libraries) are not
//! affected. With or without tokens, every response forbids framing (`X-Frame-Options`
//! and the CSP's `frame-ancestors`), so the dashboard's Reprocess button cannot be
//! clickjacked; the CSP allows the dashboard's inline style sheet and nothing else.
//! Every response is also kept out of shared and browser caches (`Cache-Control:
//! no-store`, unless a handler chose its own) and sends no `Referer` to other sites on
//! the links it holds (`Referrer-Policy: same-origin`): crash pages, report JSON and dump
//! downloads hold a crashed process's memory and paths, and their URLs name crashes.
//! Not `no-referrer`: under it a browser sends `Origin: null` with the dashboard's own
//! form posts (the Fetch standard's origin serialization), which the checks above
//! refuse as cross-site.

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::problem::ApiError;
use super::state::AppState;

/// The dashboard is server-rendered HTML with one inline style sheet and no script.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The `Host` values (lower case) this server answers to without tokens: the address
/// served, `localhost`, `127.0.0.1` and `[::1]` with its port (also without the port on
/// port 80), and those configured (`--allowed-host`).
pub fn allowed_hosts(served: SocketAddr, configured: &[String]) -> Vec<String> {
    let port = served.port();
    let mut hosts = vec![
        served.to_string(),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ];
    if port == 80 {
        hosts.extend(["localhost", "127.0.0.1", "[::1]"].map(String::from));
    }
    hosts.extend(
        configured
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty()),
    );
    hosts.sort();
    hosts.dedup();
    hosts
}

/// The layer: the cross-site checks without tokens, then the framing headers on the
/// answer.
pub async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if state.config.tokens.is_empty() {
        if let Err(e) = check(&state.config.allowed_hosts, req.method(), req.headers()) {
            return e.into_response();
        }
    }
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}

/// The checks of the module doc, for a server without tokens.
fn check(allowed: &[String], method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
    let known = |host: &str| allowed.iter().any(|a| a == host);
    if let Some(host) = headers.get(header::HOST) {
        let host = host.to_str().unwrap_or("?").trim().to_ascii_lowercase();
        if !known(&host) {
            return Err(ApiError::HostNotAllowed(host));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("?").trim().to_ascii_lowercase();
        let ours = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(known);
        if !ours {
            return Err(ApiError::CrossSite(format!(
                "requests from the web origin {origin:?} are refused"
            )));
        }
    }
    let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe {
        if let Some(site) = headers.get("sec-fetch-site") {
            let site = site.to_str().unwrap_or("?");
            if !matches!(site, "same-origin" | "none") {
                return Err(ApiError::CrossSite(format!(
                    "a {site} request cannot change anything here"
                )));
            }
        }
    }
    Ok(())
}

/// Without tokens, a JSON endpoint takes only a JSON body (`application/json` or
/// `application/*+json`): `text/plain`, form encodings or no type at all are what a page
/// on another site can send without asking.
pub fn require_json(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if !state.config.tokens.is_empty() {
        return Ok(());
    }
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json =
        mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"));
    if json {
        Ok(())
    } else {
        Err(ApiError::NotJson(mime))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn hosts_origins_and_fetch_sites() {
        let allowed = allowed_hosts(
            "127.0.0.1:8080".parse().unwrap(),
            &["Crash.Example".to_string()],
        );
        let ok = |m: Method, h: &[(&'static str, &str)]| check(&allowed, &m, &headers(h)).is_ok();
        assert!(ok(Method::POST, &[]), "curl sends none of them");
        assert!(ok(Method::GET, &[("host", "127.0.0.1:8080")]));
        assert!(ok(Method::GET, &[("host", "LOCALHOST:8080")]));
        assert!(ok(Method::GET, &[("host", "[::1]:8080")]));
        assert!(ok(Method::GET, &[("host", "crash.example")]));
        assert!(!ok(Method::GET, &[("host", "attacker.example:8080")]));
        assert!(!ok(Method::GET, &[("host", "127.0.0.1:8081")]));
        assert!(ok(Method::POST, &[("origin", "http://localhost:8080")]));
        assert!(!ok(Method::POST, &[("origin", "http://attacker.example")]));
        assert!(!ok(Method::POST, &[("origin", "null")]));
        assert!(ok(Method::POST, &[("sec-fetch-site", "same-origin")]));
        assert!(ok(Method::POST, &[("sec-fetch-site", "none")]));
        assert!(!ok(Method::POST, &[("sec-fetch-site", "same-site")]));
        assert!(!ok(Method::POST, &[("sec-fetch-site", "cross-site")]));
        assert!(ok(Method::GET, &[("sec-fetch-site", "cross-site")]));
    }
}
