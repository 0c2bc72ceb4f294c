//! Compares `postmortem walk` on Windows x86 (32-bit) minidumps with winedbg's backtrace
//! of them (issue 39), as `windows_minidump.rs` does for x64.
//!
//! Each case cross-compiles a crash program of `tests/crashers/windows` with
//! `i686-w64-mingw32-gcc -g` (mingw's i386 code has no `.pdata`: its unwind information
//! is DWARF CFI, `.eh_frame`, and no PDB), runs it in a 32-bit wine prefix
//! ([`windows::Wine::shared_win32`]), where its unhandled exception filter writes a
//! minidump with dbghelp, asks `winedbg DUMP` for `bt` and walks the dump with
//! `postmortem walk DUMP --symbols WORKDIR --format json`. The work directory holds the
//! program and a copy of the wine DLLs the dump lists (`system32/`: wine's i386 PE DLLs,
//! with `.eh_frame` and DWARF).
//!
//! What is compared on the crashed thread ([`windows_compare`], shared with the x64
//! test): the physical frames, pc by pc, in order, nothing missing and nothing past
//! winedbg's outermost; the program's frames named as `i686-w64-mingw32-addr2line -f -i`
//! names them. Every caller must be found by unwind rules (`trust: cfi`): every module on
//! these stacks has CFI, the stripped program too (its `.eh_frame`, whose name a link with
//! `-s` cuts to `.eh_fram`).
//!
//! Where winedbg's walk loses callers (a fault at a function's first instruction, in the
//! program or a DLL of its own; a call into nowhere), the reference is its frames with
//! those callers added, each identified from the program: winedbg's own stack dump,
//! addr2line's names and the calls objdump shows ([`check_with_lost_callers`]). The
//! threads winedbg does not walk are compared with the return addresses the program
//! recorded on each of them before it blocked ([`windows_x86_waiting_threads`]).
//!
//! Needs what `test.sh` installs (wine32:i386, gcc-mingw-w64-i686, beside the x64 test's
//! wine and mingw-w64), on x86_64 Linux: a machine without them fails here, saying so.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use postmortem_testsupport::program::Workdir;
use postmortem_testsupport::report;
use postmortem_testsupport::stackwalk;
use postmortem_testsupport::windows::{self, DumpSummary, Target, WineFrame};
use postmortem_testsupport::windows_compare::{
    differs_from_winedbg, expect_stack, hex, names_by_addr2line, physical_frames, Physical,
};
use postmortem_testsupport::wow64;
use serde_json::Value;

/// `STATUS_ACCESS_VIOLATION`.
const ACCESS_VIOLATION: u32 = 0xc000_0005;
/// `STATUS_INTEGER_DIVIDE_BY_ZERO`.
const DIVIDE_BY_ZERO: u32 = 0xc000_0094;

/// One crash under 32-bit wine: its dump, winedbg's answer about it and our report of it.
struct Case {
    /// Holds the program, its dump and the DLLs; removed with the case.
    _work: Workdir,
    /// The program as compiled, with its DWARF: what addr2line names frames from.
    exe: PathBuf,
    /// A DLL of the program's own, built beside it: its frames are named by addr2line from
    /// its DWARF as the program's are.
    dll: Option<PathBuf>,
    /// The program that ran was `exe` built with `-s` ([`stripped_build`]): the walk has
    /// only its `.eh_fram`.
    stripped: bool,
    dump: DumpSummary,
    /// What winedbg printed (register and stack dump, then the answer to `bt`).
    session: String,
    /// What the program printed (waiters.c's traces).
    stdout: String,
    winedbg: Vec<WineFrame>,
    report: Value,
    /// The minidump, and the directory given as `--symbols` (the program, the DLLs).
    minidump: PathBuf,
    symbols: PathBuf,
}

/// Compiles `sources` for Windows x86 with `flags` as `case.exe` (and runs the build
/// linked with `-s` if `stripped`), crashes it under 32-bit wine with exception `code`, reads
/// winedbg's backtrace and walks the dump.
fn record(case: &str, flags: &[&str], sources: &[&str], stripped: bool, code: u32) -> Case {
    record_with_dll(case, flags, sources, stripped, code, None)
}

/// As [`record`], with `dll` (its source, its file name) a DLL of the program's own, built
/// beside it by `i686-w64-mingw32-gcc -g -shared` with the same flags and given under
/// `--symbols` too.
fn record_with_dll(
    case: &str,
    flags: &[&str],
    sources: &[&str],
    stripped: bool,
    code: u32,
    dll: Option<(&str, &str)>,
) -> Case {
    assert!(
        windows::can_run_x86(),
        "the Windows x86 minidump tests need x86_64 Linux with 32-bit wine and mingw-w64's \
         i686 compilers: run ./test.sh, which installs them (wine32:i386 gcc-mingw-w64-i686 \
         g++-mingw-w64-i686)"
    );
    let work = Workdir::new(&format!("win32-{case}"));
    let exe = windows::compile_for(Target::X86, work.path(), flags, sources, case);
    let ran = if stripped {
        stripped_build(work.path(), flags, sources, case, &exe)
    } else {
        exe.clone()
    };
    let dll = dll.map(|(source, name)| {
        std::fs::copy(
            windows::crashers_dir().join(source),
            work.path().join(source),
        )
        .unwrap();
        let status = std::process::Command::new(windows::CC_X86)
            .args(["-g", "-shared"])
            .args(flags)
            .args([source, "-o", name])
            .current_dir(work.path())
            .status()
            .unwrap();
        assert!(
            status.success(),
            "{} -shared {source} failed",
            windows::CC_X86
        );
        work.path().join(name)
    });
    let wine = windows::Wine::shared_win32();
    let crash = wine.record(&ran);
    assert_eq!(
        crash.exit_code,
        Some(i32::from(code.to_le_bytes()[0])),
        "{case} did not die of exception {code:#x}:\n{}{}",
        crash.stdout,
        crash.stderr
    );
    let dump = windows::read_dump(&crash.minidump);
    assert_eq!(dump.exception_code, Some(code), "{dump:?}");
    let session = wine.winedbg_session(&crash.minidump);
    let winedbg = windows::parse_backtrace(&session);
    let symbols = work.path().join("symbols");
    let dlls = wine.copy_modules(&crash.minidump, &symbols.join("system32"));
    assert!(
        dlls.iter().any(|d| d.ends_with("ntdll.dll")),
        "the dump lists no ntdll.dll in the prefix: {:?}",
        dump.modules
    );
    for file in std::iter::once(&ran).chain(&dll) {
        std::fs::hard_link(file, symbols.join(file.file_name().unwrap())).unwrap();
    }
    let report = walk(&crash.minidump, &symbols);
    Case {
        _work: work,
        exe,
        dll,
        stripped,
        dump,
        session,
        stdout: crash.stdout,
        winedbg,
        report,
        minidump: crash.minidump,
        symbols,
    }
}

/// The program `exe` built again with `-s` (the linker strips it) into `dir/stripped/`:
/// no DWARF, no COFF symbols and no string table, so the `.eh_frame` section is named
/// `.eh_fram`. (`i686-w64-mingw32-strip` keeps the string table, and with it the full name;
/// winedbg does not unwind such an image, so it serves no comparison.) Its code is the
/// same as `exe`'s (`.text` compared byte for byte), so `exe`'s DWARF names its frames.
fn stripped_build(dir: &Path, flags: &[&str], sources: &[&str], case: &str, exe: &Path) -> PathBuf {
    use object::{Object, ObjectSection};
    let into = dir.join("stripped");
    std::fs::create_dir_all(&into).unwrap();
    let flags: Vec<&str> = flags.iter().copied().chain(["-s"]).collect();
    let ran = windows::compile_for(Target::X86, &into, &flags, sources, case);
    let text = |path: &Path| {
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let section = file.section_by_name(".text").expect("a .text section");
        (section.address(), section.data().unwrap().to_vec())
    };
    assert!(text(exe) == text(&ran), "-s changed the code of {case}");
    let names: Vec<String> = {
        let data = std::fs::read(&ran).unwrap();
        let file = object::File::parse(&*data).unwrap();
        file.sections()
            .filter_map(|s| s.name().ok().map(str::to_owned))
            .collect()
    };
    assert!(
        names.iter().any(|n| n == ".eh_fram"),
        "the stripped image has no .eh_fram: {names:?}"
    );
    ran
}

/// `postmortem walk DUMP --symbols DIR --format json`: exit 0, a report valid against the
/// schema and the same with `--whole-tables`, nothing logged outside the report.
fn walk(dump: &Path, symbols: &Path) -> Value {
    let (report, stderr) = report::walk_report(
        std::process::Command::new(report::postmortem(env!("CARGO_BIN_EXE_postmortem")))
            .arg("walk")
            .arg(dump)
            .arg("--symbols")
            .arg(symbols)
            .args(["--format", "json"]),
    );
    assert!(
        !stderr.contains("WARN"),
        "the walk logged warnings outside the report:\n{stderr}"
    );
    report
}

impl Case {
    fn exe_name(&self) -> &str {
        self.exe.file_name().unwrap().to_str().unwrap()
    }

    /// The report's thread `tid`.
    fn thread(&self, tid: u32) -> &Value {
        self.report["threads"]
            .as_array()
            .expect("threads")
            .iter()
            .find(|t| t["tid"].as_u64() == Some(u64::from(tid)))
            .unwrap_or_else(|| panic!("the report has no thread {tid}"))
    }

    /// The report's crashed thread: the one the exception record names, and only it.
    fn crashed_thread(&self) -> &Value {
        let crashed: Vec<&Value> = self.report["threads"]
            .as_array()
            .expect("threads")
            .iter()
            .filter(|t| t["crashed"] == true)
            .collect();
        assert_eq!(crashed.len(), 1, "one crashed thread");
        let tid = self
            .dump
            .crashed_tid
            .expect("the dump names the crashed thread");
        assert_eq!(crashed[0]["tid"].as_u64(), Some(u64::from(tid)));
        crashed[0]
    }

    /// addr2line's names of the physical frames `pcs` that lie in the program.
    fn program_names(&self, pcs: &[u64]) -> Vec<Option<Vec<String>>> {
        let images: Vec<&Path> = std::iter::once(&self.exe)
            .chain(&self.dll)
            .map(PathBuf::as_path)
            .collect();
        names_by_addr2line(&self.dump, &images, pcs)
    }

    /// What objdump shows at `address` of the dump ([`listed_at`]), in the image under
    /// `--symbols` of the module that holds it (the program as compiled, its DLL, or
    /// wine's), at the image's own address.
    fn listed_at(&self, address: u64) -> Listed {
        let module = self
            .dump
            .modules
            .iter()
            .find(|m| m.contains(address))
            .unwrap_or_else(|| panic!("{address:#x} is in no module of the dump"));
        let image = std::iter::once(&self.exe)
            .chain(&self.dll)
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.eq_ignore_ascii_case(module.file_name()))
            })
            .cloned()
            .unwrap_or_else(|| self.symbols.join("system32").join(module.file_name()));
        let moved = windows::image_base(&image).wrapping_sub(module.base);
        listed_at(&image, address.wrapping_add(moved))
    }

    /// winedbg's answer as it printed it.
    fn winedbg_text(&self) -> String {
        self.winedbg.iter().map(|f| f.text.clone() + "\n").collect()
    }
}

/// Checks the reference (winedbg's stack, named by addr2line, shows `want`), then that the
/// crashed thread's physical frames are winedbg's and every caller was found by CFI.
fn check(case: &Case, want: &[&str]) {
    let pcs: Vec<u64> = case
        .winedbg
        .iter()
        .filter(|f| !f.inlined)
        .map(|f| f.pc)
        .collect();
    let names = case.program_names(&pcs);
    expect_stack(&names, want, &case.winedbg_text());
    let ours = physical_frames(case.crashed_thread());
    let (differs, table) = differs_from_winedbg(&case.winedbg, &names, &ours, case.stripped, &[]);
    // shown with --nocapture when the stacks agree
    eprintln!("{}: crashed thread\n{table}", case.exe_name());
    assert!(
        !differs,
        "{}: the crashed thread differs from winedbg's (pcs: every physical frame; names: \
         the program's frames, by addr2line):\n{table}",
        case.exe_name()
    );
    callers_from_cfi(case, &ours, 1);
}

/// Every frame of `ours` from `first` on (1: every caller) was found by DWARF CFI
/// (`trust: cfi`, from `.eh_frame` or `.debug_frame`): never by the `ebp` chain or a scan.
fn callers_from_cfi(case: &Case, ours: &[Physical<'_>], first: usize) {
    for (i, o) in ours.iter().enumerate().skip(first) {
        let frame = o.entries.last().unwrap();
        let source = frame["unwind_source"].as_str();
        assert!(
            frame["trust"] == "cfi" && matches!(source, Some("eh_frame" | "debug_frame")),
            "{}: frame {i} ({:#x}) was not found by CFI: {frame}",
            case.exe_name(),
            o.pc
        );
    }
}

/// basic.c: crash_here ← middle ← outer ← main, under the C runtime's start-up and
/// wine's thread start (kernel32, ntdll).
fn basic(case: &str, flags: &[&str], stripped: bool) {
    let case = record(case, flags, &["basic.c"], stripped, ACCESS_VIOLATION);
    check(&case, &["crash_here", "middle", "outer", "main"]);
}

/// Unoptimised: every function keeps the `ebp` chain.
#[test]
fn windows_x86_c_o0() {
    basic("x86_c_o0", &["-O0"], false);
}

/// `-O2 -fomit-frame-pointer`: no `ebp` chain in the program's frames.
#[test]
fn windows_x86_c_o2_omit_frame_pointer() {
    basic("x86_c_o2", &["-O2", "-fomit-frame-pointer"], false);
}

#[test]
fn windows_x86_c_o2_frame_pointer() {
    basic("x86_c_o2_fp", &["-O2", "-fno-omit-frame-pointer"], false);
}

/// The program linked with `-s` ([`stripped_build`]): no DWARF, no COFF symbols, and no
/// string table, so its `.eh_frame` section is named `.eh_fram` (the header's 8 bytes).
/// winedbg still unwinds it from that section; so must the walk (the frames stay unnamed).
#[test]
fn windows_x86_c_o2_stripped() {
    basic("x86_c_o2_strip", &["-O2", "-fomit-frame-pointer"], true);
}

/// unusual.c: an `alloca` frame, doubles live across a call, and msvcrt's `qsort`
/// calling back into the program: wine's i386 msvcrt between two of the program's frames
/// (winedbg lists the calls its DWARF says were inlined there, left out of the pcs).
#[test]
fn windows_x86_alloca_and_a_qsort_callback() {
    let case = record(
        "x86_unusual",
        &["-O2", "-fomit-frame-pointer"],
        &["unusual.c"],
        false,
        ACCESS_VIOLATION,
    );
    check(&case, &["compare", "with_xmm", "with_alloca", "main"]);
}

#[test]
fn windows_x86_integer_division_by_zero() {
    let case = record(
        "x86_divzero",
        &["-O2", "-fomit-frame-pointer"],
        &["divzero.c"],
        false,
        DIVIDE_BY_ZERO,
    );
    check(&case, &["average", "main"]);
}

/// virtual.cpp: a virtual call into a null object's vtable slot, C++ (libstdc++ linked
/// statically, DWARF-2 exception tables).
#[test]
fn windows_x86_cxx_virtual_call() {
    let case = record(
        "x86_cxx_virtual",
        &["-O2", "-fomit-frame-pointer", "-static"],
        &["virtual.cpp"],
        false,
        ACCESS_VIOLATION,
    );
    check(&case, &["shapes::Ring::area", "shapes::total_area", "main"]);
}

/// dtor_unwind.cpp: a destructor faulting while a `throw` unwinds the stack. mingw's i686
/// C++ exceptions are libgcc's DWARF-2 unwinder's (not SEH, as on x64): its frames
/// (`_Unwind_RaiseException`, the personality routine) are on the stack under the
/// destructor, walked through by their CFI.
#[test]
fn windows_x86_cxx_destructor_during_unwinding() {
    let case = record(
        "x86_cxx_dtor",
        &["-O2", "-fomit-frame-pointer", "-static"],
        &["dtor_unwind.cpp"],
        false,
        ACCESS_VIOLATION,
    );
    check(&case, &["io::Buffer::~Buffer", "io::fill", "main"]);
}

/// terminate.cpp: a fault in a `std::terminate` handler, called by `__cxa_throw` when no
/// frame catches. libstdc++'s frames in between have no DWARF (addr2line: `??`): their
/// names are compared with the image's COFF symbols as `nm -C` reads them.
#[test]
fn windows_x86_cxx_crash_in_a_terminate_handler() {
    let case = record(
        "x86_cxx_terminate",
        &["-O2", "-fomit-frame-pointer", "-static"],
        &["terminate.cpp"],
        false,
        ACCESS_VIOLATION,
    );
    check(
        &case,
        &[
            "config::on_terminate",
            "config::parse",
            "config::load",
            "main",
        ],
    );
    // libstdc++'s frames, without DWARF, are named from the image's COFF symbols, without
    // the i386 symbol prefix `_`, as `i686-w64-mingw32-nm -C` names them
    let ours = physical_frames(case.crashed_thread());
    let runtime = &ours[1..4];
    let names: Vec<String> = runtime
        .iter()
        .map(|o| o.names().last().cloned().unwrap_or_default())
        .collect();
    let addresses: Vec<u64> = runtime.iter().map(|o| o.pc - 1).collect();
    assert_eq!(
        names,
        windows::coff_names(&case.exe, &addresses),
        "libstdc++'s frames"
    );
    assert_eq!(
        names,
        ["__cxxabiv1::__terminate", "std::terminate", "__cxa_throw"],
        "libstdc++'s frames"
    );
}

/// unwind_callback.cpp: the fault is in the trace function libgcc's `_Unwind_Backtrace`
/// calls (linked in with `-static`; mingw's i686 libgcc is the DWARF-2 unwinder), so the
/// stack crosses the unwinder: `trace::count_frame` ← `_Unwind_Backtrace` ←
/// `trace::collect` ← `main`. Besides winedbg's frames, the program's own record of its
/// stack ([`unwinder_traces`]): the callback's return address (into `_Unwind_Backtrace`)
/// must be our frame 1, and the pcs libgcc's unwinder gave it (`_Unwind_GetIP`: the
/// return addresses into `collect`, `main` and `main`'s caller) frames 2, 3 and 4.
/// libgcc's frame has no DWARF here: it is named by its COFF symbol as
/// `i686-w64-mingw32-nm -C` names it.
#[test]
fn windows_x86_cxx_crash_in_an_unwinder_callback() {
    for (name, flags) in [
        ("x86_cxx_unwind_o0", &["-O0", "-static"][..]),
        ("x86_cxx_unwind_o2", &["-O2", "-static"][..]),
    ] {
        let case = record(
            name,
            flags,
            &["unwind_callback.cpp"],
            false,
            ACCESS_VIOLATION,
        );
        check(
            &case,
            &["trace::count_frame", "??", "trace::collect", "main"],
        );
        let ours = physical_frames(case.crashed_thread());
        let pcs: Vec<u64> = ours.iter().map(|o| o.pc).collect();
        let traces = unwinder_traces(&case.stdout);
        assert_eq!(
            traces.len(),
            3,
            "{name}: the program's traces:\n{}",
            case.stdout
        );
        let mut recorded = vec![traces[0].0];
        recorded.extend(traces.iter().map(|&(_, ip)| ip));
        assert!(
            traces.iter().all(|&(ra, _)| ra == recorded[0]),
            "{name}: the callback returned to two places:\n{}",
            case.stdout
        );
        assert_eq!(
            pcs.get(1..5),
            Some(&recorded[..]),
            "{name}: frames 1-4 against the program's record (the callback's return \
             address, then _Unwind_GetIP of each frame it was given):\n{}",
            case.stdout
        );
        let libgcc = ours[1].names();
        assert_eq!(
            libgcc,
            windows::coff_names(&case.exe, &[pcs[1] - 1]),
            "{name}: libgcc's frame"
        );
        assert_eq!(libgcc, ["_Unwind_Backtrace"], "{name}: libgcc's frame");
    }
}

/// The lines `trace I RETURN IP` unwind_callback.cpp printed, in order: the callback's
/// return address and `_Unwind_GetIP` of the frame it was given.
fn unwinder_traces(stdout: &str) -> Vec<(u64, u64)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("trace "))
        .enumerate()
        .map(|(n, l)| {
            let words: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(words.len(), 3, "trace line {l:?}");
            assert_eq!(words[0], n.to_string(), "trace line {l:?} out of order");
            let hex = |w: &str| u64::from_str_radix(w, 16).unwrap();
            (hex(words[1]), hex(words[2]))
        })
        .collect()
}

/// `STATUS_HEAP_CORRUPTION`, raised by raise.c.
const HEAP_CORRUPTION: u32 = 0xc000_0374;

/// raise.c: the process dies of an exception raised with `RaiseException`, so frame 0 is
/// in wine's kernelbase.dll, which winedbg names from its DWARF (`RaiseException`, a
/// stdcall function: the DWARF's linkage name is `RaiseException@16`, its `DW_AT_name`
/// `RaiseException`). Every frame winedbg names must have that name in our report (the
/// physical frame's own function); the stack is winedbg's pc by pc, the program's frames
/// named as addr2line names them, every caller found by CFI.
#[test]
fn windows_x86_raise_exception_named_as_winedbg_names_it() {
    let case = record(
        "x86_raise",
        &["-O0", &format!("-DRAISED={HEAP_CORRUPTION:#x}")],
        &["raise.c"],
        false,
        HEAP_CORRUPTION,
    );
    let pcs: Vec<u64> = case
        .winedbg
        .iter()
        .filter(|f| !f.inlined)
        .map(|f| f.pc)
        .collect();
    let names = case.program_names(&pcs);
    // frame 0 is kernelbase's: the program's frames from frame 1
    expect_stack(&names[1..], &["raise_it", "main"], &case.winedbg_text());
    let ours = physical_frames(case.crashed_thread());
    let (differs, table) = differs_from_winedbg(&case.winedbg, &names, &ours, false, &[]);
    eprintln!("{}: crashed thread\n{table}", case.exe_name());
    assert!(
        !differs,
        "the crashed thread differs from winedbg's:\n{table}"
    );
    callers_from_cfi(&case, &ours, 1);
    let reference: Vec<&WineFrame> = case.winedbg.iter().filter(|f| !f.inlined).collect();
    let named: Vec<(usize, &str)> = reference
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.function.as_deref().map(|n| (i, n)))
        .collect();
    assert_eq!(
        named.first(),
        Some(&(0, "RaiseException")),
        "winedbg names kernelbase's frame 0:\n{}",
        case.winedbg_text()
    );
    for (i, name) in named {
        let function = ours[i].names().last().cloned().unwrap_or_default();
        assert_eq!(
            function, name,
            "frame {i}: our name is not winedbg's:\n{table}"
        );
    }
}

/// plugin_main.c loads plugin.dll (plugin.c) with `LoadLibrary` and calls into it, which
/// faults: the DLL's frames (named from its DWARF by addr2line, wherever the loader put
/// it), then the program's. At `-O0`: at `-O2` the fault is the first instruction of
/// `plugin_fault`, where winedbg loses the callers (see
/// [`windows_x86_fault_at_a_functions_first_instruction`]; there three of them).
#[test]
fn windows_x86_crash_in_a_loaded_dll() {
    let case = record_with_dll(
        "x86_plugin_main",
        &["-O0"],
        &["plugin_main.c"],
        false,
        ACCESS_VIOLATION,
        Some(("plugin.c", "plugin.dll")),
    );
    check(
        &case,
        &["plugin_fault", "plugin_entry", "call_plugin", "main"],
    );
}

/// threads.c at `-O2 -fomit-frame-pointer`: the fault is the first instruction of
/// `fault` (`movl $1,(%eax)`, the pointer passed in a register), so the return address
/// into `main` is the word at `esp`. winedbg skips `main` there: its frame 1 is the `ebp`
/// chain's (`[ebp + 4]`, `main`'s caller), as if the function's CFI had not been found at
/// its first byte (at any other pc of the same programs it is; the cause is not traced in
/// wine's source). Its own stack dump shows the word, and the disassembly the `call`
/// before it: the reference is winedbg's frames with that one added as frame 1, each
/// frame else equal to winedbg's ([`check_with_lost_callers`]).
#[test]
fn windows_x86_fault_at_a_functions_first_instruction() {
    let case = record(
        "x86_threads",
        &["-O2", "-fomit-frame-pointer"],
        &["threads.c"],
        false,
        ACCESS_VIOLATION,
    );
    check_with_lost_callers(&case, &["fault", "main"], &[("main", "fault")]);
}

/// plugin_main.c and plugin.c at `-O2 -fomit-frame-pointer`: the fault is the first
/// instruction of the DLL's `plugin_fault` (`movl %edx,(%eax)`), where winedbg loses
/// three callers (its frame 1 is `[ebp + 4]`, `main`'s caller, as in
/// [`windows_x86_fault_at_a_functions_first_instruction`]): `plugin_entry`, which calls
/// `plugin_fault`, `call_plugin`, which calls `plugin_entry` through the pointer
/// `GetProcAddress` gave, and `main`, which calls `call_plugin`. Each of them is
/// identified from the program ([`check_with_lost_callers`]): its return address on the
/// stack winedbg printed, addr2line's name, and the call before it in the disassembly of
/// the DLL or the program.
#[test]
fn windows_x86_fault_at_a_dll_functions_first_instruction() {
    let case = record_with_dll(
        "x86_plugin_o2",
        &["-O2", "-fomit-frame-pointer"],
        &["plugin_main.c"],
        false,
        ACCESS_VIOLATION,
        Some(("plugin.c", "plugin.dll")),
    );
    check_with_lost_callers(
        &case,
        &["plugin_fault", "plugin_entry", "call_plugin", "main"],
        &[
            ("plugin_entry", "plugin_fault"),
            ("call_plugin", "*"),
            ("main", "call_plugin"),
        ],
    );
}

/// badjump.c: `dispatch` calls through a pointer to 0x13370000, where nothing is mapped:
/// the fault's pc is outside every module and the return address into `dispatch` is the
/// word at `esp`. winedbg follows the `ebp` chain from there, which skips `dispatch`
/// (at `-O0` its frame record names `main`); the walk takes the word at `esp` (one word
/// scanned, `trust: scan`: no unwind rule covers the bad pc), then `dispatch`'s CFI. At
/// `-O2` `dispatch` keeps no frame record (`main`'s names `main`'s caller), and winedbg
/// loses `main` too. The callers it lacks are identified from the program
/// ([`check_with_lost_callers`]): `dispatch` by its indirect call, `main` by its call of
/// `dispatch`.
#[test]
fn windows_x86_call_into_nowhere() {
    let case = record(
        "x86_badjump_o0",
        &["-O0"],
        &["badjump.c"],
        false,
        ACCESS_VIOLATION,
    );
    check_with_lost_callers(&case, &["dispatch", "main"], &[("dispatch", "*")]);
    let case = record(
        "x86_badjump_o2",
        &["-O2", "-fomit-frame-pointer"],
        &["badjump.c"],
        false,
        ACCESS_VIOLATION,
    );
    check_with_lost_callers(
        &case,
        &["dispatch", "main"],
        &[("dispatch", "*"), ("main", "dispatch")],
    );
}

/// Checks the crashed thread against winedbg's frames with `lost` added after frame 0:
/// callers winedbg's walk skips (each case says why), given as addr2line's name of the
/// frame and what the call before its return address calls (the function a direct call
/// names, as objdump's symbol `<_NAME>` or a clone of it, `<_NAME.constprop.0>`; `*` for a
/// call through a pointer). Each is identified from the program:
/// the first is the word at `esp` in winedbg's own stack dump, every one is a word of that
/// stack dump (above the previous one) and none a frame of winedbg's, addr2line names it
/// as `lost` does, and the instruction before it is that call. With them added, the
/// stacks must be equal as in [`check`] (`want`: the reference's program frames, as
/// there, from its first frame in the program) and every caller found by CFI but the one that returns from a pc outside every
/// module, whose caller is the word at `esp` (`trust: scan`).
fn check_with_lost_callers(case: &Case, want: &[&str], lost: &[(&str, &str)]) {
    let stack = windows::parse_stack_dump(&case.session);
    assert!(
        !stack.is_empty(),
        "winedbg printed no stack dump:\n{}",
        case.session
    );
    let ours = physical_frames(case.crashed_thread());
    let added: Vec<u64> = ours.iter().skip(1).take(lost.len()).map(|o| o.pc).collect();
    let crashed_at = case.winedbg[0].pc;
    assert_eq!(
        added.first(),
        Some(&stack[0].1),
        "our frame 1 is not the word at esp in winedbg's stack dump"
    );
    let mut above = stack[0].0;
    for (&pc, &(name, callee)) in added.iter().zip(lost) {
        let at = stack
            .iter()
            .find(|&&(at, word)| at >= above && word == pc)
            .map(|&(at, _)| at);
        let at = at.unwrap_or_else(|| {
            panic!("{pc:#x} ({name}) is no word of winedbg's stack dump above {above:#x}")
        });
        above = at + 4;
        let names = case.program_names(&[crashed_at, pc]);
        assert_eq!(
            names[1],
            Some(vec![name.to_owned()]),
            "addr2line's name of the caller at {pc:#x}"
        );
        let before = case.listed_at(pc).before;
        let operand = instruction(&before)
            .strip_prefix("call")
            .unwrap_or_else(|| panic!("{pc:#x} ({name}) follows no call: {before}"));
        let calls = if callee == "*" {
            operand.trim_start().starts_with('*')
        } else {
            [">", "."]
                .iter()
                .any(|end| operand.contains(&format!("<_{callee}{end}")))
        };
        assert!(
            calls,
            "the call before {pc:#x} ({name}) does not call {callee}: {before}"
        );
        assert!(
            case.winedbg.iter().all(|f| f.pc != pc),
            "winedbg now finds {name} ({pc:#x}): compare with it as the other cases do:\n{}",
            case.winedbg_text()
        );
    }
    let mut reference = case.winedbg.clone();
    for (i, &pc) in added.iter().enumerate().rev() {
        let mut caller = reference[0].clone();
        caller.pc = pc;
        caller.text = format!("  (a caller winedbg lost: {}) {pc:#x}", lost[i].0);
        reference.insert(1, caller);
    }
    let pcs: Vec<u64> = reference
        .iter()
        .filter(|f| !f.inlined)
        .map(|f| f.pc)
        .collect();
    let names = case.program_names(&pcs);
    let outside = case.dump.modules.iter().all(|m| !m.contains(crashed_at));
    // `want` from the first frame in the program: frame 1 if frame 0 is outside every module
    expect_stack(&names[usize::from(outside)..], want, &case.winedbg_text());
    let (differs, table) = differs_from_winedbg(&reference, &names, &ours, false, &[]);
    eprintln!("{}: crashed thread\n{table}", case.exe_name());
    assert!(
        !differs,
        "{}: the crashed thread differs from winedbg's with the lost callers added:\n{table}",
        case.exe_name()
    );
    if outside {
        let frame = ours[1].entries.last().unwrap();
        assert_eq!(frame["trust"], "scan", "frame 1 under a bad pc: {frame}");
    }
    callers_from_cfi(case, &ours, 1 + usize::from(outside));
}

/// waiters.c: three threads block in the system's waits (an event, `Sleep`, a critical
/// section) while the main thread crashes. winedbg walks only the crashed thread: the
/// reference of the others is the program's own record of each stack, taken by the
/// waiting function with `CaptureStackBackTrace` just before it blocks (the return
/// addresses below it, its own first). For each waiting thread, the walk must end with
/// exactly those return addresses, in order (the record's outermost 0 is the walk's
/// `pc-zero` end); the frame above them is the waiting function, at the return address
/// of its call into the system (addr2line's name), whose caller frame is the function it
/// called (`WaitForSingleObject`, `Sleep`, `RtlEnterCriticalSection`: objdump's symbol);
/// every frame between that and frame 0 is wine's (ntdll, kernel32, kernelbase), each a
/// return address that follows a call in its DLL's disassembly, and a direct call there
/// calls the function of the frame below (no frame is left out). Frame 0 is wine's system-call stub, stopped at
/// its `ret` with no CFI: its caller is the return address at `esp` (`trust: fp`, see
/// docs/x86.md); every other caller is found by CFI. Built with
/// frame pointers: wine's `RtlCaptureStackBackTrace` follows the `ebp` chain.
#[test]
fn windows_x86_waiting_threads() {
    for (name, flags) in [
        ("x86_waiters_o0", &["-O0"][..]),
        ("x86_waiters_o2", &["-O2", "-fno-omit-frame-pointer"][..]),
    ] {
        let case = record(name, flags, &["waiters.c"], false, ACCESS_VIOLATION);
        if name.ends_with("o2") {
            // `fault` keeps no frame and faults at its first instruction
            check_with_lost_callers(&case, &["fault", "main"], &[("main", "fault")]);
        } else {
            check(&case, &["fault", "main"]);
        }
        let traces = traces(&case.stdout);
        let mut waiting: Vec<&str> = traces.iter().map(|t| t.function.as_str()).collect();
        waiting.sort_unstable();
        assert_eq!(
            waiting,
            ["enter_held", "sleep_long", "wait_for_event"],
            "{name}: the program's traces:\n{}",
            case.stdout
        );
        for trace in &traces {
            waiting_thread(&case, trace);
        }
    }
}

/// A 32-bit process on 64-bit Windows, dumped by a 64-bit writer (WoW64; docs/x86.md):
/// waiters.c's dump rewritten as such a writer lays it out ([`wow64::from_x86_dump`]:
/// `AMD64`, every thread's context in WoW64's 64-bit layer, its x86 context in the CPU
/// area its 64-bit TEB points to, the layer's DLLs listed), with the crash's context as
/// the x86 one and as a 64-bit context in 32-bit code. Each walks as the 32-bit dump
/// does against its references: the crashed thread against winedbg's backtrace of the
/// 32-bit dump, each waiting thread against the program's own record of its stack; the
/// report is x86 and says it read a WoW64 process.
#[test]
fn windows_x86_wow64_dump_walks_its_32_bit_threads() {
    let mut case = record(
        "x86_wow64",
        &["-O0"],
        &["waiters.c"],
        false,
        ACCESS_VIOLATION,
    );
    let x86_dump = std::fs::read(&case.minidump).unwrap();
    let traces = traces(&case.stdout);
    assert_eq!(traces.len(), 3, "the program's traces:\n{}", case.stdout);
    for exception in [wow64::Exception::X86, wow64::Exception::CompatibilityMode] {
        let dump = case
            .minidump
            .with_file_name(format!("wow64-{exception:?}.dmp"));
        std::fs::write(&dump, wow64::from_x86_dump(&x86_dump, exception)).unwrap();
        case.report = walk(&dump, &case.symbols);
        assert_eq!(case.report["dump"]["arch"], "x86", "{exception:?}");
        let warnings = case.report["warnings"].as_array().unwrap();
        assert!(
            warnings.iter().any(|w| w["code"] == "wow64"),
            "{exception:?}: no wow64 warning in {warnings:?}"
        );
        check(&case, &["fault", "main"]);
        for trace in &traces {
            waiting_thread(&case, trace);
        }
    }
}

/// A line `trace TID FUNCTION ADDRESS...` of waiters.c.
struct Trace {
    tid: u32,
    function: String,
    /// The return addresses, innermost first, without the outermost zeros.
    addresses: Vec<u64>,
}

/// The trace lines waiters.c printed.
fn traces(stdout: &str) -> Vec<Trace> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("trace "))
        .map(|l| {
            let mut words = l.split_whitespace();
            let tid = words.next().unwrap().parse().unwrap();
            let function = words.next().unwrap().to_owned();
            let mut addresses: Vec<u64> =
                words.map(|w| u64::from_str_radix(w, 16).unwrap()).collect();
            while addresses.last() == Some(&0) {
                addresses.pop();
            }
            Trace {
                tid,
                function,
                addresses,
            }
        })
        .collect()
}

/// The waiting thread of `trace` against it (see [`windows_x86_waiting_threads`]).
fn waiting_thread(case: &Case, trace: &Trace) {
    let thread = case.thread(trace.tid);
    assert_ne!(thread["crashed"], true, "thread {} crashed", trace.tid);
    let ours = physical_frames(thread);
    let pcs: Vec<u64> = ours.iter().map(|o| o.pc).collect();
    let names = case.program_names(&pcs);
    let table: String = ours
        .iter()
        .zip(&names)
        .map(|(o, n)| {
            let last = o.entries.last().unwrap();
            format!(
                "  {:#x} {:?} in {} [{}] (addr2line: {n:?})\n",
                o.pc,
                o.names(),
                last["module"].as_str().unwrap_or("-"),
                last["trust"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    let record: Vec<String> = trace.addresses.iter().map(|a| format!("{a:#x}")).collect();
    let what = format!(
        "thread {} ({}): the program's record {record:?}; our walk:\n{table}",
        trace.tid, trace.function
    );
    eprintln!("{what}");
    assert!(
        !trace.addresses.is_empty() && pcs.ends_with(&trace.addresses),
        "{what}the walk does not end with the program's record"
    );
    let waiting = pcs.len() - trace.addresses.len() - 1;
    assert!(waiting >= 1, "{what}no frame above the record");
    assert_eq!(
        names[waiting],
        Some(vec![trace.function.clone()]),
        "{what}the frame above the record is not the waiting function"
    );
    // every caller down to the waiting function follows a call; a direct one calls the
    // function of the frame below (objdump's symbols: no frame left out in between)
    let listed: Vec<Listed> = pcs[..=waiting]
        .iter()
        .map(|&pc| case.listed_at(pc))
        .collect();
    for i in 1..=waiting {
        let before = &listed[i].before;
        let operand = instruction(before)
            .strip_prefix("call")
            .unwrap_or_else(|| panic!("{what}frame {i} ({:#x}) follows no call: {before}", pcs[i]));
        let callee = &listed[i - 1].function;
        let direct = operand
            .split_once('<')
            .map(|(_, t)| t.trim_end_matches('>'));
        assert!(
            direct.is_none_or(|target| target == callee),
            "{what}the call before frame {i} ({:#x}) is not of frame {}'s function {callee}: \
             {before}",
            pcs[i],
            i - 1
        );
    }
    // the frame the waiting function called is the system function the program called
    // (kernel32 forwards these to kernelbase's and ntdll's)
    let api = match trace.function.as_str() {
        "wait_for_event" => "WaitForSingleObject",
        "sleep_long" => "Sleep",
        _ => "RtlEnterCriticalSection",
    };
    let called = &listed[waiting - 1].function;
    assert_eq!(
        called.trim_start_matches('_').split('@').next(),
        Some(api),
        "{what}the frame above the waiting function"
    );
    // and named so, as winedbg names a stdcall function from wine's DWARF (see
    // `windows_x86_raise_exception_named_as_winedbg_names_it`), without its `@N`
    assert_eq!(
        ours[waiting - 1].names().last().map(String::as_str),
        Some(api),
        "{what}our name of the frame above the waiting function"
    );
    for (i, n) in names.iter().enumerate().take(waiting) {
        let module = ours[i].entries.last().unwrap()["module"].as_str();
        assert!(
            n.is_none() && module.is_some_and(is_wine_module),
            "{what}frame {i} is not in wine's DLLs"
        );
    }
    // frame 0 is a system-call stub stopped at its `ret`: no CFI there, the return
    // address at `esp` (`trust: fp`); every other caller by CFI
    let stub = case.listed_at(pcs[0]);
    assert!(
        instruction(&stub.at).starts_with("ret"),
        "{what}frame 0 is not at a return instruction: {}",
        stub.at
    );
    let frame1 = ours[1].entries.last().unwrap();
    assert_eq!(frame1["trust"], "fp", "{what}frame 1: {frame1}");
    callers_from_cfi(case, &ours, 2);
}

/// Whether `module` (the report's module name) is one of wine's DLLs a wait goes through.
fn is_wine_module(module: &str) -> bool {
    let name = module.rsplit(['\\', '/']).next().unwrap_or(module);
    ["ntdll.dll", "kernel32.dll", "kernelbase.dll"]
        .iter()
        .any(|d| name.eq_ignore_ascii_case(d))
}

/// `i686-w64-mingw32-objdump -d --no-show-raw-insn IMAGE`, run once per image and kept
/// for the test process.
fn disassembly(image: &Path) -> Arc<String> {
    static LISTINGS: Mutex<BTreeMap<PathBuf, Arc<String>>> = Mutex::new(BTreeMap::new());
    if let Some(text) = LISTINGS.lock().unwrap().get(image) {
        return text.clone();
    }
    let out = std::process::Command::new("i686-w64-mingw32-objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(image)
        .output()
        .expect("run i686-w64-mingw32-objdump (binutils-mingw-w64-i686)");
    assert!(out.status.success(), "objdump {} failed", image.display());
    let text = Arc::new(String::from_utf8_lossy(&out.stdout).into_owned());
    LISTINGS
        .lock()
        .unwrap()
        .insert(image.to_owned(), text.clone());
    text
}

/// What objdump's disassembly of an image shows at an address.
struct Listed {
    /// The instruction that ends there (disassembled from the start of its function).
    before: String,
    /// The instruction that starts there.
    at: String,
    /// objdump's symbol of the function it is in (`_main`).
    function: String,
}

/// What objdump shows at `address` in `image` (the image's own address: its preferred
/// base).
fn listed_at(image: &Path, address: u64) -> Listed {
    let text = disassembly(image);
    let at = |line: &str| {
        let (a, _) = line.trim_start().split_once(':')?;
        u64::from_str_radix(a, 16).ok()
    };
    let (mut previous, mut function) = ("", "");
    for line in text.lines() {
        if at(line) == Some(address) {
            return Listed {
                before: previous.to_owned(),
                at: line.to_owned(),
                function: function.trim_matches(['<', '>']).to_owned(),
            };
        }
        if at(line).is_some() {
            previous = line;
        } else if let Some((_, symbol)) = line.strip_suffix(':').and_then(|l| l.split_once(' ')) {
            (previous, function) = ("", symbol);
        }
    }
    panic!(
        "objdump shows no instruction at {address:#x} in {}",
        image.display()
    );
}

/// The mnemonic and operands of objdump's line `line` (`call   *%eax`).
fn instruction(line: &str) -> &str {
    line.split_once('\t').map_or("", |(_, i)| i)
}

/// The files of the dump's modules under `--symbols` (the program, wine's DLLs), in the
/// dump's order.
fn module_images(case: &Case) -> Vec<PathBuf> {
    let dirs = [case.symbols.clone(), case.symbols.join("system32")];
    case.dump
        .modules
        .iter()
        .map(|m| {
            dirs.iter()
                .flat_map(|d| std::fs::read_dir(d).unwrap())
                .map(|e| e.unwrap().path())
                .find(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.eq_ignore_ascii_case(m.file_name()))
                })
                .unwrap_or_else(|| panic!("no file for {} under --symbols", m.name))
        })
        .collect()
}

/// Both minidump-stackwalk and `postmortem walk --json` walk the case's dump from the same
/// store of dump_syms' `.sym` files ([`windows::stackwalk_store`]: the dump given each
/// module's CodeView record, as Windows' dbghelp writes them); the crashed thread's frames
/// each gets right before its first wrong or missing one are counted against winedbg's
/// (`offset`: a caller's return address less one). Returns (ours, theirs, winedbg's).
fn beside_minidump_stackwalk(case: &Case) -> (usize, usize, usize) {
    let reference: Vec<u64> = case
        .winedbg
        .iter()
        .filter(|f| !f.inlined)
        .map(|f| f.pc)
        .collect();
    let work = case.symbols.parent().unwrap();
    let sw = windows::stackwalk_store(&case.minidump, &module_images(case), work);
    let os = std::ffi::OsStr::new;
    let (dump, store) = (sw.dump.as_os_str(), sw.store.as_os_str());
    let correct = |doc: &Value| -> usize {
        let pcs: Vec<u64> = doc["crashing_thread"]["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let text = f["offset"].as_str().unwrap();
                u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap()
            })
            .collect();
        pcs.iter()
            .zip(&reference)
            .enumerate()
            .take_while(|&(i, (a, b))| *a == b - u64::from(i > 0))
            .count()
    };
    let theirs: Value = serde_json::from_str(&stackwalk::run(
        Path::new("minidump-stackwalk"),
        &[os("--json"), dump, store],
    ))
    .unwrap();
    let postmortem = report::postmortem(env!("CARGO_BIN_EXE_postmortem"));
    let ours: Value = serde_json::from_str(&stackwalk::run(
        &postmortem,
        &[
            os("walk"),
            os("--json"),
            dump,
            store,
            os("--no-dump-paths"),
            os("--no-system-debug"),
        ],
    ))
    .unwrap();
    (correct(&ours), correct(&theirs), reference.len())
}

/// Issue 20's "at least minidump-stackwalk's frames", on Windows x86: from dump_syms'
/// `.sym` files alone (dump_syms 2.3 writes no `STACK CFI` for an i386 PE image's
/// `.eh_frame`, only `FUNC` and line records, so both walkers have the `ebp` chain and
/// scanning), ours gets at least as many of winedbg's frames right as minidump-stackwalk.
/// The counts are printed (docs/x86.md records them).
#[test]
fn windows_x86_beside_minidump_stackwalk() {
    for (name, flags) in [
        ("x86_sw_o0", &["-O0"][..]),
        ("x86_sw_o2", &["-O2", "-fomit-frame-pointer"][..]),
    ] {
        let case = record(name, flags, &["basic.c"], false, ACCESS_VIOLATION);
        let (ours, theirs, of) = beside_minidump_stackwalk(&case);
        eprintln!(
            "{name}: frames right before the first wrong one, of winedbg's {of}: \
             postmortem {ours}, minidump-stackwalk {theirs}"
        );
        assert!(
            ours >= theirs,
            "{name}: minidump-stackwalk got {theirs} frames right, ours {ours}"
        );
    }
}

/// veh_fault.c: a fault inside a vectored exception handler, which runs on the faulting
/// thread's stack under ntdll's exception dispatcher. The walk must go through the
/// dispatcher to the frame the first fault interrupted, as WinDbg does: handler_fault,
/// on_exception, ntdll's dispatch frames down to `KiUserExceptionDispatcher`, then
/// `victim` at the first fault's instruction (from the `CONTEXT` the dispatcher was given),
/// then main and the rest of winedbg's frames.
///
/// winedbg is no reference past the dispatcher: after `KiUserExceptionDispatcher` it
/// reads the word above it (the exception record's pointer, a stack address) as a return
/// address, then goes on at `main`, without `victim`. What is certain, and asserted: the
/// program's own record (`handler RETURN PC`: on_exception's return address into the
/// dispatcher, the first fault's pc from the context), winedbg's frames up to the
/// dispatcher and after its invented frame pc for pc, addr2line's names of the program's
/// frames, and the dispatcher's name in ntdll's COFF symbols.
#[test]
fn windows_x86_fault_inside_a_vectored_exception_handler() {
    let case = record(
        "x86_veh",
        &["-O0"],
        &["veh_fault.c"],
        false,
        ACCESS_VIOLATION,
    );
    let record_line = case
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("handler "))
        .unwrap_or_else(|| panic!("the program's record:\n{}", case.stdout));
    let words: Vec<u64> = record_line
        .split_whitespace()
        .map(|w| u64::from_str_radix(w, 16).unwrap())
        .collect();
    let (into_dispatcher, first_fault) = (words[0], words[1]);
    let ours = physical_frames(case.crashed_thread());
    let pcs: Vec<u64> = ours.iter().map(|o| o.pc).collect();
    let names = case.program_names(&pcs);
    let table = || {
        let ours: Vec<String> = ours
            .iter()
            .map(|o| format!("{:#x} {:?}", o.pc, o.names()))
            .collect();
        format!(
            "ours:\n{}\nwinedbg:\n{}",
            ours.join("\n"),
            case.winedbg_text()
        )
    };
    let named = |i: usize| names[i].clone().unwrap_or_default();
    assert_eq!(named(0), ["handler_fault"], "{}", table());
    // a stdcall function (CALLBACK): addr2line gives the DWARF's linkage name
    assert_eq!(named(1), ["on_exception@4"], "{}", table());
    assert_eq!(
        pcs[2],
        into_dispatcher,
        "on_exception's caller\n{}",
        table()
    );
    // the interrupted frame: victim at the first fault, from the dispatcher's context
    let k = pcs
        .iter()
        .position(|&pc| pc == first_fault)
        .unwrap_or_else(|| panic!("no frame at the first fault {first_fault:#x}\n{}", table()));
    assert_eq!(named(k), ["victim"], "{}", table());
    let frames = case.crashed_thread()["frames"].as_array().unwrap();
    let interrupted = frames
        .iter()
        .find(|f| f["inlined"] != true && hex(&f["pc"]) == first_fault)
        .unwrap();
    assert_eq!(interrupted["trust"], "context", "{interrupted}");
    let dispatcher = pcs[k - 1];
    let ntdll = case.symbols.join("system32").join("ntdll.dll");
    let module = case.dump.module("ntdll.dll").expect("ntdll in the dump");
    let moved = windows::image_base(&ntdll).wrapping_sub(module.base);
    assert_eq!(
        windows::coff_names(&ntdll, &[(dispatcher - 1).wrapping_add(moved)]),
        ["KiUserExceptionDispatcher@8"],
        "the frame before victim\n{}",
        table()
    );
    // winedbg's frames: the same up to the dispatcher, then one frame in no module
    // (the record's pointer), then ours after victim, pc for pc
    let theirs: Vec<u64> = case
        .winedbg
        .iter()
        .filter(|f| !f.inlined)
        .map(|f| f.pc)
        .collect();
    assert_eq!(theirs.get(..k), Some(&pcs[..k]), "{}", table());
    let invented = theirs[k];
    assert!(
        case.dump.modules.iter().all(|m| !m.contains(invented)),
        "winedbg's frame after the dispatcher is in a module: {invented:#x}\n{}",
        table()
    );
    assert_eq!(theirs.get(k + 1..), pcs.get(k + 1..), "{}", table());
    assert_eq!(named(k + 1), ["main"], "{}", table());
}
