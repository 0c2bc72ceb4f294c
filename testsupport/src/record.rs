//! Real crashes recorded twice, as a minidump and as a kernel core.
//!
//! [`make_minidump_and_core`] runs a crash program under `crash_tracer.c` (a small C
//! ptrace tool, because the workspace forbids `unsafe` and ptrace needs it), which stops the
//! program at its fatal signal and leaves it group-stopped. Then `minidump-writer` attaches
//! and writes a minidump with a crash context made of the registers and siginfo the tracer
//! read; then the program is continued, re-executes the faulting instruction and the kernel
//! writes a core of the same crash (core_pattern `core`, in the program's directory).
//!
//! Both files describe the same instant, so tests (and later walk comparisons against gdb)
//! can compare what the minidump reader says with what gdb says about the core.
//!
//! Limits: x86_64 Linux; the crash must happen on the main thread (only it is traced).
//! aarch64 crashes run under QEMU, which ptrace does not reach: [`crate::qemu`] crashes
//! them and takes QEMU's core, [`crate::core_to_minidump`] writes the minidump from that
//! core.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What the tracer saw at the fatal signal (from ptrace, not from the dump).
#[derive(Debug, Clone)]
pub struct Stop {
    pub pid: i32,
    pub tid: i32,
    pub signo: u32,
    pub code: i32,
    pub addr: u64,
    /// `ucontext_t` gregs, in `REG_*` order.
    pub gregs: Vec<u64>,
    /// The 512-byte FXSAVE area.
    pub fpregs: Vec<u8>,
}

/// A crash recorded as both a minidump and a core.
#[derive(Debug, Clone)]
pub struct RecordedCrash {
    pub minidump: PathBuf,
    pub core: PathBuf,
    pub stop: Stop,
    /// What the program printed on its standard output before it crashed (it shares the
    /// tracer's pipe, so its lines come before the tracer's first one).
    pub stdout: String,
}

/// Whether this machine can run the recording (tools present, x86_64 Linux).
pub fn can_record() -> bool {
    cfg!(all(target_os = "linux", target_arch = "x86_64"))
        && tool_works("gcc", &["--version"])
        && tool_works("gdb", &["--version"])
}

fn tool_works(tool: &str, args: &[&str]) -> bool {
    Command::new(tool)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The directory of the C sources (`crash_tracer.c`, and `crash_threads.c` for the
/// engine's tests): `c/` in this crate.
pub fn c_dir() -> PathBuf {
    crate::workspace_root().join("testsupport/c")
}

/// Compiles C `source` into `out` with gcc and `args`; panics with gcc's output on failure.
pub fn compile_c(source: &Path, out: &Path, args: &[&str]) {
    let output = Command::new("gcc")
        .args(args)
        .arg("-o")
        .arg(out)
        .arg(source)
        .output()
        .expect("run gcc");
    assert!(
        output.status.success(),
        "gcc {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `program` (in its own directory) until it crashes and returns
/// `(minidump_path, core_path)` of that one crash.
pub fn make_minidump_and_core(program: &Path) -> (PathBuf, PathBuf) {
    let r = record_crash(program);
    (r.minidump, r.core)
}

/// As [`make_minidump_and_core`], with what the tracer saw.
pub fn record_crash(program: &Path) -> RecordedCrash {
    let program = program.canonicalize().expect("program path");
    let dir = program.parent().expect("program dir").to_path_buf();
    let tracer = dir.join("crash_tracer");
    if !tracer.exists() {
        compile_c(&c_dir().join("crash_tracer.c"), &tracer, &["-O1", "-Wall"]);
    }
    let core = dir.join("core");
    let _ = std::fs::remove_file(&core);
    let minidump = dir.join(format!(
        "{}.dmp",
        program.file_name().unwrap().to_string_lossy()
    ));

    let mut child = Command::new(&tracer)
        .arg(&program)
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn crash_tracer");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    // the program's own lines come first: it writes them before its fatal signal, which
    // the tracer waits for before it says anything
    let mut printed = String::new();
    let stopped = loop {
        let mut l = String::new();
        let n = out.read_line(&mut l).expect("read tracer");
        assert!(
            n > 0,
            "crash_tracer said nothing; the program printed {printed:?}"
        );
        // a last line of the program's without a newline ends where the tracer's begins
        match l.find("stopped pid=") {
            Some(at) => {
                printed.push_str(&l[..at]);
                break l[at..].trim_end().to_string();
            }
            None => printed.push_str(&l),
        }
    };
    let mut line = |what: &str| {
        let mut l = String::new();
        out.read_line(&mut l).expect("read tracer");
        assert!(
            l.starts_with(what),
            "crash_tracer said {l:?}, expected {what}"
        );
        l.trim_end().to_string()
    };
    let gregs = line("gregs");
    let fpregs = line("fpregs ");
    let field = |name: &str| -> &str {
        stopped
            .split(' ')
            .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .unwrap_or_else(|| panic!("no {name} in {stopped:?}"))
    };
    let stop = Stop {
        pid: field("pid").parse().unwrap(),
        tid: field("tid").parse().unwrap(),
        signo: field("signo").parse().unwrap(),
        code: field("code").parse().unwrap(),
        addr: u64::from_str_radix(field("addr").trim_start_matches("0x"), 16).unwrap(),
        gregs: gregs
            .split(' ')
            .skip(1)
            .map(|h| u64::from_str_radix(h, 16).unwrap())
            .collect(),
        fpregs: {
            let hex = fpregs.strip_prefix("fpregs ").unwrap();
            (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                .collect()
        },
    };

    write_minidump(&stop, &minidump);

    writeln!(stdin, "go").unwrap();
    drop(stdin);
    let exit = line("exit ");
    child.wait().unwrap();
    assert!(
        exit.contains("signaled=1") && exit.contains("core=1"),
        "the program did not dump core: {exit}"
    );
    assert!(core.exists(), "no core at {}", core.display());
    RecordedCrash {
        minidump,
        core,
        stop,
        stdout: printed,
    }
}

/// Writes the minidump of the stopped process with a crash context built from `stop`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn write_minidump(stop: &Stop, path: &Path) {
    use minidump_writer::crash_context::{mcontext_t, ucontext_t, CrashContext as RawContext};
    use minidump_writer::minidump_writer::MinidumpWriterConfig;
    use std::mem::{offset_of, size_of};

    // The workspace forbids unsafe code, so the context is assembled as bytes at the
    // offsets the compiler reports and handed to the crate's safe `from_bytes`.
    let mut b = vec![0u8; size_of::<RawContext>()];
    let put = |b: &mut Vec<u8>, at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
    let gregs_at = offset_of!(RawContext, context)
        + offset_of!(ucontext_t, uc_mcontext)
        + offset_of!(mcontext_t, gregs);
    for (i, g) in stop.gregs.iter().enumerate() {
        put(&mut b, gregs_at + 8 * i, &g.to_le_bytes());
    }
    put(&mut b, offset_of!(RawContext, float_state), &stop.fpregs);
    let si = offset_of!(RawContext, siginfo);
    put(
        &mut b,
        si + offset_of!(libc::signalfd_siginfo, ssi_signo),
        &stop.signo.to_le_bytes(),
    );
    put(
        &mut b,
        si + offset_of!(libc::signalfd_siginfo, ssi_code),
        &stop.code.to_le_bytes(),
    );
    put(
        &mut b,
        si + offset_of!(libc::signalfd_siginfo, ssi_addr),
        &stop.addr.to_le_bytes(),
    );
    put(&mut b, offset_of!(RawContext, pid), &stop.pid.to_le_bytes());
    put(&mut b, offset_of!(RawContext, tid), &stop.tid.to_le_bytes());
    let inner = RawContext::from_bytes(&b).expect("crash context size");

    let mut file = std::fs::File::create(path).expect("create minidump");
    let mut config = MinidumpWriterConfig::new(stop.pid, stop.tid);
    config.set_crash_context(minidump_writer::CrashContextExt { inner });
    config.write(&mut file).expect("write minidump");
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn write_minidump(_stop: &Stop, _path: &Path) {
    unimplemented!("recording crashes needs x86_64 Linux")
}

/// Runs gdb in batch mode on `program` + `core` with `commands`; returns stdout.
pub fn gdb(program: &Path, core: &Path, commands: &[&str]) -> String {
    let mut cmd = Command::new("gdb");
    cmd.args(["-batch", "-nx", "-q"]);
    for c in commands {
        cmd.arg("-ex").arg(c);
    }
    let out = cmd
        .arg(program)
        .arg(core)
        .env("LC_ALL", "C")
        .output()
        .expect("run gdb");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// gdb's `info registers` of the core's current (crashed) thread: name → value.
pub fn gdb_registers(program: &Path, core: &Path) -> std::collections::BTreeMap<String, u64> {
    gdb(program, core, &["info registers"])
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next()?;
            let v = it.next()?.strip_prefix("0x")?;
            Some((name.to_string(), u64::from_str_radix(v, 16).ok()?))
        })
        .collect()
}
