//! The dashboard per project (issue 41) against a real `postmortem serve` on a free port,
//! on SQLite and on PostgreSQL (`POSTMORTEM_SKIP_PG=1` skips the latter): team-a and
//! team-b each upload a program of their own (not shared) and real cores of it, and
//! team-b a core of a second program it never uploads (a missing module only team-b's
//! crash needs). Then every dashboard page team-a's token can open — by bearer token and
//! by HTTP Basic auth, with and without `?project=team-a` — must show team-a's crash,
//! signature and file, and none of team-b's crash ids, signatures, file names or
//! build-ids; team-b's crash page and report answer team-a exactly as a crash that does
//! not exist; the server-wide jobs page refuses it; and the project switcher offers team-a
//! only, where the server-wide token's offers the whole `projects` table. The
//! server-wide token without a project sees both teams' rows (so the absences above are
//! not the page showing nothing). A file team-a uploads with the build-id team-b's crash
//! misses does not make team-b's crash page say "uploaded since: reprocess".

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::Path;

use reqwest::{Method, StatusCode};

use crate::common::{client, compile, make_core};
use crate::projects::{finished, get, json_of, send, upload_id, Answer, Env, A, B, ROOT};

const ALPHA: &str = r#"
#include <stdio.h>
__attribute__((noinline)) void alpha_store_fn(volatile int *p) { *p = 7; }
__attribute__((noinline)) void alpha_outer_fn(volatile int *p) { alpha_store_fn(p); puts(""); }
int main(void) { alpha_outer_fn((volatile int *)0); return 0; }
"#;

const BRAVO: &str = r#"
#include <stdio.h>
__attribute__((noinline)) void bravo_secret_fn(volatile int *p) { *p = 9; }
__attribute__((noinline)) void bravo_outer_fn(volatile int *p) { bravo_secret_fn(p); puts(""); }
int main(void) { bravo_outer_fn((volatile int *)0); return 0; }
"#;

const BRAVO_UNUPLOADED: &str = r#"
#include <stdio.h>
__attribute__((noinline)) void bravo_hidden_fn(volatile char *p) { puts(""); p[5] = 1; }
int main(void) { bravo_hidden_fn((volatile char *)0); return 0; }
"#;

/// What a project put on the server: its crashes' ids and signatures, its file's name and
/// build-id, and the module only its crashes miss.
struct Mark {
    crashes: Vec<String>,
    signatures: Vec<String>,
    file_name: String,
    build_id: String,
}

/// Compiles `src` as `name` in its own directory under `dir`, and crashes it: the
/// program's path and its core.
fn program(dir: &Path, name: &str, src: &str) -> (std::path::PathBuf, Vec<u8>) {
    let own = dir.join(name);
    std::fs::create_dir_all(&own).unwrap();
    let prog = compile(&own, name, src);
    let core = make_core(&own, &prog);
    (prog, core)
}

/// `prog`'s build-id as `readelf -n` prints it.
fn readelf_build_id(prog: &Path) -> String {
    let out = std::process::Command::new("readelf")
        .arg("-n")
        .arg(prog)
        .output()
        .expect("readelf (binutils) must be installed");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("no build-id in readelf -n: {text}"))
        .trim()
        .to_string()
}

/// Uploads `prog` under `token`'s project (not shared): its build-id.
async fn upload_file(c: &reqwest::Client, e: &Env, token: &str, prog: &Path) -> String {
    let name = prog.file_name().unwrap().to_str().unwrap().to_string();
    let bytes = std::fs::read(prog).unwrap();
    let url = e.url("/api/v1/binaries");
    let up = send(c, Method::POST, &url, token, |r| {
        r.header("x-file-name", name).body(bytes)
    })
    .await;
    assert_eq!(up.status, StatusCode::CREATED, "{}", up.body);
    readelf_build_id(prog)
}

/// Uploads `core` with `token` and waits for its report: the crash id and signature.
async fn crash(c: &reqwest::Client, e: &Env, token: &str, core: &[u8]) -> (String, String) {
    let id = upload_id(c, e, token, core).await;
    let record = finished(c, e, token, &id).await;
    assert_eq!(record["status"], "done", "{record}");
    let signature = record["signature"].as_str().unwrap().to_string();
    (id, signature)
}

/// A dashboard page by bearer token, or by HTTP Basic auth with the token as password.
async fn page(c: &reqwest::Client, e: &Env, path: &str, token: &str, basic: bool) -> Answer {
    if !basic {
        return get(c, &e.url(path), token).await;
    }
    let r = c
        .get(e.url(path))
        .basic_auth("someone", Some(token))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let content_type = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    Answer {
        status,
        content_type,
        body: r.text().await.unwrap(),
        retry_after: None,
    }
}

/// The values of the project switcher's options, in order.
fn switcher_options(html: &str) -> Vec<String> {
    let form = html
        .split("id=\"project-switcher\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no project switcher in {html}"));
    let form = form.split("</form>").next().unwrap();
    form.split("<option value=\"")
        .skip(1)
        .map(|o| o.split('"').next().unwrap().to_string())
        .collect()
}

/// HTML as maud writes a text: `&`, `<`, `>`, `"` escaped.
fn escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn dashboard_per_project(pg: bool) {
    let Some(e) = Env::start(pg, &["--workers", "1"]).await else {
        return;
    };
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let (alpha, alpha_core) = program(work.path(), "alpha_prog", ALPHA);
    let (bravo, bravo_core) = program(work.path(), "bravo_prog", BRAVO);
    let (hidden, hidden_core) = program(work.path(), "bravo_unuploaded", BRAVO_UNUPLOADED);

    let alpha_build = upload_file(&c, &e, A, &alpha).await;
    let bravo_build = upload_file(&c, &e, B, &bravo).await;
    let (a_id, a_sig) = crash(&c, &e, A, &alpha_core).await;
    let (b_id, b_sig) = crash(&c, &e, B, &bravo_core).await;
    let (h_id, h_sig) = crash(&c, &e, B, &hidden_core).await;
    // each project's crash was symbolized with its own file
    assert!(a_sig.contains("alpha_store_fn"), "{a_sig}");
    assert!(b_sig.contains("bravo_secret_fn"), "{b_sig}");
    let theirs = Mark {
        crashes: vec![b_id.clone(), h_id.clone()],
        signatures: vec![b_sig.clone(), h_sig.clone()],
        file_name: "bravo_prog".into(),
        build_id: bravo_build.clone(),
    };
    let ours = Mark {
        crashes: vec![a_id.clone()],
        signatures: vec![a_sig.clone()],
        file_name: "alpha_prog".into(),
        build_id: alpha_build.clone(),
    };

    // Every page team-a may open, each way it may ask.
    let pages = [
        "/".to_string(),
        "/?days=all".to_string(),
        "/crashes".to_string(),
        format!("/crashes?signature={}", common_url(&a_sig)),
        format!("/crashes/{a_id}"),
        format!("/crashes/{a_id}/report.json"),
        "/missing".to_string(),
        "/binaries".to_string(),
    ];
    for path in &pages {
        for (query, basic) in [("", false), ("", true), ("project=team-a", true)] {
            let url = with_query(path, query);
            let a = page(&c, &e, &url, A, basic).await;
            assert_eq!(a.status, StatusCode::OK, "{url}: {}", a.body);
            absent(&a.body, &theirs, &url);
            if !path.ends_with("report.json") {
                assert_eq!(switcher_options(&a.body), ["team-a"], "{url}");
                assert!(
                    !a.body.contains("href=\"/jobs"),
                    "{url} offers a server-wide page to a project token"
                );
            }
        }
    }
    // ... and what they show is team-a's.
    let list = page(&c, &e, "/crashes", A, true).await;
    assert!(list.body.contains(&a_id) && list.body.contains(&escaped(&a_sig)));
    let binaries = page(&c, &e, "/binaries", A, true).await;
    assert!(binaries.body.contains(&ours.file_name) && binaries.body.contains(&ours.build_id));
    let detail = page(&c, &e, &format!("/crashes/{a_id}"), A, true).await;
    assert!(detail.body.contains("alpha_store_fn"));
    // links between pages keep the project named
    let named = page(&c, &e, "/crashes?project=team-a", A, true).await;
    assert!(named
        .body
        .contains(&format!("href=\"/crashes/{a_id}?project=team-a\"")));
    assert!(named.body.contains("href=\"/missing?project=team-a\""));
    let missing = page(&c, &e, "/missing", B, true).await;
    assert!(
        missing.body.contains("bravo_unuploaded"),
        "team-b's missing module is not on its own page"
    );

    // team-b's crash answers team-a exactly as a crash that does not exist.
    let nobody = worker::store::crashes::new_id();
    for route in ["/crashes/{id}", "/crashes/{id}/report.json"] {
        let mine = page(&c, &e, &route.replace("{id}", &b_id), A, true).await;
        let none = page(&c, &e, &route.replace("{id}", &nobody), A, true).await;
        assert_eq!(mine.status, StatusCode::NOT_FOUND, "{route}: {}", mine.body);
        assert_eq!(mine.content_type, none.content_type, "{route}");
        assert_eq!(
            mine.body.replace(&b_id, "ID"),
            none.body.replace(&nobody, "ID"),
            "{route}"
        );
    }
    // Reprocess from the dashboard: the same 404 for team-b's crash.
    let url = e.url(&format!("/crashes/{b_id}/reprocess"));
    let re = send(&c, Method::POST, &url, A, |r| r).await;
    assert_eq!(re.status, StatusCode::NOT_FOUND, "{}", re.body);
    // team-a may not name team-b; the server-wide page refuses it.
    let wrong = page(&c, &e, "/crashes?project=team-b", A, true).await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    assert!(!wrong.body.contains(&b_id));
    let groups = page(&c, &e, "/?days=all", A, true).await;
    assert!(groups.body.contains(&escaped(&a_sig)), "team-a's own group");
    for path in ["/jobs"] {
        let refused = page(&c, &e, path, A, true).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(json_of(&refused)["code"], "server-wide-token-required");
    }

    server_wide_view(&c, &e, &ours, &theirs).await;

    // A file team-a uploads is nothing to team-b's crash that misses its build-id: its
    // page does not offer "uploaded since: reprocess" (team-a's file is not used there).
    let before = page(&c, &e, &format!("/crashes/{h_id}"), B, true).await;
    assert!(before.body.contains("bravo_unuploaded") && !before.body.contains("uploaded since"));
    upload_file(&c, &e, A, &hidden).await;
    let after = page(&c, &e, &format!("/crashes/{h_id}"), B, true).await;
    assert_eq!(after.status, StatusCode::OK);
    assert!(
        !after.body.contains("uploaded since"),
        "team-b's crash page counts team-a's file"
    );
    e.finish().await;
}

/// The server-wide token: every project's rows without a project, one project's with
/// `?project=`, and every registered project in the switcher.
async fn server_wide_view(c: &reqwest::Client, e: &Env, ours: &Mark, theirs: &Mark) {
    let every = page(c, e, "/crashes", ROOT, true).await;
    for id in ours.crashes.iter().chain(&theirs.crashes) {
        assert!(
            every.body.contains(id.as_str()),
            "{id} missing from every project's list"
        );
    }
    assert_eq!(
        switcher_options(&every.body),
        ["", "default", "team-a", "team-b", "team-c"]
    );
    let files = page(c, e, "/binaries", ROOT, true).await;
    assert!(files.body.contains(&theirs.file_name) && files.body.contains(&ours.file_name));
    let missing = page(c, e, "/missing", ROOT, true).await;
    assert!(missing.body.contains("bravo_unuploaded"));
    for path in ["/crashes", "/missing", "/binaries"] {
        let url = format!("{path}?project=team-a");
        let a = page(c, e, &url, ROOT, true).await;
        assert_eq!(a.status, StatusCode::OK, "{url}");
        absent(&a.body, theirs, &url);
        let options = switcher_options(&a.body);
        assert_eq!(options.len(), 5, "{url}");
        assert!(
            a.body.contains("<option value=\"team-a\" selected>"),
            "{url}: team-a not selected"
        );
        // the switcher submits to the page it is on
        assert!(a.body.contains(&format!("action=\"{path}\"")), "{url}");
    }
    // the switcher's "every project" (an empty project) is no project, not a bad name
    let all = page(c, e, "/crashes?project=", ROOT, true).await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.body);
    // the groups page: every project's groups without a project, and says so; one
    // project's with it
    let groups = page(c, e, "/?days=all", ROOT, true).await;
    assert_eq!(groups.status, StatusCode::OK);
    assert!(groups.body.contains("id=\"groups-scope\""));
    for sig in ours.signatures.iter().chain(&theirs.signatures) {
        assert!(
            groups.body.contains(&escaped(sig)),
            "{sig} missing from every project's groups"
        );
    }
    let groups = page(c, e, "/?days=all&project=team-a", ROOT, true).await;
    absent(&groups.body, theirs, "/?project=team-a");
    assert!(groups.body.contains("The crash groups of project"));
}

/// None of `theirs` in `body`.
fn absent(body: &str, theirs: &Mark, url: &str) {
    for id in &theirs.crashes {
        assert!(
            !body.contains(id.as_str()),
            "{url} shows another project's crash {id}"
        );
    }
    for sig in &theirs.signatures {
        assert!(
            !body.contains(sig.as_str()) && !body.contains(&escaped(sig)),
            "{url} shows another project's signature {sig}"
        );
    }
    for s in [&theirs.file_name, &theirs.build_id] {
        assert!(
            !body.contains(s.as_str()),
            "{url} shows another project's {s}"
        );
    }
    for name in ["bravo_secret_fn", "bravo_unuploaded", "bravo_hidden_fn"] {
        assert!(!body.contains(name), "{url} shows {name}");
    }
}

fn with_query(path: &str, query: &str) -> String {
    match (query.is_empty(), path.contains('?')) {
        (true, _) => path.to_string(),
        (false, true) => format!("{path}&{query}"),
        (false, false) => format!("{path}?{query}"),
    }
}

/// `s` percent-encoded for a URL's query (all but unreserved characters).
pub(crate) fn common_url(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn per_project_sqlite() {
    dashboard_per_project(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn per_project_postgres() {
    dashboard_per_project(true).await;
}
