//! The queue's counts by project and status (migration 0033, which replaced 0034's
//! counts by status: counts kept by triggers, read by the jobs page and `/metrics`)
//! against a count of the crashes themselves, after every step of a job's life, on
//! SQLite and on PostgreSQL (a fresh `pm_*` database, dropped after): uploads in two
//! projects (on PostgreSQL also concurrent ones, each connection its own shard of the
//! counts), leases, a batch finished done, failed and retried, requeues, expired leases
//! failed, a reprocess enqueue and deletes; 0034's backfill of a store that had crashes
//! before it, and 0033's of a store that had 0034 and crashes (an upgraded store).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use crate::common;
use crate::migration_files::{all_but, before_and, run_sql};

use worker::store::crashes::{self, Finished, NewCrash, Outcome, StoredReport};
use worker::store::dashboard as q;
use worker::store::Db;

/// The crashes' own counts by status: what the counts must be.
async fn truth(db: &Db) -> Vec<(String, i64)> {
    let sql = "SELECT status, COUNT(*) FROM crashes GROUP BY status ORDER BY status";
    worker::on_pool!(db, p => sqlx::query_as::<_, (String, i64)>(sql).fetch_all(p).await).unwrap()
}

/// The crashes' own counts by project and status.
async fn truth_by_project(db: &Db) -> Vec<(String, String, i64)> {
    let sql = "SELECT project, status, COUNT(*) FROM crashes GROUP BY project, status \
               ORDER BY project, status";
    worker::on_pool!(db, p => sqlx::query_as::<_, (String, String, i64)>(sql).fetch_all(p).await)
        .unwrap()
}

/// The bytes of the dumps each project keeps, from its crashes (the query `usage::bytes`
/// ran before 0033), projects with none left out.
async fn dump_bytes(db: &Db) -> Vec<(String, i64)> {
    let sql = "SELECT project, CAST(SUM(dump_size) AS BIGINT) FROM \
               (SELECT DISTINCT project, dump_sha256, dump_size FROM crashes \
               WHERE dump_gone IS NULL) d GROUP BY project ORDER BY project";
    worker::on_pool!(db, p => sqlx::query_as::<_, (String, i64)>(sql).fetch_all(p).await).unwrap()
}

async fn check(db: &Db, step: &str) {
    let kept: Vec<(String, i64)> = worker::store::usage::bytes(db, None)
        .await
        .unwrap()
        .into_iter()
        .filter(|b| b.dumps != 0 || b.symbols == 0)
        .map(|b| (b.project, b.dumps))
        .collect();
    assert_eq!(kept, dump_bytes(db).await, "dump bytes after {step}");
    let counts = crashes::count_by_status(db).await.unwrap();
    assert_eq!(counts, truth(db).await, "counts by status after {step}");
    let counts = crashes::count_by_project_and_status(db).await.unwrap();
    assert_eq!(
        counts,
        truth_by_project(db).await,
        "counts by project and status after {step}"
    );
}

fn crash(i: i64) -> NewCrash {
    NewCrash {
        id: crashes::new_id(),
        received_at: 1_000 + i,
        // some dumps uploaded several times
        dump_sha256: format!("{:02}", i % 7),
        dump_size: 10 + i % 7,
        dump_format: "elf-core".into(),
        annotations: "{}".into(),
        annotations_cut: None,
    }
}

async fn lifecycle(db: &Db) {
    check(db, "nothing").await;
    let mut ids = Vec::new();
    worker::store::projects::register(db, &["other".to_string()])
        .await
        .unwrap();
    for i in 0..30 {
        let c = crash(i);
        ids.push(c.id.clone());
        let project = if i % 3 == 0 { "other" } else { "default" };
        crashes::insert_in(db, &c, project).await.unwrap();
    }
    // the same idempotency key twice: one crash
    let keyed = crash(99);
    assert!(crashes::insert_keyed(db, &keyed, "default", "k1")
        .await
        .unwrap()
        .is_none());
    let again = crash(100);
    assert!(crashes::insert_keyed(db, &again, "default", "k1")
        .await
        .unwrap()
        .is_some());
    check(db, "uploads").await;
    let leases = crashes::lease_batch(db, "w", 10_000, 60_000, 2, 12)
        .await
        .unwrap();
    assert_eq!(leases.len(), 12);
    check(db, "a lease of 12").await;
    let report = |i: usize| {
        Outcome::Done(StoredReport::from_json(
            "{}".into(),
            Some(format!("sig{}", i % 3)),
        ))
    };
    let outcomes: Vec<Outcome> = (0..leases.len())
        .map(|i| match i % 4 {
            0 => Outcome::Failed {
                reason: "bad dump".into(),
            },
            1 => Outcome::Retry {
                reason: "busy".into(),
            },
            _ => report(i),
        })
        .collect();
    let jobs: Vec<Finished> = leases
        .iter()
        .zip(&outcomes)
        .map(|(lease, outcome)| Finished {
            lease,
            outcome,
            processing_us: None,
        })
        .collect();
    crashes::finish_batch(db, "w", 11_000, 2, &jobs)
        .await
        .unwrap();
    check(db, "a batch finished done, failed and retried").await;
    // done and failed crashes back in the queue; a pending one is not requeued
    assert!(q::requeue(db, &leases[0].id).await.unwrap());
    assert!(q::requeue(db, &leases[2].id).await.unwrap());
    check(db, "requeues").await;
    // leases that expire after their last attempt fail
    let more = crashes::lease_batch(db, "w", 20_000, 1_000, 1, 5)
        .await
        .unwrap();
    assert_eq!(more.len(), 5);
    check(db, "a second lease").await;
    assert!(crashes::fail_exhausted(db, 100_000, 1).await.unwrap() > 0);
    check(db, "expired leases failed").await;
    // dumps removed (retention), one of them twice; and one put back
    run_sql(
        db,
        &format!(
            "UPDATE crashes SET dump_gone = 'retention' WHERE id IN ('{}', '{}', '{}', '{}')",
            ids[3], ids[10], ids[17], ids[4]
        ),
    )
    .await;
    check(db, "dumps removed").await;
    run_sql(
        db,
        &format!(
            "UPDATE crashes SET dump_gone = NULL WHERE id = '{}'",
            ids[4]
        ),
    )
    .await;
    check(db, "a dump back").await;
    // every finished crash back in the queue in one statement (a reprocess enqueue)
    run_sql(
        db,
        "UPDATE crashes SET status = 'pending', attempts = 0 WHERE status IN ('done', 'failed')",
    )
    .await;
    check(db, "everything requeued at once").await;
    // deletes: one, then several in one statement
    run_sql(db, &format!("DELETE FROM crashes WHERE id = '{}'", ids[29])).await;
    check(db, "a delete").await;
    run_sql(
        db,
        &format!(
            "DELETE FROM crashes WHERE id IN ('{}', '{}', '{}')",
            ids[1], ids[2], ids[28]
        ),
    )
    .await;
    check(db, "three deletes at once").await;
    // a status that falls to 0 is left out, as a count of the crashes leaves it out
    run_sql(db, "DELETE FROM crashes WHERE status <> 'pending'").await;
    check(db, "every crash but the pending ones deleted").await;
}

/// Uploads and leases from several connections at once (PostgreSQL: each connection
/// writes its own shard of the counts).
async fn concurrent(db: &Db) {
    use futures::future::join_all;
    let uploads: Vec<NewCrash> = (0..64).map(|i| crash(5_000 + i)).collect();
    join_all(uploads.iter().map(|c| crashes::insert(db, c)))
        .await
        .into_iter()
        .for_each(|r| r.unwrap());
    check(db, "64 concurrent uploads").await;
    let leases = join_all((0..8).map(|w| {
        let worker = format!("w{w}");
        async move { crashes::lease_batch(db, &worker, 30_000, 60_000, 5, 4).await }
    }))
    .await;
    assert!(leases.iter().all(Result::is_ok));
    check(db, "8 concurrent leases").await;
}

/// 0034 on a store that had crashes of three statuses before it: its counts are theirs.
async fn backfill(db: &Db, dialect: &str) {
    let (before, this) = before_and(dialect, "0034");
    for sql in &before {
        run_sql(db, sql).await;
    }
    let mut values = Vec::new();
    for (i, status) in ["pending", "done", "done", "failed", "done"]
        .iter()
        .enumerate()
    {
        values.push(format!(
            "('b{i}', '{status}', {i}, '00', 1, 'elf-core', '{{}}', 0, 'default')"
        ));
    }
    insert_crashes(db, &values).await;
    run_sql(db, &this).await;
    check(db, "0034 on a store with crashes").await;
    assert_eq!(
        truth(db).await,
        [
            ("done".into(), 3),
            ("failed".into(), 1),
            ("pending".into(), 1)
        ]
    );
}

/// 0033 on a store that had every other migration (0034's counts among them) and
/// crashes of two projects: its counts are theirs, and 0034's table is gone.
async fn upgrade(db: &Db, dialect: &str) {
    let (others, this) = all_but(dialect, "0033");
    for sql in &others {
        run_sql(db, sql).await;
    }
    run_sql(
        db,
        "INSERT INTO projects (name, created_at) VALUES ('other', 0)",
    )
    .await;
    let mut values = Vec::new();
    for (i, status) in ["pending", "done", "done", "failed", "done", "processing"]
        .iter()
        .enumerate()
    {
        let project = if i % 2 == 0 { "other" } else { "default" };
        values.push(format!(
            "('u{i}', '{status}', {i}, '0{}', {}, 'elf-core', '{{}}', 0, '{project}')",
            i % 3,
            5 + i % 3
        ));
    }
    insert_crashes(db, &values).await;
    run_sql(
        db,
        "UPDATE crashes SET dump_gone = 'sampled' WHERE id = 'u2'",
    )
    .await;
    run_sql(db, &this).await;
    check(db, "0033 on an upgraded store with crashes").await;
    assert_eq!(
        dump_bytes(db).await,
        [("default".into(), 18), ("other".into(), 11)]
    );
    assert_eq!(truth_by_project(db).await.len(), 5);
    assert!(
        !has_status_counts(db, dialect).await,
        "0034's counts are dropped"
    );
    // and they are kept from then on
    run_sql(db, "UPDATE crashes SET status = 'done' WHERE id = 'u0'").await;
    run_sql(db, "DELETE FROM crashes WHERE id = 'u1'").await;
    check(db, "a change and a delete after 0033").await;
}

/// Whether 0034's `crash_status_counts` is there (0033 replaces it).
async fn has_status_counts(db: &Db, dialect: &str) -> bool {
    let sql = match dialect {
        "sqlite" => "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'crash_status_counts%'",
        _ => "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'crash_status_counts'",
    };
    let n: i64 = worker::on_pool!(db, p => sqlx::query_scalar(sql).fetch_one(p).await).unwrap();
    n > 0
}

async fn sqlite(dir: &tempfile::TempDir, name: &str) -> Db {
    Db::connect(&format!("sqlite://{}", dir.path().join(name).display()))
        .await
        .expect("sqlite connect")
}

#[tokio::test]
async fn status_counts_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = sqlite(&dir, "t.db").await;
    db.migrate().await.expect("sqlite migrate");
    // a new store: 0034 ran after 0033, and what it made is dropped
    assert!(!has_status_counts(&db, "sqlite").await);
    lifecycle(&db).await;
    concurrent(&db).await;
    db.close().await;
    let db = sqlite(&dir, "b.db").await;
    backfill(&db, "sqlite").await;
    db.close().await;
    let db = sqlite(&dir, "u.db").await;
    upgrade(&db, "sqlite").await;
    db.close().await;
}

#[tokio::test]
async fn status_counts_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_status").await else {
        return;
    };
    assert!(!has_status_counts(&db, "postgres").await);
    lifecycle(&db).await;
    concurrent(&db).await;
    db.close().await;
    common::drop_db(&name).await;
    let Some((name, url)) = common::pg_database("pm_status").await else {
        return;
    };
    let db = Db::connect(&url).await.expect("pg connect");
    backfill(&db, "postgres").await;
    db.close().await;
    common::drop_db(&name).await;
    let Some((name, url)) = common::pg_database("pm_status").await else {
        return;
    };
    let db = Db::connect(&url).await.expect("pg connect");
    upgrade(&db, "postgres").await;
    db.close().await;
    common::drop_db(&name).await;
}

/// Inserts crash rows given as SQL value tuples (id, status, received_at, dump_sha256,
/// dump_size, dump_format, annotations, attempts, project), as a store held them.
async fn insert_crashes(db: &Db, values: &[String]) {
    run_sql(
        db,
        &format!(
            "INSERT INTO crashes (id, status, received_at, dump_sha256, dump_size, \
             dump_format, annotations, attempts, project) VALUES {}",
            values.join(", ")
        ),
    )
    .await;
}
