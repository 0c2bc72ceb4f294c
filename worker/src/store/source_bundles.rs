//! The `source_bundles` table: one source bundle (a zip of the source files a build's
//! line tables name, `engine::source_bundle`) per build-id, its bytes a blob.
//!
//! First upload wins, as for binaries: a build's sources do not change, so a second
//! bundle for a build-id is not stored ([`insert`] answers the row that holds it). The
//! bundle is checked whole by the server before its row is inserted; the worker and the
//! debuginfod route open it again (and refuse it again if it is hostile) when they read it.

use std::collections::HashMap;

use super::{now_ms, Db, StoreError};

/// One stored bundle.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct BundleRow {
    /// Lower-case hex.
    pub build_id: String,
    /// The blob's key.
    pub sha256: String,
    pub size: i64,
    /// Files its manifest lists.
    pub file_count: i64,
    pub uploaded_at: i64,
}

const COLUMNS: &str = "build_id, sha256, size, file_count, uploaded_at";

/// Stores `row` unless a bundle already holds its build-id; the row that holds it
/// afterwards (this one, or the first upload's) and whether it is this one.
pub async fn insert(db: &Db, row: &BundleRow) -> Result<(BundleRow, bool), StoreError> {
    let sql = "INSERT INTO source_bundles (build_id, sha256, size, file_count, uploaded_at) \
               VALUES ($1, $2, $3, $4, $5) ON CONFLICT (build_id) DO NOTHING";
    let inserted = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(&row.build_id)
        .bind(&row.sha256)
        .bind(row.size)
        .bind(row.file_count)
        .bind(if row.uploaded_at == 0 { now_ms() } else { row.uploaded_at })
        .execute(p)
        .await
        .map(|r| r.rows_affected() > 0))?;
    let held = by_build_id(db, &row.build_id)
        .await?
        .ok_or_else(|| StoreError::Corrupt("a source bundle row vanished".into()))?;
    Ok((held, inserted))
}

/// The bundle of `build_id`, if one was uploaded.
pub async fn by_build_id(db: &Db, build_id: &str) -> Result<Option<BundleRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM source_bundles WHERE build_id = $1");
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, BundleRow>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(build_id)
        .fetch_optional(p)
        .await)?,
    )
}

/// The bundles of those of `build_ids` that have one, by build-id, in one query.
pub async fn by_build_ids(
    db: &Db,
    build_ids: &[&str],
) -> Result<HashMap<String, BundleRow>, StoreError> {
    if build_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let list = serde_json::to_string(build_ids).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let sql = format!(
        "SELECT {COLUMNS} FROM source_bundles WHERE build_id IN ({})",
        db.json_strings("$1")
    );
    let rows: Vec<BundleRow> = crate::on_pool!(db, p => sqlx::query_as::<_, BundleRow>(
        sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&list)
        .fetch_all(p)
        .await)?;
    Ok(rows.into_iter().map(|r| (r.build_id.clone(), r)).collect())
}

/// Which crashes a bundle's requeue takes: those finished (done or failed) no later than
/// the bundle's upload, `since`; at the upload itself, those being processed too (their
/// worker may have looked for the bundle before it arrived), not in a later pass (they
/// may be processed with it by then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Without {
    /// The bundle's upload time (Unix ms).
    pub since: i64,
    pub processing: bool,
}

impl Without {
    /// The condition on a crash's row, `since` bound at `placeholder`.
    fn condition(&self, placeholder: &str) -> String {
        let finished =
            format!("(status IN ('done', 'failed') AND COALESCE(finished_at, 0) <= {placeholder})");
        // a crash whose dump is gone (retention, sampling) cannot be processed again
        let finished = format!("({finished} AND dump_gone IS NULL)");
        if self.processing {
            format!("({finished} OR status = 'processing')")
        } else {
            finished
        }
    }
}

/// A bundle for `build_id` arrived after crashes that name it were processed: puts at
/// most `limit` of them back in the queue, so that their frames of that build get their
/// lines (a late debug file requeues the crashes that missed it in the same way,
/// `missing::requeue_for_ids_within`). The crashes are those of the module index
/// (`crash_build_ids`, migration 0021) that were processed without it (`without`): the
/// bundle is the first for the build-id (first upload wins); a crash still pending will
/// read it when it is processed. Returns the crashes requeued and those left past
/// `limit` (the requeue backlog takes them later: `super::requeue_backlog`).
pub async fn requeue_naming(
    db: &Db,
    build_id: &str,
    without: Without,
    limit: u64,
) -> Result<super::missing::Requeued, StoreError> {
    let b = build_id.to_ascii_lowercase();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let finished = without.condition("$3");
    let requeued = super::crashes::REQUEUED;
    let sql = format!(
        "UPDATE crashes SET status = 'pending', attempts = 0, lease_until = NULL, \
         leased_by = NULL, error = NULL, previous_signature = signature, \
         previous_function_frames = function_frames, priority = {requeued} \
         WHERE {finished} AND id IN \
         (SELECT crash_id FROM crash_build_ids WHERE build_id = $1 AND crash_id IN \
          (SELECT id FROM crashes WHERE {finished}) ORDER BY crash_id LIMIT $2)"
    );
    let n = crate::on_pool!(db, p => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&b)
        .bind(limit)
        .bind(without.since)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    let sql = format!(
        "SELECT COUNT(*) FROM crashes WHERE {} AND id IN \
         (SELECT crash_id FROM crash_build_ids WHERE build_id = $1)",
        without.condition("$2")
    );
    let (left,): (i64,) = crate::on_pool!(db, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&b)
        .bind(without.since)
        .fetch_one(p)
        .await)?;
    Ok(super::missing::Requeued {
        requeued: n,
        left: u64::try_from(left).unwrap_or(0),
    })
}
