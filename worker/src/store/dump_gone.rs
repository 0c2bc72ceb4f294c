//! Removing crashes' dumps while their rows and reports stay (issue 41): the retention
//! of dumps (`retention`) and the sampling per signature (`sampled`) mark the crashes
//! (migration 0027: `dump_gone`, `dump_gone_at`), and then remove each blob that nothing
//! names any more — blobs are shared by content, so another crash (of any project), a
//! binary, a source bundle or an upload session's chunk may still name the same bytes.
//!
//! A crash whose dump is gone is never queued again (the requeue statements skip it), and
//! reprocessing it is answered with the reason (`dump-gone`).

use super::{crashes, Blobs, Db, StoreError};

/// Why a dump was removed, as `crashes.dump_gone` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Older than its project's days of dumps (`--retention`).
    Retention,
    /// Past the first dumps of its signature that day (`--sample`).
    Sampled,
}

impl Reason {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Retention => "retention",
            Reason::Sampled => "sampled",
        }
    }
}

/// A sentence for a crash whose dump went for `reason` (the stored word).
pub fn explain(reason: &str) -> String {
    let why = match reason {
        "retention" => "it was older than its project's retention of dumps",
        "sampled" => "its project keeps only the first dumps of a signature each day (sampling)",
        _ => "of its project's rules",
    };
    format!("the crash's dump was removed because {why}: its report is kept, but it cannot be processed again")
}

/// Marks the crashes `ids` as having lost their dump for `reason` at `now`, those that
/// are finished (done or failed) and still keep it; returns the sha256 of each dump
/// marked. One statement, so a crash queued again meanwhile is left as it is.
pub async fn mark(
    db: &Db,
    ids: &[String],
    reason: Reason,
    now: i64,
) -> Result<Vec<String>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let list = serde_json::to_string(ids).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let sql = format!(
        "UPDATE crashes SET dump_gone = $1, dump_gone_at = $2 WHERE id IN ({}) \
         AND dump_gone IS NULL AND status IN ('done', 'failed') RETURNING dump_sha256",
        db.json_strings("$3")
    );
    Ok(crate::on_pool!(db, p => sqlx::query_scalar::<_, String>(
        sqlx::AssertSqlSafe(sql.as_str()))
        .bind(reason.as_str())
        .bind(now)
        .bind(&list)
        .fetch_all(p)
        .await)?)
}

/// Removes each blob of `sha256s` that nothing names any more; how many were removed.
pub async fn free_blobs(db: &Db, blobs: &Blobs, sha256s: &[String]) -> Result<u64, StoreError> {
    let mut unique: Vec<&String> = sha256s.iter().collect();
    unique.sort_unstable();
    unique.dedup();
    let mut freed = 0;
    for sha in unique {
        if !crashes::blob_is_named(db, sha).await? {
            blobs.delete(sha).await?;
            freed += 1;
        }
    }
    Ok(freed)
}
