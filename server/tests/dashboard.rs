//! Dashboard test in a real browser: starts `postmortem serve` (SQLite in a temp dir),
//! uploads the binary of a C program compiled here with `gcc -g` and a real core of it
//! (crashed under `ulimit -c unlimited`; core_pattern must be a plain file name), waits
//! for the report, then loads the pages in headless Chromium (`--dump-dom` for the DOM
//! as the browser built it, `--screenshot` for a picture): home → group → crash detail,
//! the missing-symbols page, the jobs and binaries pages, and the Reprocess form.
//!
//! Needs `/usr/bin/chromium` (`apt-get install chromium chromium-driver`; test.sh does).
//! Screenshots are written under the cargo target directory, in `dashboard-screenshots/`,
//! and their paths printed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{bin, make_core, start_serve, Proc};

const CHROMIUM: &str = "/usr/bin/chromium";

/// A running server; killed on drop.
struct Server {
    _proc: Proc,
    base: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let mut args = vec!["--data-dir", data.to_str().expect("utf-8 temp path")];
        args.extend_from_slice(extra);
        let (proc, base) = start_serve(&args);
        Server {
            _proc: proc,
            base,
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }
}

/// The crashing store is on line 5 (`crasher.c:5`), in `store_answer`; a second thread
/// sleeps, so the page has another thread to fold away.
const CRASHER: &str = "#include <stdio.h>
#include <pthread.h>
#include <unistd.h>
__attribute__((noinline)) void store_answer(volatile int *p) {
    *p = 42;
}
__attribute__((noinline)) void middle_layer(volatile int *p) { store_answer(p); puts(\"\"); }
static void *sleeper(void *arg) { (void)arg; for (;;) sleep(1); return 0; }
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, sleeper, 0);
    usleep(100000);
    middle_layer((volatile int *)0);
    return 0;
}
";

fn compile(dir: &Path) -> PathBuf {
    let c = dir.join("crasher.c");
    std::fs::write(&c, CRASHER).expect("write C source");
    let out = dir.join("crasher");
    let st = Command::new("gcc")
        .args(["-g", "-O0", "-pthread", "-Wl,--build-id", "-o"])
        .arg(&out)
        .arg(&c)
        .status()
        .expect("gcc must be installed");
    assert!(st.success(), "gcc failed");
    out
}

/// Where screenshots go: `dashboard-screenshots/` in the cargo target directory (the
/// parent of the `CARGO_TARGET_TMPDIR` cargo gives integration tests).
fn screenshot_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.parent().unwrap_or(tmp).join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).expect("create screenshot dir");
    dir
}

/// Headless Chromium with a throwaway profile and nothing talking to the network.
fn chromium(profile: &Path) -> Command {
    let mut c = Command::new(CHROMIUM);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .stdin(Stdio::null());
    c
}

/// The DOM Chromium built for `url`.
fn dump_dom(profile: &Path, url: &str) -> String {
    let out = chromium(profile)
        .arg("--dump-dom")
        .arg(url)
        .stderr(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {CHROMIUM} ({e}): apt-get install chromium"));
    assert!(out.status.success(), "chromium --dump-dom {url} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A full-page-width screenshot of `url` into `file`; returns its path.
fn screenshot(profile: &Path, url: &str, file: &Path) -> PathBuf {
    let _ = std::fs::remove_file(file);
    let st = chromium(profile)
        .arg(format!("--screenshot={}", file.display()))
        .arg("--window-size=1400,1600")
        .arg("--hide-scrollbars")
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run chromium");
    assert!(st.success(), "chromium --screenshot {url} failed");
    let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    assert!(len > 1000, "screenshot {} is empty", file.display());
    println!("screenshot: {}", file.display());
    file.to_path_buf()
}

/// The first `href` in `dom` that starts with `prefix`, HTML entities of `&` undone.
fn first_href(dom: &str, prefix: &str) -> String {
    let needle = format!("href=\"{prefix}");
    let start = dom
        .find(&needle)
        .unwrap_or_else(|| panic!("no link starting {prefix:?} in:\n{dom}"))
        + "href=\"".len();
    let end = start + dom[start..].find('"').expect("closing quote");
    dom[start..end].replace("&amp;", "&")
}

async fn poll_done(c: &reqwest::Client, s: &Server, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v: Value = c
            .get(s.url(&format!("/api/v1/crashes/{id}")))
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
            Instant::now() < deadline,
            "crash {id} still {st} after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn dashboard_in_chromium() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: apt-get install -y chromium chromium-driver (test.sh does)"
    );
    let s = Server::start(&[]);
    let c = reqwest::Client::new();
    let work = tempfile::tempdir().unwrap();
    let prog = compile(work.path());
    let core = make_core(work.path(), &prog);

    // The program's binary is uploaded; libc is not, so it must show up as missing.
    let r = c
        .post(s.url("/api/v1/binaries"))
        .body(std::fs::read(&prog).unwrap())
        .header("x-file-name", "crasher")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let form = reqwest::multipart::Form::new()
        .text("prod", "crashtest<app>")
        .text("ver", "9.8.7")
        .part(
            "upload_file_minidump",
            reqwest::multipart::Part::bytes(core).file_name("core"),
        );
    let r = c
        .post(s.url("/api/v1/crashes"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let id = r.text().await.unwrap();
    let id = serde_json::from_str::<Value>(&id)
        .ok()
        .and_then(|v| v["id"].as_str().map(str::to_string))
        .unwrap_or(id)
        .trim()
        .to_string();
    let done = poll_done(&c, &s, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    let sig = done["report"]["signature"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no signature: {}", done["report"]["signature"]));
    assert!(
        sig.starts_with("store_answer | middle_layer | main"),
        "signature {sig:?}"
    );

    let profile = tempfile::tempdir().unwrap();
    let shots = screenshot_dir();

    // Home: one group, with the product from the annotations (escaped) and a chart.
    let home = dump_dom(profile.path(), &s.url("/"));
    assert!(
        home.contains("store_answer | middle_layer | main"),
        "{home}"
    );
    assert!(home.contains("crashtest&lt;app&gt; 9.8.7"), "{home}");
    assert!(home.contains("<svg"), "no chart: {home}");
    screenshot(profile.path(), &s.url("/"), &shots.join("home.png"));

    // The group's crash list, then the crash.
    let group_url = s.url(&first_href(&home, "/crashes?signature="));
    let list = dump_dom(profile.path(), &group_url);
    assert!(list.contains(&id), "{list}");
    screenshot(profile.path(), &group_url, &shots.join("group.png"));
    let detail_href = first_href(&list, "/crashes/");
    assert_eq!(detail_href, format!("/crashes/{id}"));
    let detail_url = s.url(&detail_href);
    let detail = dump_dom(profile.path(), &detail_url);
    // The crashed thread's frames, symbolized from the uploaded binary's DWARF.
    let crashed = detail
        .split("id=\"crashed\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no crashed thread section: {detail}"));
    let crashed = crashed.split("Registers").next().unwrap_or_default();
    assert!(
        crashed.contains(">store_answer</td>"),
        "crashing function missing: {crashed}"
    );
    assert!(crashed.contains("crasher.c:5</td>"), "file:line: {crashed}");
    assert!(crashed.contains(">middle_layer</td>"), "{crashed}");
    assert!(crashed.contains(">main</td>"), "{crashed}");
    assert!(detail.contains("<details"), "other threads: {detail}");
    assert!(detail.contains("status-missing"), "libc missing: {detail}");
    assert!(
        detail.contains("/api/v1/binaries"),
        "upload command: {detail}"
    );
    assert!(detail.contains("Reprocess"), "{detail}");
    screenshot(profile.path(), &detail_url, &shots.join("crash.png"));

    // Raw report and dump links work.
    let raw: Value = c
        .get(s.url(&format!("/crashes/{id}/report.json")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(raw["schema"], "postmortem.report/1");
    let dump = c
        .get(s.url(&format!("/api/v1/crashes/{id}/dump")))
        .send()
        .await
        .unwrap();
    assert_eq!(dump.status(), 200);
    assert_eq!(
        dump.bytes().await.unwrap().len() as u64,
        done["dump"]["size"]
    );

    // Missing symbols: libc (not uploaded) with its upload command; the program is not.
    let missing = dump_dom(profile.path(), &s.url("/missing"));
    assert!(missing.contains("libc.so"), "{missing}");
    assert!(missing.contains("curl"), "{missing}");
    assert!(
        !missing.contains(">crasher</td>"),
        "uploaded module listed: {missing}"
    );
    assert!(
        !missing.contains("vdso"),
        "the vdso comes from the dump: {missing}"
    );
    screenshot(
        profile.path(),
        &s.url("/missing"),
        &shots.join("missing.png"),
    );

    let jobs = dump_dom(profile.path(), &s.url("/jobs"));
    assert!(jobs.contains("done"), "{jobs}");
    screenshot(profile.path(), &s.url("/jobs"), &shots.join("jobs.png"));
    let bins = dump_dom(profile.path(), &s.url("/binaries"));
    assert!(bins.contains("crasher"), "{bins}");
    screenshot(
        profile.path(),
        &s.url("/binaries"),
        &shots.join("binaries.png"),
    );

    // Reprocess (the form's POST): the crash is queued again and processed again.
    let no_redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = no_redirect
        .post(s.url(&format!("/crashes/{id}/reprocess")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(
        r.headers()["location"].to_str().unwrap(),
        format!("/crashes/{id}")
    );
    let again = poll_done(&c, &s, &id).await;
    assert_eq!(again["status"], "done");
    assert_eq!(
        again["report"], done["report"],
        "reprocessing is deterministic"
    );
    let r = c
        .post(s.url("/crashes/nope/reprocess"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// `--signature-rules` replaces the built-in rules for `walk`, and `serve` refuses a
/// rules file it cannot read.
#[test]
fn signature_rules_flag() {
    let work = tempfile::tempdir().unwrap();
    let prog = compile(work.path());
    let core = make_core(work.path(), &prog);
    let core_path = work.path().join("the.core");
    std::fs::write(&core_path, core).unwrap();
    let symbols = work.path().join("symbols");
    std::fs::create_dir(&symbols).unwrap();
    std::fs::copy(&prog, symbols.join("crasher")).unwrap();
    let walk = |extra: &[&Path]| -> Value {
        let mut cmd = Command::new(bin());
        cmd.arg("walk")
            .arg(&core_path)
            .arg("--symbols")
            .arg(&symbols);
        if let Some(rules) = extra.first() {
            cmd.arg("--signature-rules").arg(rules);
        }
        let out = cmd.output().expect("run walk");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("report JSON")
    };
    let builtin = walk(&[]);
    assert!(
        builtin["signature"]["text"]
            .as_str()
            .unwrap()
            .starts_with("store_answer | middle_layer | main"),
        "{}",
        builtin["signature"]
    );
    assert_eq!(builtin["signature"]["frames"], serde_json::json!([0, 1, 2]));

    let rules = work.path().join("rules.txt");
    std::fs::write(
        &rules,
        "# one frame, and the store is never the culprit\nframes 1\nskip store_*\n",
    )
    .unwrap();
    let custom = walk(&[&rules]);
    assert_eq!(custom["signature"]["text"], "middle_layer");
    assert_eq!(custom["signature"]["frames"], serde_json::json!([1]));

    let bad = work.path().join("bad.txt");
    std::fs::write(&bad, "skip a\nfrobnicate b\n").unwrap();
    let out = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(work.path().join("data"))
        .arg("--signature-rules")
        .arg(&bad)
        .output()
        .expect("run serve");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2"), "{err}");
}

/// With tokens, a browser gets a Basic-auth challenge and may use the admin token as the
/// password; a token without `admin` is refused; a cross-site Reprocess POST is refused.
#[tokio::test]
async fn tokens_and_basic_auth() {
    let s = Server::start(&["--token", "s3cret:admin", "--token", "up:ingest"]);
    let c = reqwest::Client::new();
    let r = c.get(s.url("/")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(challenge.starts_with("Basic "), "{challenge}");
    for page in ["/", "/crashes", "/missing", "/binaries", "/jobs"] {
        let r = c
            .get(s.url(page))
            .basic_auth("anyone", Some("s3cret"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{page}");
        let r = c
            .get(s.url(page))
            .bearer_auth("s3cret")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{page}");
    }
    let r = c
        .get(s.url("/"))
        .basic_auth("anyone", Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = c
        .get(s.url("/"))
        .basic_auth("anyone", Some("up"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = c
        .post(s.url("/crashes/x/reprocess"))
        .basic_auth("anyone", Some("s3cret"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = c
        .post(s.url("/crashes/x/reprocess"))
        .basic_auth("anyone", Some("s3cret"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}
