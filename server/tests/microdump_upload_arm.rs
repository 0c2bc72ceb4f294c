//! The service takes a Breakpad microdump of a 32-bit arm (armhf) crash in a logcat
//! upload and walks it as gdb-multiarch walks the core of the same crash (issue 39).
//!
//! As [`crate::microdump_upload`] does for aarch64: a crash program built by
//! `arm-linux-gnueabihf-gcc -g -no-pie` (or `-pie`, gdb then walking the live process) as
//! ARM or as Thumb code, crashed under
//! `qemu-arm-static -cpu cortex-a15` (as the arm gdb comparison crashes it,
//! [`crate::gdb_compare::arm`]), whose core gdb-multiarch reads (the reference); the
//! microdump is written from that core in the record format a 32-bit Android process's
//! Breakpad writes ([`postmortem_testsupport::microdump`]: `O A arm`, 8-digit pointers,
//! `MDRawContextARM`, and the `H` record of the free address space, which 64-bit
//! processes do not write) inside `adb logcat -v brief` lines. The program, the armhf
//! libc and the dynamic linker are uploaded to a real server on a free port, matched to
//! the microdump's modules by the Breakpad debug ids of their build-ids; the log is
//! uploaded as a crash. The report's one thread must be gdb's crashed thread frame for
//! frame (pc, function, inlined calls, file and line), none past gdb's last where gdb
//! walked to `_start`, every frame found inside the stack the microdump holds (libc's
//! from its EHABI tables: the armhf libc has no DWARF CFI); the `H` record's largest
//! hole, total and count must be the report's annotations.
//!
//! Skipped, saying so, without the cross tools (`test.sh` installs them).

use std::path::{Path, PathBuf};

use serde_json::Value;

use postmortem_testsupport::compare;
use postmortem_testsupport::gdb::GdbCore;
use postmortem_testsupport::microdump::{self, Written};
use postmortem_testsupport::program::Workdir;
use postmortem_testsupport::qemu;

use crate::common;
use crate::gdb_compare::arm::{self as arm_gdb, BASIC_STACK, CC, CPU, OBJCOPY, QEMU, SYSROOT};
use crate::microdump_upload::crashed_thread_only;

const SIGSEGV: u64 = 11;
const SIGABRT: u64 = 6;

/// A crash, gdb's walk of its core and the microdump written of it.
struct Case {
    _work: Workdir,
    gdb: GdbCore,
    written: Written,
    /// The program, libc and ld.so.
    files: Vec<PathBuf>,
}

/// Builds `source` with `flags` (besides `-g` and `-no-pie`, or `-fPIE` where `flags` hold
/// `-pie`; EHABI tables only, `.debug_frame` removed, when `ehabi_only`), crashes it under
/// QEMU, takes gdb's walk (of the core; of the live process at its fault for a PIE, whose
/// core gdb cannot relocate) and writes the microdump of the crash.
fn crash(name: &str, flags: &[&str], source: &str, ehabi_only: bool) -> Option<Case> {
    if !arm_gdb::tools_present() {
        return None;
    }
    let work = Workdir::new(name);
    let pie = flags.contains(&"-pie");
    let mut all = if pie { vec!["-fPIE"] } else { vec!["-no-pie"] };
    if ehabi_only {
        all.extend(["-funwind-tables", "-fno-asynchronous-unwind-tables"]);
    }
    all.extend_from_slice(flags);
    let exe = work.compile(CC, &all, &[source], name);
    if ehabi_only {
        let path = exe.to_string_lossy().into_owned();
        work.run_tool(OBJCOPY, &["--remove-section=.debug_frame", &path]);
        arm_gdb::assert_ehabi_only(&exe);
    }
    let (core, gdb) = if pie {
        arm_gdb::crash_under_live_gdb(&work, &exe)
    } else {
        let core = qemu::crash_under(QEMU, work.path(), &exe, CPU, SYSROOT);
        let gdb = arm_gdb::gdb_frames(&work, &exe, &core);
        (core, gdb)
    };
    let dir = work.path().to_path_buf();
    let written = microdump::from_core(&std::fs::read(&core).unwrap(), |path| {
        qemu::module_file_in(&dir, SYSROOT, path)
    });
    let files: Vec<_> = written
        .modules
        .iter()
        .map(|(path, _)| qemu::module_file_in(&dir, SYSROOT, path).unwrap())
        .collect();
    let has = |n: &str| files.iter().any(|f| f.file_name().is_some_and(|f| f == n));
    assert!(
        files.contains(&exe) && has("libc.so.6") && has("ld-linux-armhf.so.3"),
        "the microdump lists the program, libc and ld.so: {:?}",
        written.modules
    );
    assert_eq!(
        written.pc,
        gdb.crashed().frames[0].pc,
        "the microdump's context is the crashed thread's"
    );
    assert!(
        written.records.iter().any(|r| r.starts_with("O A arm ")),
        "an Android arm process's OS record"
    );
    Some(Case {
        _work: work,
        gdb,
        written,
        files,
    })
}

/// Uploads the case's files and its microdump as a logcat to a fresh server and returns
/// the report, checked for what every such report says: the microdump's format, arch,
/// OS and signal, the uploaded modules found, one crashed thread, and the free address
/// space the `H` record gives.
async fn report_through_the_service(case: &Case, signal: u64) -> Value {
    let free = case.written.free_space.clone().expect("an H record on arm");
    assert!(
        free.holes > 0 && free.largest > 0 && free.largest <= free.total,
        "the free space the core's mappings leave: {free:?}"
    );
    let logcat = case.written.logcat_brief(4321);
    let server = common::TempServer::start(&[]);
    let client = common::client();
    for file in &case.files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        common::upload_binary(&client, &server.base, file, &name).await;
    }
    let id = common::upload_crash(&client, &server.base, logcat.as_bytes()).await;
    let record = common::poll_done(&client, &server.base, &id).await;
    assert_eq!(record["status"], "done", "{record:#}");
    let report = record["report"].clone();
    assert_eq!(report["dump"]["format"], "microdump", "{report:#}");
    assert_eq!(report["dump"]["arch"], "arm");
    assert_eq!(report["dump"]["os"], "android");
    assert_eq!(report["crash"]["signal"].as_u64(), Some(signal));
    for m in report["modules"].as_array().expect("modules") {
        let uploaded = case.files.iter().any(|f| {
            f.file_name()
                .is_some_and(|n| Path::new(n) == m["name"].as_str().unwrap_or_default())
        });
        assert!(uploaded, "a module the microdump lists: {m}");
        assert_eq!(m["status"], "ok", "an uploaded module: {m}");
    }
    let annotations = &report["annotations"];
    for (key, value) in [
        ("free_address_space_largest", free.largest),
        ("free_address_space_total", free.total),
        ("free_address_space_holes", free.holes),
    ] {
        assert_eq!(
            annotations[key].as_str(),
            Some(value.to_string().as_str()),
            "{key}: {annotations}"
        );
    }
    let threads = report["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), 1, "a microdump holds the crashed thread");
    assert_eq!(threads[0]["crashed"], true);
    // shown with --nocapture
    eprintln!(
        "gdb: {:?}; ours: {}",
        case.gdb.crashed().frames,
        threads[0]["frames"]
    );
    compare::assert_same_stacks(&crashed_thread_only(&case.gdb), &report);
    report
}

/// The crashed thread's frame of `function` was unwound from `source`.
fn assert_unwound_from(report: &Value, function: &str, source: &str) {
    let frames = report["threads"][0]["frames"].as_array().expect("frames");
    let f = frames
        .iter()
        .skip(1)
        .find(|f| f["function"] == function)
        .unwrap_or_else(|| panic!("no frame of {function}"));
    assert_eq!(f["unwind_source"], source, "{f}");
}

/// `basic.c` through the service: gdb walks to `_start` and ours stops there too.
async fn basic(name: &str, flags: &[&str], ehabi_only: bool) -> Option<Value> {
    let case = crash(name, flags, "basic.c", ehabi_only)?;
    arm_gdb::expect_stack(&case.gdb, BASIC_STACK);
    let report = report_through_the_service(&case, SIGSEGV).await;
    // gdb stops after `_start` ("previous frame identical"): ours must stop there too
    assert_eq!(
        report["threads"][0]["frames"].as_array().map(Vec::len),
        Some(case.gdb.crashed().frames.len()),
        "no frame past gdb's last"
    );
    // libc has EHABI tables only
    assert_unwound_from(&report, "__libc_start_main", "arm_exidx");
    Some(report)
}

#[tokio::test]
async fn the_service_walks_an_arm_microdump_as_gdb_walks_the_core() {
    basic("microdump_arm", &["-O2", "-marm"], false).await;
}

#[tokio::test]
async fn the_service_walks_a_thumb_microdump_as_gdb_walks_the_core() {
    basic("microdump_thumb", &["-O2", "-mthumb"], false).await;
}

/// A position-independent program, as every Android program is: loaded where the
/// system chose, its microdump's module record gives that address.
#[tokio::test]
async fn the_service_walks_a_pie_thumb_microdump_as_gdb_walks_the_process() {
    basic("microdump_pie_thumb", &["-O2", "-mthumb", "-pie"], false).await;
}

/// The program's own frames from its EHABI tables too (no DWARF CFI in it).
#[tokio::test]
async fn the_service_walks_an_ehabi_only_thumb_microdump_as_gdb_walks_the_core() {
    let Some(report) = basic("microdump_ehabi_thumb", &["-O0", "-mthumb"], true).await else {
        return;
    };
    for function in ["middle", "outer", "main"] {
        assert_unwound_from(&report, function, "arm_exidx");
    }
}

/// A failed `assert`: the crashed thread is in libc's `raise` under `abort`, which has no
/// unwind entry (its caller is found from its prologue, read from the uploaded libc: a
/// microdump holds no code). gdb stops in `abort`'s caller, which the libc names in no
/// symbol table (see `gdb_compare::arm::arm_abort_through_libc`); ours must give every
/// frame gdb gives, and go on to the program's frames.
#[tokio::test]
async fn the_service_walks_an_abort_microdump_as_gdb_walks_the_core() {
    let Some(case) = crash("microdump_assert", &["-O0", "-mthumb"], "assert.c", false) else {
        return;
    };
    arm_gdb::expect_stack(&case.gdb, &["??", "??", "raise", "abort", "??"]);
    let report = report_through_the_service(&case, SIGABRT).await;
    arm_gdb::expect_assert_frames_in_order(&report);
}

/// A crash in a thread other than the main one (`threads.c`: three threads parked in
/// system calls, a fourth crashes): the microdump holds the crashed thread, and its `H`
/// record stops at the main thread's stack, as `DumpFreeSpace` reads it.
#[tokio::test]
async fn the_service_walks_a_crashed_threads_microdump_as_gdb_walks_the_core() {
    let Some(case) = crash(
        "microdump_threads",
        &["-O0", "-pthread"],
        "threads.c",
        false,
    ) else {
        return;
    };
    assert_eq!(
        case.gdb.threads.len(),
        5,
        "main, three parked threads, crasher"
    );
    let report = report_through_the_service(&case, SIGSEGV).await;
    if case.gdb.crashed().complete {
        assert_eq!(
            report["threads"][0]["frames"].as_array().map(Vec::len),
            Some(case.gdb.crashed().frames.len()),
            "no frame past gdb's last"
        );
    }
}
