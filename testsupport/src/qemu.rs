//! aarch64 crash programs run under QEMU's user-mode emulator (and, through
//! [`crash_under`], the 32-bit arm ones).
//!
//! Programs are cross-compiled with `aarch64-linux-gnu-gcc` and run under
//! `qemu-aarch64-static -cpu max` (which implements pointer authentication) against the
//! cross libc in [`SYSROOT`]; QEMU writes its own core of the crash
//! (`qemu_PROG_TIME_PID.core`, in the working directory), which `gdb-multiarch` reads.
//! Shared by the ELF-core comparison (`server/tests/gdb_compare/aarch64.rs`), the engine's
//! minidump reader tests (`engine/tests/minidump.rs`) and the minidump comparison
//! (`server/tests/minidump_gdb`), which convert the same core into a minidump
//! ([`crate::core_to_minidump`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub const CC: &str = "aarch64-linux-gnu-gcc";
pub const QEMU: &str = "qemu-aarch64-static";
pub const GDB: &str = "gdb-multiarch";
/// The cross libc: QEMU's `-L` prefix, gdb's sysroot.
pub const SYSROOT: &str = "/usr/aarch64-linux-gnu";

/// Whether the cross C compiler, QEMU and gdb-multiarch can run; prints why not.
pub fn tools_present() -> bool {
    tools_present_with(CC)
}

/// Whether the cross compiler `compiler` (C or C++), QEMU and gdb-multiarch can run;
/// prints why not.
pub fn tools_present_with(compiler: &str) -> bool {
    for tool in [compiler, QEMU, GDB] {
        let ok = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipping the aarch64 gdb comparison: {tool} is not installed (see test.sh)");
            return false;
        }
    }
    if !Path::new(SYSROOT).join("lib/libc.so.6").is_file() {
        eprintln!("skipping the aarch64 gdb comparison: no cross libc under {SYSROOT}");
        return false;
    }
    true
}

/// Runs `exe` under QEMU's `-cpu max` in `dir` until it dies and returns QEMU's core.
pub fn crash(dir: &Path, exe: &Path) -> PathBuf {
    crash_on(dir, exe, "max")
}

/// Runs `exe` under QEMU's `cpu` (e.g. `max,pauth=off`) in `dir` until it dies and returns
/// QEMU's core. The host kernel may dump QEMU itself as `core` too; that file is removed.
pub fn crash_on(dir: &Path, exe: &Path, cpu: &str) -> PathBuf {
    crash_in(dir, exe, cpu, SYSROOT)
}

/// [`crash_on`] with the target's libraries under `sysroot` (QEMU's `-L`; `/` for the
/// target's own libraries installed through Debian's multiarch).
pub fn crash_in(dir: &Path, exe: &Path, cpu: &str, sysroot: &str) -> PathBuf {
    crash_under(QEMU, dir, exe, cpu, sysroot)
}

/// [`crash_in`] under another of QEMU's user-mode emulators (`qemu-arm-static` for the
/// 32-bit arm programs).
pub fn crash_under(qemu: &str, dir: &Path, exe: &Path, cpu: &str, sysroot: &str) -> PathBuf {
    let script = format!(
        "ulimit -c unlimited; exec {qemu} -cpu {cpu} -L {sysroot} '{}'",
        exe.display()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run qemu");
    assert!(
        !out.status.success(),
        "{} did not crash:\n{}",
        exe.display(),
        String::from_utf8_lossy(&out.stdout)
    );
    qemu_core(dir, exe, &out.status.to_string())
}

/// [`crash_under`] with a debugger at QEMU's gdbstub: QEMU holds the program at its
/// first instruction until `debugger(port)` connects to 127.0.0.1:`port` (e.g.
/// [`crate::gdb::frames_live`], which reads the frames at the fatal signal and lets it
/// through). Returns QEMU's core and what `debugger` returned.
pub fn crash_under_debugger<T>(
    qemu: &str,
    dir: &Path,
    exe: &Path,
    cpu: &str,
    sysroot: &str,
    debugger: impl FnOnce(u16) -> T,
) -> (PathBuf, T) {
    // a port free now; QEMU binds it a moment later (another process taking it between
    // would fail the test loudly, not wrongly)
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let script = format!(
        "ulimit -c unlimited; exec {qemu} -g {port} -cpu {cpu} -L {sysroot} '{}'",
        exe.display()
    );
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("run qemu");
    let seen = debugger(port);
    let status = child.wait().expect("wait for qemu");
    assert!(!status.success(), "{} did not crash", exe.display());
    (qemu_core(dir, exe, &status.to_string()), seen)
}

/// [`crash_under_debugger`] with `gdb` (`gdb-multiarch`; `setup`, e.g. `set sysroot …`,
/// run before it connects) reading every thread at the fatal signal
/// ([`crate::gdb::frames_live`]): QEMU's core and gdb's frames of the live process. For
/// a position-independent program, which gdb cannot relocate from QEMU's core.
pub fn crash_under_live_gdb(
    qemu: &str,
    dir: &Path,
    exe: &Path,
    cpu: &str,
    sysroot: &str,
    gdb: &str,
    setup: &[&str],
) -> (PathBuf, crate::gdb::GdbCore) {
    crash_under_debugger(qemu, dir, exe, cpu, sysroot, |port| {
        crate::gdb::frames_live(gdb, setup, dir, exe, port)
    })
}

/// An aarch64 program crashed under `-cpu max` in `dir`, and gdb-multiarch's frames of it:
/// of the live process at its fault when `pie` (gdb cannot relocate a PIE from QEMU's
/// core: [`crash_under_live_gdb`]), of QEMU's core otherwise.
pub fn crash_aarch64_with_gdb(dir: &Path, exe: &Path, pie: bool) -> (PathBuf, crate::gdb::GdbCore) {
    let sysroot = format!("set sysroot {SYSROOT}");
    let setup = [sysroot.as_str(), "set architecture aarch64"];
    if pie {
        return crash_under_live_gdb(QEMU, dir, exe, "max", SYSROOT, GDB, &setup);
    }
    let core = crash(dir, exe);
    let gdb = crate::gdb::frames_with(GDB, &setup, dir, exe, &core);
    (core, gdb)
}

/// QEMU's core of `exe` in `dir` (`qemu_*.core`); removes the host kernel's core of QEMU
/// itself (`core`, `core.*`) if it wrote one.
fn qemu_core(dir: &Path, exe: &Path, status: &str) -> PathBuf {
    let mut core = None;
    for entry in std::fs::read_dir(dir).expect("read the work directory") {
        let path = entry.expect("directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if name.starts_with("qemu_") && name.ends_with(".core") {
            core = Some(path);
        } else if name == "core" || name.starts_with("core.") {
            let _ = std::fs::remove_file(&path);
        }
    }
    core.unwrap_or_else(|| {
        panic!(
            "{} died ({status}) but left no qemu_*.core in {}",
            exe.display(),
            dir.display()
        )
    })
}

/// The file on this machine of a module the crashed program loaded from `path`: the
/// program's own directory `dir` first, then the path under [`SYSROOT`] (where QEMU's
/// `-L` found it), then the sysroot's `lib/` by file name.
pub fn module_file(dir: &Path, path: &str) -> Option<PathBuf> {
    module_file_in(dir, SYSROOT, path)
}

/// [`module_file`] with the target's libraries under `sysroot` (`/usr/arm-linux-gnueabihf`
/// for the 32-bit arm programs).
pub fn module_file_in(dir: &Path, sysroot: &str, path: &str) -> Option<PathBuf> {
    let name = Path::new(path).file_name()?;
    [
        dir.join(name),
        Path::new(sysroot).join(path.trim_start_matches('/')),
        Path::new(sysroot).join("lib").join(name),
    ]
    .into_iter()
    .find(|p| p.is_file())
}
