//! Store tests, each run on SQLite and on PostgreSQL (a fresh, uniquely named database
//! created on 127.0.0.1:5432 and dropped afterwards). Without PostgreSQL the tests fail,
//! saying why, unless `POSTMORTEM_SKIP_PG=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use worker::store::binaries::{self, BinaryRow};
use worker::store::crashes::{self, ListQuery, NewCrash, Outcome, StoredReport};
use worker::store::{breakpad_used, missing, tables, Db};

const PG_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A database for one test; the PostgreSQL one is dropped by `finish`.
struct TestDb {
    db: Db,
    pg_name: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    async fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let db = Db::connect(&url).await.expect("sqlite connect");
        db.migrate().await.expect("sqlite migrate");
        TestDb {
            db,
            pg_name: None,
            _dir: Some(dir),
        }
    }

    async fn postgres() -> Option<TestDb> {
        let admin = match Db::connect(PG_ADMIN_URL).await {
            Ok(db) => db,
            Err(e) => {
                if std::env::var("POSTMORTEM_SKIP_PG").as_deref() == Ok("1") {
                    eprintln!("PostgreSQL unreachable at {PG_ADMIN_URL} ({e}); skipped (POSTMORTEM_SKIP_PG=1)");
                    return None;
                }
                panic!("PostgreSQL unreachable at {PG_ADMIN_URL}: {e}. Start it, or set POSTMORTEM_SKIP_PG=1 to skip");
            }
        };
        let name = format!("pm_test_{}", crashes::new_id());
        let worker::store::Backend::Postgres(pool) = admin.backend() else {
            unreachable!()
        };
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(pool)
            .await
            .expect("create database");
        admin.close().await;
        let db = Db::connect(&crate::common::pg_url(&name))
            .await
            .expect("pg connect");
        db.migrate().await.expect("pg migrate");
        Some(TestDb {
            db,
            pg_name: Some(name),
            _dir: None,
        })
    }

    async fn finish(self) {
        self.db.close().await;
        if let Some(name) = self.pg_name {
            let admin = Db::connect(PG_ADMIN_URL).await.expect("pg admin");
            let worker::store::Backend::Postgres(pool) = admin.backend() else {
                unreachable!()
            };
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
            )))
            .execute(pool)
            .await
            .expect("drop database");
            admin.close().await;
        }
    }
}

/// Runs `$body` (an async fn taking `&Db`) on both backends.
macro_rules! both {
    ($sqlite:ident, $pg:ident, $body:path) => {
        #[tokio::test]
        async fn $sqlite() {
            let t = TestDb::sqlite().await;
            $body(&t.db).await;
            t.finish().await;
        }
        #[tokio::test]
        async fn $pg() {
            let Some(t) = TestDb::postgres().await else {
                return;
            };
            $body(&t.db).await;
            t.finish().await;
        }
    };
}

fn crash(id: &str, at: i64) -> NewCrash {
    NewCrash {
        id: id.into(),
        received_at: at,
        dump_sha256: "ab".repeat(32),
        dump_size: 10,
        dump_format: "elf-core".into(),
        annotations: r#"{"prod":"x"}"#.into(),
        annotations_cut: None,
    }
}

async fn lease_and_finish(db: &Db) {
    crashes::insert(db, &crash("c1", 1000)).await.unwrap();
    let l = crashes::lease(db, "w1", 5000, 60_000, 3)
        .await
        .unwrap()
        .expect("a job");
    assert_eq!((l.id.as_str(), l.attempts), ("c1", 1));
    assert!(
        crashes::lease(db, "w2", 5000, 60_000, 3)
            .await
            .unwrap()
            .is_none(),
        "leased twice"
    );
    let done = Outcome::Done(StoredReport::from_json("{}".into(), Some("sig".into())));
    assert!(crashes::finish(db, &l, "w1", 6000, 3, &done).await.unwrap());
    let row = crashes::get(db, "c1").await.unwrap().unwrap();
    assert_eq!(row.status, "done");
    assert_eq!(row.processing_ms, Some(1000));
    assert_eq!(
        row.processing_us,
        Some(1_000_000),
        "the time since the lease, in µs"
    );
    assert_eq!(row.signature.as_deref(), Some("sig"));
}
both!(
    lease_and_finish_sqlite,
    lease_and_finish_postgres,
    lease_and_finish
);

/// A batch: leased in queue order, each job once; finished in one transaction, where a
/// job whose lease was lost is left alone and only the stored reports are indexed.
async fn batch_lease_and_finish(db: &Db) {
    for (i, id) in ["c1", "c2", "c3", "c4", "c5"].iter().enumerate() {
        crashes::insert(db, &crash(id, 1000 + i as i64))
            .await
            .unwrap();
    }
    let first = crashes::lease_batch(db, "w1", 5000, 60_000, 3, 3)
        .await
        .unwrap();
    let ids: Vec<&str> = first.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3"]);
    let rest = crashes::lease_batch(db, "w2", 5000, 60_000, 3, 10)
        .await
        .unwrap();
    let ids: Vec<&str> = rest.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(ids, ["c4", "c5"], "the rest, none twice");
    let report = |f: &str| {
        Outcome::Done(StoredReport::from_json(
            format!(
                r#"{{"modules":[{{"name":"/lib/libc.so.6"}}],"threads":[{{"frames":[{{"function":"{f}"}},{{"function":"main"}}]}}]}}"#
            ),
            Some(format!("sig {f}")),
        ))
    };
    let (a, failed, b) = (
        report("Crash_Here"),
        Outcome::Failed {
            reason: "bad dump".into(),
        },
        report("other"),
    );
    // c3's lease was lost (another attempt holds it)
    let mut lost = first[2].clone();
    lost.attempts += 1;
    let jobs = [
        crashes::Finished {
            lease: &first[0],
            outcome: &a,
            processing_us: Some(7_450),
        },
        crashes::Finished {
            lease: &first[1],
            outcome: &failed,
            processing_us: Some(850),
        },
        crashes::Finished {
            lease: &lost,
            outcome: &b,
            processing_us: Some(5_000),
        },
    ];
    let kept = crashes::finish_batch(db, "w1", 6000, 3, &jobs)
        .await
        .unwrap();
    assert_eq!(kept, [true, true, false]);
    let row = crashes::get(db, "c1").await.unwrap().unwrap();
    assert_eq!(
        (
            row.status.as_str(),
            row.processing_ms,
            row.processing_us,
            row.signature.as_deref()
        ),
        ("done", Some(7), Some(7_450), Some("sig Crash_Here")),
        "the job's own time, in whole ms and exactly in µs"
    );
    let row = crashes::get(db, "c2").await.unwrap().unwrap();
    assert_eq!(
        (row.status.as_str(), row.processing_ms, row.processing_us),
        ("failed", Some(0), Some(850)),
        "a sub-millisecond job is 0 ms, and its µs are kept"
    );
    assert_eq!(
        crashes::get(db, "c3").await.unwrap().unwrap().status,
        "processing"
    );
    let terms = |id: &'static str| async move {
        let sql =
            "SELECT s.kind, s.term FROM crash_terms c JOIN search_terms s ON s.id = c.term_id \
                   WHERE c.crash_id = $1 ORDER BY s.kind, s.term";
        let rows: Vec<(String, String)> = match db.backend() {
            worker::store::Backend::Sqlite(p) => sqlx::query_as(sql).bind(id).fetch_all(p).await,
            worker::store::Backend::Postgres(p) => sqlx::query_as(sql).bind(id).fetch_all(p).await,
        }
        .unwrap();
        rows
    };
    let want: Vec<(String, String)> = [
        ("function", "crash_here"),
        ("function", "main"),
        ("module", "libc.so.6"),
    ]
    .iter()
    .map(|(k, t)| (k.to_string(), t.to_string()))
    .collect();
    assert_eq!(terms("c1").await, want);
    assert!(
        terms("c3").await.is_empty(),
        "a lost job's report is not indexed"
    );
    // a second batch sharing terms with the first inserts no term twice
    let d = report("main");
    let jobs = [crashes::Finished {
        lease: &rest[0],
        outcome: &d,
        processing_us: None,
    }];
    assert_eq!(
        crashes::finish_batch(db, "w2", 6500, 3, &jobs)
            .await
            .unwrap(),
        [true]
    );
    let row = crashes::get(db, "c4").await.unwrap().unwrap();
    assert_eq!(
        (row.processing_ms, row.processing_us),
        (Some(1500), Some(1_500_000))
    );
    assert_eq!(terms("c4").await.len(), 2);
    let count = "SELECT COUNT(*) FROM search_terms";
    let n: i64 = match db.backend() {
        worker::store::Backend::Sqlite(p) => sqlx::query_scalar(count).fetch_one(p).await,
        worker::store::Backend::Postgres(p) => sqlx::query_scalar(count).fetch_one(p).await,
    }
    .unwrap();
    assert_eq!(n, 3, "crash_here, main, libc.so.6");
}
both!(
    batch_lease_and_finish_sqlite,
    batch_lease_and_finish_postgres,
    batch_lease_and_finish
);

/// A batch of more reports than one statement stores (`finish_batch` writes them in
/// chunks): each crash gets its own report, signature, frames, summary, kind and time, a
/// merged signature goes to its group, a lost lease stores nothing, and each group counts
/// its crashes (`crash_groups`, by its definition: the crashes with that signature).
async fn many_reports_in_one_batch(db: &Db) {
    let annotated = |id: String, at: i64| NewCrash {
        annotations: r#"{"prod":"App","ver":"1.0"}"#.into(),
        ..crash(&id, at)
    };
    for i in 0..230 {
        crashes::insert(db, &annotated(format!("c{i:03}"), 1000 + i))
            .await
            .unwrap();
    }
    let report = |i: i64, sig: &str| {
        Outcome::Done(StoredReport::from_json(
            format!(
                r#"{{"crash":{{"analysis":{{"kind":"k{}","summary":"s{i}"}}}},"threads":[{{"frames":[{{"function":"f{i}"}},{{"function":"main"}}]}}]}}"#,
                i % 2
            ),
            Some(sig.into()),
        ))
    };
    // two groups, then one merged into the other
    let first = crashes::lease_batch(db, "w", 5000, 60_000, 3, 2)
        .await
        .unwrap();
    for (lease, sig) in first.iter().zip(["sig a", "sig b"]) {
        let done = report(0, sig);
        assert!(crashes::finish(db, lease, "w", 5000, 3, &done)
            .await
            .unwrap());
    }
    worker::store::groups::merge(db, "default", "sig b", "sig a")
        .await
        .unwrap();
    let mut leases = crashes::lease_batch(db, "w", 6000, 60_000, 3, 500)
        .await
        .unwrap();
    assert_eq!(leases.len(), 228);
    leases[150].attempts += 1; // lost: another attempt holds it
    let sig = |i: i64| {
        if i % 3 == 0 {
            "sig a".to_string()
        } else {
            format!("sig {}", i % 5)
        }
    };
    let outcomes: Vec<Outcome> = (0..228).map(|i| report(i, &sig(i))).collect();
    let jobs: Vec<crashes::Finished> = leases
        .iter()
        .zip(&outcomes)
        .zip(0..)
        .map(|((lease, outcome), i)| crashes::Finished {
            lease,
            outcome,
            processing_us: Some(i * 1000 + 7),
        })
        .collect();
    let kept = crashes::finish_batch(db, "w", 7000, 3, &jobs)
        .await
        .unwrap();
    assert_eq!(kept, (0..228).map(|i| i != 150).collect::<Vec<_>>());
    for (i, lease) in (0..228).zip(&leases) {
        let row = crashes::get(db, &lease.id).await.unwrap().unwrap();
        // the search index holds the stored reports, and nothing of the lost lease's
        let sql = "SELECT COUNT(*) FROM crash_terms t JOIN search_terms s ON s.id = t.term_id \
                   WHERE t.crash_id = $1 AND s.term = $2";
        let linked: i64 = match db.backend() {
            worker::store::Backend::Sqlite(p) => {
                sqlx::query_scalar(sql)
                    .bind(&lease.id)
                    .bind(format!("f{i}"))
                    .fetch_one(p)
                    .await
            }
            worker::store::Backend::Postgres(p) => {
                sqlx::query_scalar(sql)
                    .bind(&lease.id)
                    .bind(format!("f{i}"))
                    .fetch_one(p)
                    .await
            }
        }
        .unwrap();
        assert_eq!(linked, i64::from(i != 150), "crash {i}'s function term");
        if i == 150 {
            assert_eq!((row.status.as_str(), row.report), ("processing", None));
            continue;
        }
        let group = if i % 3 == 0 {
            "sig b".to_string()
        } else {
            sig(i)
        };
        assert_eq!(
            (
                row.status.as_str(),
                row.computed_signature,
                row.signature,
                row.processing_ms,
                row.processing_us,
                row.finished_at,
            ),
            (
                "done",
                Some(sig(i)),
                Some(group),
                Some(i),
                Some(i * 1000 + 7),
                Some(7000)
            ),
            "crash {i}"
        );
        let sql = "SELECT function_frames, analysis_kind, product, version FROM crashes \
                   WHERE id = $1";
        type Columns = (Option<i64>, Option<String>, Option<String>, Option<String>);
        let columns: Columns = match db.backend() {
            worker::store::Backend::Sqlite(p) => {
                sqlx::query_as(sql).bind(&lease.id).fetch_one(p).await
            }
            worker::store::Backend::Postgres(p) => {
                sqlx::query_as(sql).bind(&lease.id).fetch_one(p).await
            }
        }
        .unwrap();
        let kind = format!("k{}", i % 2);
        assert_eq!(
            columns,
            (Some(2), Some(kind), Some("App".into()), Some("1.0".into())),
            "crash {i}"
        );
        assert!(row.report.unwrap().contains(&format!(r#""f{i}""#)));
        let summary = crashes::summary(db, &lease.id).await.unwrap().unwrap();
        assert_eq!(
            summary.analysis_summary.as_deref(),
            Some(format!("s{i}").as_str())
        );
    }
    let sql = "SELECT g.signature, g.count, (SELECT COUNT(*) FROM crashes c \
               WHERE c.signature = g.signature AND c.project = g.project) \
               FROM crash_groups g ORDER BY g.signature";
    let groups: Vec<(String, i64, i64)> = match db.backend() {
        worker::store::Backend::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await,
        worker::store::Backend::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await,
    }
    .unwrap();
    assert_eq!(groups.len(), 6, "{groups:?}"); // sig 0..4 and sig b; sig a merged away
    for (name, count, crashes) in groups {
        assert_eq!(count, crashes, "group {name}");
    }
}
both!(
    many_reports_in_one_batch_sqlite,
    many_reports_in_one_batch_postgres,
    many_reports_in_one_batch
);

/// SQLite: an upload's row is written once (migration 0031). Its product and version are
/// those of its annotations (`prod`/`ver`, else `product`/`version`: 0002's definition)
/// without the trigger rewriting the row, which it still does for a row inserted
/// without them; and the reprocess selection of a signature is counted from its index
/// alone (`EXPLAIN QUERY PLAN`), not from each crash's row.
#[tokio::test]
async fn an_upload_is_written_once_sqlite() {
    let t = TestDb::sqlite().await;
    let worker::store::Backend::Sqlite(p) = t.db.backend() else {
        unreachable!()
    };
    sqlx::raw_sql(
        "CREATE TABLE rewrites (id TEXT); \
         CREATE TRIGGER rewrites AFTER UPDATE OF product, version ON crashes \
         BEGIN INSERT INTO rewrites VALUES (NEW.id); END;",
    )
    .execute(p)
    .await
    .unwrap();
    for (id, annotations) in [
        ("c1", r#"{"prod":"App","ver":"1.0"}"#),
        ("c2", r#"{"product":"Tool","version":"2.0"}"#),
        ("c3", "not json"),
    ] {
        let c = NewCrash {
            annotations: annotations.into(),
            ..crash(id, 1000)
        };
        crashes::insert(&t.db, &c).await.unwrap();
    }
    sqlx::query(
        "INSERT INTO crashes (id, status, received_at, dump_sha256, dump_size, dump_format, \
         annotations, attempts, project) VALUES ('c4', 'pending', 1, 'ab', 1, 'elf-core', \
         '{\"prod\":\"Raw\"}', 0, 'default')",
    )
    .execute(p)
    .await
    .unwrap();
    let rows: Vec<(String, Option<String>, Option<String>)> =
        sqlx::query_as("SELECT id, product, version FROM crashes ORDER BY id")
            .fetch_all(p)
            .await
            .unwrap();
    let want = [
        ("c1", Some("App"), Some("1.0")),
        ("c2", Some("Tool"), Some("2.0")),
        ("c3", None, None),
        ("c4", Some("Raw"), None),
    ];
    let want: Vec<(String, Option<String>, Option<String>)> = want
        .iter()
        .map(|(i, p, v)| (i.to_string(), p.map(String::from), v.map(String::from)))
        .collect();
    assert_eq!(rows, want);
    let rewritten: Vec<String> = sqlx::query_scalar("SELECT id FROM rewrites ORDER BY id")
        .fetch_all(p)
        .await
        .unwrap();
    assert_eq!(rewritten, ["c4"], "only the row inserted without them");
    let filter = worker::store::reprocess::Filter {
        signature: Some("sig".into()),
        ..Default::default()
    };
    assert_eq!(
        worker::store::reprocess::count_remaining(&t.db, "run", &filter)
            .await
            .unwrap(),
        0
    );
    let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(
        "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM crashes WHERE status IN ('done', 'failed') \
         AND dump_gone IS NULL AND (reprocess_run IS NULL OR reprocess_run <> $1) \
         AND signature = $2",
    )
    .bind("run")
    .bind("sig")
    .fetch_all(p)
    .await
    .unwrap();
    let plan: Vec<&str> = plan.iter().map(|r| r.3.as_str()).collect();
    assert!(
        plan.iter()
            .any(|s| s.contains("COVERING INDEX crashes_reprocessable")),
        "{plan:?}"
    );
    t.finish().await;
}

/// A job leased by a worker that died is picked up again once the lease expires, and
/// the dead worker can no longer finish it.
async fn lease_expiry(db: &Db) {
    crashes::insert(db, &crash("c1", 1000)).await.unwrap();
    let dead = crashes::lease(db, "dead", 5000, 1000, 3)
        .await
        .unwrap()
        .expect("a job");
    assert!(
        crashes::lease(db, "alive", 5500, 1000, 3)
            .await
            .unwrap()
            .is_none(),
        "lease not yet expired"
    );
    let again = crashes::lease(db, "alive", 7000, 1000, 3)
        .await
        .unwrap()
        .expect("expired lease returns");
    assert_eq!((again.id.as_str(), again.attempts), ("c1", 2));
    let done = Outcome::Done(StoredReport::from_json("{}".into(), None));
    assert!(
        !crashes::finish(db, &dead, "dead", 7100, 3, &done)
            .await
            .unwrap(),
        "a lost lease must not finish"
    );
    assert!(crashes::finish(db, &again, "alive", 7200, 3, &done)
        .await
        .unwrap());
    assert_eq!(
        crashes::get(db, "c1").await.unwrap().unwrap().status,
        "done"
    );
}
both!(lease_expiry_sqlite, lease_expiry_postgres, lease_expiry);

/// Attempts are bounded: after the last expired lease the job ends failed with a reason.
async fn attempts_bounded(db: &Db) {
    crashes::insert(db, &crash("c1", 1000)).await.unwrap();
    let mut now = 2000;
    for attempt in 1..=2 {
        let l = crashes::lease(db, "w", now, 100, 2)
            .await
            .unwrap()
            .expect("a job");
        assert_eq!(l.attempts, attempt);
        now += 1000;
    }
    assert!(crashes::lease(db, "w", now, 100, 2)
        .await
        .unwrap()
        .is_none());
    assert_eq!(crashes::fail_exhausted(db, now, 2).await.unwrap(), 1);
    let row = crashes::get(db, "c1").await.unwrap().unwrap();
    assert_eq!(row.status, "failed");
    assert!(row.error.unwrap().contains("gave up after 2 attempts"));
    // A transient failure on the last attempt fails too; earlier ones requeue.
    crashes::insert(db, &crash("c2", 1000)).await.unwrap();
    let l = crashes::lease(db, "w", now, 100, 2).await.unwrap().unwrap();
    let retry = Outcome::Retry {
        reason: "db hiccup".into(),
    };
    assert!(crashes::finish(db, &l, "w", now, 2, &retry).await.unwrap());
    assert_eq!(
        crashes::get(db, "c2").await.unwrap().unwrap().status,
        "pending"
    );
}
both!(
    attempts_bounded_sqlite,
    attempts_bounded_postgres,
    attempts_bounded
);

async fn keyset_listing(db: &Db) {
    for i in 0..5 {
        crashes::insert(db, &crash(&format!("c{i}"), 1000 + i64::from(i / 2)))
            .await
            .unwrap();
    }
    let mut q = ListQuery {
        limit: 2,
        ..Default::default()
    };
    let mut seen = Vec::new();
    loop {
        let page = crashes::list(db, &q).await.unwrap();
        if page.is_empty() {
            break;
        }
        let last = page.last().unwrap();
        q.after = Some((last.received_at, last.id.clone()));
        seen.extend(page.into_iter().map(|r| r.id));
    }
    assert_eq!(seen, ["c4", "c3", "c2", "c1", "c0"]);
    let q = ListQuery {
        since: Some(1001),
        until: Some(1002),
        limit: 10,
        ..Default::default()
    };
    let ids: Vec<_> = crashes::list(db, &q)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["c3", "c2"]);
    let counts = crashes::count_by_status(db).await.unwrap();
    assert_eq!(counts, vec![("pending".to_string(), 5)]);
}
/// The crash list's product, version, module and function filters, each alone and
/// combined, on reports stored by finishing leased jobs; a reprocessed crash is found by
/// its new frames only.
async fn list_filters(db: &Db) {
    let reports = [
        (
            "a",
            r#"{"prod":"app","ver":"1.0"}"#,
            "crash_here",
            "libfoo.so",
        ),
        (
            "b",
            r#"{"prod":"app","ver":"2.0"}"#,
            "ns::Widget::paint",
            "libc.so.6",
        ),
        (
            "c",
            r#"{"product":"tool","version":"2.0"}"#,
            "Paint_100%",
            "libc.so.6",
        ),
    ];
    for (i, (id, annotations, function, module)) in reports.iter().enumerate() {
        let mut c = crash(id, 1000 + i as i64);
        c.annotations = (*annotations).into();
        crashes::insert(db, &c).await.unwrap();
        let l = crashes::lease(db, "w", 5000, 60_000, 3)
            .await
            .unwrap()
            .expect("a job");
        let report = serde_json::json!({
            "modules": [{ "name": format!("/usr/lib/{module}") }, { "name": "/bin/app" }],
            "threads": [{ "frames": [{ "function": function }, { "function": "main" }] }],
        })
        .to_string();
        let done = Outcome::Done(StoredReport::from_json(report, Some((*function).into())));
        assert!(crashes::finish(db, &l, "w", 6000, 3, &done).await.unwrap());
    }
    let ids = |q: ListQuery| async move {
        crashes::list(db, &ListQuery { limit: 10, ..q })
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect::<Vec<_>>()
    };
    let s = |v: &str| Some(v.to_string());
    assert_eq!(ids(ListQuery::default()).await, ["c", "b", "a"]);
    assert_eq!(
        ids(ListQuery {
            product: s("app"),
            ..Default::default()
        })
        .await,
        ["b", "a"]
    );
    assert_eq!(
        ids(ListQuery {
            version: s("2.0"),
            ..Default::default()
        })
        .await,
        ["c", "b"]
    );
    assert_eq!(
        ids(ListQuery {
            module: s("libc.so.6"),
            ..Default::default()
        })
        .await,
        ["c", "b"]
    );
    assert_eq!(
        ids(ListQuery {
            module: s("app"),
            ..Default::default()
        })
        .await,
        ["c", "b", "a"]
    );
    assert!(ids(ListQuery {
        module: s("libc"),
        ..Default::default()
    })
    .await
    .is_empty());
    // contains, case-insensitive; LIKE wildcards in the text are literal
    assert_eq!(
        ids(ListQuery {
            function: s("paint"),
            ..Default::default()
        })
        .await,
        ["c", "b"]
    );
    assert_eq!(
        ids(ListQuery {
            function: s("widget::"),
            ..Default::default()
        })
        .await,
        ["b"]
    );
    assert_eq!(
        ids(ListQuery {
            function: s("_100%"),
            ..Default::default()
        })
        .await,
        ["c"]
    );
    assert!(ids(ListQuery {
        function: s("_1%0"),
        ..Default::default()
    })
    .await
    .is_empty());
    assert_eq!(
        ids(ListQuery {
            function: s("MAIN"),
            ..Default::default()
        })
        .await,
        ["c", "b", "a"]
    );
    assert_eq!(
        ids(ListQuery {
            product: s("app"),
            function: s("paint"),
            ..Default::default()
        })
        .await,
        ["b"]
    );
    // A second report for "a" replaces its terms.
    worker::store::dashboard::requeue(db, "a").await.unwrap();
    let l = crashes::lease(db, "w", 7000, 60_000, 3)
        .await
        .unwrap()
        .expect("requeued");
    assert_eq!(l.id, "a");
    let report = serde_json::json!({
        "modules": [{ "name": "/bin/app" }],
        "threads": [{ "frames": [{ "function": "Repainted" }] }],
    })
    .to_string();
    let done = Outcome::Done(StoredReport::from_json(report, None));
    assert!(crashes::finish(db, &l, "w", 8000, 3, &done).await.unwrap());
    assert_eq!(
        ids(ListQuery {
            function: s("paint"),
            ..Default::default()
        })
        .await,
        ["c", "b", "a"]
    );
    assert!(ids(ListQuery {
        function: s("crash_here"),
        ..Default::default()
    })
    .await
    .is_empty());
    assert_eq!(
        ids(ListQuery {
            module: s("libfoo.so"),
            ..Default::default()
        })
        .await,
        Vec::<String>::new()
    );
}
both!(list_filters_sqlite, list_filters_postgres, list_filters);

both!(
    keyset_listing_sqlite,
    keyset_listing_postgres,
    keyset_listing
);

async fn binaries_tables_missing(db: &Db) {
    let row = BinaryRow {
        sha256: "cd".repeat(32),
        build_id: "abcd".into(),
        arch: Some("x86_64".into()),
        kind: "executable".into(),
        file_name: Some("prog".into()),
        size: 5,
        sections: "eh_frame,symtab".into(),
        uploaded_at: 1,
        debug_id: None,
        format: "elf".into(),
        source: None,
        code_id: None,
        code_file: None,
    };
    let (_, created) = binaries::insert(db, &row).await.unwrap();
    assert!(created);
    let (stored, created) = binaries::insert(db, &row).await.unwrap();
    assert!(!created);
    assert_eq!(stored, row);
    assert_eq!(binaries::by_build_id(db, "abcd").await.unwrap().len(), 1);

    tables::put(db, "abcd", "unwind", 1, b"v1").await.unwrap();
    assert_eq!(
        tables::get(db, "abcd", "unwind", 1)
            .await
            .unwrap()
            .as_deref(),
        Some(&b"v1"[..])
    );
    assert!(
        tables::get(db, "abcd", "unwind", 2)
            .await
            .unwrap()
            .is_none(),
        "a version bump must miss"
    );
    tables::put(db, "abcd", "unwind", 1, b"v1b").await.unwrap();
    assert_eq!(tables::invalidate(db, "abcd").await.unwrap(), 1);

    crashes::insert(db, &crash("c1", 1)).await.unwrap();
    crashes::insert(db, &crash("c2", 2)).await.unwrap();
    let l = crashes::lease(db, "w", 10, 1000, 3).await.unwrap().unwrap();
    missing::record(db, "beef", &l.id, "libfoo.so")
        .await
        .unwrap();
    missing::record(db, "beef", &l.id, "libfoo.so")
        .await
        .unwrap();
    let done = Outcome::Done(StoredReport::from_json("{}".into(), None));
    crashes::finish(db, &l, "w", 20, 3, &done).await.unwrap();
    let list = missing::list(db, 10).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (list[0].build_id.as_str(), list[0].crash_count),
        ("beef", 1)
    );
    assert_eq!(missing::requeue_for(db, "beef").await.unwrap(), 1);
    assert_eq!(
        crashes::get(db, &l.id).await.unwrap().unwrap().status,
        "pending"
    );
    assert!(missing::list(db, 10).await.unwrap().is_empty());
}
both!(
    binaries_tables_missing_sqlite,
    binaries_tables_missing_postgres,
    binaries_tables_missing
);

/// A Windows `.sym` row is found by the image its `INFO CODE_ID` names (name without
/// case, code id), the first uploaded where two are stored (first upload wins: issue 34,
/// finding 3), and never as an image; an image of the same name and code id is never
/// taken for its `.sym` file.
async fn sym_by_image(db: &Db) {
    let row = |sha: &str, kind: &str, format: &str, name: &str, at: i64| BinaryRow {
        sha256: sha.repeat(32),
        build_id: String::new(),
        arch: Some("x86_64".into()),
        kind: kind.into(),
        file_name: Some(name.into()),
        size: 5,
        sections: "stack_cfi".into(),
        uploaded_at: at,
        debug_id: None,
        format: format.into(),
        source: None,
        code_id: Some("5F3A2B1C1000".into()),
        code_file: (format == "breakpad").then(|| "App.exe".into()),
    };
    let old_sym = row("f1", "breakpad-sym", "breakpad", "old.sym", 1);
    // sent under the image's name: still no image
    let new_sym = row("f2", "breakpad-sym", "breakpad", "app.exe", 2);
    let image = row("f3", "executable", "pe", "app.exe", 3);
    for r in [&old_sym, &new_sym, &image] {
        binaries::insert(db, r).await.unwrap();
    }
    assert_eq!(
        binaries::sym_by_code_id(db, "app.exe", "5F3A2B1C1000", binaries::Sees::Every)
            .await
            .unwrap(),
        Some(old_sym)
    );
    assert_eq!(
        binaries::sym_by_code_id(db, "other.exe", "5F3A2B1C1000", binaries::Sees::Every)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        binaries::sym_by_code_id(db, "app.exe", "5F3A2B1C2000", binaries::Sees::Every)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        binaries::by_code_id(db, "app.exe", "5F3A2B1C1000", binaries::Sees::Every)
            .await
            .unwrap(),
        vec![image]
    );
}
both!(sym_by_image_sqlite, sym_by_image_postgres, sym_by_image);

/// `.sym` rows are found by debug-id (and by build-id when they have one), and a `.sym`
/// upload's identifiers requeue the crashes that missed its module: one keyed by
/// build-id (a Linux module) and one keyed by debug-id alone (a Windows module).
async fn debug_ids_and_requeue(db: &Db) {
    let sym = |sha: &str, build_id: &str, debug_id: &str| BinaryRow {
        sha256: sha.repeat(32),
        build_id: build_id.into(),
        arch: Some("x86_64".into()),
        kind: "breakpad-sym".into(),
        file_name: Some("m.sym".into()),
        size: 5,
        sections: "func,stack_cfi".into(),
        uploaded_at: 1,
        debug_id: Some(debug_id.into()),
        format: "breakpad".into(),
        source: None,
        code_id: None,
        code_file: None,
    };
    let linux = sym("e1", "beef", "EFBE00000000000000000000000000000");
    let windows = sym("e2", "", "ABCDEF0123456789ABCDEF01234567891");
    binaries::insert(db, &linux).await.unwrap();
    let (stored, created) = binaries::insert(db, &windows).await.unwrap();
    assert!(created);
    assert_eq!(stored, windows);
    assert_eq!(stored.build_id(), None);
    assert!(stored.is_breakpad());
    assert_eq!(
        binaries::by_debug_id(db, "ABCDEF0123456789ABCDEF01234567891")
            .await
            .unwrap(),
        vec![windows.clone()]
    );
    assert_eq!(
        binaries::by_build_id(db, "beef").await.unwrap(),
        vec![linux]
    );

    for (id, at) in [("d1", 1), ("d2", 2), ("d3", 3)] {
        crashes::insert(db, &crash(id, at)).await.unwrap();
    }
    let mut leases = Vec::new();
    while let Some(l) = crashes::lease(db, "w", 10, 1000, 3).await.unwrap() {
        leases.push(l);
    }
    assert_eq!(leases.len(), 3);
    missing::record_module(
        db,
        "beef",
        Some("EFBE00000000000000000000000000000"),
        &leases[0].id,
        "libm.so",
    )
    .await
    .unwrap();
    missing::record_module(
        db,
        "ABCDEF0123456789ABCDEF01234567891",
        Some("ABCDEF0123456789ABCDEF01234567891"),
        &leases[1].id,
        "app.dll",
    )
    .await
    .unwrap();
    missing::record(db, "other", &leases[2].id, "libo.so")
        .await
        .unwrap();
    let done = Outcome::Done(StoredReport::from_json("{}".into(), None));
    for l in &leases {
        crashes::finish(db, l, "w", 20, 3, &done).await.unwrap();
    }
    let status = |i: usize| {
        let id = leases[i].id.clone();
        async move { crashes::get(db, &id).await.unwrap().unwrap().status }
    };
    // The Linux .sym: found by its debug-id even without its build-id.
    assert_eq!(
        missing::requeue_for_ids(db, None, Some("EFBE00000000000000000000000000000"))
            .await
            .unwrap(),
        1
    );
    assert_eq!(status(0).await, "pending");
    assert_eq!(status(1).await, "done");
    // The Windows .sym: no build-id.
    assert_eq!(
        missing::requeue_for_ids(db, None, Some("ABCDEF0123456789ABCDEF01234567891"))
            .await
            .unwrap(),
        1
    );
    assert_eq!(status(1).await, "pending");
    assert_eq!(status(2).await, "done");
    assert_eq!(missing::requeue_for_ids(db, None, None).await.unwrap(), 0);
    let left = missing::list(db, 10).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].build_id, "other");

    // A crash whose module had only a .sym file: its binary (build-id) requeues it; a
    // cleared entry requeues nothing.
    // (The two requeued crashes are processed again first.)
    while let Some(again) = crashes::lease(db, "w", 10, 1000, 3).await.unwrap() {
        crashes::finish(db, &again, "w", 30, 3, &done)
            .await
            .unwrap();
    }
    breakpad_used::record(
        db,
        "beef",
        Some("EFBE00000000000000000000000000000"),
        &leases[0].id,
    )
    .await
    .unwrap();
    breakpad_used::record(db, "beef", None, &leases[1].id)
        .await
        .unwrap();
    breakpad_used::clear_crash(db, &leases[1].id).await.unwrap();
    assert_eq!(
        breakpad_used::requeue_for_ids(db, Some("beef"), None)
            .await
            .unwrap(),
        1
    );
    assert_eq!(status(0).await, "pending");
    assert_eq!(status(1).await, "done");
    assert_eq!(
        breakpad_used::requeue_for_ids(db, Some("beef"), None)
            .await
            .unwrap(),
        0
    );
}
both!(
    debug_ids_and_requeue_sqlite,
    debug_ids_and_requeue_postgres,
    debug_ids_and_requeue
);

/// Idempotent uploads and the orphan sweep's question, on both backends: a second insert
/// under a key finds the first crash, the same upload is found within its window, and a
/// blob is named by a crash row or a binary row.
async fn idempotent_uploads(db: &Db) {
    let default = crashes::DEFAULT_PROJECT;
    assert!(
        crashes::insert_keyed(db, &crash("k1", 1000), default, "key-1")
            .await
            .unwrap()
            .is_none()
    );
    let again = crashes::insert_keyed(db, &crash("k2", 2000), default, "key-1")
        .await
        .unwrap()
        .expect("the first crash");
    assert_eq!(again.id, "k1");
    assert!(crashes::get(db, "k2").await.unwrap().is_none());
    // another project's key of the same text is another crash, and never finds k1
    assert!(
        crashes::insert_keyed(db, &crash("k3", 2000), "other", "key-1")
            .await
            .unwrap()
            .is_none()
    );
    let sha = "ab".repeat(32);
    let found = crashes::same_upload_since(db, default, &sha, r#"{"prod":"x"}"#, 500)
        .await
        .unwrap();
    assert_eq!(found.map(|r| r.id).as_deref(), Some("k1"));
    let theirs = crashes::same_upload_since(db, "other", &sha, r#"{"prod":"x"}"#, 500)
        .await
        .unwrap();
    assert_eq!(theirs.map(|r| r.id).as_deref(), Some("k3"));
    for (fields, since) in [(r#"{"prod":"y"}"#, 500), (r#"{"prod":"x"}"#, 1001)] {
        let none = crashes::same_upload_since(db, default, &sha, fields, since).await;
        assert!(none.unwrap().is_none(), "{fields} since {since}");
    }
    assert!(crashes::blob_is_named(db, &sha).await.unwrap());
    assert!(!crashes::blob_is_named(db, &"cd".repeat(32)).await.unwrap());
}
both!(
    idempotent_uploads_sqlite,
    idempotent_uploads_postgres,
    idempotent_uploads
);

/// A worker's claim, one transaction: the job whose attempts ran out is failed, a batch is
/// leased (not the crash the worker was told to skip), and what the leased crashes missed
/// or took from a `.sym` file alone last time is forgotten (their processing records it
/// again), while another crash's entries stay.
async fn claim_batch_sweeps_leases_and_clears(db: &Db) {
    for (i, id) in ["c1", "c2", "c3", "c4"].iter().enumerate() {
        crashes::insert(db, &crash(id, 1000 + i as i64))
            .await
            .unwrap();
    }
    // c1: leased by a worker that died, on its last attempt
    let dead = crashes::lease(db, "dead", 2000, 100, 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(dead.id, "c1");
    for id in ["c2", "c3", "c4"] {
        missing::record(db, "beef", id, "libbeef.so").await.unwrap();
        breakpad_used::record(db, "cafe", None, id).await.unwrap();
    }
    let claim = crashes::Claim {
        worker: "w",
        now: 5000,
        lease_ms: 60_000,
        max_attempts: 1,
        n: 2,
        // c2: a crash whose result the worker holds, not yet stored
        skip: &["c2"],
    };
    let (exhausted, leases) = crashes::claim_batch(db, &claim).await.unwrap();
    assert_eq!(exhausted, 1);
    assert_eq!(
        crashes::get(db, "c1").await.unwrap().unwrap().status,
        "failed"
    );
    let ids: Vec<&str> = leases.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(ids, ["c3", "c4"]);
    let left = missing::list(db, 10).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].crash_count, 1, "c2's entry only");
    let sql = "SELECT crash_id FROM breakpad_modules ORDER BY crash_id";
    let used: Vec<String> = match db.backend() {
        worker::store::Backend::Sqlite(p) => sqlx::query_scalar(sql).fetch_all(p).await,
        worker::store::Backend::Postgres(p) => sqlx::query_scalar(sql).fetch_all(p).await,
    }
    .unwrap();
    assert_eq!(used, ["c2"]);
}
both!(
    claim_batch_sweeps_leases_and_clears_sqlite,
    claim_batch_sweeps_leases_and_clears_postgres,
    claim_batch_sweeps_leases_and_clears
);

/// The uploads of many build-ids in one query: each build-id's files as `by_build_id`
/// lists them (oldest first), an empty list for a build-id nobody uploaded.
async fn uploads_of_many_build_ids(db: &Db) {
    let row = |sha: &str, build_id: &str, at: i64| BinaryRow {
        sha256: sha.repeat(32),
        build_id: build_id.into(),
        arch: Some("x86_64".into()),
        kind: "executable".into(),
        file_name: Some(format!("f{at}")),
        size: 5,
        sections: "eh_frame".into(),
        uploaded_at: at,
        debug_id: None,
        format: "elf".into(),
        source: None,
        code_id: None,
        code_file: None,
    };
    for r in [
        row("03", "aa", 3),
        row("01", "aa", 1),
        row("02", "bb", 2),
        row("04", "cc", 4),
    ] {
        binaries::insert(db, &r).await.unwrap();
    }
    let got = binaries::by_build_ids(db, &["aa", "bb", "dd"])
        .await
        .unwrap();
    assert_eq!(got.len(), 3);
    for id in ["aa", "bb"] {
        assert_eq!(got[id], binaries::by_build_id(db, id).await.unwrap());
    }
    let names: Vec<_> = got["aa"].iter().map(|r| r.uploaded_at).collect();
    assert_eq!(names, [1, 3]);
    assert!(got["dd"].is_empty());
    assert!(binaries::by_build_ids(db, &[]).await.unwrap().is_empty());
}
both!(
    uploads_of_many_build_ids_sqlite,
    uploads_of_many_build_ids_postgres,
    uploads_of_many_build_ids
);

/// Source bundles on both backends: the first bundle of a build-id in a project is stored
/// and a second is answered with it (first upload wins within a project); another
/// project's bundle of the build-id is stored beside it and neither sees the other's;
/// a shared bundle serves the projects without their own; the batch look-up finds only
/// build-ids that have one; a bundle's blob is named for the orphan sweep.
async fn source_bundles_first_upload_wins(db: &Db) {
    use worker::store::source_bundles::{self, BundleRow, Sees};
    let row = |project: &str, sha: &str| BundleRow {
        project: project.to_string(),
        build_id: "ab".repeat(20),
        sha256: sha.repeat(32),
        size: 100,
        file_count: 2,
        uploaded_at: 0,
    };
    let (held, inserted) = source_bundles::insert(db, &row("team-a", "ef"))
        .await
        .unwrap();
    assert!(inserted);
    assert_eq!(held.sha256, "ef".repeat(32));
    assert!(held.uploaded_at > 0);
    let (held, inserted) = source_bundles::insert(db, &row("team-a", "12"))
        .await
        .unwrap();
    assert!(!inserted);
    assert_eq!(
        held.sha256,
        "ef".repeat(32),
        "the first bundle holds the build-id"
    );
    let (held, inserted) = source_bundles::insert(db, &row("team-b", "12"))
        .await
        .unwrap();
    assert!(
        inserted,
        "another project's bundle does not hold team-b's build-id"
    );
    assert_eq!(held.sha256, "12".repeat(32));
    let other = "cd".repeat(20);
    let ab = "ab".repeat(20);
    let seen = |p: &'static str| {
        let ab = ab.clone();
        async move {
            source_bundles::by_build_id(db, Sees::Project(p), &ab)
                .await
                .unwrap()
                .map(|r| r.sha256[..2].to_string())
        }
    };
    assert_eq!(seen("team-a").await.as_deref(), Some("ef"));
    assert_eq!(seen("team-b").await.as_deref(), Some("12"));
    assert_eq!(
        seen("team-c").await,
        None,
        "no bundle of team-c's own, none shared"
    );
    let shared = source_bundles::share(db, &"ef".repeat(32)).await.unwrap();
    assert_eq!(shared.len(), 1);
    assert_eq!(
        seen("team-c").await.as_deref(),
        Some("ef"),
        "the shared one"
    );
    assert_eq!(seen("team-b").await.as_deref(), Some("12"), "its own first");
    assert!(source_bundles::share(db, &"ef".repeat(32))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        source_bundles::unshare(db, &"ef".repeat(32)).await.unwrap(),
        1
    );
    assert_eq!(seen("team-c").await, None);
    let found = source_bundles::by_build_ids(db, Sees::Project("team-a"), &[&ab, &other])
        .await
        .unwrap();
    assert_eq!(found.keys().collect::<Vec<_>>(), vec![&ab]);
    assert!(source_bundles::by_build_id(db, Sees::Every, &other)
        .await
        .unwrap()
        .is_none());
    assert!(crashes::blob_is_named(db, &"ef".repeat(32)).await.unwrap());
    assert!(!crashes::blob_is_named(db, &"34".repeat(32)).await.unwrap());
}
both!(
    source_bundles_first_upload_wins_sqlite,
    source_bundles_first_upload_wins_postgres,
    source_bundles_first_upload_wins
);

/// Four workers store their batches at once, each batch's reports naming the same ten
/// signatures and new function terms, half the workers in the opposite order: no store
/// fails (PostgreSQL ends one of two transactions that wait for each other with "deadlock
/// detected"; `finish_batch` orders what they share), every crash is done, and every
/// group counts its crashes.
async fn concurrent_stores_of_shared_groups(db: &Db) {
    for i in 0..400 {
        crashes::insert(db, &crash(&format!("c{i:03}"), 1000 + i))
            .await
            .unwrap();
    }
    let report = |k: usize| {
        Outcome::Done(StoredReport::from_json(
            format!(r#"{{"threads":[{{"frames":[{{"function":"shared{k}"}}]}}]}}"#),
            Some(format!("sig {k}")),
        ))
    };
    let mut tasks = Vec::new();
    for w in 0..4usize {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("w{w}");
            loop {
                let leases = crashes::lease_batch(&db, &name, 5000, 60_000, 3, 25)
                    .await
                    .unwrap();
                if leases.is_empty() {
                    return;
                }
                let outcomes: Vec<Outcome> = (0..leases.len())
                    .map(|i| report(if w % 2 == 0 { i % 10 } else { 9 - i % 10 }))
                    .collect();
                let jobs: Vec<crashes::Finished> = leases
                    .iter()
                    .zip(&outcomes)
                    .map(|(lease, outcome)| crashes::Finished {
                        lease,
                        outcome,
                        processing_us: None,
                    })
                    .collect();
                let kept = crashes::finish_batch(&db, &name, 6000, 3, &jobs).await;
                assert_eq!(kept.unwrap(), vec![true; jobs.len()], "worker {name}");
                tokio::task::yield_now().await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let sql = "SELECT g.count, (SELECT COUNT(*) FROM crashes c WHERE c.signature = g.signature \
               AND c.project = g.project AND c.status = 'done') FROM crash_groups g";
    let groups: Vec<(i64, i64)> = match db.backend() {
        worker::store::Backend::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await,
        worker::store::Backend::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await,
    }
    .unwrap();
    assert_eq!(groups.len(), 10);
    assert!(
        groups.iter().all(|(count, done)| count == done),
        "{groups:?}"
    );
    assert_eq!(groups.iter().map(|g| g.0).sum::<i64>(), 400);
}
both!(
    concurrent_stores_of_shared_groups_sqlite,
    concurrent_stores_of_shared_groups_postgres,
    concurrent_stores_of_shared_groups
);
