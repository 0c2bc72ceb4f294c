//! Builds the crash programs and takes their cores.
//!
//! Everything happens in a per-case temporary directory: the sources are copied from
//! `server/tests/crashers`, compiled with the compiler and flags the case names, run under
//! `ulimit -c unlimited` so the kernel writes a core into the working directory (the
//! machine's `core_pattern` must be a plain file name such as `core`), or, for a live
//! process, dumped with `gcore`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The directory holding the crash programs' sources: `server/tests/crashers`, beside
/// the server's tests that compile most of them.
pub fn crashers_dir() -> PathBuf {
    crate::workspace_root().join("server/tests/crashers")
}

/// A temporary directory for one case: sources, binaries, core, gdb script.
pub struct Workdir {
    dir: tempfile::TempDir,
}

impl Workdir {
    pub fn new(case: &str) -> Workdir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("pm-gdb-{case}-"))
            .tempdir()
            .expect("create a temporary directory");
        Workdir { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Copies `server/tests/crashers/NAME` into the work directory and returns its new path.
    pub fn source(&self, name: &str) -> PathBuf {
        let to = self.path().join(name);
        std::fs::copy(crashers_dir().join(name), &to)
            .unwrap_or_else(|e| panic!("copy crasher source {name}: {e}"));
        to
    }

    /// Runs `program args…` in the work directory and panics with its output unless it
    /// succeeds; used for compilers and linkers.
    pub fn run_tool(&self, program: &str, args: &[&str]) {
        let out = Command::new(program)
            .args(args)
            .current_dir(self.path())
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e} (is it installed? see test.sh)"));
        assert!(
            out.status.success(),
            "{program} {args:?} failed with {}:\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Compiles the Rust crash program `source` (copied from the crashers) into the
    /// executable `output` with rustc, debug info on, `flags` added.
    pub fn rustc(&self, source: &str, flags: &[&str], output: &str) -> PathBuf {
        self.source(source);
        let mut args = vec!["-g"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&[source, "-o", output]);
        self.run_tool("rustc", &args);
        self.path().join(output)
    }

    /// Compiles C or C++ `sources` into the executable `output` with `compiler` and
    /// `flags` (debug info is always on).
    pub fn compile(
        &self,
        compiler: &str,
        flags: &[&str],
        sources: &[&str],
        output: &str,
    ) -> PathBuf {
        for source in sources {
            self.source(source);
        }
        let mut args = vec!["-g"];
        args.extend_from_slice(flags);
        args.extend_from_slice(sources);
        args.extend_from_slice(&["-o", output]);
        self.run_tool(compiler, &args);
        self.path().join(output)
    }

    /// Runs `exe` until it dies of a signal and returns the path of the core the kernel
    /// wrote into the work directory (`core` or `core.PID`, after `core_pattern`).
    pub fn crash(&self, exe: &Path) -> PathBuf {
        self.crash_with_output(exe).0
    }

    /// [`Self::crash`], with what the program printed before it died (the ground truth of
    /// programs that print the addresses they are about to fault at).
    pub fn crash_with_output(&self, exe: &Path) -> (PathBuf, std::process::Output) {
        let script = format!("ulimit -c unlimited; exec '{}'", exe.display());
        let out = Command::new("sh")
            .args(["-c", &script])
            .current_dir(self.path())
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .output()
            .expect("run the crash program");
        assert!(
            !out.status.success(),
            "{} did not crash:\n{}",
            exe.display(),
            String::from_utf8_lossy(&out.stdout)
        );
        let core = self.find_core().unwrap_or_else(|| {
            let pattern =
                std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
            panic!(
                "{} died ({}) but left no core in {}; /proc/sys/kernel/core_pattern is {:?} \
                 and must be a plain file name such as `core` (test.sh sets it)",
                exe.display(),
                out.status,
                self.path().display(),
                pattern.trim()
            )
        });
        (core, out)
    }

    fn find_core(&self) -> Option<PathBuf> {
        std::fs::read_dir(self.path())
            .ok()?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .find(|path| {
                path.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n == "core" || n.starts_with("core."))
            })
    }

    /// Starts `exe`, waits until it prints `ready`, writes a core of the live process
    /// with `gcore`, kills it and returns the core's path.
    pub fn gcore_live(&self, exe: &Path) -> PathBuf {
        self.gcore_live_with(exe, &[])
    }

    /// [`Self::gcore_live`] of `exe` started with `args`.
    pub fn gcore_live_with(&self, exe: &Path, args: &[&str]) -> PathBuf {
        let mut child = Command::new(exe)
            .args(args)
            .current_dir(self.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the live program");
        let pid = child.id();
        let guard = KillOnDrop(&mut child);
        let stdout = guard.0.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        let started = Instant::now();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read from the live program");
        assert_eq!(
            line.trim(),
            "ready",
            "the live program did not report ready"
        );
        assert!(started.elapsed() < Duration::from_secs(60));
        let prefix = self.path().join("live-core");
        let out = Command::new("gcore")
            .arg("-o")
            .arg(&prefix)
            .arg(pid.to_string())
            .current_dir(self.path())
            .output()
            .expect("run gcore (is gdb installed? see test.sh)");
        assert!(
            out.status.success(),
            "gcore failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        drop(guard);
        let core = self.path().join(format!("live-core.{pid}"));
        assert!(core.exists(), "gcore wrote no {}", core.display());
        core
    }
}

/// Kills and reaps a child process however the test ends.
struct KillOnDrop<'a>(&'a mut std::process::Child);

impl Drop for KillOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
