//! x86_64 crashes of the kinds that break naive walkers, each compared with gdb on every
//! thread: a call through a null function pointer (frame 0 outside any code), a stack
//! overflow on a small thread stack, a fault in a handler running on an alternate signal
//! stack, a fault in a callback called by libc, a division by zero inside an inlined
//! helper, a stack-protector abort over a smashed stack, and an uncaught C++ exception.

use super::{check, crashed_names, expect_stack, gdb, report, Crashed, SIGABRT, SIGSEGV};

const SIGFPE: u64 = 8;

#[test]
fn call_through_null_function_pointer() {
    for (case, flags) in [("nullfp_o0", &["-O0"][..]), ("nullfp_o2", &["-O2"][..])] {
        let crashed = Crashed::c(case, "gcc", flags, &["nullfp.c"]);
        check(&crashed, |gdb| {
            assert_eq!(gdb.signal, Some(SIGSEGV));
            let thread = gdb.crashed();
            assert_eq!(thread.frames[0].pc, 0, "gdb's frame 0 is the null call");
            let names = crashed_names(gdb);
            assert!(
                names.iter().any(|n| n == "dispatch"),
                "gdb shows the caller of the null pointer: {names:?}"
            );
        });
    }
}

#[test]
fn stack_overflow_on_a_small_thread_stack() {
    let crashed = Crashed::c("overflow", "gcc", &["-O0", "-pthread"], &["overflow.c"]);
    check(&crashed, |gdb| {
        assert_eq!(gdb.signal, Some(SIGSEGV));
        let depth = crashed_names(gdb)
            .iter()
            .filter(|n| *n == "descend")
            .count();
        assert!(
            depth > 100,
            "gdb sees the runaway recursion: {depth} frames"
        );
        assert_eq!(gdb.threads.len(), 2);
    });
}

#[test]
fn fault_in_handler_on_alternate_signal_stack() {
    let crashed = Crashed::c("altstack", "gcc", &["-O0"], &["sigaltstack.c"]);
    check(&crashed, |gdb| {
        expect_stack(
            gdb,
            &[
                "deep_in_handler",
                "on_segv",
                "__restore_rt",
                "victim",
                "main",
            ],
        );
    });
}

#[test]
fn fault_in_callback_called_by_libc_qsort() {
    for (case, flags) in [("qsort_o0", &["-O0"][..]), ("qsort_o2", &["-O2"][..])] {
        let crashed = Crashed::c(case, "gcc", flags, &["qsort_cmp.c"]);
        check(&crashed, |gdb| {
            assert_eq!(gdb.signal, Some(SIGSEGV));
            expect_stack(gdb, &["by_weight", "msort_with_tmp", "main"]);
        });
    }
}

#[test]
fn division_by_zero_in_inlined_helper() {
    let crashed = Crashed::c("divzero", "gcc", &["-O2"], &["divzero.c"]);
    check(&crashed, |gdb| {
        assert_eq!(gdb.signal, Some(SIGFPE));
        expect_stack(gdb, &["ratio", "average", "main"]);
    });
}

#[test]
fn uncaught_cpp_exception() {
    let crashed = Crashed::c("uncaught", "g++", &["-O0"], &["terminate.cpp"]);
    check(&crashed, |gdb| {
        assert_eq!(gdb.signal, Some(SIGABRT));
        expect_stack(
            gdb,
            &[
                "__pthread_kill_implementation",
                "__cxa_throw",
                "config::parse_setting",
                "config::load_config",
                "main",
            ],
        );
    });
}

/// gdb unwinds past the smashed frame into the overwritten bytes (`0x4141414141414141
/// in ??`); those frames are garbage, so gdb's stack is compared up to them and ours may
/// go on (it must not invent frames before them).
#[test]
fn stack_protector_abort_over_smashed_stack() {
    let crashed = Crashed::c(
        "smash",
        "gcc",
        &["-O0", "-fstack-protector-strong"],
        &["smash.c"],
    );
    let mut gdb = gdb::frames(crashed.work.path(), &crashed.exe, &crashed.core);
    assert_eq!(gdb.signal, Some(SIGABRT));
    expect_stack(
        &gdb,
        &["__pthread_kill_implementation", "__stack_chk_fail", "parse"],
    );
    let lwp = gdb.crashed_lwp;
    let thread = gdb
        .threads
        .iter_mut()
        .find(|t| Some(t.lwp) == lwp)
        .expect("crashed thread");
    let garbage = thread
        .frames
        .iter()
        .position(|f| f.pc == 0x4141_4141_4141_4141)
        .expect("gdb walks into the overwritten return address");
    thread.frames.truncate(garbage);
    thread.complete = false;
    let report = report::walk_report(&crashed.core, crashed.work.path());
    super::compare::assert_same_stacks(&gdb, &report);
    let frames = report["threads"][0]["frames"].as_array().expect("frames");
    assert!(
        frames
            .iter()
            .all(|f| f["pc"].as_str() != Some("0x4141414141414141")),
        "our walk must not follow the overwritten return address"
    );
}

/// A caller whose return address is one past the end of `.text` (its last instruction a
/// call to `abort`, it the section's last function): looked up at the call, it is a
/// frame like any other. The walk dropped it and scanned on to the next caller.
#[test]
fn abort_called_by_the_last_instruction_of_text() {
    // not position-independent: gdb's pcs are the link-time addresses readelf gives
    let crashed = Crashed::c(
        "noreturn_last",
        "gcc",
        &["-O2", "-no-pie"],
        &["noreturn_last.c"],
    );
    let out = std::process::Command::new("readelf")
        .args(["-SW"])
        .arg(&crashed.exe)
        .output()
        .unwrap();
    let sections = String::from_utf8_lossy(&out.stdout);
    let text_end = sections
        .lines()
        .find_map(|l| {
            let l = l.split_once(']')?.1;
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&".text")).then(|| {
                let addr = u64::from_str_radix(f[2], 16).unwrap();
                let size = u64::from_str_radix(f[4], 16).unwrap();
                addr + size
            })
        })
        .expect("readelf lists .text");
    let (gdb, _) = check(&crashed, |gdb| {
        assert_eq!(gdb.signal, Some(SIGABRT));
        expect_stack(
            gdb,
            &[
                "__pthread_kill_implementation",
                "__GI_abort",
                "die_after",
                "main",
            ],
        );
    });
    // the case tests what it says: die_after's return address is the end of .text
    let die_after = gdb
        .crashed()
        .frames
        .iter()
        .find(|f| f.name.as_deref() == Some("die_after"))
        .unwrap();
    assert_eq!(
        die_after.pc, text_end,
        "die_after's return address ends .text"
    );
}
