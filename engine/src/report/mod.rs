//! The `postmortem.report/1` document: its model, JSON and text renderings.
//!
//! Every way postmortem answers about a crash is this one document (see the binding
//! `docs/report-format.md`); the text view is a rendering of it for people.

pub mod budget;
mod model;
pub(crate) mod names;
pub mod signals;
pub mod signature;
pub mod text;

pub use model::*;

/// The schema identifier of this document.
pub const SCHEMA: &str = "postmortem.report/1";

/// Formats an address as the report does: lower-case hex, `0x`, no padding.
pub fn hex_addr(v: u64) -> String {
    format!("{v:#x}")
}
