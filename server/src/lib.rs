//! The `postmortem` service as a library: the HTTP API ([`api`]), the dashboard's pages
//! above it ([`dashboard`]), both under the API's layers in [`app`], the whole router; and
//! the subcommands ([`cli`]). The `postmortem` binary (`main.rs`) only parses its command
//! line and dispatches here; tests drive [`app`] in-process, without a socket, through
//! [`cli::serve::in_process`].

#![forbid(unsafe_code)]

pub mod api;
pub mod cli;
pub mod dashboard;

/// The whole service's router: the API's routes and the dashboard's, under the API's
/// layers, with its state.
pub fn app(state: api::state::AppState) -> axum::Router {
    api::layers(api::routes().merge(dashboard::routes()), state)
}
