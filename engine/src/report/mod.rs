//! The `postmortem.report/1` document: its model, JSON and text renderings.
//!
//! Every way postmortem answers about a crash is this one document (see the binding
//! `docs/report-format.md`); the text view is a rendering of it for people.

mod addr;
pub mod android;
pub mod apple;
pub mod budget;
mod json_size;
pub mod json_text;
mod model;
pub mod signature;
pub mod source_context;
pub mod stackwalk;
pub mod text;

pub use addr::Addr;
pub use model::*;

/// The schema identifier of this document.
pub const SCHEMA: &str = "postmortem.report/1";

/// Formats a number as the report does (an [`Addr`]'s spelling), for the report's text
/// fields: the analysis's evidence, an exception's code and flags.
pub fn hex_addr(v: u64) -> String {
    Addr(v).to_string()
}
