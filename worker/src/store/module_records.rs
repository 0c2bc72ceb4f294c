//! What a job records of its crash's modules, written at once: the modules nobody
//! uploaded (the missing-modules index, [`super::missing`]) and those walked from a
//! partial file (the partial-files index, [`super::breakpad_used`]), in one transaction at
//! the end of the job's tables step, a statement per index.
//!
//! Written a statement per module, each was a commit of its own, and on SQLite a turn of
//! its own at the one writer ([`Db::write_turn`]) behind the other workers' stores: a
//! crash of a desktop program with 50 system libraries stripped of their debug
//! information made 50 (issue 40: no per-job statement where one does).

use std::fmt::Write as _;

use super::text::{clean, clean_opt};
use super::{now_ms, Db, StoreError};

/// Which index a module goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// Nobody uploaded a file for it (or a Mach-O binary came without its dSYM).
    Missing,
    /// Its tables came from a file that is not the whole story (a `.sym` alone, a Windows
    /// image without its PDB, a stripped ELF file without its debug file).
    Partial,
}

/// One module of a crash, for one index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleRecord {
    pub index: Index,
    /// The module's key: its build-id, else its debug-id (from the dump).
    pub key: String,
    pub debug_id: Option<String>,
    /// The module's name (from the dump; the missing-modules index shows it).
    pub name: String,
}

/// Rows one statement inserts (5 values each: well under either database's limit).
const ROWS_PER_STATEMENT: usize = 200;

/// Records `records` of crash `crash_id` in one transaction; nothing when there are none.
pub async fn record_all(
    db: &Db,
    crash_id: &str,
    records: &[ModuleRecord],
) -> Result<(), StoreError> {
    if records.is_empty() {
        return Ok(());
    }
    let now = now_ms();
    crate::in_transaction!(db, tx => {
        for index in [Index::Missing, Index::Partial] {
            let rows: Vec<&ModuleRecord> = records.iter().filter(|r| r.index == index).collect();
            for chunk in rows.chunks(ROWS_PER_STATEMENT) {
                let sql = insert_sql(index, chunk.len());
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()));
                for r in chunk {
                    q = q.bind(clean(&r.key).into_owned()).bind(crash_id)
                        .bind(clean_opt(r.debug_id.as_deref())).bind(now);
                    if index == Index::Missing {
                        q = q.bind(clean(&r.name).into_owned());
                    }
                }
                q.execute(&mut *tx).await?;
            }
        }
    });
    Ok(())
}

/// Forgets the missing-modules records of crash `crash_id` for the modules `keys`: their
/// files were found after all (the job looked again, `jobs::process`).
pub async fn forget_missing(db: &Db, crash_id: &str, keys: &[String]) -> Result<(), StoreError> {
    let _turn = db.write_turn().await;
    for key in keys {
        crate::on_pool!(db, p => sqlx::query(
            "DELETE FROM missing_modules WHERE crash_id = $1 AND build_id = $2",
        )
        .bind(crash_id)
        .bind(clean(key).into_owned())
        .execute(p)
        .await
        .map(|_| ()))?;
    }
    Ok(())
}

/// The statement that inserts `n` rows of `index`, each `(key, crash id, debug-id,
/// recorded at[, module name])`; a row the index has already is left as it is.
fn insert_sql(index: Index, n: usize) -> String {
    let (head, width) = match index {
        Index::Missing => (
            "INSERT INTO missing_modules (build_id, crash_id, debug_id, recorded_at, \
             module_name)",
            5,
        ),
        Index::Partial => (
            "INSERT INTO breakpad_modules (build_id, crash_id, debug_id, recorded_at)",
            4,
        ),
    };
    let mut sql = format!("{head} VALUES ");
    for i in 0..n {
        let at = 1 + i * width;
        sql.push_str(if i == 0 { "(" } else { ", (" });
        for j in 0..width {
            let _ = write!(sql, "{}${}", if j == 0 { "" } else { ", " }, at + j);
        }
        sql.push(')');
    }
    sql.push_str(" ON CONFLICT (build_id, crash_id) DO NOTHING");
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_follow_the_rows() {
        assert_eq!(
            insert_sql(Index::Partial, 2),
            "INSERT INTO breakpad_modules (build_id, crash_id, debug_id, recorded_at) \
             VALUES ($1, $2, $3, $4), ($5, $6, $7, $8) ON CONFLICT (build_id, crash_id) \
             DO NOTHING"
        );
        assert!(insert_sql(Index::Missing, 1).contains("VALUES ($1, $2, $3, $4, $5) ON"));
    }
}
