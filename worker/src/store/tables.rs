//! The `tables` table: built unwind and symbol tables, keyed by (build-id, kind, format
//! version). A format-version bump simply misses here, so the table is rebuilt. The
//! worker's key is `TABLEKEY@FILES`, the files' digest after the module's key (two
//! projects may hold different files of one build-id: `jobs::process`).

use super::{now_ms, Db, StoreError};

/// The stored bytes of one table, if built already.
pub async fn get(
    db: &Db,
    build_id: &str,
    kind: &str,
    version: u32,
) -> Result<Option<Vec<u8>>, StoreError> {
    let sql = "SELECT bytes FROM tables WHERE build_id = $1 AND kind = $2 AND version = $3";
    // a Windows module's key holds its name, from the dump
    let build_id = super::text::clean(build_id);
    let row: Option<(Vec<u8>,)> = crate::on_pool!(db, p => sqlx::query_as(sql)
        .bind(&*build_id)
        .bind(kind)
        .bind(i64::from(version))
        .fetch_optional(p)
        .await)?;
    Ok(row.map(|(b,)| b))
}

/// Stores a built table (replacing one of the same key: two workers may race to build it,
/// and both built the same bytes from the same files).
pub async fn put(
    db: &Db,
    build_id: &str,
    kind: &str,
    version: u32,
    bytes: &[u8],
) -> Result<(), StoreError> {
    let sql = "INSERT INTO tables (build_id, kind, version, bytes, created_at) \
               VALUES ($1, $2, $3, $4, $5) \
               ON CONFLICT (build_id, kind, version) DO UPDATE SET bytes = excluded.bytes, \
               created_at = excluded.created_at";
    let build_id = super::text::clean(build_id);
    crate::on_pool!(db, p => sqlx::query(sql)
        .bind(&*build_id)
        .bind(kind)
        .bind(i64::from(version))
        .bind(bytes)
        .bind(now_ms())
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(())
}

/// Drops every table of a build-id, of whichever files (`KEY` and every `KEY@FILES`: a
/// new file for it arrived, the tables must be rebuilt from all its files).
pub async fn invalidate(db: &Db, build_id: &str) -> Result<u64, StoreError> {
    let sql = "DELETE FROM tables WHERE build_id = $1 \
               OR substr(build_id, 1, CAST($3 AS INTEGER)) = $2";
    let build_id = super::text::clean(build_id);
    // compared by characters, not by a collation's order (PostgreSQL's need not be bytes')
    let prefix = format!("{build_id}@");
    let chars = i64::try_from(prefix.chars().count()).unwrap_or(i64::MAX);
    let n = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(&*build_id)
        .bind(&prefix)
        .bind(chars)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(n)
}
