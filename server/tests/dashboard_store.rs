//! The dashboard's store queries (migration 0002), each run on SQLite and on PostgreSQL
//! (a fresh database on 127.0.0.1:5432, dropped afterwards; `POSTMORTEM_SKIP_PG=1` skips
//! it when PostgreSQL is absent): groups by signature with keyset pages and filters,
//! product/version filled from annotations by the trigger, daily counts, requeue.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use worker::store::crashes::{self, NewCrash, Outcome};
use worker::store::dashboard::{self as q, GroupQuery};
use worker::store::Db;

const PG_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const DAY: i64 = 86_400_000;

async fn sqlite() -> (Db, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::connect(&format!("sqlite://{}", dir.path().join("t.db").display()))
        .await
        .expect("sqlite connect");
    db.migrate().await.expect("sqlite migrate");
    (db, dir)
}

async fn pg_exec(sql: String) -> bool {
    let admin = match Db::connect(PG_ADMIN_URL).await {
        Ok(db) => db,
        Err(e) => {
            if std::env::var("POSTMORTEM_SKIP_PG").as_deref() == Ok("1") {
                eprintln!("PostgreSQL unreachable ({e}); skipped (POSTMORTEM_SKIP_PG=1)");
                return false;
            }
            panic!(
                "PostgreSQL unreachable at {PG_ADMIN_URL}: {e}. Set POSTMORTEM_SKIP_PG=1 to skip"
            );
        }
    };
    let worker::store::Backend::Postgres(pool) = admin.backend() else {
        unreachable!()
    };
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(pool)
        .await
        .expect("admin statement");
    admin.close().await;
    true
}

/// Inserts a crash received at `at` with annotations and finishes it with `signature`.
async fn crash(db: &Db, at: i64, annotations: &str, signature: Option<&str>) -> String {
    let id = crashes::new_id();
    crashes::insert(
        db,
        &NewCrash {
            id: id.clone(),
            received_at: at,
            dump_sha256: "00".into(),
            dump_size: 1,
            dump_format: "elf-core".into(),
            annotations: annotations.into(),
        },
    )
    .await
    .unwrap();
    let lease = crashes::lease(db, "w", at, 60_000, 3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.id, id);
    let outcome = match signature {
        Some(s) => Outcome::Done {
            report: "{}".into(),
            signature: Some(s.into()),
        },
        None => Outcome::Failed {
            reason: "unreadable".into(),
        },
    };
    assert!(crashes::finish(db, &lease, "w", at + 1, 3, &outcome)
        .await
        .unwrap());
    id
}

async fn groups_and_requeue(db: &Db) {
    let t0 = 1_700_000_000_000i64 / DAY * DAY;
    let app1 = r#"{"prod":"app","ver":"1.0"}"#;
    let app2 = r#"{"product":"app","version":"2.0"}"#;
    let other = r#"{"prod":"other","ver":"1.0"}"#;
    crash(db, t0, app1, Some("a | main")).await;
    crash(db, t0 + DAY, app2, Some("a | main")).await;
    crash(db, t0 + 2 * DAY, app1, Some("a | main")).await;
    crash(db, t0 + DAY, other, Some("b | main")).await;
    crash(db, t0 + 3 * DAY, "{}", Some("c")).await;
    crash(db, t0 + 3 * DAY, "not json", Some("d")).await;
    let failed = crash(db, t0, app1, None).await;

    // All groups, in signature order, in pages of 2: keyset continues after the last.
    let mut query = GroupQuery {
        limit: 2,
        ..GroupQuery::default()
    };
    let p1 = q::groups(db, &query).await.unwrap();
    assert_eq!(
        p1.iter().map(|g| g.signature.as_str()).collect::<Vec<_>>(),
        ["a | main", "b | main"]
    );
    assert_eq!(
        (p1[0].count, p1[0].first_seen, p1[0].last_seen),
        (3, t0, t0 + 2 * DAY)
    );
    query.after = Some(p1[1].signature.clone());
    let p2 = q::groups(db, &query).await.unwrap();
    assert_eq!(
        p2.iter().map(|g| g.signature.as_str()).collect::<Vec<_>>(),
        ["c", "d"]
    );
    query.after = Some("d".into());
    assert!(q::groups(db, &query).await.unwrap().is_empty());

    // Filters: product and version (from either annotation spelling), time range.
    let by = |product: Option<&str>, version: Option<&str>, since: Option<i64>| GroupQuery {
        product: product.map(str::to_string),
        version: version.map(str::to_string),
        since,
        limit: 10,
        ..GroupQuery::default()
    };
    let g = q::groups(db, &by(Some("app"), None, None)).await.unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].count, 3);
    let g = q::groups(db, &by(Some("app"), Some("2.0"), None))
        .await
        .unwrap();
    assert_eq!((g.len(), g[0].count), (1, 1));
    let g = q::groups(db, &by(None, Some("1.0"), None)).await.unwrap();
    assert_eq!(g.len(), 2, "{g:?}");
    let g = q::groups(db, &by(None, None, Some(t0 + 2 * DAY)))
        .await
        .unwrap();
    assert_eq!(
        g.iter()
            .map(|g| (g.signature.as_str(), g.count))
            .collect::<Vec<_>>(),
        [("a | main", 1), ("c", 1), ("d", 1)]
    );

    // Daily counts and products of one group.
    let days = q::group_days(db, "a | main", t0, t0 + 10 * DAY)
        .await
        .unwrap();
    let per_day: Vec<(i64, i64)> = days.iter().map(|d| (d.day - t0 / DAY, d.count)).collect();
    assert_eq!(per_day, [(0, 1), (1, 1), (2, 1)]);
    let products = q::group_products(db, "a | main", 10).await.unwrap();
    assert_eq!(
        products,
        [
            (Some("app".into()), Some("1.0".into())),
            (Some("app".into()), Some("2.0".into()))
        ]
    );
    assert_eq!(
        q::product_of(db, &failed).await.unwrap(),
        Some((Some("app".into()), Some("1.0".into())))
    );

    // Failures and requeue.
    let f = q::failures(db, 10).await.unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].error.as_deref(), Some("unreadable"));
    assert!(q::requeue(db, &failed).await.unwrap());
    let row = crashes::get(db, &failed).await.unwrap().unwrap();
    assert_eq!(
        (row.status.as_str(), row.attempts, row.error),
        ("pending", 0, None)
    );
    // Already pending: nothing to do; unknown id: false.
    assert!(!q::requeue(db, &failed).await.unwrap());
    assert!(!q::requeue(db, "nope").await.unwrap());
}

#[tokio::test]
async fn groups_and_requeue_sqlite() {
    let (db, _dir) = sqlite().await;
    groups_and_requeue(&db).await;
    db.close().await;
}

#[tokio::test]
async fn groups_and_requeue_postgres() {
    let name = format!("pm_dash_{}", crashes::new_id());
    if !pg_exec(format!("CREATE DATABASE {name}")).await {
        return;
    }
    let db = Db::connect(&format!("postgres://postgres@127.0.0.1:5432/{name}"))
        .await
        .expect("pg connect");
    db.migrate().await.expect("pg migrate");
    groups_and_requeue(&db).await;
    db.close().await;
    pg_exec(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
}
