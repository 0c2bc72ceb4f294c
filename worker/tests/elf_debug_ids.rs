//! Migration 0040 on an installation whose ELF files were stored before `identify`
//! derived their Breakpad debug id (issue 39), in both dialects (SQLite, and PostgreSQL
//! on 127.0.0.1:5432): the migrations before it applied as they are written, `binaries`
//! rows inserted as the old code wrote them (an ELF file's `debug_id` NULL), then 0040.
//! Every ELF row gets the id Breakpad gives its build-id, so `by_debug_id` (what a
//! microdump's module is looked up by) finds it; other rows are left as they were.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use crate::common;
use crate::migration_files::{before_and, run_sql};

use worker::store::binaries;
use worker::store::Db;

/// (build-id in hex, the debug id Breakpad's writer prints for it). The ids are
/// Breakpad's `MDGUID` printing of the build-id's first 16 bytes (`data1` as a
/// little-endian u32, `data2` and `data3` as little-endian u16s, then `data4`'s bytes),
/// zero-padded when shorter (`FileID` copies at most 16 bytes into a zeroed GUID), then
/// the age `0`: written out by hand, byte by byte, not by the code under test.
const ELF: &[(&str, &str)] = &[
    // 20 bytes (a GNU build-id's SHA-1): the last 4 are not in the id
    (
        "000102030405060708090a0b0c0d0e0f10111213",
        "030201000504070608090A0B0C0D0E0F0",
    ),
    // 16 bytes (lld's --build-id=md5)
    (
        "f0e1d2c3b4a5968778695a4b3c2d1e0f",
        "C3D2E1F0A5B4879678695A4B3C2D1E0F0",
    ),
    // 8 bytes (--build-id=fast, xxhash): data4 is zeros
    ("1122334455667788", "443322116655887700000000000000000"),
];

async fn scenario(db: &Db, dialect: &str) {
    let (before, this) = before_and(dialect, "0040");
    for sql in &before {
        run_sql(db, sql).await;
    }
    let row = |sha: &str, build_id: &str, debug_id: &str, format: &str| {
        let debug_id = if debug_id.is_empty() {
            "NULL".to_string()
        } else {
            format!("'{debug_id}'")
        };
        format!(
            "INSERT INTO binaries (sha256, build_id, arch, kind, file_name, size, sections, \
             uploaded_at, debug_id, format) VALUES ('{sha}', '{build_id}', 'arm', \
             'shared-object', 'lib{sha}.so', 10, 'text', 5, {debug_id}, '{format}');"
        )
    };
    let mut sql = String::new();
    for (i, (build_id, _)) in ELF.iter().enumerate() {
        sql.push_str(&row(&format!("e{i}"), build_id, "", "elf"));
    }
    // an ELF row that has its id already, a .sym file and a Mach-O file: left alone
    sql.push_str(&row("kept", "aa".repeat(20).as_str(), "KEPT0", "elf"));
    sql.push_str(&row("sym", "", "", "breakpad"));
    sql.push_str(&row("macho", "bb".repeat(16).as_str(), "", "macho"));
    run_sql(db, &sql).await;
    run_sql(db, &this).await;

    for (i, (build_id, expected)) in ELF.iter().enumerate() {
        let found = binaries::by_debug_id(db, expected).await.unwrap();
        let shas: Vec<&str> = found.iter().map(|r| r.sha256.as_str()).collect();
        assert_eq!(
            shas,
            vec![format!("e{i}").as_str()],
            "{dialect}: build-id {build_id}"
        );
        // and the id a newly stored file of that build-id gets
        let bytes: Vec<u8> = (0..build_id.len() / 2)
            .map(|n| u8::from_str_radix(&build_id[2 * n..2 * n + 2], 16).unwrap())
            .collect();
        assert_eq!(
            engine::ids::breakpad_debug_id_from_build_id(&bytes),
            *expected,
            "{dialect}: identify's id of {build_id}"
        );
    }
    let ids: Vec<(String, Option<String>)> = worker::on_pool!(db, p => sqlx::query_as(
        "SELECT sha256, debug_id FROM binaries WHERE sha256 IN ('kept', 'sym', 'macho') \
         ORDER BY sha256").fetch_all(p).await)
    .unwrap();
    assert_eq!(
        ids,
        vec![
            ("kept".to_string(), Some("KEPT0".to_string())),
            ("macho".to_string(), None),
            ("sym".to_string(), None),
        ],
        "{dialect}: rows other than ELF ones without an id are left alone"
    );
    // idempotent: run again, nothing changes
    run_sql(db, &this).await;
    let n: i64 = worker::on_pool!(db, p => sqlx::query_scalar(
        "SELECT COUNT(*) FROM binaries WHERE format = 'elf' AND debug_id IS NULL")
        .fetch_one(p).await)
    .unwrap();
    assert_eq!(n, 0);
}

#[tokio::test]
async fn elf_debug_ids_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::connect(&format!("sqlite://{}", dir.path().join("t.db").display()))
        .await
        .unwrap();
    scenario(&db, "sqlite").await;
    db.close().await;
}

#[tokio::test]
async fn elf_debug_ids_postgres() {
    let Some((name, url)) = crate::pg::pg_database("pm_ha_elf_debug_ids").await else {
        return;
    };
    let db = Db::connect(&url).await.unwrap();
    scenario(&db, "postgres").await;
    db.close().await;
    common::drop_db(&name).await;
}
