//! Blobs in an S3-compatible bucket (`--blob-url s3://bucket/prefix`), against a real S3
//! server: moto's `moto_server` (PyPI `moto[server]`, installed by test.sh) on a free
//! port, configured the way a deployment would be, through the AWS_* environment.
//!
//! - `serve_keeps_blobs_in_s3`: `postmortem serve` with SQLite uploads a binary and a
//!   core; the report is symbolized, and both files are objects in the bucket under the
//!   prefix and their content address — and nowhere under the data dir;
//! - `workers_read_blobs_from_s3`: PostgreSQL, `serve --workers 0` and a `postmortem
//!   worker` with its own, separate data dir: the worker can only find the dump and the
//!   binary in the bucket.
//!
//! Set `POSTMORTEM_SKIP_S3=1` to skip where `moto_server` is not installed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::PathBuf;
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use crate::common;
use common::{
    bin, compile, drop_db, make_core, pg_database, start_serve_env, upload_and_check, Proc, CRASHER,
};
use postmortem_testsupport::moto::Moto;

const BUCKET: &str = "crash-blobs";
const PREFIX: &str = "team/prod";

/// Where a blob with this content lives in the bucket.
fn object_key(bytes: &[u8]) -> String {
    let sha = hex::encode(Sha256::digest(bytes));
    format!("{PREFIX}/sha256/{}/{}/{sha}", &sha[..2], &sha[2..4])
}

/// Both files are objects under the prefix and their content address, with their sizes.
async fn assert_in_bucket(s3: &Moto, prog: &[u8], core: &[u8]) {
    let objects = s3.objects();
    for (what, bytes) in [("binary", prog), ("core", core)] {
        let key = object_key(bytes);
        assert!(
            objects.contains(&(key.clone(), bytes.len() as u64)),
            "{what} not in the bucket as {key} ({} bytes): {objects:?}",
            bytes.len()
        );
    }
    assert_eq!(objects.len(), 2, "{objects:?}");
}

#[tokio::test]
async fn serve_keeps_blobs_in_s3() {
    let Some(s3) = Moto::start(BUCKET) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let prog = compile(work.path(), "prog", CRASHER);
    let core = make_core(work.path(), &prog);
    let prog = std::fs::read(&prog).unwrap();
    let data = work.path().join("data");
    let env = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let blob_url = format!("s3://{BUCKET}/{PREFIX}");
    let (_serve, base) = start_serve_env(
        &[
            "--workers",
            "1",
            "--data-dir",
            data.to_str().unwrap(),
            "--blob-url",
            &blob_url,
        ],
        &env,
    );
    upload_and_check(&base, &prog, &core).await;
    assert_in_bucket(&s3, &prog, &core).await;
    // Nothing under the data dir but the database: no blobs, no staging leftovers.
    let local: Vec<PathBuf> = common::files_under(&data)
        .into_iter()
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("postmortem.db"))
        })
        .collect();
    assert!(local.is_empty(), "files under the data dir: {local:?}");
}

#[tokio::test]
async fn workers_read_blobs_from_s3() {
    let Some(s3) = Moto::start(BUCKET) else {
        return;
    };
    let Some((db_name, db_url)) = pg_database("pm_s3").await else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let prog = compile(work.path(), "prog", CRASHER);
    let core = make_core(work.path(), &prog);
    let prog = std::fs::read(&prog).unwrap();
    let env = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let blob_url = format!("s3://{BUCKET}/{PREFIX}");
    // Separate data dirs: the worker shares nothing local with the API process.
    let api_data = work.path().join("api-data");
    let worker_data = work.path().join("worker-data");
    let (_serve, base) = start_serve_env(
        &[
            "--workers",
            "0",
            "--data-dir",
            api_data.to_str().unwrap(),
            "--database-url",
            &db_url,
            "--blob-url",
            &blob_url,
        ],
        &env,
    );
    let worker = Command::new(bin())
        .args(["worker", "--workers", "1", "--data-dir"])
        .arg(&worker_data)
        .args(["--database-url", &db_url, "--blob-url", &blob_url])
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn postmortem worker");
    let worker = Proc(worker);
    upload_and_check(&base, &prog, &core).await;
    assert_in_bucket(&s3, &prog, &core).await;
    for dir in [&api_data, &worker_data] {
        let local = common::files_under(dir);
        assert!(local.is_empty(), "files under {}: {local:?}", dir.display());
    }
    drop(worker);
    drop_db(&db_name).await;
}
