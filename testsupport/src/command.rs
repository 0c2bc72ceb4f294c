//! A command run under a time limit, its output kept in files: a test that runs one of
//! the project's programs (or wine's) fails with what it printed when the program hangs,
//! instead of holding the whole suite until CI's own limit ends it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What a command printed and how it ended.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// The lines of its standard output.
    pub fn lines(&self) -> std::str::Lines<'_> {
        self.stdout.lines()
    }
}

/// Runs `command` with `stdin`, its output going to `LOG.stdout` and `LOG.stderr` (files,
/// not pipes: the wine processes a run starts — services.exe, explorer.exe — inherit them
/// and outlive it, so a pipe would not close when the program ends). Panics with what it
/// printed if it outlives `timeout`, after killing it: a command that hangs fails its
/// test with its output instead of holding the suite.
pub fn run(command: &mut Command, stdin: Option<&str>, log: &Path, timeout: Duration) -> Finished {
    let with = |ext: &str| {
        let mut name = log.as_os_str().to_owned();
        name.push(ext);
        PathBuf::from(name)
    };
    let (out_path, err_path) = (with(".stdout"), with(".stderr"));
    let stdin = match stdin {
        Some(text) => {
            let path = with(".stdin");
            std::fs::write(&path, text).expect("write a command's input");
            Stdio::from(File::open(&path).expect("open a command's input"))
        }
        None => Stdio::null(),
    };
    let mut child = command
        .stdin(stdin)
        .stdout(File::create(&out_path).expect("create a command's output file"))
        .stderr(File::create(&err_path).expect("create a command's output file"))
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "run {:?}: {e} (is it installed? see test.sh)",
                command.get_program()
            )
        });
    let started = Instant::now();
    let read = |path: &Path| {
        String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
    };
    loop {
        if let Some(status) = child.try_wait().expect("wait for a command") {
            return Finished {
                status,
                stdout: read(&out_path),
                stderr: read(&err_path),
            };
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{:?} {:?} did not finish in {timeout:?}; it printed:\n{}{}",
                command.get_program(),
                command.get_args().collect::<Vec<_>>(),
                read(&out_path),
                read(&err_path)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
