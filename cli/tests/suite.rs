//! The integration tests of this crate, one test binary (issue 36: one binary links
//! the crate once, where one per file linked it once each). Each file of `tests/` is a
//! module here: run one with `cargo test -p PACKAGE --test suite -- MODULE::`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test
#![allow(clippy::too_many_lines)] // a test reads top to bottom as one scenario

mod apple_corpus;
mod cli;
mod corpus;
mod microdump;
mod table_cache;
mod windows_arm64;
mod windows_x86_pdb;
