//! Dashboard test in a real browser: starts `postmortem serve` (SQLite in a temp dir),
//! uploads the binaries of two C programs compiled here with `gcc -g` and real cores of
//! them (crashed under `ulimit -c unlimited`; core_pattern must be a plain file name),
//! waits for the reports, then drives headless Chromium through chromedriver (WebDriver,
//! the `fantoccini` client) the way a person would: home → sort the groups by a column
//! header → type a product into the filter form and submit (the list narrows, and widens
//! back when the field is cleared) → click a group → filter the crash list → click a
//! crash → its frame rows are the frames gdb prints for the same core (function and
//! file:line) → click Reprocess and watch the page until the crash was processed again →
//! the jobs, missing-symbols and binaries pages through the header links → the project
//! switcher keeps the page and the links keep `?project=`. No page has a
//! script: everything works without JavaScript. `groups_merged_and_split_in_chromium`
//! merges two groups by ticking them, splits a crash out of the merged group, and checks
//! that both decisions survive reprocessing and a signature-rules change (issue 37).
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (`apt-get install chromium
//! chromium-driver`; test.sh does) and gdb. chromedriver is started on a free port and
//! killed at the end. Screenshots of every page are written under the cargo target
//! directory, in `dashboard-screenshots/`, and their paths printed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::common;
use common::{bin, make_core, poll_done, Proc, TempServer as Server};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

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

/// A second program, so that there are two crash groups to sort and filter.
const OTHER: &str = "#include <stdio.h>
__attribute__((noinline)) void parse_header(volatile char *p) { puts(\"\"); p[3] = 1; }
int main(void) { parse_header((volatile char *)0); return 0; }
";

/// Compiles `source` into `dir/name` (with `dir/name.c`).
fn compile(dir: &Path, name: &str, source: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).expect("write C source");
    let out = dir.join(name);
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

/// The frames gdb prints for the crashing thread of `core` that have a source line:
/// (function, `file-name:line`).
fn gdb_frames(prog: &Path, core: &Path) -> Vec<(String, String)> {
    let out = Command::new("gdb")
        .args(["-batch", "-nx", "-ex", "bt"])
        .arg(prog)
        .arg(core)
        .output()
        .expect("gdb must be installed");
    let text = String::from_utf8_lossy(&out.stdout);
    // gdb shows frame #0 once when it loads the core, then the whole backtrace: the
    // backtrace's lines win (keyed by frame number).
    let mut frames = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with('#')) {
        // `#1  0x… in middle_layer (p=0x0) at /dir/crasher.c:7` (frame 0 may lack `0x… in`).
        let (number, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let Ok(number) = number[1..].parse::<usize>() else {
            continue;
        };
        let rest = rest.trim();
        let rest = match rest.split_once(" in ") {
            Some((pc, r)) if pc.starts_with("0x") => r,
            _ => rest,
        };
        let (Some((function, _)), Some((_, at))) =
            (rest.split_once(" ("), rest.rsplit_once(" at "))
        else {
            continue;
        };
        let at = at.rsplit('/').next().unwrap_or(at).to_string();
        frames.insert(number, (function.to_string(), at));
    }
    assert!(!frames.is_empty(), "no gdb frame with a line:\n{text}");
    frames.into_values().collect()
}

/// chromedriver on a free loopback port, killed on drop.
struct Driver {
    _proc: Proc,
    url: String,
}

impl Driver {
    fn start() -> Driver {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run {CHROMEDRIVER} ({e}): apt-get install chromium-driver")
            });
        let proc = Proc(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver {
            _proc: proc,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// A headless Chromium session with a throwaway profile.
    async fn session(&self, profile: &Path) -> Client {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                    "--window-size=1400,1600",
                    format!("--user-data-dir={}", profile.display()),
                ],
            }),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&self.url)
            .await
            .expect("a chromedriver session")
    }
}

/// The browser, with the helpers the walk-through needs.
struct Browser {
    c: Client,
    shots: PathBuf,
}

impl Browser {
    async fn find(&self, css: &str) -> Element {
        match self.c.find(Locator::Css(css)).await {
            Ok(e) => e,
            Err(e) => panic!("no {css:?} on {}: {e}", self.url().await),
        }
    }

    async fn all(&self, css: &str) -> Vec<Element> {
        self.c.find_all(Locator::Css(css)).await.unwrap()
    }

    async fn url(&self) -> String {
        self.c.current_url().await.unwrap().to_string()
    }

    async fn texts(&self, css: &str) -> Vec<String> {
        let mut out = Vec::new();
        for e in self.all(css).await {
            out.push(e.text().await.unwrap());
        }
        out
    }

    /// Clicks the first element matching `css` (a link or a submit button) and waits for
    /// the next page to load.
    async fn click(&self, css: &str) {
        // The old page's root goes stale when the next page replaces it: until then the
        // old page (which has a header too) would answer the next query. A form's submit
        // can return before the navigation it starts.
        let old = self.find("html").await;
        self.find(css).await.click().await.unwrap();
        let start = Instant::now();
        while old.tag_name().await.is_ok() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "clicking {css:?} on {} loaded no new page",
                self.url().await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.loaded().await;
    }

    async fn loaded(&self) {
        self.c
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::Css("header a.brand"))
            .await
            .unwrap();
        // Server-rendered and script-free.
        assert!(
            self.all("script").await.is_empty(),
            "{} has a script",
            self.url().await
        );
    }

    /// Saves a screenshot of the page as `name`.png.
    async fn shot(&self, name: &str) {
        let png = self.c.screenshot().await.unwrap();
        assert!(png.len() > 1000, "screenshot {name} is empty");
        let file = self.shots.join(format!("{name}.png"));
        std::fs::write(&file, png).unwrap();
        println!("screenshot: {}", file.display());
    }

    /// Signatures of the groups page's rows, in order.
    async fn group_rows(&self) -> Vec<(String, String)> {
        let mut rows = Vec::new();
        for tr in self.all("#groups tbody tr").await {
            let sig = tr.find(Locator::Css("td.sig")).await.unwrap();
            let count = tr.find(Locator::Css("td.count")).await.unwrap();
            rows.push((sig.text().await.unwrap(), count.text().await.unwrap()));
        }
        rows
    }
}

async fn upload_core(
    c: &reqwest::Client,
    s: &Server,
    core: &[u8],
    prod: &str,
    ver: &str,
) -> String {
    let form = reqwest::multipart::Form::new()
        .text("prod", prod.to_string())
        .text("ver", ver.to_string())
        .part(
            "upload_file_minidump",
            reqwest::multipart::Part::bytes(core.to_vec()).file_name("core"),
        );
    let r = c
        .post(s.url("/api/v1/crashes"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let id = r.text().await.unwrap();
    serde_json::from_str::<Value>(&id)
        .ok()
        .and_then(|v| v["id"].as_str().map(str::to_string))
        .unwrap_or(id)
        .trim()
        .to_string()
}

async fn upload_binary(c: &reqwest::Client, s: &Server, prog: &Path, name: &str) {
    let r = c
        .post(s.url("/api/v1/binaries"))
        .body(std::fs::read(prog).unwrap())
        .header("x-file-name", name)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
}

#[tokio::test(flavor = "multi_thread")]
async fn dashboard_in_chromium() {
    for tool in [CHROMIUM, CHROMEDRIVER] {
        assert!(
            Path::new(tool).exists(),
            "{tool} is missing: apt-get install -y chromium chromium-driver (test.sh does)"
        );
    }
    let s = Server::start(&[]);
    let c = common::client();
    let work = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (work.path().join("a"), work.path().join("b"));
    std::fs::create_dir_all(&dir_a).unwrap();
    std::fs::create_dir_all(&dir_b).unwrap();
    let prog = compile(&dir_a, "crasher", CRASHER);
    let core = make_core(&dir_a, &prog);
    let core_path = work.path().join("crasher.core");
    std::fs::write(&core_path, &core).unwrap();
    let other = compile(&dir_b, "other", OTHER);
    let other_core = make_core(&dir_b, &other);
    let expected_frames = gdb_frames(&prog, &core_path);

    // Both programs' binaries are uploaded; libc is not, so it must show up as missing.
    upload_binary(&c, &s, &prog, "crasher").await;
    upload_binary(&c, &s, &other, "other").await;
    // Two crashes of the first program (two products), one of the second.
    let id = upload_core(&c, &s, &core, "crashtest<app>", "9.8.7").await;
    let id2 = upload_core(&c, &s, &core, "othertool", "1.0").await;
    let id3 = upload_core(&c, &s, &other_core, "crashtest<app>", "9.8.7").await;
    let done = poll_done(&c, &s.base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    let sig = done["report"]["signature"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no signature: {}", done["report"]["signature"]))
        .to_string();
    // one significant frame: the function that crashed (issue 37)
    assert_eq!(sig, "store_answer", "signature {sig:?}");
    assert_eq!(poll_done(&c, &s.base, &id2).await["status"], "done");
    let done3 = poll_done(&c, &s.base, &id3).await;
    let sig3 = done3["report"]["signature"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(sig3, "parse_header", "signature {sig3:?}");

    let driver = Driver::start();
    let profile = tempfile::tempdir().unwrap();
    let b = Browser {
        c: driver.session(profile.path()).await,
        shots: screenshot_dir(),
    };

    // Home: two groups, most crashes first, with products (from the annotations, shown
    // as text, not markup) and a chart each.
    b.c.goto(&s.url("/")).await.unwrap();
    b.loaded().await;
    assert_eq!(
        b.group_rows().await,
        [(sig.clone(), "2".into()), (sig3.clone(), "1".into())]
    );
    let products = b.texts("#groups tbody tr:first-child .pill").await;
    assert!(
        products.contains(&"crashtest<app> 9.8.7".to_string())
            && products.contains(&"othertool 1.0".to_string()),
        "{products:?}"
    );
    assert_eq!(b.all("#groups svg.chart").await.len(), 2);
    b.shot("home").await;

    // Sorting: the Crashes header flips the order, the Signature header sorts by name.
    b.click("#groups a.sort[data-sort=count]").await;
    assert_eq!(
        b.group_rows().await,
        [(sig3.clone(), "1".into()), (sig.clone(), "2".into())]
    );
    b.click("#groups a.sort[data-sort=signature]").await;
    assert_eq!(b.group_rows().await[0].0, sig3, "parse_… < store_…");
    b.click("#groups a.sort[data-sort=signature]").await;
    assert_eq!(b.group_rows().await[0].0, sig);
    b.shot("home-sorted").await;

    // The filter form: a product narrows the groups to the one crash of that product…
    let product = b.find("form.filters input[name=product]").await;
    product.send_keys("othertool").await.unwrap();
    b.find("form.filters select[name=days]")
        .await
        .select_by_value("all")
        .await
        .unwrap();
    b.click("form.filters button[type=submit]").await;
    assert!(
        b.url().await.contains("product=othertool"),
        "{}",
        b.url().await
    );
    assert_eq!(b.group_rows().await, [(sig.clone(), "1".into())]);
    b.shot("home-filtered").await;
    // …and clearing the field widens it back.
    b.find("form.filters input[name=product]")
        .await
        .clear()
        .await
        .unwrap();
    b.click("form.filters button[type=submit]").await;
    assert_eq!(b.group_rows().await.len(), 2);

    // A group: its crash list.
    b.click("#groups td.sig a[href*=store_answer]").await;
    let ids = b.texts("#crashes tbody td.id").await;
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&id) && ids.contains(&id2), "{ids:?}");
    b.shot("group").await;

    // The crash list's filter form: all three, narrowed by signature and by status.
    b.click("header a[href='/crashes']").await;
    assert_eq!(b.all("#crashes tbody tr").await.len(), 3);
    // Under each signature, the crash's kind and the analysis's sentence, with what the
    // sources do: `*p = 42` and `p[3] = 1` both store through a null pointer, the second
    // at the element's offset.
    let mut reasons = std::collections::HashMap::new();
    for tr in b.all("#crashes tbody tr").await {
        let text = |css: &'static str| {
            let tr = tr.clone();
            async move {
                let e = tr.find(Locator::Css(css)).await;
                let e = e.unwrap_or_else(|e| panic!("no {css} in a crash row: {e}"));
                e.text().await.unwrap()
            }
        };
        let crash = text("td.id").await;
        assert_eq!(text("td.sig .kind").await, "null-pointer", "{crash}");
        reasons.insert(crash, text("td.sig .reason").await);
    }
    assert_eq!(
        reasons[&id], "write through a null pointer: NULL",
        "{reasons:?}"
    );
    assert_eq!(reasons[&id2], reasons[&id], "{reasons:?}");
    assert!(
        reasons[&id3].starts_with("write through a null pointer: NULL + 0x3 "),
        "{reasons:?}"
    );
    b.find("form.filters input[name=signature]")
        .await
        .send_keys(&sig3)
        .await
        .unwrap();
    b.click("form.filters button[type=submit]").await;
    assert_eq!(
        b.texts("#crashes tbody td.id").await,
        std::slice::from_ref(&id3)
    );
    b.find("form.filters select[name=status]")
        .await
        .select_by_value("failed")
        .await
        .unwrap();
    b.click("form.filters button[type=submit]").await;
    assert!(b.all("#crashes tbody tr").await.is_empty());
    b.find("form.filters input[name=signature]")
        .await
        .clear()
        .await
        .unwrap();
    b.find("form.filters select[name=status]")
        .await
        .select_by_value("")
        .await
        .unwrap();
    b.click("form.filters button[type=submit]").await;
    assert_eq!(b.all("#crashes tbody tr").await.len(), 3);
    b.shot("crashes").await;

    // The crash: the crashed thread's frames are gdb's, function and file:line.
    b.click(&format!("#crashes a[href='/crashes/{id}']")).await;
    let mut rows = Vec::new();
    for tr in b.all("#crashed + table.frames tbody tr").await {
        let function = tr.find(Locator::Css("td.fn")).await.unwrap();
        let loc = tr.find(Locator::Css("td.loc")).await.unwrap();
        rows.push((function.text().await.unwrap(), loc.text().await.unwrap()));
    }
    assert!(rows.len() >= expected_frames.len(), "{rows:?}");
    for (i, ((function, loc), (gdb_function, gdb_loc))) in
        rows.iter().zip(&expected_frames).enumerate()
    {
        assert_eq!(
            function, gdb_function,
            "frame {i}: {rows:?} vs gdb {expected_frames:?}"
        );
        assert!(
            loc.ends_with(&format!("/{gdb_loc}")) || loc == gdb_loc,
            "frame {i}: {loc} vs gdb {gdb_loc}"
        );
    }
    assert_eq!(rows[0], ("store_answer".to_string(), rows[0].1.clone()));
    assert!(rows[0].1.ends_with("crasher.c:5"), "{rows:?}");
    // Under the signature, the analysis and every piece of its evidence, name and value:
    // the store in store_answer (called from middle_layer) through the null pointer, at
    // offset 0.
    let analysis = b.find("#analysis").await.text().await.unwrap();
    assert!(
        analysis.contains("null-pointer write through a null pointer: NULL"),
        "{analysis}"
    );
    let names = b.texts("#analysis dl.evidence dt").await;
    let values = b.texts("#analysis dl.evidence dd").await;
    let evidence: std::collections::BTreeMap<String, String> =
        names.into_iter().zip(values).collect();
    for (name, value) in [
        ("function", "store_answer"),
        ("caller", "middle_layer"),
        ("address", "0x0"),
        ("offset", "0x0"),
        ("access", "write"),
    ] {
        assert_eq!(
            evidence.get(name).map(String::as_str),
            Some(value),
            "{evidence:?}"
        );
    }
    let reported: std::collections::BTreeMap<String, String> =
        serde_json::from_value(done["report"]["crash"]["analysis"]["evidence"].clone()).unwrap();
    assert_eq!(evidence, reported, "the page shows all the evidence");
    assert!(!b.all("details").await.is_empty(), "other threads folded");
    let missing_rows = b.texts("#modules tr.missing").await.join("\n");
    assert!(missing_rows.contains("libc.so"), "{missing_rows}");
    assert!(missing_rows.contains("/api/v1/binaries"), "{missing_rows}");
    let processed = b.find("#processed").await.text().await.unwrap();
    assert!(processed.ends_with("1 time"), "{processed}");
    b.shot("crash").await;

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

    // Reprocess: the button queues the crash, the page comes back; reloading it shows the
    // crash processed a second time.
    b.click("form[action$='/reprocess'] button").await;
    assert!(
        b.url().await.ends_with(&format!("/crashes/{id}")),
        "{}",
        b.url().await
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = b.find("h1 .pill").await.text().await.unwrap();
        let processed = match b.c.find(Locator::Css("#processed")).await {
            Ok(e) => e.text().await.unwrap(),
            Err(_) => String::new(),
        };
        if status == "done" && processed.ends_with("2 times") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not reprocessed: {status} {processed}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        b.c.refresh().await.unwrap();
        b.loaded().await;
    }
    b.shot("crash-reprocessed").await;
    let again = poll_done(&c, &s.base, &id).await;
    assert_ne!(again["finished_at"], done["finished_at"]);
    assert_eq!(
        again["report"], done["report"],
        "reprocessing is deterministic"
    );

    // Jobs: three crashes done, none failed.
    b.click("header a[href='/jobs']").await;
    let queue = b.texts("#queue tr").await;
    assert!(queue.contains(&"done 3".to_string()), "{queue:?}");
    assert!(queue.contains(&"failed 0".to_string()), "{queue:?}");
    b.shot("jobs").await;

    // Missing symbols: libc (not uploaded) with its upload command; the programs are not.
    b.click("header a[href='/missing']").await;
    let modules = b.texts("#missing tbody td:first-child").await;
    assert!(modules.iter().any(|m| m.contains("libc.so")), "{modules:?}");
    assert!(
        !modules
            .iter()
            .any(|m| m.ends_with("crasher") || m.ends_with("other")),
        "uploaded module listed: {modules:?}"
    );
    assert!(
        !modules.iter().any(|m| m.contains("vdso")),
        "the vdso comes from the dump: {modules:?}"
    );
    let commands = b.texts("#missing pre.cmd").await;
    assert!(
        commands.iter().all(|c| c.starts_with("curl ")),
        "{commands:?}"
    );
    b.shot("missing").await;

    b.click("header a[href='/binaries']").await;
    let files = b.texts("#binaries tbody td:first-child").await;
    assert!(files.contains(&"crasher".to_string()), "{files:?}");
    b.shot("binaries").await;

    // The project switcher (issue 41): without tokens the caller is server-wide, offered
    // "every project" and the projects table; switching keeps the page and names the
    // project, and the header's links keep it.
    let options = b.texts("#project-switcher option").await;
    assert_eq!(options, ["every project", "default"], "{options:?}");
    b.find("#project-switcher select[name=project]")
        .await
        .select_by_value("default")
        .await
        .unwrap();
    b.click("#project-switcher button[type=submit]").await;
    let url = b.url().await;
    assert!(url.ends_with("/binaries?project=default"), "{url}");
    let files = b.texts("#binaries tbody td:first-child").await;
    assert!(files.contains(&"crasher".to_string()), "{files:?}");
    b.click("header a[href='/crashes?project=default']").await;
    let crashes = b.all("#crashes tbody tr").await;
    assert_eq!(crashes.len(), 3, "the default project's crashes");
    let first = b.find("#crashes td.id a").await;
    let href = first.attr("href").await.unwrap().unwrap_or_default();
    assert!(href.ends_with("?project=default"), "{href}");
    b.shot("switched-project").await;

    b.c.close().await.unwrap();
    drop(driver);

    // An unknown crash cannot be reprocessed.
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
    let prog = compile(work.path(), "crasher", CRASHER);
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
    assert_eq!(
        builtin["signature"]["text"], "store_answer",
        "{}",
        builtin["signature"]
    );
    assert_eq!(builtin["signature"]["frames"], serde_json::json!([0]));

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
    let c = common::client();
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
    // said as what it is (issue 34): a cross-site request, not a token's missing scope
    let problem: serde_json::Value = r.json().await.unwrap();
    assert_eq!(problem["code"], "cross-site", "{problem}");
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("http://evil.example") && !detail.contains("scope"),
        "{detail}"
    );
    let r = c
        .post(s.url("/crashes/x/reprocess"))
        .basic_auth("anyone", Some("s3cret"))
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let problem: serde_json::Value = r.json().await.unwrap();
    assert_eq!(problem["code"], "cross-site", "{problem}");
    let r = c
        .post(s.url("/crashes/x/reprocess"))
        .basic_auth("anyone", Some("s3cret"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // the groups' merge and split forms: the same checks
    for path in ["/groups/merge", "/groups/split"] {
        let form = [("group", "a"), ("group", "b"), ("crash", "x")];
        let r = c
            .post(s.url(path))
            .basic_auth("anyone", Some("s3cret"))
            .header("sec-fetch-site", "cross-site")
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
        let problem: serde_json::Value = r.json().await.unwrap();
        assert_eq!(problem["code"], "cross-site", "{path}: {problem}");
        let r = c
            .post(s.url(path))
            .basic_auth("anyone", Some("up"))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
        // same origin, admin: refused only because there are no such groups
        let r = c
            .post(s.url(path))
            .basic_auth("anyone", Some("s3cret"))
            .header("sec-fetch-site", "same-origin")
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
    }
}

/// Queues every crash again through the API and waits until each was processed once more.
async fn reprocess_all(c: &reqwest::Client, base: &str, ids: &[&str]) {
    let finished = |v: &Value| v["finished_at"].as_i64().unwrap_or(0);
    let mut before = Vec::new();
    for id in ids {
        before.push(finished(
            &common::get_json(c, format!("{base}/api/v1/crashes/{id}")).await,
        ));
    }
    let r = c
        .post(format!("{base}/api/v1/reprocess"))
        .json(&json!({ "all": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(120);
    for (id, was) in ids.iter().zip(before) {
        loop {
            let v = common::get_json(c, format!("{base}/api/v1/crashes/{id}")).await;
            if v["status"] == "done" && finished(&v) > was {
                break;
            }
            assert!(Instant::now() < deadline, "{id} not reprocessed: {v}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Issue 37 in a real browser: two groups merged by ticking them on the groups page, one
/// crash split out of the merged group from its crash list under a name typed there; then
/// every crash reprocessed, and the server restarted under rules that give every crash
/// another signature and everything reprocessed again: the groups page still shows the
/// merged group and the split one. Finally the merge is undone from the group's page.
#[tokio::test(flavor = "multi_thread")]
async fn groups_merged_and_split_in_chromium() {
    for tool in [CHROMIUM, CHROMEDRIVER] {
        assert!(
            Path::new(tool).exists(),
            "{tool} is missing: apt-get install -y chromium chromium-driver (test.sh does)"
        );
    }
    let work = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (work.path().join("a"), work.path().join("b"));
    std::fs::create_dir_all(&dir_a).unwrap();
    std::fs::create_dir_all(&dir_b).unwrap();
    let prog = compile(&dir_a, "crasher", CRASHER);
    let core = make_core(&dir_a, &prog);
    let other = compile(&dir_b, "other", OTHER);
    let other_core = make_core(&dir_b, &other);
    let s = Server::start(&[]);
    let c = common::client();
    upload_binary(&c, &s, &prog, "crasher").await;
    upload_binary(&c, &s, &other, "other").await;
    let id1 = upload_core(&c, &s, &core, "app", "1").await;
    let id2 = upload_core(&c, &s, &core, "app", "1").await;
    let id3 = upload_core(&c, &s, &other_core, "app", "1").await;
    for id in [&id1, &id2, &id3] {
        assert_eq!(poll_done(&c, &s.base, id).await["status"], "done");
    }

    let driver = Driver::start();
    let profile = tempfile::tempdir().unwrap();
    let b = Browser {
        c: driver.session(profile.path()).await,
        shots: screenshot_dir(),
    };
    b.c.goto(&s.url("/")).await.unwrap();
    b.loaded().await;
    assert_eq!(
        b.group_rows().await,
        [
            ("store_answer".into(), "2".into()),
            ("parse_header".into(), "1".into())
        ]
    );
    // tick both, choose store_answer as the one to keep, merge
    for sig in ["store_answer", "parse_header"] {
        b.find(&format!("#merge input[name=group][value={sig}]"))
            .await
            .click()
            .await
            .unwrap();
    }
    b.find("#merge input[name=into][value=store_answer]")
        .await
        .click()
        .await
        .unwrap();
    b.click("#merge button[type=submit]").await;
    assert!(
        b.url().await.ends_with("/crashes?signature=store_answer"),
        "{}",
        b.url().await
    );
    let mut ids = b.texts("#crashes tbody td.id").await;
    ids.sort();
    let mut all = vec![id1.clone(), id2.clone(), id3.clone()];
    all.sort();
    assert_eq!(ids, all);
    assert_eq!(b.texts("#merged td.sig").await, ["parse_header"]);
    b.shot("group-merged").await;

    // split id2 out under a name typed into the form
    b.find(&format!("#crashes input[name=crash][value='{id2}']"))
        .await
        .click()
        .await
        .unwrap();
    b.find("#split input[name=name]")
        .await
        .send_keys("store_answer, second look")
        .await
        .unwrap();
    b.click("#split button[type=submit]").await;
    assert_eq!(
        b.texts("#crashes tbody td.id").await,
        std::slice::from_ref(&id2)
    );
    b.shot("group-split").await;

    let decided = |rows: Vec<(String, String)>| {
        let mut rows = rows;
        rows.sort();
        rows
    };
    let expected = vec![
        ("store_answer".to_string(), "2".to_string()),
        ("store_answer, second look".to_string(), "1".to_string()),
    ];
    b.c.goto(&s.url("/")).await.unwrap();
    b.loaded().await;
    assert_eq!(decided(b.group_rows().await), expected);

    // reprocessing keeps both decisions
    let ids = [id1.as_str(), id2.as_str(), id3.as_str()];
    reprocess_all(&c, &s.base, &ids).await;
    b.c.refresh().await.unwrap();
    b.loaded().await;
    assert_eq!(decided(b.group_rows().await), expected);

    // a rules change: every crash gets another signature; the decisions hold
    let rules = work.path().join("rules.txt");
    std::fs::write(
        &rules,
        "extends builtin\nirrelevant store_answer\nirrelevant parse_header\n",
    )
    .unwrap();
    let s = s.restart(&["--signature-rules", rules.to_str().unwrap()]);
    reprocess_all(&c, &s.base, &ids).await;
    for id in ids {
        let v = common::get_json(&c, s.url(&format!("/api/v1/crashes/{id}"))).await;
        let computed = v["computed_signature"].as_str().unwrap_or_default();
        assert!(
            !computed.is_empty() && computed != "store_answer" && computed != "parse_header",
            "{id}: {computed:?}"
        );
    }
    b.c.goto(&s.url("/")).await.unwrap();
    b.loaded().await;
    assert_eq!(decided(b.group_rows().await), expected);
    b.shot("groups-after-rules-change").await;

    // the merged group's page undoes the merge: parse_header's crash goes back
    b.click("#groups td.sig a[href='/crashes?signature=store_answer']")
        .await;
    let rows = b.texts("#crashes tbody td.sig .computed").await;
    assert!(!rows.is_empty(), "the computed signatures are shown");
    b.click("#merged button.undo").await;
    assert!(
        b.url().await.ends_with("/crashes?signature=parse_header"),
        "{}",
        b.url().await
    );
    assert_eq!(
        b.texts("#crashes tbody td.id").await,
        std::slice::from_ref(&id3)
    );
    b.c.goto(&s.url("/")).await.unwrap();
    b.loaded().await;
    assert_eq!(
        decided(b.group_rows().await),
        [
            ("parse_header".to_string(), "1".to_string()),
            ("store_answer".to_string(), "1".to_string()),
            ("store_answer, second look".to_string(), "1".to_string()),
        ]
    );
    b.shot("groups-merge-undone").await;
    b.c.close().await.unwrap();
}
