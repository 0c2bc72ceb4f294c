//! The `crashes` table, which is also the job queue.
//!
//! A job is a row with `status = 'pending'`. A worker leases it (`processing`, with
//! `lease_until` and `leased_by`), and finishes it only while the lease is still its own
//! (same `leased_by` and `attempts`), so a worker that lost its lease can never overwrite
//! the work of the one that took over. An expired lease makes the row leasable again;
//! after `max_attempts` leases it ends `failed` instead.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use serde::Deserialize;

use super::{Backend, Db, StoreError};
use engine::report::Report;

/// One crash as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CrashRow {
    pub id: String,
    /// `pending`, `processing`, `done` or `failed`.
    pub status: String,
    pub received_at: i64,
    pub dump_sha256: String,
    pub dump_size: i64,
    /// `elf-core` or `minidump` (from the magic bytes).
    pub dump_format: String,
    /// JSON object of string → string.
    pub annotations: String,
    pub attempts: i32,
    pub lease_until: Option<i64>,
    pub leased_by: Option<String>,
    pub error: Option<String>,
    /// The `postmortem.report/1` JSON document, once done.
    pub report: Option<String>,
    /// The crash's group: the signature the rules gave, unless a person merged or split
    /// it elsewhere (`store::groups`).
    pub signature: Option<String>,
    /// The signature the rules gave, last time the crash was processed.
    pub computed_signature: Option<String>,
    /// What bounding the upload's fields cut (none: nothing).
    pub annotations_cut: Option<String>,
    /// 1: `report` was stored without the upload's fields, which [`CrashRow::served_report`]
    /// adds back; 0: a report stored before they were kept apart, which holds them.
    pub report_fields_apart: i32,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub processing_ms: Option<i64>,
    /// The same time in microseconds (migration 0032; none on rows finished before it).
    pub processing_us: Option<i64>,
    /// The signature before the crash was last queued again (reprocessing).
    pub previous_signature: Option<String>,
    /// How many times the crash was finished `done` (1, plus one per reprocessing).
    pub completions: i32,
    /// The project the crash belongs to (migration 0023).
    pub project: String,
    /// Why the crash's dump was removed while its row stays (`retention` or `sampled`;
    /// migration 0027); none: the dump is kept.
    pub dump_gone: Option<String>,
    /// When the dump was removed.
    pub dump_gone_at: Option<i64>,
}

const COLUMNS: &str = "id, status, received_at, dump_sha256, dump_size, dump_format, \
    annotations, attempts, lease_until, leased_by, error, report, signature, started_at, \
    finished_at, processing_ms, processing_us, previous_signature, completions, \
    computed_signature, annotations_cut, report_fields_apart, project, dump_gone, dump_gone_at";

/// A crash as lists show it: every column but the report, which may be tens of MiB.
/// Lists, upload retries and existence checks read this; only a crash's own page and its
/// raw report read [`CrashRow`].
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CrashSummary {
    pub id: String,
    /// `pending`, `processing`, `done` or `failed`.
    pub status: String,
    pub received_at: i64,
    pub dump_sha256: String,
    pub dump_size: i64,
    /// `elf-core` or `minidump` (from the magic bytes).
    pub dump_format: String,
    /// JSON object of string → string.
    pub annotations: String,
    pub attempts: i32,
    pub error: Option<String>,
    /// The crash's group (see [`CrashRow::signature`]).
    pub signature: Option<String>,
    /// The signature the rules gave.
    pub computed_signature: Option<String>,
    pub finished_at: Option<i64>,
    pub processing_ms: Option<i64>,
    /// The same time in microseconds (see [`CrashRow::processing_us`]).
    pub processing_us: Option<i64>,
    /// The report's `crash.analysis.summary` sentence, once done.
    pub analysis_summary: Option<String>,
    /// The project the crash belongs to.
    pub project: String,
    /// Why the dump was removed (see [`CrashRow::dump_gone`]).
    pub dump_gone: Option<String>,
    pub dump_gone_at: Option<i64>,
}

const SUMMARY_COLUMNS: &str = "id, status, received_at, dump_sha256, dump_size, dump_format, \
    annotations, attempts, error, signature, finished_at, processing_ms, processing_us, \
    analysis_summary, computed_signature, project, dump_gone, dump_gone_at";

impl CrashRow {
    /// The report as it is served (API, dashboard, raw download): with the upload's
    /// fields in its `annotations`, within a report budget of `max_bytes`
    /// ([`super::served_report`]). None until the crash is done.
    pub fn served_report(&self, max_bytes: usize) -> Option<std::borrow::Cow<'_, str>> {
        let stored = self.report.as_deref()?;
        if self.report_fields_apart == 0 {
            return Some(std::borrow::Cow::Borrowed(stored));
        }
        Some(super::served_report::with_upload_fields(
            stored,
            &self.annotations,
            self.annotations_cut.as_deref(),
            max_bytes,
        ))
    }

    /// What [`CrashRow::served_report`] changes in the stored report, as
    /// [`super::served_report::edits`]: for a route that sends the report in pieces
    /// instead of copying it. None: the stored report is served as it is.
    pub fn served_edits(&self, max_bytes: usize) -> Option<Vec<(std::ops::Range<usize>, String)>> {
        if self.report_fields_apart == 0 {
            return None;
        }
        super::served_report::edits(
            self.report.as_deref()?,
            &self.annotations,
            self.annotations_cut.as_deref(),
            max_bytes,
        )
    }

    /// The row's summary fields (the analysis sentence is in the report here).
    pub fn summary(&self) -> CrashSummary {
        CrashSummary {
            id: self.id.clone(),
            status: self.status.clone(),
            received_at: self.received_at,
            dump_sha256: self.dump_sha256.clone(),
            dump_size: self.dump_size,
            dump_format: self.dump_format.clone(),
            annotations: self.annotations.clone(),
            attempts: self.attempts,
            error: self.error.clone(),
            signature: self.signature.clone(),
            computed_signature: self.computed_signature.clone(),
            finished_at: self.finished_at,
            processing_ms: self.processing_ms,
            processing_us: self.processing_us,
            analysis_summary: None,
            project: self.project.clone(),
            dump_gone: self.dump_gone.clone(),
            dump_gone_at: self.dump_gone_at,
        }
    }
}

/// A crash about to be inserted.
#[derive(Debug, Clone)]
pub struct NewCrash {
    pub id: String,
    pub received_at: i64,
    pub dump_sha256: String,
    pub dump_size: i64,
    pub dump_format: String,
    pub annotations: String,
    /// What bounding the upload's fields cut, in a sentence (none: nothing).
    pub annotations_cut: Option<String>,
}

/// The project of a crash stored without one being named (migration 0023).
pub const DEFAULT_PROJECT: &str = "default";

/// The queue priority of a crash queued again (reprocessing): claimed after every new
/// crash (priority 0).
pub const REQUEUED: i32 = 1;

/// A new, time-ordered crash id (UUIDv7, hyphenless).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// Inserts a pending crash in the `default` project.
pub async fn insert(db: &Db, c: &NewCrash) -> Result<(), StoreError> {
    insert_in(db, c, DEFAULT_PROJECT).await
}

/// Inserts a pending crash in `project`.
pub async fn insert_in(db: &Db, c: &NewCrash, project: &str) -> Result<(), StoreError> {
    insert_row(db, c, project, None).await.map(|_| ())
}

/// Inserts a pending crash row of `project` with `key` as its idempotency key (none:
/// NULL, which never conflicts); returns how many rows were inserted (0: another crash
/// of the project has the key).
async fn insert_row(
    db: &Db,
    c: &NewCrash,
    project: &str,
    key: Option<&str>,
) -> Result<u64, StoreError> {
    let sql = match db.backend() {
        Backend::Sqlite(_) => INSERT_SQLITE_SQL,
        Backend::Postgres(_) => INSERT_SQL,
    };
    let turn = db.write_turn().await;
    let n = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(&c.id)
        .bind(c.received_at)
        .bind(&c.dump_sha256)
        .bind(c.dump_size)
        .bind(&c.dump_format)
        .bind(&c.annotations)
        .bind(key)
        .bind(super::text::clean_opt(c.annotations_cut.as_deref()))
        .bind(project)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    drop(turn);
    if n == 1 {
        super::queue_wake::notify(db).await;
    }
    Ok(n)
}

/// [`insert_row`]'s statement on PostgreSQL, whose trigger (0002) sets the product and
/// version from the annotations before the row is written.
const INSERT_SQL: &str = "INSERT INTO crashes (id, status, received_at, dump_sha256, dump_size, \
    dump_format, annotations, attempts, idempotency_key, annotations_cut, project) \
    VALUES ($1, 'pending', $2, $3, $4, $5, $6, 0, $7, $8, $9) \
    ON CONFLICT (project, idempotency_key) DO NOTHING";

/// [`insert_row`]'s statement on SQLite: the product and version written with the row,
/// by the expressions of its trigger (0002, 0031), which then leaves the row as it is
/// (an AFTER trigger would write the row a second time).
const INSERT_SQLITE_SQL: &str = "INSERT INTO crashes (id, status, received_at, dump_sha256, \
    dump_size, dump_format, annotations, attempts, idempotency_key, annotations_cut, project, \
    product, version) \
    VALUES ($1, 'pending', $2, $3, $4, $5, $6, 0, $7, $8, $9, \
    CASE WHEN json_valid($6) THEN COALESCE(json_extract($6, '$.prod'), \
    json_extract($6, '$.product')) END, \
    CASE WHEN json_valid($6) THEN COALESCE(json_extract($6, '$.ver'), \
    json_extract($6, '$.version')) END) \
    ON CONFLICT (project, idempotency_key) DO NOTHING";

/// Inserts a pending crash of `project` under a client's idempotency key, unless a crash
/// of the project already has that key. Returns `None` when inserted, else the crash that
/// has the key (its first upload, or a concurrent one that won the race).
pub async fn insert_keyed(
    db: &Db,
    c: &NewCrash,
    project: &str,
    key: &str,
) -> Result<Option<CrashSummary>, StoreError> {
    let n = insert_row(db, c, project, Some(key)).await?;
    if n == 1 {
        return Ok(None);
    }
    by_idempotency_key(db, project, key).await
}

/// The crash of `project` uploaded with idempotency key `key`, if any.
pub async fn by_idempotency_key(
    db: &Db,
    project: &str,
    key: &str,
) -> Result<Option<CrashSummary>, StoreError> {
    let sql = format!(
        "SELECT {SUMMARY_COLUMNS} FROM crashes WHERE idempotency_key = $1 AND project = $2"
    );
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, CrashSummary>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(key)
        .bind(project)
        .fetch_optional(p)
        .await)?,
    )
}

/// The first crash of `project` with exactly this dump (`dump_sha256`) and these upload
/// annotations (the JSON text [`NewCrash::annotations`] holds), received at or after
/// `since`: an upload of the same bytes with the same fields then is a retry of it.
pub async fn same_upload_since(
    db: &Db,
    project: &str,
    dump_sha256: &str,
    annotations: &str,
    since: i64,
) -> Result<Option<CrashSummary>, StoreError> {
    let sql = format!(
        "SELECT {SUMMARY_COLUMNS} FROM crashes WHERE dump_sha256 = $1 AND received_at >= $2 \
         AND annotations = $3 AND project = $4 ORDER BY received_at, id LIMIT 1"
    );
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, CrashSummary>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(dump_sha256)
        .bind(since)
        .bind(annotations)
        .bind(project)
        .fetch_optional(p)
        .await)?,
    )
}

/// Whether a crash that keeps its dump, a binary, a source bundle or an upload session's
/// chunk row names the blob `sha256` (the orphan sweep's question). A crash whose dump
/// is gone (retention, sampling: migration 0027) does not.
pub async fn blob_is_named(db: &Db, sha256: &str) -> Result<bool, StoreError> {
    let sql = "SELECT (EXISTS (SELECT 1 FROM crashes WHERE dump_sha256 = $1 \
               AND dump_gone IS NULL) \
               OR EXISTS (SELECT 1 FROM binaries WHERE sha256 = $1) \
               OR EXISTS (SELECT 1 FROM source_bundles WHERE sha256 = $1) \
               OR EXISTS (SELECT 1 FROM upload_session_chunks WHERE sha256 = $1))";
    let named: bool = crate::on_pool!(db, p => sqlx::query_scalar(sql)
        .bind(sha256)
        .fetch_one(p)
        .await)?;
    Ok(named)
}

/// One crash by id, without its report.
pub async fn summary(db: &Db, id: &str) -> Result<Option<CrashSummary>, StoreError> {
    let sql = format!("SELECT {SUMMARY_COLUMNS} FROM crashes WHERE id = $1");
    let id = super::text::clean(id);
    Ok(crate::on_pool!(db, p => sqlx::query_as::<_, CrashSummary>(
        sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&*id)
        .fetch_optional(p)
        .await)?)
}

/// One crash by id, with its report.
pub async fn get(db: &Db, id: &str) -> Result<Option<CrashRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM crashes WHERE id = $1");
    let id = super::text::clean(id);
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, CrashRow>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&*id)
        .fetch_optional(p)
        .await)?,
    )
}

/// One crash by id, without its report, if it belongs to `project` (none: any project).
/// Another project's crash is `None`, exactly as a missing one.
pub async fn summary_in(
    db: &Db,
    id: &str,
    project: Option<&str>,
) -> Result<Option<CrashSummary>, StoreError> {
    Ok(summary(db, id)
        .await?
        .filter(|c| project.is_none_or(|p| c.project == p)))
}

/// One crash by id, with its report, if it belongs to `project` (none: any project).
/// Another project's crash is `None`, exactly as a missing one.
pub async fn get_in(
    db: &Db,
    id: &str,
    project: Option<&str>,
) -> Result<Option<CrashRow>, StoreError> {
    Ok(get(db, id)
        .await?
        .filter(|c| project.is_none_or(|p| c.project == p)))
}

/// Filters and the keyset position of a listing (newest first).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only this project's crashes (none: every project's).
    pub project: Option<String>,
    pub signature: Option<String>,
    pub status: Option<String>,
    /// Inclusive lower bound on `received_at`.
    pub since: Option<i64>,
    /// Exclusive upper bound on `received_at`.
    pub until: Option<i64>,
    /// The `prod`/`product` annotation.
    pub product: Option<String>,
    /// The `ver`/`version` annotation.
    pub version: Option<String>,
    /// A module (file name, e.g. `libc.so.6`) in the crash's report.
    pub module: Option<String>,
    /// Text contained in a function name of any frame (case-insensitive).
    pub function: Option<String>,
    /// The kind of the crash analysis (`null-pointer`, …).
    pub kind: Option<String>,
    /// Continue after this (received_at, id).
    pub after: Option<(i64, String)>,
    pub limit: i64,
}

/// Crashes matching `q`, newest first, at most `q.limit`: their summaries only, so that a
/// page of crashes never holds their reports.
///
/// With a module filter the crashes are read from the module index (migration 0021),
/// newest first: a module every crash has gives the first page at once, a rare one reads
/// only its own crashes.
pub async fn list(db: &Db, q: &ListQuery) -> Result<Vec<CrashSummary>, StoreError> {
    let module = super::text::clean_opt(q.module.as_deref());
    let (from, at, id) = match module {
        Some(_) => (
            "crash_module_names m JOIN crashes ON crashes.id = m.crash_id",
            "m.crash_at",
            "m.crash_id",
        ),
        None => ("crashes", "received_at", "id"),
    };
    let mut c = super::conditions::Conditions::new();
    c.push_with(module.map(super::conditions::Value::Text), |p| {
        format!("m.name = {p}")
    });
    list_conditions(&mut c, q, at, id);
    let columns: String = SUMMARY_COLUMNS
        .split(", ")
        .map(|col| format!("crashes.{col}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT {columns} FROM {from}{} ORDER BY {at} DESC, {id} DESC LIMIT ${}",
        c.where_clause(),
        c.values().len() + 1
    );
    Ok(crate::on_pool!(db, p => crate::bind_values!(
        sqlx::query_as::<_, CrashSummary>(sqlx::AssertSqlSafe(sql.as_str())), c.values())
        .bind(q.limit)
        .fetch_all(p)
        .await)?)
}

/// The conditions of a crash listing but its module filter: only the filters `q` sets, so
/// that each database plans with the index of the filter given ([`super::conditions`]).
/// `at` and `id` name the columns of the time bounds and the keyset (the crash's, or the
/// module index's copies). Text filters are cleaned as the stored text was, so that they
/// find it.
fn list_conditions(c: &mut super::conditions::Conditions, q: &ListQuery, at: &str, id: &str) {
    use super::conditions::Value;
    use super::text::clean_opt;
    let text = |t: &Option<String>| clean_opt(t.as_deref()).map(Value::Text);
    c.push_with(text(&q.project), |p| format!("crashes.project = {p}"));
    c.push_with(text(&q.signature), |p| format!("crashes.signature = {p}"));
    c.push_with(text(&q.status), |p| format!("crashes.status = {p}"));
    c.push_with(q.since.map(Value::Int), |p| format!("{at} >= {p}"));
    c.push_with(q.until.map(Value::Int), |p| format!("{at} < {p}"));
    if let Some((ms, after)) = &q.after {
        let (ms, after) = (
            c.arg(Value::Int(*ms)),
            c.arg(Value::Text(super::text::clean(after).into_owned())),
        );
        c.push(format!("({at} < {ms} OR ({at} = {ms} AND {id} < {after}))"));
    }
    c.push_with(text(&q.product), |p| format!("crashes.product = {p}"));
    c.push_with(text(&q.version), |p| format!("crashes.version = {p}"));
    // A search term's crashes, written `(p IS NULL OR id IN …)` although p is set: so
    // written, both databases walk the newest-first index and test each crash, which is
    // fast for a term most crashes have (a common function); planned from the term's
    // side, a term in every crash materialized and sorted all of them (0.59 s over
    // 100,000 crashes, against 46 ms).
    let term = |p: &str, kind: &str, test: &str| {
        format!(
            "({p} IS NULL OR crashes.id IN (SELECT ct.crash_id FROM crash_terms ct \
             JOIN search_terms st ON st.id = ct.term_id \
             WHERE st.kind = '{kind}' AND {test}))"
        )
    };
    let function = clean_opt(q.function.as_deref()).map(|f| super::search::contains_pattern(&f));
    c.push_with(function.map(Value::Text), |p| {
        term(
            p,
            "function",
            &format!("lower(st.term) LIKE {p} ESCAPE '\\'"),
        )
    });
    // the crash's own kind (the same term, written by the same finish): its index
    // (migration 0036) is walked newest first from the kind's newest crash, where the
    // term's subquery built every crash of a common kind first
    c.push_with(text(&q.kind), |p| format!("crashes.analysis_kind = {p}"));
}

/// Number of crashes per project and status (for `/metrics`), by project: the counts
/// that migration 0033's triggers keep, a handful of rows whatever the number of
/// crashes.
pub async fn count_by_project_and_status(
    db: &Db,
) -> Result<Vec<(String, String, i64)>, StoreError> {
    // the counts triggers keep (migration 0033), not a count of every crash
    let sql = "SELECT project, status, CAST(SUM(count) AS BIGINT) FROM crash_project_counts \
               GROUP BY project, status HAVING SUM(count) <> 0 ORDER BY project, status";
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, (String, String, i64)>(sql)
        .fetch_all(p)
        .await)?,
    )
}

/// Number of crashes per status (the jobs page, `/metrics`): the counts that migration
/// 0033's triggers keep, a handful of rows whatever the number of crashes.
pub async fn count_by_status(db: &Db) -> Result<Vec<(String, i64)>, StoreError> {
    // the counts triggers keep (migration 0033), not a count of every crash
    let sql = "SELECT status, CAST(SUM(count) AS BIGINT) FROM crash_project_counts \
               GROUP BY status HAVING SUM(count) <> 0 ORDER BY status";
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, (String, i64)>(sql)
        .fetch_all(p)
        .await)?,
    )
}

/// A leased job: what the worker needs, and the lease it must present to finish it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Lease {
    pub id: String,
    pub attempts: i32,
    pub dump_sha256: String,
    pub annotations: String,
    /// What bounding the upload's fields cut (a report warning).
    pub annotations_cut: Option<String>,
    /// The crash's project: whose symbol files it is symbolized with.
    pub project: String,
}

/// Fails every job whose lease expired after its last allowed attempt. Returns how many.
pub async fn fail_exhausted(db: &Db, now: i64, max_attempts: i32) -> Result<u64, StoreError> {
    let n = crate::on_pool!(db, p => sqlx::query(fail_exhausted_sql(db))
        .bind(now)
        .bind(max_attempts)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(n)
}

/// [`fail_exhausted_sql`] after the table's name.
macro_rules! fail_exhausted_tail {
    () => {
        "SET status = 'failed', lease_until = NULL, finished_at = $1, \
         error = 'gave up after ' || CAST(attempts AS TEXT) || ' attempts: the lease expired \
         each time (the worker died or the job outlived its lease)' \
         WHERE status = 'processing' AND lease_until < $1 AND attempts >= $2"
    };
}

/// [`fail_exhausted`]'s statement: on SQLite through the leases' partial index (0041),
/// which its planner, seeing `status` as a column of few values, passed over for a scan of
/// every crash; PostgreSQL picks it by itself.
fn fail_exhausted_sql(db: &Db) -> &'static str {
    match db.backend() {
        Backend::Sqlite(_) => concat!(
            "UPDATE crashes INDEXED BY crashes_leased ",
            fail_exhausted_tail!()
        ),
        Backend::Postgres(_) => concat!("UPDATE crashes ", fail_exhausted_tail!()),
    }
}

/// Leases the job that is pending or whose lease expired (with attempts left), for
/// `lease_ms`, to `worker`: new crashes first (`priority` 0), crashes queued again after
/// them, each oldest first.
pub async fn lease(
    db: &Db,
    worker: &str,
    now: i64,
    lease_ms: i64,
    max_attempts: i32,
) -> Result<Option<Lease>, StoreError> {
    Ok(lease_batch(db, worker, now, lease_ms, max_attempts, 1)
        .await?
        .pop())
}

/// Leases up to `n` jobs at once, as [`lease`] leases one: a worker claims a batch and
/// finishes it with [`finish_batch`]. Listed in queue order. See [`claim_batch`].
pub async fn lease_batch(
    db: &Db,
    worker: &str,
    now: i64,
    lease_ms: i64,
    max_attempts: i32,
    n: usize,
) -> Result<Vec<Lease>, StoreError> {
    let claim = Claim {
        worker,
        now,
        lease_ms,
        max_attempts,
        n,
        skip: &[],
    };
    Ok(claim_in(db, &claim, false).await?.1)
}

/// What a worker asks of the queue: up to `n` jobs leased to `worker` at `now` for
/// `lease_ms`, each with attempts left under `max_attempts`.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    pub worker: &'a str,
    pub now: i64,
    pub lease_ms: i64,
    pub max_attempts: i32,
    pub n: usize,
    /// Crashes not to lease: those whose results the worker holds, not yet stored. A
    /// requeue resets a crash's attempts, so leasing such a crash again would give the
    /// worker a lease equal to the one its held result finishes under.
    pub skip: &'a [&'a str],
}

/// A worker's claim in one transaction (one commit, one sync of SQLite's log, for the
/// batch): fails the jobs whose attempts ran out ([`fail_exhausted`]), leases up to
/// `claim.n` jobs ([`lease_batch`]) and forgets what those crashes missed or took from a
/// `.sym` file alone last time they were processed (`missing_modules`,
/// `breakpad_modules`: their processing records it again). Returns how many jobs were
/// failed, and the leases in queue order.
pub async fn claim_batch(db: &Db, claim: &Claim<'_>) -> Result<(u64, Vec<Lease>), StoreError> {
    claim_in(db, claim, true).await
}

/// [`claim_batch`], sweeping the exhausted jobs or not.
async fn claim_in(
    db: &Db,
    claim: &Claim<'_>,
    sweep: bool,
) -> Result<(u64, Vec<Lease>), StoreError> {
    let sql = claim_sql(db);
    #[derive(sqlx::FromRow)]
    struct Claimed {
        #[sqlx(flatten)]
        lease: Lease,
        priority: i32,
        received_at: i64,
    }
    let until = claim.now.saturating_add(claim.lease_ms);
    let n = i64::try_from(claim.n.max(1)).unwrap_or(1);
    let skip = serde_json::to_string(claim.skip).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let sqlite = matches!(db.backend(), Backend::Sqlite(_));
    let (exhausted, mut claimed) = crate::in_transaction!(db, tx => {
        let exhausted = if sweep {
            sqlx::query(fail_exhausted_sql(db))
                .bind(claim.now).bind(claim.max_attempts)
                .execute(&mut *tx).await?.rows_affected()
        } else {
            0
        };
        let claimed: Vec<Claimed> = sqlx::query_as::<_, Claimed>(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(until).bind(claim.worker).bind(claim.now).bind(claim.max_attempts).bind(n)
            .bind(&skip)
            .fetch_all(&mut *tx).await?;
        let ids: Vec<&str> = claimed.iter().map(|c| c.lease.id.as_str()).collect();
        for table in ["missing_modules", "breakpad_modules"] {
            for chunk in ids.chunks(CLEARED_PER_STATEMENT) {
                let sql = super::crash_index::delete_by_crash_sql(table, chunk.len(), sqlite);
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()));
                for id in chunk {
                    q = q.bind(*id);
                }
                q.execute(&mut *tx).await?;
            }
        }
        (exhausted, claimed)
    });
    // RETURNING lists rows in no promised order
    claimed.sort_by(|a, b| {
        (a.priority, a.received_at, &a.lease.id).cmp(&(b.priority, b.received_at, &b.lease.id))
    });
    Ok((exhausted, claimed.into_iter().map(|c| c.lease).collect()))
}

/// The claim's statement: leases up to `$5` crashes, pending or with an expired lease and
/// attempts left, in queue order, skipping the ids of the JSON list `$6`; returns them.
///
/// One statement on both databases. PostgreSQL: concurrent workers skip rows another
/// transaction has locked instead of waiting on them. SQLite: a single writer, so the
/// UPDATE with its subquery is atomic already. The first condition is the partial
/// index's (0041's `crashes_claimable`), whose order is the claim's: SQLite is told to
/// read it (`INDEXED BY`), as its planner, seeing `status` as a column of few values,
/// read the pending and processing crashes through `status` and sorted them all on each
/// claim; PostgreSQL picks it by itself.
fn claim_sql(db: &Db) -> String {
    let indexed = match db.backend() {
        Backend::Postgres(_) => "",
        Backend::Sqlite(_) => " INDEXED BY crashes_claimable",
    };
    let pick = format!(
        "SELECT id FROM crashes{indexed} WHERE status IN ('pending', 'processing') \
         AND (status = 'pending' OR (status = 'processing' AND lease_until < $3 \
         AND attempts < $4)) \
         AND id NOT IN ({}) ORDER BY priority, received_at, id LIMIT $5",
        db.json_strings("$6")
    );
    let lock = match db.backend() {
        Backend::Postgres(_) => " FOR UPDATE SKIP LOCKED",
        Backend::Sqlite(_) => "",
    };
    format!(
        "UPDATE crashes SET status = 'processing', attempts = attempts + 1, \
         lease_until = $1, leased_by = $2, started_at = $3 \
         WHERE id IN ({pick}{lock}) \
         RETURNING id, attempts, dump_sha256, annotations, annotations_cut, project, \
         priority, received_at"
    )
}

/// Crashes whose index rows one statement of [`claim_batch`] deletes.
const CLEARED_PER_STATEMENT: usize = 500;

/// Extends a lease still held (a long job keeps its claim). False if it was lost.
pub async fn renew(db: &Db, lease: &Lease, worker: &str, until: i64) -> Result<bool, StoreError> {
    let sql = "UPDATE crashes SET lease_until = $1 WHERE id = $2 AND leased_by = $3 \
               AND attempts = $4 AND status = 'processing'";
    let _turn = db.write_turn().await;
    let n = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(until)
        .bind(&lease.id)
        .bind(worker)
        .bind(lease.attempts)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

/// Gives leases back to the queue untouched: a worker that stops holding a batch it
/// leased ahead and never started (`jobs::Runner::run`) makes its crashes pending again,
/// taking back the attempt the lease counted, so stopping costs a crash no attempt and
/// no wait for a lease to expire. Only leases still held are given back. How many were.
pub async fn release(db: &Db, worker: &str, leases: &[Lease]) -> Result<u64, StoreError> {
    if leases.is_empty() {
        return Ok(0);
    }
    let sql = "UPDATE crashes SET status = 'pending', attempts = attempts - 1, \
               lease_until = NULL, leased_by = NULL \
               WHERE id = $1 AND leased_by = $2 AND attempts = $3 AND status = 'processing'";
    let released = crate::in_transaction!(db, tx => {
        let mut released = 0;
        for lease in leases {
            released += sqlx::query(sql)
                .bind(&lease.id).bind(worker).bind(lease.attempts)
                .execute(&mut *tx).await?.rows_affected();
        }
        released
    });
    Ok(released)
}

/// How a job ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The report, as stored and indexed.
    Done(StoredReport),
    /// A permanent failure (the dump cannot be read, the engine panicked or timed out).
    Failed { reason: String },
    /// A transient failure: back to the queue if attempts remain, else failed.
    Retry { reason: String },
}

/// Finishes a leased job, only if the lease is still ours. False if it was lost (another
/// worker took the job over after our lease expired; its result wins). A `done` finish
/// adds one to the row's `completions`, so the database itself shows that no job was
/// completed twice. Its `processing_ms` (and `processing_us`) is the time since it was
/// leased.
pub async fn finish(
    db: &Db,
    lease: &Lease,
    worker: &str,
    now: i64,
    max_attempts: i32,
    outcome: &Outcome,
) -> Result<bool, StoreError> {
    let job = Finished {
        lease,
        outcome,
        processing_us: None,
    };
    let kept = finish_batch(db, worker, now, max_attempts, std::slice::from_ref(&job)).await?;
    Ok(kept.first().copied().unwrap_or(false))
}

/// One job's end, for [`finish_batch`].
#[derive(Debug, Clone, Copy)]
pub struct Finished<'a> {
    pub lease: &'a Lease,
    pub outcome: &'a Outcome,
    /// The time the job itself took in microseconds, where the worker measured it (a job
    /// of a batch waits for the ones before it after its lease); else the time since its
    /// lease. Stored as `processing_us`, and in whole milliseconds as `processing_ms`.
    pub processing_us: Option<i64>,
}

/// Runs one [`super::crash_index::Statement`] in transaction `tx` (of either backend).
macro_rules! run_statement {
    ($tx:ident, $st:expr) => {{
        let st = $st;
        let mut q = sqlx::query(sqlx::AssertSqlSafe(st.sql.as_str()));
        for b in st.binds {
            q = q.bind(b);
        }
        q.execute(&mut *$tx).await?;
    }};
}

/// Finishes several leased jobs of `worker` in one transaction, as [`finish`] finishes
/// one: the rows, and the search index of every report stored, are written at once
/// (one commit, one sync of SQLite's log, for the whole batch). The reports stored are
/// written by one statement per [`DONE_PER_STATEMENT`] jobs, not one per job (the same
/// rows and triggers, a round trip and a statement's execution per chunk instead of per
/// crash). Says per job whether its lease was still ours.
///
/// The order: on PostgreSQL the rows still ours are locked and indexed first
/// ([`held_sql`]), then the reports stored, whose `UPDATE` takes the groups' locks right
/// before its crashes enter their groups (migration 0043; [`moved_groups`] when a crash
/// had a group already), so what waits on a group is the groups' rows, not the index nor
/// the reports; on SQLite, one writer at a time, the reports are stored first and the
/// ids that were are indexed.
pub async fn finish_batch(
    db: &Db,
    worker: &str,
    now: i64,
    max_attempts: i32,
    jobs: &[Finished<'_>],
) -> Result<Vec<bool>, StoreError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let (failed_sql, retry_sql) = ended_sql();
    let done: Vec<(&Lease, &StoredReport, Option<i64>)> = jobs
        .iter()
        .filter_map(|job| match job.outcome {
            Outcome::Done(r) => Some((job.lease, r, job.processing_us)),
            _ => None,
        })
        .collect();
    let sqlite = matches!(db.backend(), Backend::Sqlite(_));
    // PostgreSQL: the rows still ours, locked, so the index is written before the groups'
    // locks are taken (see `held_sql`)
    let held = match db.backend() {
        Backend::Postgres(_) if done.iter().any(|(_, r, _)| r.signature.is_some()) => {
            Some(held_rows(&done)?)
        }
        _ => None,
    };
    let kept = crate::in_transaction!(db, tx => {
        let mut held_ids: Option<HashMap<String, i64>> = None;
        if let Some(rows) = &held {
            let sql = held_sql();
            let rows: Vec<(String, i64, Option<String>, bool)> =
                sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()))
                    .bind(rows.as_str()).bind(worker)
                    .fetch_all(&mut *tx).await?;
            let ids: HashMap<String, i64> =
                rows.iter().map(|(id, at, _, _)| (id.clone(), *at)).collect();
            // a crash that had no report has no index rows to delete
            let first: HashSet<&str> = rows
                .iter()
                .filter_map(|(id, _, _, no_report)| no_report.then_some(id.as_str()))
                .collect();
            for st in index_statements(jobs, &ids, &first, sqlite)? {
                run_statement!(tx, st);
            }
            if let Some((signatures, ids)) = moved_groups(&done, &rows)? {
                sqlx::query(GROUP_LOCKS_SQL).bind(signatures).bind(ids)
                    .execute(&mut *tx).await?;
            }
            held_ids = Some(ids);
        }
        // the ids whose report was stored (a lease no longer ours updates no row), with
        // their crashes' received_at, which the module index keeps beside each name
        let mut stored: HashMap<String, i64> = HashMap::with_capacity(done.len());
        for chunk in done.chunks(DONE_PER_STATEMENT) {
            let sql = done_sql(chunk.len());
            let mut q = sqlx::query_as::<_, (String, i64)>(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(now).bind(worker);
            for (lease, r, us) in chunk {
                q = q.bind(&lease.id).bind(lease.attempts).bind(&r.text).bind(&r.signature)
                    .bind(r.function_frames).bind(&r.analysis_summary).bind(*us)
                    .bind(r.analysis_kind());
            }
            stored.extend(q.fetch_all(&mut *tx).await?);
        }
        match &held_ids {
            // the rows were locked by this transaction: the guard cannot have changed
            Some(ids) if *ids != stored => {
                return Err(StoreError::Corrupt(format!(
                    "{} rows held but {} stored", ids.len(), stored.len())));
            }
            Some(_) => {}
            None => {
                for st in index_statements(jobs, &stored, &HashSet::new(), sqlite)? {
                    run_statement!(tx, st);
                }
            }
        }
        let mut kept = Vec::with_capacity(jobs.len());
        for job in jobs {
            let lease = job.lease;
            let n = match job.outcome {
                // a job listed twice keeps its lease once
                Outcome::Done(_) => u64::from(stored.remove(&lease.id).is_some()),
                Outcome::Failed { reason } => {
                    let reason = super::text::clean(reason);
                    sqlx::query(sqlx::AssertSqlSafe(failed_sql.as_str()))
                        .bind(&lease.id).bind(worker).bind(lease.attempts)
                        .bind(&*reason).bind(now).bind(job.processing_us)
                        .execute(&mut *tx).await?.rows_affected()
                }
                Outcome::Retry { reason } => {
                    let reason = super::text::clean(reason);
                    sqlx::query(sqlx::AssertSqlSafe(retry_sql.as_str()))
                        .bind(&lease.id).bind(worker).bind(lease.attempts)
                        .bind(&*reason).bind(max_attempts).bind(now)
                        .execute(&mut *tx).await?.rows_affected()
                }
            };
            kept.push(n == 1);
        }
        kept
    });
    Ok(kept)
}

/// The statements of a failed job and of a job to retry, each guarded as a stored one.
fn ended_sql() -> (String, String) {
    let guard = "WHERE id = $1 AND leased_by = $2 AND attempts = $3 AND status = 'processing'";
    let failed = format!(
        "UPDATE crashes SET status = 'failed', error = $4, lease_until = NULL, \
         finished_at = $5, processing_ms = COALESCE($6 / 1000, $5 - started_at), \
         processing_us = COALESCE($6, ($5 - started_at) * 1000) {guard}"
    );
    let retry = format!(
        "UPDATE crashes SET status = CASE WHEN attempts >= $5 THEN 'failed' ELSE 'pending' END, \
         error = $4, lease_until = NULL, leased_by = NULL, \
         finished_at = CASE WHEN attempts >= $5 THEN $6 ELSE NULL END {guard}"
    );
    (failed, retry)
}

/// The search and module index of the reports of `jobs` whose crashes are in `stored`
/// (by id, with their `received_at`): each crash once, its first job's report. `first`:
/// the crashes known to have had no report before, whose (absent) rows are not deleted.
fn index_statements<'a>(
    jobs: &[Finished<'a>],
    stored: &HashMap<String, i64>,
    first: &HashSet<&str>,
    sqlite: bool,
) -> Result<Vec<super::crash_index::Statement<'a>>, StoreError> {
    let mut seen = HashSet::new();
    let indexed: Vec<super::crash_index::Indexed<'a>> = jobs
        .iter()
        .filter_map(|job| match job.outcome {
            Outcome::Done(report) => Some((job.lease.id.as_str(), report)),
            _ => None,
        })
        .filter(|(id, _)| seen.insert(*id))
        .filter_map(|(id, report)| {
            stored
                .get(id)
                .map(|&received_at| super::crash_index::Indexed {
                    id,
                    received_at,
                    report,
                    replaces: !first.contains(id),
                })
        })
        .collect();
    super::crash_index::statements(&indexed, sqlite)
        .map_err(|e| StoreError::Corrupt(format!("index rows not serializable: {e}")))
}

/// PostgreSQL: the rows of a batch's reports whose leases are still ours (the attempt
/// `$1`'s JSON rows name, worker `$2`, still processing), locked for the rest of the
/// transaction in the order of their ids, with their `received_at`, the signature they
/// have before this store (a reprocessed crash's) and whether they had no report yet (a
/// first report: no index rows to replace).
///
/// The groups' locks are taken by the reports' `UPDATE` itself (migration 0043's
/// statement trigger, right before its crashes enter their groups) and held to the
/// commit: every other store of those groups waits from there, and a crash storm is one
/// group. The search and module index (`crash_index`), written before on the rows this
/// statement holds, and the reports' own rows are not part of that wait.
fn held_sql() -> String {
    let rows = super::crash_index::json_rows(false, &["id", "attempts"]);
    format!(
        "SELECT c.id, c.received_at, c.signature, c.report IS NULL FROM crashes c \
         JOIN ({rows}) v \
         ON c.id = v.id AND c.attempts = CAST(v.attempts AS INTEGER) \
         WHERE c.leased_by = $2 AND c.status = 'processing' ORDER BY c.id FOR UPDATE OF c"
    )
}

/// The JSON rows (`[id, attempts]`) [`held_sql`] reads.
fn held_rows(done: &[(&Lease, &StoredReport, Option<i64>)]) -> Result<String, StoreError> {
    let rows: Vec<(&str, i32)> = done
        .iter()
        .map(|(lease, _, _)| (lease.id.as_str(), lease.attempts))
        .collect();
    serde_json::to_string(&rows).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// PostgreSQL: what a batch locks before its `UPDATE` when one of its `held` crashes
/// already had a signature (a reprocessed crash leaves its group through 0026's row
/// triggers, which fire before 0043's statement trigger takes the locks): every
/// signature of the batch, old and computed, and the ids of its crashes, whose pins and
/// merges [`GROUP_LOCKS_SQL`] adds; two JSON arrays. None when every crash is a first
/// report: the trigger takes their locks, on the signatures stored.
fn moved_groups(
    done: &[(&Lease, &StoredReport, Option<i64>)],
    held: &[(String, i64, Option<String>, bool)],
) -> Result<Option<(String, String)>, StoreError> {
    let old: Vec<&str> = held
        .iter()
        .filter_map(|(_, _, s, _)| s.as_deref())
        .filter(|s| !s.is_empty())
        .collect();
    if old.is_empty() {
        return Ok(None);
    }
    let mut all: Vec<&str> = done
        .iter()
        .filter_map(|(_, r, _)| r.signature.as_deref())
        .chain(old)
        .collect();
    all.sort_unstable();
    all.dedup();
    let ids: Vec<&str> = held.iter().map(|(id, _, _, _)| id.as_str()).collect();
    let json =
        |v: &[&str]| serde_json::to_string(v).map_err(|e| StoreError::Corrupt(e.to_string()));
    Ok(Some((json(&all)?, json(&ids)?)))
}

/// PostgreSQL: takes, for the rest of the transaction, one advisory lock per signature of
/// the JSON array `$1`, per group a merge sends one of them to and per group a crash of
/// the JSON array `$2` is pinned to (the groups the crashes will be stored in), in
/// ascending order of the keys, which are those migration 0043's trigger takes
/// (`hashtextextended(signature, 0)`). A merge's project is not looked at: a lock more
/// only waits more.
///
/// Why locks at all: a stored report moves its crash into its group's rows, and the one
/// `UPDATE` of [`done_sql`] visits its crashes in an order of the planner's: two workers'
/// batches with two new signatures in common inserted their groups in opposite orders and
/// deadlocked (a fill of 100,000 crashes with 4 fillers: 36 retried). Taken in one order,
/// the locks make the second batch wait for the first before it touches a group they
/// share; two signatures on one key only wait for each other. SQLite has one writer.
/// The decisions that move crashes between groups (`store::groups`) take the same locks.
pub(crate) const GROUP_LOCKS_SQL: &str =
    "WITH sigs (s) AS (SELECT json_array_elements_text($1::json)) \
     SELECT pg_advisory_xact_lock(k) FROM (SELECT DISTINCT hashtextextended(s, 0) AS k FROM \
     (SELECT s FROM sigs \
      UNION SELECT m.into_group FROM group_merges m WHERE m.signature IN (SELECT s FROM sigs) \
      UNION SELECT p.group_name FROM group_pins p \
      WHERE p.crash_id IN (SELECT json_array_elements_text($2::json))) names (s) \
     ORDER BY 1) keys";

/// Reports one statement of [`finish_batch`] stores (8 values each: well under either
/// database's limit of bound values).
const DONE_PER_STATEMENT: usize = 100;

/// The statement that stores `n` reports, each row guarded as a single finish is (its
/// lease still ours: worker `$2`, its attempt, still processing), finished at `$1`; the
/// rows' values from `$3`, 8 per job: id, attempts, report, computed signature, function
/// frames, analysis summary, processing time (µs), analysis kind. The signature stored is the
/// crash's pin, else the merge of its computed signature in its project, else that
/// signature. Returns the ids of the rows stored and their `received_at`.
fn done_sql(n: usize) -> String {
    let mut rows = String::new();
    for i in 0..n {
        let at = 3 + i * 8;
        let _ = write!(
            rows,
            "{}(${}, ${}, ${}, ${}, ${}, ${}, ${}, ${})",
            if i == 0 { "" } else { ", " },
            at,
            at + 1,
            at + 2,
            at + 3,
            at + 4,
            at + 5,
            at + 6,
            at + 7
        );
    }
    format!(
        "WITH v (id, attempts, report, sig, frames, summary, us, kind) AS (VALUES {rows}) \
         UPDATE crashes SET status = 'done', report = v.report, computed_signature = v.sig, \
         signature = COALESCE((SELECT group_name FROM group_pins WHERE crash_id = v.id), \
         (SELECT gm.into_group FROM group_merges gm WHERE gm.project = crashes.project \
         AND gm.signature = v.sig), v.sig), error = NULL, lease_until = NULL, \
         finished_at = $1, processing_ms = COALESCE(v.us / 1000, $1 - started_at), \
         processing_us = COALESCE(v.us, ($1 - started_at) * 1000), \
         completions = completions + 1, function_frames = v.frames, \
         analysis_summary = v.summary, report_fields_apart = 1, analysis_kind = v.kind \
         FROM v WHERE crashes.id = v.id AND crashes.leased_by = $2 \
         AND crashes.attempts = v.attempts AND crashes.status = 'processing' \
         RETURNING crashes.id, crashes.received_at"
    )
}

/// A finished report as the `crashes` row and the search index take it: its JSON text and
/// what is indexed, all taken from the typed report, so that storing it never parses the
/// text back into a JSON tree.
#[derive(Debug, Clone, Default)]
pub struct StoredReport {
    pub text: String,
    pub signature: Option<String>,
    /// Frames with a function name ([`function_frames`]).
    pub function_frames: Option<i64>,
    /// Module and function terms ([`super::search::report_terms`]).
    pub terms: BTreeSet<(&'static str, String)>,
    /// The report's `crash.analysis.summary`, which crash lists show.
    pub analysis_summary: Option<String>,
    /// Every build-id, debug-id and code-id of its modules and their files, lower-case
    /// (the module index, [`super::crash_index`]).
    pub build_ids: BTreeSet<String>,
}

impl StoredReport {
    /// The report's analysis kind (its search term): a column of the crash, which the
    /// groups page's kind filter counts (migration 0021).
    pub fn analysis_kind(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|(kind, _)| *kind == super::search::ANALYSIS)
            .map(|(_, term)| term.as_str())
    }

    /// Serializes `report` once and takes its index terms from the typed value.
    pub fn of(report: &Report) -> Result<StoredReport, serde_json::Error> {
        Ok(StoredReport {
            text: serde_json::to_string(report)?,
            signature: report.signature.as_ref().map(|s| s.text.clone()),
            function_frames: function_frames(report),
            terms: with_analysis(
                super::search::report_terms(
                    report.modules.iter().map(|m| m.name.as_str()),
                    report.threads.iter().flat_map(|t| &t.frames),
                ),
                report
                    .crash
                    .as_ref()
                    .and_then(|c| c.analysis.as_ref())
                    .map(|a| a.kind.as_str()),
            ),
            analysis_summary: report
                .crash
                .as_ref()
                .and_then(|c| c.analysis.as_ref())
                .map(|a| a.summary.clone()),
            build_ids: build_ids(report.modules.iter().flat_map(|m| {
                [&m.build_id, &m.debug_id, &m.code_id]
                    .into_iter()
                    .chain(m.files.iter().map(|f| &f.build_id))
                    .filter_map(|b| b.as_deref())
            })),
        }
        .cleaned())
    }

    /// The columns and index terms with their input text cleaned for the database
    /// ([`super::text`]); the report text is JSON, whose NULs are escapes already.
    fn cleaned(self) -> StoredReport {
        use super::text::clean_owned;
        StoredReport {
            text: self.text,
            signature: self.signature.map(clean_owned),
            function_frames: self.function_frames,
            terms: self
                .terms
                .into_iter()
                .map(|(kind, term)| (kind, clean_owned(term)))
                .collect(),
            analysis_summary: self.analysis_summary.map(clean_owned),
            build_ids: self.build_ids.into_iter().map(clean_owned).collect(),
        }
    }

    /// A report known only as text (tests, reports written elsewhere): its index comes
    /// from a typed view of just the indexed fields; text that is no report indexes nothing.
    pub fn from_json(text: String, signature: Option<String>) -> StoredReport {
        #[derive(Deserialize, Default)]
        struct View {
            #[serde(default)]
            modules: Vec<ModuleView>,
            #[serde(default)]
            threads: Vec<ThreadView>,
            #[serde(default)]
            crash: Option<CrashView>,
        }
        #[derive(Deserialize)]
        struct CrashView {
            #[serde(default)]
            analysis: Option<AnalysisView>,
        }
        #[derive(Deserialize)]
        struct AnalysisView {
            kind: String,
            #[serde(default)]
            summary: Option<String>,
        }
        #[derive(Deserialize)]
        struct ModuleView {
            name: String,
            #[serde(default)]
            build_id: Option<String>,
            #[serde(default)]
            debug_id: Option<String>,
            #[serde(default)]
            code_id: Option<String>,
            #[serde(default)]
            files: Vec<FileView>,
        }
        #[derive(Deserialize)]
        struct FileView {
            #[serde(default)]
            build_id: Option<String>,
        }
        #[derive(Deserialize)]
        struct ThreadView {
            #[serde(default)]
            frames: Vec<FrameView>,
        }
        #[derive(Deserialize)]
        struct FrameView {
            function: Option<String>,
        }
        let view: Option<View> = serde_json::from_str(&text).ok();
        let analysis_summary = view
            .as_ref()
            .and_then(|v| v.crash.as_ref()?.analysis.as_ref()?.summary.clone());
        let build_ids = build_ids(view.iter().flat_map(|v| &v.modules).flat_map(|m| {
            [&m.build_id, &m.debug_id, &m.code_id]
                .into_iter()
                .chain(m.files.iter().map(|f| &f.build_id))
                .filter_map(|b| b.as_deref())
        }));
        let (function_frames, terms) = match &view {
            Some(v) => {
                let frames = || v.threads.iter().flat_map(|t| &t.frames);
                let named = frames().filter(|f| f.function.is_some()).count();
                let terms = with_analysis(
                    super::search::report_terms(
                        v.modules.iter().map(|m| m.name.as_str()),
                        frames().map(|f| f.function.as_deref()),
                    ),
                    v.crash
                        .as_ref()
                        .and_then(|c| c.analysis.as_ref())
                        .map(|a| a.kind.as_str()),
                );
                (i64::try_from(named).ok(), terms)
            }
            None => (None, BTreeSet::new()),
        };
        StoredReport {
            text,
            signature,
            function_frames,
            terms,
            analysis_summary,
            build_ids,
        }
        .cleaned()
    }
}

/// Distinct non-empty ids, lower-case.
fn build_ids<'a>(ids: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    ids.filter(|b| !b.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// `terms` and the report's analysis kind, if any (the crash list filters by it).
fn with_analysis(
    mut terms: BTreeSet<(&'static str, String)>,
    kind: Option<&str>,
) -> BTreeSet<(&'static str, String)> {
    if let Some(k) = kind {
        terms.insert((super::search::ANALYSIS, k.to_string()));
    }
    terms
}

/// How many frames of a report (all threads) have a function name: what a reprocess run
/// compares before and after.
pub fn function_frames(report: &Report) -> Option<i64> {
    let n = report
        .threads
        .iter()
        .flat_map(|t| &t.frames)
        .filter(|f| f.function.is_some())
        .count();
    i64::try_from(n).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// The claim's two statements read the queue's partial indexes (migration 0041), not
    /// the whole table, under the statistics SQLite's planner keeps of a store whose
    /// crashes are finished (`ANALYZE`, as `PRAGMA optimize` runs it): before 0041 it
    /// scanned every crash and sorted the pending ones, on each claim.
    #[tokio::test]
    async fn the_claim_reads_the_queue_indexes_on_sqlite() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let db = Db::connect(&url).await.expect("connect");
        db.migrate().await.expect("migrate");
        for i in 0..200 {
            let c = NewCrash {
                id: format!("c{i:03}"),
                received_at: i,
                dump_sha256: "0".repeat(64),
                dump_size: 1,
                dump_format: "minidump".into(),
                annotations: "{}".into(),
                annotations_cut: None,
            };
            insert(&db, &c).await.unwrap();
        }
        let Backend::Sqlite(pool) = db.backend() else {
            unreachable!("a SQLite URL")
        };
        sqlx::query("UPDATE crashes SET status = 'done'")
            .execute(pool)
            .await
            .unwrap();
        sqlx::query("ANALYZE").execute(pool).await.unwrap();
        let plans = [
            (claim_sql(&db), 6),
            (fail_exhausted_sql(&db).to_string(), 2),
        ];
        for (sql, binds) in plans {
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let mut q =
                sqlx::query_as::<_, (i64, i64, i64, String)>(sqlx::AssertSqlSafe(explain.as_str()));
            for _ in 0..binds {
                q = q.bind(1_i64);
            }
            let plan: Vec<String> = q
                .fetch_all(pool)
                .await
                .unwrap()
                .into_iter()
                .map(|row| row.3)
                .collect();
            assert!(
                plan.iter().all(|step| !step.starts_with("SCAN crashes")
                    || step.contains("USING INDEX crashes_claimable"))
                    && plan.iter().all(|step| !step.contains("TEMP B-TREE")),
                "the claim reads the whole table: {plan:?} for {sql}"
            );
            assert!(
                plan.iter()
                    .any(|step| step.contains("crashes_claimable")
                        || step.contains("crashes_leased")),
                "{plan:?} for {sql}"
            );
        }
        db.close().await;
    }
}
