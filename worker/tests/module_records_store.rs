//! A job's module records written at once (`store::module_records`, issue 40): every
//! module of both indexes in one transaction, a module named twice recorded once, the
//! missing ones listed as the one-at-a-time writes listed them; on SQLite and PostgreSQL.

use crate::common;
use worker::store::crashes::{self, NewCrash};
use worker::store::module_records::{record_all, Index, ModuleRecord};
use worker::store::{missing, Backend, Db};

fn record(index: Index, key: &str, debug_id: Option<&str>, name: &str) -> ModuleRecord {
    ModuleRecord {
        index,
        key: key.into(),
        debug_id: debug_id.map(str::to_string),
        name: name.into(),
    }
}

/// Rows of `table` for crash `id`.
async fn rows(db: &Db, table: &str, id: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM {table} WHERE crash_id = $1");
    let sql = sqlx::AssertSqlSafe(sql);
    match db.backend() {
        Backend::Sqlite(p) => sqlx::query_scalar(sql).bind(id).fetch_one(p).await,
        Backend::Postgres(p) => sqlx::query_scalar(sql).bind(id).fetch_one(p).await,
    }
    .unwrap()
}

async fn scenario(db: &Db) {
    let c = NewCrash {
        id: "m1".into(),
        received_at: 1000,
        dump_sha256: "0".repeat(64),
        dump_size: 10,
        dump_format: "minidump".into(),
        annotations: "{}".into(),
        annotations_cut: None,
    };
    crashes::insert(db, &c).await.unwrap();
    record_all(db, "m1", &[]).await.unwrap();
    let mut records: Vec<ModuleRecord> = (0..250)
        .map(|i| {
            record(
                Index::Missing,
                &format!("{i:040x}"),
                None,
                &format!("lib{i}.so"),
            )
        })
        .collect();
    records.push(record(
        Index::Missing,
        &format!("{:040x}", 7),
        None,
        "lib7.so",
    ));
    records.push(record(Index::Partial, "ab12", Some("AB120"), "libp.so"));
    records.push(record(Index::Partial, "ab12", Some("AB120"), "libp.so"));
    records.push(record(Index::Partial, "cd34", None, "libq.so"));
    record_all(db, "m1", &records).await.unwrap();
    assert_eq!(rows(db, "missing_modules", "m1").await, 250);
    assert_eq!(rows(db, "breakpad_modules", "m1").await, 2);
    let listed = missing::list(db, 1000).await.unwrap();
    assert_eq!(listed.len(), 250);
    let seven = listed
        .iter()
        .find(|m| m.build_id == format!("{:040x}", 7))
        .expect("a module named twice is listed");
    assert_eq!(
        (seven.module_name.as_str(), seven.crash_count),
        ("lib7.so", 1)
    );
    // written again (a second attempt of the job): nothing doubles
    record_all(db, "m1", &records).await.unwrap();
    assert_eq!(rows(db, "missing_modules", "m1").await, 250);
    assert_eq!(rows(db, "breakpad_modules", "m1").await, 2);
}

#[tokio::test]
async fn module_records_sqlite() {
    let (_dir, db) = common::sqlite_migrated().await;
    scenario(&db).await;
    db.close().await;
}

#[tokio::test]
async fn module_records_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_mr").await else {
        return;
    };
    scenario(&db).await;
    db.close().await;
    common::drop_db(&name).await;
}
