//! Crash groups per project (issue 41, migration 0026) against a real `postmortem serve`
//! on a free port, on SQLite and on PostgreSQL (`POSTMORTEM_SKIP_PG=1` skips the latter).
//!
//! team-a and team-b crash the same program (one signature in both), and each crashes a
//! program of its own; team-b's crash of the shared program carries a product and
//! version. Then team-a's token, on the API and the dashboard, sees its own groups with
//! its own counts and none of team-b's (signature, count, product, version, crash ids);
//! team-b's group answers team-a exactly as a group that does not exist (404, the same
//! body) on every decision route (merge, split, undo a merge, API and dashboard) and on
//! its crash list; a split of team-a's group naming team-b's crash moves nothing; a merge
//! of team-a's moves team-a's crashes only. A server-wide token sees each project's groups
//! as its own rows without `?project=`, one project's with it. Deleting a crash and
//! reprocessing keep every rollup equal to its recount from `crashes`, project by
//! project (`worker/tests/rollups.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::Path;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{client, compile, make_core, rollups_exact};
use crate::projects::{finished, get, json_of, send, upload_id, Answer, Env, A, B, ROOT};
use crate::projects_dashboard::common_url;

const SHARED: &str = r#"
#include <stdio.h>
__attribute__((noinline)) void shared_store(volatile int *p) { *p = 7; }
int main(void) { shared_store((volatile int *)0); puts(""); return 0; }
"#;

const ALPHA: &str = r#"
#include <stdio.h>
__attribute__((noinline)) void alpha_store(volatile int *p) { *p = 8; }
int main(void) { alpha_store((volatile int *)0); puts(""); return 0; }
"#;

const BRAVO: &str = r#"
#include <stdio.h>
__attribute__((noinline)) void bravo_store(volatile int *p) { *p = 9; }
int main(void) { bravo_store((volatile int *)0); puts(""); return 0; }
"#;

/// `name` compiled from `src` in its own directory under `dir`.
fn program(dir: &Path, name: &str, src: &str) -> std::path::PathBuf {
    let own = dir.join(name);
    std::fs::create_dir_all(&own).unwrap();
    compile(&own, name, src)
}

/// A core of `prog` from a run of its own (each run has its own addresses: two cores of
/// one program are two crashes, not one upload retried).
fn core(prog: &Path, run: &str) -> Vec<u8> {
    let dir = prog.parent().unwrap().join(run);
    std::fs::create_dir_all(&dir).unwrap();
    make_core(&dir, prog)
}

/// A crash of `token`'s project, processed: its id and signature.
async fn crash(c: &reqwest::Client, e: &Env, token: &str, core: &[u8]) -> (String, String) {
    let id = upload_id(c, e, token, core).await;
    let record = finished(c, e, token, &id).await;
    assert_eq!(record["status"], "done", "{record}");
    (id, record["signature"].as_str().unwrap().to_string())
}

/// `GET /api/v1/groups` with `token` (and `query`), every page: (project, group) → count.
async fn api_groups(
    c: &reqwest::Client,
    e: &Env,
    token: &str,
    query: &str,
) -> BTreeMap<(String, String), i64> {
    let mut out = BTreeMap::new();
    let mut after = String::new();
    for _ in 0..20 {
        let url = e.url(&format!("/api/v1/groups?limit=1{query}{after}"));
        let page = get(c, &url, token).await;
        assert_eq!(page.status, StatusCode::OK, "{url}: {}", page.body);
        let v = json_of(&page);
        for g in v["groups"].as_array().unwrap() {
            let key = (
                g["project"].as_str().unwrap().into(),
                g["group"].as_str().unwrap().into(),
            );
            assert!(
                out.insert(key, g["count"].as_i64().unwrap()).is_none(),
                "{v}"
            );
        }
        match v["next"].as_str() {
            Some(n) => {
                after = format!("&after={}", common_url(n));
                if let Some(p) = v["next_project"].as_str() {
                    after.push_str(&format!("&after_project={p}"));
                }
            }
            None => return out,
        }
    }
    panic!("more than 20 pages of groups");
}

/// A JSON POST with `token`.
async fn post(c: &reqwest::Client, e: &Env, path: &str, token: &str, body: Value) -> Answer {
    send(c, Method::POST, &e.url(path), token, |r| r.json(&body)).await
}

/// A dashboard form POST with `token` (no cross-site headers: curl's).
async fn form(
    c: &reqwest::Client,
    e: &Env,
    path: &str,
    token: &str,
    fields: &[(&str, &str)],
) -> Answer {
    let fields: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    send(c, Method::POST, &e.url(path), token, |r| r.form(&fields)).await
}

/// `theirs` answers like `never`, byte for byte but for the name itself.
fn same_as_missing(
    theirs: &Answer,
    never: &Answer,
    their_name: &str,
    never_name: &str,
    what: &str,
) {
    assert_eq!(
        theirs.status,
        StatusCode::NOT_FOUND,
        "{what}: {}",
        theirs.body
    );
    assert_eq!(theirs.status, never.status, "{what}");
    assert_eq!(theirs.content_type, never.content_type, "{what}");
    assert_eq!(
        theirs.body.replace(their_name, "NAME"),
        never.body.replace(never_name, "NAME"),
        "{what}"
    );
}

async fn groups_per_project(pg: bool) {
    let Some(e) = Env::start(pg, &[]).await else {
        return;
    };
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let shared = program(work.path(), "shared_prog", SHARED);
    let alpha = program(work.path(), "alpha_prog", ALPHA);
    let bravo = program(work.path(), "bravo_prog", BRAVO);
    let (a1, shared_sig) = crash(&c, &e, A, &core(&shared, "run1")).await;
    let (a2, sig2) = crash(&c, &e, A, &core(&shared, "run2")).await;
    assert_eq!(sig2, shared_sig);
    let (a3, alpha_sig) = crash(&c, &e, A, &core(&alpha, "run1")).await;
    // team-b's crash of the shared program, with a product and version (Crashpad's form)
    let b_core = core(&shared, "run3");
    let multipart = reqwest::multipart::Form::new()
        .text("prod", "bravo-product")
        .text("ver", "9.8.7")
        .part(
            "upload_file_minidump",
            reqwest::multipart::Part::bytes(b_core).file_name("c"),
        );
    let up = send(&c, Method::POST, &e.url("/api/v1/crashes"), B, |r| {
        r.multipart(multipart)
    })
    .await;
    assert_eq!(up.status, StatusCode::OK, "{}", up.body);
    let b1 = up.body.trim().to_string();
    assert_eq!(
        finished(&c, &e, B, &b1).await["signature"],
        shared_sig.as_str()
    );
    let (b2, bravo_sig) = crash(&c, &e, B, &core(&bravo, "run1")).await;
    assert!(
        shared_sig.contains("shared_store") || shared_sig.contains("shared_prog"),
        "{shared_sig}"
    );
    rollups_exact(&e.db, "after the uploads").await;

    // The API: each project its own groups and counts.
    let team = |p: &str, entries: &[(&str, i64)]| -> BTreeMap<(String, String), i64> {
        entries
            .iter()
            .map(|(g, n)| ((p.to_string(), g.to_string()), *n))
            .collect()
    };
    let a_groups = team("team-a", &[(&shared_sig, 2), (&alpha_sig, 1)]);
    let b_groups = team("team-b", &[(&shared_sig, 1), (&bravo_sig, 1)]);
    assert_eq!(api_groups(&c, &e, A, "").await, a_groups);
    assert_eq!(api_groups(&c, &e, A, "&project=team-a").await, a_groups);
    assert_eq!(api_groups(&c, &e, B, "").await, b_groups);
    assert_eq!(api_groups(&c, &e, ROOT, "&project=team-a").await, a_groups);
    let mut every = a_groups.clone();
    every.extend(b_groups.clone());
    assert_eq!(
        api_groups(&c, &e, ROOT, "").await,
        every,
        "every project's groups"
    );
    let named_b = get(&c, &e.url("/api/v1/groups?project=team-b"), A).await;
    assert_eq!(named_b.status, StatusCode::FORBIDDEN);

    // The dashboard: team-a's groups page, with and without filters, shows its groups
    // and none of team-b's signature, product, version or crash ids.
    let theirs = [
        bravo_sig.as_str(),
        "bravo-product",
        "9.8.7",
        &b1,
        &b2,
        "bravo_",
    ];
    for path in [
        "/".to_string(),
        "/?days=all".to_string(),
        "/?days=all&kind=null-pointer".to_string(),
        "/?days=all&sort=signature&dir=asc".to_string(),
        "/?project=team-a".to_string(),
        format!("/crashes?signature={}", common_url(&shared_sig)),
    ] {
        let page = get(&c, &e.url(&path), A).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        for t in theirs {
            assert!(!page.body.contains(t), "{path} shows team-b's {t}");
        }
        assert!(
            page.body.contains(&shared_sig) || path.contains("kind"),
            "{path}"
        );
    }
    let page = get(&c, &e.url("/?days=all"), A).await;
    assert!(page.body.contains(&alpha_sig) && page.body.contains("id=\"groups-scope\""));
    assert!(
        page.body.contains("<td class=\"count\">2</td>"),
        "team-a's own count"
    );
    let page = get(&c, &e.url("/?days=all"), B).await;
    assert!(page.body.contains("bravo-product") && page.body.contains(&bravo_sig));
    assert!(!page.body.contains(&alpha_sig) && !page.body.contains("<td class=\"count\">2</td>"));
    // the server-wide token's every-project page: one row per project's group
    let page = get(&c, &e.url("/?days=all"), ROOT).await;
    assert_eq!(
        page.body.matches("<td class=\"project\">").count(),
        4,
        "{}",
        page.body
    );
    assert!(page.body.contains("<td class=\"project\">team-b</td>"));
    // its list of one signature names the projects that have a group of it
    let url = format!("/crashes?signature={}", common_url(&shared_sig));
    let list = get(&c, &e.url(&url), ROOT).await;
    assert!(
        list.body.contains("id=\"several-projects\""),
        "{}",
        list.body
    );
    assert!(
        !list.body.contains("id=\"split\""),
        "a split of which project's group?"
    );
    let list = get(&c, &e.url(&format!("{url}&project=team-a")), ROOT).await;
    assert!(!list.body.contains("id=\"several-projects\"") && list.body.contains("id=\"split\""));

    // team-b's group is missing to team-a: every decision and its crash list answer as
    // for a group that never existed.
    let never = "never-seen-group";
    for (what, theirs_body, never_body) in [
        (
            "merge into",
            json!({"into": bravo_sig, "groups": [shared_sig]}),
            json!({"into": never, "groups": [shared_sig]}),
        ),
        (
            "merge from",
            json!({"into": shared_sig, "groups": [bravo_sig]}),
            json!({"into": shared_sig, "groups": [never]}),
        ),
    ] {
        let t = post(&c, &e, "/api/v1/groups/merge", A, theirs_body).await;
        let n = post(&c, &e, "/api/v1/groups/merge", A, never_body).await;
        same_as_missing(&t, &n, &bravo_sig, never, what);
    }
    let t = post(
        &c,
        &e,
        "/api/v1/groups/split",
        A,
        json!({"group": bravo_sig, "crashes": [b2]}),
    )
    .await;
    let n = post(
        &c,
        &e,
        "/api/v1/groups/split",
        A,
        json!({"group": never, "crashes": [b2]}),
    )
    .await;
    same_as_missing(&t, &n, &bravo_sig, never, "split");
    let t = post(
        &c,
        &e,
        "/api/v1/groups/split",
        A,
        json!({"group": bravo_sig, "undo_merge_of": shared_sig}),
    )
    .await;
    let n = post(
        &c,
        &e,
        "/api/v1/groups/split",
        A,
        json!({"group": never, "undo_merge_of": shared_sig}),
    )
    .await;
    same_as_missing(&t, &n, &bravo_sig, never, "undo merge");
    let t = form(
        &c,
        &e,
        "/groups/merge",
        A,
        &[("group", &bravo_sig), ("group", &shared_sig)],
    )
    .await;
    let n = form(
        &c,
        &e,
        "/groups/merge",
        A,
        &[("group", never), ("group", &shared_sig)],
    )
    .await;
    same_as_missing(&t, &n, &bravo_sig, never, "dashboard merge");
    let t = form(
        &c,
        &e,
        "/groups/split",
        A,
        &[("group", &bravo_sig), ("crash", &b2)],
    )
    .await;
    let n = form(
        &c,
        &e,
        "/groups/split",
        A,
        &[("group", never), ("crash", &b2)],
    )
    .await;
    same_as_missing(&t, &n, &bravo_sig, never, "dashboard split");
    let t = get(
        &c,
        &e.url(&format!("/crashes?signature={}", common_url(&bravo_sig))),
        A,
    )
    .await;
    let n = get(&c, &e.url(&format!("/crashes?signature={never}")), A).await;
    assert_eq!(t.status, StatusCode::OK);
    assert_eq!(
        t.body.replace(&bravo_sig, "NAME"),
        n.body.replace(never, "NAME"),
        "group page"
    );
    // a split of team-a's group naming team-b's crash of that signature moves nothing,
    // and says what a crash id that does not exist makes it say
    let t = post(
        &c,
        &e,
        "/api/v1/groups/split",
        A,
        json!({"group": shared_sig, "crashes": [b1]}),
    )
    .await;
    let nobody = worker::store::crashes::new_id();
    let n = post(
        &c,
        &e,
        "/api/v1/groups/split",
        A,
        json!({"group": shared_sig, "crashes": [nobody]}),
    )
    .await;
    assert_eq!(t.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", t.body);
    assert_eq!(t.body, n.body);
    assert_eq!(
        api_groups(&c, &e, B, "").await,
        b_groups,
        "team-a's tries moved team-b's crashes"
    );

    // team-a's merge moves team-a's crashes only
    let m = post(
        &c,
        &e,
        "/api/v1/groups/merge",
        A,
        json!({"into": shared_sig, "groups": [alpha_sig]}),
    )
    .await;
    assert_eq!(m.status, StatusCode::OK, "{}", m.body);
    assert_eq!(json_of(&m)["crashes"], 1);
    assert_eq!(
        api_groups(&c, &e, A, "").await,
        team("team-a", &[(&shared_sig, 3)])
    );
    assert_eq!(api_groups(&c, &e, B, "").await, b_groups);
    // the server-wide token, naming no project, merges in the one project with both
    // groups, and is asked to choose when both projects have them
    let m = post(
        &c,
        &e,
        "/api/v1/groups/merge",
        ROOT,
        json!({"into": shared_sig, "groups": [bravo_sig]}),
    )
    .await;
    assert_eq!(m.status, StatusCode::OK, "{}", m.body);
    assert_eq!(
        api_groups(&c, &e, B, "").await,
        team("team-b", &[(&shared_sig, 2)])
    );
    let both = post(
        &c,
        &e,
        "/api/v1/groups/split",
        ROOT,
        json!({"group": shared_sig, "crashes": [a1]}),
    )
    .await;
    assert_eq!(both.status, StatusCode::BAD_REQUEST, "{}", both.body);
    assert_eq!(json_of(&both)["code"], "project-required");
    // ... and splits in the project it names
    let s = post(
        &c,
        &e,
        "/api/v1/groups/split?project=team-a",
        ROOT,
        json!({"group": shared_sig, "crashes": [a1], "name": "split-a"}),
    )
    .await;
    assert_eq!(s.status, StatusCode::OK, "{}", s.body);
    rollups_exact(&e.db, "after the decisions").await;

    // Deleting and reprocessing keep every rollup exact, per project.
    let del = send(
        &c,
        Method::DELETE,
        &e.url(&format!("/api/v1/crashes/{a2}")),
        A,
        |r| r,
    )
    .await;
    assert!(del.status.is_success(), "{}", del.body);
    let del = send(
        &c,
        Method::DELETE,
        &e.url(&format!("/api/v1/crashes/{b1}")),
        A,
        |r| r,
    )
    .await;
    assert_eq!(del.status, StatusCode::NOT_FOUND);
    rollups_exact(&e.db, "after a delete").await;
    let re = post(&c, &e, "/api/v1/reprocess", A, json!({"all": true})).await;
    assert!(re.status.is_success(), "{}", re.body);
    for id in [&a1, &a3] {
        finished(&c, &e, A, id).await;
    }
    // wait for the reprocessing to settle before counting
    for _ in 0..600 {
        let pending = e.count("crashes", "status", "pending").await
            + e.count("crashes", "status", "processing").await;
        if pending == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    rollups_exact(&e.db, "after reprocessing").await;
    assert_eq!(
        api_groups(&c, &e, A, "").await,
        team("team-a", &[(&shared_sig, 1), ("split-a", 1)])
    );
    assert_eq!(
        api_groups(&c, &e, B, "").await,
        team("team-b", &[(&shared_sig, 2)])
    );
    e.finish().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn groups_per_project_sqlite() {
    groups_per_project(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn groups_per_project_postgres() {
    groups_per_project(true).await;
}
