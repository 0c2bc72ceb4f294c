//! Waking the idle workers of every process when a crash is queued, on PostgreSQL: the
//! insert of a pending crash sends a notification on [`CHANNEL`], and each process with
//! workers (`serve`, `postmortem worker`) listens on it and wakes its idle workers at once.
//! Without it a worker of another process found a new crash only at its next poll (every
//! 500 ms): upload-to-report took 230 ms at the median under a steady load, against 13 ms
//! with the workers in the server (`bench/service.sh`). On SQLite the workers share the
//! server's process, whose in-process wake-up is enough: nothing is sent.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::{watch, Notify};

use super::{Backend, Db};

/// The notification channel of queued crashes.
pub const CHANNEL: &str = "postmortem_jobs";

/// Tells the listening processes that a crash was queued (PostgreSQL; nothing on
/// SQLite). A failure is logged, not returned: the workers still find the crash at
/// their next poll.
pub async fn notify(db: &Db) {
    if let Backend::Postgres(pool) = db.backend() {
        let sent = sqlx::query("SELECT pg_notify($1, '')")
            .bind(CHANNEL)
            .execute(pool)
            .await;
        if let Err(e) = sent {
            tracing::debug!(error = %e, "queue notification not sent");
        }
    }
}

/// Wakes `wake`'s waiters on every notification of [`CHANNEL`] until `stopped` (returns at
/// once on SQLite). A lost connection is made again after a second; the workers are woken
/// each time the listening (re)starts, since what was queued meanwhile sent nothing to it.
pub async fn listen(db: Db, wake: Arc<Notify>, mut stopped: watch::Receiver<bool>) {
    let Backend::Postgres(pool) = db.backend() else {
        return;
    };
    while !*stopped.borrow() {
        match PgListener::connect_with(pool).await {
            Ok(mut listener) => match listener.listen(CHANNEL).await {
                Ok(()) => {
                    // what was queued before the listening began is looked for at once
                    wake.notify_waiters();
                    if relay(&mut listener, &wake, &mut stopped).await {
                        return;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot listen for queued crashes"),
            },
            Err(e) => tracing::warn!(error = %e, "cannot connect to listen for queued crashes"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stopped.changed() => return,
        }
    }
}

/// Wakes `wake`'s waiters on each notification until the connection is lost (false) or
/// `stopped` (true).
async fn relay(
    listener: &mut PgListener,
    wake: &Notify,
    stopped: &mut watch::Receiver<bool>,
) -> bool {
    loop {
        tokio::select! {
            got = listener.recv() => match got {
                Ok(_) => wake.notify_waiters(),
                Err(e) => {
                    tracing::warn!(error = %e, "queue notifications lost; listening again");
                    return false;
                }
            },
            _ = stopped.changed() => return true,
        }
    }
}
