//! The worker loop's pipeline (`worker::jobs::Runner::run`), on SQLite and PostgreSQL:
//! a worker leases its next batch while the current one is processed, every crash is
//! leased once and none is lost, and a stopping worker gives back the batch it leased
//! ahead.
//!
//! A job is held in the middle of its batch by its dump: the blob of the first crash is
//! a named pipe, whose opening blocks until the test opens it for writing. The other
//! crashes' dumps are not dumps, so their jobs fail at once: what is checked is the
//! queue, not the reports.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use worker::cache::TablesCache;
use worker::jobs::{JobConfig, JobMetrics, Runner};
use worker::store::crashes::{self, NewCrash};
use worker::store::{Blobs, Db};

/// The blob of the held crash: a name no upload of these bytes has, as a sha256.
const HELD_SHA: &str = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1";

/// The queue of a test: crashes `c1`…`c4`, in that order; `c1`'s dump is a named pipe.
struct Queue {
    runner: Runner,
    pipe: PathBuf,
    _dir: tempfile::TempDir,
}

async fn queue(db: &Db) -> Queue {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Blobs::local(&dir.path().join("blobs")).unwrap();
    let junk = blobs
        .put(bytes::Bytes::from_static(b"not a dump"))
        .await
        .unwrap();
    let pipe = dir.path().join(format!(
        "blobs/sha256/{}/{}/{HELD_SHA}",
        &HELD_SHA[..2],
        &HELD_SHA[2..4]
    ));
    std::fs::create_dir_all(pipe.parent().unwrap()).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&pipe)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", pipe.display());
    for (i, sha) in [HELD_SHA, &junk, &junk, &junk].iter().enumerate() {
        let c = NewCrash {
            id: format!("c{}", i + 1),
            received_at: 1000 + i as i64,
            dump_sha256: (*sha).to_string(),
            dump_size: 10,
            dump_format: "elf-core".into(),
            annotations: "{}".into(),
            annotations_cut: None,
        };
        crashes::insert(db, &c).await.unwrap();
    }
    let config = JobConfig {
        batch: 2,
        time_limit: Duration::from_secs(20),
        poll_interval: Duration::from_millis(50),
        ..JobConfig::default()
    };
    let runner = runner(db, blobs, config);
    Queue {
        runner,
        pipe,
        _dir: dir,
    }
}

/// A worker's runner on `db` and `blobs`, with a small table cache and fresh metrics.
fn runner(db: &Db, blobs: Blobs, config: JobConfig) -> Runner {
    Runner {
        db: db.clone(),
        blobs,
        cache: TablesCache::new(1 << 20),
        config,
        metrics: Arc::new(JobMetrics::default()),
        wake: Arc::new(tokio::sync::Notify::new()),
        recent_use: Arc::default(),
    }
}

/// Lets the held job read its dump (junk, then the end of the pipe).
async fn release_pipe(pipe: &Path) {
    let pipe = pipe.to_path_buf();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new().write(true).open(pipe).unwrap();
        w.write_all(b"not a dump either").unwrap();
    })
    .await
    .unwrap();
}

/// (status, attempts, leased_by) of a crash.
async fn state(db: &Db, id: &str) -> (String, i32, Option<String>) {
    let row = crashes::get(db, id).await.unwrap().unwrap();
    (row.status, row.attempts, row.leased_by)
}

/// Waits until `c1`, held, and `c3` and `c4`, the next batch, are leased by `w0`;
/// panics after 5 s (the held job's time limit is 20 s: its batch has not ended).
async fn next_batch_leased_while_c1_runs(db: &Db) {
    let started = Instant::now();
    loop {
        let mut leased = Vec::new();
        for id in ["c1", "c3", "c4"] {
            leased.push(state(db, id).await);
        }
        let by_w0 = |s: &(String, i32, Option<String>)| {
            s.0 == "processing" && s.1 == 1 && s.2.as_deref() == Some("w0")
        };
        if leased.iter().all(by_w0) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the next batch was not leased while c1's job ran: c1, c3, c4 are {leased:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The next batch is leased before the current one ends; each crash is leased once and
/// finished once, no lease is lost.
async fn next_batch_leased_ahead(db: &Db) {
    let q = queue(db).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let metrics = q.runner.metrics.clone();
    let worker = tokio::spawn(q.runner.clone().run("w0".into(), stopped));
    next_batch_leased_while_c1_runs(db).await;
    release_pipe(&q.pipe).await;
    let started = Instant::now();
    loop {
        let mut states = Vec::new();
        for id in ["c1", "c2", "c3", "c4"] {
            states.push(state(db, id).await);
        }
        if states.iter().all(|s| s.0 == "failed") {
            assert!(
                states.iter().all(|s| s.1 == 1),
                "each crash leased once: {states:?}"
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the queue did not drain: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    worker.await.unwrap();
    let m = &metrics;
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(
        (m.failed.load(Relaxed), m.lost_leases.load(Relaxed)),
        (4, 0),
        "four jobs ended, no lease lost"
    );
}

/// A worker stopped while it holds a batch leased ahead gives it back: pending, with
/// the attempt the lease counted taken back; the batch it processed is stored.
async fn stop_gives_back_the_next_batch(db: &Db) {
    let q = queue(db).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn(q.runner.clone().run("w0".into(), stopped));
    next_batch_leased_while_c1_runs(db).await;
    stop.send(true).unwrap();
    release_pipe(&q.pipe).await;
    tokio::time::timeout(Duration::from_secs(10), worker)
        .await
        .expect("the worker stops")
        .unwrap();
    let mut states = Vec::new();
    for id in ["c1", "c2", "c3", "c4"] {
        states.push(state(db, id).await);
    }
    let want = |status: &str, attempts| (status.to_string(), attempts, None::<String>);
    assert_eq!(
        states,
        [
            ("failed".to_string(), 1, Some("w0".to_string())),
            ("failed".to_string(), 1, Some("w0".to_string())),
            want("pending", 0),
            want("pending", 0),
        ],
        "c1 and c2 stored, c3 and c4 given back"
    );
}

async fn sqlite() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let db = Db::connect(&url).await.unwrap();
    db.migrate().await.unwrap();
    (dir, db)
}

macro_rules! both {
    ($sqlite:ident, $pg:ident, $body:path) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $sqlite() {
            let (_dir, db) = sqlite().await;
            $body(&db).await;
            db.close().await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $pg() {
            let Some((name, db)) = crate::common::pg_migrated("pm_pipeline").await else {
                return;
            };
            $body(&db).await;
            db.close().await;
            crate::common::drop_db(&name).await;
        }
    };
}

both!(
    next_batch_leased_ahead_sqlite,
    next_batch_leased_ahead_postgres,
    next_batch_leased_ahead
);
both!(
    stop_gives_back_the_next_batch_sqlite,
    stop_gives_back_the_next_batch_postgres,
    stop_gives_back_the_next_batch
);

/// On SQLite a process's transactions take turns at the one writer in the order they
/// asked (`Db::sqlite_writer`), instead of polling in SQLite's busy handler: a claim
/// asked while another transaction of the process has the turn waits for it, then runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_transactions_take_turns() {
    let (_dir, db) = sqlite().await;
    let q = queue(&db).await;
    let turn = db.sqlite_writer().lock().await;
    let claim = tokio::spawn({
        let db = db.clone();
        async move { crashes::lease_batch(&db, "w0", 5_000, 60_000, 3, 2).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !claim.is_finished(),
        "the claim ran while another transaction had the writer's turn"
    );
    drop(turn);
    let leased = tokio::time::timeout(Duration::from_secs(5), claim)
        .await
        .expect("the claim runs once the turn is given back")
        .unwrap()
        .unwrap();
    assert_eq!(leased.len(), 2);
    drop(q);
    db.close().await;
}

/// An upload's crash row, one statement outside a transaction, takes the same turn
/// (`Db::write_turn`): while a transaction of the process has it, the insert waits for
/// the turn rather than meeting the transaction in SQLite's busy handler, whose sleeps
/// (up to 100 ms a try) made uploads and stores fall behind a sustained load (issue 40).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_uploads_take_the_writers_turn() {
    let (_dir, db) = sqlite().await;
    let turn = db.sqlite_writer().lock().await;
    let insert = tokio::spawn({
        let db = db.clone();
        async move {
            let c = NewCrash {
                id: "u1".into(),
                received_at: 1000,
                dump_sha256: HELD_SHA.into(),
                dump_size: 10,
                dump_format: "elf-core".into(),
                annotations: "{}".into(),
                annotations_cut: None,
            };
            crashes::insert(&db, &c).await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !insert.is_finished(),
        "the upload's insert ran while a transaction had the writer's turn"
    );
    drop(turn);
    tokio::time::timeout(Duration::from_secs(5), insert)
        .await
        .expect("the insert runs once the turn is given back")
        .unwrap()
        .unwrap();
    assert!(crashes::get(&db, "u1").await.unwrap().is_some());
    db.close().await;
}

/// A lease renewed while the claim ahead waits for SQLite's writer: the renewal takes
/// the writer's turn too, behind the claim, so it must run beside the claim, not in its
/// place. Awaited in the worker's `select!` arm, it kept the claim from being polled once
/// the turn was the claim's, and each waited for the other for ever: the worker, every
/// writer of the process, and one of SQLite's connection threads stopped (a resumed
/// `reprocess --lease-secs 1` hung so). Here the writer's turn is kept busy by the test
/// (as stores and uploads keep it), so that claims wait for it across a renewal's tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_renewals_run_beside_a_waiting_claim() {
    const N: usize = 40;
    let (dir, db) = sqlite().await;
    let blobs = Blobs::local(&dir.path().join("blobs")).unwrap();
    let junk = blobs
        .put(bytes::Bytes::from_static(b"not a dump"))
        .await
        .unwrap();
    for i in 0..N {
        let c = NewCrash {
            id: format!("r{i:03}"),
            received_at: 1000 + i as i64,
            dump_sha256: junk.clone(),
            dump_size: 10,
            dump_format: "elf-core".into(),
            annotations: "{}".into(),
            annotations_cut: None,
        };
        crashes::insert(&db, &c).await.unwrap();
    }
    let config = JobConfig {
        batch: 2,
        lease: Duration::from_millis(300),
        time_limit: Duration::from_secs(20),
        poll_interval: Duration::from_millis(20),
        ..JobConfig::default()
    };
    let runner = runner(&db, blobs, config);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let hog = tokio::spawn({
        let (db, stopped) = (db.clone(), stopped.clone());
        async move {
            while !*stopped.borrow() {
                let turn = db.sqlite_writer().lock().await;
                tokio::time::sleep(Duration::from_millis(120)).await;
                drop(turn);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    let worker = tokio::spawn(runner.run("w0".into(), stopped));
    let worker::store::Backend::Sqlite(pool) = db.backend() else {
        panic!("an SQLite database");
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let unfinished = loop {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM crashes WHERE status IN ('pending', 'processing')",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if n == 0 || Instant::now() > deadline {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    stop.send(true).unwrap();
    assert_eq!(
        unfinished, 0,
        "the worker stopped with {unfinished} of {N} crashes unfinished after 30 s"
    );
    tokio::time::timeout(Duration::from_secs(10), worker)
        .await
        .expect("the worker stops")
        .unwrap();
    hog.await.unwrap();
    db.close().await;
}
