//! The migration files and raw SQL the migration tests apply by hand: the store as an
//! installation had it before one migration (or with every other one), then that
//! migration (bundle_migration, status_counts).

use worker::store::Db;

/// The migration files of `dialect`, in order: those before `number` (e.g. "0034"), and
/// `number`'s own.
pub fn before_and(dialect: &str, number: &str) -> (Vec<String>, String) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../migrations")
        .join(dialect);
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sql"))
        .collect();
    names.sort();
    let read = |n: &String| std::fs::read_to_string(dir.join(n)).unwrap();
    let before = names
        .iter()
        .filter(|n| n.as_str() < number)
        .map(read)
        .collect();
    let this = names
        .iter()
        .find(|n| n.starts_with(&format!("{number}_")))
        .map(read)
        .unwrap();
    (before, this)
}

/// The migration files of `dialect` in order but `number`'s (e.g. "0033"), and
/// `number`'s own: a store that had every other migration, then that one (a migration
/// numbered below ones already applied, as an upgraded store applies it).
pub fn all_but(dialect: &str, number: &str) -> (Vec<String>, String) {
    let (mut others, this) = before_and(dialect, number);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../migrations")
        .join(dialect);
    let mut after: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sql") && n.as_str() > number && !n.starts_with(number))
        .collect();
    after.sort();
    others.extend(
        after
            .iter()
            .map(|n| std::fs::read_to_string(dir.join(n)).unwrap()),
    );
    (others, this)
}

/// Runs `sql` (one statement or several) on `db`.
pub async fn run_sql(db: &Db, sql: &str) {
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    worker::on_pool!(db, p => sqlx::raw_sql(sql).execute(p).await.map(|_| ())).unwrap();
}
