//! Which crashes a deletion by filter removes (`POST /api/v1/crashes/delete`, issue 41:
//! a privacy request, "every crash whose annotation `user_id` is X"): the crashes of any
//! state that a reprocess [`Filter`] matches, counted for a dry run and listed a batch at
//! a time in primary-key order (a keyset cursor: the ids are never all in memory). Each
//! one is then deleted on its own by [`super::delete::crash`].

use super::conditions::{Conditions, Value};
use super::reprocess::Filter;
use super::{Db, StoreError};

/// How many crashes `filter` matches.
pub async fn count(db: &Db, filter: &Filter) -> Result<i64, StoreError> {
    let mut c = Conditions::new();
    filter.push_conditions(&mut c, db);
    super::conditions::count_crashes(db, &c).await
}

/// The ids of at most `limit` crashes `filter` matches, after `after` in id order.
pub async fn ids_after(
    db: &Db,
    filter: &Filter,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<String>, StoreError> {
    let mut c = Conditions::new();
    filter.push_conditions(&mut c, db);
    c.push_with(after.map(|a| Value::Text(a.to_string())), |p| {
        format!("id > {p}")
    });
    let sql = format!(
        "SELECT id FROM crashes{} ORDER BY id LIMIT ${}",
        c.where_clause(),
        c.values().len() + 1
    );
    let ids: Vec<(String,)> = crate::on_pool!(db, p => crate::bind_values!(
        sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str())), c.values())
        .bind(limit.max(1))
        .fetch_all(p).await)?;
    Ok(ids.into_iter().map(|(id,)| id).collect())
}
