//! The `postmortem` service as a library: the HTTP API ([`api`], whose [`api::app`] is
//! the whole router with its layers), the dashboard's pages ([`dashboard`]) and the
//! subcommands ([`cli`]). The `postmortem` binary (`main.rs`) only parses its command line
//! and dispatches here; tests drive [`api::app`] in-process, without a socket, through
//! [`cli::serve::in_process`].

#![forbid(unsafe_code)]

pub mod api;
pub mod cli;
pub mod dashboard;
