//! i386: the same comparison with gdb, on crash programs built with `gcc -m32` (Debian's
//! `gcc-12-multilib`) and crashed natively: the kernel writes an ELF32 `EM_386` core.
//!
//! The 32-bit libc these programs load is `libc6-i386`'s (`/usr/lib32`), for which Debian
//! ships no debug package (`libc6-dbg:i386` describes the i386 port's own libc in
//! `/lib/i386-linux-gnu`, another build): libc frames are named from its `.dynsym` on both
//! sides and unwound from its `.eh_frame`. Skipped, with the reason printed, when
//! `gcc -m32` cannot link (`test.sh` installs `gcc-12-multilib`).

use std::process::Command;

use postmortem_testsupport::gdb::GdbCore;

use super::{check, crashed_names, Crashed, SIGABRT, SIGSEGV};

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

fn basic(case: &str, compiler: &str, flags: &[&str]) {
    if !multilib_present() {
        return;
    }
    let mut all = vec!["-m32"];
    all.extend_from_slice(flags);
    let crashed = Crashed::c(case, compiler, &all, &["basic.c"]);
    check(&crashed, |gdb| {
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
    check(&crashed, |gdb| {
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
    check(&crashed, |gdb| {
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
    check(&crashed, |gdb| {
        assert_eq!(gdb.threads.len(), 5);
        expect_in_order(gdb, &["fault", "crasher"]);
    });
}
