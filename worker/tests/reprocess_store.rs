//! The reprocess store queries (migration 0004) on SQLite and on PostgreSQL (a fresh
//! database on 127.0.0.1:5432, dropped afterwards; `POSTMORTEM_SKIP_PG=1` skips it):
//! filters, keyset batches, resuming a run, progress and the summary.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use crate::common;

use worker::store::crashes::{self, NewCrash, Outcome, StoredReport};
use worker::store::reprocess::{self, Filter};
use worker::store::{missing, Db};

/// A report with `named` of its 3 frames named.
fn report(named: usize) -> String {
    let frames: Vec<_> = (0..3)
        .map(|i| serde_json::json!({ "index": i, "function": (i < named).then_some("f") }))
        .collect();
    serde_json::json!({ "threads": [{ "frames": frames }] }).to_string()
}

/// Inserts a crash at `at` and finishes it (done with `signature`, or failed).
async fn crash(db: &Db, at: i64, signature: Option<&str>, named: usize) -> String {
    let id = crashes::new_id();
    crashes::insert(
        db,
        &NewCrash {
            id: id.clone(),
            received_at: at,
            dump_sha256: "00".into(),
            dump_size: 1,
            dump_format: "elf-core".into(),
            annotations: "{}".into(),
            annotations_cut: None,
        },
    )
    .await
    .unwrap();
    finish_next(db, at, signature, named).await;
    id
}

/// Leases the next job and finishes it.
async fn finish_next(db: &Db, at: i64, signature: Option<&str>, named: usize) -> String {
    let lease = crashes::lease(db, "w", at, 60_000, 3)
        .await
        .unwrap()
        .unwrap();
    let outcome = match signature {
        Some(s) => Outcome::Done(StoredReport::from_json(report(named), Some(s.into()))),
        None => Outcome::Failed {
            reason: "unreadable".into(),
        },
    };
    assert!(crashes::finish(db, &lease, "w", at + 1, 3, &outcome)
        .await
        .unwrap());
    lease.id
}

async fn scenario(db: &Db) {
    let t0 = 1_700_000_000_000i64;
    let a1 = crash(db, t0, Some("a"), 0).await;
    let _a2 = crash(db, t0 + 1, Some("a"), 1).await;
    let _b = crash(db, t0 + 2, Some("b"), 3).await;
    let failed = crash(db, t0 + 3, None, 0).await;
    missing::record(db, "abcd", &a1, "libx.so").await.unwrap();

    // Filters.
    let count = |f: Filter| async move { reprocess::count_remaining(db, "", &f).await.unwrap() };
    assert!(Filter::default().check().is_err());
    let all = Filter {
        all: true,
        ..Filter::default()
    };
    assert_eq!(count(all.clone()).await, 4);
    let sig_a = Filter {
        signature: Some("a".into()),
        ..Filter::default()
    };
    assert_eq!(count(sig_a.clone()).await, 2);
    assert_eq!(
        count(Filter {
            status: Some("failed".into()),
            ..Filter::default()
        })
        .await,
        1
    );
    assert_eq!(
        count(Filter {
            missing_only: true,
            ..Filter::default()
        })
        .await,
        1
    );
    assert_eq!(
        count(Filter {
            build_id: Some("ABCD".into()),
            ..Filter::default()
        })
        .await,
        1
    );
    assert_eq!(
        count(Filter {
            since: Some(t0 + 1),
            until: Some(t0 + 3),
            ..Filter::default()
        })
        .await,
        2
    );
    assert!(Filter {
        build_id: Some("x'".into()),
        ..Filter::default()
    }
    .check()
    .is_err());

    // A run over everything, batches of 3 by keyset; "interrupted" after the first batch.
    let run = reprocess::start_run(db, &all).await.unwrap();
    assert!(!run.resumed);
    let (n, cursor) = reprocess::enqueue_batch(db, &run.id, &all, None, 3)
        .await
        .unwrap();
    assert_eq!(n, 3);
    assert!(cursor.is_some());
    assert_eq!(reprocess::progress(db, &run.id).await.unwrap(), (3, 0));
    assert_eq!(
        reprocess::count_remaining(db, &run.id, &all).await.unwrap(),
        1
    );
    // Process one, then "restart": the same filter resumes the run; the queued crashes are
    // not queued again, only the one left.
    finish_next(db, t0 + 10, Some("a2"), 3).await;
    let again = reprocess::start_run(db, &all).await.unwrap();
    assert_eq!(
        again,
        reprocess::Run {
            id: run.id.clone(),
            resumed: true
        }
    );
    let (n, _) = reprocess::enqueue_batch(db, &run.id, &all, None, 3)
        .await
        .unwrap();
    assert_eq!(n, 1, "a resumed run queued its crashes twice");
    let (n, _) = reprocess::enqueue_batch(db, &run.id, &all, None, 3)
        .await
        .unwrap();
    assert_eq!(n, 0);
    assert_eq!(reprocess::progress(db, &run.id).await.unwrap(), (3, 1));
    // Finish the rest: two keep their signature, one (the failed one) now has one.
    finish_next(db, t0 + 11, Some("a"), 1).await;
    finish_next(db, t0 + 12, Some("b"), 3).await;
    finish_next(db, t0 + 13, Some("c"), 0).await;
    assert_eq!(reprocess::progress(db, &run.id).await.unwrap(), (0, 4));
    let s = reprocess::summary(db, &run.id).await.unwrap();
    assert_eq!(s.finished, 4);
    assert_eq!(s.failed, 0);
    // a1: a → a2 (0 → 3 named); a2: a → a (1 → 1); b: b → b; failed: NULL → c.
    assert_eq!(s.signature_changed, 2);
    assert_eq!(s.gained_frames, 1);
    let row = crashes::get(db, &a1).await.unwrap().unwrap();
    assert_eq!(row.previous_signature.as_deref(), Some("a"));
    assert_eq!(row.signature.as_deref(), Some("a2"));
    let row = crashes::get(db, &failed).await.unwrap().unwrap();
    assert_eq!(row.status, "done");
    reprocess::finish_run(db, &run.id).await.unwrap();
    assert!(!reprocess::start_run(db, &all).await.unwrap().resumed);
}

#[tokio::test]
async fn reprocess_store_sqlite() {
    let (_dir, db) = common::sqlite_migrated().await;
    scenario(&db).await;
    db.close().await;
}

#[tokio::test]
async fn reprocess_store_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_reprocess").await else {
        return;
    };
    scenario(&db).await;
    db.close().await;
    common::drop_db(&name).await;
}
