//! The `postmortem.report/1` document: its model, JSON and text renderings.
//!
//! Every way postmortem answers about a crash is this one document (see the binding
//! `docs/report-format.md`); the text view is a rendering of it for people.

pub mod android;
pub mod apple;
pub mod budget;
mod model;
pub mod signature;
pub mod source_context;
pub mod stackwalk;
pub mod text;

pub use model::*;

/// The schema identifier of this document.
pub const SCHEMA: &str = "postmortem.report/1";

/// Formats an address as the report does: lower-case hex, `0x`, no padding.
pub fn hex_addr(v: u64) -> String {
    format!("{v:#x}")
}

/// Reads back an address [`hex_addr`] wrote (`0x` and hex digits).
pub fn parse_hex(hex: &str) -> Option<u64> {
    u64::from_str_radix(hex.strip_prefix("0x")?, 16).ok()
}
