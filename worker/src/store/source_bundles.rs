//! The `source_bundles` table: source bundles (a zip of the source files a build's line
//! tables name, `engine::source_bundle`), each held by a project, its bytes a blob.
//!
//! A bundle belongs to the project that uploaded it (issue 41, migration 0030), as symbol
//! files do (`super::binaries`): one row per (project, build-id), and [`SHARED`] for the
//! bundles an admin shares with every project. The bytes are one blob whichever
//! projects hold them. A lookup for a project ([`Sees::Project`]) sees its own bundle of a
//! build-id, else the shared one, never another project's: another project's bundle is
//! no bundle at all to it.
//!
//! First upload wins within a project: a build's sources do not change, so a second
//! bundle for a build-id the project holds is not stored ([`insert`] answers the row that
//! holds it); another project's bundle of the build-id neither refuses it nor is replaced
//! by it. The bundle is checked whole by the server before its row is inserted; the
//! worker and the debuginfod route open it again (and refuse it again if it is hostile)
//! when they read it.

use std::collections::HashMap;

pub use super::binaries::{Sees, SHARED};
use super::{now_ms, Db, StoreError};

/// One stored bundle.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct BundleRow {
    /// The project holding it, or [`SHARED`].
    pub project: String,
    /// Lower-case hex.
    pub build_id: String,
    /// The blob's key.
    pub sha256: String,
    pub size: i64,
    /// Files its manifest lists.
    pub file_count: i64,
    pub uploaded_at: i64,
}

const COLUMNS: &str = "project, build_id, sha256, size, file_count, uploaded_at";

/// Stores `row` unless its project already holds a bundle of its build-id; the row that
/// holds it afterwards (this one, or the project's first upload's) and whether it is
/// this one.
pub async fn insert(db: &Db, row: &BundleRow) -> Result<(BundleRow, bool), StoreError> {
    let sql = "INSERT INTO source_bundles (project, build_id, sha256, size, file_count, \
               uploaded_at) VALUES ($1, $2, $3, $4, $5, $6) \
               ON CONFLICT (project, build_id) DO NOTHING";
    let inserted = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(&row.project)
        .bind(&row.build_id)
        .bind(&row.sha256)
        .bind(row.size)
        .bind(row.file_count)
        .bind(if row.uploaded_at == 0 { now_ms() } else { row.uploaded_at })
        .execute(p)
        .await
        .map(|r| r.rows_affected() > 0))?;
    let held = held_by(db, &row.project, &row.build_id)
        .await?
        .ok_or_else(|| StoreError::Corrupt("a source bundle row vanished".into()))?;
    Ok((held, inserted))
}

/// The bundle `project` (or [`SHARED`]) itself holds for `build_id`.
pub async fn held_by(
    db: &Db,
    project: &str,
    build_id: &str,
) -> Result<Option<BundleRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM source_bundles WHERE project = $1 AND build_id = $2");
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, BundleRow>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(project)
        .bind(build_id)
        .fetch_optional(p)
        .await)?,
    )
}

/// The bundle of `build_id` that `sees` sees, if there is one.
pub async fn by_build_id(
    db: &Db,
    sees: Sees<'_>,
    build_id: &str,
) -> Result<Option<BundleRow>, StoreError> {
    Ok(by_build_ids(db, sees, &[build_id]).await?.remove(build_id))
}

/// Of `build_ids`, the bundles `sees` sees, by build-id, in one query: a project's own
/// bundle of a build-id, else the shared one; for [`Sees::Every`], the shared one, else
/// the first uploaded.
pub async fn by_build_ids(
    db: &Db,
    sees: Sees<'_>,
    build_ids: &[&str],
) -> Result<HashMap<String, BundleRow>, StoreError> {
    if build_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let list = serde_json::to_string(build_ids).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let (holders, project) = match sees {
        Sees::Project(p) => (format!(" AND project IN ($2, '{SHARED}')"), p),
        Sees::Every => (" AND $2 = $2".to_string(), SHARED),
    };
    let sql = format!(
        "SELECT {COLUMNS} FROM source_bundles WHERE build_id IN ({}){holders}",
        db.json_strings("$1")
    );
    let rows: Vec<BundleRow> = crate::on_pool!(db, p => sqlx::query_as::<_, BundleRow>(
        sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&list)
        .bind(project)
        .fetch_all(p)
        .await)?;
    let mut out: HashMap<String, BundleRow> = HashMap::new();
    for row in rows {
        let better = match out.get(&row.build_id) {
            None => true,
            Some(have) => rank(sees, &row) < rank(sees, have),
        };
        if better {
            out.insert(row.build_id.clone(), row);
        }
    }
    Ok(out)
}

/// The order in which `sees` prefers bundles of one build-id (lower first): a project's
/// own before the shared one; for every project, the shared one, then the oldest.
fn rank(sees: Sees<'_>, row: &BundleRow) -> (u8, i64, String) {
    let first = match sees {
        Sees::Project(p) if row.project == p => 0,
        _ if row.project == SHARED => 1,
        _ => 2,
    };
    (first, row.uploaded_at, row.project.clone())
}

/// Shares the bundles stored with the bytes `sha256` with every project (as a [`SHARED`]
/// row of each's build-id, unless one is shared for it already): the rows shared now.
pub async fn share(db: &Db, sha256: &str) -> Result<Vec<BundleRow>, StoreError> {
    let sql = format!(
        "INSERT INTO source_bundles ({COLUMNS}) \
         SELECT '{SHARED}', build_id, sha256, MIN(size), MIN(file_count), $2 \
         FROM source_bundles WHERE sha256 = $1 AND project <> '{SHARED}' GROUP BY build_id, sha256 \
         ON CONFLICT (project, build_id) DO NOTHING RETURNING {COLUMNS}"
    );
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, BundleRow>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(sha256)
        .bind(now_ms())
        .fetch_all(p)
        .await)?,
    )
}

/// Stops sharing the bundles with the bytes `sha256`: the projects that uploaded them
/// keep them. How many shared rows went.
pub async fn unshare(db: &Db, sha256: &str) -> Result<u64, StoreError> {
    let sql = format!("DELETE FROM source_bundles WHERE sha256 = $1 AND project = '{SHARED}'");
    Ok(
        crate::on_pool!(db, p => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(sha256)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?,
    )
}

/// How many rows (projects, and [`SHARED`]) hold a bundle with the bytes `sha256`.
pub async fn holders_of(db: &Db, sha256: &str) -> Result<i64, StoreError> {
    let sql = "SELECT COUNT(*) FROM source_bundles WHERE sha256 = $1";
    let (n,): (i64,) = crate::on_pool!(db, p => sqlx::query_as(sql)
        .bind(sha256)
        .fetch_one(p)
        .await)?;
    Ok(n)
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

/// A bundle for `build_id` held by `project` arrived after crashes that name it were
/// processed: puts at most `limit` of them back in the queue, so that their frames of that build get their
/// lines (a late debug file requeues the crashes that missed it in the same way,
/// `missing::requeue_for_ids_within`). The crashes are those of the module index
/// (`crash_build_ids`, migration 0021) that were processed without it (`without`): the
/// bundle is the project's first for the build-id (first upload wins); a crash still
/// pending will read it when it is processed. Only `project`'s crashes are taken, every
/// project's for a [`SHARED`] bundle. Returns the crashes requeued and those left past
/// `limit` (the requeue backlog takes them later: `super::requeue_backlog`).
pub async fn requeue_naming(
    db: &Db,
    project: &str,
    build_id: &str,
    without: Without,
    limit: u64,
) -> Result<super::missing::Requeued, StoreError> {
    let b = build_id.to_ascii_lowercase();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let finished = without.condition("$3");
    let holder = "($4 = '*' OR project = $4)";
    let requeued = super::crashes::REQUEUED;
    let sql = format!(
        "UPDATE crashes SET status = 'pending', attempts = 0, lease_until = NULL, \
         leased_by = NULL, error = NULL, previous_signature = signature, \
         previous_function_frames = function_frames, priority = {requeued} \
         WHERE {finished} AND {holder} AND id IN \
         (SELECT crash_id FROM crash_build_ids WHERE build_id = $1 AND crash_id IN \
          (SELECT id FROM crashes WHERE {finished} AND {holder}) ORDER BY crash_id LIMIT $2)"
    );
    let n = crate::on_pool!(db, p => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&b)
        .bind(limit)
        .bind(without.since)
        .bind(project)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    let sql = format!(
        "SELECT COUNT(*) FROM crashes WHERE {} AND ($3 = '*' OR project = $3) AND id IN \
         (SELECT crash_id FROM crash_build_ids WHERE build_id = $1)",
        without.condition("$2")
    );
    let (left,): (i64,) = crate::on_pool!(db, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&b)
        .bind(without.since)
        .bind(project)
        .fetch_one(p)
        .await)?;
    Ok(super::missing::Requeued {
        requeued: n,
        left: u64::try_from(left).unwrap_or(0),
    })
}
