//! Retention, sampling per signature and disk used per project (issue 41) against a real
//! `postmortem serve` on a free port, on SQLite and on PostgreSQL
//! (`POSTMORTEM_SKIP_PG=1` skips the latter when PostgreSQL is unreachable):
//!
//! - a retention sweep removes an old dump (the crash and its report stay), an older
//!   crash whole (audited), and a project's symbol files it has not used for its days
//!   (a file another project still holds stays), freeing their blob files, while another
//!   project's crash and the blob it shares stay; afterwards no row names a missing blob
//!   and no blob is named by no row; the crash without its dump answers 410 `dump-gone`
//!   to its download and to reprocessing (API and dashboard);
//! - sampling keeps the first N dumps of a storm of one signature and every report;
//! - the disk used per project (`/metrics`, the dashboard) is the sum of the sizes of
//!   the blob files its rows name.
//!
//! Ages are made by moving rows' times into the past (the sweep runs every second
//! against the real clock): nothing sleeps for days.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::common::{client, compile, make_core, CRASHER};
use crate::projects::{both, fake_core, finished, get, json_of, send, upload_id, Env, A, B, ROOT};

const DAY_MS: i64 = 86_400_000;

/// The same crash in another program (other function names, another build-id).
const OTHER: &str = r#"
__attribute__((noinline)) void other_crash(volatile int *p) { *p = 7; }
int main(void) { other_crash((volatile int *)0); return 0; }
"#;

fn sha_of(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Where the server keeps the blob `sha`.
fn blob_path(e: &Env, sha: &str) -> PathBuf {
    e.dir
        .path()
        .join("data/blobs/sha256")
        .join(&sha[..2])
        .join(&sha[2..4])
        .join(sha)
}

/// Runs one statement on the server's database.
async fn exec(e: &Env, sql: &str) {
    worker::on_pool!(e.db, p => sqlx::query(sqlx::AssertSqlSafe(sql.to_string())).execute(p).await.map(|_| ()))
        .unwrap();
}

/// The strings a query of one text column gives.
async fn strings(e: &Env, sql: &str) -> Vec<String> {
    worker::on_pool!(e.db, p => sqlx::query_scalar::<_, String>(
        sqlx::AssertSqlSafe(sql.to_string())).fetch_all(p).await)
    .unwrap()
}

/// Uploads the file at `path` as a symbol file of `token`'s project (201).
async fn upload_file(c: &reqwest::Client, e: &Env, token: &str, path: &std::path::Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let sha = sha_of(&bytes);
    let url = e.url("/api/v1/binaries");
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    let up = send(c, Method::POST, &url, token, |r| {
        r.header("x-file-name", name).body(bytes)
    })
    .await;
    assert!(up.status.is_success(), "{}", up.body);
    sha
}

/// Waits until `sql` (a count) gives `want`, the sweep running every second.
async fn until_count(e: &Env, sql: &str, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = e.scalar(sql).await;
        if n == want {
            return;
        }
        assert!(Instant::now() < deadline, "{sql}: {n}, not {want}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// No row names a missing blob, and every blob file is named by a row.
async fn nothing_orphaned(e: &Env) {
    let named = strings(
        e,
        "SELECT dump_sha256 FROM crashes WHERE dump_gone IS NULL \
         UNION SELECT sha256 FROM binaries UNION SELECT sha256 FROM source_bundles",
    )
    .await;
    for sha in &named {
        assert!(
            blob_path(e, sha).exists(),
            "a row names the missing blob {sha}"
        );
    }
    let files = crate::common::files_under(&e.dir.path().join("data/blobs"));
    for f in files {
        let sha = f.file_name().unwrap().to_str().unwrap().to_string();
        assert!(named.contains(&sha), "no row names the blob {sha}");
    }
}

/// `postmortem_project_bytes{project,kind}` of `/metrics`.
async fn metric(c: &reqwest::Client, e: &Env, name: &str, labels: &str) -> Option<i64> {
    let m = get(c, &e.url("/metrics"), ROOT).await;
    assert_eq!(m.status, StatusCode::OK, "{}", m.body);
    let line = format!("{name}{{{labels}}} ");
    m.body
        .lines()
        .find_map(|l| l.strip_prefix(&line))
        .map(|v| v.trim().parse().unwrap())
}

/// The sum of the sizes of the blob files of `shas` (each once).
fn blob_bytes(e: &Env, mut shas: Vec<String>) -> i64 {
    shas.sort();
    shas.dedup();
    shas.iter()
        .map(|s| i64::try_from(std::fs::metadata(blob_path(e, s)).unwrap().len()).unwrap())
        .sum()
}

/// Old dumps, crashes and symbol files of team-a go with their blob files; team-b's
/// crash, the dump it shares and the file it holds too stay; nothing is left orphaned.
async fn retention(pg: bool) {
    let args = ["--workers", "1", "--sweep-interval-secs", "1"];
    let args = [&args[..], &["--retention", "team-a:1:3:1"]].concat();
    let Some(e) = Env::start(pg, &args).await else {
        return;
    };
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let prog = compile(work.path(), "prog", CRASHER);
    let other_dir = tempfile::tempdir().unwrap();
    let other = compile(other_dir.path(), "other", OTHER);
    // prog is held by both projects, other by team-a alone
    let prog_sha = upload_file(&c, &e, A, &prog).await;
    upload_file(&c, &e, B, &prog).await;
    let other_sha = upload_file(&c, &e, A, &other).await;
    let core = make_core(work.path(), &prog);
    let core_sha = sha_of(&core);
    // team-a's last use of its files is half a day ago (within its day), until its crash
    // is processed with prog
    let half_day_ago = worker::store::now_ms() - DAY_MS / 2;
    let set = format!(
        "UPDATE binary_projects SET last_used_at = {half_day_ago} WHERE project = 'team-a'"
    );
    exec(&e, &set).await;

    let a_old = upload_id(&c, &e, A, &core).await;
    let b_old = upload_id(&c, &e, B, &core).await;
    let unique = fake_core(4096, 1);
    let a_unique = upload_id(&c, &e, A, &unique).await;
    let a_ancient = upload_id(&c, &e, A, &fake_core(4096, 2)).await;
    for (token, id) in [(A, &a_old), (B, &b_old), (A, &a_unique), (A, &a_ancient)] {
        finished(&c, &e, token, id).await;
    }
    let used = format!(
        "SELECT COUNT(*) FROM binary_projects WHERE project = 'team-a' \
         AND sha256 = '{prog_sha}' AND last_used_at > {half_day_ago}"
    );
    assert_eq!(e.scalar(&used).await, 1, "the processing recorded its use");

    // two days old: team-a's dumps go, team-b's stay; five days: team-a's crash goes
    let age = |days: i64, ids: &[&String]| {
        let list: Vec<String> = ids.iter().map(|i| format!("'{i}'")).collect();
        format!(
            "UPDATE crashes SET received_at = received_at - {} WHERE id IN ({})",
            days * DAY_MS,
            list.join(", ")
        )
    };
    exec(&e, &age(2, &[&a_old, &b_old, &a_unique])).await;
    exec(&e, &age(5, &[&a_ancient])).await;
    let two_days_ago = worker::store::now_ms() - 2 * DAY_MS;
    exec(
        &e,
        &format!(
            "UPDATE binary_projects SET last_used_at = {two_days_ago} WHERE project = 'team-a'"
        ),
    )
    .await;

    until_count(
        &e,
        "SELECT COUNT(*) FROM crashes WHERE dump_gone = 'retention'",
        2,
    )
    .await;
    until_count(
        &e,
        &format!("SELECT COUNT(*) FROM crashes WHERE id = '{a_ancient}'"),
        0,
    )
    .await;
    let holds = "SELECT COUNT(*) FROM binary_projects WHERE project = 'team-a'";
    until_count(&e, holds, 0).await;

    // the dumps: team-a's own blob is gone, the one team-b's crash names stays
    assert!(
        !blob_path(&e, &sha_of(&unique)).exists(),
        "team-a's dump freed"
    );
    assert!(blob_path(&e, &core_sha).exists(), "the shared dump stays");
    assert_eq!(e.count("crashes", "dump_gone", "retention").await, 2);
    let b_dump = get(&c, &e.url(&format!("/api/v1/crashes/{b_old}/dump")), B).await;
    assert_eq!(b_dump.status, StatusCode::OK, "team-b's dump downloads");
    // the symbol files: other (team-a's alone) is gone, prog (team-b's too) stays
    assert_eq!(e.count("binaries", "sha256", &other_sha).await, 0);
    assert!(!blob_path(&e, &other_sha).exists(), "team-a's file freed");
    assert_eq!(e.count("binaries", "sha256", &prog_sha).await, 1);
    assert_eq!(e.count("binary_projects", "sha256", &prog_sha).await, 1);
    assert!(blob_path(&e, &prog_sha).exists(), "team-b's file stays");
    // the crash deleted whole, audited
    let gone = get(&c, &e.url(&format!("/api/v1/crashes/{a_ancient}")), A).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    let audited = format!(
        "SELECT COUNT(*) FROM audit_log WHERE action = 'delete-crash' AND target = '{a_ancient}' \
         AND token = 'retention' AND project = 'team-a'"
    );
    assert_eq!(e.scalar(&audited).await, 1);
    nothing_orphaned(&e).await;

    dump_gone_answers(&c, &e, &a_old).await;
    disk_used(&c, &e).await;
    e.finish().await;
}
both!(retention_sqlite, retention_postgres, retention);

/// A crash whose dump is gone keeps its report and says so everywhere it is asked for.
async fn dump_gone_answers(c: &reqwest::Client, e: &Env, id: &str) {
    let record = json_of(&get(c, &e.url(&format!("/api/v1/crashes/{id}")), A).await);
    assert_eq!(record["dump"]["gone"], "retention");
    assert_eq!(record["status"], "done");
    assert!(record["report"].is_object(), "the report stays");
    let problem = |a: &crate::projects::Answer, what: &str| {
        let head: String = a.body.chars().take(300).collect();
        assert_eq!(a.status, StatusCode::GONE, "{what}: {head}");
        assert_eq!(a.content_type, "application/problem+json", "{what}");
        let v: Value = json_of(a);
        assert_eq!(v["code"], "dump-gone", "{what}");
        assert_eq!(v["reason"], "retention", "{what}");
        assert!(
            v["detail"].as_str().unwrap().contains("retention"),
            "{what}"
        );
    };
    let dump = get(c, &e.url(&format!("/api/v1/crashes/{id}/dump")), A).await;
    problem(&dump, "download");
    let url = e.url(&format!("/api/v1/crashes/{id}/reprocess"));
    problem(
        &send(c, Method::POST, &url, A, |r| r).await,
        "API reprocess",
    );
    let url = e.url(&format!("/crashes/{id}/reprocess"));
    problem(
        &send(c, Method::POST, &url, A, |r| r).await,
        "dashboard reprocess",
    );
    // a filter's run skips it
    let url = e.url("/api/v1/reprocess");
    let run = send(c, Method::POST, &url, A, |r| {
        r.json(&serde_json::json!({"all": true}))
    })
    .await;
    assert_eq!(run.status, StatusCode::OK, "{}", run.body);
    assert_eq!(json_of(&run)["queued"], 0, "{}", run.body);
    let page = get(c, &e.url(&format!("/crashes/{id}")), A).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("id=\"dump-gone\""), "{}", page.body);
    assert!(!page.body.contains("id=\"dump\""), "no download link");
}

/// The bytes per project equal the sizes of the blob files its rows name, on `/metrics`
/// and on the project's crash list; a blob two projects name counts in both.
async fn disk_used(c: &reqwest::Client, e: &Env) {
    // a new crash of team-a with the dump team-b's crash keeps: counted in both
    let core = std::fs::read(blob_path(
        e,
        &strings(
            e,
            "SELECT dump_sha256 FROM crashes WHERE project = 'team-b'",
        )
        .await[0],
    ))
    .unwrap();
    let id = upload_id(c, e, A, &core).await;
    finished(c, e, A, &id).await;
    for project in ["team-a", "team-b"] {
        let dumps = strings(
            e,
            &format!(
                "SELECT dump_sha256 FROM crashes WHERE project = '{project}' AND dump_gone IS NULL"
            ),
        )
        .await;
        let files = strings(
            e,
            &format!("SELECT sha256 FROM binary_projects WHERE project = '{project}'"),
        )
        .await;
        let labels = |kind: &str| format!("project=\"{project}\",kind=\"{kind}\"");
        let dump_bytes = blob_bytes(e, dumps);
        assert!(dump_bytes > 0, "{project} keeps a dump");
        let got = metric(c, e, "postmortem_project_bytes", &labels("dumps")).await;
        assert_eq!(got, Some(dump_bytes), "{project} dumps");
        let got = metric(c, e, "postmortem_project_bytes", &labels("symbols")).await;
        assert_eq!(got.unwrap_or(0), blob_bytes(e, files), "{project} symbols");
    }
    let page = get(c, &e.url("/crashes"), A).await;
    let a_dumps = metric(
        c,
        e,
        "postmortem_project_bytes",
        "project=\"team-a\",kind=\"dumps\"",
    )
    .await;
    let shown = format!("<span id=\"usage-dumps\">{}</span>", a_dumps.unwrap());
    assert!(page.body.contains(&shown), "{}", page.body);
    assert!(
        page.body.contains("<span id=\"usage-retention\">2</span>"),
        "{}",
        page.body
    );
    let removed = metric(
        c,
        e,
        "postmortem_project_dumps_removed",
        "project=\"team-a\",reason=\"retention\"",
    )
    .await;
    assert_eq!(removed, Some(2));
}

/// A storm of one signature keeps its first N dumps and every report; another project
/// without sampling keeps every dump.
async fn sampling(pg: bool) {
    let args = [
        "--workers",
        "1",
        "--sweep-interval-secs",
        "1",
        "--sample",
        "team-a:2",
    ];
    let Some(e) = Env::start(pg, &args).await else {
        return;
    };
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let prog = compile(work.path(), "prog", CRASHER);
    upload_file(&c, &e, A, &prog).await;
    let core = make_core(work.path(), &prog);
    // six different dumps of one crash (a byte appended), one signature
    let mut storm = Vec::new();
    for i in 0..6u8 {
        let mut dump = core.clone();
        dump.push(i);
        storm.push((upload_id(&c, &e, A, &dump).await, sha_of(&dump)));
    }
    let mut others = Vec::new();
    for i in 0..3u8 {
        let mut dump = core.clone();
        dump.extend([i, i]);
        others.push(upload_id(&c, &e, B, &dump).await);
    }
    let mut signatures = Vec::new();
    for (id, _) in &storm {
        let v = finished(&c, &e, A, id).await;
        assert_eq!(v["status"], "done", "{v}");
        signatures.push(v["computed_signature"].as_str().unwrap().to_string());
    }
    signatures.dedup();
    assert_eq!(signatures.len(), 1, "one signature: {signatures:?}");
    for id in &others {
        finished(&c, &e, B, id).await;
    }
    until_count(
        &e,
        "SELECT COUNT(*) FROM crashes WHERE dump_gone = 'sampled'",
        4,
    )
    .await;
    // further sweeps remove nothing more
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(e.count("crashes", "dump_gone", "sampled").await, 4);
    for (n, (id, sha)) in storm.iter().enumerate() {
        let v = json_of(&get(&c, &e.url(&format!("/api/v1/crashes/{id}")), A).await);
        assert!(v["report"].is_object(), "every report is kept");
        let kept = n < 2;
        let want = if kept {
            Value::Null
        } else {
            Value::from("sampled")
        };
        assert_eq!(v["dump"]["gone"], want, "crash {n}");
        assert_eq!(blob_path(&e, sha).exists(), kept, "crash {n}'s blob");
    }
    let kept = "SELECT COUNT(*) FROM crashes WHERE project = 'team-b' AND dump_gone IS NULL";
    assert_eq!(e.scalar(kept).await, 3, "team-b samples nothing");
    let sampled = "project=\"team-a\",reason=\"sampled\"";
    assert_eq!(
        metric(&c, &e, "postmortem_project_dumps_removed", sampled).await,
        Some(4)
    );
    let page = get(&c, &e.url("/crashes"), A).await;
    assert!(
        page.body.contains("<span id=\"usage-sampled\">4</span>"),
        "{}",
        page.body
    );
    let url = e.url(&format!("/api/v1/crashes/{}/reprocess", storm[5].0));
    let again = send(&c, Method::POST, &url, A, |r| r).await;
    assert_eq!(again.status, StatusCode::GONE, "{}", again.body);
    assert_eq!(json_of(&again)["reason"], "sampled");
    nothing_orphaned(&e).await;
    e.finish().await;
}
both!(sampling_sqlite, sampling_postgres, sampling);

/// Crashes of team-a old enough to lose their dump, made directly in the store.
const OLD_CRASHES: usize = 2000;

/// Makes `OLD_CRASHES` finished crashes of team-a, each with its own dump blob, received
/// now; their sha256s.
async fn many_crashes(e: &Env) -> Vec<String> {
    let now = worker::store::now_ms();
    let mut shas = Vec::new();
    for i in 0..OLD_CRASHES {
        let mut dump = fake_core(1024, 0);
        dump.extend(u32::try_from(i).unwrap().to_le_bytes());
        let sha = sha_of(&dump);
        let path = blob_path(e, &sha);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &dump).unwrap();
        let id = worker::store::crashes::new_id();
        exec(
            e,
            &format!(
                "INSERT INTO crashes (id, status, received_at, dump_sha256, dump_size, \
                 dump_format, annotations, attempts, project) VALUES \
                 ('{id}', 'done', {now}, '{sha}', {}, 'elf-core', '{{}}', 1, 'team-a')",
                dump.len()
            ),
        )
        .await;
        shas.push(sha);
    }
    shas
}

/// The sweep removes thousands of dumps in batches while another project's uploads go
/// on: every upload is accepted and keeps its dump, every swept blob file goes, and the
/// sweep's time and the uploads' median and slowest times are printed.
async fn sweep_while_uploading(pg: bool) {
    let args = [
        "--workers",
        "1",
        "--sweep-interval-secs",
        "1",
        "--retention",
        "team-a:1:0:0",
        "--retention-batch",
        "100",
    ];
    let Some(e) = Env::start(pg, &args).await else {
        return;
    };
    let c = client();
    let shas = many_crashes(&e).await;
    let started = Instant::now();
    let aged = worker::store::now_ms() - 2 * DAY_MS;
    exec(
        &e,
        &format!("UPDATE crashes SET received_at = {aged} WHERE project = 'team-a'"),
    )
    .await;
    let mut latencies = Vec::new();
    let mut tag = 0u8;
    let swept = loop {
        let t = Instant::now();
        let a = crate::projects::upload(&c, &e, B, "", &fake_core(2048, tag)).await;
        latencies.push(t.elapsed());
        assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.body);
        tag = tag.wrapping_add(1);
        // done: every crash marked, and every blob file removed after its batch's mark
        let gone = e.count("crashes", "dump_gone", "retention").await;
        let left = shas.iter().filter(|s| blob_path(&e, s).exists()).count();
        if gone == i64::try_from(OLD_CRASHES).unwrap() && left == 0 {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{gone} swept, {left} left"
        );
    };
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    let slowest = latencies[latencies.len() - 1];
    println!(
        "{}: {OLD_CRASHES} dumps swept in {:.2} s (batches of 100), {} uploads of team-b \
         meanwhile, median {:.0} ms, slowest {:.0} ms",
        if pg { "PostgreSQL" } else { "SQLite" },
        swept.as_secs_f64(),
        latencies.len(),
        median.as_secs_f64() * 1000.0,
        slowest.as_secs_f64() * 1000.0
    );
    let kept = "SELECT COUNT(*) FROM crashes WHERE project = 'team-b' AND dump_gone IS NULL";
    let uploads = i64::try_from(latencies.len()).unwrap();
    assert_eq!(e.scalar(kept).await, uploads, "team-b keeps every dump");
    nothing_orphaned(&e).await;
    e.finish().await;
}
both!(
    sweep_while_uploading_sqlite,
    sweep_while_uploading_postgres,
    sweep_while_uploading
);
