//! The HTTP API (axum): each resource's routes, merged, with the shared layers.
//!
//! - `binaries`: upload and look up binaries by build-id;
//! - `crashes`: upload crashes, read them and their reports, list them;
//! - `health`: `/healthz`, `/readyz`, `/metrics`, `/api/v1/openapi.yaml`, missing modules;
//! - `reprocess`: queue finished crashes matching a filter again;
//! - `extract`: body reading under limits, bearer-token scopes;
//! - `problem`: every error as `application/problem+json` — the only place errors meet HTTP.

mod binaries;
mod crashes;
pub(crate) mod extract;
mod health;
pub mod problem;
mod reprocess;
pub mod state;

use axum::Router;
use tower_http::decompression::RequestDecompressionLayer;
use tower_http::trace::TraceLayer;

use state::AppState;

/// The whole API with its layers (outermost last): tracing, the wire-size and encoding
/// guard, then streaming request decompression.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(binaries::router())
        .merge(crashes::router())
        .merge(health::router())
        .merge(reprocess::router())
        .merge(crate::dashboard::router())
        .layer(RequestDecompressionLayer::new())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            extract::guard_wire_body,
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
