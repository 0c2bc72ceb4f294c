//! The requeue backlog (migration 0029): what a late source bundle's requeue could not
//! take at once is remembered here and done later, not dropped.
//!
//! A source bundle uploaded after crashes that name its build-id were processed requeues
//! them within the uploading token's allowance (`--requeue-per-minute`); when more are
//! waiting than that, the bundle's build-id and upload time are remembered ([`remember`]),
//! and the server's backlog pass ([`run`], every `--requeue-backlog-interval-secs`)
//! requeues at most its own allowance of them each time, oldest bundle first, until none
//! that finished without the bundle is left; then the row goes. A crash processed since
//! the bundle arrived has its lines and is not taken again, so a pass never requeues a
//! crash twice for one bundle. A row is the bundle's holder's (migration 0030): the
//! crashes of the project that uploaded it, or every project's for a shared one.

use std::sync::Arc;
use std::time::Duration;

use super::missing::Requeued;
use super::source_bundles::{self, Without};
use super::{now_ms, Db, StoreError};

/// Remembers that crashes of `project` (every project's for `binaries::SHARED`) naming
/// `build_id` that finished by `since` (its bundle's upload time) are still to be
/// requeued (once: a second call changes nothing).
pub async fn remember(
    db: &Db,
    project: &str,
    build_id: &str,
    since: i64,
) -> Result<(), StoreError> {
    let sql = "INSERT INTO requeue_backlog (build_id, since, recorded_at, project) \
               VALUES ($1, $2, $3, $4) ON CONFLICT (project, build_id) DO NOTHING";
    crate::on_pool!(db, p => sqlx::query(sql)
        .bind(build_id.to_ascii_lowercase())
        .bind(since)
        .bind(now_ms())
        .bind(project)
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(())
}

/// Build-ids one pass looks at, at most.
const PASS_ROWS: i64 = 100;

/// Requeues at most `limit` of the remembered crashes, oldest bundle first, and forgets
/// each build-id with none left; what it requeued, and what is still left.
pub async fn pass(db: &Db, limit: u64) -> Result<Requeued, StoreError> {
    let sql = "SELECT project, build_id, since FROM requeue_backlog \
               ORDER BY recorded_at, build_id, project LIMIT $1";
    let rows: Vec<(String, String, i64)> = crate::on_pool!(db, p => sqlx::query_as(sql)
        .bind(PASS_ROWS)
        .fetch_all(p)
        .await)?;
    let mut out = Requeued::default();
    for (project, build_id, since) in rows {
        let budget = limit.saturating_sub(out.requeued);
        let without = Without {
            since,
            processing: false,
        };
        let done = source_bundles::requeue_naming(db, &project, &build_id, without, budget).await?;
        out.requeued = out.requeued.saturating_add(done.requeued);
        out.left = out.left.saturating_add(done.left);
        if done.left == 0 {
            let sql = "DELETE FROM requeue_backlog WHERE project = $1 AND build_id = $2";
            crate::on_pool!(db, p => sqlx::query(sql)
                .bind(&project)
                .bind(&build_id)
                .execute(p)
                .await
                .map(|_| ()))?;
        }
    }
    Ok(out)
}

/// Runs a [`pass`] of at most `limit` crashes every `interval` (the first at once) until
/// `stop` turns true, waking `wake`'s workers when it requeued some; failures are logged
/// and the next pass tries again.
pub async fn run(
    db: Db,
    interval: Duration,
    limit: u64,
    wake: Arc<tokio::sync::Notify>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    super::sweep::every(interval, stop, || async {
        match pass(&db, limit).await {
            Ok(r) if r.requeued > 0 => {
                tracing::info!(requeued = r.requeued, left = r.left, "requeue backlog");
                wake.notify_waiters();
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "requeue backlog pass failed"),
        }
    })
    .await;
}
