//! Module identification against gdb's: a module is what the dynamic linker loaded or what
//! is mapped executable, never a file the process maps as data — even an ELF file with a
//! module's build-id (a separate debug file read by a symbolizer), or the program's own
//! binary read back. Each case is compiled and crashed here, compared with gdb frame by
//! frame on every thread, and its module list with gdb's `info sharedlibrary`.

use std::path::Path;

use serde_json::Value;

use super::{check, compare, gdb, report, Crashed, Workdir, SIGSEGV};

/// Whether the core's NT_FILE note names a file under `dir`: the precondition of the
/// data-mapping cases (the process really mapped such a file when it died).
fn core_maps_file_under(core: &Path, dir: &str) -> bool {
    let bytes = std::fs::read(core).expect("read the core");
    bytes.windows(dir.len()).any(|w| w == dir.as_bytes())
}

/// The report's module named `name`.
fn module<'r>(report: &'r Value, name: &str) -> &'r Value {
    report["modules"]
        .as_array()
        .expect("modules")
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no module {name}: {:#}", report["modules"]))
}

/// The report's warnings with `code`.
fn warnings<'r>(report: &'r Value, code: &str) -> Vec<&'r Value> {
    report["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter(|w| w["code"] == code)
        .collect()
}

/// gdb's frames and module list, then ours: the same stacks, the same modules, libc
/// walked from its own unwind table, and the report saying which files gave libc's tables.
fn check_modules(crashed: &Crashed, expect: impl Fn(&gdb::GdbCore)) -> Value {
    let (gdb, report) = check(crashed, expect);
    compare::assert_same_modules(&gdb, &report);
    let libc = module(&report, "libc.so.6");
    assert!(
        libc["unwind"].as_array().is_some_and(|u| !u.is_empty()),
        "libc has its unwind table: {libc}"
    );
    assert_libc_files(libc);
    report
}

/// `readelf` on `path` with `flag`: its output.
fn readelf(flag: &str, path: &Path) -> String {
    let out = std::process::Command::new("readelf")
        .args(["-W", flag])
        .arg(path)
        .output()
        .expect("run readelf");
    assert!(out.status.success(), "readelf {flag} {}", path.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// libc's `files`, checked against what binutils says of the files on this machine: the
/// library at the path the dump records gave the unwind table (it has `.eh_frame`), and
/// the separate debug file of its build-id (libc6-dbg's `.build-id/xx/rest.debug`, which
/// has `.debug_info`) gave symbols and carries libc's build-id.
fn assert_libc_files(libc: &Value) {
    let path = Path::new(libc["path"].as_str().expect("libc's path"));
    let notes = readelf("-n", path);
    let id = notes
        .lines()
        .find_map(|l| l.split_once("Build ID: ").map(|(_, id)| id))
        .expect("libc has a build-id")
        .trim()
        .to_string();
    assert!(
        readelf("-S", path).contains(" .eh_frame "),
        "libc has .eh_frame"
    );
    let debug = Path::new("/usr/lib/debug/.build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    assert!(
        readelf("-S", &debug).contains(" .debug_info "),
        "{}",
        debug.display()
    );

    let files = libc["files"].as_array().expect("libc's files");
    let file = |kind: &str| {
        files
            .iter()
            .find(|f| f["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} file among libc's files: {files:#?}"))
    };
    let gave = |f: &Value, what: &str| {
        f["gave"]
            .as_array()
            .is_some_and(|g| g.contains(&what.into()))
    };
    let binary = file("binary");
    assert_eq!(binary["name"], "libc.so.6", "{binary}");
    assert_eq!(binary["build_id"], id.as_str(), "{binary}");
    assert!(
        gave(binary, "unwind"),
        "the library gave the unwind table: {binary}"
    );
    let debug_file = file("debug");
    assert_eq!(debug_file["name"], format!("{}.debug", &id[2..]).as_str());
    assert_eq!(debug_file["build_id"], id.as_str(), "{debug_file}");
    assert!(
        gave(debug_file, "symbols"),
        "the debug file gave symbols: {debug_file}"
    );
}

#[test]
fn debug_file_and_own_binary_mapped_as_data_are_not_modules() {
    let crashed = Crashed::c("mmap_debug", "gcc", &["-O1"], &["mmap_debug.c"]);
    assert!(
        core_maps_file_under(&crashed.core, "/usr/lib/debug/.build-id/"),
        "the program mapped libc's debug file (is libc6-dbg installed?)"
    );
    check_modules(&crashed, |gdb| {
        assert_eq!(gdb.signal, Some(SIGSEGV));
        super::expect_stack(gdb, &["crash_here", "middle", "main"]);
    });
}

/// The same process dumped live by gdb's `gcore` instead of the kernel: gcore writes its
/// own NT_FILE note and dumps every mapping, the data ones included.
#[test]
fn gcore_of_a_process_that_mapped_debug_files() {
    let work = Workdir::new("mmap_debug_live");
    let exe = work.compile("gcc", &["-O1"], &["mmap_debug.c"], "mmap_debug");
    let core = work.gcore_live_with(&exe, &["live"]);
    assert!(
        core_maps_file_under(&core, "/usr/lib/debug/.build-id/"),
        "the program mapped libc's debug file (is libc6-dbg installed?)"
    );
    let crashed = Crashed {
        work,
        exe,
        core,
        live: true,
    };
    check_modules(&crashed, |gdb| {
        let names = super::crashed_names(gdb);
        let mut rest = names.iter();
        for name in ["crash_here", "middle", "main"] {
            assert!(
                rest.any(|n| n == name),
                "gdb's stack lacks {name}: {names:?}"
            );
        }
    });
}

#[test]
fn rust_program_that_printed_a_backtrace() {
    let work = Workdir::new("rust_backtrace");
    let exe = work.rustc(
        "rust_backtrace.rs",
        &["-C", "opt-level=0"],
        "rust_backtrace",
    );
    let core = work.crash(&exe);
    assert!(
        core_maps_file_under(&core, "/usr/lib/debug/.build-id/"),
        "std's symbolizer mapped libc's debug file (is libc6-dbg installed?)"
    );
    let crashed = Crashed {
        work,
        exe,
        core,
        live: false,
    };
    check_modules(&crashed, |gdb| {
        assert_eq!(gdb.signal, Some(SIGSEGV));
        let names = super::crashed_names(gdb);
        assert!(
            names.iter().filter(|n| n.ends_with("fault")).count() == 4,
            "gdb sees the four fault frames: {names:?}"
        );
    });
}

/// Code written at run time into an anonymous page, and into a memfd: no module (gdb
/// lists none), the caller found from the stack, and the report says why.
#[test]
fn generated_code_in_anonymous_and_memfd_pages() {
    for (case, arg) in [("jit_anon", None), ("jit_memfd", Some("memfd"))] {
        let work = Workdir::new(case);
        let exe = work.compile("gcc", &["-O1"], &["jit.c"], case);
        let core = match arg {
            None => work.crash(&exe),
            Some(arg) => {
                // the program takes the memfd path when it has an argument
                let wrapper = work.path().join("run_with_arg.sh");
                std::fs::write(
                    &wrapper,
                    format!("#!/bin/sh\nexec '{}' {arg}\n", exe.display()),
                )
                .expect("write the wrapper");
                work.run_tool("chmod", &["+x", "run_with_arg.sh"]);
                work.crash(&wrapper)
            }
        };
        let crashed = Crashed {
            work,
            exe,
            core,
            live: false,
        };
        let report = check_modules(&crashed, |gdb| {
            assert_eq!(gdb.signal, Some(SIGSEGV));
            super::expect_stack(gdb, &["??", "run_generated", "interpreter_loop", "main"]);
        });
        let said = warnings(&report, "code-outside-modules");
        assert_eq!(said.len(), 1, "{case}: {:#}", report["warnings"]);
        assert_eq!(said[0]["thread"], 0);
    }
}

/// A library rebuilt at the same path after the crash: the file at the path is another
/// build, so it is never used (a warning says so); the crashed build, when found by its
/// build-id elsewhere, is.
#[test]
fn library_replaced_on_disk_after_the_crash() {
    let work = Workdir::new("replaced_lib");
    let exe = super::build_plt_program(&work);
    let core = work.crash(&exe);
    let gdb = gdb::frames(work.path(), &exe, &core);
    super::expect_stack(&gdb, &["lib_store", "lib_entry", "call_library", "main"]);
    // the crashed build, kept where only its build-id finds it; then a new build at the path
    let kept = work.path().join("kept");
    std::fs::create_dir(&kept).expect("mkdir");
    std::fs::copy(
        work.path().join("libcrashlib.so"),
        kept.join("old-build.so"),
    )
    .expect("copy");
    let original = std::fs::read(work.path().join("libcrashlib.so")).expect("read");
    super::build_crashlib(&work, "-O0");
    let replaced = std::fs::read(work.path().join("libcrashlib.so")).expect("read");
    assert_ne!(original, replaced, "the rebuilt library differs");

    // with the crashed build at hand: gdb's frames, and a warning about the path's file
    let report = report::walk_report(&core, work.path());
    compare::assert_same_stacks(&gdb, &report);
    compare::assert_same_modules(&gdb, &report);
    assert_eq!(module(&report, "libcrashlib.so")["status"], "ok");
    let changed = warnings(&report, "module-file-changed");
    assert_eq!(changed.len(), 1, "{:#}", report["warnings"]);
    assert!(changed[0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("libcrashlib.so")));

    // without it: the module is missing and nothing is named from the new build
    std::fs::remove_dir_all(&kept).expect("rm");
    let only_exe = work.path().join("only_exe");
    std::fs::create_dir(&only_exe).expect("mkdir");
    std::fs::copy(&exe, only_exe.join("plt")).expect("copy");
    let report = report::walk_report(&core, &only_exe);
    assert_eq!(module(&report, "libcrashlib.so")["status"], "missing");
    assert_eq!(warnings(&report, "module-file-changed").len(), 1);
    let frame0 = &report["threads"][0]["frames"][0];
    assert_eq!(frame0["module"], "libcrashlib.so");
    assert!(
        frame0["function"].is_null(),
        "no name from the rebuilt file: {frame0}"
    );
}

/// A library whose file was deleted after it was loaded: the kernel names the mapping
/// `PATH (deleted)`; the module is the library at PATH, found by its build-id.
#[test]
fn library_deleted_after_it_was_loaded() {
    let work = Workdir::new("deleted_lib");
    work.source("deleted_main.c");
    super::build_crashlib(&work, "-O1");
    // the program loads gone/libcrashlib.so and deletes it; the copy beside it is what gdb
    // (by name, on its search path) and we (by build-id) find
    std::fs::create_dir(work.path().join("gone")).expect("mkdir");
    std::fs::copy(
        work.path().join("libcrashlib.so"),
        work.path().join("gone/libcrashlib.so"),
    )
    .expect("copy");
    let exe = work.compile("gcc", &["-O0"], &["deleted_main.c"], "deleted_main");
    let core = work.crash(&exe);
    assert!(
        core_maps_file_under(&core, "libcrashlib.so (deleted)"),
        "the core records the deleted mapping"
    );
    let search = format!("set solib-search-path {}", work.path().display());
    let gdb = gdb::frames_with("gdb", &[&search], work.path(), &exe, &core);
    super::expect_stack(&gdb, &["lib_store", "lib_entry", "main"]);
    let report = report::walk_report(&core, work.path());
    compare::assert_same_stacks(&gdb, &report);
    compare::assert_same_modules(&gdb, &report);
    let lib = module(&report, "libcrashlib.so");
    assert_eq!(lib["status"], "ok", "{lib}");
    assert!(
        lib["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/gone/libcrashlib.so")),
        "the path without the kernel's suffix: {lib}"
    );
}
