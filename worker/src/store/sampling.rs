//! Sampling per signature (issue 41; Backtrace's submission buckets): a project keeps
//! every crash's report, but only the first N dumps of each signature each UTC day
//! (`--sample PROJECT:N`), so that a crash storm costs reports, not disk.
//!
//! It is decided after processing, when the signature is known: each pass of the sweeper
//! ranks the project's processed crashes of yesterday and today (UTC) by signature (the
//! one the rules gave, `computed_signature`, so a person's merge does not change the
//! buckets) and day, oldest first, and removes the dumps of those past the first N
//! ([`super::dump_gone`], reason `sampled`). Failed crashes (no signature) keep theirs.

use std::time::Duration;

use super::dump_gone::{self, Reason};
use super::{Blobs, Db, StoreError};

/// A project's sampling (`--sample PROJECT:N`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub project: String,
    /// Dumps kept per signature per UTC day (0: every dump).
    pub dumps_per_day: u32,
}

const DAY_MS: i64 = 86_400_000;

/// Removes the dumps of `sample`'s project past the first N of their signature and UTC
/// day, `batch` crashes at a time with `pause` between batches. Returns the dumps
/// removed and the blobs freed.
pub async fn sweep(
    db: &Db,
    blobs: &Blobs,
    sample: &Sample,
    now: i64,
    batch: i64,
    pause: Duration,
) -> Result<(u64, u64), StoreError> {
    if sample.dumps_per_day == 0 {
        return Ok((0, 0));
    }
    let since = (now.div_euclid(DAY_MS) - 1) * DAY_MS;
    let sql = format!(
        "SELECT id FROM (SELECT id, status, dump_gone, ROW_NUMBER() OVER \
         (PARTITION BY computed_signature, received_at / {DAY_MS} ORDER BY received_at, id) AS n \
         FROM crashes WHERE project = $1 AND received_at >= $2 \
         AND computed_signature IS NOT NULL) ranked \
         WHERE n > $3 AND dump_gone IS NULL AND status = 'done' ORDER BY id LIMIT $4"
    );
    let (mut removed, mut freed) = (0, 0);
    loop {
        let ids: Vec<String> = crate::on_pool!(db, p => sqlx::query_scalar(
            sqlx::AssertSqlSafe(sql.as_str()))
            .bind(&sample.project)
            .bind(since)
            .bind(i64::from(sample.dumps_per_day))
            .bind(batch)
            .fetch_all(p)
            .await)?;
        let marked = dump_gone::mark(db, &ids, Reason::Sampled, now).await?;
        removed += u64::try_from(marked.len()).unwrap_or(0);
        freed += dump_gone::free_blobs(db, blobs, &marked).await?;
        if i64::try_from(ids.len()).unwrap_or(0) < batch || marked.is_empty() {
            return Ok((removed, freed));
        }
        tokio::time::sleep(pause).await;
    }
}
