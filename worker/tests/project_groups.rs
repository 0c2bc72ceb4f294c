//! Crash groups per project in the store (issue 41, migration 0026), on SQLite and on
//! PostgreSQL (`POSTMORTEM_SKIP_PG=1` skips the latter).
//!
//! - The upgrade: a database migrated up to everything but 0026 (so 0035 ran first, as on
//!   an installation that has it), with crashes of one signature in two projects, a
//!   merge and pins of the old server-wide kind, then migrated by `Db::migrate` as
//!   `postmortem migrate` does: every group row and rollup is its project's recount, pins
//!   take their crash's project, the merge goes to the projects it acted in, and the
//!   schema is the one a fresh database gets (where 0035 runs after 0026).
//! - Hostile tenants on the live store: one signature in projects a and b is two groups
//!   with their own counts, days, versions and kinds; a's decisions never name, move or
//!   pin b's crashes, and b's group is missing to a (`NoGroup`, as a name never seen);
//!   every project's groups page walks every (project, signature) in keyset pages of one;
//!   deletes and reprocessing keep every rollup equal to its recount from `crashes`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::PathBuf;

use crate::common;
use crate::rollups::{rollups_exact, texts, ROLLUPS};

use worker::store::crashes::{self, NewCrash, Outcome, StoredReport};
use worker::store::dashboard::{self as q, GroupQuery, GroupSort};
use worker::store::groups::{self, DecisionError};
use worker::store::{Backend, Db};

const DAY: i64 = 86_400_000;
const T0: i64 = 1_700_000_000_000 / DAY * DAY;

/// A crash of `project` received at `at`, finished with `signature` and an analysis of
/// `kind`.
async fn crash(
    db: &Db,
    project: &str,
    at: i64,
    annotations: &str,
    sig: &str,
    kind: &str,
) -> String {
    let id = crashes::new_id();
    let new = NewCrash {
        id: id.clone(),
        received_at: at,
        dump_sha256: "00".into(),
        dump_size: 1,
        dump_format: "elf-core".into(),
        annotations: annotations.into(),
        annotations_cut: None,
    };
    crashes::insert_in(db, &new, project).await.unwrap();
    finish(db, &id, at, sig, kind).await;
    id
}

/// Leases crash `id` (the only one pending) and stores a report with `sig` and `kind`.
async fn finish(db: &Db, id: &str, at: i64, sig: &str, kind: &str) {
    let lease = crashes::lease(db, "w", at, 60_000, 3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.id, id);
    let report = format!(r#"{{"crash":{{"analysis":{{"kind":"{kind}"}}}}}}"#);
    let outcome = Outcome::Done(StoredReport::from_json(report, Some(sig.into())));
    assert!(crashes::finish(db, &lease, "w", at + 1, 3, &outcome)
        .await
        .unwrap());
}

/// Crash `id` reprocessed into `sig`.
async fn reprocess(db: &Db, id: &str, at: i64, sig: &str) {
    assert!(q::requeue(db, id).await.unwrap());
    finish(db, id, at, sig, "abort").await;
}

/// (project, signature, count) of a groups query.
async fn listed(db: &Db, q: &GroupQuery) -> Vec<(String, String, i64)> {
    q::groups(db, q)
        .await
        .unwrap()
        .into_iter()
        .map(|g| (g.project, g.signature, g.count))
        .collect()
}

fn in_project(project: &str) -> GroupQuery {
    GroupQuery {
        project: Some(project.into()),
        sort: GroupSort::Signature,
        limit: 100,
        ..GroupQuery::default()
    }
}

/// The (project, signature) of each crash's group.
async fn group_of(db: &Db, id: &str) -> (String, String) {
    let row = crashes::get(db, id).await.unwrap().unwrap();
    (row.project, row.signature.unwrap_or_default())
}

/// Two tenants on the live store: one signature, two groups; decisions stay home.
async fn tenants(db: &Db) {
    let app = r#"{"prod":"app","ver":"1.0"}"#;
    let app2 = r#"{"prod":"app","ver":"2.0"}"#;
    let a1 = crash(db, "team-a", T0, app, "shared", "null-pointer").await;
    let a2 = crash(db, "team-a", T0 + DAY, app2, "shared", "null-pointer").await;
    let a3 = crash(db, "team-a", T0 + DAY, app, "a-only", "null-pointer").await;
    let b1 = crash(
        db,
        "team-b",
        T0 + 2 * DAY,
        r#"{"prod":"bapp","ver":"9"}"#,
        "shared",
        "abort",
    )
    .await;
    let b2 = crash(db, "team-b", T0 + 3 * DAY, "{}", "b-only", "abort").await;
    rollups_exact(db, "after the uploads").await;

    // one signature, two groups with their own counts
    assert_eq!(
        listed(db, &in_project("team-a")).await,
        [
            ("team-a".into(), "a-only".into(), 1),
            ("team-a".into(), "shared".into(), 2)
        ]
    );
    assert_eq!(
        listed(db, &in_project("team-b")).await,
        [
            ("team-b".into(), "b-only".into(), 1),
            ("team-b".into(), "shared".into(), 1)
        ]
    );
    // a window and a product: running counts of the project's own crashes
    let windowed = GroupQuery {
        since: Some(T0),
        product: Some("app".into()),
        ..in_project("team-b")
    };
    assert!(
        listed(db, &windowed).await.is_empty(),
        "team-b has no crash of app"
    );
    let windowed = GroupQuery {
        since: Some(T0 + DAY),
        ..in_project("team-a")
    };
    assert_eq!(
        listed(db, &windowed).await,
        [
            ("team-a".into(), "a-only".into(), 1),
            ("team-a".into(), "shared".into(), 1)
        ]
    );
    let versioned = GroupQuery {
        version: Some("9".into()),
        ..in_project("team-a")
    };
    assert!(
        listed(db, &versioned).await.is_empty(),
        "team-b's version in team-a"
    );
    // kinds: team-b's abort is not team-a's
    let aborts = |p: &str| GroupQuery {
        kind: Some("abort".into()),
        ..in_project(p)
    };
    assert!(listed(db, &aborts("team-a")).await.is_empty());
    assert_eq!(listed(db, &aborts("team-b")).await.len(), 2);
    // days and versions of one group, and of a page of groups
    let days = q::group_days(db, "team-a", "shared", T0, T0 + 10 * DAY)
        .await
        .unwrap();
    assert_eq!(days.iter().map(|d| d.count).sum::<i64>(), 2);
    let days = q::group_days(db, "team-b", "shared", T0, T0 + 10 * DAY)
        .await
        .unwrap();
    assert_eq!(
        days.iter().map(|d| d.day).collect::<Vec<_>>(),
        [T0 / DAY + 2]
    );
    let keys = [
        ("team-a".to_string(), "shared".to_string()),
        ("team-b".to_string(), "shared".to_string()),
    ];
    let products = q::groups_products(db, &keys, 10).await.unwrap();
    assert_eq!(
        products,
        [
            (
                "team-a".into(),
                "shared".into(),
                Some("app".into()),
                Some("1.0".into())
            ),
            (
                "team-a".into(),
                "shared".into(),
                Some("app".into()),
                Some("2.0".into())
            ),
            (
                "team-b".into(),
                "shared".into(),
                Some("bapp".into()),
                Some("9".into())
            ),
        ]
    );
    let charts = q::groups_days(db, &keys[1..], T0, T0 + 10 * DAY)
        .await
        .unwrap();
    assert!(charts.iter().all(|d| d.project == "team-b"), "{charts:?}");
    assert_eq!(
        q::group_products(db, "team-a", "b-only", 10).await.unwrap(),
        []
    );

    // Every project's groups, walked a group a page: each (project, signature) once.
    let mut walked = Vec::new();
    let mut page = GroupQuery {
        limit: 1,
        sort: GroupSort::Signature,
        ..GroupQuery::default()
    };
    for _ in 0..10 {
        let rows = q::groups(db, &page).await.unwrap();
        let Some(g) = rows.first() else { break };
        walked.push((g.project.clone(), g.signature.clone()));
        page.after = Some((0, g.signature.clone()));
        page.after_project = Some(g.project.clone());
    }
    assert_eq!(
        walked,
        [
            ("team-a".to_string(), "a-only".to_string()),
            ("team-b".into(), "b-only".into()),
            ("team-a".into(), "shared".into()),
            ("team-b".into(), "shared".into()),
        ]
    );

    // team-a's decisions: team-b's group is missing to it, like a name never seen
    let missing =
        |r: Result<groups::Moved, DecisionError>| matches!(r, Err(DecisionError::NoGroup(_)));
    assert!(missing(
        groups::merge(db, "team-a", "shared", "b-only").await
    ));
    assert!(missing(
        groups::merge(db, "team-a", "b-only", "shared").await
    ));
    assert!(missing(
        groups::merge(db, "team-a", "shared", "never-seen").await
    ));
    assert!(missing(
        groups::split(db, "team-a", "b-only", std::slice::from_ref(&b2), None).await
    ));
    assert!(missing(
        groups::unmerge(db, "team-a", "b-only", "shared").await
    ));
    // a split in team-a naming team-b's crash of the same signature moves nothing
    assert!(matches!(
        groups::split(
            db,
            "team-a",
            "shared",
            std::slice::from_ref(&b1),
            Some("stolen")
        )
        .await,
        Err(DecisionError::Invalid(_))
    ));
    assert_eq!(group_of(db, &b1).await, ("team-b".into(), "shared".into()));
    // a merge in team-a moves team-a's crashes only
    let m = groups::merge(db, "team-a", "shared", "a-only")
        .await
        .unwrap();
    assert_eq!(m.crashes, 1);
    assert_eq!(group_of(db, &a3).await, ("team-a".into(), "shared".into()));
    assert_eq!(group_of(db, &b1).await, ("team-b".into(), "shared".into()));
    assert!(groups::merged_into(db, "team-b", "shared")
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        groups::merged_into(db, "team-a", "shared").await.unwrap(),
        [("a-only".to_string(), 1)]
    );
    // team-b's later crash of the merged signature stays in its own project's group
    let b3 = crash(db, "team-b", T0 + 4 * DAY, "{}", "a-only", "abort").await;
    assert_eq!(group_of(db, &b3).await, ("team-b".into(), "a-only".into()));
    let a4 = crash(db, "team-a", T0 + 4 * DAY, "{}", "a-only", "abort").await;
    assert_eq!(group_of(db, &a4).await, ("team-a".into(), "shared".into()));
    // the preview's question follows the crash's project's merges
    assert_eq!(groups::settle(db, &b2, "a-only").await.unwrap(), "a-only");
    assert_eq!(groups::settle(db, &a1, "a-only").await.unwrap(), "shared");
    // a split in team-a: the fresh name is team-a's business
    let m = groups::split(db, "team-a", "shared", std::slice::from_ref(&a2), None)
        .await
        .unwrap();
    assert_eq!(m.group, "shared (split)");
    let m = groups::split(db, "team-b", "shared", std::slice::from_ref(&b1), None)
        .await
        .unwrap();
    assert_eq!(
        m.group, "shared (split)",
        "team-a's split name is not taken in team-b"
    );
    rollups_exact(db, "after the decisions").await;
    // where the decisions may act: the projects with every group named
    assert_eq!(
        groups::projects_with(db, &["shared (split)"])
            .await
            .unwrap(),
        ["team-a", "team-b"]
    );
    assert_eq!(
        groups::projects_with(db, &["a-only", "b-only"])
            .await
            .unwrap(),
        ["team-b"]
    );
    assert!(groups::projects_with(db, &["shared", "b-only"])
        .await
        .unwrap()
        .is_empty());

    // deletes and reprocessing keep every rollup exact, per project
    let audit = |id: &str| worker::store::audit::Entry {
        at: T0,
        token: "none".into(),
        project: Some("team-a".into()),
        action: "delete-crash".into(),
        route: "DELETE /api/v1/crashes/{id}".into(),
        target: Some(id.into()),
        detail: None,
    };
    assert!(
        worker::store::delete::crash(db, &b2, Some("team-a"), &audit(&b2))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        worker::store::delete::crash(db, &a1, Some("team-a"), &audit(&a1))
            .await
            .unwrap()
            .is_some()
    );
    reprocess(db, &b1, T0 + 5 * DAY, "b-only").await;
    reprocess(db, &a4, T0 + 5 * DAY, "renamed").await;
    rollups_exact(db, "after deletes and reprocessing").await;
    assert_eq!(
        listed(db, &in_project("team-b")).await,
        [
            ("team-b".into(), "a-only".into(), 1),
            ("team-b".into(), "b-only".into(), 1),
            ("team-b".into(), "shared (split)".into(), 1),
        ]
    );
}

/// The migrations of this backend but 0026, in a directory of their own: those of an
/// installation that ran the ones numbered up to 0036 before 0026 landed. Later ones
/// (0037 on, written after 0026) reach it only with 0026, in their order.
fn without_0026(dialect: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../migrations")
        .join(dialect);
    for e in std::fs::read_dir(&from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().to_string();
        if !name.starts_with("0026_") && name.as_str() < "0037" {
            std::fs::copy(e.path(), dir.path().join(&name)).unwrap();
        }
    }
    dir
}

/// Runs `sql` (statements separated by `;` at line ends).
async fn exec(db: &Db, sql: &str) {
    for stmt in sql.split(";\n").map(str::trim).filter(|s| !s.is_empty()) {
        let r = match db.backend() {
            Backend::Sqlite(p) => sqlx::query(sqlx::AssertSqlSafe(stmt))
                .execute(p)
                .await
                .map(|_| ()),
            Backend::Postgres(p) => sqlx::query(sqlx::AssertSqlSafe(stmt))
                .execute(p)
                .await
                .map(|_| ()),
        };
        r.unwrap_or_else(|e| panic!("{stmt}: {e}"));
    }
}

/// The schema, as comparable text: tables' columns, indexes, triggers.
async fn schema(db: &Db) -> Vec<Vec<String>> {
    match db.backend() {
        Backend::Sqlite(_) => {
            texts(
                db,
                "SELECT type, name, tbl_name, sql FROM sqlite_master \
                       WHERE name NOT LIKE '_sqlx%' AND name NOT LIKE 'sqlite_%' \
                       ORDER BY type, name",
            )
            .await
        }
        Backend::Postgres(_) => {
            let mut all = texts(
                db,
                "SELECT table_name, column_name, data_type, is_nullable \
                                     FROM information_schema.columns \
                                     WHERE table_schema = current_schema() \
                                     AND table_name NOT LIKE '_sqlx%' ORDER BY 1, 2",
            )
            .await;
            all.extend(
                texts(
                    db,
                    "SELECT indexname, indexdef FROM pg_indexes \
                                  WHERE schemaname = current_schema() ORDER BY 1",
                )
                .await,
            );
            all.extend(
                texts(
                    db,
                    "SELECT event_object_table, trigger_name, event_manipulation \
                                  FROM information_schema.triggers ORDER BY 1, 2, 3",
                )
                .await,
            );
            all.extend(
                texts(
                    db,
                    "SELECT proname FROM pg_proc \
                                  WHERE pronamespace = current_schema()::regnamespace \
                                  ORDER BY 1",
                )
                .await,
            );
            all
        }
    }
}

/// An installation that has every migration but 0026 (its groups keyed by signature
/// alone), with two projects' crashes of one signature and old decisions, upgraded.
async fn upgrade(old: &Db, fresh: &Db) {
    let dialect = old.kind();
    let dir = without_0026(dialect);
    let before = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();
    match old.backend() {
        Backend::Sqlite(p) => before.run(p).await.unwrap(),
        Backend::Postgres(p) => before.run(p).await.unwrap(),
    }
    let crash = |id: &str, project: &str, at: i64, sig: &str, computed: &str, ann: &str| {
        format!(
            "INSERT INTO crashes (id, status, received_at, dump_sha256, dump_size, dump_format, \
             annotations, attempts, project, signature, computed_signature, analysis_kind) \
             VALUES ('{id}', 'done', {at}, '00', 1, 'elf-core', '{ann}', 0, '{project}', \
             '{sig}', '{computed}', 'abort');\n"
        )
    };
    let app = r#"{"prod":"app","ver":"1.0"}"#;
    let mut sql = String::new();
    sql += &crash("a1", "team-a", T0, "s", "s", app);
    sql += &crash("a2", "team-a", T0 + DAY, "s", "s", "{}");
    sql += &crash("a3", "team-a", T0 + DAY, "s", "t", app);
    sql += &crash("b1", "team-b", T0 + 2 * DAY, "s", "s", app);
    sql += &crash("b2", "team-b", T0 + 2 * DAY, "u", "u", "{}");
    sql += &crash("c1", "team-c", T0 + 3 * DAY, "v", "v", "{}");
    sql += "INSERT INTO group_pins (crash_id, group_name, origin) VALUES ('a3', 's', 't');\n";
    sql += "INSERT INTO group_merges (signature, into_group, origin) VALUES ('t', 's', 't');\n";
    exec(old, &sql).await;
    // the old rows: one group "s" counting both projects
    assert_eq!(
        texts(old, "SELECT signature, count FROM crash_groups ORDER BY 1").await,
        [["s", "4"], ["u", "1"], ["v", "1"]]
    );

    old.migrate().await.unwrap();
    rollups_exact(old, "after the upgrade").await;
    assert_eq!(
        texts(
            old,
            "SELECT project, signature, count FROM crash_groups ORDER BY 1, 2"
        )
        .await,
        [
            ["team-a", "s", "3"],
            ["team-b", "s", "1"],
            ["team-b", "u", "1"],
            ["team-c", "v", "1"]
        ]
    );
    assert_eq!(
        texts(
            old,
            "SELECT crash_id, project, group_name, origin FROM group_pins"
        )
        .await,
        [["a3", "team-a", "s", "t"]]
    );
    // the merge went where it acted: team-a (its crash of "t") and team-b (its group
    // "s"), not team-c
    assert_eq!(
        texts(
            old,
            "SELECT project, signature, into_group, origin FROM group_merges \
                    ORDER BY 1"
        )
        .await,
        [["team-a", "t", "s", "t"], ["team-b", "t", "s", "t"]]
    );
    assert_eq!(
        schema(old).await,
        schema(fresh).await,
        "upgraded and fresh schemas differ"
    );
    let tables = schema(fresh).await.concat().join(" ");
    assert!(
        !tables.contains("crash_group_versions"),
        "0035's table is left"
    );
    assert!(tables.contains("project_group_versions"));
    // the old crashes deleted: nothing is left of them in any rollup
    exec(
        old,
        "DELETE FROM group_pins;\nDELETE FROM group_merges;\nDELETE FROM crashes;\n",
    )
    .await;
    for (name, rows, _) in ROLLUPS {
        assert!(
            texts(old, rows).await.is_empty(),
            "{name} keeps deleted crashes"
        );
    }
    // and it goes on as a live store
    tenants(old).await;
}

async fn sqlite_db(dir: &tempfile::TempDir, name: &str) -> Db {
    Db::connect(&format!("sqlite://{}", dir.path().join(name).display()))
        .await
        .unwrap()
}

#[tokio::test]
async fn groups_per_project_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = sqlite_db(&dir, "fresh.db").await;
    fresh.migrate().await.unwrap();
    tenants(&fresh).await;
    let old = sqlite_db(&dir, "old.db").await;
    let empty = sqlite_db(&dir, "empty.db").await;
    empty.migrate().await.unwrap();
    upgrade(&old, &empty).await;
}

#[tokio::test]
async fn groups_per_project_postgres() {
    let Some((name, fresh)) = common::pg_migrated("pm_pgroups").await else {
        return;
    };
    tenants(&fresh).await;
    let Some((empty_name, empty)) = common::pg_migrated("pm_pgroups_e").await else {
        return;
    };
    let Some((old_name, url)) = common::pg_database("pm_pgroups_o").await else {
        return;
    };
    let old = Db::connect(&url).await.unwrap();
    upgrade(&old, &empty).await;
    for db in [fresh, empty, old] {
        db.close().await;
    }
    for n in [name, empty_name, old_name] {
        common::drop_db(&n).await;
    }
}

/// Inserts one pending crash per `(project, day, annotations)`, leases them all and stores
/// them in one batch (`finish_batch`, one `UPDATE` of their reports): crash `i` gets
/// signature `sig i%4` and kind `kinds[i%3]`.
async fn store_batch(db: &Db, first: usize, crashes_of: &[(&str, i64, &str)]) {
    for (i, (project, day, annotations)) in crashes_of.iter().enumerate() {
        let new = NewCrash {
            id: format!("b{:03}", first + i),
            received_at: T0 + day * DAY + (first + i) as i64 * 1000,
            dump_sha256: "00".into(),
            dump_size: 1,
            dump_format: "elf-core".into(),
            annotations: (*annotations).into(),
            annotations_cut: None,
        };
        crashes::insert_in(db, &new, project).await.unwrap();
    }
    let leases = crashes::lease_batch(db, "w", T0 + 9 * DAY, 60_000, 3, 1000)
        .await
        .unwrap();
    assert_eq!(leases.len(), crashes_of.len());
    let kinds = ["", "abort", "segv"];
    let outcomes: Vec<Outcome> = leases
        .iter()
        .map(|l| {
            let i: usize = l.id[1..].parse().unwrap();
            let report = format!(
                r#"{{"crash":{{"analysis":{{"kind":"{}"}}}}}}"#,
                kinds[i % 3]
            );
            Outcome::Done(StoredReport::from_json(
                report,
                Some(format!("sig {}", i % 4)),
            ))
        })
        .collect();
    let jobs: Vec<crashes::Finished> = leases
        .iter()
        .zip(&outcomes)
        .map(|(lease, outcome)| crashes::Finished {
            lease,
            outcome,
            processing_us: Some(1),
        })
        .collect();
    let kept = crashes::finish_batch(db, "w", T0 + 9 * DAY, 3, &jobs)
        .await
        .unwrap();
    assert!(kept.iter().all(|k| *k), "every report stored: {kept:?}");
}

/// A batch's first reports enter their groups together (on PostgreSQL one trigger per
/// statement, migration 0042; on SQLite a row trigger each): with several projects,
/// products, versions, kinds and days in one batch, days before, between and after the
/// days a group already has, and days it has already, every rollup — the running counts
/// of every scope above all — equals its recount from the crashes, after each batch and
/// after crashes of the batch are reprocessed into other groups.
async fn batches_of_first_reports(db: &Db) {
    let annotations = [
        r#"{"prod":"App","ver":"1.0"}"#,
        r#"{"prod":"App","ver":"2.0"}"#,
        r#"{"prod":"Other"}"#,
        "{}",
    ];
    let first: Vec<(&str, i64, &str)> = (0..24)
        .map(|i| (["a", "b"][i % 2], [2, 4, 6][i % 3], annotations[i % 4]))
        .collect();
    store_batch(db, 0, &first).await;
    rollups_exact(db, "after a first batch").await;
    let second: Vec<(&str, i64, &str)> = (0..70)
        .map(|i| (["a", "b"][i % 2], (i % 8) as i64, annotations[(i / 2) % 4]))
        .collect();
    store_batch(db, 24, &second).await;
    rollups_exact(db, "after a batch over the first one's days").await;
    for (id, day) in [("b030", 1), ("b031", 7), ("b050", 4)] {
        reprocess(db, id, T0 + day * DAY, "sig moved").await;
    }
    rollups_exact(db, "after crashes of the batch were reprocessed").await;
}

#[tokio::test]
async fn batches_of_first_reports_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_db(&dir, "batches.db").await;
    db.migrate().await.unwrap();
    batches_of_first_reports(&db).await;
    db.close().await;
}

#[tokio::test]
async fn batches_of_first_reports_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_pgroups_b").await else {
        return;
    };
    batches_of_first_reports(&db).await;
    db.close().await;
    common::drop_db(&name).await;
}
