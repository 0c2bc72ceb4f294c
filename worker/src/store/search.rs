//! The search index behind the crash list's module and function filters: each crash's
//! module names and function names, stored once per distinct name (`search_terms`) and
//! linked to the crashes whose report has them (`crash_terms`).
//!
//! A "function name contains" filter then scans the distinct names, which grow with the
//! code base and not with the number of crashes, and follows the links by index. The
//! links are written when a report is stored; a reprocessed crash's links are replaced.

use std::collections::BTreeSet;

use super::{Db, StoreError};

/// Kinds of terms.
pub const MODULE: &str = "module";
pub const FUNCTION: &str = "function";

/// At most this many distinct terms are indexed per crash (a report is bounded, but a
/// hostile one could name thousands of functions).
const MAX_TERMS: usize = 2000;

/// The module names (file names) and function names of a report, deduplicated.
pub fn report_terms(report: &str) -> BTreeSet<(&'static str, String)> {
    let mut terms = BTreeSet::new();
    let Ok(v) = serde_json::from_str::<serde_json::Value>(report) else {
        return terms;
    };
    let modules = v.get("modules").and_then(|m| m.as_array());
    for m in modules.into_iter().flatten() {
        if let Some(name) = m.get("name").and_then(|n| n.as_str()) {
            let file = name.rsplit('/').next().unwrap_or(name);
            if !file.is_empty() {
                terms.insert((MODULE, file.to_owned()));
            }
        }
    }
    let threads = v.get("threads").and_then(|t| t.as_array());
    let frames = threads
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("frames").and_then(|f| f.as_array()))
        .flatten();
    for f in frames {
        if let Some(name) = f.get("function").and_then(|n| n.as_str()) {
            // Folded here, with all of Unicode: SQLite's `lower()` folds ASCII only, so a
            // name stored as `Écrire` would never match the filter `écrire`.
            terms.insert((FUNCTION, name.to_lowercase()));
        }
        if terms.len() >= MAX_TERMS {
            break;
        }
    }
    terms
}

/// Replaces the links of `crash_id` with the terms of `report`.
pub async fn index_report(db: &Db, crash_id: &str, report: &str) -> Result<(), StoreError> {
    crate::on_pool!(db, p => sqlx::query("DELETE FROM crash_terms WHERE crash_id = $1")
        .bind(crash_id)
        .execute(p)
        .await
        .map(|_| ()))?;
    for (kind, term) in report_terms(report) {
        crate::on_pool!(db, p => sqlx::query(
            "INSERT INTO search_terms (kind, term) VALUES ($1, $2) ON CONFLICT (kind, term) DO NOTHING")
            .bind(kind)
            .bind(&term)
            .execute(p)
            .await
            .map(|_| ()))?;
        crate::on_pool!(db, p => sqlx::query(
            "INSERT INTO crash_terms (term_id, crash_id) \
             SELECT id, $3 FROM search_terms WHERE kind = $1 AND term = $2 \
             ON CONFLICT (term_id, crash_id) DO NOTHING")
            .bind(kind)
            .bind(&term)
            .bind(crash_id)
            .execute(p)
            .await
            .map(|_| ()))?;
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_module_files_and_function_names() {
        let report = r#"{"modules":[{"name":"/usr/lib/libc.so.6"},{"name":"app"}],
            "threads":[{"frames":[{"function":"main"},{"function":null},{"function":"main"}]},
                       {"frames":[{"function":"ns::F"},{"function":"Écrire"}]}]}"#;
        let t: Vec<_> = report_terms(report).into_iter().collect();
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
        assert!(report_terms("not json").is_empty());
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
            },
        )
        .await
        .expect("insert");
        let report = r#"{"threads":[{"frames":[{"function":"ÉcrireFichier"}]}]}"#;
        index_report(&db, &id, report).await.expect("index");
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
