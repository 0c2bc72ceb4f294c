//! Deleting one crash (`DELETE /api/v1/crashes/{id}`, issue 41): its row with its report,
//! every index row that names it (search links and the search terms only it had, the
//! module and build-id indexes, the missing-module and `.sym`-module records, its pin to a
//! group), and the audit entry saying so, in one transaction. The group counts follow the
//! row through the triggers of migrations 0006 and 0021. The dump's blob is the caller's
//! to remove afterwards, when no row names it any more
//! ([`super::crashes::blob_is_named`]): blobs are shared by content.

use super::audit::{self, Entry};
use super::{Db, StoreError};

/// The tables whose rows name a crash by `crash_id`, emptied of a deleted crash's rows.
pub const CRASH_TABLES: [&str; 6] = [
    "crash_terms",
    "crash_build_ids",
    "crash_module_names",
    "missing_modules",
    "breakpad_modules",
    "group_pins",
];

/// Search terms only crash `$1` has: they name nothing once it is gone.
const ORPHAN_TERMS: &str = "DELETE FROM search_terms WHERE id IN \
    (SELECT term_id FROM crash_terms WHERE crash_id = $1) \
    AND NOT EXISTS (SELECT 1 FROM crash_terms o \
    WHERE o.term_id = search_terms.id AND o.crash_id <> $1)";

/// PostgreSQL: the advisory lock of crash `$1`'s group, the one a worker's store takes
/// before it adds to the group's rows ([`super::crashes::GROUP_LOCKS_SQL`]): the row's
/// delete takes it out of those rows through the triggers, and beside a storm's stores
/// without the lock it could be ended as a deadlock.
///
/// Only a crash of the caller's project (`$2`; none: any) is looked at: another
/// project's crash id does not wait for its group.
const GROUP_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended(signature, 0)) \
    FROM crashes WHERE id = $1 AND ($2 IS NULL OR project = $2) \
    AND signature IS NOT NULL AND signature <> ''";

/// Deletes crash `id` if it belongs to `project` (none: any project) and records `audit`
/// with it (under the crash's project). Returns the sha256 of its dump, or `None` when there is no such crash (another
/// project's crash is `None` too, and is left as it was).
pub async fn crash(
    db: &Db,
    id: &str,
    project: Option<&str>,
    audit: &Entry,
) -> Result<Option<String>, StoreError> {
    let id = super::text::clean(id);
    // The crash row goes first: the transaction's first statement is a write, so that
    // SQLite takes its write lock at once (a read first, then a write, fails with
    // "database is locked" when a worker wrote in between).
    let remove = "DELETE FROM crashes WHERE id = $1 AND ($2 IS NULL OR project = $2) \
                  RETURNING dump_sha256, project";
    let postgres = matches!(db.backend(), super::Backend::Postgres(_));
    Ok(crate::in_transaction!(db, tx => {
        if postgres {
            sqlx::query(GROUP_LOCK).bind(&*id).bind(project).execute(&mut *tx).await?;
        }
        let row: Option<(String, String)> = sqlx::query_as(remove)
            .bind(&*id).bind(project).fetch_optional(&mut *tx).await?;
        match row {
            Some((sha, owner)) => {
                sqlx::query(ORPHAN_TERMS).bind(&*id).execute(&mut *tx).await?;
                for table in CRASH_TABLES {
                    let sql = format!("DELETE FROM {table} WHERE crash_id = $1");
                    sqlx::query(sqlx::AssertSqlSafe(sql)).bind(&*id).execute(&mut *tx).await?;
                }
                sqlx::query(audit::INSERT)
                    .bind(audit.at).bind(&audit.token).bind(&owner)
                    .bind(&audit.action).bind(&audit.route).bind(&audit.target)
                    .bind(&audit.detail).execute(&mut *tx).await?;
                Some(sha)
            }
            None => None,
        }
    }))
}
