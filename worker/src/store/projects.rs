//! The `projects` table (migration 0023): the names crashes are filed under. A project is
//! registered when a token or a quota names it at start, and exists for good; `default`
//! holds what a single-space installation had.

use super::{now_ms, Db, StoreError};

/// Longest project name, bytes.
pub const MAX_NAME_BYTES: usize = 64;

/// Whether `name` can name a project: 1 to 64 of `a-z`, `0-9`, `-`, `_`, `.`, not
/// starting with a dot (so that it is safe in a URL, a header and a file name).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
}

/// Registers each of `names` that is not registered yet.
pub async fn register(db: &Db, names: &[String]) -> Result<(), StoreError> {
    let sql = "INSERT INTO projects (name, created_at) VALUES ($1, $2) \
               ON CONFLICT (name) DO NOTHING";
    for name in names {
        crate::on_pool!(db, p => sqlx::query(sql)
            .bind(name).bind(now_ms()).execute(p).await.map(|_| ()))?;
    }
    Ok(())
}

/// Every registered project, by name.
pub async fn list(db: &Db) -> Result<Vec<String>, StoreError> {
    let sql = "SELECT name FROM projects ORDER BY name";
    Ok(crate::on_pool!(db, p => sqlx::query_scalar::<_, String>(sql).fetch_all(p).await)?)
}

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn names_are_plain() {
        for ok in ["default", "team-a", "a_b.c", "x1"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", ".hidden", "Team", "a/b", "a b", "é", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
