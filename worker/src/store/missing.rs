//! The missing-modules index: build-id → the crashes that needed it and had no file,
//! so that an upload of that build-id reprocesses exactly those crashes.

use super::{now_ms, Db, StoreError};

/// One build-id nobody has uploaded yet, with the crashes waiting for it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MissingModule {
    pub build_id: String,
    pub module_name: String,
    pub crash_count: i64,
    pub last_seen: i64,
}

/// Records that `crash_id` needed `build_id` (module `name`) and had no file for it.
pub async fn record(db: &Db, build_id: &str, crash_id: &str, name: &str) -> Result<(), StoreError> {
    let sql = "INSERT INTO missing_modules (build_id, crash_id, module_name, recorded_at) \
               VALUES ($1, $2, $3, $4) ON CONFLICT (build_id, crash_id) DO NOTHING";
    crate::on_pool!(db, p => sqlx::query(sql)
        .bind(build_id)
        .bind(crash_id)
        .bind(name)
        .bind(now_ms())
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(())
}

/// Forgets what one crash was missing (before it is processed again).
pub async fn clear_crash(db: &Db, crash_id: &str) -> Result<(), StoreError> {
    crate::on_pool!(db, p => sqlx::query("DELETE FROM missing_modules WHERE crash_id = $1")
        .bind(crash_id)
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(())
}

/// The missing build-ids, most-needed first.
pub async fn list(db: &Db, limit: i64) -> Result<Vec<MissingModule>, StoreError> {
    let sql = "SELECT build_id, MIN(module_name) AS module_name, COUNT(*) AS crash_count, \
               MAX(recorded_at) AS last_seen FROM missing_modules GROUP BY build_id \
               ORDER BY COUNT(*) DESC, build_id LIMIT $1";
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, MissingModule>(sql)
        .bind(limit)
        .fetch_all(p)
        .await)?,
    )
}

/// A file for `build_id` arrived: puts every finished crash that missed it back in the
/// queue and empties its index entry. Returns how many crashes were requeued.
pub async fn requeue_for(db: &Db, build_id: &str) -> Result<u64, StoreError> {
    let sql = "UPDATE crashes SET status = 'pending', attempts = 0, lease_until = NULL, \
               leased_by = NULL, error = NULL, previous_signature = signature, \
               previous_function_frames = function_frames \
               WHERE status IN ('done', 'failed') AND id IN \
               (SELECT crash_id FROM missing_modules WHERE build_id = $1)";
    let n = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(build_id)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    crate::on_pool!(db, p => sqlx::query("DELETE FROM missing_modules WHERE build_id = $1")
        .bind(build_id)
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(n)
}
