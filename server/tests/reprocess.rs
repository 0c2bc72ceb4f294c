//! `postmortem reprocess --all --process` over a few hundred stored crashes on SQLite,
//! killed (SIGKILL) halfway and started again: the second start resumes the same run,
//! every crash ends `done`, each was completed exactly once (the `completions` counter
//! the lease guard keeps) and carries the run id, and the summary and rate are printed.
//!
//! `seed_for_benchmark` (ignored) fills a data dir for the throughput figure in the
//! README: `POSTMORTEM_SEED_DIR=DIR POSTMORTEM_SEED_N=10000 cargo test -p postmortem
//! --test reprocess -- --ignored`, then `postmortem reprocess --data-dir DIR --all --process`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use worker::store::crashes::{self, NewCrash};
use worker::store::{Backend, Blobs, Db};

fn bin() -> PathBuf {
    std::env::var_os("POSTMORTEM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_postmortem")))
}

const CRASHER: &str = r#"
#include <stdio.h>
__attribute__((noinline)) void boom(int *p) { *p = 1; puts(""); }
int main(void) { boom((int *)0); return 0; }
"#;

/// Compiles and crashes a small program in `work`; returns the core's bytes.
fn core_bytes(work: &Path) -> Vec<u8> {
    let src = work.join("prog.c");
    std::fs::write(&src, CRASHER).unwrap();
    let prog = work.join("prog");
    let st = Command::new("gcc")
        .args(["-g", "-O0", "-Wl,--build-id", "-o"])
        .arg(&prog)
        .arg(&src)
        .status()
        .expect("gcc must be installed (see test.sh)");
    assert!(st.success(), "gcc failed");
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -c unlimited; exec {}", prog.display()))
        .current_dir(work)
        .status()
        .expect("run crasher");
    assert!(!st.success(), "the crasher did not crash");
    let core = std::fs::read_dir(work)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "core" || n.starts_with("core."))
        })
        .expect("no core written (core_pattern must be a plain file name, see test.sh)");
    std::fs::read(core).unwrap()
}

fn pool(db: &Db) -> &sqlx::SqlitePool {
    match db.backend() {
        Backend::Sqlite(p) => p,
        Backend::Postgres(_) => unreachable!(),
    }
}

/// Stores `n` crashes of one core blob as already `done` (as if processed long ago).
async fn seed(data: &Path, n: usize) -> Db {
    let work = tempfile::tempdir().unwrap();
    let core = core_bytes(work.path());
    std::fs::create_dir_all(data).unwrap();
    let db = Db::connect(&format!(
        "sqlite://{}",
        data.join("postmortem.db").display()
    ))
    .await
    .unwrap();
    db.migrate().await.unwrap();
    let blobs = Blobs::local(&data.join("blobs")).unwrap();
    let size = core.len() as i64;
    let sha = blobs.put(bytes::Bytes::from(core)).await.unwrap();
    let mut tx = pool(&db).begin().await.unwrap();
    for i in 0..n {
        let c = NewCrash {
            id: crashes::new_id(),
            received_at: 1_700_000_000_000 + i as i64,
            dump_sha256: sha.clone(),
            dump_size: size,
            dump_format: "elf-core".into(),
            annotations: "{}".into(),
        };
        sqlx::query(
            "INSERT INTO crashes (id, status, received_at, dump_sha256, dump_size, dump_format, \
             annotations, attempts, signature) VALUES ($1, 'done', $2, $3, $4, $5, $6, 1, 'old')",
        )
        .bind(&c.id)
        .bind(c.received_at)
        .bind(&c.dump_sha256)
        .bind(c.dump_size)
        .bind(&c.dump_format)
        .bind(&c.annotations)
        .execute(&mut *tx)
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    db
}

fn reprocess(data: &Path) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg("reprocess")
        .arg("--data-dir")
        .arg(data)
        .args(["--all", "--process", "--batch", "40", "--lease-secs", "1"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

async fn scalar(db: &Db, sql: &str) -> i64 {
    let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_one(pool(db))
        .await
        .unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reprocess_all_killed_and_resumed() {
    const N: i64 = 400;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let db = seed(&data, N as usize).await;

    // First run: SIGKILL once about a quarter of the crashes are done again.
    let mut child = reprocess(&data).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut killed_at = None;
    while Instant::now() < deadline {
        let done = scalar(
            &db,
            "SELECT COUNT(*) FROM crashes WHERE reprocess_run IS NOT NULL AND status = 'done'",
        )
        .await;
        if done >= N / 4 {
            child.kill().unwrap(); // SIGKILL
            let _ = child.wait();
            killed_at = Some(done);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let killed_at = killed_at.expect("the first run never got a quarter done");
    let done = scalar(
        &db,
        "SELECT COUNT(*) FROM crashes WHERE reprocess_run IS NOT NULL AND status = 'done'",
    )
    .await;
    assert!(
        done < N,
        "the first run finished before it was killed ({done})"
    );
    let runs = scalar(
        &db,
        "SELECT COUNT(*) FROM reprocess_runs WHERE finished_at IS NULL",
    )
    .await;
    assert_eq!(runs, 1);

    // Second run: resumes the same run and finishes it.
    let out = reprocess(&data).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "second run failed: {text}");
    assert!(text.contains("(resumed)"), "not resumed: {text}");
    assert!(text.contains("crashes/s"), "no rate: {text}");
    assert!(
        text.contains(&format!("{N} crashes reprocessed (0 failed)")),
        "{text}"
    );
    assert!(text.contains(&format!("signature changed: {N}")), "{text}");
    assert!(text.contains("still missing:"), "{text}");
    eprintln!("killed at {killed_at} done; second run:\n{text}");

    // Every crash done, by the one run, completed exactly once (the lease guard's
    // counter: a crash processed twice would show 2).
    assert_eq!(
        scalar(&db, "SELECT COUNT(*) FROM crashes WHERE status = 'done'").await,
        N
    );
    assert_eq!(
        scalar(&db, "SELECT COUNT(DISTINCT reprocess_run) FROM crashes").await,
        1
    );
    assert_eq!(
        scalar(&db, "SELECT COUNT(*) FROM crashes WHERE completions = 1").await,
        N
    );
    assert_eq!(
        scalar(&db, "SELECT COUNT(*) FROM crashes WHERE previous_signature = 'old' AND signature <> 'old' AND function_frames IS NOT NULL").await,
        N
    );
    assert_eq!(
        scalar(
            &db,
            "SELECT COUNT(*) FROM reprocess_runs WHERE finished_at IS NOT NULL"
        )
        .await,
        1
    );
}

/// Fills `$POSTMORTEM_SEED_DIR` with `$POSTMORTEM_SEED_N` done crashes (for the
/// throughput figure; not a test).
#[tokio::test]
#[ignore = "fills a data dir for measuring `postmortem reprocess`"]
async fn seed_for_benchmark() {
    let dir = PathBuf::from(std::env::var("POSTMORTEM_SEED_DIR").expect("POSTMORTEM_SEED_DIR"));
    let n: usize = std::env::var("POSTMORTEM_SEED_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    seed(&dir, n).await;
}
