//! `postmortem reprocess --all --process` over a few hundred stored crashes on SQLite,
//! killed (SIGKILL) halfway and started again: the second start resumes the same run,
//! every crash ends `done`, each was completed exactly once (the `completions` counter
//! the lease guard keeps) and carries the run id, and the summary and rate are printed.
//!
//! `missing_binary_upload_reprocesses_affected_crashes`: the automatic path through a real
//! `postmortem serve`: crashes of a program whose binary is missing are reprocessed when
//! it is uploaded, a crash of another program is left alone; then `POST
//! /api/v1/reprocess` queues by signature.
//!
//! `seed_for_benchmark` (ignored) fills a data dir with done crashes of one core for
//! manual runs: `POSTMORTEM_SEED_DIR=DIR POSTMORTEM_SEED_N=10000 cargo test -p postmortem
//! --test suite -- reprocess:: --ignored`, then `postmortem reprocess --data-dir DIR --all --process`.
//! docs/performance.md's figure comes from `bench/reprocess.sh` (10,000 crashes, killed and resumed).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use worker::store::crashes::{self, NewCrash};
use worker::store::{Backend, Blobs, Db};

use crate::common;
use common::bin;

const CRASHER: &str = r#"
#include <stdio.h>
__attribute__((noinline)) void boom(int *p) { *p = 1; puts(""); }
int main(void) { boom((int *)0); return 0; }
"#;

/// Compiles and crashes a small program in `work`; returns the core's bytes.
fn core_bytes(work: &Path) -> Vec<u8> {
    crash(work, CRASHER).1
}

/// Compiles `source` into `work/prog`, crashes it in `work`; returns the program's path
/// and the core's bytes.
fn crash(work: &Path, source: &str) -> (PathBuf, Vec<u8>) {
    let src = work.join("prog.c");
    std::fs::write(&src, source).unwrap();
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
    (prog, std::fs::read(core).unwrap())
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
            annotations_cut: None,
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
            killed_at = Some(done);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
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
    // under a limit: a resumed run that hangs fails here with what it printed
    let out = postmortem_testsupport::command::run(
        &mut reprocess(&data),
        None,
        &dir.path().join("second-run"),
        Duration::from_secs(300),
    );
    let text = out.stdout;
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

const OTHER: &str = r#"
#include <stdio.h>
__attribute__((noinline)) void other_crash(volatile int *p) { puts(""); *p = 2; }
int main(void) { other_crash((volatile int *)8); return 0; }
"#;

/// A `postmortem serve` killed on drop.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(data: &Path) -> Server {
        let mut child = Command::new(bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("postmortem listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Server { child, base }
    }
}

async fn crash_json(c: &reqwest::Client, s: &Server, id: &str) -> serde_json::Value {
    c.get(format!("{}/api/v1/crashes/{id}", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls crash `id` until `done` and `ok(report)` holds.
async fn wait_for(
    c: &reqwest::Client,
    s: &Server,
    id: &str,
    ok: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let v = crash_json(c, s, id).await;
        if v["status"] == "done" && ok(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "crash {id} never got there: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The frames of the crashing thread in module `prog`.
fn crashed_prog_frames(v: &serde_json::Value) -> Vec<&serde_json::Value> {
    v["report"]["threads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["crashed"] == true)
        .flat_map(|t| t["frames"].as_array().into_iter().flatten())
        .filter(|f| f["module"].as_str().is_some_and(|m| m.ends_with("prog")))
        .collect()
}

/// Frames of the crashing thread in module `prog`, and how many have a function name.
fn prog_frames(v: &serde_json::Value) -> (usize, usize) {
    let frames = crashed_prog_frames(v);
    let named = frames.iter().filter(|f| !f["function"].is_null()).count();
    (frames.len(), named)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_binary_upload_reprocesses_affected_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let (prog_a, core_a) = crash(&a_dir, CRASHER);
    let (_prog_b, core_b) = crash(&b_dir, OTHER);
    let s = Server::start(&dir.path().join("data"));
    let c = common::client();
    let upload = |core: Vec<u8>| {
        let (c, url) = (c.clone(), format!("{}/api/v1/crashes", s.base));
        async move {
            let r = c.post(url).body(core).send().await.unwrap();
            assert_eq!(r.status(), 202);
            let v: serde_json::Value = r.json().await.unwrap();
            v["id"].as_str().unwrap().to_string()
        }
    };
    let mut affected = Vec::new();
    for _ in 0..3 {
        affected.push(upload(core_a.clone()).await);
    }
    let other = upload(core_b.clone()).await;

    // Before: prog's frames have no function names (its binary is missing).
    let mut before = Vec::new();
    for id in &affected {
        let v = wait_for(&c, &s, id, |_| true).await;
        let (n, named) = prog_frames(&v);
        assert!(n > 0, "no frame in prog: {v}");
        assert_eq!(named, 0, "prog frames named without its binary: {v}");
        before.push(v);
    }
    let other_before = wait_for(&c, &s, &other, |_| true).await;
    let missing: serde_json::Value = c
        .get(format!("{}/api/v1/modules/missing", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(missing.to_string().contains("prog"), "{missing}");

    // Upload prog A's binary: its crashes are reprocessed automatically.
    let r = c
        .post(format!("{}/api/v1/binaries", s.base))
        .header("x-file-name", "prog")
        .body(std::fs::read(&prog_a).unwrap())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    for (id, old) in affected.iter().zip(&before) {
        let v = wait_for(&c, &s, id, |v| prog_frames(v).1 > 0).await;
        assert!(
            v["report"].to_string().contains("\"boom\""),
            "no `boom` frame after the upload: {v}"
        );
        assert_ne!(v["signature"], old["signature"], "signature unchanged");
        // The dashboard's crash page shows the change and the old signature.
        let page = c
            .get(format!("{}/crashes/{id}", s.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            page.contains("Signature changed"),
            "no marker on the crash page"
        );
        assert!(
            page.contains(old["signature"].as_str().unwrap()),
            "the previous signature is not shown"
        );
    }
    let page = c
        .get(format!("{}/crashes/{other}", s.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !page.contains("Signature changed"),
        "marker on an unchanged crash"
    );
    // The other program's crash is untouched.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let other_after = crash_json(&c, &s, &other).await;
    assert_eq!(other_after["finished_at"], other_before["finished_at"]);
    assert_eq!(other_after["attempts"], other_before["attempts"]);
    assert_eq!(other_after["report"], other_before["report"]);

    // POST /api/v1/reprocess: an empty filter is refused, a signature filter queues one.
    let post = |body: serde_json::Value| {
        let (c, url) = (c.clone(), format!("{}/api/v1/reprocess", s.base));
        async move { c.post(url).json(&body).send().await.unwrap() }
    };
    assert_eq!(post(serde_json::json!({})).await.status(), 400);
    let r = post(serde_json::json!({ "signature": other_before["signature"] })).await;
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["queued"], 1, "{v}");
    wait_for(&c, &s, &other, |v| {
        v["finished_at"] != other_before["finished_at"]
    })
    .await;
}

/// Frames of the crashing thread in module `prog` that carry a source line.
fn prog_lines(v: &serde_json::Value) -> usize {
    crashed_prog_frames(v)
        .into_iter()
        .filter(|f| f["line"].as_u64().is_some())
        .count()
}

/// A pipeline that uploads the stripped binary first and its debug file (`objcopy
/// --only-keep-debug`) after a crash came in: the crash was walked from the stripped file
/// (no lines), and the debug file's upload processes it again by itself, with lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debug_file_uploaded_after_its_stripped_binary_reprocesses_the_crash() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("a");
    std::fs::create_dir_all(&work).unwrap();
    let (prog, core) = crash(&work, CRASHER);
    let (stripped, debug) = (work.join("prog.stripped"), work.join("prog.debug"));
    for (args, out) in [
        (vec!["--only-keep-debug"], &debug),
        (vec!["--strip-all"], &stripped),
    ] {
        let st = Command::new("objcopy")
            .args(&args)
            .arg(&prog)
            .arg(out)
            .status()
            .expect("objcopy (binutils) must be installed");
        assert!(st.success(), "objcopy {args:?} failed");
    }
    let s = Server::start(&dir.path().join("data"));
    let c = common::client();
    let put = |path: PathBuf| {
        let (c, url) = (c.clone(), format!("{}/api/v1/binaries", s.base));
        async move {
            let r = c
                .post(url)
                .header("x-file-name", "prog")
                .body(std::fs::read(path).unwrap())
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{}", r.status());
        }
    };
    put(stripped).await;
    let r = c
        .post(format!("{}/api/v1/crashes", s.base))
        .body(core)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: serde_json::Value = r.json().await.unwrap();
    let id = v["id"].as_str().unwrap().to_string();
    let before = wait_for(&c, &s, &id, |_| true).await;
    assert!(prog_frames(&before).0 > 0, "no frame in prog: {before}");
    assert_eq!(
        prog_lines(&before),
        0,
        "lines without the debug file: {before}"
    );

    put(debug).await;
    let after = wait_for(&c, &s, &id, |v| prog_lines(v) > 0).await;
    assert!(
        after["report"].to_string().contains("\"boom\""),
        "no `boom` frame after the debug file's upload: {after}"
    );
}
