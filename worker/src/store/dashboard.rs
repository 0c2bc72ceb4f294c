//! Queries of the dashboard: crash groups (one per project and signature), their daily
//! counts and products, failed jobs, and re-queuing one crash.
//!
//! Groups belong to a project (migration 0026): every group query takes the project it
//! reads (none: every project, each group still its project's own row), and every table
//! below is keyed project first.
//!
//! Groups are read from aggregate rows that triggers keep in step with the crashes table
//! (migrations 0006 and 0021), so that no page aggregates crashes: `crash_groups` (one row
//! per signature) serves the unfiltered page as a keyset walk of the index of the chosen
//! sort order; a time range or a product reads each group's running counts
//! (`crash_group_running`) at the window's two ends, a handful of index lookups per group
//! whatever the number of crashes and days, and, most crashes first, only for the groups
//! whose all-time count can put them on the page ([`bounded`]); a version is a scope of
//! running counts too (migration 0037), a product and a version together sum the group's
//! `crash_group_days` rows (one per signature, UTC day, product and version); the
//! analysis-kind filter tests each group's `crash_group_kinds` rows. Time filters
//! therefore have day granularity. A group's products and versions are its
//! `project_group_versions` rows (migrations 0035 and 0026). Filter SQL is assembled from fixed
//! fragments only; every value is a bound parameter.

use super::conditions::{Conditions, Value};
use super::{Db, StoreError};

const DAY_MS: i64 = 86_400_000;

/// One crash group: every crash of a project with the same signature.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Group {
    pub project: String,
    pub signature: String,
    pub count: i64,
    pub first_seen: i64,
    pub last_seen: i64,
}

/// The order of the groups page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GroupSort {
    /// Most crashes first (or fewest, ascending).
    #[default]
    Count,
    FirstSeen,
    LastSeen,
    /// Alphabetical (byte order).
    Signature,
}

impl GroupSort {
    /// The name used in URLs: `count`, `first_seen`, `last_seen`, `signature`.
    pub fn name(self) -> &'static str {
        match self {
            GroupSort::Count => "count",
            GroupSort::FirstSeen => "first_seen",
            GroupSort::LastSeen => "last_seen",
            GroupSort::Signature => "signature",
        }
    }

    /// Parses [`GroupSort::name`].
    pub fn parse(s: &str) -> Option<GroupSort> {
        [
            GroupSort::Count,
            GroupSort::FirstSeen,
            GroupSort::LastSeen,
            GroupSort::Signature,
        ]
        .into_iter()
        .find(|g| g.name() == s)
    }

    /// The natural direction: descending for numbers (biggest, newest first), ascending
    /// for signatures.
    pub fn default_descending(self) -> bool {
        self != GroupSort::Signature
    }

    /// The sort key of `g` (0 for [`GroupSort::Signature`], whose key is the signature).
    pub fn key(self, g: &Group) -> i64 {
        match self {
            GroupSort::Count => g.count,
            GroupSort::FirstSeen => g.first_seen,
            GroupSort::LastSeen => g.last_seen,
            GroupSort::Signature => 0,
        }
    }

    /// The column holding the key; a fixed identifier, never input.
    fn column(self) -> Option<&'static str> {
        match self {
            GroupSort::Count => Some("count"),
            GroupSort::FirstSeen => Some("first_seen"),
            GroupSort::LastSeen => Some("last_seen"),
            GroupSort::Signature => None,
        }
    }
}

/// Filters, order and keyset position of the groups page.
#[derive(Debug, Clone, Default)]
pub struct GroupQuery {
    /// The project whose groups are read; none: every project's.
    pub project: Option<String>,
    /// Inclusive lower bound on `received_at`, rounded down to its UTC day.
    pub since: Option<i64>,
    /// Exclusive upper bound on `received_at`, rounded up to a UTC day.
    pub until: Option<i64>,
    pub product: Option<String>,
    pub version: Option<String>,
    /// Only groups with a crash whose analysis is of this kind (`null-pointer`, …) in the
    /// window the other fields set.
    pub kind: Option<String>,
    pub sort: GroupSort,
    pub descending: bool,
    /// Continue after the group with this (sort key, signature): see [`GroupSort::key`].
    pub after: Option<(i64, String)>,
    /// With every project's groups (no `project`): the project of the `after` group,
    /// which breaks ties between projects' groups of one signature.
    pub after_project: Option<String>,
    pub limit: i64,
}

/// The page's window in whole UTC days: `[since, until)`, either side open.
fn window_days(q: &GroupQuery) -> (Option<i64>, Option<i64>) {
    let since = q.since.map(|t| t.div_euclid(DAY_MS));
    // Exclusive: a bound inside a day keeps that day.
    let until = q
        .until
        .map(|t| t.div_euclid(DAY_MS) + i64::from(t.rem_euclid(DAY_MS) != 0));
    (since, until)
}

/// The page's window as conditions on rows with `day`, `product` and `version` columns
/// (`alias.` before each), with their values.
fn window_conditions(c: &mut Conditions, q: &GroupQuery, alias: &str) -> Vec<String> {
    let (since, until) = window_days(q);
    let mut w = Vec::new();
    if let Some(p) = &q.project {
        w.push(format!(
            "{alias}project = {}",
            c.arg(Value::Text(p.clone()))
        ));
    }
    if let Some(d) = since {
        w.push(format!("{alias}day >= {}", c.arg(Value::Int(d))));
    }
    if let Some(d) = until {
        w.push(format!("{alias}day < {}", c.arg(Value::Int(d))));
    }
    if let Some(p) = &q.product {
        w.push(format!(
            "{alias}product = {}",
            c.arg(Value::Text(p.clone()))
        ));
    }
    if let Some(v) = &q.version {
        w.push(format!(
            "{alias}version = {}",
            c.arg(Value::Text(v.clone()))
        ));
    }
    w
}

/// The groups of the page's window (of the page's project, if any), as rows (project,
/// signature, count, first_seen, last_seen):
/// - no window: the all-time rows (`crash_groups`);
/// - days and perhaps a product or a version: per group, its running counts
///   (`crash_group_running`, migration 0021; a version's scope, 0037) read at the window's
///   ends (one index lookup per group for the page's usual window, "the last N days": the
///   all-time count minus the running count before it), whatever the number of crashes
///   and days;
/// - a product and a version: the sum of the group's day rows in the window
///   (`crash_group_days`).
///
/// With running counts, the first and last seen that the order does not need are left
/// for the page's rows: [`Rows::late`]. Without an end, a product or a version, a group's last seen
/// in the window is its all-time last seen (`crash_groups.last_seen`: a window that
/// reaches today ends where the group does), read from its row, not its running counts.
struct Rows {
    sql: String,
    /// (first_seen, last_seen) of a page row `p`, when `sql` leaves them out.
    late: Option<(String, String)>,
    /// With running counts: a group's count in the window, as an expression of its
    /// `crash_groups` row `g` (see [`bounded`]).
    count: Option<String>,
    /// With running counts: the columns of `sql` (project, signature, count, first_seen,
    /// last_seen) as expressions of a `crash_groups` row `g`, for [`bounded`] and
    /// [`streamed`].
    columns: String,
    /// With running counts and a project: the condition on `g` that keeps its groups.
    only: Option<String>,
}

/// The running counts' scope of the page (migrations 0021, 0037): a product's, else a
/// version's, else every crash's ('').
fn running_scope(q: &GroupQuery) -> String {
    match (&q.product, &q.version) {
        (Some(p), _) => format!("p:{p}"),
        (None, Some(v)) => format!("v:{v}"),
        (None, None) => String::new(),
    }
}

fn window_rows(c: &mut Conditions, q: &GroupQuery) -> Rows {
    let early = |sql: String| Rows {
        sql,
        late: None,
        count: None,
        columns: String::new(),
        only: None,
    };
    if q.since.is_none() && q.until.is_none() && q.product.is_none() && q.version.is_none() {
        let only = match &q.project {
            Some(p) => format!(" WHERE project = {}", c.arg(Value::Text(p.clone()))),
            None => String::new(),
        };
        return early(format!(
            "SELECT project, signature, count, first_seen, last_seen FROM crash_groups{only}"
        ));
    }
    if q.version.is_some() && q.product.is_some() {
        let w = window_conditions(c, q, "");
        return early(format!(
            "SELECT project, signature, CAST(SUM(count) AS BIGINT) AS count, \
             MIN(first_seen) AS first_seen, MAX(last_seen) AS last_seen \
             FROM crash_group_days WHERE {} GROUP BY project, signature",
            w.join(" AND ")
        ));
    }
    let only = q
        .project
        .as_ref()
        .map(|p| format!("g.project = {}", c.arg(Value::Text(p.clone()))));
    let scope = running_scope(q);
    // the all-time rows serve a window open at its end only in the scope of every crash
    let unscoped = scope.is_empty();
    let scope = c.arg(Value::Text(scope));
    let (since, until) = window_days(q);
    let since = since.map(|d| c.arg(Value::Int(d)));
    let until = until.map(|d| c.arg(Value::Int(d)));
    // the one row of group `alias` nearest to a bound
    let row = |alias: &str, what: &str, bound: Option<String>, order: &str| {
        format!(
            "(SELECT r.{what} FROM crash_group_running r WHERE r.project = {alias}.project \
             AND r.scope = {scope} AND r.signature = {alias}.signature{} \
             ORDER BY r.day {order} LIMIT 1)",
            bound.map(|b| format!(" AND r.day {b}")).unwrap_or_default()
        )
    };
    let below = |b: &Option<String>| b.as_ref().map(|b| format!("< {b}"));
    let mut count = match (&until, unscoped) {
        (None, true) => String::from("g.count"),
        _ => format!(
            "COALESCE({}, 0)",
            row("g", "running", below(&until), "DESC")
        ),
    };
    if since.is_some() {
        count.push_str(&format!(
            " - COALESCE({}, 0)",
            row("g", "running", below(&since), "DESC")
        ));
    }
    let first = |alias: &str| {
        let from = since.as_ref().map(|s| format!(">= {s}"));
        row(alias, "first_seen", from, "ASC")
    };
    // the group's own last seen, when the window reaches today in every crash's scope
    let own_last = until.is_none() && unscoped;
    let early_first = match q.sort {
        GroupSort::FirstSeen => first("g"),
        _ => String::from("0"),
    };
    let early_last = match q.sort {
        _ if own_last => String::from("g.last_seen"),
        GroupSort::LastSeen => row("g", "last_seen", below(&until), "DESC"),
        _ => String::from("0"),
    };
    let columns = format!(
        "g.project, g.signature, {count} AS count, {early_first} AS first_seen, \
         {early_last} AS last_seen"
    );
    let late_first = if q.sort == GroupSort::FirstSeen {
        "p.first_seen".into()
    } else {
        first("p")
    };
    let late_last = if q.sort == GroupSort::LastSeen || own_last {
        "p.last_seen".into()
    } else {
        row("p", "last_seen", below(&until), "DESC")
    };
    Rows {
        sql: format!(
            "SELECT {columns} FROM crash_groups g{}",
            only.as_ref()
                .map(|o| format!(" WHERE {o}"))
                .unwrap_or_default()
        ),
        count: Some(count),
        late: Some((late_first, late_last)),
        columns,
        only,
    }
}

/// Groups whose all-time count reaches this many of the page's rows are read first, to
/// bound the others (see [`bounded`]).
const CANDIDATES: i64 = 200;

/// The page's most crashes first in a window ([`Rows::count`]): the common table
/// expressions `c` and `t` and the rows `w` the page is chosen from, counting only the
/// groups that can be on the page.
///
/// A group's count in a window is at most its all-time count (`crash_groups.count`).
/// `c` counts the window for the groups of largest all-time count (at most
/// [`CANDIDATES`]); `t` is the window count of the page's `limit`-th row among them, with
/// the page's conditions (`filter`: the cursor; `kind`: a [`kind_test`], made as the
/// candidates come out of their order, as on the page): a subset of the groups the
/// page chooses from, so the page's own last row has at least `t` crashes in the window,
/// and so does every row of the page — whose all-time count is then at least `t`. `w` is
/// `c` and the other groups whose all-time count reaches `t`, counted then: at a million
/// crashes of 5,000 signatures, the 200 and 29 more for 30 days, none more for 90.
/// Each candidate is counted once (`t` and `w` read `c`'s counts; a candidate was
/// counted three times, for `t`'s filter, for its order and for `w`: with the page's
/// late first and last seen, 729 running-count lookups for the 30-day page, now 279).
/// Fewer such rows, or a window where the largest groups have no crash: `t` is 0, every
/// group is counted, as before.
fn bounded(
    db: &Db,
    c: &mut Conditions,
    q: &GroupQuery,
    rows: &Rows,
    filter: &str,
    kind: Option<&str>,
) -> (String, String) {
    let only = rows
        .only
        .as_ref()
        .map(|o| format!(" WHERE {o}"))
        .unwrap_or_default();
    let candidates = c.arg(Value::Int(CANDIDATES.max(q.limit)));
    let offset = c.arg(Value::Int((q.limit - 1).max(0)));
    let columns = &rows.columns;
    // the kind tested as the candidates come out of their order, as on the page
    let mut t = format!(
        "SELECT project, signature, count, first_seen, last_seen FROM c g{filter} \
         ORDER BY g.count DESC"
    );
    if let Some(test) = kind {
        t = of_kind(db, t, test, "g.count DESC");
    }
    let ctes = format!(
        "c AS MATERIALIZED (SELECT {columns} FROM (SELECT g.project, g.signature, g.count, \
         g.first_seen, g.last_seen FROM crash_groups g{only} ORDER BY g.count DESC \
         LIMIT {candidates}) g), t AS MATERIALIZED ({t} LIMIT 1 OFFSET {offset}), "
    );
    // the running-count rows have a WHERE exactly when they are one project's
    let and = if rows.only.is_some() { "AND" } else { "WHERE" };
    let w = format!(
        "SELECT project, signature, count, first_seen, last_seen FROM c UNION ALL {} \
         {and} g.count >= COALESCE((SELECT count FROM t), 0) AND NOT EXISTS \
         (SELECT 1 FROM c WHERE c.project = g.project AND c.signature = g.signature)",
        rows.sql
    );
    (ctes, w)
}

/// Whether the page of `q` can walk the groups in its order (an index of
/// `crash_groups`) and count only the groups it passes: its key is a group's own column
/// — the signature, or the last seen of a window that reaches today in every product and version
/// ([`Rows`]) — so that the walk stops at the page's last row (50 running-count lookups
/// for a page of 50 where every group was counted, 5,000 at 5,000 signatures: 510 ms and
/// 114 ms on PostgreSQL at a million crashes). A window where few groups have crashes
/// passes more groups, at most every group, as before.
fn streams(q: &GroupQuery) -> bool {
    match q.sort {
        GroupSort::Signature => true,
        GroupSort::LastSeen => q.until.is_none() && q.product.is_none() && q.version.is_none(),
        GroupSort::Count | GroupSort::FirstSeen => false,
    }
}

/// The page of a [`streams`] order: the groups of `crash_groups` in the page's order
/// with a crash in the window ([`Rows::count`] above 0), after the cursor, of the kind,
/// up to the page's `LIMIT` (the late first and last seen are read for its rows after).
/// With the last seen first, a group with a crash in the window was last seen at or
/// after the window's first day: that range of the index is walked.
fn streamed(c: &mut Conditions, q: &GroupQuery, rows: &Rows, cmp: &str, order: &str) -> String {
    if let Some(only) = &rows.only {
        c.push(only.clone());
    }
    if let (GroupSort::LastSeen, Some(since)) = (q.sort, q.since) {
        let from = c.arg(Value::Int(since.div_euclid(DAY_MS) * DAY_MS));
        c.push(format!("g.last_seen >= {from}"));
    }
    if let Some(count) = &rows.count {
        c.push(format!("{count} > 0"));
    }
    if let Some(after) = after_condition(c, q, cmp) {
        c.push(after);
    }
    if let Some(kind) = &q.kind {
        let test = kind_test(c, q, kind);
        c.push(test);
    }
    let limit = c.arg(Value::Int(q.limit));
    format!(
        "SELECT {} FROM crash_groups g{} ORDER BY {order} LIMIT {limit}",
        rows.columns,
        c.where_clause()
    )
}

/// The groups of `sorted` (the page's rows, in the page's `order`) that pass `test` (a
/// [`kind_test`]), in the same order, for the page's `LIMIT`.
///
/// The test is one index seek per group, made on the rows as they come out of the sort, so that a page stops at its
/// last row: a kind most groups have costs the page's 50 seeks, not one per group of the
/// window (at a million crashes SQLite spent as long on those 5,000 seeks as on the
/// window's counts; PostgreSQL twice as long). A rare kind still tests every group. The
/// fence (`OFFSET 0`) keeps the test out of the sorted subquery, where both databases
/// would otherwise move it, before the sort. SQLite reads the subquery's rows in its
/// order; PostgreSQL is given the order again, which its sorted subquery already has.
fn of_kind(db: &Db, sorted: String, test: &str, order: &str) -> String {
    let (fence, again) = match db.backend() {
        super::Backend::Sqlite(_) => (" LIMIT -1 OFFSET 0", String::new()),
        super::Backend::Postgres(_) => (" OFFSET 0", format!(" ORDER BY {order}")),
    };
    format!(
        "SELECT project, signature, count, first_seen, last_seen FROM ({sorted}{fence}) g \
         WHERE {test}{again}"
    )
}

/// Whether group `g` has a crash of analysis kind `kind` in the page's window: its
/// `crash_group_kinds` rows (migration 0021), one index seek.
fn kind_test(c: &mut Conditions, q: &GroupQuery, kind: &str) -> String {
    let kind = c.arg(Value::Text(kind.to_string()));
    let within: String = window_conditions(c, q, "k.")
        .iter()
        .map(|w| format!(" AND {w}"))
        .collect();
    format!(
        "EXISTS (SELECT 1 FROM crash_group_kinds k WHERE k.project = g.project \
         AND k.kind = {kind} AND k.signature = g.signature{within})"
    )
}

/// The keyset cursor as a condition on rows `g`: after the cursor's (sort key,
/// signature[, project]) in the page's direction (`cmp`).
fn after_condition(c: &mut Conditions, q: &GroupQuery, cmp: &str) -> Option<String> {
    let (key, sig) = q.after.as_ref()?;
    let mut cols = vec!["g.signature".to_string()];
    let mut vals = vec![c.arg(Value::Text(sig.clone()))];
    if let Some(col) = q.sort.column() {
        cols.insert(0, format!("g.{col}"));
        vals.insert(0, c.arg(Value::Int(*key)));
    }
    let every = q.project.is_none();
    if let Some(p) = q.after_project.as_ref().filter(|_| every) {
        cols.push("g.project".into());
        vals.push(c.arg(Value::Text(p.clone())));
    }
    Some(format!("({}) {cmp} ({})", cols.join(", "), vals.join(", ")))
}

/// The page's order on rows with the alias `g` (`g.`, or none): the sort key, then the
/// signature, then (every project's groups) the project, in one direction.
fn order_by(q: &GroupQuery, g: &str) -> String {
    let dir = if q.descending { "DESC" } else { "ASC" };
    let tie = if q.project.is_none() {
        format!(", {g}project {dir}")
    } else {
        String::new()
    };
    match q.sort.column() {
        Some(col) => format!("{g}{col} {dir}, {g}signature {dir}{tie}"),
        None => format!("{g}signature {dir}{tie}"),
    }
}

/// The page chosen from the rows of `from` (the window's rows, or running counts
/// materialized as `w`): those with a crash in the window when counted late, after the
/// cursor, of the kind, in the page's order, up to its `LIMIT`.
fn chosen(
    db: &Db,
    c: &mut Conditions,
    q: &GroupQuery,
    from: &str,
    counted: bool,
    kind: Option<&str>,
) -> String {
    let cmp = if q.descending { "<" } else { ">" };
    let mut sql = format!("SELECT project, signature, count, first_seen, last_seen FROM {from}");
    if counted {
        c.push("g.count > 0");
    }
    if let Some(after) = after_condition(c, q, cmp) {
        c.push(after);
    }
    sql.push_str(&c.where_clause());
    sql.push_str(&format!(" ORDER BY {}", order_by(q, "g.")));
    if let Some(test) = kind {
        sql = of_kind(db, sql, test, &order_by(q, "g."));
    }
    let limit = c.arg(Value::Int(q.limit));
    sql.push_str(&format!(" LIMIT {limit}"));
    sql
}

/// One page of crash groups in the order of `q.sort` (ties broken by signature, then
/// project, in the same direction).
pub async fn groups(db: &Db, q: &GroupQuery) -> Result<Vec<Group>, StoreError> {
    // text filters are cleaned as the stored text was, so that they find it
    use super::text::clean_opt;
    let q = &GroupQuery {
        product: clean_opt(q.product.as_deref()),
        version: clean_opt(q.version.as_deref()),
        kind: clean_opt(q.kind.as_deref()),
        after: q
            .after
            .as_ref()
            .map(|(k, s)| (*k, super::text::clean(s).into_owned())),
        ..q.clone()
    };
    let mut c = Conditions::new();
    let rows = window_rows(&mut c, q);
    let sql = match &rows.late {
        None => {
            let kind = q.kind.as_ref().map(|k| kind_test(&mut c, q, k));
            let from = format!("({}) g", rows.sql);
            chosen(db, &mut c, q, &from, false, kind.as_deref())
        }
        Some((first, last)) => {
            // running counts: each group's count computed once (a materialized table,
            // not an expression the planner copies into the filter and the order), then
            // the page, then the first and last seen of its rows
            let (ctes, page) = if streams(q) {
                let cmp = if q.descending { "<" } else { ">" };
                let page = streamed(&mut c, q, &rows, cmp, &order_by(q, "g."));
                (String::new(), page)
            } else {
                let kind = q.kind.as_ref().map(|k| kind_test(&mut c, q, k));
                let page = chosen(db, &mut c, q, "w g", true, kind.as_deref());
                let (mut ctes, mut w) = (String::new(), rows.sql.clone());
                if let (GroupSort::Count, true) = (q.sort, q.descending) {
                    // the page's conditions: those `chosen` set, and the kind
                    let filter = c.where_clause();
                    (ctes, w) = bounded(db, &mut c, q, &rows, &filter, kind.as_deref());
                }
                (format!("{ctes}w AS MATERIALIZED ({w}), "), page)
            };
            format!(
                "WITH {ctes}page AS MATERIALIZED ({page}) \
                 SELECT project, signature, count, first_seen, last_seen FROM (SELECT \
                 p.project, p.signature, p.count, {first} AS first_seen, {last} AS last_seen \
                 FROM page p) l ORDER BY {}",
                order_by(q, "")
            )
        }
    };
    Ok(crate::on_pool!(db, p => crate::bind_values!(
        sqlx::query_as::<_, Group>(sqlx::AssertSqlSafe(sql.as_str())), c.values())
        .fetch_all(p)
        .await)?)
}

/// Crashes of one group per (UTC day, product, version): the chart and the products
/// column of a group row. Reads the group's `crash_group_days` rows.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct GroupDay {
    /// Days since the Unix epoch (UTC).
    pub day: i64,
    pub product: Option<String>,
    pub version: Option<String>,
    pub count: i64,
}

/// Daily counts of one group (`signature` in `project`) for the UTC days that overlap
/// `[since, until)`.
pub async fn group_days(
    db: &Db,
    project: &str,
    signature: &str,
    since: i64,
    until: i64,
) -> Result<Vec<GroupDay>, StoreError> {
    let sql = "SELECT day, NULLIF(product, '') AS product, NULLIF(version, '') AS version, \
               count FROM crash_group_days WHERE project = $1 AND signature = $2 \
               AND day >= $3 AND day < $4 ORDER BY day, product, version";
    let signature = super::text::clean(signature);
    Ok(crate::on_pool!(db, p => sqlx::query_as::<_, GroupDay>(sql)
        .bind(project)
        .bind(&*signature)
        .bind(since.div_euclid(DAY_MS))
        .bind(last_day(until))
        .fetch_all(p)
        .await)?)
}

/// The day after the last UTC day that overlaps a window ending (exclusively) at `until`.
fn last_day(until: i64) -> i64 {
    until.div_euclid(DAY_MS) + i64::from(until.rem_euclid(DAY_MS) != 0)
}

/// The distinct products and versions seen for a group (`signature` in `project`; at
/// most `limit`), from its `project_group_versions` rows.
pub async fn group_products(
    db: &Db,
    project: &str,
    signature: &str,
    limit: i64,
) -> Result<Vec<(Option<String>, Option<String>)>, StoreError> {
    let sql = "SELECT NULLIF(product, ''), NULLIF(version, '') FROM project_group_versions \
               WHERE project = $1 AND signature = $2 AND (product <> '' OR version <> '') \
               ORDER BY 1, 2 LIMIT $3";
    let signature = super::text::clean(signature);
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, (Option<String>, Option<String>)>(sql)
        .bind(project)
        .bind(&*signature)
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
    let id = super::text::clean(id);
    let id = &*id;
    let sql = format!(
        "UPDATE crashes SET status = 'pending', attempts = 0, lease_until = NULL, \
         leased_by = NULL, error = NULL, priority = {} WHERE id = $1 \
         AND status IN ('done', 'failed') AND dump_gone IS NULL",
        super::crashes::REQUEUED
    );
    let n = crate::on_pool!(db, p => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
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
    let id = super::text::clean(id);
    let id = &*id;
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, (Option<String>, Option<String>)>(sql)
        .bind(id)
        .fetch_optional(p)
        .await)?,
    )
}

/// One group's row of [`groups_days`].
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SignatureDay {
    pub project: String,
    pub signature: String,
    #[sqlx(flatten)]
    pub day: GroupDay,
}

/// A group: its project and its signature.
pub type GroupKey = (String, String);

/// `(project = $i AND signature IN ($i+1, …)) OR …` for `groups`, one term per project,
/// placeholders from `$first`, and the binds in that order. One term per project, not
/// per group, so that a page of one project's groups is one index range per signature
/// within the project (SQLite reads `(project = ? AND signature = ?) OR …` of one project
/// as a range of the whole project).
fn group_keys(first: usize, groups: &[GroupKey]) -> (String, Vec<String>) {
    let mut by_project: Vec<(&str, Vec<String>)> = Vec::new();
    for (p, sig) in groups {
        let sig = super::text::clean(sig).into_owned();
        match by_project.iter_mut().find(|(q, _)| q == p) {
            Some((_, sigs)) => sigs.push(sig),
            None => by_project.push((p, vec![sig])),
        }
    }
    let mut binds = Vec::with_capacity(groups.len() + by_project.len());
    let mut terms = Vec::with_capacity(by_project.len());
    for (p, sigs) in by_project {
        let at = first + binds.len();
        let list = (1..=sigs.len())
            .map(|i| format!("${}", at + i))
            .collect::<Vec<_>>()
            .join(", ");
        terms.push(format!("(project = ${at} AND signature IN ({list}))"));
        binds.push(p.to_string());
        binds.extend(sigs);
    }
    (terms.join(" OR "), binds)
}

/// [`group_days`] of several groups in one query (a page of groups and their charts),
/// in no particular order.
pub async fn groups_days(
    db: &Db,
    groups: &[GroupKey],
    since: i64,
    until: i64,
) -> Result<Vec<SignatureDay>, StoreError> {
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let (keys, binds) = group_keys(1, groups);
    let n = binds.len();
    let sql = format!(
        "SELECT project, signature, day, NULLIF(product, '') AS product, \
         NULLIF(version, '') AS version, count FROM crash_group_days \
         WHERE ({keys}) AND day >= ${} AND day < ${}",
        n + 1,
        n + 2
    );
    Ok(crate::on_pool!(db, p => {
        let mut q = sqlx::query_as::<_, SignatureDay>(sqlx::AssertSqlSafe(sql.as_str()));
        for b in &binds {
            q = q.bind(b);
        }
        q.bind(since.div_euclid(DAY_MS)).bind(last_day(until)).fetch_all(p).await
    })?)
}

/// [`group_products`] of several groups in one query: (project, signature, product,
/// version), at most `limit` per group, in each group's order. Reads the groups' rows of
/// `project_group_versions` (migrations 0035 and 0026: one per product and version), not
/// their day rows.
pub async fn groups_products(
    db: &Db,
    groups: &[GroupKey],
    limit: i64,
) -> Result<Vec<(String, String, Option<String>, Option<String>)>, StoreError> {
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let (keys, binds) = group_keys(1, groups);
    let sql = format!(
        "SELECT project, signature, p, v FROM (SELECT project, signature, p, v, ROW_NUMBER() \
         OVER (PARTITION BY project, signature ORDER BY p, v) AS n FROM (SELECT project, \
         signature, NULLIF(product, '') AS p, NULLIF(version, '') AS v \
         FROM project_group_versions WHERE ({keys}) AND (product <> '' OR version <> '')) d) r \
         WHERE n <= ${} ORDER BY project, signature, p, v",
        binds.len() + 1
    );
    Ok(crate::on_pool!(db, p => {
        let mut q = sqlx::query_as::<_, (String, String, Option<String>, Option<String>)>(
            sqlx::AssertSqlSafe(sql.as_str()),
        );
        for b in &binds {
            q = q.bind(b);
        }
        q.bind(limit).fetch_all(p).await
    })?)
}
