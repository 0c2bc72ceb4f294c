//! Every rollup of the crash groups (migrations 0006, 0021, 0035 and 0026) against its
//! recount from `crashes`, project by project: what the triggers keep must equal what a
//! GROUP BY over the crashes gives. Shared by the store's tests (`project_groups.rs`) and
//! the server's (`server/tests/projects_groups.rs` includes this file).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use worker::store::{Backend, Db};

/// The rows of `rows`, every column as text (NULL as "∅"), so that both dialects'
/// integer and text columns compare.
macro_rules! as_texts {
    ($rows:expr) => {{
        use sqlx::{Row, ValueRef};
        $rows
            .iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| {
                        if r.try_get_raw(i).unwrap().is_null() {
                            return "∅".to_string();
                        }
                        r.try_get::<i64, _>(i)
                            .map(|v| v.to_string())
                            .or_else(|_| r.try_get::<String, _>(i))
                            .unwrap()
                    })
                    .collect::<Vec<String>>()
            })
            .collect::<Vec<_>>()
    }};
}

/// Rows of one query, every column as text.
pub async fn texts(db: &Db, sql: &str) -> Vec<Vec<String>> {
    let query = sqlx::AssertSqlSafe(sql.to_string());
    match db.backend() {
        Backend::Sqlite(p) => {
            let rows = sqlx::query(query).fetch_all(p).await;
            as_texts!(rows.unwrap_or_else(|e| panic!("{sql}: {e}")))
        }
        Backend::Postgres(p) => {
            let rows = sqlx::query(query).fetch_all(p).await;
            as_texts!(rows.unwrap_or_else(|e| panic!("{sql}: {e}")))
        }
    }
}

/// Each rollup and its recount from `crashes`, per project: (name, rows, recount).
pub const ROLLUPS: [(&str, &str, &str); 5] = [
    (
        "crash_groups",
        "SELECT project, signature, count, first_seen, last_seen FROM crash_groups \
         ORDER BY project, signature",
        "SELECT project, signature, COUNT(*), MIN(received_at), MAX(received_at) FROM crashes \
         WHERE signature <> '' GROUP BY project, signature ORDER BY project, signature",
    ),
    (
        "crash_group_days",
        "SELECT project, signature, day, product, version, count, first_seen, last_seen \
         FROM crash_group_days ORDER BY 1, 2, 3, 4, 5",
        "SELECT project, signature, received_at / 86400000, COALESCE(product, ''), \
         COALESCE(version, ''), COUNT(*), MIN(received_at), MAX(received_at) FROM crashes \
         WHERE signature <> '' GROUP BY project, signature, received_at / 86400000, \
         COALESCE(product, ''), COALESCE(version, '') ORDER BY 1, 2, 3, 4, 5",
    ),
    (
        "crash_group_running",
        "SELECT project, scope, signature, day, count, running FROM crash_group_running \
         ORDER BY 1, 2, 3, 4",
        "SELECT project, scope, signature, day, n, \
         CAST(SUM(n) OVER (PARTITION BY project, scope, signature ORDER BY day) AS BIGINT) \
         FROM (SELECT project, '' AS scope, signature, received_at / 86400000 AS day, \
               COUNT(*) AS n FROM crashes WHERE signature <> '' \
               GROUP BY project, signature, received_at / 86400000 \
               UNION ALL SELECT project, 'p:' || product, signature, received_at / 86400000, \
               COUNT(*) FROM crashes WHERE signature <> '' AND product <> '' \
               GROUP BY project, product, signature, received_at / 86400000 \
               UNION ALL SELECT project, 'v:' || version, signature, received_at / 86400000, \
               COUNT(*) FROM crashes WHERE signature <> '' AND version <> '' \
               GROUP BY project, version, signature, received_at / 86400000) d \
         ORDER BY 1, 2, 3, 4",
    ),
    (
        "crash_group_kinds",
        "SELECT project, kind, signature, day, product, version, count FROM crash_group_kinds \
         ORDER BY 1, 2, 3, 4, 5, 6",
        "SELECT project, analysis_kind, signature, received_at / 86400000, \
         COALESCE(product, ''), COALESCE(version, ''), COUNT(*) FROM crashes \
         WHERE signature <> '' AND analysis_kind <> '' \
         GROUP BY project, analysis_kind, signature, received_at / 86400000, \
         COALESCE(product, ''), COALESCE(version, '') ORDER BY 1, 2, 3, 4, 5, 6",
    ),
    (
        "project_group_versions",
        "SELECT project, signature, product, version FROM project_group_versions \
         ORDER BY 1, 2, 3, 4",
        "SELECT DISTINCT project, signature, COALESCE(product, ''), COALESCE(version, '') \
         FROM crashes WHERE signature <> '' ORDER BY 1, 2, 3, 4",
    ),
];

/// Every rollup equals its recount from `crashes`, project by project.
pub async fn rollups_exact(db: &Db, when: &str) {
    for (name, rows, recount) in ROLLUPS {
        let (rows, recount) = (texts(db, rows).await, texts(db, recount).await);
        assert!(
            !recount.is_empty(),
            "{when}: no crashes to count for {name}"
        );
        assert_eq!(rows, recount, "{when}: {name} differs from its recount");
    }
}
