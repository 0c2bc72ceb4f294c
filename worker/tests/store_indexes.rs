//! The store's indexes and rollups of migrations 0021 and 0035 (issue 40) against the definitions
//! they replace, on SQLite and on PostgreSQL (a fresh `pm_*` database, dropped after):
//! a small random store of crashes, reprocessed, merged, split, unmerged and pruned, then
//! - the crash list's module filter (the module index) against the crashes whose search
//!   index names that module, newest first, in keyset pages, with other filters;
//! - the reprocess selection by build-id (the module index) against the reports that
//!   name it (`report LIKE`, the old statement) or miss it;
//! - the groups page for random windows, products, versions and kinds (the running
//!   counts and kind rows) against the groups computed here from the crashes' rows and
//!   their search index's analysis kind, in every sort order, in keyset pages;
//! - each group's products and versions (migration 0035) against its crashes';
//! - a late source bundle's requeue (the module index) against the finished reports that
//!   name its build-id, within a limit and then the rest.
//!
//! Counts, not timings: `postmortem bench store` times them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use crate::common;

use worker::store::crashes::{self, ListQuery, NewCrash, Outcome, StoredReport};
use worker::store::dashboard::{self as q, Group, GroupQuery, GroupSort};
use worker::store::{groups, reprocess, source_bundles, Backend, Db};

const DAY: i64 = 86_400_000;
const T0: i64 = 1_700_000_000_000 / DAY * DAY;
const DAYS: u64 = 40;
const SIGNATURES: [&str; 7] = ["s0", "s1", "s2", "s3", "s4", "s5", "s6"];
const PRODUCTS: [&str; 3] = ["App", "Tool", ""];
const VERSIONS: [&str; 3] = ["1.0", "2.0", ""];
const KINDS: [&str; 3] = ["null-pointer", "abort", ""];
/// (file name, build-id): two builds of libc.
const MODULES: [(&str, &str); 5] = [
    ("/lib/libc.so.6", "aa01"),
    ("/lib/libc.so.6", "aa02"),
    ("/usr/lib/libm.so.6", "bb01"),
    ("app", "cc01"),
    ("libz.so", "dd01"),
];

/// xorshift64*: the same store on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }

    fn pick<'a>(&mut self, of: &[&'a str]) -> &'a str {
        of[self.below(of.len() as u64) as usize]
    }
}

/// A report with a random kind and modules (a debug file's build-id for `app`).
fn report(rng: &mut Rng) -> String {
    let mut modules = Vec::new();
    for (name, id) in MODULES {
        if rng.below(3) > 0 {
            let files = if name == "app" {
                r#","files":[{"name":"app.debug","build_id":"ee01"}]"#
            } else {
                ""
            };
            modules.push(format!(r#"{{"name":"{name}","build_id":"{id}"{files}}}"#));
        }
    }
    let kind = rng.pick(&KINDS);
    let crash = if kind.is_empty() {
        String::new()
    } else {
        format!(r#","crash":{{"analysis":{{"kind":"{kind}","summary":"x"}}}}"#)
    };
    format!(r#"{{"modules":[{}]{crash}}}"#, modules.join(","))
}

async fn finish_with(db: &Db, id: &str, now: i64, signature: &str, report: String) {
    let lease = crashes::lease(db, "w", now, 60_000, 3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.id, id);
    let done = Outcome::Done(StoredReport::from_json(report, Some(signature.into())));
    assert!(crashes::finish(db, &lease, "w", now, 3, &done)
        .await
        .unwrap());
}

/// Fills the store and moves crashes around: returns the crash ids.
async fn fill(db: &Db, rng: &mut Rng) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..160i64 {
        let at = T0 + (rng.below(DAYS * 24) as i64) * 3_600_000 + i;
        let (p, v) = (rng.pick(&PRODUCTS), rng.pick(&VERSIONS));
        let mut ann = serde_json::Map::new();
        if !p.is_empty() {
            ann.insert("prod".into(), p.into());
        }
        if !v.is_empty() {
            ann.insert("ver".into(), v.into());
        }
        let id = crashes::new_id();
        let crash = NewCrash {
            id: id.clone(),
            received_at: at,
            dump_sha256: "00".into(),
            dump_size: 1,
            dump_format: "elf-core".into(),
            annotations: serde_json::Value::Object(ann).to_string(),
            annotations_cut: None,
        };
        crashes::insert(db, &crash).await.unwrap();
        let sig = rng.pick(&SIGNATURES);
        finish_with(db, &id, at, sig, report(rng)).await;
        ids.push(id);
    }
    // reprocessing: new signatures, kinds and modules for a quarter of them
    for _ in 0..40 {
        let id = &ids[rng.below(ids.len() as u64) as usize];
        assert!(q::requeue(db, id).await.unwrap());
        let sig = rng.pick(&SIGNATURES);
        finish_with(db, id, T0 + 50 * DAY, sig, report(rng)).await;
    }
    // a merge, a split, a merge undone, a crash deleted
    groups::merge(db, "default", "s0", "s1").await.unwrap();
    groups::merge(db, "default", "s2", "s3").await.unwrap();
    let some: Vec<String> = ids.iter().step_by(7).cloned().collect();
    let _ = groups::split(db, "default", "s2", &some, Some("s2 split")).await;
    groups::unmerge(db, "default", "s2", "s3").await.unwrap();
    let gone = &ids[5];
    let sql = "DELETE FROM crashes WHERE id = $1";
    match db.backend() {
        Backend::Sqlite(p) => sqlx::query(sql).bind(gone).execute(p).await.map(|_| ()),
        Backend::Postgres(p) => sqlx::query(sql).bind(gone).execute(p).await.map(|_| ()),
    }
    .unwrap();
    ids
}

/// A crash as the old definitions read it: (id, signature, received_at, product,
/// version, analysis kind from the search index, report).
type Row = (
    String,
    Option<String>,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

async fn rows(db: &Db) -> Vec<Row> {
    let sql = "SELECT c.id, c.signature, c.received_at, c.product, c.version, \
               (SELECT MIN(st.term) FROM crash_terms ct JOIN search_terms st ON st.id = ct.term_id \
                WHERE ct.crash_id = c.id AND st.kind = 'analysis'), c.report FROM crashes c";
    match db.backend() {
        Backend::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await.unwrap(),
        Backend::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await.unwrap(),
    }
}

/// Ids of the crashes whose search index (0007, unchanged) names module `name`, by the
/// old statement, newest first.
async fn old_module_list(db: &Db, name: &str, product: Option<&str>) -> Vec<String> {
    let sql = "SELECT id FROM crashes WHERE id IN (SELECT ct.crash_id FROM crash_terms ct \
               JOIN search_terms st ON st.id = ct.term_id WHERE st.kind = 'module' \
               AND st.term = $1) AND ($2 IS NULL OR product = $2) \
               ORDER BY received_at DESC, id DESC";
    let ids: Vec<(String,)> = match db.backend() {
        Backend::Sqlite(p) => {
            sqlx::query_as(sql)
                .bind(name)
                .bind(product)
                .fetch_all(p)
                .await
        }
        Backend::Postgres(p) => {
            sqlx::query_as(sql)
                .bind(name)
                .bind(product)
                .fetch_all(p)
                .await
        }
    }
    .unwrap();
    ids.into_iter().map(|(i,)| i).collect()
}

async fn module_filter(db: &Db) {
    for name in ["libc.so.6", "libm.so.6", "app", "libz.so", "nope"] {
        for product in [None, Some("App")] {
            let mut got = Vec::new();
            let mut q = ListQuery {
                module: Some(name.into()),
                product: product.map(str::to_string),
                limit: 7,
                ..ListQuery::default()
            };
            loop {
                let page = crashes::list(db, &q).await.unwrap();
                let Some(last) = page.last() else { break };
                q.after = Some((last.received_at, last.id.clone()));
                got.extend(page.into_iter().map(|c| c.id));
            }
            let want = old_module_list(db, name, product).await;
            assert_eq!(got, want, "module {name} product {product:?}");
            if name != "nope" {
                assert!(!want.is_empty(), "module {name}: the store has none");
            }
        }
    }
}

/// The old selection: a report naming the build-id, or a missing module of it.
async fn old_build_id_count(db: &Db, build_id: &str) -> i64 {
    let sql = "SELECT COUNT(*) FROM crashes WHERE status IN ('done', 'failed') AND \
               (id IN (SELECT crash_id FROM missing_modules WHERE build_id = $1) \
               OR report LIKE $2)";
    let like = format!("%\"{build_id}\"%");
    match db.backend() {
        Backend::Sqlite(p) => {
            sqlx::query_scalar(sql)
                .bind(build_id)
                .bind(&like)
                .fetch_one(p)
                .await
        }
        Backend::Postgres(p) => {
            sqlx::query_scalar(sql)
                .bind(build_id)
                .bind(&like)
                .fetch_one(p)
                .await
        }
    }
    .unwrap()
}

async fn build_id_selection(db: &Db) {
    for b in ["aa01", "AA02", "bb01", "cc01", "ee01", "dd01", "ff99"] {
        let filter = reprocess::Filter {
            build_id: Some(b.into()),
            ..reprocess::Filter::default()
        };
        let n = reprocess::count_remaining(db, "run", &filter)
            .await
            .unwrap();
        let want = old_build_id_count(db, &b.to_ascii_lowercase()).await;
        assert_eq!(n, want, "build-id {b}");
        if b != "ff99" {
            assert!(want > 0, "build-id {b}: the store has none");
        }
    }
}

/// The groups of `q` computed from the crash rows (day-granular window, as the page).
fn expected(rows: &[Row], q: &GroupQuery) -> Vec<Group> {
    let since = q.since.map(|t| t.div_euclid(DAY) * DAY);
    let until = q
        .until
        .map(|t| (t.div_euclid(DAY) + i64::from(t.rem_euclid(DAY) != 0)) * DAY);
    let in_window = |r: &&Row| {
        since.is_none_or(|s| r.2 >= s)
            && until.is_none_or(|u| r.2 < u)
            && q.product.as_ref().is_none_or(|p| r.3.as_ref() == Some(p))
            && q.version.as_ref().is_none_or(|v| r.4.as_ref() == Some(v))
    };
    let mut groups: Vec<Group> = Vec::new();
    for r in rows.iter().filter(in_window) {
        let Some(sig) = r.1.as_deref().filter(|s| !s.is_empty()) else {
            continue;
        };
        match groups.iter_mut().find(|g| g.signature == sig) {
            Some(g) => {
                g.count += 1;
                g.first_seen = g.first_seen.min(r.2);
                g.last_seen = g.last_seen.max(r.2);
            }
            None => groups.push(Group {
                project: "default".into(),
                signature: sig.into(),
                count: 1,
                first_seen: r.2,
                last_seen: r.2,
            }),
        }
    }
    if let Some(kind) = &q.kind {
        groups.retain(|g| {
            rows.iter()
                .filter(in_window)
                .any(|r| r.1.as_deref() == Some(&g.signature) && r.5.as_ref() == Some(kind))
        });
    }
    groups.sort_by(|a, b| {
        let o = q
            .sort
            .key(a)
            .cmp(&q.sort.key(b))
            .then(a.signature.cmp(&b.signature));
        if q.descending {
            o.reverse()
        } else {
            o
        }
    });
    groups
}

/// Every group of `q`, in keyset pages of 3.
async fn walk(db: &Db, q: &GroupQuery) -> Vec<Group> {
    let mut q = GroupQuery {
        project: None,
        after_project: None,
        limit: 3,
        after: None,
        ..q.clone()
    };
    let mut all = Vec::new();
    loop {
        let page = q::groups(db, &q).await.unwrap();
        let Some(last) = page.last() else { break };
        q.after = Some((q.sort.key(last), last.signature.clone()));
        all.extend(page);
    }
    all
}

async fn groups_page(db: &Db, rng: &mut Rng) {
    let rows = rows(db).await;
    let sorts = [
        GroupSort::Count,
        GroupSort::FirstSeen,
        GroupSort::LastSeen,
        GroupSort::Signature,
    ];
    let mut nonempty = 0;
    for i in 0..120u64 {
        let bound = |rng: &mut Rng| T0 - 2 * DAY + rng.below((DAYS + 4) * DAY as u64) as i64;
        let since = (rng.below(4) > 0).then(|| bound(rng));
        let until = (rng.below(3) == 0).then(|| bound(rng));
        let text = |rng: &mut Rng, of: &[&str], p: u64| {
            (rng.below(p) == 0)
                .then(|| rng.pick(of).to_string())
                .filter(|s| !s.is_empty())
        };
        let q = GroupQuery {
            project: None,
            after_project: None,
            since,
            until,
            product: text(rng, &PRODUCTS, 3),
            version: text(rng, &VERSIONS, 5),
            kind: text(rng, &KINDS, 3),
            sort: sorts[(i % 4) as usize],
            descending: rng.below(2) == 0,
            after: None,
            limit: 3,
        };
        let want = expected(&rows, &q);
        nonempty += usize::from(!want.is_empty());
        assert_eq!(walk(db, &q).await, want, "{q:?}");
    }
    assert!(nonempty > 60, "only {nonempty} windows had groups");
}

/// The finished crashes whose report names `build_id` (`report LIKE`).
async fn naming_count(db: &Db, build_id: &str) -> i64 {
    let sql = "SELECT COUNT(*) FROM crashes WHERE status IN ('done', 'failed') \
               AND report LIKE $1";
    let like = format!("%\"{build_id}\"%");
    match db.backend() {
        Backend::Sqlite(p) => sqlx::query_scalar(sql).bind(&like).fetch_one(p).await,
        Backend::Postgres(p) => sqlx::query_scalar(sql).bind(&like).fetch_one(p).await,
    }
    .unwrap()
}

/// A source bundle that arrives late requeues the finished crashes whose reports name
/// its build-id (the module index), at most its limit at a time, the rest counted left.
async fn late_bundle_requeue(db: &Db) {
    // every crash finished before the bundle
    const ANY: source_bundles::Without = source_bundles::Without {
        since: i64::MAX,
        processing: true,
    };
    let want = naming_count(db, "cc01").await;
    assert!(want > 3, "build-id cc01: only {want} crashes");
    let want = u64::try_from(want).unwrap();
    let first = source_bundles::requeue_naming(db, "*", "CC01", ANY, 3)
        .await
        .unwrap();
    assert_eq!((first.requeued, first.left), (3, want - 3));
    assert_eq!(
        naming_count(db, "cc01").await,
        i64::try_from(want - 3).unwrap()
    );
    let rest = source_bundles::requeue_naming(db, "*", "cc01", ANY, u64::MAX)
        .await
        .unwrap();
    assert_eq!((rest.requeued, rest.left), (want - 3, 0));
    assert_eq!(naming_count(db, "cc01").await, 0);
    let none = source_bundles::requeue_naming(db, "*", "ff99", ANY, u64::MAX)
        .await
        .unwrap();
    assert_eq!((none.requeued, none.left), (0, 0));
}

/// Each group's products and versions (the rows of migration 0035), one group at a time
/// and all at once, against the distinct products and versions of its crashes.
async fn group_versions(db: &Db) {
    let rows = rows(db).await;
    let mut signatures: Vec<String> = rows.iter().filter_map(|r| r.1.clone()).collect();
    signatures.sort();
    signatures.dedup();
    signatures.retain(|s| !s.is_empty());
    assert!(signatures.len() > 3, "only {} groups", signatures.len());
    let nonempty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    let keys: Vec<q::GroupKey> = signatures
        .iter()
        .map(|s| ("default".into(), s.clone()))
        .collect();
    let all = q::groups_products(db, &keys, 100).await.unwrap();
    let mut with_versions = 0;
    for sig in &signatures {
        let mut want: Vec<(Option<String>, Option<String>)> = rows
            .iter()
            .filter(|r| r.1.as_deref() == Some(sig.as_str()))
            .map(|r| (nonempty(&r.3), nonempty(&r.4)))
            .filter(|pv| *pv != (None, None))
            .collect();
        want.sort();
        want.dedup();
        with_versions += usize::from(want.len() > 1);
        // NULL sorts first on SQLite, last on PostgreSQL: compared as sets
        let mut got = q::group_products(db, "default", sig, 100).await.unwrap();
        got.sort();
        assert_eq!(got, want, "{sig}");
        let mut got: Vec<_> = all
            .iter()
            .filter(|(_, s, _, _)| s == sig)
            .map(|(_, _, p, v)| (p.clone(), v.clone()))
            .collect();
        got.sort();
        assert_eq!(got, want, "{sig}, with the others");
    }
    assert!(
        with_versions > 3,
        "only {with_versions} groups with versions"
    );
}

async fn all(db: &Db) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    fill(db, &mut rng).await;
    module_filter(db).await;
    build_id_selection(db).await;
    groups_page(db, &mut rng).await;
    group_versions(db).await;
    // last: it puts crashes back in the queue
    late_bundle_requeue(db).await;
}

#[tokio::test]
async fn indexes_and_rollups_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::connect(&format!("sqlite://{}", dir.path().join("t.db").display()))
        .await
        .expect("sqlite connect");
    db.migrate().await.expect("sqlite migrate");
    all(&db).await;
    db.close().await;
}

#[tokio::test]
async fn indexes_and_rollups_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_idx").await else {
        return;
    };
    all(&db).await;
    db.close().await;
    common::drop_db(&name).await;
}
