//! The integration tests of this crate, one test binary (issue 36: one binary links
//! the crate once, where one per file linked it once each). Each file of `tests/` is a
//! module here: run one with `cargo test -p PACKAGE --test suite -- MODULE::`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test
#![allow(clippy::too_many_lines)] // a test reads top to bottom as one scenario

mod analysis;
mod android_tombstones;
mod api;
mod apple_reports;
mod apple_symbols;
mod apple_symbols_unwind;
mod bench_cli;
mod blobs_s3;
mod common;
mod dashboard;
mod debuginfod;
mod delete_filter;
#[path = "gdb_compare/main.rs"]
mod gdb_compare;
mod grouping;
mod hostile;
mod hostile_crashes;
mod in_process;
mod microdump_upload;
mod microdump_upload_arm;
#[path = "minidump_gdb/main.rs"]
mod minidump_gdb;
mod projects;
mod projects_bundles;
mod projects_dashboard;
mod projects_groups;
mod projects_symbols;
mod queue_wake;
mod reports_unchanged;
mod reprocess;
mod retention;
mod scrub;
mod service;
mod source_bundles;
mod source_debuginfod;
mod source_links;
mod sources;
mod upload;
mod windows_minidump;
mod windows_x86_minidump;
