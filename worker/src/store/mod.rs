//! Database and blob access for the service: projects, crashes (which are also the job
//! queue), their deletion, the retention and sampling of their dumps, the disk each project uses and the audit log,
//! binaries, source bundles and the requeues they leave for later, open upload sessions and their chunks, cached tables, the missing-modules index, the index of modules described
//! by a `.sym` file alone, the crash groups people merged and split, the remote sources' misses and fetch claims every worker shares, and the planner's statistics.
//!
//! One [`Db`] handle speaks SQLite or PostgreSQL; each query is written once with `$N`
//! placeholders (both dialects accept them) and compiled for both pools by [`on_pool!`].
//! SQL differs per dialect only where the databases differ (leasing a job). Queries are
//! runtime `query_as` + `FromRow`, not `query!`, because `query!` checks against a single
//! database and we ship two (docs/style.md 2.13). Times are Unix milliseconds.

pub mod audit;
pub mod binaries;
pub mod blobs;
pub mod breakpad_used;
pub mod conditions;
mod crash_index;
pub mod crashes;
pub mod dashboard;
mod db;
pub mod delete;
pub mod delete_filter;
pub mod dump_gone;
mod error;
pub mod fetch_state;
pub mod groups;
pub mod missing;
pub mod module_records;
pub mod projects;
pub mod queue_wake;
pub mod reprocess;
pub mod requeue_backlog;
pub mod retention;
pub mod sampling;
pub mod search;
pub mod served_report;
pub mod source_bundles;
pub mod staged;
pub mod statistics;
pub mod sweep;
pub mod tables;
pub mod text;
pub mod upload_sessions;
pub mod usage;

pub use blobs::Blobs;
pub use db::{now_ms, Backend, Db};
pub use error::StoreError;
pub use staged::{StagedBlob, Staging};
