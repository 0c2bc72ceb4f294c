//! Nothing left behind: a periodic sweep of what killed or interrupted uploads leave,
//! staging files no upload writes any more, upload sessions past their expiry with their
//! chunks ([`super::upload_sessions::expire`]) and blobs that no crash, binary, source
//! bundle or session chunk row names, and of the remote sources' misses and fetch claims
//! that expired ([`super::fetch_state`]).
//!
//! Both are judged by age: a live upload writes its staging file at least every body
//! idle timeout, and a blob is written just before its row is inserted, so only what is
//! older than a bound far above both (an hour by default) is removed.
//!
//! `serve` sweeps everything ([`run`]); `postmortem worker` processes, which may run
//! with no `serve` on their database, sweep the expired misses and claims
//! ([`run_expired_rows`]), so those tables do not grow without bound.

use std::time::Duration;

use super::{crashes, Blobs, Db, Staging, StoreError};

/// What one sweep removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub staging_files: usize,
    /// Upload sessions removed at their expiry, with their chunks.
    pub expired_sessions: u64,
    pub orphan_blobs: usize,
    /// Expired misses and fetch claims.
    pub expired_rows: u64,
}

/// Removes staging files and blobs with no row, both untouched for `age`, and expired
/// misses and fetch claims.
pub async fn sweep(
    db: &Db,
    blobs: &Blobs,
    staging: &Staging,
    age: Duration,
) -> Result<Swept, StoreError> {
    let staging = staging.clone();
    let staging_files = tokio::task::spawn_blocking(move || staging.sweep(age))
        .await
        .unwrap_or(0);
    let expired_sessions = super::upload_sessions::expire(db, blobs).await?;
    let age_ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
    let before = now_ms().saturating_sub(age_ms);
    let mut orphan_blobs = 0;
    for sha in blobs.written_before(before).await? {
        if !crashes::blob_is_named(db, &sha).await? {
            blobs.delete(&sha).await?;
            orphan_blobs += 1;
        }
    }
    let expired_rows = super::fetch_state::sweep_expired(db).await?;
    Ok(Swept {
        staging_files,
        expired_sessions,
        orphan_blobs,
        expired_rows,
    })
}

/// Sweeps every `interval` (the first one at once) until `stop` turns true; failures are
/// logged and the next sweep tries again.
pub async fn run(
    db: Db,
    blobs: Blobs,
    staging: Staging,
    interval: Duration,
    age: Duration,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    every(interval, stop, || async {
        match sweep(&db, &blobs, &staging, age).await {
            Ok(s) if s != Swept::default() => tracing::info!(
                staging_files = s.staging_files,
                expired_sessions = s.expired_sessions,
                orphan_blobs = s.orphan_blobs,
                expired_rows = s.expired_rows,
                "swept leftovers"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sweeping leftovers failed"),
        }
    })
    .await;
}

/// Removes the expired misses and fetch claims every `interval` (the first time at once)
/// until `stop` turns true: what a worker-only setup sweeps.
pub async fn run_expired_rows(
    db: Db,
    interval: Duration,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    every(interval, stop, || async {
        match super::fetch_state::sweep_expired(&db).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(expired_rows = n, "swept expired misses and claims"),
            Err(e) => tracing::warn!(error = %e, "sweeping expired misses and claims failed"),
        }
    })
    .await;
}

/// Runs `work` every `interval`, the first time at once, until `stop` turns true.
pub(super) async fn every<F, Fut>(
    interval: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
    work: F,
) where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        work().await;
        if *stop.borrow() {
            return;
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
