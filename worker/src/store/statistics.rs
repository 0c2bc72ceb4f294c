//! The query planner's statistics, kept in step with a store that grows.
//!
//! Both databases choose a plan from per-table statistics (row counts, distinct values
//! per index). A store filled in bulk without them gets plans for an empty store: on
//! SQLite the reprocess selection by build-id walked the status index over every
//! finished crash instead of looking its crashes up (issue 40), on PostgreSQL the groups
//! query was JIT-compiled on every run for a guessed 35,502 groups.
//!
//! - **SQLite** never gathers statistics by itself: [`refresh`] runs `PRAGMA optimize`
//!   with the bits that check every table (0x10000: not only those this connection
//!   queried) and bound each `ANALYZE` to a sample (0x10: 2,000 rows per index), so that
//!   a table never analyzed, or ten times larger or smaller than when it was, is analyzed
//!   again in milliseconds, and nothing is done otherwise. `serve` and `postmortem worker`
//!   run it at start and then every sweep interval ([`run`]), as SQLite advises for
//!   long-lived connections, and the workers every 1,000 reports they store
//!   (`jobs::Runner`), so that a burst into a small store does not run a minute on the
//!   plans of the store it was.
//! - **PostgreSQL** analyzes on its own (autovacuum, once 10% of a table changed, a
//!   minute or so after a bulk load): [`refresh`] does nothing there.
//!
//! [`analyze_now`] is for a bulk load that is timed at once (`postmortem bench store`):
//! the same refresh on SQLite, `VACUUM ANALYZE` on PostgreSQL (what autovacuum would do
//! a minute later). Not a full `ANALYZE` on SQLite: it also gathers `sqlite_stat4`
//! samples, with which the bundled SQLite planned the crash list of a hot signature
//! worse (206 ms against 3.4 ms after the refresh, 100,000 crashes, debug build).

use std::time::Duration;

use super::{Backend, Db, StoreError};

/// `PRAGMA optimize`'s mask: analyze (0x2) tables that need it with a bounded sample
/// (0x10), checking every table's size (0x10000).
const OPTIMIZE: &str = "PRAGMA optimize=0x10012";

/// Brings SQLite's statistics up to date where a table never had them or changed size
/// tenfold (a bounded `ANALYZE` of those tables); nothing on PostgreSQL.
pub async fn refresh(db: &Db) -> Result<(), StoreError> {
    if let Backend::Sqlite(p) = db.backend() {
        // an ANALYZE writes the statistics' tables: it takes the writer's turn
        let _turn = db.write_turn().await;
        sqlx::query(OPTIMIZE).execute(p).await?;
    }
    Ok(())
}

/// Analyzes now, after a bulk load that is queried at once: [`refresh`] on SQLite,
/// `VACUUM ANALYZE` of every table on PostgreSQL.
pub async fn analyze_now(db: &Db) -> Result<(), StoreError> {
    match db.backend() {
        Backend::Sqlite(_) => refresh(db).await?,
        Backend::Postgres(p) => sqlx::query("VACUUM ANALYZE").execute(p).await.map(|_| ())?,
    }
    Ok(())
}

/// [`refresh`] every `interval`, the first time at once, until `stop` turns true;
/// failures (a busy database) are logged and the next round tries again.
pub async fn run(db: Db, interval: Duration, stop: tokio::sync::watch::Receiver<bool>) {
    super::sweep::every(interval, stop, || async {
        if let Err(e) = refresh(&db).await {
            tracing::warn!(error = %e, "refreshing the planner's statistics failed");
        }
    })
    .await;
}
