//! i386: the same comparison with gdb, on crash programs built with `gcc -m32` (Debian's
//! `gcc-12-multilib`) and crashed natively (the kernel writes an ELF32 `EM_386` core) and
//! under `qemu-i386-static` (whose core has no `NT_FILE` nor `NT_SIGINFO`: the modules
//! come from the `link_map`, and without a vDSO the signal handlers return through glibc's
//! own restorer).
//!
//! The 32-bit libc these programs load is `libc6-i386`'s (`/usr/lib32`), for which Debian
//! ships no debug package (`libc6-dbg:i386` describes the i386 port's own libc in
//! `/lib/i386-linux-gnu`, another build): libc frames are named from its `.dynsym` on both
//! sides and unwound from its `.eh_frame`. Skipped, with the reason printed, when
//! `gcc -m32` cannot link (`test.sh` installs `gcc-12-multilib`).

use std::path::PathBuf;
use std::process::Command;

use postmortem_testsupport::compare;
use postmortem_testsupport::core_to_minidump::{core_to_minidump, Layout};
use postmortem_testsupport::gdb::{self, GdbCore};

use super::{check, crashed_names, report, Crashed, SIGABRT, SIGSEGV};

/// Whether `gcc -m32` links a program here; prints why not.
fn multilib_present() -> bool {
    let dir = std::env::temp_dir().join(format!("pm-m32-probe-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let src = dir.join("probe.c");
    let ok = std::fs::write(&src, "int main(void) { return 0; }\n").is_ok()
        && Command::new("gcc")
            .arg("-m32")
            .arg(&src)
            .arg("-o")
            .arg(dir.join("probe"))
            .output()
            .is_ok_and(|o| o.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    if !ok {
        eprintln!("skipped: gcc -m32 cannot link (install gcc-12-multilib, as test.sh does)");
    }
    ok
}

/// Asserts that `names` appear in gdb's crashed stack in this order (not necessarily
/// from frame 0: a libc frame without symbols may come first).
fn expect_in_order(gdb: &GdbCore, names: &[&str]) {
    let stack = crashed_names(gdb);
    let mut rest = stack.iter();
    for name in names {
        assert!(
            rest.any(|s| s == name),
            "gdb's crashed stack lacks {name} in order: {stack:?}"
        );
    }
}

/// [`check`] on the kernel's core, then the same crash as the minidump a Breakpad or
/// Crashpad client on Linux would have written of it (`MDRawContextX86`, every byte of
/// the core's memory, the modules' build-ids from their files): every thread of its walk
/// must equal gdb's frames of the core too, and it must say the same signal.
fn check_with_minidump(crashed: &Crashed, expect: impl Fn(&GdbCore)) {
    let (gdb, _) = check(crashed, expect);
    minidump_walks_alike(crashed, &gdb, gdb.signal);
}

/// The crash as a Linux client's minidump ([`check_with_minidump`]) walks to `gdb`'s
/// frames on every thread, with `signal`.
fn minidump_walks_alike(crashed: &Crashed, gdb: &GdbCore, signal: Option<u64>) {
    let bytes = std::fs::read(&crashed.core).expect("read the core");
    let converted = core_to_minidump(&bytes, Layout::X86, |path| {
        Some(PathBuf::from(path)).filter(|p| p.is_file())
    });
    let program = crashed.exe.to_string_lossy();
    assert!(
        converted.build_ids.iter().any(|(path, _)| *path == program),
        "the program's build-id is in the minidump: {:?}",
        converted.build_ids
    );
    let minidump = crashed.work.path().join("crash.dmp");
    std::fs::write(&minidump, &converted.bytes).expect("write the minidump");
    let report = report::walk_report(&minidump, crashed.work.path());
    assert_eq!(report["dump"]["format"], "minidump");
    assert_eq!(report["dump"]["arch"], "x86");
    assert_eq!(report["crash"]["signal"].as_u64(), signal, "signal");
    assert_eq!(
        report["crash"]["tid"].as_u64(),
        gdb.crashed_lwp,
        "crashed thread"
    );
    compare::assert_same_stacks(gdb, &report);
}

fn basic(case: &str, compiler: &str, flags: &[&str]) {
    if !multilib_present() {
        return;
    }
    let mut all = vec!["-m32"];
    all.extend_from_slice(flags);
    let crashed = Crashed::c(case, compiler, &all, &["basic.c"]);
    check_with_minidump(&crashed, |gdb| {
        assert_eq!(gdb.signal, Some(SIGSEGV));
        expect_in_order(gdb, &["crash_here", "middle", "outer", "main"]);
    });
}

#[test]
fn i386_c_o0_gcc() {
    basic("i386_c_o0_gcc", "gcc", &["-O0"]);
}

#[test]
fn i386_c_o2_omit_frame_pointer() {
    basic("i386_c_o2_omit_fp", "gcc", &["-O2", "-fomit-frame-pointer"]);
}

#[test]
fn i386_c_o2_pie_pic_thunks() {
    // position-independent code reaches its globals through __x86.get_pc_thunk.*
    basic("i386_c_o2_pie", "gcc", &["-O2", "-fPIE", "-pie"]);
}

#[test]
fn i386_abort_through_libc_and_the_vdso() {
    if !multilib_present() {
        return;
    }
    // abort's kill enters the kernel through the vDSO's __kernel_vsyscall
    let crashed = Crashed::c("i386_abort", "gcc", &["-m32", "-O0"], &["assert.c"]);
    check_with_minidump(&crashed, |gdb| {
        assert_eq!(gdb.signal, Some(SIGABRT));
        expect_in_order(gdb, &["check_invariant", "main"]);
    });
}

#[test]
fn i386_crash_inside_signal_handler() {
    if !multilib_present() {
        return;
    }
    let crashed = Crashed::c(
        "i386_sighandler",
        "gcc",
        &["-m32", "-O0"],
        &["sighandler.c"],
    );
    check_with_minidump(&crashed, |gdb| {
        expect_in_order(gdb, &["handler_fault", "on_segv", "victim", "main"]);
        assert!(
            gdb.crashed().frames.iter().any(|f| f.kind == "SIGTRAMP"),
            "gdb sees the signal frame"
        );
    });
}

#[test]
fn i386_threads_blocked_in_syscalls() {
    if !multilib_present() {
        return;
    }
    let crashed = Crashed::c(
        "i386_threads",
        "gcc",
        &["-m32", "-O0", "-pthread"],
        &["threads.c"],
    );
    check_with_minidump(&crashed, |gdb| {
        assert_eq!(gdb.threads.len(), 5);
        expect_in_order(gdb, &["fault", "crasher"]);
    });
}

/// QEMU's user-mode emulator for i386 programs: its cores have no `NT_FILE` note, so the
/// walk lists the modules from the dynamic linker's `link_map` (4-byte words).
const QEMU_I386: &str = "qemu-i386-static";

/// Whether `qemu-i386-static` runs here; prints why not.
fn qemu_i386_present() -> bool {
    let ok = Command::new(QEMU_I386)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: {QEMU_I386} is not installed (qemu-user-static, see test.sh)");
    }
    ok
}

/// Compiles `sources` with `gcc -m32` and `flags` and crashes the program under
/// `qemu-i386-static` (the host's own i386 libraries: `-L /`), whose core has no
/// `NT_FILE`. Asserts it has none, so that the case cannot pass on the notes instead.
fn crashed_under_qemu(case: &str, flags: &[&str], sources: &[&str]) -> Option<Crashed> {
    if !multilib_present() || !qemu_i386_present() {
        return None;
    }
    let work = postmortem_testsupport::program::Workdir::new(case);
    let mut all = vec!["-m32"];
    all.extend_from_slice(flags);
    let exe = work.compile("gcc", &all, sources, case);
    let core = postmortem_testsupport::qemu::crash_under(QEMU_I386, work.path(), &exe, "max", "/");
    assert!(!has_nt_file(&core), "QEMU's core has an NT_FILE note now");
    Some(Crashed {
        work,
        exe,
        core,
        live: false,
    })
}

/// Whether the ELF32 core at `path` has an `NT_FILE` note.
fn has_nt_file(path: &std::path::Path) -> bool {
    use object::read::elf::{FileHeader, ProgramHeader};
    let data = std::fs::read(path).expect("read the core");
    let header = object::elf::FileHeader32::<object::Endianness>::parse(&*data).expect("ELF32");
    let endian = header.endian().expect("endianness");
    let segments = header
        .program_headers(endian, &*data)
        .expect("program headers");
    segments.iter().any(|segment| {
        let Ok(Some(mut notes)) = segment.notes(endian, &*data) else {
            return false;
        };
        std::iter::from_fn(|| notes.next().ok().flatten())
            .any(|n| n.n_type(endian) == object::elf::NT_FILE)
    })
}

/// [`check`] for a QEMU core, which has no `NT_SIGINFO` (gdb's `$_siginfo` is void, so
/// gdb names no signal): the report's signal must be the one the program dies of, its
/// crashed thread gdb's, and every thread's frames gdb's; the same of its minidump.
fn check_qemu(crashed: &Crashed, signal: u64, expect: impl Fn(&GdbCore)) {
    let gdb = gdb::frames(crashed.work.path(), &crashed.exe, &crashed.core);
    expect(&gdb);
    let report = report::walk_report(&crashed.core, crashed.work.path());
    assert_eq!(report["dump"]["writer"], "qemu-user", "{}", report["dump"]);
    assert_eq!(report["crash"]["signal"].as_u64(), Some(signal), "signal");
    assert_eq!(report["crash"]["tid"].as_u64(), gdb.crashed_lwp, "crashed");
    assert_eq!(
        report["threads"][0]["tid"].as_u64(),
        gdb.crashed_lwp,
        "the crashed thread comes first"
    );
    compare::assert_same_stacks(&gdb, &report);
    compare::assert_same_source_lines(&gdb, &report);
    // and as a minidump, whose modules come from that link_map too
    minidump_walks_alike(crashed, &gdb, Some(signal));
}

/// QEMU cores: every thread's frames equal gdb's, with the modules from `link_map`.
fn qemu_basic(case: &str, flags: &[&str]) {
    let Some(crashed) = crashed_under_qemu(case, flags, &["basic.c"]) else {
        return;
    };
    check_qemu(&crashed, SIGSEGV, |gdb| {
        expect_in_order(gdb, &["crash_here", "middle", "outer", "main", "_start"]);
    });
}

#[test]
fn i386_qemu_core_c_o0() {
    qemu_basic("i386_qemu_o0", &["-O0"]);
}

#[test]
fn i386_qemu_core_c_o2_pie_omit_frame_pointer() {
    qemu_basic(
        "i386_qemu_o2",
        &["-O2", "-fomit-frame-pointer", "-fPIE", "-pie"],
    );
}

/// abort under QEMU: no vDSO, so the system call is made by the dynamic linker's
/// `_dl_sysinfo_int80` (no symbol in `ld-linux.so.2`'s `.dynsym`: `??` on both sides).
#[test]
fn i386_qemu_core_abort() {
    let Some(crashed) = crashed_under_qemu("i386_qemu_abort", &["-O0"], &["assert.c"]) else {
        return;
    };
    check_qemu(&crashed, SIGABRT, |gdb| {
        expect_in_order(
            gdb,
            &["raise", "abort", "__assert_fail", "check_invariant", "main"],
        );
    });
}

#[test]
fn i386_qemu_core_threads() {
    let Some(crashed) =
        crashed_under_qemu("i386_qemu_threads", &["-O0", "-pthread"], &["threads.c"])
    else {
        return;
    };
    check_qemu(&crashed, SIGSEGV, |gdb| {
        assert_eq!(gdb.threads.len(), 5);
        expect_in_order(gdb, &["fault", "crasher"]);
    });
}

#[test]
fn i386_qemu_core_signal_handler() {
    let Some(crashed) = crashed_under_qemu("i386_qemu_sighandler", &["-O0"], &["sighandler.c"])
    else {
        return;
    };
    check_qemu(&crashed, SIGSEGV, |gdb| {
        expect_in_order(gdb, &["handler_fault", "on_segv", "victim", "main"]);
    });
}
