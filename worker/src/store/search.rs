//! The search index behind the crash list's module, function and analysis-kind filters:
//! each crash's module names, function names and the kind of its crash analysis, stored
//! once per distinct term (`search_terms`) and linked to the crashes whose report has them
//! (`crash_terms`).
//!
//! A "function name contains" filter then scans the distinct names, which grow with the
//! code base and not with the number of crashes, and follows the links by index. The
//! links are written when a report is stored; a reprocessed crash's links are replaced.

use std::collections::BTreeSet;

use super::{Db, StoreError};

/// Kinds of terms.
pub const MODULE: &str = "module";
pub const FUNCTION: &str = "function";
/// The kind of the report's `crash.analysis` (`null-pointer`, `stack-overflow`, …).
pub const ANALYSIS: &str = "analysis";

/// At most this many distinct terms are indexed per crash (a report is bounded, but a
/// hostile one could name thousands of functions).
const MAX_TERMS: usize = 2000;

/// Something a function name can be read from: a report's frame, or a bare name.
pub trait FunctionName {
    fn function_name(&self) -> Option<&str>;
}

impl FunctionName for &engine::report::Frame {
    fn function_name(&self) -> Option<&str> {
        self.function.as_deref()
    }
}

impl FunctionName for Option<&str> {
    fn function_name(&self) -> Option<&str> {
        *self
    }
}

/// The module names (file names) and function names of a report, deduplicated: its
/// modules' names and its frames (all threads), as typed fields.
pub fn report_terms<'a, F: FunctionName>(
    modules: impl IntoIterator<Item = &'a str>,
    frames: impl IntoIterator<Item = F>,
) -> BTreeSet<(&'static str, String)> {
    let mut terms = BTreeSet::new();
    for name in modules {
        let file = name.rsplit('/').next().unwrap_or(name);
        if !file.is_empty() {
            terms.insert((MODULE, file.to_owned()));
        }
    }
    for f in frames {
        if terms.len() >= MAX_TERMS {
            break;
        }
        if let Some(name) = f.function_name() {
            // Folded here, with all of Unicode: SQLite's `lower()` folds ASCII only, so a
            // name stored as `Écrire` would never match the filter `écrire`.
            terms.insert((FUNCTION, name.to_lowercase()));
        }
    }
    terms
}

/// Replaces the links of `crash_id` with `terms` ([`report_terms`]).
pub async fn index_terms(
    db: &Db,
    crash_id: &str,
    terms: &BTreeSet<(&'static str, String)>,
) -> Result<(), StoreError> {
    crate::on_pool!(db, p => sqlx::query("DELETE FROM crash_terms WHERE crash_id = $1")
        .bind(crash_id)
        .execute(p)
        .await
        .map(|_| ()))?;
    for (kind, term) in terms {
        crate::on_pool!(db, p => sqlx::query(
            "INSERT INTO search_terms (kind, term) VALUES ($1, $2) ON CONFLICT (kind, term) DO NOTHING")
            .bind(*kind)
            .bind(term)
            .execute(p)
            .await
            .map(|_| ()))?;
        crate::on_pool!(db, p => sqlx::query(
            "INSERT INTO crash_terms (term_id, crash_id) \
             SELECT id, $3 FROM search_terms WHERE kind = $1 AND term = $2 \
             ON CONFLICT (term_id, crash_id) DO NOTHING")
            .bind(*kind)
            .bind(term)
            .bind(crash_id)
            .execute(p)
            .await
            .map(|_| ()))?;
    }
    Ok(())
}

/// Rows per statement of the search index's inserts (`crash_index`), each statement's
/// rows one JSON parameter: a bound on one statement's work and parameter's size.
pub(crate) const TERMS_PER_STATEMENT: usize = 500;

/// A `LIKE` pattern matching names that contain `needle` (its `%`, `_` and `\` escaped
/// with `\`), lower-cased like the function terms themselves (the query also compares
/// `lower(term)`, for terms indexed before they were folded).
pub fn contains_pattern(needle: &str) -> String {
    let mut p = String::with_capacity(needle.len() + 2);
    p.push('%');
    for c in needle.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// The analysis kind of each of `crash_ids` that has one (for a page of the crash list).
pub async fn analysis_kinds(
    db: &Db,
    crash_ids: &[String],
) -> Result<std::collections::HashMap<String, String>, StoreError> {
    let mut out = std::collections::HashMap::new();
    for id in crash_ids {
        let kind: Option<(String,)> = crate::on_pool!(db, p => sqlx::query_as(
            "SELECT st.term FROM crash_terms ct JOIN search_terms st ON st.id = ct.term_id \
             WHERE ct.crash_id = $1 AND st.kind = 'analysis'")
            .bind(id)
            .fetch_optional(p)
            .await)?;
        if let Some((k,)) = kind {
            out.insert(id.clone(), k);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_module_files_and_function_names() {
        let report = r#"{"modules":[{"name":"/usr/lib/libc.so.6"},{"name":"app"}],
            "threads":[{"frames":[{"function":"main"},{"function":null},{"function":"main"}]},
                       {"frames":[{"function":"ns::F"},{"function":"Écrire"}]}]}"#;
        let stored = crate::store::crashes::StoredReport::from_json(report.into(), None);
        let t: Vec<_> = stored.terms.into_iter().collect();
        assert_eq!(
            t,
            vec![
                (FUNCTION, "main".to_string()),
                (FUNCTION, "ns::f".to_string()),
                (FUNCTION, "écrire".to_string()),
                (MODULE, "app".to_string()),
                (MODULE, "libc.so.6".to_string()),
            ]
        );
        assert_eq!(stored.function_frames, Some(4));
        let none = crate::store::crashes::StoredReport::from_json("not json".into(), None);
        assert!(none.terms.is_empty() && none.function_frames.is_none());
    }

    /// The function filter on SQLite, whose `lower()` folds ASCII only: capitals outside
    /// ASCII, in the name or in the filter, still match.
    #[tokio::test]
    async fn function_filter_folds_non_ascii_capitals_on_sqlite() {
        use crate::store::crashes::{self, ListQuery, NewCrash};
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let db = Db::connect(&url).await.expect("connect");
        db.migrate().await.expect("migrate");
        let id = crashes::new_id();
        crashes::insert(
            &db,
            &NewCrash {
                id: id.clone(),
                received_at: 1,
                dump_sha256: "0".repeat(64),
                dump_size: 1,
                dump_format: "minidump".into(),
                annotations: "{}".into(),
                annotations_cut: None,
            },
        )
        .await
        .expect("insert");
        let report = r#"{"threads":[{"frames":[{"function":"ÉcrireFichier"}]}]}"#;
        let stored = crashes::StoredReport::from_json(report.into(), None);
        index_terms(&db, &id, &stored.terms).await.expect("index");
        for needle in ["écrire", "ÉCRIRE", "fichier", "ÉcrireFichier"] {
            let q = ListQuery {
                function: Some(needle.into()),
                limit: 10,
                ..ListQuery::default()
            };
            let rows = crashes::list(&db, &q).await.expect("list");
            assert_eq!(rows.len(), 1, "{needle}");
        }
        let q = ListQuery {
            function: Some("lire".into()),
            limit: 10,
            ..ListQuery::default()
        };
        assert!(crashes::list(&db, &q).await.expect("list").is_empty());
    }

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(contains_pattern("A_b%"), "%a\\_b\\%%");
    }
}
