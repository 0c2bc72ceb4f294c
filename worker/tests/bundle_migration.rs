//! Migration 0030 on an installation that has source bundles and a requeue backlog, in
//! both dialects (SQLite, and PostgreSQL on 127.0.0.1:5432): the migrations before it
//! applied as they are written, rows of the single-space tables inserted, then 0030. The
//! bundles stored before belong to `default` and are shared (every project's crashes keep
//! their lines), the backlog row is the shared bundle's, and the audit log has `detail`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use crate::common;
use crate::migration_files::{before_and, run_sql};

use worker::store::source_bundles::{self, Sees};
use worker::store::Db;

async fn scenario(db: &Db, dialect: &str) {
    let (before, this) = before_and(dialect, "0030");
    for sql in &before {
        run_sql(db, sql).await;
    }
    let id = "ab".repeat(20);
    let sha = "ef".repeat(32);
    run_sql(
        db,
        &format!(
            "INSERT INTO source_bundles (build_id, sha256, size, file_count, uploaded_at) \
             VALUES ('{id}', '{sha}', 10, 1, 5); \
             INSERT INTO requeue_backlog (build_id, since, recorded_at) VALUES ('{id}', 5, 6)"
        ),
    )
    .await;
    run_sql(db, &this).await;
    let own = source_bundles::held_by(db, "default", &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((own.sha256.as_str(), own.uploaded_at), (sha.as_str(), 5));
    let shared = source_bundles::held_by(db, "*", &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(shared.sha256, sha);
    let other = source_bundles::by_build_id(db, Sees::Project("team-a"), &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        other.project, "*",
        "another project's crashes keep the shared bundle"
    );
    let backlog: Vec<(String, String, i64)> = worker::on_pool!(db, p => sqlx::query_as(
        "SELECT project, build_id, since FROM requeue_backlog").fetch_all(p).await)
    .unwrap();
    assert_eq!(backlog, vec![("*".to_string(), id.clone(), 5)]);
    let detail: Option<String> = worker::on_pool!(db, p => sqlx::query_scalar(
        "SELECT MAX(detail) FROM audit_log").fetch_one(p).await)
    .unwrap();
    assert_eq!(detail, None);
}

#[tokio::test]
async fn bundle_migration_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::connect(&format!("sqlite://{}", dir.path().join("t.db").display()))
        .await
        .unwrap();
    scenario(&db, "sqlite").await;
    db.close().await;
}

#[tokio::test]
async fn bundle_migration_postgres() {
    let Some((name, url)) = crate::pg::pg_database("pm_bundle_migration").await else {
        return;
    };
    let db = Db::connect(&url).await.unwrap();
    scenario(&db, "postgres").await;
    db.close().await;
    common::drop_db(&name).await;
}
