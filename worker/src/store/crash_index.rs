//! The index rows a stored report gives its crash, as statements of many rows each: the
//! search index (`crash_terms`, migration 0007) and the module index (`crash_build_ids`
//! and `crash_module_names`, migration 0021).
//!
//! [`super::crashes::finish_batch`] runs them in the transaction that stores the reports,
//! so a crash's index is replaced exactly when its report is (first processing and every
//! reprocessing). The statements are built here, apart from the transaction, so that
//! what a report indexes is one function's job; every value is a bound text parameter.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::crashes::StoredReport;
use super::search::{self, MODULE, TERMS_PER_STATEMENT};

/// One statement and its text values, in placeholder order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Statement<'a> {
    pub sql: String,
    pub binds: Vec<&'a str>,
}

/// Crashes whose old index rows one `DELETE` removes.
const CRASHES_PER_DELETE: usize = 500;

/// The statements that replace the index rows of each `(crash id, report)`: the old rows
/// deleted, every distinct term inserted once, then the links, build-ids and module
/// names, in statements of at most [`TERMS_PER_STATEMENT`] rows. `sqlite`: the deletes
/// name their index ([`delete_by_crash_sql`]).
pub(crate) fn statements<'a>(
    indexed: &[(&'a str, &'a StoredReport)],
    sqlite: bool,
) -> Vec<Statement<'a>> {
    let mut out = Vec::new();
    let ids: Vec<&str> = indexed.iter().map(|(id, _)| *id).collect();
    for table in ["crash_terms", "crash_build_ids", "crash_module_names"] {
        for chunk in ids.chunks(CRASHES_PER_DELETE) {
            out.push(Statement {
                sql: delete_by_crash_sql(table, chunk.len(), sqlite),
                binds: chunk.to_vec(),
            });
        }
    }
    let terms: BTreeSet<&(&'static str, String)> =
        indexed.iter().flat_map(|(_, r)| &r.terms).collect();
    let terms: Vec<_> = terms.into_iter().collect();
    for chunk in terms.chunks(TERMS_PER_STATEMENT) {
        out.push(Statement {
            sql: search::insert_terms_sql(chunk.len()),
            binds: chunk.iter().flat_map(|(k, t)| [*k, t.as_str()]).collect(),
        });
    }
    let links: Vec<[&str; 3]> = indexed
        .iter()
        .flat_map(|(id, r)| r.terms.iter().map(move |(k, t)| [*k, t.as_str(), *id]))
        .collect();
    for chunk in links.chunks(TERMS_PER_STATEMENT) {
        out.push(Statement {
            sql: search::link_terms_sql(chunk.len()),
            binds: chunk.iter().flatten().copied().collect(),
        });
    }
    let build_ids: Vec<[&str; 2]> = indexed
        .iter()
        .flat_map(|(id, r)| r.build_ids.iter().map(move |b| [b.as_str(), *id]))
        .collect();
    for chunk in build_ids.chunks(TERMS_PER_STATEMENT) {
        out.push(Statement {
            sql: format!(
                "INSERT INTO crash_build_ids (build_id, crash_id) VALUES {} \
                 ON CONFLICT (build_id, crash_id) DO NOTHING",
                marks(1, chunk.len(), 2)
            ),
            binds: chunk.iter().flatten().copied().collect(),
        });
    }
    let names: Vec<[&str; 2]> = indexed
        .iter()
        .flat_map(|(id, r)| {
            r.terms
                .iter()
                .filter(|(k, _)| *k == MODULE)
                .map(move |(_, name)| [name.as_str(), *id])
        })
        .collect();
    for chunk in names.chunks(TERMS_PER_STATEMENT) {
        // the crash's received_at from its row; SQLite needs a WHERE before an upsert's
        // ON CONFLICT after a join's ON
        out.push(Statement {
            sql: format!(
                "WITH v (name, crash_id) AS (VALUES {}) \
                 INSERT INTO crash_module_names (name, crash_at, crash_id) \
                 SELECT v.name, c.received_at, c.id FROM v JOIN crashes c ON c.id = v.crash_id \
                 WHERE true ON CONFLICT (name, crash_at, crash_id) DO NOTHING",
                marks(1, chunk.len(), 2)
            ),
            binds: chunk.iter().flatten().copied().collect(),
        });
    }
    out
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
        marks(1, n, 1)
    )
}

/// `n` groups of `width` placeholders from `$first`: `$1, $2` (width 1) or `($1, $2),
/// ($3, $4)` (width 2).
fn marks(first: usize, n: usize, width: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push_str(", ");
        }
        let at = first + i * width;
        if width == 1 {
            let _ = write!(s, "${at}");
        } else {
            s.push('(');
            for j in 0..width {
                let _ = write!(s, "{}${}", if j == 0 { "" } else { ", " }, at + j);
            }
            s.push(')');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_follow_the_binds() {
        assert_eq!(marks(1, 3, 1), "$1, $2, $3");
        assert_eq!(marks(1, 2, 2), "($1, $2), ($3, $4)");
        let r = StoredReport::from_json(
            r#"{"modules":[{"name":"/lib/libc.so.6","build_id":"AB12","code_id":null,
                "files":[{"name":"libc.debug","build_id":"cd34"}]}]}"#
                .into(),
            None,
        );
        let s = statements(&[("c1", &r)], true);
        for st in &s {
            let n = st.sql.matches('$').count();
            assert_eq!(n, st.binds.len(), "{}", st.sql);
        }
        let ids = s
            .iter()
            .find(|s| s.sql.starts_with("INSERT INTO crash_build_ids"))
            .expect("build-ids inserted");
        assert_eq!(ids.binds, ["ab12", "c1", "cd34", "c1"]);
    }
}
