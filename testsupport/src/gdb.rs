//! Runs gdb on a core and reads back every thread's frames.
//!
//! gdb is the reference: `frames.py` walks each thread from `gdb.newest_frame()` through
//! `.older()` and prints one JSON document between two marker lines. gdb runs with
//! `backtrace past-main` and `past-entry` on, so its stacks end where the unwind rules end
//! them (at `_start` or `clone3`), as ours do, not at `main`.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const SCRIPT: &str = include_str!("frames.py");
const BEGIN: &str = "=== gdb-frames-json ===";
const END: &str = "=== end ===";

/// One frame as gdb shows it.
#[derive(Debug, Clone)]
pub struct GdbFrame {
    /// `frame.pc()`: the instruction pointer for frame 0 and signal-interrupted frames,
    /// the return address otherwise.
    pub pc: u64,
    /// `frame.name()`: what `bt` prints; None where gdb prints `??`.
    pub name: Option<String>,
    /// `NORMAL`, `INLINE`, `TAILCALL`, `SIGTRAMP`, …
    pub kind: String,
    /// `symtab.filename` of `frame.find_sal()`, as the debug info records it.
    pub file: Option<String>,
    /// `symtab.fullname()`: the file joined to its compilation directory.
    pub fullname: Option<String>,
    pub line: Option<u64>,
    /// The source line gdb's `frame N` prints after the frame (`LINE<tab>TEXT`), without
    /// the number; None where gdb shows none (no line, or a file it cannot read).
    pub source_text: Option<String>,
}

/// One thread and how gdb's walk of it ended.
#[derive(Debug, Clone)]
pub struct GdbThread {
    pub lwp: u64,
    pub frames: Vec<GdbFrame>,
    /// True when gdb stopped because the unwind rules say there is no caller; false when
    /// it stopped on an error ("Backtrace stopped: …", corrupt stack), in which case a
    /// better unwinder may legitimately find more frames.
    pub complete: bool,
    /// gdb's words for why it stopped.
    pub stop: String,
}

/// gdb's view of a whole core.
#[derive(Debug, Clone)]
pub struct GdbCore {
    /// The thread gdb selects on loading the core: the one that received the signal.
    pub crashed_lwp: Option<u64>,
    /// `$_siginfo.si_signo` of that thread, where the core records a siginfo.
    pub signal: Option<u64>,
    pub threads: Vec<GdbThread>,
    /// The paths `info sharedlibrary` lists: the dynamic linker's modules.
    pub solibs: Vec<String>,
}

impl GdbCore {
    pub fn thread(&self, lwp: u64) -> Option<&GdbThread> {
        self.threads.iter().find(|t| t.lwp == lwp)
    }

    pub fn crashed(&self) -> &GdbThread {
        let lwp = self.crashed_lwp.expect("gdb selected no thread");
        self.thread(lwp).expect("gdb's selected thread is listed")
    }
}

/// Runs gdb in batch mode on `exe` and `core` and returns its frames.
pub fn frames(workdir: &Path, exe: &Path, core: &Path) -> GdbCore {
    frames_with("gdb", &[], workdir, exe, core)
}

/// [`frames`] with another gdb (`gdb-multiarch`) and extra commands run first
/// (`set sysroot …`).
pub fn frames_with(gdb: &str, setup: &[&str], workdir: &Path, exe: &Path, core: &Path) -> GdbCore {
    run_script(gdb, setup, &[], &[exe, core], workdir)
}

/// gdb's frames of a live process at its fatal signal: gdb loads `exe`, connects to the
/// gdbstub listening on 127.0.0.1:`port` (QEMU's `-g`, the program held at its first
/// instruction; gdb retries until it listens), lets the program run to the signal,
/// reads every thread there, then lets the signal through so the program dies of it.
///
/// For what a core cannot tell gdb: QEMU's core of a position-independent program has no
/// NT_FILE, and gdb cannot relocate the program from it (frame 0 `??`); the live stub
/// answers gdb's questions about the auxiliary vector and the loaded libraries.
pub fn frames_live(gdb: &str, setup: &[&str], workdir: &Path, exe: &Path, port: u16) -> GdbCore {
    let connect = format!("target remote 127.0.0.1:{port}");
    let before = [connect.as_str(), "continue"];
    let mut all: Vec<&str> = setup.to_vec();
    all.extend(before);
    run_script(gdb, &all, &["continue"], &[exe], workdir)
}

/// Runs gdb in batch mode: the commands `before`, [`SCRIPT`], the commands `after`, on
/// the files `positional` (the program, and the core if any); returns the script's frames.
fn run_script(
    gdb: &str,
    before: &[&str],
    after: &[&str],
    positional: &[&Path],
    workdir: &Path,
) -> GdbCore {
    let script = workdir.join("gdb_frames.py");
    std::fs::write(&script, SCRIPT).expect("write the gdb script");
    let mut command = Command::new(gdb);
    command
        .args(["-batch", "-nx"])
        .args(["-ex", "set pagination off"])
        .args(["-ex", "set debuginfod enabled off"])
        .args(["-ex", "set backtrace past-main on"])
        .args(["-ex", "set backtrace past-entry on"])
        .args(["-ex", "set backtrace limit unlimited"]);
    for cmd in before {
        command.args(["-ex", cmd]);
    }
    command.arg("-x").arg(&script);
    for cmd in after {
        command.args(["-ex", cmd]);
    }
    let out = command
        .args(positional)
        .current_dir(workdir)
        .env("LC_ALL", "C")
        .output()
        .expect("run gdb (is it installed? see test.sh)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = stdout
        .split_once(BEGIN)
        .and_then(|(_, rest)| rest.split_once(END))
        .map(|(json, _)| json.trim())
        .unwrap_or_else(|| {
            panic!(
                "gdb printed no frames ({}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let doc: Value = serde_json::from_str(json).expect("gdb script output is JSON");
    parse(&doc)
}

fn parse(doc: &Value) -> GdbCore {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let threads = doc["threads"]
        .as_array()
        .expect("threads array")
        .iter()
        .map(|t| {
            let frames = t["frames"]
                .as_array()
                .expect("frames array")
                .iter()
                .map(|f| GdbFrame {
                    pc: f["pc"].as_u64().expect("pc"),
                    name: text(&f["name"]),
                    kind: text(&f["type"]).expect("frame type"),
                    file: text(&f["file"]),
                    fullname: text(&f["fullname"]),
                    line: f["line"].as_u64(),
                    source_text: text(&f["source_text"]),
                })
                .collect();
            let (complete, stop) = match (&t["stop"], &t["error"]) {
                (_, Value::String(error)) => (false, error.clone()),
                (Value::Object(stop), _) => (
                    stop["outermost"].as_bool().unwrap_or(false),
                    stop["text"].as_str().unwrap_or("?").to_owned(),
                ),
                _ => (false, "unknown".to_owned()),
            };
            GdbThread {
                lwp: t["lwp"].as_u64().expect("lwp"),
                frames,
                complete,
                stop,
            }
        })
        .collect();
    GdbCore {
        crashed_lwp: doc["crashed_lwp"].as_u64(),
        signal: doc["signal"].as_u64(),
        threads,
        solibs: doc["solibs"]
            .as_array()
            .expect("solibs array")
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect(),
    }
}
