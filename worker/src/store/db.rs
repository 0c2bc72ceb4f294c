//! The database handle: a SQLite or PostgreSQL pool, opened and migrated.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use super::StoreError;

/// Both migration directories, embedded at compile time.
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// What a migration applied out of its number's order leaves behind, and what drops it:
/// (a table whose presence says the superseding migration ran, SQLite's statements,
/// PostgreSQL's). On a fresh database migrations run in number order, so a migration
/// numbered below the one it supersedes runs first and the superseded one makes its
/// objects again after it.
type Superseded = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);

const SUPERSEDED: &[Superseded] = &[
    // 0035's `crash_group_versions`, replaced by 0026's `project_group_versions` (groups
    // per project). On a database where 0035 ran first, 0026 drops it; on a fresh one
    // 0035 runs after 0026 and creates it again, with triggers that would keep it up to
    // date for nothing.
    (
        "crash_group_versions",
        &[
            "DROP TRIGGER IF EXISTS crash_group_versions_add",
            "DROP TRIGGER IF EXISTS crash_group_versions_remove",
            "DROP TRIGGER IF EXISTS crash_group_versions_move",
            "DROP TABLE IF EXISTS crash_group_versions",
        ],
        &[
            "DROP TRIGGER IF EXISTS crash_group_versions_follow ON crash_group_days",
            "DROP FUNCTION IF EXISTS crash_group_versions_follow()",
            "DROP TABLE IF EXISTS crash_group_versions",
        ],
    ),
    // 0034's `crash_status_counts`, replaced by 0033's `crash_project_counts` (the same
    // counts by project too). Where 0034 ran first, 0033 drops it; on a fresh database
    // 0034 runs after 0033 and makes it again, with triggers on every write of a crash.
    (
        "crash_status_counts",
        &[
            "DROP TRIGGER IF EXISTS crash_status_counts_insert",
            "DROP TRIGGER IF EXISTS crash_status_counts_update",
            "DROP TRIGGER IF EXISTS crash_status_counts_delete",
            "DROP TABLE IF EXISTS crash_status_counts",
        ],
        &[
            "DROP TRIGGER IF EXISTS crash_status_counts_insert ON crashes",
            "DROP TRIGGER IF EXISTS crash_status_counts_update ON crashes",
            "DROP TRIGGER IF EXISTS crash_status_counts_delete ON crashes",
            "DROP FUNCTION IF EXISTS crash_status_counts_follow()",
            "DROP TABLE IF EXISTS crash_status_counts",
        ],
    ),
];

/// Which database a [`Db`] talks to.
#[derive(Debug, Clone)]
pub enum Backend {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A cheap-to-clone database handle.
#[derive(Debug, Clone)]
pub struct Db {
    backend: Backend,
    /// SQLite's one writer, as this process's transactions take turns at it
    /// ([`Db::sqlite_writer`]).
    writer: Arc<tokio::sync::Mutex<()>>,
}

/// Runs one expression against whichever pool `$db` holds: the same query text and binds
/// are compiled once per backend.
#[macro_export]
#[doc(hidden)]
macro_rules! on_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db.backend() {
            $crate::store::Backend::Sqlite($pool) => $body,
            $crate::store::Backend::Postgres($pool) => $body,
        }
    };
}

/// Runs `$body` in one transaction on whichever pool `$db` holds, committed when the body
/// gives `Ok` (rolled back when it returns early with an error). `$tx` is the transaction:
/// `&mut *$tx` is the executor of each statement. As [`on_pool!`], the body is compiled
/// once per backend. On SQLite the transaction first waits for this process's other
/// transactions ([`Db::sqlite_writer`]).
#[macro_export]
#[doc(hidden)]
macro_rules! in_transaction {
    ($db:expr, $tx:ident => $body:expr) => {
        match $db.backend() {
            $crate::store::Backend::Sqlite(pool) => {
                let _writing = $db.sqlite_writer().lock().await;
                let mut $tx = pool.begin().await?;
                let out = $body;
                $tx.commit().await?;
                out
            }
            $crate::store::Backend::Postgres(pool) => {
                let mut $tx = pool.begin().await?;
                let out = $body;
                $tx.commit().await?;
                out
            }
        }
    };
}

impl Db {
    /// Connects to `url` (`sqlite://path` — created if missing, WAL mode — or
    /// `postgres://…`). Does not migrate: see [`Db::migrate`].
    pub async fn connect(url: &str) -> Result<Db, StoreError> {
        let backend = if url.starts_with("sqlite:") {
            let opts = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true);
            let pool = SqlitePoolOptions::new()
                .max_connections(8)
                .connect_with(opts)
                .await?;
            Backend::Sqlite(pool)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            let pool = PgPoolOptions::new()
                .max_connections(16)
                .acquire_timeout(Duration::from_secs(10))
                .connect(url)
                .await?;
            Backend::Postgres(pool)
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_string()));
        };
        Ok(Db {
            backend,
            writer: Arc::default(),
        })
    }

    /// The turn of this process's transactions at SQLite's one writer, taken in the order
    /// they asked ([`in_transaction!`] takes it). SQLite lets one transaction write at a
    /// time, and one that finds another writing polls in its busy handler, asleep for 1,
    /// 2, 5, 10, … up to 100 ms between tries: a worker's claim that began while its
    /// batched store wrote woke up to a step (5–25 ms) after the store's commit, and the
    /// worker waited on it (issue 40). Queued here, the next transaction begins when the
    /// last one ends. Writers of other processes, and single statements, still meet in
    /// the busy handler; on PostgreSQL this is never taken.
    #[doc(hidden)]
    pub fn sqlite_writer(&self) -> &tokio::sync::Mutex<()> {
        &self.writer
    }

    /// The writer's turn for a write that is one statement outside a transaction (an
    /// upload's crash row, a lease renewed): on SQLite taken as [`in_transaction!`] takes
    /// it, so that the statement and this process's transactions queue for the one writer
    /// instead of meeting in SQLite's busy handler, where the loser sleeps 1, 2, 5, 10, …
    /// up to 100 ms between tries. Under a sustained load of uploads, a worker's store or
    /// claim that met an upload's insert there waited out a sleep, and so did the uploads
    /// (issue 40: SQLite fell behind half its measured rate). `None` on PostgreSQL.
    pub async fn write_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match self.backend {
            Backend::Sqlite(_) => Some(self.writer.lock().await),
            Backend::Postgres(_) => None,
        }
    }

    /// Applies the embedded migrations of this backend's dialect, then drops what a
    /// migration applied out of its number's order left behind ([`SUPERSEDED`]).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(p) => SQLITE_MIGRATIONS.run(p).await?,
            Backend::Postgres(p) => POSTGRES_MIGRATIONS.run(p).await?,
        }
        for (table, sqlite, postgres) in SUPERSEDED {
            let (exists, drops) = match self.backend {
                Backend::Sqlite(_) => (
                    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1",
                    sqlite,
                ),
                Backend::Postgres(_) => (
                    "SELECT COUNT(*) FROM information_schema.tables \
                     WHERE table_name = $1 AND table_schema = current_schema()",
                    postgres,
                ),
            };
            let n: i64 =
                on_pool!(self, p => sqlx::query_scalar(exists).bind(*table).fetch_one(p).await)?;
            if n > 0 {
                for sql in drops.iter() {
                    on_pool!(self, p => sqlx::query(*sql).execute(p).await.map(|_| ()))?;
                }
            }
        }
        Ok(())
    }

    /// The pool, for the query modules.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// A subquery giving the strings of the JSON array bound as parameter `param` (`$1`):
    /// one parameter for a list of any length.
    pub(crate) fn json_strings(&self, param: &str) -> String {
        match self.backend {
            Backend::Sqlite(_) => format!("SELECT value FROM json_each({param})"),
            Backend::Postgres(_) => {
                format!("SELECT json_array_elements_text(CAST({param} AS json))")
            }
        }
    }

    /// A condition: the JSON object in text column `column` has the member named by
    /// parameter `name` with the string of parameter `value` (both bound, so any name is
    /// safe; a member that is not a string never matches a string).
    pub(crate) fn json_field_is(&self, column: &str, name: &str, value: &str) -> String {
        match self.backend {
            Backend::Sqlite(_) => format!(
                "EXISTS (SELECT 1 FROM json_each({column}) \
                 WHERE key = {name} AND type = 'text' AND value = {value})"
            ),
            Backend::Postgres(_) => format!(
                "jsonb_typeof(CAST({column} AS jsonb) -> {name}) = 'string' \
                 AND CAST({column} AS jsonb) ->> {name} = {value}"
            ),
        }
    }

    /// `sqlite` or `postgres`.
    pub fn kind(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Whether the database answers (`GET /readyz`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        on_pool!(self, p => sqlx::query("SELECT 1").execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// Closes the pool.
    pub async fn close(&self) {
        match &self.backend {
            Backend::Sqlite(p) => p.close().await,
            Backend::Postgres(p) => p.close().await,
        }
    }
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
