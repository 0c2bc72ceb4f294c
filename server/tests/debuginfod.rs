//! `postmortem serve` as a debuginfod server (issue 19, part 4), checked with the real
//! clients: elfutils' `debuginfod-find` and gdb, with `DEBUGINFOD_URLS` pointed at a server
//! on a free port. A program compiled here is split into a stripped executable and its
//! debug file (`objcopy`), both uploaded; the clients must get exactly those bytes, and
//! gdb's backtrace of the program's core, with only the stripped file on disk, must equal
//! the one it gives with the unstripped program.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common;
use common::{client, compile, make_core, TempServer as Server, CRASHER};

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (test.sh installs debuginfod, gdb, binutils)"))
}

fn objcopy(args: &[&str], from: &Path, to: &Path) {
    let out = run(Command::new("objcopy").args(args).arg(from).arg(to));
    assert!(out.status.success(), "objcopy {args:?}: {out:?}");
}

/// Uploads `path` as a binary; returns its build-id and kind.
async fn upload(s: &Server, path: &Path, token: Option<&str>) -> (String, String) {
    let mut req = client()
        .post(s.url("/api/v1/binaries"))
        .header("x-file-name", path.file_name().unwrap().to_str().unwrap())
        .body(std::fs::read(path).unwrap());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    let b = &v["binaries"][0];
    (
        b["build_id"].as_str().unwrap().to_string(),
        b["kind"].as_str().unwrap().to_string(),
    )
}

/// The environment of a debuginfod client of `s`: a fresh cache, this server only.
fn client_env(cmd: &mut Command, s: &Server, cache: &Path, headers: Option<&Path>) {
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", cache)
        .env("DEBUGINFOD_URLS", &s.base)
        .env("DEBUGINFOD_CACHE_PATH", cache)
        .env("DEBUGINFOD_TIMEOUT", "30");
    if let Some(h) = headers {
        cmd.env("DEBUGINFOD_HEADERS_FILE", h);
    }
}

/// The status of a plain `GET path` (no token).
async fn status_of(s: &Server, path: &str) -> u16 {
    client()
        .get(s.url(path))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// `debuginfod-find WHAT ID` against `s`: the fetched file's bytes, or `None` on failure.
fn find(s: &Server, what: &str, id: &str, headers: Option<&Path>) -> Option<Vec<u8>> {
    let cache = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("debuginfod-find");
    cmd.args([what, id]);
    client_env(&mut cmd, s, cache.path(), headers);
    let out = run(&mut cmd);
    if !out.status.success() {
        return None;
    }
    let path = String::from_utf8(out.stdout).unwrap();
    Some(std::fs::read(path.trim()).unwrap())
}

/// gdb's backtrace lines (`#N …`) of `core` with `program`, asking `s` for files when
/// `debuginfod` is given.
fn gdb_bt(program: &Path, core: &Path, debuginfod: Option<&Server>) -> Vec<String> {
    let cache = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("gdb");
    cmd.args(["-batch", "-nx"]);
    match debuginfod {
        Some(s) => {
            client_env(&mut cmd, s, cache.path(), None);
            cmd.args(["-iex", "set debuginfod enabled on"]);
        }
        None => {
            cmd.env_remove("DEBUGINFOD_URLS")
                .args(["-iex", "set debuginfod enabled off"]);
        }
    }
    cmd.args(["-ex", "bt"]).arg(program).arg(core);
    let out = run(&mut cmd);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

struct Split {
    dir: tempfile::TempDir,
    full: PathBuf,
    stripped: PathBuf,
    debug: PathBuf,
    core: PathBuf,
}

/// The crash program compiled, crashed, and split into a stripped executable and its
/// debug file; the stripped one sits alone in a folder of its own (no debug link, nothing
/// beside it), as on a machine that has only what shipped.
fn split_program() -> Split {
    let dir = tempfile::tempdir().unwrap();
    let full = compile(dir.path(), "prog", CRASHER);
    let core = dir.path().join("prog.core");
    std::fs::write(&core, make_core(dir.path(), &full)).unwrap();
    let debug = dir.path().join("prog.debug");
    objcopy(&["--only-keep-debug"], &full, &debug);
    let shipped = dir.path().join("shipped");
    std::fs::create_dir(&shipped).unwrap();
    let stripped = shipped.join("prog");
    objcopy(&["--strip-debug"], &full, &stripped);
    Split {
        dir,
        full,
        stripped,
        debug,
        core,
    }
}

#[tokio::test]
async fn debuginfod_clients_get_the_uploaded_files() {
    let p = split_program();
    let s = Server::start(&[]);
    let (id, kind) = upload(&s, &p.stripped, None).await;
    assert_eq!(kind, "executable");
    let (debug_id, debug_kind) = upload(&s, &p.debug, None).await;
    assert_eq!(
        (debug_id.as_str(), debug_kind.as_str()),
        (id.as_str(), "debug")
    );

    // debuginfod-find gets exactly the uploaded bytes
    let stripped = std::fs::read(&p.stripped).unwrap();
    let debug = std::fs::read(&p.debug).unwrap();
    assert!(find(&s, "executable", &id, None) == Some(stripped));
    assert!(find(&s, "debuginfo", &id, None) == Some(debug));
    // an id nobody uploaded is not found; sources are never kept
    let unknown = "0123456789abcdef0123456789abcdef01234567";
    assert!(find(&s, "executable", unknown, None).is_none());
    assert!(find(&s, "debuginfo", unknown, None).is_none());
    assert_eq!(
        status_of(&s, &format!("/buildid/{id}/source/tmp/prog.c")).await,
        404
    );
    assert_eq!(status_of(&s, "/buildid/not-hex/executable").await, 400);

    // gdb, with only the stripped program on disk, names every frame with file and line
    // as it does with the unstripped program; without the server it cannot
    let reference = gdb_bt(&p.full, &p.core, None);
    assert!(
        reference.len() >= 3 && reference.iter().any(|l| l.contains(" crash (")),
        "{reference:?}"
    );
    assert!(reference.iter().any(|l| l.contains("prog.c:")));
    let fetched = gdb_bt(&p.stripped, &p.core, Some(&s));
    assert_eq!(fetched, reference);
    let alone = gdb_bt(&p.stripped, &p.core, None);
    assert_ne!(
        alone, reference,
        "the stripped program alone gave gdb the same lines"
    );
    drop(p.dir);
}

/// With tokens, the files are read with the `symbols` scope, sent by the client from
/// `DEBUGINFOD_HEADERS_FILE`; without it, or with an `ingest` token, nothing is served.
#[tokio::test]
async fn debuginfod_needs_the_symbols_scope_when_tokens_are_set() {
    let p = split_program();
    let s = Server::start(&[
        "--token",
        "sym-secret:symbols",
        "--token",
        "in-secret:ingest",
    ]);
    let (id, _) = upload(&s, &p.stripped, Some("sym-secret")).await;
    let headers = p.dir.path().join("headers");
    std::fs::write(&headers, "Authorization: Bearer sym-secret\n").unwrap();
    let ingest = p.dir.path().join("ingest-headers");
    std::fs::write(&ingest, "Authorization: Bearer in-secret\n").unwrap();

    let stripped = std::fs::read(&p.stripped).unwrap();
    assert!(find(&s, "executable", &id, Some(&headers)) == Some(stripped));
    assert!(find(&s, "executable", &id, None).is_none());
    assert!(find(&s, "executable", &id, Some(&ingest)).is_none());
    assert_eq!(
        status_of(&s, &format!("/buildid/{id}/executable")).await,
        401
    );
}
