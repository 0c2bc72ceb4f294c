//! Batch reprocessing: puts the crashes matching a [`Filter`] back in the queue, a batch
//! at a time, under a run id.
//!
//! Each queued crash records the run (`reprocess_run`), its signature and its count of
//! frames with a function name (`previous_*`). A run interrupted and started again with
//! the same filter resumes the unfinished run (`reprocess_runs`) and skips every crash
//! that run already queued, so no crash is processed twice by one run. Batches walk the
//! primary key with a keyset cursor: ids are never all in memory.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::conditions::{Conditions, Value};
use super::{now_ms, Db, StoreError};

/// Most annotations one filter names.
pub const MAX_FILTER_ANNOTATIONS: usize = 16;

/// Which crashes a run reprocesses (or `POST /api/v1/crashes/delete` deletes,
/// `super::delete_filter`). Every set field must match; `all` must be set when nothing
/// else is, so that an empty filter never reprocesses (or deletes) everything by accident.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    #[serde(default)]
    pub signature: Option<String>,
    /// Inclusive lower bound on `received_at` (Unix ms).
    #[serde(default)]
    pub since: Option<i64>,
    /// Exclusive upper bound on `received_at` (Unix ms).
    #[serde(default)]
    pub until: Option<i64>,
    /// Crashes that used (or missed) this build-id (lower-case hex).
    #[serde(default)]
    pub build_id: Option<String>,
    /// Only crashes that still miss some module.
    #[serde(default)]
    pub missing_only: bool,
    /// `done` or `failed`; default both.
    #[serde(default)]
    pub status: Option<String>,
    /// Crashes whose upload carried each of these fields (Crashpad annotations, form
    /// fields: `{"user_id": "4711"}`) with exactly this value, as stored (bounded and
    /// cleaned at upload: `api::upload_fields`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Every finished crash.
    #[serde(default)]
    pub all: bool,
    /// Only this project's crashes: set from the caller's project, never from the body
    /// (an API caller's filter naming one is refused as an unknown field).
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
}

impl Filter {
    /// Why the filter cannot be used, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        let any = self.signature.is_some()
            || self.since.is_some()
            || self.until.is_some()
            || self.build_id.is_some()
            || self.missing_only
            || self.status.is_some()
            || !self.annotations.is_empty();
        if !any && !self.all {
            return Err("no filter given: pass `all` to reprocess every crash".into());
        }
        if let Some(s) = &self.status {
            if s != "done" && s != "failed" {
                return Err(format!("status must be `done` or `failed`, not {s:?}"));
            }
        }
        if let Some(b) = &self.build_id {
            if b.is_empty() || !b.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(format!("build_id must be hex, not {b:?}"));
            }
        }
        if self.annotations.len() > MAX_FILTER_ANNOTATIONS {
            return Err(format!(
                "at most {MAX_FILTER_ANNOTATIONS} annotations per filter, not {}",
                self.annotations.len()
            ));
        }
        if self.annotations.keys().any(String::is_empty) {
            return Err("an annotation's name is empty".into());
        }
        Ok(())
    }

    /// Adds the conditions of the fields this filter sets to `c`, for a statement on
    /// `crashes` in database `db` (annotations are read from the row's JSON object with
    /// each dialect's functions; the name and value are bound, never written into SQL).
    pub fn push_conditions(&self, c: &mut Conditions, db: &Db) {
        c.push_with(self.project.clone().map(Value::Text), |p| {
            format!("project = {p}")
        });
        let signature = super::text::clean_opt(self.signature.as_deref()).map(Value::Text);
        c.push_with(signature, |p| format!("signature = {p}"));
        c.push_with(self.since.map(Value::Int), |p| {
            format!("received_at >= {p}")
        });
        c.push_with(self.until.map(Value::Int), |p| format!("received_at < {p}"));
        if let Some(b) = &self.build_id {
            // the module index (migration 0021) names the crashes that used it, the
            // missing-modules index those that missed it: one list, so that both databases
            // look its crashes up by key instead of testing every crash against two
            let b = c.arg(Value::Text(b.to_ascii_lowercase()));
            c.push(format!(
                "id IN (SELECT crash_id FROM missing_modules WHERE build_id = {b} \
                 UNION SELECT crash_id FROM crash_build_ids WHERE build_id = {b})"
            ));
        }
        if self.missing_only {
            c.push("id IN (SELECT crash_id FROM missing_modules)");
        }
        c.push_with(self.status.clone().map(Value::Text), |p| {
            format!("status = {p}")
        });
        for (name, value) in &self.annotations {
            let name = c.arg(Value::Text(super::text::clean(name).into_owned()));
            let value = c.arg(Value::Text(super::text::clean(value).into_owned()));
            c.push(db.json_field_is("annotations", &name, &value));
        }
    }

    /// The filter as stored with its run: a run started again with the same text resumes.
    pub fn key(&self) -> String {
        let mut f = self.clone();
        f.build_id = f.build_id.map(|b| b.to_ascii_lowercase());
        serde_json::to_string(&f).unwrap_or_default()
    }
}

/// The matching crashes not yet queued by run `run`: only the filters `filter` sets, so
/// that each database plans with the index of the one given ([`super::conditions`]).
fn matching(db: &Db, run: &str, filter: &Filter) -> Conditions {
    let mut c = Conditions::new();
    c.push("status IN ('done', 'failed')");
    // a crash whose dump is gone (retention, sampling) cannot be processed again
    c.push("dump_gone IS NULL");
    let run = c.arg(Value::Text(run.to_string()));
    c.push(format!("(reprocess_run IS NULL OR reprocess_run <> {run})"));
    filter.push_conditions(&mut c, db);
    c
}

/// A run: its id and whether it resumes one that was interrupted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub id: String,
    pub resumed: bool,
}

/// Resumes the unfinished run of the same filter, or starts a new one.
pub async fn start_run(db: &Db, filter: &Filter) -> Result<Run, StoreError> {
    let key = filter.key();
    let sql = "SELECT id FROM reprocess_runs WHERE filter = $1 AND finished_at IS NULL \
               ORDER BY started_at DESC LIMIT 1";
    let found: Option<(String,)> = crate::on_pool!(db, p => sqlx::query_as(sql)
        .bind(&key).fetch_optional(p).await)?;
    if let Some((id,)) = found {
        return Ok(Run { id, resumed: true });
    }
    let id = super::crashes::new_id();
    let sql = "INSERT INTO reprocess_runs (id, filter, started_at) VALUES ($1, $2, $3)";
    crate::on_pool!(db, p => sqlx::query(sql)
        .bind(&id).bind(&key).bind(now_ms()).execute(p).await.map(|_| ()))?;
    Ok(Run { id, resumed: false })
}

/// Marks a run finished: the next run with the same filter starts afresh.
pub async fn finish_run(db: &Db, run: &str) -> Result<(), StoreError> {
    let sql = "UPDATE reprocess_runs SET finished_at = $2 WHERE id = $1";
    crate::on_pool!(db, p => sqlx::query(sql)
        .bind(run).bind(now_ms()).execute(p).await.map(|_| ()))?;
    Ok(())
}

/// How many matching crashes run `run` has not queued yet.
pub async fn count_remaining(db: &Db, run: &str, filter: &Filter) -> Result<i64, StoreError> {
    super::conditions::count_crashes(db, &matching(db, run, filter)).await
}

/// Queues at most `limit` matching crashes with ids after `after` (primary-key order)
/// under run `run`. Returns how many, and the last id queued (the next cursor).
pub async fn enqueue_batch(
    db: &Db,
    run: &str,
    filter: &Filter,
    after: Option<&str>,
    limit: i64,
) -> Result<(u64, Option<String>), StoreError> {
    let requeued = super::crashes::REQUEUED;
    let mut c = matching(db, run, filter);
    c.push_with(after.map(|a| Value::Text(a.to_string())), |p| {
        format!("id > {p}")
    });
    // the run's id is the first value: `$1` also names it in the SET list
    let sql = format!(
        "UPDATE crashes SET status = 'pending', attempts = 0, lease_until = NULL, \
         leased_by = NULL, error = NULL, previous_signature = signature, \
         previous_function_frames = function_frames, reprocess_run = $1, \
         priority = {requeued} \
         WHERE id IN (SELECT id FROM crashes{} ORDER BY id LIMIT ${}) RETURNING id",
        c.where_clause(),
        c.values().len() + 1
    );
    let ids: Vec<(String,)> = crate::on_pool!(db, p => crate::bind_values!(
        sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str())), c.values())
        .bind(limit.max(1))
        .fetch_all(p).await)?;
    let last = ids.iter().map(|(id,)| id).max().cloned();
    Ok((u64::try_from(ids.len()).unwrap_or(u64::MAX), last))
}

/// Crashes of run `run`: (still queued or in flight, finished).
pub async fn progress(db: &Db, run: &str) -> Result<(i64, i64), StoreError> {
    let sql = "SELECT \
               COALESCE(SUM(CASE WHEN status IN ('pending', 'processing') THEN 1 ELSE 0 END), 0), \
               COALESCE(SUM(CASE WHEN status IN ('done', 'failed') THEN 1 ELSE 0 END), 0) \
               FROM crashes WHERE reprocess_run = $1";
    let (q, d): (i64, i64) = crate::on_pool!(db, p => sqlx::query_as(sql)
        .bind(run).fetch_one(p).await)?;
    Ok((q, d))
}

/// What a run changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Crashes the run queued and that finished.
    pub finished: i64,
    pub failed: i64,
    pub signature_changed: i64,
    /// Crashes with more frames named by a function than before.
    pub gained_frames: i64,
    /// Build-ids still missing after the run: (build-id, module name, crashes).
    pub still_missing: Vec<(String, String, i64)>,
}

/// The summary of run `run`.
pub async fn summary(db: &Db, run: &str) -> Result<Summary, StoreError> {
    let sql = "SELECT COUNT(*), \
               COALESCE(SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0), \
               COALESCE(SUM(CASE WHEN status = 'done' AND \
                   COALESCE(previous_signature, '') <> COALESCE(signature, '') THEN 1 ELSE 0 END), 0), \
               COALESCE(SUM(CASE WHEN status = 'done' AND previous_function_frames IS NOT NULL \
                   AND function_frames > previous_function_frames THEN 1 ELSE 0 END), 0) \
               FROM crashes WHERE reprocess_run = $1 AND status IN ('done', 'failed')";
    let (finished, failed, signature_changed, gained_frames): (i64, i64, i64, i64) =
        crate::on_pool!(db, p => sqlx::query_as(sql).bind(run).fetch_one(p).await)?;
    let sql = "SELECT m.build_id, MIN(m.module_name), COUNT(*) FROM missing_modules m \
               JOIN crashes c ON c.id = m.crash_id WHERE c.reprocess_run = $1 \
               GROUP BY m.build_id ORDER BY COUNT(*) DESC, m.build_id LIMIT 20";
    let still_missing: Vec<(String, String, i64)> =
        crate::on_pool!(db, p => sqlx::query_as(sql).bind(run).fetch_all(p).await)?;
    Ok(Summary {
        finished,
        failed,
        signature_changed,
        gained_frames,
        still_missing,
    })
}
