//! A worker in a process of its own (`postmortem worker`, on PostgreSQL) takes a crash
//! another process queued at once, woken by the database's notification: here it looks
//! at the queue by itself only once an hour (`--poll-ms`), so nothing else can bring it
//! the crash within the test's minute. Before the notification, a worker process found a
//! new crash at its next poll (every 500 ms by default).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::Connection;

use crate::common;
use common::{
    client, compile, drop_db, make_core, pg_database, spawn_worker, start_serve_env, CRASHER,
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

    let c = client();
    let r = c
        .post(format!("{base}/api/v1/binaries"))
        .header("x-file-name", "prog")
        .body(std::fs::read(&prog).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = c
        .post(format!("{base}/api/v1/crashes"))
        .body(core)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let v: Value = c
            .get(format!("{base}/api/v1/crashes/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let status = v["status"].as_str().unwrap_or_default().to_string();
        if status == "done" || status == "failed" || Instant::now() > deadline {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        status, "done",
        "the worker process was not woken by the upload"
    );
    drop(conn);
    drop_db(&db_name).await;
}
