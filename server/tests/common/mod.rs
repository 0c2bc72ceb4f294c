//! What the integration tests that run the real `postmortem` binary share: which binary,
//! starting `postmortem serve` on a free loopback port, an HTTP client, crashing a
//! program for its core, and scratch PostgreSQL databases.
//!
//! Each test binary uses part of it, hence the `dead_code` allowance.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The binary under test: `POSTMORTEM_BIN` when set (a copy taken right after the build,
/// for target dirs shared between branches), else the one cargo built for this test.
pub fn bin() -> PathBuf {
    std::env::var_os("POSTMORTEM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_postmortem")))
}

/// A child process killed (and reaped) on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `postmortem serve --listen 127.0.0.1:0 ARGS…` and waits for its
/// `postmortem listening on URL` line; returns the process and the base URL.
pub fn start_serve(args: &[&str]) -> (Proc, String) {
    start_serve_env(args, &[])
}

/// [`start_serve`] with extra environment variables.
pub fn start_serve_env(args: &[&str], env: &[(&str, &str)]) -> (Proc, String) {
    let child = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn postmortem serve");
    listening(child)
}

/// Waits for a spawned `postmortem serve`'s `postmortem listening on URL` line (its
/// stdout piped); returns the process and the base URL.
pub fn listening(mut child: Child) -> (Proc, String) {
    let stdout = child.stdout.take().expect("stdout");
    let proc = Proc(child);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the listening line");
    let base = line
        .trim()
        .strip_prefix("postmortem listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (proc, base)
}

/// An HTTP client with a generous timeout (jobs may wait for table builds). Its idle
/// connections are dropped after 5 s, before the server closes them (a keep-alive
/// connection idle for `--header-timeout-secs`, 10 s, is closed): a request sent on a
/// connection the server is closing fails with "connection closed before message
/// completed", as it did here on a loaded machine.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .pool_idle_timeout(Duration::from_secs(5))
        .build()
        .expect("client")
}

/// Runs the crash program `prog` in `dir` with core dumps on and returns the core's bytes
/// (this machine's `core_pattern` writes `core` or `core.PID` to the working directory).
pub fn make_core(dir: &Path, prog: &Path) -> Vec<u8> {
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -c unlimited; exec {}", prog.display()))
        .current_dir(dir)
        .status()
        .expect("run crasher");
    assert!(!st.success(), "the crasher did not crash");
    let core = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "core" || n.starts_with("core."))
        })
        .unwrap_or_else(|| {
            panic!(
                "no core file written in {} (check /proc/sys/kernel/core_pattern)",
                dir.display()
            )
        });
    std::fs::read(core).expect("read core")
}

/// Compiles `src` with gcc (with a build-id) into `dir/name`.
pub fn compile(dir: &Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).expect("write C source");
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(["-g", "-O0", "-Wl,--build-id", "-o"])
        .arg(&out)
        .arg(&c)
        .status()
        .expect("gcc must be installed");
    assert!(st.success(), "gcc failed");
    out
}

/// A program that dies of SIGSEGV in `crash`, called from `middle`, called from `main`.
pub const CRASHER: &str = r#"
#include <stdio.h>
__attribute__((noinline)) void crash(volatile int *p) { *p = 42; }
__attribute__((noinline)) void middle(volatile int *p) { crash(p); puts(""); }
int main(void) { middle((volatile int *)0); return 0; }
"#;

/// Polls `GET {base}/api/v1/crashes/{id}` until the crash is `done` or `failed` (at most
/// 90 s) and returns the record.
pub async fn poll_done(c: &reqwest::Client, base: &str, id: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let v: serde_json::Value = c
            .get(format!("{base}/api/v1/crashes/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let st = v["status"].as_str().unwrap_or_default().to_string();
        if st == "done" || st == "failed" {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "crash {id} still {st} after 90 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `postmortem serve` with its data dir in a fresh temporary directory (`dir/data`);
/// killed, and the directory removed, on drop.
pub struct TempServer {
    _proc: Proc,
    pub base: String,
    pub dir: tempfile::TempDir,
}

impl TempServer {
    /// Starts the server with `extra` arguments after `--data-dir`.
    pub fn start(extra: &[&str]) -> TempServer {
        Self::start_in(tempfile::tempdir().expect("tempdir"), extra)
    }

    /// Stops the server and starts it again on the same data dir with `extra` arguments
    /// (other flags: another `--signature-rules`, …).
    pub fn restart(self, extra: &[&str]) -> TempServer {
        let TempServer { _proc, dir, .. } = self;
        drop(_proc);
        Self::start_in(dir, extra)
    }

    /// Stops the server and hands back its directory (the data dir is `dir/data`), to
    /// change the store before [`TempServer::start_in`] starts a server on it again.
    pub fn stop(self) -> tempfile::TempDir {
        let TempServer { _proc, dir, .. } = self;
        drop(_proc);
        dir
    }

    /// Starts the server on the data dir `dir/data` with `extra` arguments.
    pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> TempServer {
        let data = dir.path().join("data");
        let mut args = vec!["--data-dir", data.to_str().expect("utf-8 temp path")];
        args.extend_from_slice(extra);
        let (proc, base) = start_serve(&args);
        TempServer {
            _proc: proc,
            base,
            dir,
        }
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        self.base.trim_start_matches("http://").to_string()
    }

    /// The server's peak resident memory so far (`VmHWM`), bytes.
    pub fn peak_rss(&self) -> u64 {
        proc_kib(self._proc.0.id(), "VmHWM:") * 1024
    }

    /// The server's resident memory now (`VmRSS`), bytes.
    pub fn rss(&self) -> u64 {
        proc_kib(self._proc.0.id(), "VmRSS:") * 1024
    }
}

/// A `kB` field of `/proc/PID/status`.
pub fn proc_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Regular files under `dir`, at any depth (none if it does not exist).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Uploads a dump's bytes as the body of `POST {base}/api/v1/crashes` (answered 202) and
/// returns the crash id.
pub async fn upload_crash(c: &reqwest::Client, base: &str, dump: &[u8]) -> String {
    let r = c
        .post(format!("{base}/api/v1/crashes"))
        .body(dump.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: serde_json::Value = r.json().await.unwrap();
    v["id"].as_str().unwrap().to_string()
}

/// The body of `GET url` as text.
pub async fn get_text(c: &reqwest::Client, url: &str) -> String {
    c.get(url).send().await.unwrap().text().await.unwrap()
}

/// The body of `GET url` as JSON.
pub async fn get_json(c: &reqwest::Client, url: String) -> serde_json::Value {
    c.get(url).send().await.unwrap().json().await.unwrap()
}

/// Uploads the file at `path` as a binary named `name` (`POST {base}/api/v1/binaries`,
/// answered 201).
pub async fn upload_binary(c: &reqwest::Client, base: &str, path: &Path, name: &str) {
    let r = c
        .post(format!("{base}/api/v1/binaries"))
        .header("x-file-name", name)
        .body(std::fs::read(path).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
}

/// Uploads [`CRASHER`]'s program and its core to `base`, waits for the report (90 s at
/// most) and checks it names the program's functions (from its source, not from our own
/// output).
pub async fn upload_and_check(base: &str, prog: &[u8], core: &[u8]) {
    let c = client();
    let r = c
        .post(format!("{base}/api/v1/binaries"))
        .header("x-file-name", "prog")
        .body(prog.to_vec())
        .send()
        .await
        .unwrap();
    let st = r.status();
    assert_eq!(st, 201, "{}", r.text().await.unwrap());
    let r = c
        .post(format!("{base}/api/v1/crashes"))
        .body(core.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: serde_json::Value = r.json().await.unwrap();
    let id = v["id"].as_str().unwrap().to_string();
    let done = poll_done(&c, base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    let functions: Vec<&str> = done["report"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["frames"].as_array().into_iter().flatten())
        .filter_map(|f| f["function"].as_str())
        .collect();
    for f in ["crash", "middle", "main"] {
        assert!(functions.contains(&f), "{f} missing from {functions:?}");
    }
}

/// The hex number a test program printed after `label` (`offset 0x18`, `block 0x55…`):
/// the evidence a test checks a report against comes from the program, not from an
/// earlier output of ours.
pub fn printed(stdout: &str, label: &str) -> u64 {
    let word = stdout
        .lines()
        .find_map(|l| l.strip_prefix(label)?.split_whitespace().next())
        .unwrap_or_else(|| panic!("the program printed no {label:?}: {stdout:?}"));
    u64::from_str_radix(word.trim_start_matches("0x"), 16).unwrap()
}

/// A `postmortem worker` process with its data in `data` and `args` (database, blob
/// store, sources): the scale-out topology's worker, its stderr shown, killed when dropped.
/// `DEBUGINFOD_URLS` is not passed on, so only the sources in `args` are asked.
pub fn spawn_worker(data: &Path, args: &[&str]) -> Proc {
    let child = Command::new(bin())
        .arg("worker")
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("DEBUGINFOD_URLS")
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn postmortem worker");
    Proc(child)
}

// The PostgreSQL scratch databases, shared with the store's own tests (one file, two
// suites).
#[path = "../../../worker/tests/pg.rs"]
mod pg;
pub use pg::{drop_db, pg_database, pg_migrated};

#[path = "../../../worker/tests/rollups.rs"]
mod rollups;
pub use rollups::rollups_exact;
