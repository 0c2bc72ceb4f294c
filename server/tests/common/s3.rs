//! `moto_server` (PyPI `moto[server]`, installed by test.sh): a real S3-compatible server
//! on a free port with one bucket, for the tests of S3 blobs and symbol buckets.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{client, Proc};

/// A running `moto_server` with one bucket.
pub struct S3 {
    _proc: Proc,
    pub endpoint: String,
    pub bucket: String,
}

impl S3 {
    /// Starts `moto_server` on a free port and creates `bucket`; `None` (skip) only
    /// when it is not installed and `POSTMORTEM_SKIP_S3=1`.
    pub async fn start(bucket: &str) -> Option<S3> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
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
        let s3 = S3 {
            _proc: Proc(child),
            endpoint: format!("http://127.0.0.1:{port}"),
            bucket: bucket.to_string(),
        };
        let c = client();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Creating the bucket doubles as the readiness probe.
            match c.put(format!("{}/{}", s3.endpoint, s3.bucket)).send().await {
                Ok(r) if r.status().is_success() => break,
                Ok(r) => panic!("creating the bucket: {}", r.status()),
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await
                }
                Err(e) => panic!("moto_server did not start: {e}"),
            }
        }
        Some(s3)
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
    pub async fn objects(&self) -> Vec<(String, u64)> {
        let url = format!("{}/{}?list-type=2", self.endpoint, self.bucket);
        let xml = super::get_text(&client(), &url).await;
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
    pub async fn put(&self, key: &str, bytes: Vec<u8>) {
        let r = client()
            .put(format!("{}/{}/{key}", self.endpoint, self.bucket))
            .body(bytes)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "putting {key}: {}", r.status());
    }
}
