//! Queries of the dashboard: crash groups (one per signature), their daily counts and
//! products, failed jobs, and re-queuing one crash.
//!
//! Every listing is a keyset page read through an index of migration 0002: the groups
//! page walks `crashes_groups (signature, received_at)` (or `crashes_product_groups`
//! within a product) from the last signature of the previous page and stops after one
//! page of groups, so a page never scans the whole table. Filter SQL is assembled from
//! fixed fragments only; every value is a bound parameter.

use super::{Db, StoreError};

/// One crash group: every processed crash with the same signature.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Group {
    pub signature: String,
    pub count: i64,
    pub first_seen: i64,
    pub last_seen: i64,
}

/// Filters and keyset position of the groups page.
#[derive(Debug, Clone, Default)]
pub struct GroupQuery {
    /// Inclusive lower bound on `received_at`.
    pub since: Option<i64>,
    /// Exclusive upper bound on `received_at`.
    pub until: Option<i64>,
    pub product: Option<String>,
    pub version: Option<String>,
    /// Continue after this signature (signature order).
    pub after: Option<String>,
    pub limit: i64,
}

/// One page of crash groups in signature order.
pub async fn groups(db: &Db, q: &GroupQuery) -> Result<Vec<Group>, StoreError> {
    // `signature > $1` with '' for the first page keeps the condition a plain index range
    // (an `$1 IS NULL OR …` would hide it from the planner).
    let mut sql = String::from(
        "SELECT signature, COUNT(*) AS count, MIN(received_at) AS first_seen, \
         MAX(received_at) AS last_seen FROM crashes WHERE signature > $1",
    );
    let mut n = 1;
    let mut next = |sql: &mut String, frag: &str| {
        n += 1;
        sql.push_str(&frag.replace('?', &format!("${n}")));
    };
    if q.since.is_some() {
        next(&mut sql, " AND received_at >= ?");
    }
    if q.until.is_some() {
        next(&mut sql, " AND received_at < ?");
    }
    if q.product.is_some() {
        next(&mut sql, " AND product = ?");
    }
    if q.version.is_some() {
        next(&mut sql, " AND version = ?");
    }
    next(&mut sql, " GROUP BY signature ORDER BY signature LIMIT ?");
    let after = q.after.clone().unwrap_or_default();
    Ok(crate::on_pool!(db, p => {
        let mut query = sqlx::query_as::<_, Group>(sqlx::AssertSqlSafe(sql.as_str())).bind(&after);
        if let Some(v) = q.since { query = query.bind(v); }
        if let Some(v) = q.until { query = query.bind(v); }
        if let Some(v) = &q.product { query = query.bind(v); }
        if let Some(v) = &q.version { query = query.bind(v); }
        query.bind(q.limit).fetch_all(p).await
    })?)
}

/// Crashes of one group per (UTC day, product, version) since `since`: the chart and the
/// products column of a group row. Reads the group's `crashes_groups` index range.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct GroupDay {
    /// Days since the Unix epoch (UTC).
    pub day: i64,
    pub product: Option<String>,
    pub version: Option<String>,
    pub count: i64,
}

/// Daily counts of one signature in `[since, until)`.
pub async fn group_days(
    db: &Db,
    signature: &str,
    since: i64,
    until: i64,
) -> Result<Vec<GroupDay>, StoreError> {
    let sql = "SELECT received_at / 86400000 AS day, product, version, COUNT(*) AS count \
               FROM crashes WHERE signature = $1 AND received_at >= $2 AND received_at < $3 \
               GROUP BY received_at / 86400000, product, version ORDER BY day";
    Ok(crate::on_pool!(db, p => sqlx::query_as::<_, GroupDay>(sql)
        .bind(signature)
        .bind(since)
        .bind(until)
        .fetch_all(p)
        .await)?)
}

/// The distinct products and versions seen for a signature (at most `limit`).
pub async fn group_products(
    db: &Db,
    signature: &str,
    limit: i64,
) -> Result<Vec<(Option<String>, Option<String>)>, StoreError> {
    let sql = "SELECT DISTINCT product, version FROM crashes WHERE signature = $1 \
               AND (product IS NOT NULL OR version IS NOT NULL) \
               ORDER BY product, version LIMIT $2";
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, (Option<String>, Option<String>)>(sql)
        .bind(signature)
        .bind(limit)
        .fetch_all(p)
        .await)?,
    )
}

/// A failed job and why.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Failure {
    pub id: String,
    pub received_at: i64,
    pub attempts: i32,
    pub error: Option<String>,
}

/// The newest failed jobs (index `crashes_queue (status, received_at)`).
pub async fn failures(db: &Db, limit: i64) -> Result<Vec<Failure>, StoreError> {
    let sql = "SELECT id, received_at, attempts, error FROM crashes WHERE status = 'failed' \
               ORDER BY received_at DESC LIMIT $1";
    Ok(crate::on_pool!(db, p => sqlx::query_as::<_, Failure>(sql)
        .bind(limit)
        .fetch_all(p)
        .await)?)
}

/// Puts one finished crash (done or failed) back in the queue with fresh attempts.
/// False when there is no such crash or it is already pending or being processed.
pub async fn requeue(db: &Db, id: &str) -> Result<bool, StoreError> {
    let sql = "UPDATE crashes SET status = 'pending', attempts = 0, lease_until = NULL, \
               leased_by = NULL, error = NULL WHERE id = $1 AND status IN ('done', 'failed')";
    let n = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(id)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

/// The product and version columns of one crash (filled from its annotations).
pub async fn product_of(
    db: &Db,
    id: &str,
) -> Result<Option<(Option<String>, Option<String>)>, StoreError> {
    let sql = "SELECT product, version FROM crashes WHERE id = $1";
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, (Option<String>, Option<String>)>(sql)
        .bind(id)
        .fetch_optional(p)
        .await)?,
    )
}
