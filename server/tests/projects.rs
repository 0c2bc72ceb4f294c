//! Projects (issue 41) against a real `postmortem serve` on a free port, each test on
//! SQLite and on PostgreSQL (a fresh database on 127.0.0.1:5432, dropped afterwards;
//! `POSTMORTEM_SKIP_PG=1` skips those when PostgreSQL is unreachable):
//!
//! - a token of project A against every route of project B's crash: 404, byte for byte the
//!   answer for a missing id; lists, filters, reprocessing, idempotency keys and the
//!   dedup window never reach B's crashes; the routes not yet kept apart per project
//!   refuse project tokens (crash groups per project: `projects_groups.rs`); the Crashpad route files an upload under `?project=`
//!   (symbol files per project: `projects_symbols.rs`);
//! - a flood of one project's uploads meets 429 with the `Retry-After` after which an
//!   upload is taken again, while another project's uploads go on (figures printed);
//! - `DELETE` leaves no row in any table that names the crash, no search term only it
//!   had, no group count, and no blob once no crash names it; the audit log says who.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use crate::common;

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use worker::store::Db;

use common::{client, compile, drop_db, files_under, make_core, pg_database, start_serve, Proc};

pub(crate) const ROOT: &str = "root-secret";
pub(crate) const A: &str = "a-secret";
pub(crate) const B: &str = "b-secret";
pub(crate) const B_INGEST: &str = "b-ingest";
pub(crate) const C: &str = "c-secret";

/// A server with one server-wide admin token and tokens of projects team-a, team-b and
/// team-c, and a connection to its database for counting rows.
pub(crate) struct Env {
    proc: Option<Proc>,
    base: String,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) db: Db,
    pg: Option<String>,
}

impl Env {
    pub(crate) async fn start(pg: bool, extra: &[&str]) -> Option<Env> {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let (pg, url) = if pg {
            let (name, url) = pg_database("pm_projects").await?;
            (Some(name), url)
        } else {
            let url = format!("sqlite://{}", data.join("postmortem.db").display());
            (None, url)
        };
        let mut args: Vec<String> = [
            "--data-dir",
            data.to_str().unwrap(),
            "--database-url",
            &url,
            "--token",
            &format!("{ROOT}:admin"),
            "--token",
            &format!("{A}:ingest,read,admin:team-a"),
            "--token",
            &format!("{B}:ingest,read,admin:team-b"),
            "--token",
            &format!("{B_INGEST}:ingest:team-b"),
            "--token",
            &format!("{C}:ingest,read:team-c"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (proc, base) = start_serve(&refs);
        let db = Db::connect(&url).await.unwrap();
        Some(Env {
            proc: Some(proc),
            base,
            dir,
            db,
            pg,
        })
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) async fn finish(mut self) {
        drop(self.proc.take());
        self.db.close().await;
        if let Some(name) = &self.pg {
            drop_db(name).await;
        }
    }

    /// Rows of `table` whose `column` is `value`.
    pub(crate) async fn count(&self, table: &str, column: &str, value: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE {column} = $1");
        worker::on_pool!(self.db, p => sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
            .bind(value).fetch_one(p).await)
        .unwrap()
    }

    /// Rows of a query without parameters that counts.
    pub(crate) async fn scalar(&self, sql: &str) -> i64 {
        worker::on_pool!(self.db, p => sqlx::query_scalar::<_, i64>(
            sqlx::AssertSqlSafe(sql.to_string())).fetch_one(p).await)
        .unwrap()
    }

    /// The blob store's directory.
    pub(crate) fn blobs_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("data").join("blobs")
    }

    /// Whether a blob file of `sha256` is stored.
    pub(crate) fn has_blob(&self, sha256: &str) -> bool {
        files_under(&self.blobs_dir())
            .iter()
            .any(|p| p.to_string_lossy().contains(&sha256[8..]))
    }

    pub(crate) fn blob_files(&self) -> usize {
        files_under(&self.dir.path().join("data").join("blobs")).len()
    }
}

/// An answer: status, content type and body.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) content_type: String,
    pub(crate) body: String,
    pub(crate) retry_after: Option<u64>,
}

pub(crate) async fn send(
    c: &reqwest::Client,
    method: Method,
    url: &str,
    token: &str,
    build: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
) -> Answer {
    let r = build(c.request(method, url).bearer_auth(token))
        .send()
        .await
        .unwrap();
    let header = |n: &str| {
        r.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header("content-type").unwrap_or_default();
    let retry_after = header("retry-after").map(|v| v.parse().unwrap());
    let status = r.status();
    let body = r.text().await.unwrap();
    Answer {
        status,
        content_type,
        body,
        retry_after,
    }
}

pub(crate) async fn get(c: &reqwest::Client, url: &str, token: &str) -> Answer {
    send(c, Method::GET, url, token, |r| r).await
}

pub(crate) fn json_of(a: &Answer) -> Value {
    serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{e}: {}", a.body))
}

/// Uploads `dump` as a raw body with `token`; the answer.
pub(crate) async fn upload(
    c: &reqwest::Client,
    e: &Env,
    token: &str,
    query: &str,
    dump: &[u8],
) -> Answer {
    let url = e.url(&format!("/api/v1/crashes{query}"));
    send(c, Method::POST, &url, token, |r| r.body(dump.to_vec())).await
}

/// Uploads and returns the new crash's id (202).
pub(crate) async fn upload_id(c: &reqwest::Client, e: &Env, token: &str, dump: &[u8]) -> String {
    let a = upload(c, e, token, "", dump).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.body);
    json_of(&a)["id"].as_str().unwrap().to_string()
}

/// Waits until the crash is done or failed, read with `token`; its record.
pub(crate) async fn finished(c: &reqwest::Client, e: &Env, token: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let a = get(c, &e.url(&format!("/api/v1/crashes/{id}")), token).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        let v = json_of(&a);
        if v["status"] == "done" || v["status"] == "failed" {
            return v;
        }
        assert!(Instant::now() < deadline, "crash {id} not finished: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An ELF core header the upload checks accept (64-bit x86-64, one program header),
/// `len` bytes, the last one `tag` so that dumps differ.
pub(crate) fn fake_core(len: usize, tag: u8) -> Vec<u8> {
    let mut b = vec![0u8; len.max(64 + 56 + 1)];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[6] = 1;
    b[16..18].copy_from_slice(&4u16.to_le_bytes());
    b[18..20].copy_from_slice(&62u16.to_le_bytes());
    b[20..24].copy_from_slice(&1u32.to_le_bytes());
    b[32..40].copy_from_slice(&64u64.to_le_bytes());
    b[52..54].copy_from_slice(&64u16.to_le_bytes());
    b[54..56].copy_from_slice(&56u16.to_le_bytes());
    b[56..58].copy_from_slice(&1u16.to_le_bytes());
    let last = b.len() - 1;
    b[last] = tag;
    b
}

/// A real crash's core (a compiled program that writes through a null pointer), its
/// program uploaded first by the server-wide token and marked shared, so that the reports
/// of every project name its functions.
pub(crate) async fn real_core(c: &reqwest::Client, e: &Env, dir: &std::path::Path) -> Vec<u8> {
    let prog = compile(dir, "prog", common::CRASHER);
    let bytes = std::fs::read(&prog).unwrap();
    let sha = hex::encode(Sha256::digest(&bytes));
    let url = e.url("/api/v1/binaries");
    let up = send(c, Method::POST, &url, ROOT, |r| {
        r.header("x-file-name", "prog").body(bytes)
    })
    .await;
    assert_eq!(up.status, StatusCode::CREATED, "{}", up.body);
    let url = e.url(&format!("/api/v1/binaries/{sha}/shared"));
    let shared = send(c, Method::POST, &url, ROOT, |r| r).await;
    assert_eq!(shared.status, StatusCode::OK, "{}", shared.body);
    make_core(dir, &prog)
}

/// The label the audit log names a token by: 12 hex digits of the SHA-256 of its secret.
pub(crate) fn label(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

macro_rules! both {
    ($sqlite:ident, $pg:ident, $body:path) => {
        #[tokio::test(flavor = "multi_thread")]
        async fn $sqlite() {
            $body(false).await;
        }
        #[tokio::test(flavor = "multi_thread")]
        async fn $pg() {
            $body(true).await;
        }
    };
}
/// The macro for other test files: one scenario on SQLite and on PostgreSQL.
pub(crate) use both;

/// Project A's token against every route of project B's crash answers exactly as for a
/// crash that does not exist, and nothing A does reaches B's crash.
async fn isolation(pg: bool) {
    let Some(e) = Env::start(pg, &["--workers", "1", "--dedup-window-secs", "600"]).await else {
        return;
    };
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let core = real_core(&c, &e, work.path()).await;
    let theirs = upload_id(&c, &e, B, &core).await;
    let record = finished(&c, &e, B, &theirs).await;
    assert_eq!(record["project"], "team-b");
    let signature = record["signature"].as_str().unwrap_or_default().to_string();
    let missing = worker::store::crashes::new_id();
    assert_eq!(missing.len(), theirs.len());

    let routes = [
        (Method::GET, "/api/v1/crashes/{id}"),
        (Method::GET, "/api/v1/crashes/{id}?format=stackwalk-json"),
        (Method::GET, "/api/v1/crashes/{id}/dump"),
        (Method::DELETE, "/api/v1/crashes/{id}"),
    ];
    let mut before = Vec::new();
    for (method, route) in &routes {
        let ask = |id: &str| e.url(&route.replace("{id}", id));
        let a = send(&c, method.clone(), &ask(&theirs), A, |r| r).await;
        let none = send(&c, method.clone(), &ask(&missing), A, |r| r).await;
        assert_eq!(
            a.status,
            StatusCode::NOT_FOUND,
            "{method} {route}: {}",
            a.body
        );
        assert_eq!(a.content_type, none.content_type, "{method} {route}");
        assert_eq!(
            a.body.replace(&theirs, "ID"),
            none.body.replace(&missing, "ID"),
            "{method} {route}"
        );
        before.push(a.body);
    }
    // B's crash is still there, whole, for B.
    let mine = get(&c, &e.url(&format!("/api/v1/crashes/{theirs}")), B).await;
    assert_eq!(mine.status, StatusCode::OK);
    // B's ingest-only token may not read.
    let ingest = get(&c, &e.url(&format!("/api/v1/crashes/{theirs}")), B_INGEST).await;
    assert_eq!(ingest.status, StatusCode::FORBIDDEN);

    lists_and_filters(&c, &e, &theirs, &signature).await;
    reprocessing(&c, &e, &theirs).await;
    keys_and_dedup(&c, &e, &core, &theirs).await;
    server_wide_routes(&c, &e).await;
    crashpad_route(&c, &e).await;

    // Deleted by B, the crash answers A exactly as before: as a missing one.
    let gone = send(
        &c,
        Method::DELETE,
        &e.url(&format!("/api/v1/crashes/{theirs}")),
        B,
        |r| r,
    )
    .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{}", gone.body);
    for ((method, route), was) in routes.iter().zip(&before) {
        let url = e.url(&route.replace("{id}", &theirs));
        let now = send(&c, method.clone(), &url, A, |r| r).await;
        assert_eq!(&now.body, was, "{method} {route} after the delete");
    }
    e.finish().await;
}
both!(isolation_sqlite, isolation_postgres, isolation);

async fn lists_and_filters(c: &reqwest::Client, e: &Env, theirs: &str, signature: &str) {
    let ids = |a: &Answer| -> Vec<String> {
        json_of(a)["crashes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["id"].as_str().unwrap().to_string())
            .collect()
    };
    for query in [
        String::new(),
        format!("?signature={}", urlencode(signature)),
        "?module=prog".to_string(),
        "?function=crash".to_string(),
        "?status=done".to_string(),
    ] {
        let a = get(c, &e.url(&format!("/api/v1/crashes{query}")), A).await;
        assert_eq!(a.status, StatusCode::OK, "{query}: {}", a.body);
        assert!(
            !ids(&a).contains(&theirs.to_string()),
            "A lists B's crash with {query:?}"
        );
        let b = get(c, &e.url(&format!("/api/v1/crashes{query}")), B).await;
        assert!(
            ids(&b).contains(&theirs.to_string()),
            "B's own list {query:?}"
        );
    }
    // A project token may name only its own project.
    let named = get(c, &e.url("/api/v1/crashes?project=team-b"), A).await;
    assert_eq!(named.status, StatusCode::FORBIDDEN);
    assert_eq!(json_of(&named)["code"], "wrong-project");
    let header = send(c, Method::GET, &e.url("/api/v1/crashes"), A, |r| {
        r.header("X-Postmortem-Project", "team-b")
    })
    .await;
    assert_eq!(header.status, StatusCode::FORBIDDEN);
    let own = get(c, &e.url("/api/v1/crashes?project=team-a"), A).await;
    assert_eq!(own.status, StatusCode::OK);
    // The server-wide token sees every project, or the one it names.
    let all = get(c, &e.url("/api/v1/crashes"), ROOT).await;
    assert!(ids(&all).contains(&theirs.to_string()));
    let only_a = get(c, &e.url("/api/v1/crashes?project=team-a"), ROOT).await;
    assert!(!ids(&only_a).contains(&theirs.to_string()));
    let unknown = get(c, &e.url("/api/v1/crashes?project=nobody"), ROOT).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn reprocessing(c: &reqwest::Client, e: &Env, theirs: &str) {
    let post = |token: &'static str, body: Value| {
        let url = e.url("/api/v1/reprocess");
        async move { send(c, Method::POST, &url, token, |r| r.json(&body)).await }
    };
    let a = post(A, json!({ "all": true })).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(json_of(&a)["queued"], 0, "A's run queued B's crash");
    let sneaky = post(A, json!({ "all": true, "project": "team-b" })).await;
    assert_eq!(sneaky.status, StatusCode::BAD_REQUEST, "{}", sneaky.body);
    let b = post(B, json!({ "all": true })).await;
    assert_eq!(json_of(&b)["queued"], 1, "{}", b.body);
    finished(c, e, B, theirs).await;
}

async fn keys_and_dedup(c: &reqwest::Client, e: &Env, core: &[u8], theirs: &str) {
    // B's dump uploaded again by B within the dedup window is the same crash ...
    let again = upload(c, e, B, "", core).await;
    assert_eq!(json_of(&again)["id"], theirs, "{}", again.body);
    // ... by A, a crash of A's.
    let a_copy = upload_id(c, e, A, core).await;
    assert_ne!(a_copy, theirs);
    // An Idempotency-Key B used names nothing for A.
    let keyed = |token: &'static str, dump: Vec<u8>| {
        let url = e.url("/api/v1/crashes");
        async move {
            send(c, Method::POST, &url, token, |r| {
                r.header("Idempotency-Key", "release-42").body(dump)
            })
            .await
        }
    };
    let b_first = keyed(B, fake_core(4096, 1)).await;
    assert_eq!(b_first.status, StatusCode::ACCEPTED);
    let a_other = keyed(A, fake_core(4096, 2)).await;
    assert_eq!(a_other.status, StatusCode::ACCEPTED, "{}", a_other.body);
    let b_id = json_of(&b_first)["id"].as_str().unwrap().to_string();
    assert!(!a_other.body.contains(&b_id));
    // Under B the key still finds B's first upload.
    let b_retry = keyed(B, fake_core(4096, 1)).await;
    assert_eq!(json_of(&b_retry)["id"], b_id.as_str());
}

async fn server_wide_routes(c: &reqwest::Client, e: &Env) {
    for path in ["/metrics".to_string(), "/jobs".to_string()] {
        let a = get(c, &e.url(&path), A).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{path}: {}", a.body);
        assert!(!a.body.contains("team-b"), "{path}");
        let root = get(c, &e.url(&path), ROOT).await;
        assert_ne!(root.status, StatusCode::FORBIDDEN, "{path}");
    }
}

/// Crashpad's multipart upload, filed under the project its URL names.
async fn crashpad_route(c: &reqwest::Client, e: &Env) {
    let form = || {
        reqwest::multipart::Form::new().text("prod", "app").part(
            "upload_file_minidump",
            reqwest::multipart::Part::bytes(fake_core(4096, 7)).file_name("x.dmp"),
        )
    };
    let url = e.url("/api/v1/crashes?project=team-b");
    let a = send(c, Method::POST, &url, ROOT, |r| r.multipart(form())).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let id = a.body.trim().to_string();
    let by_b = get(c, &e.url(&format!("/api/v1/crashes/{id}")), B).await;
    assert_eq!(json_of(&by_b)["project"], "team-b");
    let by_a = get(c, &e.url(&format!("/api/v1/crashes/{id}")), A).await;
    assert_eq!(by_a.status, StatusCode::NOT_FOUND);
    let wrong = e.url("/api/v1/crashes?project=team-a");
    let refused = send(c, Method::POST, &wrong, B_INGEST, |r| r.multipart(form())).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
}

/// A flood of team-a's uploads over its quota of 30 a minute meets 429 with a
/// `Retry-After` after which an upload is taken, while team-b's uploads go on; team-c's
/// bytes a day end with a wait until the next UTC midnight.
async fn flood(pg: bool) {
    let quotas = ["--quota", "team-a:30:0", "--quota", "team-c:0:10000"];
    let mut args = vec!["--workers", "0"];
    args.extend(quotas);
    let Some(e) = Env::start(pg, &args).await else {
        return;
    };
    let c = client();
    let start = Instant::now();
    let (mut accepted, mut refused, mut b_accepted) = (0u32, 0u32, 0u32);
    let mut waits = Vec::new();
    for i in 0..90u32 {
        let a = upload(&c, &e, A, "", &fake_core(2048, (i % 250) as u8)).await;
        match a.status {
            StatusCode::ACCEPTED => accepted += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                refused += 1;
                assert_eq!(json_of(&a)["code"], "rate-limited");
                waits.push(a.retry_after.expect("Retry-After"));
            }
            other => panic!("{other}: {}", a.body),
        }
        if i % 3 == 0 {
            let b = upload(&c, &e, B, "", &fake_core(2048, 251)).await;
            assert_eq!(b.status, StatusCode::ACCEPTED, "team-b refused: {}", b.body);
            b_accepted += 1;
        }
    }
    let took = start.elapsed();
    println!(
        "flood ({}): team-a {accepted} accepted and {refused} refused (429) in {:.2} s, \
         Retry-After {:?}..{:?} s; team-b {b_accepted} accepted, none refused",
        if pg { "postgres" } else { "sqlite" },
        took.as_secs_f64(),
        waits.iter().min(),
        waits.iter().max()
    );
    // A minute's worth at once, and what refilled (one every 2 s) while the flood ran.
    let refill = (took.as_secs_f64() / 2.0).ceil() as u32;
    assert!(
        accepted >= 30 && accepted <= 30 + refill,
        "{accepted} accepted"
    );
    assert!(refused > 0);
    assert!(waits.iter().all(|w| (1..=2).contains(w)), "{waits:?}");
    // The last wait is the right one: after it, the next upload is taken.
    let wait = *waits.last().unwrap();
    tokio::time::sleep(Duration::from_secs(wait)).await;
    let after = upload(&c, &e, A, "", &fake_core(2048, 252)).await;
    assert_eq!(
        after.status,
        StatusCode::ACCEPTED,
        "after Retry-After: {}",
        after.body
    );

    let metrics = get(&c, &e.url("/metrics"), ROOT).await.body;
    let line = format!(
        "postmortem_quota_refusals_total{{project=\"team-a\",kind=\"throttled\"}} {refused}"
    );
    assert!(metrics.contains(&line), "{line} not in\n{metrics}");
    // The crashes each project had accepted, by project: counted by this process, and in
    // the database by state.
    for (project, n) in [("team-a", accepted + 1), ("team-b", b_accepted)] {
        let line = format!("postmortem_project_crash_uploads_total{{project=\"{project}\"}} {n}");
        assert!(metrics.contains(&line), "{line} not in\n{metrics}");
        let prefix = format!("postmortem_project_crashes{{project=\"{project}\",state=");
        let stored: u32 = metrics
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u32>().unwrap())
            .sum();
        assert_eq!(stored, n, "{project} in\n{metrics}");
    }

    // Bytes a day: 6000 fit in 10000, the next 6000 wait until midnight UTC.
    let first = upload(&c, &e, C, "", &fake_core(6000, 1)).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    let over = upload(&c, &e, C, "", &fake_core(6000, 2)).await;
    assert_eq!(over.status, StatusCode::TOO_MANY_REQUESTS);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let to_midnight = 86_400 - now % 86_400;
    let wait = over.retry_after.expect("Retry-After");
    assert!(
        wait.abs_diff(to_midnight) <= 5,
        "{wait} s, midnight in {to_midnight} s"
    );
    let line = "postmortem_quota_refusals_total{project=\"team-c\",kind=\"refused\"} 1";
    assert!(get(&c, &e.url("/metrics"), ROOT).await.body.contains(line));
    // and on each project's dashboard, as its admin sees it (team-c's, the server's admin)
    for (token, path, throttled, over_bytes) in [
        (A, "/crashes", refused, 0),
        (B, "/crashes", 0, 0),
        (ROOT, "/crashes?project=team-c", 0, 1),
    ] {
        let page = get(&c, &e.url(path), token).await.body;
        let want = format!(
            "<span id=\"quota-throttled\">{throttled}</span> over its crashes a minute, \
             <span id=\"quota-refused\">{over_bytes}</span> over its bytes a day"
        );
        assert!(page.contains(&want), "{want} not in\n{page}");
    }
    e.finish().await;
}
both!(flood_sqlite, flood_postgres, flood);

/// Crashes the groups of `signature` count, in every project.
async fn group_count(e: &Env, signature: &str) -> i64 {
    let sql = format!(
        "SELECT CAST(COALESCE(SUM(count), 0) AS BIGINT) FROM crash_groups WHERE signature = '{}'",
        signature.replace('\'', "''")
    );
    e.scalar(&sql).await
}

/// What names a crash, per table: `(table, column)`.
pub(crate) const NAMING: [(&str, &str); 8] = [
    ("crashes", "id"),
    ("crash_terms", "crash_id"),
    ("crash_build_ids", "crash_id"),
    ("crash_module_names", "crash_id"),
    ("missing_modules", "crash_id"),
    ("breakpad_modules", "crash_id"),
    ("group_pins", "crash_id"),
    ("audit_log", "target"),
];

/// `DELETE` leaves nothing that names the crash, and the blob goes with the last crash
/// that names it.
async fn deletion(pg: bool) {
    let Some(e) = Env::start(pg, &["--workers", "1"]).await else {
        return;
    };
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let core = real_core(&c, &e, work.path()).await;
    let theirs = upload_id(&c, &e, B, &core).await;
    let mine = upload_id(&c, &e, A, &core).await;
    let record = finished(&c, &e, B, &theirs).await;
    finished(&c, &e, A, &mine).await;
    assert_eq!(record["status"], "done", "{record}");
    let signature = record["signature"].as_str().unwrap().to_string();
    let blobs = e.blob_files();
    for (table, column) in &NAMING[..4] {
        assert!(e.count(table, column, &theirs).await > 0, "{table} before");
    }
    // one group in each project (migration 0026), one crash each
    assert_eq!(e.count("crash_groups", "signature", &signature).await, 2);
    assert_eq!(group_count(&e, &signature).await, 2);

    // A cannot delete B's crash: 404, and every row stays.
    let url = |id: &str| e.url(&format!("/api/v1/crashes/{id}"));
    let no = send(&c, Method::DELETE, &url(&theirs), A, |r| r).await;
    assert_eq!(no.status, StatusCode::NOT_FOUND);
    assert_eq!(e.count("crashes", "id", &theirs).await, 1);
    // Nor may B's ingest token.
    let no = send(&c, Method::DELETE, &url(&theirs), B_INGEST, |r| r).await;
    assert_eq!(no.status, StatusCode::FORBIDDEN);

    let gone = send(&c, Method::DELETE, &url(&theirs), B, |r| r).await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{}", gone.body);
    for (table, column) in &NAMING[..7] {
        assert_eq!(e.count(table, column, &theirs).await, 0, "{table} after");
    }
    assert_eq!(
        group_count(&e, &signature).await,
        1,
        "the group counts B's crash no more"
    );
    assert_eq!(e.blob_files(), blobs, "A's crash still names the dump");
    let again = send(&c, Method::DELETE, &url(&theirs), B, |r| r).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);

    let gone = send(&c, Method::DELETE, &url(&mine), ROOT, |r| r).await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    assert_eq!(
        e.blob_files(),
        blobs - 1,
        "the dump's blob is gone with its last crash"
    );
    assert_eq!(e.count("crash_groups", "signature", &signature).await, 0);
    let orphans = e
        .scalar(
            "SELECT COUNT(*) FROM search_terms WHERE id NOT IN (SELECT term_id FROM crash_terms)",
        )
        .await;
    assert_eq!(orphans, 0, "search terms no crash has");

    audit(&e, &theirs, &mine).await;
    e.finish().await;
}
both!(deletion_sqlite, deletion_postgres, deletion);

/// The audit log names each deletion and each token use by the token's label, never
/// its secret.
async fn audit(e: &Env, theirs: &str, mine: &str) {
    let entries = worker::store::audit::newest(&e.db, 1000).await.unwrap();
    let deleted: Vec<_> = entries
        .iter()
        .filter(|x| x.action == "delete-crash")
        .collect();
    assert_eq!(deleted.len(), 2, "{deleted:?}");
    let by_b = deleted
        .iter()
        .find(|x| x.target.as_deref() == Some(theirs))
        .unwrap();
    assert_eq!(by_b.token, label(B));
    assert_eq!(by_b.project.as_deref(), Some("team-b"));
    assert_eq!(by_b.route, "DELETE /api/v1/crashes/{id}");
    let by_root = deleted
        .iter()
        .find(|x| x.target.as_deref() == Some(mine))
        .unwrap();
    assert_eq!(
        (by_root.token.as_str(), by_root.project.as_deref()),
        (label(ROOT).as_str(), Some("team-a"))
    );
    let uploads = entries
        .iter()
        .filter(|x| x.action == "token-use" && x.route == "POST /api/v1/crashes")
        .count();
    assert_eq!(uploads, 2);
    let text = format!("{entries:?}");
    for secret in [ROOT, A, B, B_INGEST] {
        assert!(!text.contains(secret), "the audit log holds a secret");
    }
}
