//! The store's integration tests, one test binary: every query of `worker::store` on SQLite
//! and on PostgreSQL, without starting the service (issue 36: tests that never start the
//! binary live with the store). Run one file's with
//! `cargo test -p postmortem-worker --test suite -- MODULE::`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test
#![allow(clippy::too_many_lines)] // a test reads top to bottom as one scenario

mod api_store;
mod bundle_migration;
mod dashboard_store;
mod delete_filter_store;
mod elf_debug_ids;
mod group_locks;
mod migration_files;
mod module_records_store;
mod pg;
mod pipeline;
mod project_groups;
mod reprocess_store;
mod rollups;
mod status_counts;
mod store_indexes;
mod upload_store;
mod use_store;

/// What the test files call `common::…`.
mod common {
    pub use crate::pg::{drop_db, pg_database, pg_migrated, pg_url};

    /// A fresh, migrated SQLite store in a temporary directory, which lives as long as
    /// the directory returned beside it.
    pub async fn sqlite_migrated() -> (tempfile::TempDir, worker::store::Db) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let db = worker::store::Db::connect(&url).await.unwrap();
        db.migrate().await.unwrap();
        (dir, db)
    }
}
