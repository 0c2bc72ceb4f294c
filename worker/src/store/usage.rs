//! Disk used per project (issue 41): the bytes of the dumps its crashes keep and of the
//! symbol files it holds, and how many of its crashes lost their dump and why (retention,
//! sampling), for `/metrics` and the dashboard.
//!
//! Blobs are stored once by content: a blob two projects name counts in both, and a dump
//! uploaded twice in one project counts once. The dumps' bytes are the counts migration
//! 0033 keeps (`project_dump_bytes`), a few rows per project whatever its crashes. The shared symbol files are counted under
//! [`super::binaries::SHARED`] (`*`), not under each project that sees them.

use super::{Db, StoreError};

/// Bytes a project names, by kind.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Bytes {
    pub project: String,
    /// The dumps its crashes keep.
    pub dumps: i64,
    /// The symbol files it holds.
    pub symbols: i64,
}

/// Bytes of every project that names any (`project`: that one only).
pub async fn bytes(db: &Db, project: Option<&str>) -> Result<Vec<Bytes>, StoreError> {
    // the bytes migration 0033's triggers keep per project (and shard), not a read of
    // every crash; a project with no dump kept has no row, as before
    let dumps = "SELECT project, CAST(SUM(bytes) AS BIGINT) FROM project_dump_bytes \
                 WHERE CAST($1 AS TEXT) IS NULL OR project = $1 \
                 GROUP BY project HAVING SUM(dumps) > 0";
    let symbols = "SELECT h.project, CAST(SUM(b.size) AS BIGINT) FROM binary_projects h \
                   JOIN binaries b ON b.sha256 = h.sha256 \
                   WHERE CAST($1 AS TEXT) IS NULL OR h.project = $1 GROUP BY h.project";
    let mut by: std::collections::BTreeMap<String, Bytes> = Default::default();
    for (sql, dump) in [(dumps, true), (symbols, false)] {
        let rows: Vec<(String, Option<i64>)> = crate::on_pool!(db, p => sqlx::query_as(sql)
            .bind(project).fetch_all(p).await)?;
        for (name, n) in rows {
            let e = by.entry(name.clone()).or_insert_with(|| Bytes {
                project: name,
                ..Bytes::default()
            });
            *(if dump { &mut e.dumps } else { &mut e.symbols }) = n.unwrap_or(0);
        }
    }
    Ok(by.into_values().collect())
}

/// Crashes whose dump is gone, by project and reason (`retention`, `sampled`).
pub async fn dumps_gone(
    db: &Db,
    project: Option<&str>,
) -> Result<Vec<(String, String, i64)>, StoreError> {
    let sql = "SELECT project, dump_gone, COUNT(*) FROM crashes WHERE dump_gone IS NOT NULL \
               AND (CAST($1 AS TEXT) IS NULL OR project = $1) \
               GROUP BY project, dump_gone ORDER BY project, dump_gone";
    Ok(crate::on_pool!(db, p => sqlx::query_as(sql).bind(project).fetch_all(p).await)?)
}
