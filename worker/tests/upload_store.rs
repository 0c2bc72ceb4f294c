//! The store of upload sessions and of the requeue backlog (issue 42), on SQLite and on
//! PostgreSQL: what the server's routes rely on, asked of the store directly.
//!
//! - a chunk is recorded only at the session's byte count (a second writer that started
//!   from the same count is refused, as a second server writing the session would be),
//!   the chunks come back in file order and assemble into the file's bytes; a gap in the
//!   chunk rows is refused; a discarded session takes its chunks' blobs with it unless
//!   another row names them; an expired session is not found and is removed by `expire`;
//! - the requeue backlog forgets a build-id once no crash naming it is left.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use worker::store::upload_sessions::{self, AssembleError, SessionRow};
use worker::store::{now_ms, requeue_backlog, Backend, Blobs, Db, Staging};

use crate::common;

fn row(id: &str, size: i64, expires_at: i64) -> SessionRow {
    SessionRow {
        id: id.to_string(),
        owner: "o".into(),
        project: "default".into(),
        file_name: Some("f".into()),
        size,
        sha256: "ab".repeat(32),
        encoding: "gzip".into(),
        compressed_size: size,
        compressed_sha256: "cd".repeat(32),
        source_bundle: None,
        staged: 0,
        received: 0,
        created_at: now_ms(),
        expires_at,
    }
}

async fn put(blobs: &Blobs, bytes: &[u8]) -> String {
    blobs
        .put(bytes::Bytes::copy_from_slice(bytes))
        .await
        .unwrap()
}

async fn all(db: &Db, dir: &std::path::Path) {
    let blobs = Blobs::local(&dir.join("blobs")).unwrap();
    let staging = Staging::new(&dir.join("staging")).unwrap();
    let later = now_ms() + 3_600_000;
    let s = row("s1", 10, later);
    upload_sessions::insert(db, &s).await.unwrap();
    let (a, b) = (put(&blobs, b"hello").await, put(&blobs, b"world").await);
    assert!(upload_sessions::add_chunk(db, "s1", 0, 5, &a, 7)
        .await
        .unwrap());
    // a second writer that started from 0 too is refused: nothing recorded
    assert!(!upload_sessions::add_chunk(db, "s1", 0, 5, &b, 5)
        .await
        .unwrap());
    assert!(upload_sessions::add_chunk(db, "s1", 5, 5, &b, 5)
        .await
        .unwrap());
    let got = upload_sessions::get(db, "s1").await.unwrap().unwrap();
    assert_eq!((got.staged, got.received), (10, 12));
    let chunks = upload_sessions::chunks(db, "s1").await.unwrap();
    let starts: Vec<i64> = chunks.iter().map(|c| c.start_offset).collect();
    assert_eq!(starts, [0, 5]);
    let file = upload_sessions::assemble(db, &blobs, &staging, &got)
        .await
        .unwrap();
    assert_eq!(std::fs::read(file.path()).unwrap(), b"helloworld");
    // declared longer than its chunks: a gap
    let mut longer = got.clone();
    longer.compressed_size = 11;
    assert!(matches!(
        upload_sessions::assemble(db, &blobs, &staging, &longer).await,
        Err(AssembleError::Gap { .. })
    ));
    // another session's chunk names "world" too: discarding s1 keeps that blob
    upload_sessions::insert(db, &row("s2", 5, later))
        .await
        .unwrap();
    assert!(upload_sessions::add_chunk(db, "s2", 0, 5, &b, 5)
        .await
        .unwrap());
    upload_sessions::discard(db, &blobs, "s1").await.unwrap();
    assert_eq!(upload_sessions::get(db, "s1").await.unwrap(), None);
    assert!(blobs.get(&a).await.is_err(), "s1's own chunk blob is gone");
    assert_eq!(blobs.get(&b).await.unwrap().as_ref(), b"world");
    assert_eq!(upload_sessions::count_open(db).await.unwrap(), 1);
    // an expired session is not found, and expire removes it with its chunks
    upload_sessions::insert(db, &row("s3", 5, now_ms() - 1))
        .await
        .unwrap();
    let c = put(&blobs, b"stale").await;
    assert!(upload_sessions::add_chunk(db, "s3", 0, 5, &c, 5)
        .await
        .unwrap());
    assert_eq!(upload_sessions::get(db, "s3").await.unwrap(), None);
    assert_eq!(upload_sessions::of_owner(db, "o").await.unwrap().len(), 1);
    assert_eq!(upload_sessions::expire(db, &blobs).await.unwrap(), 1);
    assert!(upload_sessions::chunks(db, "s3").await.unwrap().is_empty());
    assert!(blobs.get(&c).await.is_err());
    assert_eq!(upload_sessions::expire(db, &blobs).await.unwrap(), 0);

    // a remembered build-id that no crash names is forgotten by the next pass
    requeue_backlog::remember(db, "*", "AB12", now_ms())
        .await
        .unwrap();
    requeue_backlog::remember(db, "*", "ab12", now_ms())
        .await
        .unwrap();
    assert_eq!(backlog_rows(db).await, 1, "remembered once");
    let r = requeue_backlog::pass(db, 10).await.unwrap();
    assert_eq!((r.requeued, r.left), (0, 0));
    assert_eq!(backlog_rows(db).await, 0, "forgotten");
}

async fn backlog_rows(db: &Db) -> i64 {
    let sql = "SELECT COUNT(*) FROM requeue_backlog";
    match db.backend() {
        Backend::Sqlite(p) => sqlx::query_scalar(sql).fetch_one(p).await,
        Backend::Postgres(p) => sqlx::query_scalar(sql).fetch_one(p).await,
    }
    .unwrap()
}

#[tokio::test]
async fn upload_sessions_in_the_store_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::connect(&format!("sqlite://{}", dir.path().join("t.db").display()))
        .await
        .unwrap();
    db.migrate().await.unwrap();
    all(&db, dir.path()).await;
    db.close().await;
}

#[tokio::test]
async fn upload_sessions_in_the_store_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_upl").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    all(&db, dir.path()).await;
    db.close().await;
    common::drop_db(&name).await;
}
