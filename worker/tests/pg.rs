//! Scratch PostgreSQL databases for tests: one fresh database per test on 127.0.0.1:5432
//! (trust auth), dropped afterwards. Shared by the store's tests here and the server's
//! (`server/tests/common` includes this file).

/// The database PostgreSQL tests connect to, to create and drop their own.
const PG_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A fresh PostgreSQL database for one test, named `PREFIX_<id>`, dropped by
/// [`drop_db`]; returns its name and URL. `None` (skip) only when PostgreSQL is
/// unreachable and `POSTMORTEM_SKIP_PG=1`.
pub async fn pg_database(prefix: &str) -> Option<(String, String)> {
    use sqlx::Connection;
    let mut admin = match sqlx::PgConnection::connect(PG_ADMIN_URL).await {
        Ok(c) => c,
        Err(e) => {
            if std::env::var("POSTMORTEM_SKIP_PG").as_deref() == Ok("1") {
                eprintln!("PostgreSQL unreachable at {PG_ADMIN_URL} ({e}); skipped (POSTMORTEM_SKIP_PG=1)");
                return None;
            }
            panic!("PostgreSQL unreachable at {PG_ADMIN_URL}: {e}. Start it, or set POSTMORTEM_SKIP_PG=1 to skip");
        }
    };
    let name = format!("{prefix}_{}", worker::store::crashes::new_id());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("create database");
    let _ = admin.close().await;
    let url = pg_url(&name);
    Some((name, url))
}

/// The URL of database `name` on the test server.
pub fn pg_url(name: &str) -> String {
    format!("postgres://postgres@127.0.0.1:5432/{name}")
}

/// Drops a database made by [`pg_database`].
pub async fn drop_db(name: &str) {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(PG_ADMIN_URL)
        .await
        .expect("pg admin");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await
    .expect("drop database");
    let _ = admin.close().await;
}

/// A fresh, migrated PostgreSQL database for a store test (see [`pg_database`]); returns
/// its name (for [`drop_db`]) and the connection.
pub async fn pg_migrated(prefix: &str) -> Option<(String, worker::store::Db)> {
    let (name, url) = pg_database(prefix).await?;
    let db = worker::store::Db::connect(&url).await.expect("pg connect");
    db.migrate().await.expect("pg migrate");
    Some((name, db))
}
