//! Deletion by filter (issue 41: `POST /api/v1/crashes/delete`, a privacy request) against
//! a real `postmortem serve` on a free port, on SQLite and on PostgreSQL (`projects.rs`'s
//! server: a server-wide admin token and tokens of team-a, team-b and team-c).
//!
//! Real crashes of a compiled program, uploaded as Crashpad does with a `user_id` field:
//! two of team-a's with `user_id=u-42` (one with the very dump bytes of team-b's crash),
//! one of team-a's with another user, one of team-b's with `u-42`. The dry run counts
//! and lists team-a's two and deletes nothing; the deletion deletes exactly those (as
//! many as the dry run counted); afterwards no row of any table names them, the search
//! finds them no more, no search term only they had is left, the blob only they named is
//! gone and the blob team-b's crash shares stays (one of them was split off its group:
//! its pin goes too), and the crashes of the other user and
//! of team-b (same annotation) are all there; the audit log lists each deletion with its
//! filter. Refused: an empty filter (unless `all`), a project in the body, a server-wide
//! token that names no project, tokens without `admin`. `batches`: 450 crashes of one
//! filter, past one batch of ids, deleted by one request (the time printed).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::{client, make_core};
use crate::projects::{
    both, finished, get, json_of, label, real_core, send, Answer, Env, A, B, B_INGEST, C, NAMING,
    ROOT,
};

/// Uploads `dump` as Crashpad does, with the form field `user_id`; the new crash's id.
async fn upload_as_user(
    c: &reqwest::Client,
    e: &Env,
    token: &str,
    user: &str,
    dump: &[u8],
) -> String {
    let form = reqwest::multipart::Form::new()
        .text("prod", "app")
        .text("user_id", user.to_string())
        .part(
            "upload_file_minidump",
            reqwest::multipart::Part::bytes(dump.to_vec()).file_name("x.dmp"),
        );
    let a = send(c, Method::POST, &e.url("/api/v1/crashes"), token, |r| {
        r.multipart(form)
    })
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    a.body.trim().to_string()
}

/// `POST /api/v1/crashes/delete{query}` with `body`.
async fn delete(c: &reqwest::Client, e: &Env, token: &str, query: &str, body: Value) -> Answer {
    let url = e.url(&format!("/api/v1/crashes/delete{query}"));
    send(c, Method::POST, &url, token, |r| r.json(&body)).await
}

fn ids(v: &Value) -> Vec<String> {
    let mut ids: Vec<String> = v["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// The ids team-a's token lists with `query`.
async fn listed(c: &reqwest::Client, e: &Env, token: &str, query: &str) -> Vec<String> {
    let a = get(c, &e.url(&format!("/api/v1/crashes{query}")), token).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    json_of(&a)["crashes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect()
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

async fn by_filter(pg: bool) {
    let Some(e) = Env::start(pg, &["--workers", "1"]).await else {
        return;
    };
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let shared_core = real_core(&c, &e, work.path()).await;
    let prog = work.path().join("prog");
    let core_of = |run: &str| {
        let dir = work.path().join(run);
        std::fs::create_dir(&dir).unwrap();
        make_core(&dir, &prog)
    };
    let (own_core, other_core) = (core_of("a2"), core_of("a3"));
    let a1 = upload_as_user(&c, &e, A, "u-42", &shared_core).await;
    let a2 = upload_as_user(&c, &e, A, "u-42", &own_core).await;
    let a3 = upload_as_user(&c, &e, A, "u-7", &other_core).await;
    let b1 = upload_as_user(&c, &e, B, "u-42", &shared_core).await;
    for id in [&a1, &a2, &a3] {
        assert_eq!(finished(&c, &e, A, id).await["status"], "done");
    }
    assert_eq!(finished(&c, &e, B, &b1).await["status"], "done");
    for id in [&a1, &a2] {
        for (table, column) in &NAMING[..4] {
            assert!(e.count(table, column, id).await > 0, "{table} before");
        }
    }
    // a2 split off its group by the admin: a pin names it
    let signature = finished(&c, &e, A, &a2).await["signature"]
        .as_str()
        .unwrap()
        .to_string();
    let body = json!({ "group": signature, "crashes": [a2] });
    let split = send(
        &c,
        Method::POST,
        &e.url("/api/v1/groups/split?project=team-a"),
        ROOT,
        |r| r.json(&body),
    )
    .await;
    assert_eq!(split.status, StatusCode::OK, "{}", split.body);
    assert_eq!(e.count("group_pins", "crash_id", &a2).await, 1);
    let mut theirs = vec![a1.clone(), a2.clone()];
    theirs.sort();
    let privacy = json!({ "annotations": { "user_id": "u-42" } });

    refusals(&c, &e, &privacy).await;

    // The dry run: team-a's two crashes of u-42, none of team-b's, nothing deleted.
    let dry = delete(&c, &e, A, "", json!({ "filter": privacy, "dry_run": true })).await;
    assert_eq!(dry.status, StatusCode::OK, "{}", dry.body);
    let dry = json_of(&dry);
    assert_eq!(dry["matched"], 2, "{dry}");
    assert_eq!(ids(&dry), theirs, "{dry}");
    let by_root = delete(
        &c,
        &e,
        ROOT,
        "?project=team-a",
        json!({ "filter": privacy, "dry_run": true }),
    )
    .await;
    assert_eq!(json_of(&by_root)["matched"], 2, "{}", by_root.body);
    assert_eq!(
        e.count("crashes", "id", &a1).await,
        1,
        "a dry run deletes nothing"
    );
    assert!(e.has_blob(&sha(&own_core)));

    // The deletion: as many as the dry run counted, the same ids.
    let done = delete(&c, &e, A, "", json!({ "filter": privacy })).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    let done = json_of(&done);
    assert_eq!(done["deleted"], dry["matched"], "{done}");
    assert_eq!(ids(&done), theirs, "{done}");
    assert_eq!(done["more"], false);

    for id in [&a1, &a2] {
        for (table, column) in &NAMING[..7] {
            assert_eq!(e.count(table, column, id).await, 0, "{table} names {id}");
        }
    }
    // the search finds them no more; the other user's and team-b's crashes stay
    for query in ["", "?function=crash", "?module=prog"] {
        assert_eq!(listed(&c, &e, A, query).await, vec![a3.clone()], "{query}");
        assert_eq!(listed(&c, &e, B, query).await, vec![b1.clone()], "{query}");
    }
    for (token, id) in [(A, &a3), (B, &b1)] {
        assert_eq!(finished(&c, &e, token, id).await["status"], "done");
        for (table, column) in &NAMING[..4] {
            assert!(e.count(table, column, id).await > 0, "{table} lost {id}");
        }
    }
    let orphans = e
        .scalar(
            "SELECT COUNT(*) FROM search_terms WHERE id NOT IN (SELECT term_id FROM crash_terms)",
        )
        .await;
    assert_eq!(orphans, 0, "search terms no crash has");
    assert!(
        !e.has_blob(&sha(&own_core)),
        "the blob only a2 named is gone"
    );
    assert!(
        e.has_blob(&sha(&shared_core)),
        "team-b's crash still names a1's dump"
    );
    assert!(e.has_blob(&sha(&other_core)));

    // The audit log lists each deletion, by whom, with the filter.
    let entries = worker::store::audit::newest(&e.db, 1000).await.unwrap();
    let mut deleted: Vec<_> = entries
        .iter()
        .filter(|x| x.action == "delete-crash")
        .collect();
    deleted.sort_by(|x, y| x.target.cmp(&y.target));
    assert_eq!(deleted.len(), 2, "{deleted:?}");
    for (entry, id) in deleted.iter().zip(&theirs) {
        assert_eq!(entry.target.as_deref(), Some(id.as_str()));
        assert_eq!(entry.token, label(A));
        assert_eq!(entry.project.as_deref(), Some("team-a"));
        assert_eq!(entry.route, "POST /api/v1/crashes/delete");
        let detail = entry.detail.as_deref().unwrap_or_default();
        assert!(detail.contains("\"user_id\":\"u-42\""), "{detail}");
    }

    // Again: nothing left to match. `all` confirms an empty filter: team-b's only.
    let again = delete(&c, &e, A, "", json!({ "filter": privacy, "dry_run": true })).await;
    assert_eq!(json_of(&again)["matched"], 0);
    let all = delete(
        &c,
        &e,
        ROOT,
        "?project=team-b",
        json!({ "filter": { "all": true } }),
    )
    .await;
    assert_eq!(json_of(&all)["deleted"], 1, "{}", all.body);
    assert_eq!(e.count("crashes", "id", &b1).await, 0);
    assert_eq!(
        e.count("crashes", "id", &a3).await,
        1,
        "team-a's crash stays"
    );
    assert!(
        !e.has_blob(&sha(&shared_core)),
        "the last crash naming it is gone"
    );
    e.finish().await;
}
both!(by_filter_sqlite, by_filter_postgres, by_filter);

/// What is refused, and deletes nothing.
async fn refusals(c: &reqwest::Client, e: &Env, privacy: &Value) {
    let before = e.scalar("SELECT COUNT(*) FROM crashes").await;
    let cases: [(&str, &str, Value, StatusCode, &str); 6] = [
        (
            "an empty filter",
            "",
            json!({ "filter": {} }),
            StatusCode::BAD_REQUEST,
            "bad-request",
        ),
        (
            "a project in the body",
            "",
            json!({ "filter": { "all": true, "project": "team-b" } }),
            StatusCode::BAD_REQUEST,
            "bad-request",
        ),
        (
            "no filter",
            "",
            json!({ "dry_run": false }),
            StatusCode::BAD_REQUEST,
            "bad-request",
        ),
        (
            "another project named",
            "?project=team-b",
            json!({ "filter": privacy }),
            StatusCode::FORBIDDEN,
            "wrong-project",
        ),
        (
            "an annotation filter that is not a string map",
            "",
            json!({ "filter": { "annotations": { "user_id": 42 } } }),
            StatusCode::BAD_REQUEST,
            "bad-request",
        ),
        (
            "an unknown field",
            "",
            json!({ "filter": privacy, "dry": true }),
            StatusCode::BAD_REQUEST,
            "bad-request",
        ),
    ];
    for (what, query, body, status, code) in cases {
        let a = delete(c, e, A, query, body).await;
        assert_eq!(
            (a.status, json_of(&a)["code"].as_str()),
            (status, Some(code)),
            "{what}: {}",
            a.body
        );
    }
    let root = delete(c, e, ROOT, "", json!({ "filter": privacy })).await;
    assert_eq!(root.status, StatusCode::BAD_REQUEST, "{}", root.body);
    assert_eq!(json_of(&root)["code"], "project-required");
    for token in [B_INGEST, C] {
        let no = delete(c, e, token, "", json!({ "filter": privacy })).await;
        assert_eq!(no.status, StatusCode::FORBIDDEN, "{}", no.body);
    }
    assert_eq!(e.scalar("SELECT COUNT(*) FROM crashes").await, before);
}

/// Crashes past one batch of ids (200): 450 of team-a's rows with `user_id=bulk`, put in
/// the database directly (pending, no dump: `--workers 0`), and 5 of team-b's. The dry
/// run counts 450 and lists 100; the deletion deletes 450 in three batches, each with its
/// audit entry, and team-b's stay. Prints how long the deletion took.
async fn batches(pg: bool) {
    let Some(e) = Env::start(pg, &["--workers", "0"]).await else {
        return;
    };
    let c = client();
    let insert = |project: &'static str, i: usize| {
        let db = &e.db;
        async move {
            let new = worker::store::crashes::NewCrash {
                id: worker::store::crashes::new_id(),
                received_at: 1_700_000_000_000,
                dump_sha256: format!("{i:064x}"),
                dump_size: 1,
                dump_format: "elf-core".into(),
                annotations: json!({ "user_id": "bulk" }).to_string(),
                annotations_cut: None,
            };
            worker::store::crashes::insert_in(db, &new, project)
                .await
                .unwrap();
        }
    };
    for i in 0..450 {
        insert("team-a", i).await;
    }
    for i in 450..455 {
        insert("team-b", i).await;
    }
    let bulk = json!({ "annotations": { "user_id": "bulk" } });
    let dry = delete(&c, &e, A, "", json!({ "filter": bulk, "dry_run": true })).await;
    let dry = json_of(&dry);
    assert_eq!(
        (dry["matched"].as_i64(), ids(&dry).len()),
        (Some(450), 100),
        "{dry}"
    );
    let started = std::time::Instant::now();
    let done = delete(&c, &e, A, "", json!({ "filter": bulk })).await;
    let took = started.elapsed();
    let done = json_of(&done);
    assert_eq!(
        (done["deleted"].as_i64(), done["more"].as_bool()),
        (Some(450), Some(false)),
        "{done}"
    );
    assert_eq!(ids(&done), ids(&dry), "the first 100, in id order");
    assert_eq!(e.count("crashes", "project", "team-a").await, 0);
    assert_eq!(e.count("crashes", "project", "team-b").await, 5);
    assert_eq!(e.count("audit_log", "action", "delete-crash").await, 450);
    eprintln!(
        "{}: 450 crashes deleted by filter in {:.2} s ({:.1} ms a crash)",
        if pg { "PostgreSQL" } else { "SQLite" },
        took.as_secs_f64(),
        took.as_secs_f64() * 1000.0 / 450.0
    );
    e.finish().await;
}
both!(batches_sqlite, batches_postgres, batches);
