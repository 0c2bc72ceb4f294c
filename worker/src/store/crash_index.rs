//! The index rows a stored report gives its crash, as statements of many rows each: the
//! search index (`crash_terms`, migration 0007) and the module index (`crash_build_ids`
//! and `crash_module_names`, migration 0021).
//!
//! [`super::crashes::finish_batch`] runs them in the transaction that stores the reports,
//! so a crash's index is replaced exactly when its report is (first processing and every
//! reprocessing). The statements are built here, apart from the transaction, so that
//! what a report indexes is one function's job; every value is a bound text parameter.

use std::borrow::Cow;
use std::collections::BTreeSet;

use super::crashes::StoredReport;
use super::search::{MODULE, TERMS_PER_STATEMENT};

/// One statement and its text values, in placeholder order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Statement<'a> {
    pub sql: String,
    pub binds: Vec<Cow<'a, str>>,
}

/// A crash whose report is stored: its id, its `received_at` (which the module index
/// keeps beside each name), its report, and whether it may have index rows to replace.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Indexed<'a> {
    pub id: &'a str,
    pub received_at: i64,
    pub report: &'a StoredReport,
    /// False only for a crash known to have had no report before this store: index rows
    /// are written with a report (here, and by migration 0021's fill from the reports),
    /// so it has none, and its deletes are left out. On PostgreSQL the three deletes were
    /// 2.2 ms of a 32-crash store's 21 ms, finding nothing for first reports (issue 40).
    pub replaces: bool,
}

/// Crashes whose old index rows one `DELETE` removes.
const CRASHES_PER_DELETE: usize = 500;

/// The statements that replace the index rows of each `(crash id, report)`: the old rows
/// deleted, every distinct term inserted once, then the links, build-ids and module
/// names, in statements of at most [`TERMS_PER_STATEMENT`] rows. `sqlite`: the deletes
/// name their index ([`delete_by_crash_sql`]), and the rows are read from their JSON
/// parameter by SQLite's functions ([`json_rows`]).
///
/// Each insert takes its rows as **one** parameter, a JSON array of rows: a statement of
/// a placeholder per value cost SQLite's writer more to bind than to run. sqlx binds a
/// `$N` parameter by asking SQLite its name, a walk of the statement's list of names, so
/// a statement of n values took time in n² to bind — the links of a batch of 32 crashes,
/// 1,248 values, a few milliseconds of the one writer's time for every batch (issue 40:
/// `sqlite3_bind_parameter_name` was 6–8 % of the server's CPU during a drain) — and the
/// statement's text changed with its row count, each count prepared anew. One parameter
/// binds at once, and the text, the same for every batch, is prepared once per connection.
pub(crate) fn statements<'a>(
    indexed: &[Indexed<'a>],
    sqlite: bool,
) -> Result<Vec<Statement<'a>>, serde_json::Error> {
    let mut out = Vec::new();
    let ids: Vec<&str> = indexed
        .iter()
        .filter(|c| c.replaces)
        .map(|c| c.id)
        .collect();
    for table in ["crash_terms", "crash_build_ids", "crash_module_names"] {
        for chunk in ids.chunks(CRASHES_PER_DELETE) {
            out.push(Statement {
                sql: delete_by_crash_sql(table, chunk.len(), sqlite),
                binds: chunk.iter().map(|id| Cow::Borrowed(*id)).collect(),
            });
        }
    }
    let terms: BTreeSet<&(&'static str, String)> =
        indexed.iter().flat_map(|c| &c.report.terms).collect();
    let terms: Vec<[&str; 2]> = terms.into_iter().map(|(k, t)| [*k, t.as_str()]).collect();
    let links: Vec<[&str; 3]> = indexed
        .iter()
        .flat_map(|c| {
            c.report
                .terms
                .iter()
                .map(move |(k, t)| [*k, t.as_str(), c.id])
        })
        .collect();
    let build_ids: Vec<[&str; 2]> = indexed
        .iter()
        .flat_map(|c| c.report.build_ids.iter().map(move |b| [b.as_str(), c.id]))
        .collect();
    let names: Vec<(&str, i64, &str)> = indexed
        .iter()
        .flat_map(|c| {
            c.report
                .terms
                .iter()
                .filter(|(k, _)| *k == MODULE)
                .map(move |(_, name)| (name.as_str(), c.received_at, c.id))
        })
        .collect();
    // SQLite needs a WHERE before an upsert's ON CONFLICT after a SELECT; the join is a
    // CROSS JOIN, which SQLite's planner keeps in its written order: the rows first, each
    // term looked up by its index (left to choose, it scanned `search_terms` and read the
    // JSON rows again for each term: a drain fell from 1,000 to 400 crashes a second)
    let term_rows = json_rows(sqlite, &["kind", "term"]);
    push_rows(
        &mut out,
        &terms,
        &format!(
            "INSERT INTO search_terms (kind, term) SELECT kind, term FROM ({term_rows}) AS v \
         WHERE true ON CONFLICT (kind, term) DO NOTHING"
        ),
    )?;
    let link_rows = json_rows(sqlite, &["kind", "term", "crash_id"]);
    push_rows(
        &mut out,
        &links,
        &format!(
            "INSERT INTO crash_terms (term_id, crash_id) SELECT s.id, v.crash_id \
         FROM ({link_rows}) AS v CROSS JOIN search_terms s \
         WHERE s.kind = v.kind AND s.term = v.term ON CONFLICT (term_id, crash_id) DO NOTHING"
        ),
    )?;
    let id_rows = json_rows(sqlite, &["build_id", "crash_id"]);
    push_rows(
        &mut out,
        &build_ids,
        &format!(
            "INSERT INTO crash_build_ids (build_id, crash_id) SELECT build_id, crash_id \
         FROM ({id_rows}) AS v WHERE true ON CONFLICT (build_id, crash_id) DO NOTHING"
        ),
    )?;
    // the crash's received_at comes with the rows, from the statement that stored its
    // report: joined to `crashes` for it, this insert took 8–25 ms of the writer's time a
    // batch, half of the batch's store
    let name_rows = json_rows(sqlite, &["name", "crash_at", "crash_id"]);
    push_rows(
        &mut out,
        &names,
        &format!(
            "INSERT INTO crash_module_names (name, crash_at, crash_id) \
         SELECT name, CAST(crash_at AS BIGINT), crash_id FROM ({name_rows}) AS v \
         WHERE true ON CONFLICT (name, crash_at, crash_id) DO NOTHING"
        ),
    )?;
    Ok(out)
}

/// Adds `sql`, whose one parameter is a JSON array of rows, once per
/// [`TERMS_PER_STATEMENT`] of `rows`.
fn push_rows<R: serde::Serialize>(
    out: &mut Vec<Statement<'_>>,
    rows: &[R],
    sql: &str,
) -> Result<(), serde_json::Error> {
    for chunk in rows.chunks(TERMS_PER_STATEMENT) {
        out.push(Statement {
            sql: sql.to_string(),
            binds: vec![Cow::Owned(serde_json::to_string(chunk)?)],
        });
    }
    Ok(())
}

/// A subquery of the rows of the JSON array of arrays bound as `$1`, each row's values
/// as the columns `names` in order, as text (a number's digits on PostgreSQL).
pub(crate) fn json_rows(sqlite: bool, names: &[&str]) -> String {
    let (each, row) = if sqlite {
        ("json_each($1)", "value")
    } else {
        ("json_array_elements(CAST($1 AS json)) AS e", "e")
    };
    let columns: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, name)| format!("{row} ->> {i} AS {name}"))
        .collect();
    format!("SELECT {} FROM {each}", columns.join(", "))
}

/// `DELETE FROM {table} WHERE crash_id IN ($1, …, $n)`, through the table's index of
/// crash ids (`{table}_crash`, as every per-crash table of the store names it). On SQLite
/// the statement names that index (`INDEXED BY`): its planner takes the statistics
/// `PRAGMA optimize` gathered when the server started, and of a store whose index tables
/// were small then (a few rows at the first crash) it chose to scan the table, a cost
/// that grew with every crash stored — a drain of 10,000 crashes slowed from 400 to 220 a
/// second, `DELETE FROM crash_terms` taking 1.2 then 3.8 ms a batch (issue 40).
pub(crate) fn delete_by_crash_sql(table: &str, n: usize, sqlite: bool) -> String {
    let indexed = if sqlite {
        format!(" INDEXED BY {table}_crash")
    } else {
        String::new()
    };
    format!(
        "DELETE FROM {table}{indexed} WHERE crash_id IN ({})",
        marks(n)
    )
}

/// `$1, $2, …, $n`.
fn marks(n: usize) -> String {
    let marks: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
    marks.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SQLite statements that index `r` as crash `c1`.
    fn statements_of(r: &StoredReport) -> Vec<Statement<'_>> {
        let c = Indexed {
            id: "c1",
            received_at: 7,
            report: r,
            replaces: true,
        };
        statements(&[c], true).expect("rows are JSON")
    }

    #[test]
    fn only_crashes_that_had_a_report_have_their_rows_deleted() {
        let r = StoredReport::from_json(r#"{"modules":[{"name":"/lib/libc.so.6"}]}"#.into(), None);
        let crash = |id, replaces| Indexed {
            id,
            received_at: 7,
            report: &r,
            replaces,
        };
        for sqlite in [true, false] {
            let s = statements(&[crash("new", false), crash("old", true)], sqlite)
                .expect("rows are JSON");
            let deletes: Vec<&Statement<'_>> =
                s.iter().filter(|s| s.sql.starts_with("DELETE")).collect();
            assert_eq!(deletes.len(), 3, "one per index table");
            assert!(deletes.iter().all(|d| d.binds == ["old"]), "{deletes:?}");
            let s = statements(&[crash("new", false)], sqlite).expect("rows are JSON");
            assert!(!s.iter().any(|s| s.sql.starts_with("DELETE")), "{s:?}");
            assert!(s
                .iter()
                .any(|s| s.sql.starts_with("INSERT INTO crash_terms")));
        }
    }

    #[test]
    fn placeholders_follow_the_binds() {
        assert_eq!(marks(3), "$1, $2, $3");
        let r = StoredReport::from_json(
            r#"{"modules":[{"name":"/lib/libc.so.6","build_id":"AB12","code_id":null,
                "files":[{"name":"libc.debug","build_id":"cd34"}]}]}"#
                .into(),
            None,
        );
        let s = statements_of(&r);
        for st in &s {
            let n = st.sql.matches('$').count();
            assert_eq!(n, st.binds.len(), "{}", st.sql);
        }
        let ids = s
            .iter()
            .find(|s| s.sql.starts_with("INSERT INTO crash_build_ids"))
            .expect("build-ids inserted");
        assert_eq!(ids.binds, [r#"[["ab12","c1"],["cd34","c1"]]"#]);
    }

    /// On SQLite each insert reads its JSON rows once, looking each row up by an index:
    /// left to choose, SQLite's planner scanned `search_terms` and read the rows again
    /// for every term (a drain fell from 1,000 to 400 crashes a second).
    #[tokio::test]
    async fn each_row_is_looked_up_by_index_on_sqlite() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let db = crate::store::Db::connect(&url).await.expect("connect");
        db.migrate().await.expect("migrate");
        let crate::store::Backend::Sqlite(pool) = db.backend() else {
            unreachable!("a SQLite URL")
        };
        let mut r = StoredReport::from_json(
            r#"{"modules":[{"name":"/lib/libc.so.6","build_id":"ab12"}]}"#.into(),
            None,
        );
        r.terms.insert((MODULE, "libc.so.6".into()));
        r.terms.insert(("function", "abort".into()));
        for f in [
            "raise",
            "qsort",
            "main",
            "cmp",
            "start",
            "libc_start_main",
            "msort",
        ] {
            r.terms.insert(("function", f.into()));
        }
        let index = statements_of(&r);
        // the statistics of a store that holds few terms, as a new store's first drain
        // has them (`PRAGMA optimize` at the start, `statistics::refresh` after)
        for st in &index {
            let mut q = sqlx::query(sqlx::AssertSqlSafe(st.sql.as_str()));
            for b in &st.binds {
                q = q.bind(b.as_ref());
            }
            q.execute(pool).await.expect("index rows stored");
        }
        // and the statistics of the bench's store (`bench/service.sh`) after its first
        // drain of 3,000 crashes (one report's 13 terms), under which the planner chose to
        // scan the terms; `ANALYZE sqlite_schema` reloads them
        sqlx::query("ANALYZE").execute(pool).await.expect("analyze");
        for (table, index, stat) in [
            ("search_terms", "sqlite_autoindex_search_terms_1", "13 5 1"),
            ("crash_terms", "crash_terms_crash", "26429 13"),
            (
                "crash_terms",
                "sqlite_autoindex_crash_terms_1",
                "26429 1786 1",
            ),
        ] {
            sqlx::query("DELETE FROM sqlite_stat1 WHERE tbl = $1 AND idx = $2")
                .bind(table)
                .bind(index)
                .execute(pool)
                .await
                .expect("statistics");
            sqlx::query("INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ($1, $2, $3)")
                .bind(table)
                .bind(index)
                .bind(stat)
                .execute(pool)
                .await
                .expect("statistics");
        }
        sqlx::query("ANALYZE sqlite_schema")
            .execute(pool)
            .await
            .expect("reload");
        for st in index {
            let explain = format!("EXPLAIN QUERY PLAN {}", st.sql);
            let mut q =
                sqlx::query_as::<_, (i64, i64, i64, String)>(sqlx::AssertSqlSafe(explain.as_str()));
            for b in &st.binds {
                q = q.bind(b.as_ref());
            }
            let plan: Vec<String> = q
                .fetch_all(pool)
                .await
                .expect("plan")
                .into_iter()
                .map(|(_, _, _, d)| d)
                .collect();
            let scans: Vec<&String> = plan
                .iter()
                .filter(|d| d.starts_with("SCAN") && !d.contains("json_each"))
                .collect();
            assert!(scans.is_empty(), "{}: {plan:?}", st.sql);
        }
    }
}
