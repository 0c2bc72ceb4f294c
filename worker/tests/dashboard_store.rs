//! The dashboard's store queries (migration 0002), each run on SQLite and on PostgreSQL
//! (a fresh database on 127.0.0.1:5432, dropped afterwards; `POSTMORTEM_SKIP_PG=1` skips
//! it when PostgreSQL is absent): groups by signature with keyset pages and filters,
//! product/version filled from annotations by the trigger, daily counts, requeue; and the
//! aggregate group rows of migration 0006: every sort order in both directions walked in
//! keyset pages against the order computed here from the crashes inserted, with and
//! without filters, and the rows still equal to a GROUP BY over the crashes after
//! reprocessing moved crashes between groups and a crash was deleted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use crate::common;

use worker::store::crashes::{self, NewCrash, Outcome, StoredReport};
use worker::store::dashboard::{self as q, Group, GroupQuery, GroupSort};
use worker::store::Db;

const DAY: i64 = 86_400_000;

async fn sqlite() -> (Db, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::connect(&format!("sqlite://{}", dir.path().join("t.db").display()))
        .await
        .expect("sqlite connect");
    db.migrate().await.expect("sqlite migrate");
    (db, dir)
}

/// Inserts a crash received at `at` with annotations and finishes it with `signature`.
async fn crash(db: &Db, at: i64, annotations: &str, signature: Option<&str>) -> String {
    crash_with_report(db, at, annotations, signature, "{}").await
}

/// [`crash`] with the report stored for it (what the search index reads).
async fn crash_with_report(
    db: &Db,
    at: i64,
    annotations: &str,
    signature: Option<&str>,
    report: &str,
) -> String {
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
            annotations_cut: None,
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
        Some(s) => Outcome::Done(StoredReport::from_json(report.into(), Some(s.into()))),
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
        project: None,
        after_project: None,
        sort: GroupSort::Signature,
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
    query.after = Some((0, p1[1].signature.clone()));
    let p2 = q::groups(db, &query).await.unwrap();
    assert_eq!(
        p2.iter().map(|g| g.signature.as_str()).collect::<Vec<_>>(),
        ["c", "d"]
    );
    query.after = Some((0, "d".into()));
    assert!(q::groups(db, &query).await.unwrap().is_empty());

    // Filters: product and version (from either annotation spelling), time range.
    let by = |product: Option<&str>, version: Option<&str>, since: Option<i64>| GroupQuery {
        project: None,
        after_project: None,
        product: product.map(str::to_string),
        version: version.map(str::to_string),
        since,
        sort: GroupSort::Signature,
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
    let days = q::group_days(db, "default", "a | main", t0, t0 + 10 * DAY)
        .await
        .unwrap();
    let per_day: Vec<(i64, i64)> = days.iter().map(|d| (d.day - t0 / DAY, d.count)).collect();
    assert_eq!(per_day, [(0, 1), (1, 1), (2, 1)]);
    let products = q::group_products(db, "default", "a | main", 10)
        .await
        .unwrap();
    assert_eq!(
        products,
        [
            (Some("app".into()), Some("1.0".into())),
            (Some("app".into()), Some("2.0".into()))
        ]
    );
    // The page's batched queries give each group what the one-group queries give.
    let sigs: Vec<String> = ["a | main", "b", "c", "d", "none"]
        .map(String::from)
        .to_vec();
    let keys: Vec<q::GroupKey> = sigs.iter().map(|s| ("default".into(), s.clone())).collect();
    let all_days = q::groups_days(db, &keys, t0, t0 + 10 * DAY).await.unwrap();
    let all_products = q::groups_products(db, &keys, 1).await.unwrap();
    for sig in &sigs {
        let mut own: Vec<q::GroupDay> = all_days
            .iter()
            .filter(|d| &d.signature == sig)
            .map(|d| d.day.clone())
            .collect();
        own.sort_by_key(|d| (d.day, d.product.clone(), d.version.clone()));
        assert_eq!(
            own,
            q::group_days(db, "default", sig, t0, t0 + 10 * DAY)
                .await
                .unwrap()
        );
        let own: Vec<_> = all_products
            .iter()
            .filter(|(_, s, _, _)| s == sig)
            .map(|(_, _, p, v)| (p.clone(), v.clone()))
            .collect();
        assert_eq!(
            own,
            q::group_products(db, "default", sig, 1).await.unwrap(),
            "{sig}"
        );
    }
    assert_eq!(all_products.iter().filter(|p| p.1 == "a | main").count(), 1);
    assert!(q::groups_days(db, &[], t0, t0).await.unwrap().is_empty());
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

/// Groups filtered by the analysis kind of their crashes (the crash list's index), with
/// keyset pages.
async fn groups_by_kind(db: &Db) {
    for (sig, kind) in [
        ("k-null-a", "null-pointer"),
        ("k-null-b", "null-pointer"),
        ("k-null-b", "null-pointer"),
        ("k-div", "divide-by-zero"),
    ] {
        let report = format!(r#"{{"crash":{{"analysis":{{"kind":"{kind}"}}}}}}"#);
        crash_with_report(db, 500 * DAY, "{}", Some(sig), &report).await;
    }
    let of_kind = |kind: &str, after: Option<(i64, String)>| GroupQuery {
        project: None,
        after_project: None,
        kind: Some(kind.to_string()),
        sort: GroupSort::Signature,
        after,
        limit: 1,
        ..GroupQuery::default()
    };
    let first = q::groups(db, &of_kind("null-pointer", None)).await.unwrap();
    let sigs = |g: &[Group]| g.iter().map(|g| g.signature.clone()).collect::<Vec<_>>();
    assert_eq!(sigs(&first), ["k-null-a"]);
    let after = Some((0, "k-null-a".to_string()));
    let second = q::groups(db, &of_kind("null-pointer", after))
        .await
        .unwrap();
    assert_eq!(sigs(&second), ["k-null-b"]);
    assert_eq!(second[0].count, 2);
    let div = q::groups(db, &of_kind("divide-by-zero", None))
        .await
        .unwrap();
    assert_eq!(sigs(&div), ["k-div"]);
    assert!(q::groups(db, &of_kind("abort", None))
        .await
        .unwrap()
        .is_empty());

    // a group whose null pointer is older than the window and whose crashes in the
    // window are of another kind: not a null-pointer group of that window
    for (at, kind) in [(100 * DAY, "null-pointer"), (500 * DAY, "divide-by-zero")] {
        let report = format!(r#"{{"crash":{{"analysis":{{"kind":"{kind}"}}}}}}"#);
        crash_with_report(db, at, "{}", Some("k-zmixed"), &report).await;
    }
    let windowed = |kind: &str| GroupQuery {
        project: None,
        after_project: None,
        kind: Some(kind.to_string()),
        since: Some(400 * DAY),
        sort: GroupSort::Signature,
        limit: 10,
        ..GroupQuery::default()
    };
    let null = q::groups(db, &windowed("null-pointer")).await.unwrap();
    assert_eq!(sigs(&null), ["k-null-a", "k-null-b"]);
    let div = q::groups(db, &windowed("divide-by-zero")).await.unwrap();
    assert_eq!(sigs(&div), ["k-div", "k-zmixed"]);
    let all_time = GroupQuery {
        project: None,
        after_project: None,
        since: None,
        ..windowed("null-pointer")
    };
    let null = q::groups(db, &all_time).await.unwrap();
    assert_eq!(sigs(&null), ["k-null-a", "k-null-b", "k-zmixed"]);
}

/// Every group in `q`'s order, read in keyset pages of 2.
async fn walk(db: &Db, q: &GroupQuery) -> Vec<Group> {
    let mut q = GroupQuery {
        project: None,
        after_project: None,
        limit: 2,
        after: None,
        ..q.clone()
    };
    let mut all = Vec::new();
    loop {
        let page = q::groups(db, &q).await.unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        q.after = Some((q.sort.key(last), last.signature.clone()));
        all.extend(page);
    }
    all
}

/// The groups of `crashes` (signature, received_at, product), computed here, in order.
fn expected(
    crashes: &[(&str, i64, &str)],
    keep: impl Fn(i64, &str) -> bool,
    sort: GroupSort,
    descending: bool,
) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for &(sig, at, _) in crashes.iter().filter(|c| keep(c.1, c.2)) {
        match groups.iter_mut().find(|g| g.signature == sig) {
            Some(g) => {
                g.count += 1;
                g.first_seen = g.first_seen.min(at);
                g.last_seen = g.last_seen.max(at);
            }
            None => groups.push(Group {
                project: "default".into(),
                signature: sig.into(),
                count: 1,
                first_seen: at,
                last_seen: at,
            }),
        }
    }
    groups.sort_by(|a, b| {
        let key = |g: &Group| match sort {
            GroupSort::Count => g.count,
            GroupSort::FirstSeen => g.first_seen,
            GroupSort::LastSeen => g.last_seen,
            GroupSort::Signature => 0,
        };
        let o = key(a).cmp(&key(b)).then(a.signature.cmp(&b.signature));
        if descending {
            o.reverse()
        } else {
            o
        }
    });
    groups
}

/// The aggregate rows and the same numbers computed from the crashes table.
async fn rows_and_truth(db: &Db) -> (Vec<(String, i64, i64, i64)>, Vec<(String, i64, i64, i64)>) {
    let rows =
        "SELECT signature, count, first_seen, last_seen FROM crash_groups ORDER BY signature";
    let truth = "SELECT signature, COUNT(*), MIN(received_at), MAX(received_at) FROM crashes \
                 WHERE signature IS NOT NULL AND signature <> '' GROUP BY signature ORDER BY signature";
    match db.backend() {
        worker::store::Backend::Sqlite(p) => (
            sqlx::query_as(rows).fetch_all(p).await.unwrap(),
            sqlx::query_as(truth).fetch_all(p).await.unwrap(),
        ),
        worker::store::Backend::Postgres(p) => (
            sqlx::query_as(rows).fetch_all(p).await.unwrap(),
            sqlx::query_as(truth).fetch_all(p).await.unwrap(),
        ),
    }
}

async fn order_and_pages(db: &Db) {
    let t0 = 1_700_000_000_000i64 / DAY * DAY;
    let h = 3_600_000;
    // (signature, received_at, product): counts 4, 3, 2, 2 (a tie), 1.
    let mut model: Vec<(&str, i64, &str)> = vec![
        ("s1", t0 + h, "app"),
        ("s1", t0 + DAY, "app"),
        ("s1", t0 + 2 * DAY, "app"),
        ("s1", t0 + 3 * DAY + h, "app"),
        ("s5", t0 + 2 * DAY + 2 * h, "other"),
        ("s5", t0 + 2 * DAY + 3 * h, "other"),
        ("s5", t0 + 7 * DAY, "other"),
        ("s2", t0 + 5 * DAY, "app"),
        ("s2", t0 + 6 * DAY, "other"),
        ("s3", t0 + DAY + 5 * h, "app"),
        ("s3", t0 + 9 * DAY, "app"),
        ("s4", t0 + 4 * DAY, "app"),
    ];
    // the version of a crash: its day's parity (every group has crashes of both but s4)
    let version = |at: i64| if (at / DAY) % 2 == 0 { "1" } else { "2" };
    let mut ids = Vec::new();
    for &(sig, at, product) in &model {
        let ann = format!(r#"{{"prod":"{product}","ver":"{}"}}"#, version(at));
        ids.push(crash(db, at, &ann, Some(sig)).await);
    }
    let sorts = [
        GroupSort::Count,
        GroupSort::FirstSeen,
        GroupSort::LastSeen,
        GroupSort::Signature,
    ];
    let check = |model: Vec<(&'static str, i64, &'static str)>| async move {
        for sort in sorts {
            for descending in [true, false] {
                let all = GroupQuery {
                    project: None,
                    after_project: None,
                    sort,
                    descending,
                    ..GroupQuery::default()
                };
                assert_eq!(
                    walk(db, &all).await,
                    expected(&model, |_, _| true, sort, descending),
                    "{sort:?} descending={descending}"
                );
                // Filtered: from day 2 on (day granularity), product `app`.
                let filtered = GroupQuery {
                    project: None,
                    after_project: None,
                    since: Some(t0 + 2 * DAY + h),
                    product: Some("app".into()),
                    ..all.clone()
                };
                assert_eq!(
                    walk(db, &filtered).await,
                    expected(
                        &model,
                        |at, p| at >= t0 + 2 * DAY && p == "app",
                        sort,
                        descending
                    ),
                    "filtered {sort:?} descending={descending}"
                );
                let window = GroupQuery {
                    project: None,
                    after_project: None,
                    since: Some(t0 + DAY),
                    until: Some(t0 + 5 * DAY),
                    ..all.clone()
                };
                assert_eq!(
                    walk(db, &window).await,
                    expected(
                        &model,
                        |at, _| at >= t0 + DAY && at < t0 + 5 * DAY,
                        sort,
                        descending
                    ),
                    "window {sort:?} descending={descending}"
                );
                // One version, every product (its own running counts, migration 0037),
                // from within day 1 on and in a closed window.
                for until in [None, Some(t0 + 7 * DAY)] {
                    let versioned = GroupQuery {
                        project: None,
                        after_project: None,
                        since: Some(t0 + DAY + h),
                        until,
                        version: Some("2".into()),
                        ..all.clone()
                    };
                    let end = until.unwrap_or(i64::MAX);
                    assert_eq!(
                        walk(db, &versioned).await,
                        expected(
                            &model,
                            |at, _| at >= t0 + DAY && at < end && version(at) == "2",
                            sort,
                            descending
                        ),
                        "version {sort:?} descending={descending} until={until:?}"
                    );
                }
            }
        }
        let (rows, truth) = rows_and_truth(db).await;
        assert_eq!(rows, truth);
    };
    check(model.clone()).await;
    // The default order is most crashes first.
    let first = GroupQuery {
        project: None,
        after_project: None,
        descending: GroupSort::default().default_descending(),
        limit: 1,
        ..GroupQuery::default()
    };
    let default = q::groups(db, &first).await.unwrap();
    assert_eq!(default[0].signature, "s1");

    // Reprocessing moves crashes between groups: s1's first crash (its first_seen) and
    // s4's only one (the group goes) become s3 and s1.
    for (i, new) in [(0usize, "s3"), (11, "s1")] {
        assert!(q::requeue(db, &ids[i]).await.unwrap());
        let lease = crashes::lease(db, "w", t0 + 20 * DAY, 60_000, 3)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(lease.id, ids[i]);
        let done = Outcome::Done(StoredReport::from_json("{}".into(), Some(new.into())));
        assert!(crashes::finish(db, &lease, "w", t0 + 20 * DAY, 3, &done)
            .await
            .unwrap());
        model[i].0 = new;
    }
    assert!(model.iter().all(|c| c.0 != "s4"));
    check(model.clone()).await;
    let days = q::group_days(db, "default", "s1", t0, t0 + 10 * DAY)
        .await
        .unwrap();
    assert_eq!(
        days.iter()
            .map(|d| (d.day - t0 / DAY, d.count))
            .collect::<Vec<_>>(),
        [(1, 1), (2, 1), (3, 1), (4, 1)]
    );

    // A deleted crash leaves its group (s5's last one: last_seen goes back).
    let sql = "DELETE FROM crashes WHERE id = $1";
    match db.backend() {
        worker::store::Backend::Sqlite(p) => {
            sqlx::query(sql).bind(&ids[6]).execute(p).await.map(|_| ())
        }
        worker::store::Backend::Postgres(p) => {
            sqlx::query(sql).bind(&ids[6]).execute(p).await.map(|_| ())
        }
    }
    .unwrap();
    model.remove(6);
    check(model).await;
}

/// Most crashes first in a window, where the page's groups are not among the 200 of
/// largest all-time count the bound starts from (`dashboard::bounded`): 200 groups of 3
/// crashes, one of them in the window, and 3 groups of 2, both in it. The 3 lead the
/// window's page although the bound counted only the 200 first: they are counted after,
/// as groups whose all-time count reaches the bound's.
async fn beyond_the_largest(db: &Db) {
    let t0 = 1_700_000_000_000i64 / DAY * DAY;
    let mut model: Vec<(String, i64, &str)> = Vec::new();
    for i in 0..200 {
        let sig = format!("a{i:03}");
        for at in [t0, t0 + DAY, t0 + 10 * DAY + i] {
            model.push((sig.clone(), at, ""));
        }
    }
    for i in 0..3 {
        let sig = format!("b{i}");
        for at in [t0 + 11 * DAY + i, t0 + 12 * DAY + i] {
            model.push((sig.clone(), at, ""));
        }
    }
    for (sig, at, _) in &model {
        crash(db, *at, "{}", Some(sig)).await;
    }
    let model: Vec<(&str, i64, &str)> = model
        .iter()
        .map(|(s, at, p)| (s.as_str(), *at, *p))
        .collect();
    let since = t0 + 5 * DAY;
    let window = GroupQuery {
        project: None,
        after_project: None,
        since: Some(since),
        sort: GroupSort::Count,
        descending: true,
        limit: 2,
        ..GroupQuery::default()
    };
    let first = q::groups(db, &window).await.unwrap();
    let sigs: Vec<&str> = first.iter().map(|g| g.signature.as_str()).collect();
    assert_eq!(sigs, ["b2", "b1"]);
    let want = expected(&model, |at, _| at >= since, GroupSort::Count, true);
    assert_eq!(want.len(), 203);
    assert_eq!(walk(db, &window).await, want);
}

#[tokio::test]
async fn beyond_the_largest_sqlite() {
    let (db, _dir) = sqlite().await;
    beyond_the_largest(&db).await;
    db.close().await;
}

#[tokio::test]
async fn beyond_the_largest_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_dash").await else {
        return;
    };
    beyond_the_largest(&db).await;
    db.close().await;
    common::drop_db(&name).await;
}

#[tokio::test]
async fn order_and_pages_sqlite() {
    let (db, _dir) = sqlite().await;
    order_and_pages(&db).await;
    db.close().await;
}

#[tokio::test]
async fn order_and_pages_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_dash").await else {
        return;
    };
    order_and_pages(&db).await;
    db.close().await;
    common::drop_db(&name).await;
}

#[tokio::test]
async fn groups_and_requeue_sqlite() {
    let (db, _dir) = sqlite().await;
    groups_and_requeue(&db).await;
    db.close().await;
}

#[tokio::test]
async fn groups_and_requeue_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_dash").await else {
        return;
    };
    groups_and_requeue(&db).await;
    db.close().await;
    common::drop_db(&name).await;
}

#[tokio::test]
async fn groups_by_kind_sqlite() {
    let (db, _dir) = sqlite().await;
    groups_by_kind(&db).await;
    db.close().await;
}

#[tokio::test]
async fn groups_by_kind_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_kind").await else {
        return;
    };
    groups_by_kind(&db).await;
    db.close().await;
    common::drop_db(&name).await;
}

/// Reprocesses crash `id` (requeued, leased, finished) with the rules now giving it
/// `signature`.
async fn reprocess_as(db: &Db, id: &str, at: i64, signature: &str) {
    assert!(q::requeue(db, id).await.unwrap());
    let lease = crashes::lease(db, "w", at, 60_000, 3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.id, id);
    let outcome = Outcome::Done(StoredReport::from_json("{}".into(), Some(signature.into())));
    assert!(crashes::finish(db, &lease, "w", at + 1, 3, &outcome)
        .await
        .unwrap());
}

/// Each crash's (group, computed signature).
async fn group_of(db: &Db, id: &str) -> (String, String) {
    let row = crashes::get(db, id).await.unwrap().unwrap();
    (
        row.signature.unwrap_or_default(),
        row.computed_signature.unwrap_or_default(),
    )
}

/// Migration 0017: a merge moves a group's crashes now, keeps them there when
/// reprocessing gives them a new signature, and sends later crashes of the merged
/// signature along; a split moves the crashes ticked to a group of their own and keeps
/// them there; undoing a merge gives back what it brought (the later crash too). The
/// aggregate rows stay equal to a GROUP BY over the crashes throughout.
async fn merges_and_splits(db: &Db) {
    use worker::store::groups::{self, DecisionError};
    type GroupRows = Vec<(String, i64, i64, i64)>;
    let t0 = 1_700_000_000_000i64 / DAY * DAY;
    let a1 = crash(db, t0, "{}", Some("a")).await;
    let a2 = crash(db, t0 + 1, "{}", Some("a")).await;
    let b1 = crash(db, t0 + 2, "{}", Some("b")).await;
    let c1 = crash(db, t0 + 3, "{}", Some("c")).await;
    let same = |(rows, truth): (GroupRows, GroupRows)| {
        assert_eq!(rows, truth);
        rows.into_iter().map(|r| (r.0, r.1)).collect::<Vec<_>>()
    };

    // refused decisions change nothing
    assert!(matches!(
        groups::merge(db, "default", "a", "a").await,
        Err(DecisionError::Invalid(_))
    ));
    assert!(matches!(
        groups::merge(db, "default", "a", "nope").await,
        Err(DecisionError::NoGroup(_))
    ));
    assert!(matches!(
        groups::split(db, "default", "a", std::slice::from_ref(&c1), None).await,
        Err(DecisionError::Invalid(_))
    ));

    let m = groups::merge(db, "default", "a", "b").await.unwrap();
    assert_eq!((m.group.as_str(), m.crashes), ("a", 1));
    assert_eq!(group_of(db, &b1).await, ("a".into(), "b".into()));
    assert_eq!(
        same(rows_and_truth(db).await),
        [("a".to_string(), 3), ("c".to_string(), 1)]
    );
    // reprocessing gives b1 a new signature: it stays in the merged group
    reprocess_as(db, &b1, t0 + 10, "b-new").await;
    assert_eq!(group_of(db, &b1).await, ("a".into(), "b-new".into()));
    // a new crash of the merged signature joins it
    let b2 = crash(db, t0 + 20, "{}", Some("b")).await;
    assert_eq!(group_of(db, &b2).await, ("a".into(), "b".into()));
    assert_eq!(
        groups::merged_into(db, "default", "a").await.unwrap(),
        [("b".into(), 1)]
    );

    // a2 split out; reprocessing it under any signature keeps it split
    let m = groups::split(db, "default", "a", std::slice::from_ref(&a2), None)
        .await
        .unwrap();
    assert_eq!((m.group.as_str(), m.crashes), ("a (split)", 1));
    reprocess_as(db, &a2, t0 + 30, "a").await;
    assert_eq!(group_of(db, &a2).await, ("a (split)".into(), "a".into()));
    // the preview's question: where would a crash go under another signature
    assert_eq!(groups::settle(db, &a2, "x").await.unwrap(), "a (split)");
    assert_eq!(groups::settle(db, &c1, "b").await.unwrap(), "a");
    assert_eq!(groups::settle(db, &c1, "x").await.unwrap(), "x");
    assert_eq!(
        same(rows_and_truth(db).await),
        [
            ("a".to_string(), 3),
            ("a (split)".to_string(), 1),
            ("c".to_string(), 1)
        ]
    );

    // undo the merge: b1 (pinned) and b2 (through the merge rule) go back to "b"
    let m = groups::unmerge(db, "default", "a", "b").await.unwrap();
    assert_eq!((m.group.as_str(), m.crashes), ("b", 2));
    assert_eq!(group_of(db, &b1).await, ("b".into(), "b-new".into()));
    assert_eq!(group_of(db, &b2).await, ("b".into(), "b".into()));
    assert_eq!(group_of(db, &a1).await, ("a".into(), "a".into()));
    // and it stays undone: b1 reprocessed again stays in "b", a new "b" crash goes there
    reprocess_as(db, &b1, t0 + 40, "b-newer").await;
    assert_eq!(group_of(db, &b1).await, ("b".into(), "b-newer".into()));
    let b3 = crash(db, t0 + 50, "{}", Some("b")).await;
    assert_eq!(group_of(db, &b3).await, ("b".into(), "b".into()));
    assert!(matches!(
        groups::unmerge(db, "default", "a", "b").await,
        Err(DecisionError::Invalid(_))
    ));
    assert_eq!(
        same(rows_and_truth(db).await),
        [
            ("a".to_string(), 1),
            ("a (split)".to_string(), 1),
            ("b".to_string(), 3),
            ("c".to_string(), 1)
        ]
    );
    // a merge of a split group back is a merge like any other
    groups::merge(db, "default", "a", "a (split)")
        .await
        .unwrap();
    assert_eq!(group_of(db, &a2).await, ("a".into(), "a".into()));
    assert_eq!(
        same(rows_and_truth(db).await),
        [
            ("a".to_string(), 2),
            ("b".to_string(), 3),
            ("c".to_string(), 1)
        ]
    );
}

#[tokio::test]
async fn merges_and_splits_sqlite() {
    let (db, _dir) = sqlite().await;
    merges_and_splits(&db).await;
    db.close().await;
}

#[tokio::test]
async fn merges_and_splits_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_groups").await else {
        return;
    };
    merges_and_splits(&db).await;
    db.close().await;
    common::drop_db(&name).await;
}
