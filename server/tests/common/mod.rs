//! What the integration tests that run the real `postmortem` binary share: which binary,
//! starting `postmortem serve` on a free loopback port, and an HTTP client.
//!
//! Each test binary uses part of it, hence the `dead_code` allowance.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The binary under test: `POSTMORTEM_BIN` when set (a copy taken right after the build,
/// for target dirs shared between branches), else the one cargo built for this test.
pub fn bin() -> PathBuf {
    std::env::var_os("POSTMORTEM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_postmortem")))
}

/// A child process killed (and reaped) on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `postmortem serve --listen 127.0.0.1:0 ARGS…` and waits for its
/// `postmortem listening on URL` line; returns the process and the base URL.
pub fn start_serve(args: &[&str]) -> (Proc, String) {
    let mut child = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn postmortem serve");
    let stdout = child.stdout.take().expect("stdout");
    let proc = Proc(child);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the listening line");
    let base = line
        .trim()
        .strip_prefix("postmortem listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (proc, base)
}

/// An HTTP client with a generous timeout (jobs may wait for table builds).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}
