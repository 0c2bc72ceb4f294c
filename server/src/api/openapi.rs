//! `GET /api/v1/openapi.yaml`: the API's own description (`openapi.yaml` at the
//! repository's root, compiled in), served without a token so that clients and
//! schemathesis can read it.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::state::AppState;

const OPENAPI: &str = include_str!("../../../openapi.yaml");

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route("/api/v1/openapi.yaml", get(openapi))
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI)
}
