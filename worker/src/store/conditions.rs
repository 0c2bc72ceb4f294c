//! A `WHERE` clause made of only the filters a request sets, with numbered placeholders
//! and the values they bind.
//!
//! Written as one static statement, an optional filter reads `($1 IS NULL OR signature =
//! $1)`: both databases then plan the statement without knowing which filters are set,
//! and neither can use the index of the one that is (a store of 100,000 crashes listed
//! the 50 newest of a rare signature in 0.75 s by walking the newest-first index). Here a
//! filter that is not set is not in the statement at all.

/// A value a condition binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Text(String),
    Int(i64),
}

/// The conditions of one statement, joined by `AND`, and their values in placeholder
/// order.
#[derive(Debug, Default)]
pub struct Conditions {
    clauses: Vec<String>,
    values: Vec<Value>,
}

impl Conditions {
    /// No condition yet.
    pub fn new() -> Conditions {
        Conditions::default()
    }

    /// A placeholder (`$N`) binding `value`, for a clause being written.
    pub fn arg(&mut self, value: Value) -> String {
        self.values.push(value);
        format!("${}", self.values.len())
    }

    /// Adds `clause` (whose placeholders came from [`Conditions::arg`]).
    pub fn push(&mut self, clause: impl Into<String>) {
        self.clauses.push(clause.into());
    }

    /// Adds `format(placeholder)` binding `value`, when there is a value.
    pub fn push_with(&mut self, value: Option<Value>, clause: impl FnOnce(&str) -> String) {
        if let Some(v) = value {
            let p = self.arg(v);
            self.push(clause(&p));
        }
    }

    /// `WHERE a AND b …`, or nothing when there is no condition.
    pub fn where_clause(&self) -> String {
        if self.clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.clauses.join(" AND "))
        }
    }

    /// The values, in placeholder order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }
}

/// How many crashes `c`'s conditions match (a statement on `crashes`).
pub(crate) async fn count_crashes(
    db: &super::Db,
    c: &Conditions,
) -> Result<i64, super::StoreError> {
    let sql = format!("SELECT COUNT(*) FROM crashes{}", c.where_clause());
    let (n,): (i64,) = crate::on_pool!(db, p => crate::bind_values!(
        sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str())), c.values())
        .fetch_one(p).await)?;
    Ok(n)
}

/// Binds every value of `conditions` to a `sqlx` query, in order (on either pool).
#[macro_export]
macro_rules! bind_values {
    ($query:expr, $values:expr) => {{
        let mut q = $query;
        for v in $values {
            q = match v {
                $crate::store::conditions::Value::Text(t) => q.bind(t.clone()),
                $crate::store::conditions::Value::Int(i) => q.bind(*i),
            };
        }
        q
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_set_filters_are_in_the_clause() {
        let mut c = Conditions::new();
        c.push_with(None, |p| format!("signature = {p}"));
        c.push_with(Some(Value::Int(5)), |p| format!("received_at >= {p}"));
        c.push("status = 'done'");
        c.push_with(Some(Value::Text("x".into())), |p| format!("product = {p}"));
        assert_eq!(
            c.where_clause(),
            " WHERE received_at >= $1 AND status = 'done' AND product = $2"
        );
        assert_eq!(c.values(), &[Value::Int(5), Value::Text("x".into())]);
        assert_eq!(Conditions::new().where_clause(), "");
    }
}
