//! The missing-modules index: build-id → the crashes that needed it and had no file,
//! so that an upload of that build-id reprocesses exactly those crashes.
//!
//! A module is keyed by its build-id, or by its Breakpad debug-id when it has none
//! (minidump modules of Windows and macOS processes); its debug-id is kept beside the key
//! so that a `.sym` upload, which names the debug-id, finds the crashes too.

use super::{now_ms, Db, StoreError};

/// One build-id nobody has uploaded yet, with the crashes waiting for it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MissingModule {
    /// The module's build-id (lower-case), or its debug-id (upper-case) when it has none.
    pub build_id: String,
    pub module_name: String,
    pub crash_count: i64,
    pub last_seen: i64,
}

/// Records that `crash_id` needed `build_id` (module `name`) and had no file for it.
pub async fn record(db: &Db, build_id: &str, crash_id: &str, name: &str) -> Result<(), StoreError> {
    record_module(db, build_id, None, crash_id, name).await
}

/// Records that `crash_id` needed the module keyed `key` (its build-id, else its
/// debug-id), with debug-id `debug_id`, and had no file for it.
pub async fn record_module(
    db: &Db,
    key: &str,
    debug_id: Option<&str>,
    crash_id: &str,
    name: &str,
) -> Result<(), StoreError> {
    let sql = "INSERT INTO missing_modules (build_id, crash_id, module_name, recorded_at, \
               debug_id) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (build_id, crash_id) DO NOTHING";
    // the name and a Windows module's key come from the dump
    use super::text::{clean, clean_opt};
    let _turn = db.write_turn().await;
    crate::on_pool!(db, p => sqlx::query(sql)
        .bind(&*clean(key))
        .bind(crash_id)
        .bind(&*clean(name))
        .bind(now_ms())
        .bind(clean_opt(debug_id))
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
    list_in(db, None, limit).await
}

/// The build-ids the crashes of `project` (`None`: of every project) missed, most-needed
/// first, counted over those crashes only.
pub async fn list_in(
    db: &Db,
    project: Option<&str>,
    limit: i64,
) -> Result<Vec<MissingModule>, StoreError> {
    let sql = "SELECT m.build_id, MIN(m.module_name) AS module_name, COUNT(*) AS crash_count, \
               MAX(m.recorded_at) AS last_seen FROM missing_modules m \
               WHERE CAST($2 AS TEXT) IS NULL \
                  OR m.crash_id IN (SELECT id FROM crashes WHERE project = $2) \
               GROUP BY m.build_id ORDER BY COUNT(*) DESC, m.build_id LIMIT $1";
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, MissingModule>(sql)
        .bind(limit)
        .bind(project)
        .fetch_all(p)
        .await)?,
    )
}

/// A file for `build_id` arrived: puts every finished crash that missed it back in the
/// queue and empties its index entry. Returns how many crashes were requeued.
///
/// A crash being processed is requeued too: its worker may have looked for the file
/// before it arrived, and the lease guard of `crashes::finish` then drops that worker's
/// stale result, so the crash is processed again with the file.
pub async fn requeue_for(db: &Db, build_id: &str) -> Result<u64, StoreError> {
    requeue_for_ids(db, Some(build_id), None).await
}

/// A file for `build_id` and/or `debug_id` arrived (a Mach-O binary has both, a `.sym`
/// file a debug-id and maybe a build-id): as [`requeue_for`], for the crashes that missed
/// a module of either identifier.
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

/// [`requeue_for_ids`], for the crashes of `project` only (a file only it sees; `None`:
/// every project's, for a shared file), queueing at most `limit` crashes: the others
/// stay listed as missing the module (`left`, counted in `project` only), for a later
/// arrival or a reprocess run.
pub async fn requeue_for_ids_within(
    db: &Db,
    build_id: Option<&str>,
    debug_id: Option<&str>,
    project: Option<&str>,
    limit: u64,
) -> Result<Requeued, StoreError> {
    let ids = Ids {
        build_id,
        debug_id,
        project,
    };
    requeue_indexed(db, "missing_modules", ids, limit).await
}

/// The module a file arrived for, and whose crashes it may change.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ids<'a> {
    pub build_id: Option<&'a str>,
    pub debug_id: Option<&'a str>,
    /// `None`: every project's crashes.
    pub project: Option<&'a str>,
}

/// What a requeue did: crashes queued again, and crashes left listed (past its limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requeued {
    pub requeued: u64,
    pub left: u64,
}

/// Requeues at most `limit` of the crashes that `table` (`missing_modules` or
/// `breakpad_modules`: both have `build_id`, `debug_id` and `crash_id` columns) lists for
/// a module of either identifier, and empties the entries of every crash no longer
/// waiting to be requeued; the rest stay, counted in `left`.
pub(super) async fn requeue_indexed(
    db: &Db,
    table: &'static str,
    ids: Ids<'_>,
    limit: u64,
) -> Result<Requeued, StoreError> {
    let Ids {
        build_id,
        debug_id,
        project,
    } = ids;
    if build_id.is_none() && debug_id.is_none() {
        return Ok(Requeued::default());
    }
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let matching = "(build_id = $1 OR debug_id = $2 OR build_id = $2)";
    // a crash whose dump is gone (retention, sampling) cannot be processed again: its
    // entries go as the requeued ones' do
    let finished = "status IN ('done', 'failed', 'processing') AND dump_gone IS NULL";
    // the crashes of the project that sees the file (all, for a shared file)
    let of_project = |n: u8| {
        format!("crash_id IN (SELECT id FROM crashes WHERE CAST(${n} AS TEXT) IS NULL OR project = ${n})")
    };
    let project_4 = of_project(4);
    let requeued = super::crashes::REQUEUED;
    let sql = format!(
        "UPDATE crashes SET status = 'pending', attempts = 0, lease_until = NULL, \
         leased_by = NULL, error = NULL, previous_signature = signature, \
         previous_function_frames = function_frames, priority = {requeued} \
         WHERE {finished} AND id IN \
         (SELECT crash_id FROM {table} WHERE {matching} AND {project_4} AND crash_id IN \
          (SELECT id FROM crashes WHERE {finished}) ORDER BY crash_id LIMIT $3)"
    );
    let n = crate::on_pool!(db, p => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(build_id)
        .bind(debug_id)
        .bind(limit)
        .bind(project)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    let sql = format!(
        "DELETE FROM {table} WHERE {matching} AND crash_id NOT IN \
         (SELECT id FROM crashes WHERE {finished})"
    );
    crate::on_pool!(db, p => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(build_id)
        .bind(debug_id)
        .execute(p)
        .await
        .map(|_| ()))?;
    let sql = format!(
        "SELECT COUNT(DISTINCT crash_id) FROM {table} WHERE {matching} AND {}",
        of_project(3)
    );
    let (left,): (i64,) = crate::on_pool!(db, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(build_id)
        .bind(debug_id)
        .bind(project)
        .fetch_one(p)
        .await)?;
    Ok(Requeued {
        requeued: n,
        left: u64::try_from(left).unwrap_or(0),
    })
}
