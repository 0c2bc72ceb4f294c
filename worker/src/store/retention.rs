//! Retention per project (issue 41, `--retention PROJECT:DUMP_DAYS:REPORT_DAYS:SYMBOL_DAYS`,
//! 0: keep forever), and the sweeper that applies it and the sampling per signature
//! ([`super::sampling`]) as one of `serve`'s periodic tasks:
//!
//! - dumps older than their days lose their blob while the crash and its report stay
//!   ([`super::dump_gone`], reason `retention`);
//! - crashes older than their days are deleted whole, as `DELETE /api/v1/crashes/{id}`
//!   deletes them ([`super::delete`]; the group counts follow through the triggers), each
//!   with an audit entry of the token `retention`;
//! - a project's hold on a symbol file unused for its days (`binary_projects.last_used_at`:
//!   the last crash of the project processed with it, or its upload) goes, with its
//!   claims; the file's row and blob go once no project holds it. A shared file is kept.
//!
//! Everything is done in batches of a bounded number of rows, each its own short
//! statement or transaction, with a pause between batches, so that uploads and workers
//! are never held up behind a long sweep. Ages count from the crash's arrival
//! (`received_at`) and the file's last use.

use std::time::Duration;

use super::audit;
use super::dump_gone::{self, Reason};
use super::sampling::{self, Sample};
use super::{Blobs, Db, StoreError};

/// A project's retention (`--retention`): days of each kind kept (0: forever).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub project: String,
    pub dump_days: u32,
    pub report_days: u32,
    pub symbol_days: u32,
}

/// What the sweeper applies, and how gently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub rules: Vec<Rule>,
    pub samples: Vec<Sample>,
    /// Rows handled per statement or transaction.
    pub batch: i64,
    /// The pause between two batches.
    pub pause: Duration,
}

impl Policy {
    /// Whether there is anything to apply.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.samples.is_empty()
    }
}

/// What one sweep removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    /// Dumps removed for their age (crashes and reports kept).
    pub dumps: u64,
    /// Crashes deleted whole for their age.
    pub crashes: u64,
    /// Projects' holds on symbol files unused for their days.
    pub symbol_files: u64,
    /// Dumps removed by sampling.
    pub sampled: u64,
    /// Blobs freed (nothing named them any more).
    pub blobs: u64,
}

/// The audit log's name for the sweeper, in place of a token's label.
pub const AUDIT_TOKEN: &str = "retention";
const DAY_MS: i64 = 86_400_000;

/// Applies `policy` once, as of `now` (Unix ms).
pub async fn sweep(
    db: &Db,
    blobs: &Blobs,
    policy: &Policy,
    now: i64,
) -> Result<Removed, StoreError> {
    let mut r = Removed::default();
    let before = |days: u32| now.saturating_sub(i64::from(days).saturating_mul(DAY_MS));
    for rule in &policy.rules {
        let kinds = [
            (rule.report_days, Work::Crashes),
            (rule.dump_days, Work::Dumps { now }),
            (rule.symbol_days, Work::Symbols),
        ];
        for (days, work) in kinds.into_iter().filter(|(days, _)| *days > 0) {
            let (n, freed) = in_batches(db, blobs, rule, before(days), policy, work).await?;
            r.blobs += freed;
            *match work {
                Work::Crashes => &mut r.crashes,
                Work::Dumps { .. } => &mut r.dumps,
                Work::Symbols => &mut r.symbol_files,
            } += n;
        }
    }
    for sample in &policy.samples {
        let (n, freed) =
            sampling::sweep(db, blobs, sample, now, policy.batch, policy.pause).await?;
        r.sampled += n;
        r.blobs += freed;
    }
    Ok(r)
}

/// Sweeps every `interval` (the first one at once) until `stop` turns true; failures are
/// logged and the next sweep tries again.
pub async fn run(
    db: Db,
    blobs: Blobs,
    policy: Policy,
    interval: Duration,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    if policy.is_empty() {
        return;
    }
    super::sweep::every(interval, stop, || async {
        match sweep(&db, &blobs, &policy, super::now_ms()).await {
            Ok(r) if r != Removed::default() => tracing::info!(
                dumps = r.dumps,
                crashes = r.crashes,
                symbol_files = r.symbol_files,
                sampled = r.sampled,
                blobs = r.blobs,
                "retention and sampling swept"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "the retention sweep failed"),
        }
    })
    .await;
}

/// What one kind of retention removes, a batch at a time.
#[derive(Debug, Clone, Copy)]
enum Work {
    /// The dumps of finished crashes (their rows stay), as of `now`.
    Dumps { now: i64 },
    /// Finished crashes, whole.
    Crashes,
    /// The project's holds on the symbol files it has not used (shared files are kept).
    Symbols,
}

impl Work {
    /// The keys (crash ids, or file sha256s) of a batch: `$1` the project, `$2` the age
    /// bound, `$3` the batch size.
    fn select(self) -> String {
        match self {
            Work::Dumps { .. } => "SELECT id FROM crashes WHERE project = $1 \
                AND dump_gone IS NULL AND received_at < $2 AND status IN ('done', 'failed') \
                ORDER BY received_at LIMIT $3"
                .to_string(),
            Work::Crashes => "SELECT id FROM crashes WHERE project = $1 AND received_at < $2 \
                AND status IN ('done', 'failed') ORDER BY received_at LIMIT $3"
                .to_string(),
            Work::Symbols => format!(
                "SELECT sha256 FROM binary_projects h WHERE project = $1 AND last_used_at < $2 \
                 AND NOT EXISTS (SELECT 1 FROM binary_projects s WHERE s.sha256 = h.sha256 \
                 AND s.project = '{}') ORDER BY last_used_at, sha256 LIMIT $3",
                super::binaries::SHARED
            ),
        }
    }

    /// Removes what `keys` name; the sha256 of the blob of each thing removed (a
    /// candidate to free).
    async fn act(
        self,
        db: &Db,
        project: &str,
        keys: &[String],
        before: i64,
    ) -> Result<Vec<String>, StoreError> {
        let mut removed = Vec::new();
        match self {
            Work::Dumps { now } => return dump_gone::mark(db, keys, Reason::Retention, now).await,
            Work::Crashes => {
                for id in keys {
                    let entry = audit::entry(
                        AUDIT_TOKEN,
                        Some(project),
                        "delete-crash",
                        "retention",
                        Some(id),
                    );
                    removed.extend(super::delete::crash(db, id, Some(project), &entry).await?);
                }
            }
            Work::Symbols => {
                for sha in keys {
                    if drop_hold(db, project, sha, before).await? {
                        removed.push(sha.clone());
                    }
                }
            }
        }
        Ok(removed)
    }
}

/// Applies `work` to `rule`'s project for what is older than `before`, a batch of
/// `policy.batch` at a time with `policy.pause` between batches: how many things were
/// removed, and how many blobs freed.
async fn in_batches(
    db: &Db,
    blobs: &Blobs,
    rule: &Rule,
    before: i64,
    policy: &Policy,
    work: Work,
) -> Result<(u64, u64), StoreError> {
    let sql = work.select();
    let (mut removed, mut freed) = (0, 0);
    loop {
        let keys: Vec<String> = crate::on_pool!(db, p => sqlx::query_scalar(
            sqlx::AssertSqlSafe(sql.as_str()))
            .bind(&rule.project).bind(before).bind(policy.batch).fetch_all(p).await)?;
        let gone = work.act(db, &rule.project, &keys, before).await?;
        removed += u64::try_from(gone.len()).unwrap_or(0);
        freed += dump_gone::free_blobs(db, blobs, &gone).await?;
        // nothing removed of a batch: the rest changed meanwhile, the next sweep sees it
        if gone.is_empty() || i64::try_from(keys.len()).unwrap_or(0) < policy.batch {
            return Ok((removed, freed));
        }
        tokio::time::sleep(policy.pause).await;
    }
}

/// In one transaction: drops `project`'s hold on the file `sha256` if it is still unused
/// since `before`, with its claims, and the file's row, names and claims once no project
/// holds it. Whether the hold was dropped.
async fn drop_hold(db: &Db, project: &str, sha256: &str, before: i64) -> Result<bool, StoreError> {
    let hold = "DELETE FROM binary_projects WHERE sha256 = $1 AND project = $2 \
                AND last_used_at < $3";
    let claims = "DELETE FROM binary_claims WHERE sha256 = $1 AND project = $2";
    let file = "DELETE FROM binaries WHERE sha256 = $1 \
                AND NOT EXISTS (SELECT 1 FROM binary_projects WHERE sha256 = $1)";
    let rest = [
        "DELETE FROM binary_names WHERE sha256 = $1",
        "DELETE FROM binary_claims WHERE sha256 = $1",
    ];
    // the first statement writes: SQLite takes its write lock at once
    Ok(crate::in_transaction!(db, tx => {
        let n = sqlx::query(hold).bind(sha256).bind(project).bind(before)
            .execute(&mut *tx).await?.rows_affected();
        if n == 1 {
            sqlx::query(claims).bind(sha256).bind(project).execute(&mut *tx).await?;
            let files = sqlx::query(file).bind(sha256).execute(&mut *tx).await?.rows_affected();
            if files == 1 {
                for sql in rest {
                    sqlx::query(sql).bind(sha256).execute(&mut *tx).await?;
                }
            }
        }
        n == 1
    }))
}
