//! The partial-files index: which crashes had a module's tables from a file that is not
//! the whole story — a `.sym` file alone, a Windows image without its PDB (or the
//! reverse), a stripped ELF binary without its debug file — so that an upload of the
//! better file (a binary, whose own tables win over a `.sym`; a newer `.sym`; the PDB; the
//! debug file) processes exactly those crashes again, as a missing module's upload does.
//! Unlike the missing-modules index, nothing here is shown as missing: a module without
//! debug information is common (system libraries) and still walks.

use super::{now_ms, Db, StoreError};

/// Records that `crash_id` used only a `.sym` file for the module keyed `key` (its
/// build-id, else its debug-id), whose debug-id is `debug_id`.
pub async fn record(
    db: &Db,
    key: &str,
    debug_id: Option<&str>,
    crash_id: &str,
) -> Result<(), StoreError> {
    let sql = "INSERT INTO breakpad_modules (build_id, crash_id, debug_id, recorded_at) \
               VALUES ($1, $2, $3, $4) ON CONFLICT (build_id, crash_id) DO NOTHING";
    // a Windows module's key holds its name, from the dump
    use super::text::{clean, clean_opt};
    let _turn = db.write_turn().await;
    crate::on_pool!(db, p => sqlx::query(sql)
        .bind(&*clean(key))
        .bind(crash_id)
        .bind(clean_opt(debug_id))
        .bind(now_ms())
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(())
}

/// Forgets what one crash used (before it is processed again).
pub async fn clear_crash(db: &Db, crash_id: &str) -> Result<(), StoreError> {
    crate::on_pool!(db, p => sqlx::query("DELETE FROM breakpad_modules WHERE crash_id = $1")
        .bind(crash_id)
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(())
}

/// A binary or `.sym` file for `build_id` and/or `debug_id` arrived: requeues the
/// finished (or running) crashes whose module of either identifier had only a `.sym`
/// file. Returns how many crashes were requeued.
pub async fn requeue_for_ids(
    db: &Db,
    build_id: Option<&str>,
    debug_id: Option<&str>,
) -> Result<u64, StoreError> {
    Ok(
        requeue_for_ids_within(db, build_id, debug_id, None, u64::MAX)
            .await?
            .requeued,
    )
}

/// [`requeue_for_ids`], for the crashes of `project` (`None`: every project's), queueing
/// at most `limit` crashes (see [`super::missing::requeue_for_ids_within`]).
pub async fn requeue_for_ids_within(
    db: &Db,
    build_id: Option<&str>,
    debug_id: Option<&str>,
    project: Option<&str>,
    limit: u64,
) -> Result<super::missing::Requeued, StoreError> {
    let ids = super::missing::Ids {
        build_id,
        debug_id,
        project,
    };
    super::missing::requeue_indexed(db, "breakpad_modules", ids, limit).await
}
