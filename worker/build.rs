//! Rebuilds the worker when a migration is added or changed.
//!
//! `sqlx::migrate!` embeds `../migrations/{sqlite,postgres}` at compile time and, on
//! stable Rust, makes cargo watch only the files it found: a migration added later (a
//! pull, a new branch) left an incremental build with the old list, and a binary that
//! would not migrate its database to the schema its queries expect. Cargo watches a
//! directory named here as a whole (sqlx's own advice: `sqlx migrate build-script`).

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
