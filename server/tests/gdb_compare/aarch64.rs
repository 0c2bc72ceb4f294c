//! aarch64: the same comparison with gdb, on crash programs cross-compiled with
//! `aarch64-linux-gnu-gcc` and crashed under `qemu-aarch64-static -cpu max` (which
//! implements pointer authentication), against `gdb-multiarch`.
//!
//! QEMU's user-mode emulator writes its own core (`qemu_PROG_TIME_PID.core`, in the working
//! directory): threads, registers and writable memory, but no NT_FILE and none of the
//! read-only file mappings — not even the executable's headers. So:
//! - the programs are linked `-no-pie`: gdb 13 cannot relocate a PIE whose headers the
//!   core lacks (it prints `?? ()` for every frame), and a test that gdb cannot read
//!   proves nothing;
//! - the modules carry no build-id: postmortem matches the files under `--symbols` by
//!   name (the program's directory and the cross libc, `/usr/aarch64-linux-gnu/lib`),
//!   gdb finds them through `set sysroot`. Debian has no debug package for the cross
//!   libc, so libc frames are named from `.dynsym` on both sides (or not at all);
//! - the core has no siginfo (gdb: "Unable to read siginfo"), so the signal is checked
//!   against what the program is known to do;
//! - the core has no NT_ARM_PAC_MASK: where gdb cannot strip a signed return address
//!   and stops, only its frames are compared (as for any early stop) and ours must
//!   still reach the outermost frame.
//!
//! Skipped, with the reason printed, when the cross tools are absent (`test.sh` installs
//! them).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::gdb::{self, GdbCore};
use crate::program::Workdir;
use crate::qemu::{tools_present, CC, GDB, SYSROOT};
use crate::{compare, report};

const SIGSEGV: u64 = 11;
const SIGABRT: u64 = 6;

/// Runs `exe` under QEMU until it dies and returns QEMU's core (see `qemu::crash`).
fn crash(work: &Workdir, exe: &Path) -> std::path::PathBuf {
    crate::qemu::crash(work.path(), exe)
}

/// `postmortem walk CORE --symbols WORKDIR --symbols SYSROOT/lib --format json`, checked
/// against the schema.
fn walk_report(core: &Path, workdir: &Path) -> Value {
    let out = Command::new(report::POSTMORTEM)
        .arg("walk")
        .arg(core)
        .arg("--symbols")
        .arg(workdir)
        .arg("--symbols")
        .arg(Path::new(SYSROOT).join("lib"))
        .args(["--format", "json"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run postmortem");
    assert_eq!(
        out.status.code(),
        Some(0),
        "postmortem walk {} failed:\n{}",
        core.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("the report is JSON");
    report::assert_valid(&report);
    report
}

/// Compiles `sources` with the cross compiler (`-g -no-pie` + `flags`), crashes the
/// program under QEMU, and compares gdb-multiarch's stacks with postmortem's.
/// Returns the report, or `None` when the tools are absent and the case was skipped.
fn case(
    name: &str,
    flags: &[&str],
    sources: &[&str],
    signal: u64,
    expect: impl Fn(&GdbCore),
) -> Option<Value> {
    if !tools_present() {
        return None;
    }
    let work = Workdir::new(name);
    let mut all_flags = vec!["-no-pie"];
    all_flags.extend_from_slice(flags);
    let exe = work.compile(CC, &all_flags, sources, name);
    let core = crash(&work, &exe);
    let sysroot = format!("set sysroot {SYSROOT}");
    let gdb = gdb::frames_with(
        GDB,
        &[&sysroot, "set architecture aarch64"],
        work.path(),
        &exe,
        &core,
    );
    expect(&gdb);
    let report = walk_report(&core, work.path());
    assert_eq!(report["dump"]["arch"], "aarch64");
    assert_eq!(report["dump"]["writer"], "qemu-user");
    assert!(
        report["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .any(|w| w["code"] == "pac-mask-inferred"),
        "QEMU cores carry no PAC mask: {}",
        report["warnings"]
    );
    let crash = &report["crash"];
    assert_eq!(crash["signal"].as_u64(), Some(signal), "signal");
    assert_eq!(crash["tid"].as_u64(), gdb.crashed_lwp, "crashed thread");
    assert_eq!(report["threads"][0]["crashed"].as_bool(), Some(true));
    compare::assert_same_stacks(&gdb, &report);
    // Where gdb gave up early, ours goes on to the outermost frame.
    for thread in report["threads"].as_array().expect("threads") {
        assert_eq!(
            thread["end"], "outermost",
            "thread {} did not reach the outermost frame: {}",
            thread["tid"], thread["end_detail"]
        );
    }
    Some(report)
}

/// gdb's names for the crashed thread's frames.
fn names(gdb: &GdbCore) -> Vec<String> {
    gdb.crashed()
        .frames
        .iter()
        .map(|f| f.name.clone().unwrap_or_else(|| "??".to_owned()))
        .collect()
}

/// gdb's crashed stack holds `expected` in order, the first in frame 0.
fn expect_stack(gdb: &GdbCore, expected: &[&str]) {
    let stack = names(gdb);
    assert_eq!(
        stack.first().map(String::as_str),
        expected.first().copied(),
        "gdb's frame 0: {stack:?}"
    );
    let mut rest = stack.iter();
    for name in expected {
        assert!(
            rest.any(|s| s == name),
            "gdb's crashed stack lacks {name} in order: {stack:?}"
        );
    }
}

fn basic(name: &str, flags: &[&str]) {
    case(name, flags, &["basic.c"], SIGSEGV, |gdb| {
        expect_stack(gdb, &["crash_here", "middle"]);
    });
}

#[test]
fn aarch64_c_o0() {
    basic("a64_o0", &["-O0"]);
}

#[test]
fn aarch64_c_o2_omit_frame_pointer() {
    basic("a64_o2_omit_fp", &["-O2", "-fomit-frame-pointer"]);
}

#[test]
fn aarch64_c_o2_no_omit_frame_pointer() {
    basic("a64_o2_no_omit_fp", &["-O2", "-fno-omit-frame-pointer"]);
}

/// Signed return addresses: without the core's PAC mask gdb cannot strip them and stops
/// after frame 0 (which shows the return addresses really were signed); only that frame
/// is compared, and our stack must name every caller down to `_start` by itself.
fn pac(name: &str, flags: &[&str]) {
    let ours = case(name, flags, &["basic.c"], SIGSEGV, |gdb| {
        let stack = names(gdb);
        assert_eq!(
            stack.first().map(String::as_str),
            Some("crash_here"),
            "gdb's frame 0: {stack:?}"
        );
        assert!(
            !stack.iter().any(|n| n == "main"),
            "gdb unwound past a signed return address without a PAC mask: {stack:?}"
        );
    });
    let Some(report) = ours else { return };
    let frames = report["threads"][0]["frames"].as_array().expect("frames");
    let functions: Vec<&str> = frames
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("??"))
        .collect();
    for (i, expected) in ["crash_here", "middle"].iter().enumerate() {
        assert_eq!(functions.get(i), Some(expected), "our stack: {functions:?}");
    }
    assert!(
        functions.contains(&"main"),
        "our stack lacks main: {functions:?}"
    );
    assert_eq!(
        functions.last(),
        Some(&"_start"),
        "our stack: {functions:?}"
    );
    // The callers were found by their CFI, which gimli reads only once the aarch64 pass
    // has made the `B` augmentation (key B) readable.
    for f in frames.iter().skip(1) {
        if matches!(f["function"].as_str(), Some("middle" | "main")) {
            assert_eq!(f["trust"], "cfi", "frame {f}");
        }
    }
    for f in frames {
        let pc = f["pc"]
            .as_str()
            .and_then(compare::parse_hex)
            .expect("hex pc");
        assert!(pc < 1 << 48, "a pc kept its PAC bits: {pc:#x}");
    }
}

#[test]
fn aarch64_pac_ret_key_a() {
    pac("a64_pac_ret", &["-O2", "-mbranch-protection=pac-ret"]);
}

#[test]
fn aarch64_pac_ret_key_b() {
    pac(
        "a64_pac_ret_b",
        &["-O2", "-mbranch-protection=pac-ret+b-key"],
    );
}

#[test]
fn aarch64_pac_ret_o0_frame_records() {
    pac(
        "a64_pac_ret_o0",
        &["-O0", "-mbranch-protection=pac-ret+leaf"],
    );
}

#[test]
fn aarch64_abort_from_failed_assert() {
    case("a64_assert", &["-O0"], &["assert.c"], SIGABRT, |gdb| {
        let stack = names(gdb);
        assert!(
            stack.iter().any(|n| n == "check_invariant"),
            "gdb's stack: {stack:?}"
        );
    });
}

#[test]
fn aarch64_threads_blocked_in_syscalls() {
    case(
        "a64_threads",
        &["-O0", "-pthread"],
        &["threads.c"],
        SIGSEGV,
        |gdb| {
            assert_eq!(gdb.threads.len(), 5, "main, three parked threads, crasher");
            expect_stack(gdb, &["fault", "crasher"]);
        },
    );
}
