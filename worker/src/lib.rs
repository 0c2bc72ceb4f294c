//! The service's workers: what turns a stored upload into a stored report.
//!
//! - [`store`]: the database (SQLite or PostgreSQL through sqlx) and the blob store
//!   (local directory or S3 through object_store) that hold dumps, binaries, tables and
//!   reports;
//! - [`jobs`]: the job runner that claims queued crashes, finds each module's uploaded
//!   files by the engine's one rule (`engine::resolve`; the uploads are its
//!   `FileSource`), builds or fetches their tables (cached per `TableKey`) and runs the
//!   engine's pipeline; `jobs::new_file` is what a newly stored file invalidates and
//!   requeues;
//! - [`cache`]: the in-memory cache of built tables shared by a process's workers;
//! - [`prometheus`]: the text format `/metrics` is written in.
//!
//! The crash-reading itself is the `engine` crate's (`postmortem-engine`): this crate
//! never parses dump or binary bytes on its own, and it never serves HTTP (that is the
//! `server` crate's).

#![forbid(unsafe_code)]

pub mod cache;
pub mod jobs;
pub mod prometheus;
pub mod store;
