//! The HTTP API (axum): each resource's routes, merged, with the shared layers.
//!
//! One module per resource, each with its routes (`routes()`) and handlers:
//!
//! - `crashes`: upload crashes, read them and their reports, list them, download a dump,
//!   delete one;
//! - `crash_delete_filter`: delete every crash of a project a filter matches (a dry run
//!   counts them);
//! - `binaries`: upload and look up binaries by build-id;
//! - `upload_sessions`: which files the server lacks, and resumable chunked uploads;
//! - `debuginfod`: the uploaded binaries and debug files as a debuginfod server serves
//!   them (`/buildid/{id}/executable|debuginfo`), and the files of uploaded source
//!   bundles (`/buildid/{id}/source/{path}`), for gdb, eu-stack and `debuginfod-find`;
//! - `source_bundles`: source bundles checked and stored for a project at the end of
//!   their upload, read for the debuginfod route, shared with every project by an admin;
//! - `modules`: the modules crashes needed and nobody uploaded;
//! - `reprocess`: queue finished crashes matching a filter again;
//! - `groups`: list crash groups, merge two, split one (decisions kept across reprocessing);
//! - `openapi`: `/api/v1/openapi.yaml`, this API's description;
//! - `health`: `/healthz`, `/readyz`, `/metrics`;
//!
//! The dashboard's pages (`crate::dashboard`) sit above this module and use its
//! authentication; `crate::app` merges both route sets under [`layers`].
//!
//! Shared by the handlers:
//!
//! - `dump_check`: the cheap structural checks that refuse a non-dump at upload;
//! - `auth`: who is calling, with which scopes, in which project (an extractor);
//!   `browser_auth`: the same for a browser, by HTTP Basic auth (the dashboard and the
//!   dump download);
//! - `extract`: body reading under limits, `?limit=`;
//! - `quota`: per-project upload quotas;
//! - `file_name`: the name an uploaded file is sent under, decoded and checked;
//! - `limits`: header size, wire-size limit on the bytes read, body and request timeouts;
//! - `origin`: without tokens, no cross-site or DNS-rebinding requests; no framing;
//! - `problem`: every error as `application/problem+json` — the only place errors meet HTTP.

mod apple_upload;
pub mod auth;
mod binaries;
pub mod browser_auth;
mod crash_delete;
mod crash_delete_filter;
pub(crate) mod crashes;
mod debuginfod;
mod dump_check;
mod dyld_upload;
pub(crate) mod extract;
mod file_name;
pub(crate) mod groups;
mod health;
pub(crate) mod limits;
mod modules;
mod openapi;
pub(crate) mod origin;
pub mod problem;
pub mod quota;
pub(crate) mod rate;
mod reprocess;
pub mod scrub;
mod source_bundles;
pub mod state;
pub(crate) mod upload_fields;
pub mod upload_sessions;

use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::decompression::RequestDecompressionLayer;
use tower_http::trace::TraceLayer;

use state::AppState;

/// The API's routes, without layers or state (`crate::app` adds the dashboard's, then
/// [`layers`]).
pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(crashes::routes())
        .merge(binaries::routes())
        .merge(upload_sessions::routes())
        .merge(debuginfod::routes())
        .merge(source_bundles::routes())
        .merge(modules::routes())
        .merge(reprocess::routes())
        .merge(crash_delete_filter::routes())
        .merge(groups::routes())
        .merge(openapi::routes())
        .merge(health::routes())
}

/// The service's layers around `routes`, outermost first: a panic answered as a problem,
/// tracing, the framework's errors as problems, the cross-site guard and framing
/// headers, the request limits and timeouts, then streaming request decompression.
pub fn layers(routes: Router<AppState>, state: AppState) -> Router {
    routes
        .layer(RequestDecompressionLayer::new())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            limits::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            origin::guard,
        ))
        .layer(axum::middleware::from_fn(problem::everywhere))
        .layer(TraceLayer::new_for_http())
        .layer(CatchPanicLayer::custom(problem::panicked))
        .with_state(state)
}
