//! The symbol files' last use (`binaries::record_use`, for the retention of symbol files),
//! on SQLite and on PostgreSQL: a crash processed with a file writes the project's hold
//! only when its recorded use is older than `USE_RECORDED_EVERY_MS` (half an hour; issue
//! 40: not one write per crash), and never another project's hold.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use worker::store::binaries::{self, USE_RECORDED_EVERY_MS};
use worker::store::{now_ms, Backend, Db};

use crate::common;

async fn exec(db: &Db, sql: &str) {
    match db.backend() {
        Backend::Sqlite(p) => sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(p)
            .await
            .map(|_| ()),
        Backend::Postgres(p) => sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(p)
            .await
            .map(|_| ()),
    }
    .unwrap();
}

async fn last_used(db: &Db, sha: &str, project: &str) -> i64 {
    let sql = format!(
        "SELECT last_used_at FROM binary_projects WHERE sha256 = '{sha}' AND project = '{project}'"
    );
    match db.backend() {
        Backend::Sqlite(p) => {
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(p)
                .await
        }
        Backend::Postgres(p) => {
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(p)
                .await
        }
    }
    .unwrap()
}

async fn all(db: &Db) {
    let (fresh, stale, other) = ("a".repeat(64), "b".repeat(64), "c".repeat(64));
    for sha in [&fresh, &stale, &other] {
        assert!(binaries::own(db, sha, "team").await.unwrap());
    }
    assert!(binaries::own(db, &fresh, "elsewhere").await.unwrap());
    let at = now_ms();
    let recent = at - USE_RECORDED_EVERY_MS / 2;
    let old = at - 2 * USE_RECORDED_EVERY_MS;
    exec(
        db,
        &format!("UPDATE binary_projects SET last_used_at = {recent} WHERE sha256 = '{fresh}'"),
    )
    .await;
    exec(
        db,
        &format!("UPDATE binary_projects SET last_used_at = {old} WHERE sha256 = '{stale}'"),
    )
    .await;
    exec(
        db,
        &format!("UPDATE binary_projects SET last_used_at = {old} WHERE sha256 = '{other}'"),
    )
    .await;

    binaries::record_use(db, "team", &[&fresh, &stale], at)
        .await
        .unwrap();
    assert_eq!(
        last_used(db, &fresh, "team").await,
        recent,
        "used within the interval: not written"
    );
    assert_eq!(
        last_used(db, &stale, "team").await,
        at,
        "used two intervals ago: written"
    );
    assert_eq!(
        last_used(db, &other, "team").await,
        old,
        "a file the crash did not use"
    );
    assert_eq!(
        last_used(db, &fresh, "elsewhere").await,
        recent,
        "another project's hold"
    );

    // the interval after its recorded use: written again
    let later = recent + USE_RECORDED_EVERY_MS + 1;
    binaries::record_use(db, "team", &[&fresh], later)
        .await
        .unwrap();
    assert_eq!(last_used(db, &fresh, "team").await, later);
}

#[tokio::test]
async fn file_use_is_written_once_per_interval_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::connect(&format!("sqlite://{}", dir.path().join("t.db").display()))
        .await
        .unwrap();
    db.migrate().await.unwrap();
    all(&db).await;
    db.close().await;
}

#[tokio::test]
async fn file_use_is_written_once_per_interval_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_use").await else {
        return;
    };
    all(&db).await;
    db.close().await;
    common::drop_db(&name).await;
}
