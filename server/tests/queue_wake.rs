//! A worker in a process of its own (`postmortem worker`, on PostgreSQL) takes a crash
//! another process queued at once, woken by the database's notification: here it looks
//! at the queue by itself only once an hour (`--poll-ms`), so nothing else can bring it
//! the crash within the test's minute. Before the notification, a worker process found a
//! new crash at its next poll (every 500 ms by default).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use sqlx::Connection;

use crate::common;
use common::{
    compile, drop_db, make_core, pg_database, spawn_worker, start_serve_env, upload_and_check,
    CRASHER,
};

#[tokio::test]
async fn a_worker_process_is_woken_by_the_queue_not_its_poll() {
    let Some((db_name, db_url)) = pg_database("pm_wake").await else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let prog = compile(work.path(), "prog", CRASHER);
    let core = make_core(work.path(), &prog);
    let blobs = work.path().join("blobs");
    let blob_url = format!("file://{}", blobs.display());
    let api_data = work.path().join("api");
    let (_serve, base) = start_serve_env(
        &[
            "--workers",
            "0",
            "--data-dir",
            api_data.to_str().unwrap(),
            "--database-url",
            &db_url,
            "--blob-url",
            &blob_url,
        ],
        &[],
    );
    let _worker = spawn_worker(
        &work.path().join("worker"),
        &[
            "--workers",
            "1",
            "--poll-ms",
            "3600000",
            "--database-url",
            &db_url,
            "--blob-url",
            &blob_url,
        ],
    );
    // the worker has looked at the empty queue and listens: its connection's last
    // statement is the LISTEN
    let mut conn = sqlx::PgConnection::connect(&db_url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND query LIKE 'LISTEN %'",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        if n > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the worker never listened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    // a worker that polls once an hour takes it within upload_and_check's 90 s only if
    // the queue wakes it
    upload_and_check(&base, &std::fs::read(&prog).unwrap(), &core).await;
    drop(conn);
    drop_db(&db_name).await;
}
