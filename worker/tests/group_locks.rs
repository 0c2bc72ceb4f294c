//! A store's groups' locks on PostgreSQL (issue 40, migration 0043), seen from another
//! connection that holds one of them (`POSTMORTEM_SKIP_PG=1` skips these).
//!
//! - A first report waits for its group's lock inside its own `UPDATE` (the statement
//!   trigger before `crash_groups_added`), not before it: the statement another store
//!   waits in is the reports' `UPDATE`, so the reports and their index are written while
//!   another store of the same crash storm holds the group.
//! - A reprocessed crash, which leaves its old group through the row triggers that fire
//!   before any statement trigger, waits before its `UPDATE`, for its old group's lock.
//! - A lock on another signature holds up neither; a crash reprocessed into a signature
//!   merged into another group waits for that group's lock.
//!
//! - A decision that moves crashes between groups (a merge, undoing one, a split) takes
//!   the locks of the groups it moves them out of and into before it moves any; a
//!   crash's delete, its group's.
//!
//! Each store is run while the lock is held and must be seen waiting on an advisory lock
//! (`pg_stat_activity`); once the holder commits it must finish, with every rollup equal
//! to its recount.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::time::Duration;

use sqlx::{Connection, PgConnection};

use crate::common;
use crate::rollups::rollups_exact;

use worker::store::crashes::{self, NewCrash, Outcome, StoredReport};
use worker::store::dashboard as q;
use worker::store::groups;
use worker::store::Db;

const T0: i64 = 1_700_000_000_000;

/// A new pending crash of project `a`, received at `T0 + n` seconds.
async fn pending(db: &Db, n: i64) -> String {
    let id = crashes::new_id();
    let new = NewCrash {
        id: id.clone(),
        received_at: T0 + n * 1000,
        dump_sha256: "00".into(),
        dump_size: 1,
        dump_format: "elf-core".into(),
        annotations: "{}".into(),
        annotations_cut: None,
    };
    crashes::insert_in(db, &new, "a").await.unwrap();
    id
}

/// Leases crash `id` (the only one pending) and, in a task of its own, stores a report
/// with signature `sig`; the task says whether the lease was kept.
async fn store(db: &Db, id: &str, sig: &str) -> tokio::task::JoinHandle<bool> {
    let lease = crashes::lease(db, "w", T0 + 100_000, 600_000, 3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.id, id);
    let (db, sig) = (db.clone(), sig.to_string());
    tokio::spawn(async move {
        let report = r#"{"crash":{"analysis":{"kind":"abort"}}}"#.to_string();
        let outcome = Outcome::Done(StoredReport::from_json(report, Some(sig)));
        crashes::finish(&db, &lease, "w", T0 + 100_001, 3, &outcome)
            .await
            .unwrap()
    })
}

/// A connection to database `name` holding `sig`'s group lock in an open transaction.
async fn holder(name: &str, sig: &str) -> PgConnection {
    let mut c = PgConnection::connect(&common::pg_url(name)).await.unwrap();
    sqlx::query("BEGIN").execute(&mut c).await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(sig)
        .execute(&mut c)
        .await
        .unwrap();
    c
}

/// The statement a backend of database `name` waits in on an advisory lock, polled for
/// up to 20 s; None if none waited (the store finished or never got there).
async fn waiting_statement(watcher: &mut PgConnection, name: &str) -> Option<String> {
    for _ in 0..200 {
        let row: Option<(String,)> = sqlx::query_as(
            "SELECT query FROM pg_stat_activity WHERE datname = $1 \
             AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
        )
        .bind(name)
        .fetch_optional(&mut *watcher)
        .await
        .unwrap();
        if row.is_some() {
            return row.map(|(q,)| q);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Stores `id` with `sig` while `locked`'s group lock is held elsewhere: the store waits,
/// in a statement that holds `waits_in`, and finishes once the holder commits.
async fn waits_for(db: &Db, name: &str, id: &str, sig: &str, locked: &str, waits_in: &str) {
    let hold = holder(name, locked).await;
    let task = store(db, id, sig).await;
    let what = format!("the store of {sig}");
    let kept = ends_after_waiting(name, hold, task, &what, locked, waits_in).await;
    assert!(kept, "the report of {id} was stored");
}

/// `task`, run while `hold` holds `locked`'s group lock: it must be seen waiting on an
/// advisory lock in a statement that holds `waits_in`, and end once `hold` commits.
async fn ends_after_waiting<T>(
    name: &str,
    mut hold: PgConnection,
    task: tokio::task::JoinHandle<T>,
    what: &str,
    locked: &str,
    waits_in: &str,
) -> T {
    let mut watcher = PgConnection::connect(&common::pg_url(name)).await.unwrap();
    let statement = waiting_statement(&mut watcher, name).await;
    assert!(
        !task.is_finished(),
        "{what} did not wait for {locked}'s lock"
    );
    let statement = statement.expect("waiting on an advisory lock");
    assert!(
        statement.contains(waits_in),
        "{what} waited for {locked}'s lock in {statement:?}, not in {waits_in}"
    );
    sqlx::query("COMMIT").execute(&mut hold).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("it finished once the lock was given back")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_wait_for_their_groups_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_glocks").await else {
        return;
    };
    // a first report: it waits inside the reports' UPDATE
    let first = pending(&db, 1).await;
    waits_for(
        &db,
        &name,
        &first,
        "sig storm",
        "sig storm",
        "UPDATE crashes",
    )
    .await;
    rollups_exact(&db, "after a first report that waited").await;

    // a reprocessed crash: it waits before its UPDATE, for the group it leaves
    assert!(q::requeue(&db, &first).await.unwrap());
    waits_for(
        &db,
        &name,
        &first,
        "sig new",
        "sig storm",
        "SELECT pg_advisory",
    )
    .await;
    rollups_exact(&db, "after a reprocessed crash that waited").await;

    // another signature's lock holds up neither kind of store
    let mut hold = holder(&name, "sig unrelated").await;
    let second = pending(&db, 2).await;
    let task = store(&db, &second, "sig storm").await;
    assert!(tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .unwrap()
        .unwrap());
    assert!(q::requeue(&db, &first).await.unwrap());
    let task = store(&db, &first, "sig storm").await;
    assert!(tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .unwrap()
        .unwrap());
    sqlx::query("COMMIT").execute(&mut hold).await.unwrap();
    rollups_exact(&db, "after stores beside an unrelated lock").await;

    // a crash reprocessed into a signature merged into another group waits for that group
    let third = pending(&db, 3).await;
    assert!(store(&db, &third, "sig target").await.await.unwrap());
    groups::merge(&db, "a", "sig target", "sig storm")
        .await
        .unwrap();
    let fourth = pending(&db, 4).await;
    assert!(store(&db, &fourth, "sig other").await.await.unwrap());
    assert!(q::requeue(&db, &fourth).await.unwrap());
    waits_for(
        &db,
        &name,
        &fourth,
        "sig storm",
        "sig target",
        "SELECT pg_advisory_xact_lock",
    )
    .await;
    let row = crashes::get(&db, &fourth).await.unwrap().unwrap();
    assert_eq!(row.signature.as_deref(), Some("sig target"));
    rollups_exact(&db, "after a crash reprocessed into a merged group").await;

    db.close().await;
    common::drop_db(&name).await;
}

/// Runs `work` (a decision, a delete) while `locked`'s group lock is held elsewhere: it
/// waits on the lock, in its own `pg_advisory_xact_lock`, and ends once the holder
/// commits. What it gave.
async fn waits_on_lock<T, F>(name: &str, locked: &str, what: &str, work: F) -> T
where
    T: Send + 'static,
    F: std::future::Future<Output = T> + Send + 'static,
{
    let hold = holder(name, locked).await;
    let task = tokio::spawn(work);
    let waits_in = "pg_advisory_xact_lock";
    ends_after_waiting(name, hold, task, what, locked, waits_in).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_wait_for_their_groups_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_dlocks").await else {
        return;
    };
    let mut ids = Vec::new();
    for (n, sig) in [(1, "sig from"), (2, "sig from"), (3, "sig into")] {
        let id = pending(&db, n).await;
        assert!(store(&db, &id, sig).await.await.unwrap());
        ids.push(id);
    }
    // a merge waits for the group it fills (undoing it, below, for the one it fills
    // again: both groups of a decision are locked by one statement)
    let d = db.clone();
    let moved = waits_on_lock(&name, "sig into", "a merge", async move {
        groups::merge(&d, "a", "sig into", "sig from").await
    })
    .await
    .unwrap();
    assert_eq!(moved.crashes, 2);
    rollups_exact(&db, "after a merge that waited").await;

    // undoing it waits for the group it gives the crashes back to
    let d = db.clone();
    let moved = waits_on_lock(&name, "sig from", "undoing a merge", async move {
        groups::unmerge(&d, "a", "sig into", "sig from").await
    })
    .await
    .unwrap();
    assert_eq!(moved.crashes, 2);
    rollups_exact(&db, "after undoing a merge that waited").await;

    // a split waits for the group it makes
    let (d, first) = (db.clone(), ids[0].clone());
    let moved = waits_on_lock(&name, "sig split", "a split", async move {
        groups::split(&d, "a", "sig from", &[first], Some("sig split")).await
    })
    .await
    .unwrap();
    assert_eq!((moved.group.as_str(), moved.crashes), ("sig split", 1));
    rollups_exact(&db, "after a split that waited").await;

    // deleting a crash waits for the group it leaves; another project's caller naming
    // the crash does not wait (nor learn that it exists)
    let audit = |id: &str, project: &str| worker::store::audit::Entry {
        at: T0,
        token: "none".into(),
        project: Some(project.into()),
        action: "delete-crash".into(),
        route: "DELETE /api/v1/crashes/{id}".into(),
        target: Some(id.into()),
        detail: None,
    };
    let mut hold = holder(&name, "sig into").await;
    let entry = audit(&ids[2], "b");
    let other = worker::store::delete::crash(&db, &ids[2], Some("b"), &entry);
    let other = tokio::time::timeout(Duration::from_secs(5), other)
        .await
        .expect("another project's delete must not wait for the group's lock");
    assert!(other.unwrap().is_none());
    sqlx::query("COMMIT").execute(&mut hold).await.unwrap();
    let (d, first) = (db.clone(), ids[0].clone());
    let entry = audit(&first, "a");
    let deleted = waits_on_lock(&name, "sig split", "a delete", async move {
        worker::store::delete::crash(&d, &first, Some("a"), &entry).await
    })
    .await;
    assert!(deleted.unwrap().is_some(), "the crash was deleted");
    rollups_exact(&db, "after a delete that waited").await;

    db.close().await;
    common::drop_db(&name).await;
}
