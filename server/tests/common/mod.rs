//! What the integration tests that run the real `postmortem` binary share: which binary,
//! starting `postmortem serve` on a free loopback port, and an HTTP client.
//!
//! Each test binary uses part of it, hence the `dead_code` allowance.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
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

/// Runs the crash program `prog` in `dir` with core dumps on and returns the core's bytes
/// (this machine's `core_pattern` writes `core` or `core.PID` to the working directory).
pub fn make_core(dir: &Path, prog: &Path) -> Vec<u8> {
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -c unlimited; exec {}", prog.display()))
        .current_dir(dir)
        .status()
        .expect("run crasher");
    assert!(!st.success(), "the crasher did not crash");
    let core = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "core" || n.starts_with("core."))
        })
        .unwrap_or_else(|| {
            panic!(
                "no core file written in {} (check /proc/sys/kernel/core_pattern)",
                dir.display()
            )
        });
    std::fs::read(core).expect("read core")
}
