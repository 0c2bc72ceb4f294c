//! `moto_server` (PyPI `moto[server]`, installed by test.sh): a real S3-compatible server
//! on a free port with one bucket, for the tests of S3 blobs and symbol buckets. Its
//! request log is kept, so a test can say which objects were asked for. Stopped when
//! dropped.
//!
//! `POSTMORTEM_SKIP_S3=1` skips (`Moto::start` gives `None`) where `moto_server` is not
//! installed.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `moto_server` with one bucket.
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    pub bucket: String,
    /// The server's request log (its stderr), with the directory that holds it.
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Moto {
    /// Starts `moto_server` on a free port and creates `bucket`; `None` (skip) only
    /// when it is not installed and `POSTMORTEM_SKIP_S3=1`.
    pub fn start(bucket: &str) -> Option<Moto> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("moto.log");
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                if std::env::var("POSTMORTEM_SKIP_S3").as_deref() == Ok("1") {
                    eprintln!("moto_server not runnable ({e}); skipped (POSTMORTEM_SKIP_S3=1)");
                    return None;
                }
                panic!("moto_server not runnable: {e}. Install it with `python3 -m pip install 'moto[server]'` (test.sh does), or set POSTMORTEM_SKIP_S3=1");
            }
        };
        let moto = Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            bucket: bucket.to_string(),
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Creating the bucket doubles as the readiness probe.
            match agent()
                .put(&format!("{}/{}", moto.endpoint, moto.bucket))
                .send_empty()
            {
                Ok(r) if r.status().is_success() => break,
                Ok(r) => panic!("creating the bucket: {}", r.status()),
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                Err(e) => panic!("moto_server did not start: {e}"),
            }
        }
        Some(moto)
    }

    /// The environment a deployment sets to reach this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    /// Every object in the bucket, key → size, from the server's own listing
    /// (ListObjectsV2, one page is plenty here).
    pub fn objects(&self) -> Vec<(String, u64)> {
        let url = format!("{}/{}?list-type=2", self.endpoint, self.bucket);
        let xml = agent()
            .get(&url)
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        assert!(xml.contains("<IsTruncated>false</IsTruncated>"), "{xml}");
        xml.split("<Contents>")
            .skip(1)
            .map(|c| {
                let field = |tag: &str| {
                    let open = format!("<{tag}>");
                    let start = c.find(&open).unwrap() + open.len();
                    let end = c[start..].find('<').unwrap() + start;
                    c[start..end].to_string()
                };
                (field("Key"), field("Size").parse().unwrap())
            })
            .collect()
    }

    /// Puts `bytes` at `key` in the bucket (moto takes unsigned requests).
    pub fn put(&self, key: &str, bytes: &[u8]) {
        let url = format!("{}/{}/{key}", self.endpoint, self.bucket);
        let r = agent().put(&url).send(bytes).unwrap();
        assert!(r.status().is_success(), "putting {key}: {}", r.status());
    }

    /// The object keys asked for with `GET` so far, in order (query strings dropped).
    pub fn gets(&self) -> Vec<String> {
        let prefix = format!("/{}/", self.bucket);
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split("\"GET ").nth(1))
            .filter_map(|l| l.split([' ', '?']).next())
            .filter_map(|p| p.strip_prefix(&prefix))
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client that reads every status as an answer.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}
