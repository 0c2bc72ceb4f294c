//! Compares `postmortem walk` on Windows x64 minidumps with winedbg's backtrace of them.
//!
//! Each case cross-compiles a crash program of `tests/crashers/windows` with mingw-w64, runs
//! it under wine, where its unhandled exception filter writes a minidump with dbghelp
//! (`postmortem_testsupport::windows`), asks `winedbg DUMP` for `bt` and walks the dump with
//! `postmortem walk DUMP --symbols WORKDIR --format json`. The work directory holds the
//! program and a copy of the wine DLLs the dump lists (`system32/`), the files winedbg
//! unwinds and names wine's frames with.
//!
//! What is compared, on the crashed thread (the only one winedbg walks in a minidump):
//!
//! - the physical frames: winedbg's frames without its inlined ones (winedbg lists a call
//!   inlined into a frame's function at that frame's pc, just before it, as the report
//!   does) against the report's frames without `inlined: true`, pc by pc, in order, and as
//!   many: nothing missing, nothing past winedbg's outermost frame. Inlined calls are left
//!   out of this comparison because winedbg's come from wine's DLLs' DWARF, which the walk
//!   need not read to unwind; those of the program are compared by name below;
//! - in the program's own frames (pc in its image), the report's function names at that pc,
//!   the inlined ones first, equal `x86_64-w64-mingw32-addr2line -f -i` at the pc (the
//!   return address minus one in callers' frames): winedbg does not name them (it prints
//!   `in basic (+0x1580)`) though the program's DWARF does.
//!
//! Every caller frame must be found by `.pdata` rules (`trust: cfi`, `unwind_source:
//! pdata`): every module on these stacks has them. One case runs the program stripped,
//! so that `.pdata` is all the walk has (gcc's `.debug_frame` goes with the DWARF).
//!
//! Both stacks are printed side by side on failure. Before any of it the reference itself
//! is checked: winedbg's stack, named by addr2line, must show the functions the crash
//! program calls, so a broken harness is not reported as a walk that differs.
//!
//! Needs what `test.sh` installs (wine, wine64, gcc-mingw-w64-x86-64), on x86_64 Linux: a
//! machine without them fails here, with a message saying to run it.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use crate::common;
use common::printed;

use postmortem_testsupport::http_dir::HttpDir;
use postmortem_testsupport::program::Workdir;
use postmortem_testsupport::report;
use postmortem_testsupport::stackwalk;
use postmortem_testsupport::windows::{self, DumpSummary, WineFrame};
use postmortem_testsupport::windows_compare::{
    differs_from_winedbg, expect_stack, hex, names_by_addr2line, physical_frames,
    without_parameters, Physical,
};
use serde_json::Value;

/// `STATUS_ACCESS_VIOLATION`.
const ACCESS_VIOLATION: u32 = 0xc000_0005;

/// One crash under wine: its dump, winedbg's backtrace of it and our report of it.
struct Case {
    /// Holds the program, its dump and the DLLs; removed with the case.
    _work: Workdir,
    /// The program as compiled, with its DWARF: what addr2line names frames from.
    exe: PathBuf,
    /// Other images whose frames addr2line names from their DWARF, as the program's (the
    /// C++ runtime DLLs of a `GccRuntimeDlls` build).
    named_dlls: Vec<PathBuf>,
    /// The program that ran was `exe` stripped (no DWARF, no `.debug_frame`, no COFF
    /// symbols): the walk has only its `.pdata`, and no names for its frames.
    stripped: bool,
    dump: DumpSummary,
    winedbg: Vec<WineFrame>,
    report: Value,
    /// The minidump, and the directory given as `--symbols` (the program, the DLLs).
    minidump: PathBuf,
    symbols: PathBuf,
    /// What the program printed before it crashed.
    stdout: String,
    /// Frame 0 faults inside its function's prologue: dump_syms' `.sym` file cannot say
    /// how far the prologue got ([`sym_walk_equals_image_walk`]).
    frame0_in_prologue: bool,
    /// Threads stopped inside an epilogue, which dump_syms' `.sym` file does not describe:
    /// left out of [`sym_walk_equals_image_walk`].
    in_epilogues: Vec<u64>,
}

/// The CLI under test (`POSTMORTEM_BIN` when set, see `report::postmortem`).
fn postmortem() -> PathBuf {
    report::postmortem(env!("CARGO_BIN_EXE_postmortem"))
}

/// Runs `postmortem walk DUMP --symbols DIR --format json`, requires exit 0, a report valid
/// against the schema and the same report with `--whole-tables`, and nothing logged.
fn walk(dump: &Path, symbols: &Path) -> Value {
    walk_with(dump, symbols, &[])
}

/// As [`walk`], with `options` added to the command.
fn walk_with(dump: &Path, symbols: &Path, options: &[&str]) -> Value {
    let (report, stderr) = report::walk_report(
        std::process::Command::new(postmortem())
            .arg("walk")
            .arg(dump)
            .arg("--symbols")
            .arg(symbols)
            .args(["--format", "json"])
            .args(options),
    );
    // what the minidump reader notes (wine's contexts carry XSAVE state it ignores) is in
    // the report's warnings, not on stderr
    assert!(
        !stderr.contains("WARN"),
        "the walk logged warnings outside the report:\n{stderr}"
    );
    report
}

/// Compiles `source` with `flags` as `case.exe`, crashes it under wine, reads winedbg's
/// backtrace and walks the dump.
fn record(case: &str, flags: &[&str], source: &str) -> Case {
    record_as(case, flags, source, false)
}

/// As [`record`]; with `stripped`, the program that runs (and the only copy under
/// `--symbols`) is stripped, and the copy with DWARF is kept apart for addr2line.
fn record_as(case: &str, flags: &[&str], source: &str, stripped: bool) -> Case {
    let build = if stripped {
        Build::GccStripped
    } else {
        Build::Gcc
    };
    record_sources(case, flags, &[source], build, None)
}

/// How a case's program is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Build {
    /// `x86_64-w64-mingw32-gcc -g`: DWARF in the image.
    Gcc,
    /// As `Gcc`, and the program that runs (and the only copy under `--symbols`) is
    /// stripped; the copy with DWARF is kept apart for addr2line.
    GccStripped,
    /// clang and lld, with CodeView in a PDB beside the image and DWARF in it
    /// ([`windows::compile_with_pdb`]); the PDB is given under `--symbols` too.
    ClangPdb,
    /// As `Gcc`, a C++ program linked with mingw's C++ runtime DLLs (libgcc's unwinder,
    /// libstdc++; [`windows::cxx_runtime_dlls`]) rather than `-static`: they are copied
    /// beside it and given under `--symbols`, and their frames are named by addr2line from
    /// their DWARF as the program's are.
    GccRuntimeDlls,
}

/// As [`record_as`], with several sources (C and assembly), built as `build` says, and
/// with `dll` (its source, its file name) a DLL of the program's own built beside it
/// (`-shared`, same flags, by gcc), given under `--symbols` too.
fn record_sources(
    case: &str,
    flags: &[&str],
    sources: &[&str],
    build: Build,
    dll: Option<(&str, &str)>,
) -> Case {
    record_dying_of(case, flags, sources, build, dll, ACCESS_VIOLATION)
}

/// As [`record_sources`], for a program that dies of exception `code` (under wine its exit
/// status is the code's low byte).
fn record_dying_of(
    case: &str,
    flags: &[&str],
    sources: &[&str],
    build: Build,
    dll: Option<(&str, &str)>,
    code: u32,
) -> Case {
    let stripped = build == Build::GccStripped;
    assert!(
        windows::can_run(),
        "the Windows minidump tests need x86_64 Linux with mingw-w64 and wine \
         (x86_64-w64-mingw32-gcc, wine, wineserver, winedbg): run ./test.sh, which installs \
         them (wine wine64 gcc-mingw-w64-x86-64)"
    );
    let work = Workdir::new(&format!("win-{case}"));
    let dll = dll.map(|(source, name)| {
        std::fs::copy(
            windows::crashers_dir().join(source),
            work.path().join(source),
        )
        .unwrap();
        let status = std::process::Command::new(windows::CC)
            .args(["-g", "-shared"])
            .args(flags)
            .args([source, "-o", name])
            .current_dir(work.path())
            .status()
            .unwrap();
        assert!(status.success(), "{} -shared {source} failed", windows::CC);
        work.path().join(name)
    });
    let (mut exe, pdb) = match build {
        Build::ClangPdb => {
            let (exe, pdb) = windows::compile_with_pdb(work.path(), flags, sources, case);
            (exe, Some(pdb))
        }
        Build::Gcc | Build::GccStripped | Build::GccRuntimeDlls => {
            (windows::compile(work.path(), flags, sources, case), None)
        }
    };
    let named_dlls: Vec<PathBuf> = if build == Build::GccRuntimeDlls {
        windows::cxx_runtime_dlls()
            .iter()
            .map(|from| {
                let to = work.path().join(from.file_name().unwrap());
                std::fs::copy(from, &to).unwrap();
                to
            })
            .collect()
    } else {
        Vec::new()
    };
    let ran = exe.clone();
    if stripped {
        let kept = work.path().join("with-dwarf");
        std::fs::create_dir_all(&kept).unwrap();
        let copy = kept.join(exe.file_name().unwrap());
        std::fs::copy(&exe, &copy).unwrap();
        let status = std::process::Command::new("x86_64-w64-mingw32-strip")
            .arg(&exe)
            .status()
            .expect("x86_64-w64-mingw32-strip (binutils-mingw-w64-x86-64) runs");
        assert!(status.success(), "strip failed");
        exe = copy;
    }
    let crash = windows::record(&ran);
    assert_eq!(
        crash.exit_code,
        Some(i32::from(code.to_le_bytes()[0])),
        "{case} did not die of exception {code:#x}:\n{}{}",
        crash.stdout,
        crash.stderr
    );
    let dump = windows::read_dump(&crash.minidump);
    assert_eq!(dump.exception_code, Some(code), "{dump:?}");
    let winedbg = windows::winedbg_backtrace(&crash.minidump);
    let wine = windows::Wine::shared();
    // --symbols: the program that ran and the DLLs (not a stripped program's DWARF copy)
    let symbols = work.path().join("symbols");
    let dlls = wine.copy_modules(&crash.minidump, &symbols.join("system32"));
    assert!(
        dlls.iter().any(|d| d.ends_with("ntdll.dll")),
        "the dump lists no ntdll.dll in the prefix: {:?}",
        dump.modules
    );
    std::fs::hard_link(&ran, symbols.join(ran.file_name().unwrap())).unwrap();
    for file in dll.iter().chain(&pdb).chain(&named_dlls) {
        std::fs::hard_link(file, symbols.join(file.file_name().unwrap())).unwrap();
    }
    let report = walk(&crash.minidump, &symbols);
    Case {
        _work: work,
        exe,
        named_dlls,
        stripped,
        dump,
        winedbg,
        report,
        minidump: crash.minidump,
        symbols,
        stdout: crash.stdout,
        frame0_in_prologue: false,
        in_epilogues: Vec::new(),
    }
}

impl Case {
    /// The crash program's file name (`basic_o0.exe`).
    fn exe_name(&self) -> &str {
        self.exe.file_name().unwrap().to_str().unwrap()
    }

    /// The program's module in `report`, a report of this case's dump.
    fn program_module<'r>(&self, report: &'r Value) -> &'r Value {
        report["modules"]
            .as_array()
            .expect("modules")
            .iter()
            .find(|m| m["name"] == self.exe_name())
            .unwrap_or_else(|| panic!("the report has no module {}", self.exe_name()))
    }

    fn in_program(&self, pc: u64) -> bool {
        let exe = self.dump.module(self.exe_name()).unwrap_or_else(|| {
            panic!(
                "the dump lists no {}: {:?}",
                self.exe_name(),
                self.dump.modules
            )
        });
        exe.contains(pc)
    }

    /// addr2line's names of the physical frames `pcs` (frame 0 first) that lie in the
    /// program (or in one of `named_dlls`, from that DLL's DWARF); None for the others.
    /// C++ names without their parameter list, as the report writes them
    /// (`docs/report-format.md`: `ns::Widget::paint`, from addr2line's
    /// `ns::Widget::paint(int) const`).
    fn program_names(&self, pcs: &[u64]) -> Vec<Option<Vec<String>>> {
        let images: Vec<&Path> = std::iter::once(&self.exe)
            .chain(&self.named_dlls)
            .map(PathBuf::as_path)
            .collect();
        names_by_addr2line(&self.dump, &images, pcs)
    }

    fn thread(&self, tid: u64) -> &Value {
        self.report["threads"]
            .as_array()
            .expect("threads")
            .iter()
            .find(|t| t["tid"].as_u64() == Some(tid))
            .unwrap_or_else(|| panic!("the report has no thread {tid}"))
    }

    fn crashed_thread(&self) -> &Value {
        self.crashed_thread_of(&self.report)
    }

    /// The crashed thread of `report`, a report of this case's dump.
    fn crashed_thread_of<'r>(&self, report: &'r Value) -> &'r Value {
        let crashed: Vec<&Value> = report["threads"]
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
        assert_eq!(
            crashed[0]["tid"].as_u64(),
            Some(u64::from(tid)),
            "the crashed thread is the exception's"
        );
        crashed[0]
    }
}

/// Checks the reference (winedbg's stack shows `want`) and compares the crashed thread.
fn check(case: &Case, want: &[&str]) {
    check_scoped(case, want, &[]);
}

/// As [`check`], our names allowed to qualify addr2line's unqualified ones with `scopes`
/// ([`postmortem_testsupport::windows_compare::same_names`]).
fn check_scoped(case: &Case, want: &[&str], scopes: &[&str]) {
    let reference: Vec<&WineFrame> = case.winedbg.iter().filter(|f| !f.inlined).collect();
    let pcs: Vec<u64> = reference.iter().map(|f| f.pc).collect();
    let names = case.program_names(&pcs);
    let winedbg_text: String = case.winedbg.iter().map(|f| f.text.clone() + "\n").collect();
    expect_stack(&names, want, &winedbg_text);

    let ours = physical_frames(case.crashed_thread());
    let (differs, table) =
        differs_from_winedbg(&case.winedbg, &names, &ours, case.stripped, scopes);
    // every module on the stack has unwind info: each caller is found by its rules (the
    // program's and wine's .pdata), never by frame pointers or scanning
    callers_from_pdata(case, &ours);
    // shown with --nocapture when the stacks agree
    eprintln!("{}: crashed thread\n{table}", case.exe_name());
    assert!(
        !differs,
        "{}: the crashed thread differs from winedbg's (pcs: every physical frame; names: \
         the program's frames, by addr2line):\n{table}",
        case.exe_name()
    );
    sym_walk_equals_image_walk(case);
}

/// Every frame of `ours` but frame 0 was found by `.pdata` rules: `trust: cfi`,
/// `unwind_source: pdata`.
fn callers_from_pdata(case: &Case, ours: &[Physical<'_>]) {
    for (i, o) in ours.iter().enumerate().skip(1) {
        let frame = o.entries.last().unwrap();
        assert_eq!(
            (frame["trust"].as_str(), frame["unwind_source"].as_str()),
            (Some("cfi"), Some("pdata")),
            "{}: frame {i} ({:#x}) was not found by .pdata: {frame}",
            case.exe_name(),
            o.pc
        );
    }
}

/// The files of the dump's modules under `--symbols` (the program that ran, its DLLs and
/// wine's, the C++ runtime's), in the dump's order.
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

/// A directory holding dump_syms' `.sym` file (`--inlines`) of every module of the
/// case's dump, `NAME.sym` for the image `NAME`, and nothing else.
fn sym_only(case: &Case) -> PathBuf {
    let dir = case.symbols.parent().unwrap().join("sym-only");
    std::fs::create_dir_all(&dir).unwrap();
    for image in module_images(case) {
        let name = image.file_name().unwrap().to_str().unwrap();
        std::fs::write(dir.join(format!("{name}.sym")), windows::dump_syms(&image)).unwrap();
    }
    dir
}

/// Issue 20: the walk from dump_syms' `.sym` files equals the walk from the images (and
/// the PDB). Every module's `.sym` file (`dump_syms --inlines`, which reads a clang
/// build's PDB) alone under `--symbols`: the dump names no module by a debug id (wine
/// writes no CodeView record), so each file is found by its `INFO CODE_ID`. Every thread
/// has the same frames (pc and stack pointer), found the same way (`trust`), as the walk
/// from the images' `.pdata`, and ends the same way; every module is walked and named
/// from its `.sym` file.
///
/// One exception, where dump_syms' output says less than `.pdata`: it writes one rule per
/// function, the state after the prologue, so for a frame 0 inside a prologue
/// (`frame0_in_prologue`) that rule is wrong, the walker rejects the caller it gives, and
/// finds the same caller by scanning: frame 1 is `scan` there. Threads stopped inside an
/// epilogue (`in_epilogues`) are left out: that rule is wrong there too, and what
/// scanning finds from it is not the caller.
fn sym_walk_equals_image_walk(case: &Case) {
    let dir = sym_only(case);
    let from_sym = walk(&case.minidump, &dir);
    for m in from_sym["modules"].as_array().unwrap() {
        assert_eq!(
            (&m["status"], &m["unwind"], &m["symbols"]),
            (
                &serde_json::json!("ok"),
                &serde_json::json!(["breakpad"]),
                &serde_json::json!(["breakpad"])
            ),
            "{}: every module from its .sym file: {m}",
            case.exe_name()
        );
    }
    let threads = |r: &Value| r["threads"].as_array().unwrap().clone();
    let (images, syms) = (threads(&case.report), threads(&from_sym));
    assert_eq!(images.len(), syms.len());
    for (a, b) in images.iter().zip(&syms) {
        if a["tid"]
            .as_u64()
            .is_some_and(|t| case.in_epilogues.contains(&t))
        {
            continue;
        }
        let rows = |t: &Value| -> Vec<String> {
            t["frames"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["inlined"] == false)
                .map(|f| {
                    format!(
                        "{} sp {} {} {}",
                        f["pc"], f["sp"], f["trust"], f["function"]
                    )
                })
                .collect()
        };
        let key = |rows: &[String]| -> Vec<String> {
            rows.iter()
                .map(|r| r.split(' ').take(4).collect::<Vec<_>>().join(" "))
                .collect()
        };
        let (ra, rb) = (rows(a), rows(b));
        let (mut ka, kb) = (key(&ra), key(&rb));
        if case.frame0_in_prologue && a["crashed"] == true {
            let scanned = ka[1].replace("\"cfi\"", "\"scan\"");
            ka[1] = scanned;
        }
        assert_eq!(
            (ka, &a["end"]),
            (kb, &b["end"]),
            "{}: thread {}: the .sym walk differs from the images' walk\nimages:\n{}\n.sym:\n{}",
            case.exe_name(),
            a["tid"],
            ra.join("\n"),
            rb.join("\n")
        );
    }
}

/// basic.c: crash_here ← middle ← outer ← main, under the C runtime's start-up and
/// wine's thread start.
fn basic(case: &str, flags: &[&str]) {
    let case = record(case, flags, "basic.c");
    check(&case, &["crash_here", "middle", "outer", "main"]);
}

#[test]
fn windows_c_o0() {
    basic("c_o0", &["-O0"]);
}

#[test]
fn windows_c_o2() {
    basic("c_o2", &["-O2"]);
}

/// The program stripped (`x86_64-w64-mingw32-strip`): no DWARF, no `.debug_frame`, no
/// symbols — its frames are walked from `.pdata`/`.xdata` alone, and stay unnamed.
#[test]
fn windows_c_o2_stripped() {
    let case = record_as("c_o2_strip", &["-O2"], "basic.c", true);
    check(&case, &["crash_here", "middle", "outer", "main"]);
}

#[test]
fn windows_c_o2_no_omit_frame_pointer() {
    basic("c_o2_fp", &["-O2", "-fno-omit-frame-pointer"]);
}

/// Built by clang and lld with a PDB (`-g -gcodeview -gdwarf`): the program's frames are
/// named from the PDB (`symbol_source: pdb`), inlined calls included, and every name,
/// file and line in the program equals addr2line's from the same build's DWARF. The C
/// runtime (built by gcc, not in the PDB) keeps its DWARF names.
fn pdb_case(case: &str, flags: &[&str], source: &str, want: &[&str]) {
    let case = record_sources(case, flags, &[source], Build::ClangPdb, None);
    check(&case, want);
    let ours = physical_frames(case.crashed_thread());
    let in_program: Vec<&Physical<'_>> = ours.iter().filter(|o| case.in_program(o.pc)).collect();
    let addresses: Vec<u64> = ours
        .iter()
        .enumerate()
        .filter(|(_, o)| case.in_program(o.pc))
        .map(|(i, o)| if i == 0 { o.pc } else { o.pc - 1 })
        .collect();
    let reference = windows::addr2line_lines(&case.exe, &addresses);
    let base = |path: &str| path.rsplit(['/', '\\']).next().unwrap_or(path).to_owned();
    let mut from_pdb = 0;
    for (o, expected) in in_program.iter().zip(&reference) {
        if expected.len() == 1 && expected[0].0 == "??" {
            // no DWARF there (the C++ runtime linked in): nothing to compare with
            continue;
        }
        let got: Vec<(String, String)> = o
            .entries
            .iter()
            .map(|e| {
                let file = e["file"].as_str().map_or("??".to_owned(), base);
                let line = e["line"].as_u64().unwrap_or(0);
                (
                    e["function"].as_str().unwrap_or("??").to_owned(),
                    format!("{file}:{line}"),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(f, at)| {
                let (file, line) = at.rsplit_once(':').unwrap_or((at, "0"));
                // addr2line may add " (discriminator N)"
                let line = line.split_whitespace().next().unwrap_or("0");
                // the report's C++ names have no parameter list
                let f = without_parameters(f);
                (f, format!("{}:{line}", base(file)))
            })
            .collect();
        assert_eq!(
            got,
            expected,
            "{}: frame at {:#x}: names and lines differ from addr2line's",
            case.exe_name(),
            o.pc
        );
        if want
            .iter()
            .any(|w| o.names().last().map(String::as_str) == Some(w))
        {
            for e in &o.entries {
                assert_eq!(e["symbol_source"], "pdb", "{e}");
            }
            from_pdb += 1;
        }
    }
    assert!(
        from_pdb >= want.len(),
        "the program's frames were not named from its PDB"
    );
    let module = case.program_module(&case.report);
    let pdb_file = module["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"].as_str().is_some_and(|n| n.ends_with(".pdb")))
        .unwrap_or_else(|| panic!("the PDB is not among the module's files: {module}"));
    assert_eq!(pdb_file["gave"], serde_json::json!(["symbols"]), "{module}");
    sym_walk_equals_pdb_walk(&case);
}

/// dump_syms' `.sym` file of the program (`dump_syms --inlines EXE`, which reads the PDB
/// the image names), in a Breakpad symbol store, in place of the image and its PDB: the
/// dump names the module without a debug id (wine writes no CodeView record), so the file
/// is found by its `INFO CODE_ID`. Every thread's frames are the same (pc), and the frames
/// the PDB named have the same function, file, line and inlined calls.
fn sym_walk_equals_pdb_walk(case: &Case) {
    let out = std::process::Command::new("dump_syms")
        .arg("--inlines")
        .arg(&case.exe)
        .output()
        .expect("run dump_syms (cargo install --locked dump_syms; see test.sh)");
    assert!(
        out.status.success(),
        "dump_syms {}: {}",
        case.exe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("a .sym file is text");
    let fields: Vec<&str> = text.lines().next().unwrap().split(' ').collect();
    assert_eq!(
        fields[..3],
        ["MODULE", "windows", "x86_64"],
        "{}",
        fields.join(" ")
    );
    let (id, pdb) = (fields[3], fields[4]);
    let store = case.symbols.parent().unwrap().join("sym-store");
    let sym = store.join(pdb).join(id).join(pdb.replace(".pdb", ".sym"));
    std::fs::create_dir_all(sym.parent().unwrap()).unwrap();
    std::fs::write(&sym, &text).unwrap();
    let dlls = store.join("system32");
    std::fs::create_dir_all(&dlls).unwrap();
    for dll in std::fs::read_dir(case.symbols.join("system32")).unwrap() {
        let dll = dll.unwrap().path();
        std::fs::hard_link(&dll, dlls.join(dll.file_name().unwrap())).unwrap();
    }
    let from_sym = walk(&case.minidump, &store);
    let module = case.program_module(&from_sym);
    assert_eq!(
        module["symbols"],
        serde_json::json!(["breakpad"]),
        "{module}"
    );
    let named = |frame: &Value| {
        [
            frame["function"].clone(),
            frame["file"].clone(),
            frame["line"].clone(),
            frame["inlined"].clone(),
        ]
    };
    let threads = |report: &Value| report["threads"].as_array().unwrap().clone();
    let (ours, theirs) = (threads(&case.report), threads(&from_sym));
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(&theirs) {
        let (fa, fb) = (
            a["frames"].as_array().unwrap(),
            b["frames"].as_array().unwrap(),
        );
        let pcs =
            |frames: &[Value]| -> Vec<Value> { frames.iter().map(|f| f["pc"].clone()).collect() };
        assert_eq!(pcs(fa), pcs(fb), "thread {}: frames differ", a["tid"]);
        for (x, y) in fa.iter().zip(fb) {
            if x["symbol_source"] == "pdb" {
                assert_eq!(named(x), named(y), "{x}\n{y}");
            }
        }
    }
}

#[test]
fn windows_pdb_names_and_lines() {
    pdb_case(
        "pdb_basic",
        &["-O1"],
        "basic.c",
        &["crash_here", "middle", "outer", "main"],
    );
}

/// inlined.c at -O2: the fault is in `store`, inlined into `scaled`, inlined into `work`.
#[test]
fn windows_pdb_inlined_calls() {
    let case = "pdb_inlined";
    pdb_case(case, &["-O2"], "inlined.c", &["work", "main"]);
}

/// unusual.c: a frame addressed from a frame register (alloca), one saving XMM registers,
/// and a crash in a callback called from msvcrt's `qsort`.
#[test]
fn windows_alloca_xmm_and_a_qsort_callback() {
    let case = record("unusual", &["-O2"], "unusual.c");
    check(&case, &["compare", "with_xmm", "with_alloca", "main"]);
}

/// prologue.c/.S: a fault between a prologue's push and its allocation.
#[test]
fn windows_fault_inside_a_prologue() {
    let mut case = record_sources(
        "prologue",
        &["-O2"],
        &["prologue.c", "prologue.S"],
        Build::Gcc,
        None,
    );
    case.frame0_in_prologue = true;
    // the assembly has no DWARF: addr2line cannot name frame 0, the COFF symbols do
    check(&case, &["??", "caller", "main"]);
    let frame0 = &case.crashed_thread()["frames"][0];
    assert_eq!(frame0["function"], "fault_in_prologue", "{frame0}");
}

/// Pairs of hex words (`PC SP PC SP …`, as the crash programs print frames).
fn hex_pairs(words: &[&str]) -> Vec<(u64, u64)> {
    let n: Vec<u64> = words
        .iter()
        .map(|w| u64::from_str_radix(w, 16).unwrap())
        .collect();
    n.chunks_exact(2).map(|p| (p[0], p[1])).collect()
}

/// The physical frames of a report's thread: (pc, sp) each.
fn pcs_and_sps(thread: &Value) -> Vec<(u64, u64)> {
    thread["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["inlined"] != true)
        .map(|f| (hex(&f["pc"]), hex(&f["sp"])))
        .collect()
}

/// chained.c/.S: a fault in the second part of a function split in two, whose unwind
/// info (written by hand: no mingw compiler emits it) has its own prologue codes, an
/// allocation and a `SAVE_NONVOL`, and chains to the first part's `RUNTIME_FUNCTION`:
/// the walk undoes both parts' prologues to find `caller`.
///
/// The reference is the program's own walk of the faulting context with wine's
/// `RtlVirtualUnwind` (rtl_walk.c, from a vectored exception handler): winedbg stops at
/// frame 0, as wine's minidump writer copies the unwind codes into the dump but not the
/// parent entry that ends a chained unwind info, and winedbg reads unwind info from the
/// dump alone. Every frame, pc and stack pointer, must equal it; callers found by the
/// `.pdata` rules; the program's frames named as addr2line names them; the `.sym` walk
/// the same.
#[test]
fn windows_fault_in_chained_unwind_info() {
    let case = record_sources(
        "chained",
        &["-O2"],
        &["chained.c", "chained.S", "rtl_walk.c", "rtl_walk.h"],
        Build::Gcc,
        None,
    );
    let line = case
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("walk "))
        .unwrap_or_else(|| panic!("the program printed no walk:\n{}", case.stdout));
    let reference = hex_pairs(&line.split_whitespace().collect::<Vec<_>>());
    let ours = physical_frames(case.crashed_thread());
    let pcs: Vec<u64> = reference.iter().map(|&(pc, _)| pc).collect();
    let names = case.program_names(&pcs);
    // the reference itself: the fault in the assembly, then caller and main
    expect_stack(&names, &["??", "caller", "main"], line);
    assert_eq!(case.winedbg[0].pc, reference[0].0, "winedbg's frame 0");
    let table: String = pcs_and_sps(case.crashed_thread())
        .iter()
        .zip(&ours)
        .map(|((pc, sp), o)| format!("  {pc:#x} sp {sp:#x} {:?}\n", o.names()))
        .collect();
    eprintln!("reference: {line}\nours:\n{table}");
    assert_eq!(
        pcs_and_sps(case.crashed_thread()),
        reference,
        "the walk differs from RtlVirtualUnwind's:\n{table}"
    );
    for (i, (o, n)) in ours.iter().zip(&names).enumerate() {
        if let Some(n) = n.as_ref().filter(|n| n != &&["??"]) {
            assert_eq!(&o.names(), n, "frame {i}:\n{table}");
        }
        let frame = o.entries.last().unwrap();
        if i > 0 {
            assert_eq!(
                (frame["trust"].as_str(), frame["unwind_source"].as_str()),
                (Some("cfi"), Some("pdata")),
                "frame {i}: {frame}"
            );
        }
    }
    assert_eq!(ours[0].names(), ["split_function_cold"], "{table}");
    sym_walk_equals_image_walk(&case);
    let (ours, _) = correct_frames_beside_minidump_stackwalk(&case, &pcs);
    assert_eq!(ours, pcs.len(), "the .sym walk is the reference's whole");
}

/// Issue 20's "at least minidump-stackwalk's frames" on a case whose reference walk is the
/// program's own (`reference`: the crashed thread's pcs, innermost first): both tools walk
/// the dump with the same store of dump_syms' `.sym` files (`--json`), and the frames
/// each gets right before its first wrong or missing one are counted; ours must be at
/// least theirs. Returns (ours, theirs).
fn correct_frames_beside_minidump_stackwalk(case: &Case, reference: &[u64]) -> (usize, usize) {
    let work = case.symbols.parent().unwrap();
    let sw = windows::stackwalk_store(&case.minidump, &module_images(case), work);
    let os = std::ffi::OsStr::new;
    let (dump, store) = (sw.dump.as_os_str(), sw.store.as_os_str());
    let crashed_pcs = |doc: &Value| -> Vec<u64> {
        doc["crashing_thread"]["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let text = f["offset"].as_str().unwrap();
                u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap()
            })
            .collect()
    };
    // a caller's `offset` is its return address less one (the call instruction's last
    // byte), as rust-minidump writes it and our document copies
    let correct = |pcs: &[u64]| {
        pcs.iter()
            .zip(reference)
            .enumerate()
            .take_while(|&(i, (a, b))| *a == b - u64::from(i > 0))
            .count()
    };
    let theirs: Value = serde_json::from_str(&stackwalk::run(
        Path::new("minidump-stackwalk"),
        &[os("--json"), dump, store],
    ))
    .unwrap();
    let ours: Value = serde_json::from_str(&stackwalk::run(
        &postmortem(),
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
    let (ours_pcs, theirs_pcs) = (crashed_pcs(&ours), crashed_pcs(&theirs));
    let (ours_n, theirs_n) = (correct(&ours_pcs), correct(&theirs_pcs));
    eprintln!(
        "{}: frames right before the first wrong one: ours {ours_n} of {}, \
         minidump-stackwalk's {theirs_n} of {} (reference {})",
        case.exe_name(),
        ours_pcs.len(),
        theirs_pcs.len(),
        reference.len()
    );
    assert!(
        ours_n >= theirs_n,
        "minidump-stackwalk got {theirs_n} frames right, ours {ours_n}:\n ours {:x?}\n theirs {:x?}",
        &ours_pcs[..ours_pcs.len().min(theirs_n + 2)],
        &theirs_pcs[..theirs_pcs.len().min(theirs_n + 2)]
    );
    (ours_n, theirs_n)
}

/// The public symbols of `pdb` that are functions, (RVA, decorated name), ascending:
/// `llvm-pdbutil dump --publics` (each at `SECTION:OFFSET`, decimal, made an RVA with
/// `image`'s section table).
fn pdb_public_functions(pdb: &Path, image: &Path) -> Vec<(u64, String)> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(image).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let base = file.relative_address_base();
    let sections: Vec<u64> = file.sections().map(|s| s.address() - base).collect();
    let out = std::process::Command::new("llvm-pdbutil")
        .args(["dump", "--publics"])
        .arg(pdb)
        .output()
        .expect("llvm-pdbutil (llvm) runs");
    assert!(out.status.success(), "llvm-pdbutil: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut publics = Vec::new();
    let mut name = None;
    for line in text.lines() {
        if line.contains("S_PUB32") {
            name = line.split('`').nth(1).map(str::to_owned);
        } else if let (Some(n), true) = (name.take(), line.contains("flags = function")) {
            let addr = line.rsplit("addr = ").next().unwrap().trim();
            let (section, offset) = addr.split_once(':').unwrap();
            let section: usize = section.parse().unwrap();
            let offset: u64 = offset.parse().unwrap();
            publics.push((sections[section - 1] + offset, n));
        }
    }
    publics.sort();
    publics
}

/// `llvm-undname`'s undecoration of `name`, the name alone (what follows the calling
/// convention, without the parameter list): `public: virtual int __cdecl
/// geometry::Square::area(int *) const` → `geometry::Square::area`. A name that is no
/// MSVC decoration stays as it is.
fn llvm_undname(name: &str) -> String {
    if !name.starts_with('?') {
        return name.to_owned();
    }
    let out = std::process::Command::new("llvm-undname")
        .arg(name)
        .output()
        .expect("llvm-undname (llvm) runs");
    let text = String::from_utf8(out.stdout).unwrap();
    let full = text
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("llvm-undname {name}: {text}"));
    let name = full.split_once(" __cdecl ").map_or(full, |(_, n)| n);
    without_parameters(name)
}

/// `name` with template arguments spaced one way: llvm-undname writes `Grid<unsigned
/// char, 3>` and `A<B<int>>`, Microsoft's undecorator (which the walk follows, as a PDB's
/// procedure names do) `Grid<unsigned char,3>` and `A<B<int> >`.
fn template_spacing(name: &str) -> String {
    name.replace(", ", ",").replace("> >", ">>")
}

/// msvc_names.cpp: a C++ program built for the MSVC ABI by clang and lld-link without
/// `-g`, so that its PDB holds only public symbols named by their MSVC decorations
/// (`?area@Square@geometry@@UEBAHPEAH@Z`). Each frame of the program is named from them,
/// undecorated as `llvm-undname` undecorates the public symbol covering its pc (found with
/// `llvm-pdbutil`): the name alone, a template's arguments included
/// (`geometry::scaled<__int64>`), spaced as Microsoft's undecorator spaces them.
#[test]
fn windows_msvc_decorated_names_from_a_pdbs_publics() {
    assert!(
        windows::can_run(),
        "run ./test.sh, which installs wine and mingw-w64"
    );
    let work = Workdir::new("win-msvc_names");
    let (exe, pdb) = windows::compile_msvc(work.path(), "msvc_names.cpp", "msvc_names");
    let crash = windows::record(&exe);
    assert_eq!(
        crash.exit_code,
        Some(windows::ACCESS_VIOLATION_EXIT),
        "{}{}",
        crash.stdout,
        crash.stderr
    );
    let dump = windows::read_dump(&crash.minidump);
    let symbols = work.path().join("symbols");
    windows::Wine::shared().copy_modules(&crash.minidump, &symbols.join("system32"));
    for file in [&exe, &pdb] {
        std::fs::hard_link(file, symbols.join(file.file_name().unwrap())).unwrap();
    }
    let report = walk(&crash.minidump, &symbols);
    let module = dump.module("msvc_names.exe").unwrap();
    let publics = pdb_public_functions(&pdb, &exe);
    let threads = report["threads"].as_array().unwrap();
    let crashed = threads.iter().find(|t| t["crashed"] == true).unwrap();
    let mut rows = Vec::new();
    for (i, frame) in physical_frames(crashed).iter().enumerate() {
        if !module.contains(frame.pc) {
            continue;
        }
        let rva = frame.pc - module.base - u64::from(i > 0);
        let (_, decorated) = publics
            .iter()
            .rev()
            .find(|(at, _)| *at <= rva)
            .unwrap_or_else(|| panic!("no public symbol below {rva:#x}: {publics:?}"));
        let entry = frame.entries.last().unwrap();
        rows.push((
            entry["function"].as_str().unwrap_or("??").to_owned(),
            llvm_undname(decorated),
            entry["symbol_source"].clone(),
        ));
    }
    let table: String = rows.iter().map(|r| format!("  {r:?}\n")).collect();
    eprintln!("ours, llvm-undname's, symbol source:\n{table}");
    // the reference itself: the program's calls, innermost first
    let reference: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        reference,
        [
            "geometry::Square::area",
            "geometry::scaled<__int64>",
            "geometry::Grid<unsigned char, 3>::visit",
            "app::run",
            "entry"
        ],
        "the reference does not show the program's calls"
    );
    for (ours, undname, source) in &rows {
        assert_eq!(
            (template_spacing(ours), source.as_str()),
            (template_spacing(undname), Some("publics")),
            "{table}"
        );
    }
}

/// One line of epilogue.c's reference: a thread stopped inside an epilogue.
#[derive(Debug)]
struct StoppedThread {
    tid: u64,
    /// epilogue.S's function (0: `ret`, 1: tail-call `jmp`, 2: `lea rsp`) and the
    /// instruction of its epilogue.
    point: String,
    /// The frames the walk must find, (pc, sp): the thread's context, the caller known
    /// without unwinding, then the callers of its loop as it walked them itself.
    expected: Vec<(u64, u64)>,
    /// wine's `RtlVirtualUnwind` walk from the same context.
    wine: Vec<(u64, u64)>,
}

/// Parses epilogue.c's lines (`thread TID point F.I rip R rsp S truth PC SP self … wine …`).
fn stopped_threads(stdout: &str) -> Vec<StoppedThread> {
    let pairs = hex_pairs;
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("thread "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(
                (w[1], w[3], w[5], w[7], w[10]),
                ("point", "rip", "rsp", "truth", "self"),
                "{l}"
            );
            let wine = w.iter().position(|&x| x == "wine").unwrap();
            let mut expected = pairs(&[w[4], w[6], w[8], w[9]]);
            expected.extend(pairs(&w[11..wine]));
            StoppedThread {
                tid: w[0].parse().unwrap(),
                point: w[2].to_owned(),
                expected,
                wine: pairs(&w[wine + 1..]),
            }
        })
        .collect()
}

/// epilogue.c/.S: nine threads stopped inside the epilogues of three functions written
/// with `.seh_*` directives, at each instruction after the one that releases the stack:
/// `add rsp; pop; pop; ret`, the same ending in a tail-call `jmp` out of the function,
/// and `lea rsp, [rbp + N]; pop; pop; ret`; the main thread faults. The crashed thread is
/// compared with winedbg's as every case's is. Each stopped thread's frames, pc and stack
/// pointer, equal the program's own reference: its context, the caller's frame known
/// without unwinding (where the function stored the address of its return address), then
/// the callers of its loop as the thread walked them itself with `RtlVirtualUnwind`;
/// frame 1 found by the `.pdata` rules, which must read the code to see the epilogue.
///
/// wine's own `RtlVirtualUnwind` from the same contexts is printed too: it must agree
/// on the `ret` epilogues, which makes the reference no product of the program alone;
/// wine 8 takes a `jmp` out of the function for no epilogue (Windows and later wine take
/// it for a tail call), so on those it is not required to.
#[test]
fn windows_threads_stopped_in_epilogues() {
    let mut case = record_sources(
        "epilogue",
        &["-O2"],
        &["epilogue.c", "epilogue.S", "rtl_walk.c", "rtl_walk.h"],
        Build::Gcc,
        None,
    );
    let stopped = stopped_threads(&case.stdout);
    assert_eq!(stopped.len(), 9, "nine threads stopped:\n{}", case.stdout);
    case.in_epilogues = stopped.iter().map(|t| t.tid).collect();
    check(&case, &["fault", "main"]);
    let functions = ["epi_ret", "epi_jmp", "epi_lea"];
    let mut differs = Vec::new();
    for t in &stopped {
        let function = functions[usize::from(t.point.as_bytes()[0] - b'0')];
        if function != "epi_jmp" {
            assert_eq!(
                t.wine, t.expected,
                "thread {} ({function}, {}): wine's RtlVirtualUnwind disagrees with the \
                 reference",
                t.tid, t.point
            );
        }
        let frames = case.thread(t.tid)["frames"].as_array().unwrap();
        let ours = pcs_and_sps(case.thread(t.tid));
        let show = |v: &[(u64, u64)]| -> String {
            v.iter()
                .map(|(pc, sp)| format!("{pc:#x}/{sp:#x}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        eprintln!(
            "thread {} ({function}, point {}):\n  reference {}\n  ours      {}\n  wine      {}",
            t.tid,
            t.point,
            show(&t.expected),
            show(&ours),
            show(&t.wine)
        );
        let caller = &frames[1];
        if ours != t.expected
            || frames[0]["function"] != function
            || (caller["function"].as_str(), caller["trust"].as_str())
                != (Some("work"), Some("cfi"))
            || caller["unwind_source"] != "pdata"
        {
            differs.push(format!("{function} point {} (thread {})", t.point, t.tid));
        }
    }
    assert!(
        differs.is_empty(),
        "the walk of threads stopped in epilogues differs from the reference: {differs:?}"
    );
}

/// plugin_main.c loads plugin.dll (plugin.c) with LoadLibrary; the fault is two functions
/// deep in the DLL, whose frames are found and named from the DLL's own files.
#[test]
fn windows_crash_in_a_loaded_dll() {
    let case = record_sources(
        "plugin_main",
        &["-O2"],
        &["plugin_main.c"],
        Build::Gcc,
        Some(("plugin.c", "plugin.dll")),
    );
    // frames in the DLL are not the program's: addr2line names only call_plugin and main
    check(&case, &["(not the program)", "call_plugin", "main"]);
    let frames = case.crashed_thread()["frames"].as_array().unwrap();
    let in_dll: Vec<(&str, &str)> = frames
        .iter()
        .take_while(|f| f["module"] == "plugin.dll")
        .map(|f| {
            (
                f["function"].as_str().unwrap_or("??"),
                f["trust"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        in_dll,
        [("plugin_fault", "context"), ("plugin_entry", "cfi")],
        "the DLL's frames, named from its DWARF"
    );
}

/// threads.c: the main thread crashes while two others wait. winedbg walks only the
/// crashed thread; the others must be in the report, each with its own function, named as
/// addr2line names it.
#[test]
fn windows_threads() {
    let case = record("threads", &["-O2"], "threads.c");
    assert_eq!(
        case.dump.threads.len(),
        3,
        "the dump holds the main thread and the two waiting ones: {:?}",
        case.dump.threads
    );
    check(&case, &["fault", "main"]);

    let mut reported: Vec<u64> = case.report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .map(|t| t["tid"].as_u64().expect("tid"))
        .collect();
    let mut in_dump: Vec<u64> = case.dump.threads.iter().map(|&t| u64::from(t)).collect();
    reported.sort_unstable();
    in_dump.sort_unstable();
    assert_eq!(reported, in_dump, "the report's threads are the dump's");

    let crashed = u64::from(case.dump.crashed_tid.unwrap());
    let mut waiting = Vec::new();
    for &tid in in_dump.iter().filter(|&&t| t != crashed) {
        let frames = physical_frames(case.thread(tid));
        let pcs: Vec<u64> = frames.iter().map(|f| f.pc).collect();
        let names = case.program_names(&pcs);
        let table: String = frames
            .iter()
            .zip(&names)
            .map(|(f, n)| format!("  {:#x} {:?} (addr2line: {n:?})\n", f.pc, f.names()))
            .collect();
        for (f, n) in frames.iter().zip(&names) {
            if let Some(n) = n {
                assert_eq!(&f.names(), n, "thread {tid}:\n{table}");
            }
        }
        let own: Vec<&String> = names.iter().flatten().flatten().collect();
        waiting.extend(
            ["wait_forever", "sleep_long"]
                .into_iter()
                .filter(|w| own.iter().any(|n| n == w)),
        );
        assert!(
            !own.is_empty(),
            "thread {tid} has no frame in the program:\n{table}"
        );
    }
    waiting.sort_unstable();
    assert_eq!(
        waiting,
        ["sleep_long", "wait_forever"],
        "one thread waits in each"
    );
}

/// C++ programs (`crashers/windows/*.cpp`) are linked `-static` unless a case says not:
/// libgcc's unwinder and libstdc++ are in the image, whose COFF symbols name them (the
/// archives Debian ships carry no DWARF, so addr2line says `??` there).
const CXX_STATIC: &str = "-static";

/// The report's function names of the crashed thread's physical frames `range`, and
/// what `nm` names them by ([`windows::coff_names`], at the return address minus one in callers).
fn named_from_coff(case: &Case, range: std::ops::Range<usize>) -> (Vec<String>, Vec<String>) {
    let ours = physical_frames(case.crashed_thread());
    let frames = &ours[range.clone()];
    let addresses: Vec<u64> = frames
        .iter()
        .zip(range)
        .map(|(o, i)| if i == 0 { o.pc } else { o.pc - 1 })
        .collect();
    let names = frames
        .iter()
        .map(|o| o.names().last().cloned().unwrap_or_default())
        .collect();
    (names, windows::coff_names(&case.exe, &addresses))
}

/// virtual.cpp: a crash in `shapes::Ring::area`, called through a `Shape` pointer in
/// `shapes::total_area`'s loop over a `std::vector<std::unique_ptr<Shape>>`. The call is
/// a real virtual one (an indirect call through the vtable just before the return
/// address), and the frames carry the namespace and class.
fn virtual_call(case: &str, flags: &[&str]) {
    let case = record(case, flags, "virtual.cpp");
    check(&case, &["shapes::Ring::area", "shapes::total_area", "main"]);
    // the instruction that ends at the return address: one of 2 to 7 bytes
    let ret = physical_frames(case.crashed_thread())[1].pc;
    let listings: Vec<String> = (2..=7)
        .map(|n| {
            let out = std::process::Command::new("x86_64-w64-mingw32-objdump")
                .args(["-d", "--no-show-raw-insn"])
                .arg(format!("--start-address={:#x}", ret - n))
                .arg(format!("--stop-address={ret:#x}"))
                .arg(&case.exe)
                .output()
                .expect("x86_64-w64-mingw32-objdump runs");
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
        .collect();
    let is_indirect_call = |listing: &str| {
        let instructions: Vec<&str> = listing
            .lines()
            .filter(|l| l.starts_with("   ") && l.contains(":\t"))
            .collect();
        instructions.len() == 1 && instructions[0].contains("call   *")
    };
    assert!(
        listings.iter().any(|l| is_indirect_call(l)),
        "total_area's call of area is not an indirect call:\n{}",
        listings.join("")
    );
}

#[test]
fn windows_cxx_virtual_call_o0() {
    virtual_call("cxx_virtual_o0", &["-O0", CXX_STATIC]);
}

#[test]
fn windows_cxx_virtual_call_o2() {
    virtual_call("cxx_virtual_o2", &["-O2", CXX_STATIC]);
}

/// dtor_unwind.cpp: `io::Buffer`'s destructor faults while the `throw` in `io::fill`
/// unwinds towards main's `catch`. mingw's SEH unwinder (libgcc's `_GCC_specific_handler`
/// calling `RtlUnwindEx`) has already restored `fill`'s landing pad when the destructor
/// runs, so no unwinder frame is left on the stack, in winedbg's walk or ours: the
/// destructor's caller is `fill`, at the landing pad.
#[test]
fn windows_cxx_destructor_during_unwinding() {
    for (case, flags) in [("cxx_dtor_o0", "-O0"), ("cxx_dtor_o2", "-O2")] {
        let case = record(case, &[flags, CXX_STATIC], "dtor_unwind.cpp");
        check(&case, &["io::Buffer::~Buffer", "io::fill", "main"]);
    }
}

/// dtor_unwind.cpp with `-DIN_CATCH`: the fault is in `io::report`, called from main's
/// `catch` block, after the unwinder transferred control to the handler.
#[test]
fn windows_cxx_crash_in_a_catch_block() {
    let case = record(
        "cxx_catch",
        &["-O2", "-DIN_CATCH", CXX_STATIC],
        "dtor_unwind.cpp",
    );
    check(&case, &["io::report", "main"]);
}

/// terminate.cpp: an exception nobody catches makes `__cxa_throw` call `std::terminate`
/// (libgcc's `_Unwind_RaiseException` returns once the SEH dispatch finds no handler),
/// whose handler faults: the stack crosses libstdc++'s exception-handling frames, named
/// from the image's COFF symbols as `nm` names them.
#[test]
fn windows_cxx_crash_in_a_terminate_handler() {
    for (case, flags) in [("cxx_terminate_o0", "-O0"), ("cxx_terminate_o2", "-O2")] {
        let case = record(case, &[flags, CXX_STATIC], "terminate.cpp");
        let want = [
            "config::on_terminate",
            "??",
            "??",
            "??",
            "config::parse",
            "config::load",
            "main",
        ];
        check(&case, &want);
        let (ours, coff) = named_from_coff(&case, 1..4);
        assert_eq!(ours, coff, "{}: libstdc++'s frames", case.exe_name());
        assert_eq!(
            ours,
            ["__cxxabiv1::__terminate", "std::terminate", "__cxa_throw"],
            "{}",
            case.exe_name()
        );
    }
}

/// terminate.cpp linked with mingw's C++ runtime DLLs: libstdc++-6.dll's frames, walked
/// from its `.pdata` and named as addr2line names them from the DLL's DWARF (where the
/// DWARF gives `__cxa_throw` no linkage name, its namespace, `__cxxabiv1::`, qualifies
/// it).
#[test]
fn windows_cxx_terminate_handler_through_libstdcxx_dll() {
    let case = record_sources(
        "cxx_terminate_dll",
        &["-O2"],
        &["terminate.cpp"],
        Build::GccRuntimeDlls,
        None,
    );
    check_scoped(
        &case,
        &[
            "config::on_terminate",
            "__cxxabiv1::__terminate",
            "std::terminate",
            "__cxa_throw",
            "config::parse",
            "config::load",
            "main",
        ],
        &["__cxxabiv1::"],
    );
}

/// unwind_callback.cpp: the fault is in the trace function libgcc's `_Unwind_Backtrace`
/// calls, so the stack crosses the unwinder: linked in (`-static`, named by its COFF
/// symbol) and in libgcc_s_seh-1.dll (named by addr2line from the DLL's DWARF).
#[test]
fn windows_cxx_crash_in_an_unwinder_callback() {
    for (case, flags) in [("cxx_unwind_o0", "-O0"), ("cxx_unwind_o2", "-O2")] {
        let case = record(case, &[flags, CXX_STATIC], "unwind_callback.cpp");
        check(
            &case,
            &["trace::count_frame", "??", "trace::collect", "main"],
        );
        let (ours, coff) = named_from_coff(&case, 1..2);
        assert_eq!(ours, coff, "{}: libgcc's frame", case.exe_name());
        assert_eq!(ours, ["_Unwind_Backtrace"], "{}", case.exe_name());
    }
    let case = record_sources(
        "cxx_unwind_dll",
        &["-O2"],
        &["unwind_callback.cpp"],
        Build::GccRuntimeDlls,
        None,
    );
    check(
        &case,
        &[
            "trace::count_frame",
            "_Unwind_Backtrace",
            "trace::collect",
            "main",
        ],
    );
    let frame1 = physical_frames(case.crashed_thread())[1].entries[0];
    assert_eq!(frame1["module"], "libgcc_s_seh-1.dll", "{frame1}");
}

/// sort_lambda.cpp's types as gcc's DWARF names them (what addr2line prints and the
/// template frames' names are made of).
const ITEM_ITERATOR: &str =
    "__gnu_cxx::__normal_iterator<inventory::Item*, std::vector<inventory::Item> >";
const SORT_LAMBDA: &str = "inventory::order(std::vector<Item>&)::<lambda(const inventory::Item&, \
                           const inventory::Item&)>";

/// sort_lambda.cpp: `std::sort` with a lambda comparator that reads through a null
/// pointer. At -O0 every template instantiation is a frame of its own (the lambda's
/// `operator()`, `_Iter_comp_iter::operator()`, `std::__unguarded_partition`, …,
/// `std::sort`); at -O2 they are inlined calls. Each name is addr2line's: gcc writes
/// no linkage name for these instantiations (their types involve the lambda), so
/// addr2line prints the bare `DW_AT_name` and ours is that name in its namespace or
/// class (`std::`, `__gnu_cxx::__ops::_Iter_comp_iter<…>::`).
fn sort_with_a_lambda(case: &str, flags: &[&str], want: &[&str]) {
    let case = record(case, flags, "sort_lambda.cpp");
    let comparator = format!("__gnu_cxx::__ops::_Iter_comp_iter<{SORT_LAMBDA} >::");
    check_scoped(&case, want, &["std::", &comparator]);
    let names: Vec<String> = physical_frames(case.crashed_thread())
        .iter()
        .flat_map(Physical::names)
        .collect();
    let sort = format!("std::sort<{ITEM_ITERATOR}, {SORT_LAMBDA} >");
    assert!(
        names.contains(&sort),
        "{}: no frame {sort}: {names:#?}",
        case.exe_name()
    );
}

#[test]
fn windows_cxx_sort_lambda_o0() {
    sort_with_a_lambda(
        "cxx_sort_o0",
        &["-O0", CXX_STATIC],
        &["operator()", "inventory::order", "main"],
    );
}

#[test]
fn windows_cxx_sort_lambda_o2() {
    let introsort = format!(
        "__introsort_loop<{ITEM_ITERATOR}, long long int, \
         __gnu_cxx::__ops::_Iter_comp_iter<{SORT_LAMBDA} > >"
    );
    sort_with_a_lambda(
        "cxx_sort_o2",
        &["-O2", CXX_STATIC],
        &[&introsort, "inventory::order", "main"],
    );
}

/// The C++ programs built by clang and lld with a PDB (`-O1`, libstdc++ linked in): the
/// program's frames are named from the PDB, as addr2line names them from the same
/// build's DWARF (namespaces, classes, destructors), and libstdc++'s by the PDB's
/// public symbols.
#[test]
fn windows_cxx_pdb_names() {
    pdb_case(
        "pdb_cxx_virtual",
        &["-O1", CXX_STATIC],
        "virtual.cpp",
        &["shapes::Ring::area", "shapes::total_area", "main"],
    );
    pdb_case(
        "pdb_cxx_dtor",
        &["-O1", CXX_STATIC],
        "dtor_unwind.cpp",
        &["io::Buffer::~Buffer", "io::fill", "main"],
    );
    pdb_case(
        "pdb_cxx_terminate",
        &["-O1", CXX_STATIC],
        "terminate.cpp",
        &[
            "config::on_terminate",
            "config::parse",
            "config::load",
            "main",
        ],
    );
}

/// sort_lambda.cpp built by clang with a PDB: the template and lambda frames. Ignored:
/// the PDB names them differently from addr2line on the same build's DWARF (see the
/// reason), which is for the PDB symbol source to settle, not for this test to accept.
/// Most of it is not in the PDB to settle: the inlined calls are named by CodeView's
/// `LF_FUNC_ID` records, which hold a function template's bare name
/// (`__unguarded_partition`, as `llvm-pdbutil dump --ids` shows) and clang's name for a
/// lambda, and no public symbol (no linkage name) covers an inlined call; only the
/// outermost frame has a public symbol whose Itanium name would give addr2line's.
#[test]
#[ignore = "PDB names of template instantiations and lambdas differ from addr2line's: \
            `std::__unguarded_partition` (no template arguments) for \
            `std::__unguarded_partition<…>`, `inventory::order::<lambda0>::operator()` \
            for `inventory::order(std::vector<…>&)::$_0::operator()`, \
            `std::__introsort_loop<…,long long,…<`lambda at sort_lambda.cpp:21:43'> >` \
            (CodeView's spelling) for `void std::__introsort_loop<…, long long, …$_0> >`"]
fn windows_cxx_pdb_template_and_lambda_names() {
    // frame 0 as addr2line names it from clang's DWARF (the demangled linkage name, with
    // the return type of a template function)
    let vector = "std::vector<inventory::Item, std::allocator<inventory::Item> >";
    let introsort = format!(
        "void std::__introsort_loop<__gnu_cxx::__normal_iterator<inventory::Item*, {vector} >, \
         long long, __gnu_cxx::__ops::_Iter_comp_iter<inventory::order({vector}&)::$_0> >"
    );
    pdb_case(
        "pdb_cxx_sort",
        &["-O1", CXX_STATIC],
        "sort_lambda.cpp",
        &[&introsort, "inventory::order", "main"],
    );
}

/// The crashed thread's frames as the comparison reads them: pc, function, trust, unwind
/// source and module of each entry.
fn frame_rows(report: &Value) -> Vec<[Value; 5]> {
    let crashed = report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .find(|t| t["crashed"] == true)
        .expect("a crashed thread");
    crashed["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .map(|f| ["pc", "function", "trust", "unwind_source", "module"].map(|k| f[k].clone()))
        .collect()
}

/// `postmortem serve` with one worker and a data directory of its own (removed with the
/// returned directory).
fn serve() -> (tempfile::TempDir, common::Proc, String) {
    let data = tempfile::tempdir().unwrap();
    let (server, base) = common::start_serve(&[
        "--workers",
        "1",
        "--data-dir",
        data.path().to_str().unwrap(),
    ]);
    (data, server, base)
}

/// Uploads the case's program and the wine DLLs its dump lists, by their file names.
async fn upload_program_and_dlls(c: &reqwest::Client, base: &str, case: &Case) {
    let mut files = vec![case.symbols.join(case.exe_name())];
    for dll in std::fs::read_dir(case.symbols.join("system32")).unwrap() {
        files.push(dll.unwrap().path());
    }
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        common::upload_binary(c, base, f, name).await;
    }
}

/// The service: a Windows minidump uploaded before its files has the program and wine's
/// DLLs missing; uploading the `.exe` and `.dll` files (by name: a Windows image sent
/// without one is refused) requeues the crash, whose report then has the CLI's frames.
#[tokio::test]
async fn windows_minidump_through_the_service() {
    let case = record("service", &["-O2"], "basic.c");
    let (_data, _server, base) = serve();
    let c = common::client();
    let dump = std::fs::read(&case.minidump).unwrap();
    let id = common::upload_crash(&c, &base, &dump).await;
    let first = common::poll_done(&c, &base, &id).await;
    assert_eq!(first["status"], "done", "{first}");
    let exe_name = case.exe_name().to_owned();
    let module = |report: &Value| case.program_module(report).clone();
    assert_eq!(module(&first["report"])["status"], "missing", "{first}");

    // no file name: the image cannot be matched, and is refused
    let nameless = c
        .post(format!("{base}/api/v1/binaries"))
        .body(std::fs::read(case.symbols.join(&exe_name)).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(nameless.status(), 400);
    let body: Value = nameless.json().await.unwrap();
    assert_eq!(body["code"], "file-name-required", "{body}");

    upload_program_and_dlls(&c, &base, &case).await;
    let listed = common::get_json(&c, format!("{base}/api/v1/binaries")).await;
    let exe_row = listed["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["file_name"] == exe_name.as_str())
        .cloned()
        .unwrap();
    assert_eq!(exe_row["format"], "pe", "{exe_row}");
    assert_eq!(exe_row["kind"], "executable", "{exe_row}");
    assert_eq!(
        exe_row["code_id"].as_str().map(str::to_ascii_uppercase),
        module(&case.report)["code_id"]
            .as_str()
            .map(str::to_ascii_uppercase),
        "the image's code id is the one the dump names it by"
    );

    // the upload requeued the crash: wait for the report with the program's files
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let done = loop {
        let v = common::poll_done(&c, &base, &id).await;
        if module(&v["report"])["status"] == "ok" {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "not reprocessed: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(frame_rows(&done["report"]), frame_rows(&case.report));
}

/// A PDB uploaded after its image: identified by the debug id of the image's CodeView
/// record (`format: pdb`), it rebuilds the image's tables and requeues the crash, whose
/// program frames are then named from it (`symbol_source: pdb`), as `postmortem walk`
/// names them with both files.
#[tokio::test(flavor = "multi_thread")]
async fn windows_pdb_uploaded_after_its_image() {
    let case = record_sources("svc_pdb", &["-O1"], &["basic.c"], Build::ClangPdb, None);
    let exe_name = case.exe_name().to_owned();
    let pdb_name = exe_name.replace(".exe", ".pdb");
    let (_data, _server, base) = serve();
    let c = common::client();
    upload_program_and_dlls(&c, &base, &case).await;
    let dump = std::fs::read(&case.minidump).unwrap();
    let id = common::upload_crash(&c, &base, &dump).await;
    let first = common::poll_done(&c, &base, &id).await;
    let source_of = |report: &Value, function: &str| {
        report["threads"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| t["frames"].as_array().unwrap())
            .find(|f| f["function"] == function)
            .map(|f| f["symbol_source"].clone())
    };
    // without the PDB, the image's own DWARF names the program
    assert_eq!(
        source_of(&first["report"], "crash_here"),
        Some(Value::from("dwarf")),
        "{first}"
    );

    common::upload_binary(&c, &base, &case.symbols.join(&pdb_name), &pdb_name).await;
    let listed = common::get_json(&c, format!("{base}/api/v1/binaries")).await;
    let rows = listed["binaries"].as_array().unwrap();
    let row = |name: &str| {
        rows.iter()
            .find(|b| b["file_name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} is not listed: {listed}"))
    };
    let (exe_row, pdb_row) = (row(&exe_name), row(&pdb_name));
    assert_eq!(
        (pdb_row["format"].as_str(), pdb_row["kind"].as_str()),
        (Some("pdb"), Some("debug")),
        "{pdb_row}"
    );
    assert!(pdb_row["debug_id"].is_string(), "{pdb_row}");
    assert_eq!(
        pdb_row["debug_id"], exe_row["debug_id"],
        "the PDB's debug id is the one the image's CodeView record names"
    );

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let done = loop {
        let v = common::poll_done(&c, &base, &id).await;
        if source_of(&v["report"], "crash_here") == Some(Value::from("pdb")) {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "not reprocessed: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(frame_rows(&done["report"]), frame_rows(&case.report));
}

/// The PDB build's dump as Windows' own dbghelp writes it, with the program's CodeView
/// record ([`windows::with_codeview`]; wine's writer records none), so that the module has
/// a debug id:
/// - with the image and its PDB, the walk is the one without the record (the PDB is now
///   found by the dump's debug id), and the module reports that id;
/// - with only the PDB (no image: no `.pdata`), it is found by its debug id and names the
///   crashing frame;
/// - beside minidump-stackwalk, both given only the Breakpad symbol store holding the
///   program's `.sym` (dump_syms, `<pdb>/<DEBUG_ID>/<name>.sym`): every frame
///   minidump-stackwalk finds in the program is ours too, in order, at the same pc and
///   with the same function.
#[test]
fn windows_pdb_found_by_the_dumps_codeview_record() {
    let case = record_sources("pdb_cv", &["-O1"], &["basic.c"], Build::ClangPdb, None);
    let exe_name = case.exe_name().to_owned();
    let pdb_name = exe_name.replace(".exe", ".pdb");
    let work = case.symbols.parent().unwrap();
    let dump = work.join("with-codeview.dmp");
    windows::with_codeview(&case.minidump, &dump, &case.symbols.join(&exe_name));
    let module = |report: &Value| case.program_module(report).clone();

    let with_record = walk(&dump, &case.symbols);
    assert_eq!(frame_rows(&with_record), frame_rows(&case.report));
    let debug_id = module(&with_record)["debug_id"].clone();
    assert!(debug_id.is_string(), "{}", module(&with_record));

    let pdb_only = work.join("pdb-only");
    std::fs::create_dir_all(&pdb_only).unwrap();
    std::fs::hard_link(case.symbols.join(&pdb_name), pdb_only.join(&pdb_name)).unwrap();
    let report = walk(&dump, &pdb_only);
    let m = module(&report);
    assert_eq!(m["status"], "ok", "{m}");
    // the program's procedures, and the C runtime's publics: nothing from the image
    assert_eq!(m["symbols"], serde_json::json!(["pdb", "publics"]), "{m}");
    assert_eq!(m["unwind"], serde_json::json!([]), "{m}");
    assert!(
        !report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["module"] == m["index"]),
        "a PDB alone is no unwind table, and no error: {}",
        report["warnings"]
    );
    let frame0 = &case.crashed_thread_of(&report)["frames"][0];
    assert_eq!(frame0["function"], "crash_here", "{frame0}");

    // the program's .sym in a Breakpad store, for both tools
    let out = std::process::Command::new("dump_syms")
        .arg(case.symbols.join(&exe_name))
        .output()
        .expect("run dump_syms (see test.sh)");
    assert!(out.status.success(), "dump_syms failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let store = work.join("store");
    let sym = store
        .join(&pdb_name)
        .join(debug_id.as_str().unwrap())
        .join(exe_name.replace(".exe", ".sym"));
    std::fs::create_dir_all(sym.parent().unwrap()).unwrap();
    std::fs::write(&sym, &text).unwrap();
    let theirs = std::process::Command::new("minidump-stackwalk")
        .arg("--json")
        .arg(&dump)
        .arg(&store)
        .output()
        .expect("run minidump-stackwalk (see test.sh)");
    assert!(theirs.status.success(), "minidump-stackwalk failed");
    let theirs: Value = serde_json::from_slice(&theirs.stdout).unwrap();
    let (ours, _) = report::walk_report(
        std::process::Command::new(postmortem())
            .arg("walk")
            .arg(&dump)
            .arg("--symbols-path")
            .arg(&store)
            .args(["--format", "json"]),
    );
    let program = |pc: u64| case.in_program(pc);
    // their frames found by the .sym's rules (not by scanning: those may be stale return
    // addresses), at our pc (theirs is the return address minus one in callers), named
    // without parameters (theirs carry the PDB's)
    let their_frames: Vec<(u64, String)> = theirs["crashing_thread"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, f)| f["trust"] == "context" || f["trust"] == "cfi")
        .map(|(i, f)| {
            let pc = hex(&f["offset"]) + u64::from(i > 0);
            let function = f["function"].as_str().unwrap_or("??");
            (pc, engine::symbols::strip_parameters(function).to_owned())
        })
        .filter(|(pc, _)| program(*pc))
        .collect();
    let our_frames: Vec<(u64, String)> = physical_frames(case.crashed_thread_of(&ours))
        .iter()
        .map(|o| (o.pc, o.names().last().cloned().unwrap_or_default()))
        .filter(|(pc, _)| program(*pc))
        .collect();
    assert!(
        their_frames.iter().any(|(_, f)| f == "main"),
        "minidump-stackwalk did not use the .sym file: {their_frames:x?}\n{}",
        theirs["crashing_thread"]
    );
    // shown with --nocapture
    eprintln!("in the program, ours   {our_frames:x?}\nin the program, theirs {their_frames:x?}");
    let mut rest = our_frames.iter();
    for frame in &their_frames {
        assert!(
            rest.any(|o| o == frame),
            "minidump-stackwalk's {frame:x?} is not among ours, in order:\n\
             ours   {our_frames:x?}\ntheirs {their_frames:x?}"
        );
    }
}

/// The case's program image and PDB laid out as a symbol server (`NAME/CODE_ID/NAME`,
/// `NAME.pdb/DEBUG_ID/NAME.pdb`) under `WORK/server`, served over HTTP; and the code id
/// and debug id.
fn symbol_server(case: &Case) -> (HttpDir, String, String) {
    let exe_name = case.exe_name().to_owned();
    let pdb_name = exe_name.replace(".exe", ".pdb");
    let work = case.symbols.parent().unwrap().to_path_buf();
    let image = std::fs::read(case.symbols.join(&exe_name)).unwrap();
    let info = engine::identify::identify(&image).unwrap();
    let (code_id, debug_id) = (info.code_id.unwrap(), info.debug_id.unwrap());
    let server = work.join("server");
    for (name, id) in [(&exe_name, &code_id), (&pdb_name, &debug_id)] {
        let dir = server.join(name).join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(case.symbols.join(name), dir.join(name)).unwrap();
    }
    let http = HttpDir::serve(&server, work.join("http.log"));
    (http, code_id, debug_id)
}

/// A symbol server in Microsoft's layout (`NAME/CODE_ID/NAME` for the image,
/// `NAME.pdb/DEBUG_ID/NAME.pdb` for its PDB) served over HTTP, with only wine's DLLs on
/// disk: `--symbol-server` fetches the program's image by the dump's name and code id and
/// its PDB by the image's CodeView record, and the walk equals the one with both files on
/// disk; the report says where they came from, and a second walk asks nothing.
#[test]
fn windows_image_and_pdb_from_a_symbol_server() {
    let case = record_sources("symsrv", &["-O1"], &["basic.c"], Build::ClangPdb, None);
    let exe_name = case.exe_name().to_owned();
    let pdb_name = exe_name.replace(".exe", ".pdb");
    let (http, code_id, debug_id) = symbol_server(&case);
    let cache = case.symbols.parent().unwrap().join("cache");
    let fetch = || {
        report::walk_report(
            std::process::Command::new(postmortem())
                .arg("walk")
                .arg(&case.minidump)
                .arg("--symbols")
                .arg(case.symbols.join("system32"))
                .args(["--symbol-server", &http.url, "--cache-dir"])
                .arg(&cache)
                .args(["--format", "json"]),
        )
        .0
    };
    let fetched = fetch();
    assert_eq!(frame_rows(&fetched), frame_rows(&case.report));
    let m = case.program_module(&fetched).clone();
    let lookups: Vec<(&str, &str)> = m["lookups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["file"].as_str().unwrap(), l["result"].as_str().unwrap()))
        .collect();
    assert_eq!(
        lookups,
        [("executable", "fetched"), ("debuginfo", "fetched")],
        "{m}"
    );
    for f in m["files"].as_array().unwrap() {
        assert_eq!(f["source"], http.url.as_str(), "{m}");
    }
    let asked = http.asked();
    for path in [
        format!("/{exe_name}/{code_id}/{exe_name}"),
        format!("/{pdb_name}/{debug_id}/{pdb_name}"),
    ] {
        assert!(asked.contains(&path), "{path} not asked: {asked:?}");
    }
    let again = fetch();
    assert_eq!(frame_rows(&again), frame_rows(&fetched));
    assert_eq!(
        http.asked().len(),
        asked.len(),
        "the cache answers: {:?}",
        http.asked()
    );
}

/// The service with `--symbol-server`: a Windows dump whose program nobody uploaded (only
/// wine's DLLs were) has the image and its PDB fetched from the server, stored as uploads
/// (the binaries API lists them with their source), and its report equals the CLI's with
/// the files on disk.
#[tokio::test(flavor = "multi_thread")]
async fn windows_service_fetches_image_and_pdb_from_a_symbol_server() {
    let case = record_sources("svc_symsrv", &["-O1"], &["basic.c"], Build::ClangPdb, None);
    let exe_name = case.exe_name().to_owned();
    let pdb_name = exe_name.replace(".exe", ".pdb");
    let (http, _, _) = symbol_server(&case);
    let data = tempfile::tempdir().unwrap();
    let (_server, base) = common::start_serve(&[
        "--workers",
        "1",
        "--data-dir",
        data.path().to_str().unwrap(),
        "--symbol-server",
        &http.url,
    ]);
    let c = common::client();
    for dll in std::fs::read_dir(case.symbols.join("system32")).unwrap() {
        let dll = dll.unwrap().path();
        let name = dll.file_name().unwrap().to_str().unwrap().to_owned();
        common::upload_binary(&c, &base, &dll, &name).await;
    }
    let dump = std::fs::read(&case.minidump).unwrap();
    let id = common::upload_crash(&c, &base, &dump).await;
    let done = common::poll_done(&c, &base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(frame_rows(&done["report"]), frame_rows(&case.report));
    let listed = common::get_json(&c, format!("{base}/api/v1/binaries")).await;
    for (name, format) in [(&exe_name, "pe"), (&pdb_name, "pdb")] {
        let row = listed["binaries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["file_name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} was not stored: {listed}"));
        assert_eq!(
            (row["format"].as_str(), row["source"].as_str()),
            (Some(format), Some(http.url.as_str())),
            "{row}"
        );
    }
}

/// Exceptions other than an access violation, raised with `RaiseException` (raise.c): the
/// report names each code as the Windows SDK's headers do (`ntstatus.h`, `winnt.h`; the
/// MSVC runtime's C++ exception code is the `0xE06D7363` "msc" one), and the stack from
/// kernelbase's `RaiseException` through the program is winedbg's.
#[test]
fn windows_exceptions_are_named() {
    for (code, name) in [
        (0xC000_0374_u32, "STATUS_HEAP_CORRUPTION"),
        (0xC000_0409, "STATUS_STACK_BUFFER_OVERRUN"),
        (0xE06D_7363, "Unhandled C++ Exception"),
        (0x8000_0003, "EXCEPTION_BREAKPOINT"),
    ] {
        let define = format!("-DRAISED={code:#x}");
        let case = format!("raise_{code:08x}");
        let case = record_dying_of(
            &case,
            &["-O1", &define],
            &["raise.c"],
            Build::Gcc,
            None,
            code,
        );
        check(&case, &["(not the program)", "raise_it", "main"]);
        let exception = &case.report["crash"]["exception"];
        assert_eq!(
            (exception["code"].as_str(), exception["name"].as_str()),
            (Some(format!("{code:#x}").as_str()), Some(name)),
            "{}",
            case.report["crash"]
        );
        let frame0 = &case.crashed_thread()["frames"][0];
        assert_eq!(frame0["function"], "RaiseException", "{frame0}");
    }
}

/// The crash analysis of Windows exceptions (issue 21, part 2): each case crashes a
/// program of `crashers/windows` under wine and checks `crash.analysis`, its kind and its
/// evidence, against what the program printed or what its source fixes (never against an
/// earlier output of ours).
fn analysed(case: &str, flags: &[&str], source: &str, code: u32) -> (Case, Value) {
    let case = record_dying_of(case, flags, &[source], Build::Gcc, None, code);
    let analysis = case.report["crash"]["analysis"].clone();
    assert!(
        analysis.is_object(),
        "no analysis of {}: {}",
        case.exe_name(),
        case.report["crash"]
    );
    // shown with --nocapture
    eprintln!("{}: {analysis:#}", case.exe_name());
    (case, analysis)
}

/// A read of a struct's field through a null pointer: EXCEPTION_ACCESS_VIOLATION (read)
/// at the field's offset, which the program printed (`offsetof`).
#[test]
fn windows_null_field_read_is_a_null_pointer() {
    let (case, a) = analysed("nullfield", &["-O1"], "nullfield.c", ACCESS_VIOLATION);
    let offset = printed(&case.stdout, "offset ");
    assert_ne!(offset, 0);
    assert_eq!(a["kind"], "null-pointer", "{a}");
    assert_eq!(hex(&a["evidence"]["offset"]), offset, "{a}");
    assert_eq!(a["evidence"]["access"], "read", "{a}");
    assert_eq!(a["evidence"]["function"], "refs_of", "{a}");
    let summary = a["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("read through a null pointer: NULL + {offset:#x}")),
        "{a}"
    );
}

/// A write to a string literal (mingw keeps them in `.rdata`, mapped read-only): a
/// protection fault at the literal's address, which the program printed.
#[test]
fn windows_write_to_a_string_literal_is_a_protection_fault() {
    let (case, a) = analysed("rodata", &["-O1"], "rodata.c", ACCESS_VIOLATION);
    assert_eq!(a["kind"], "protection-fault", "{a}");
    assert_eq!(
        hex(&a["evidence"]["address"]),
        printed(&case.stdout, "address "),
        "{a}"
    );
    assert_eq!(a["evidence"]["access"], "write", "{a}");
    assert_eq!(a["evidence"]["function"], "shout", "{a}");
    assert_eq!(a["evidence"]["module"], case.exe_name(), "{a}");
}

/// A call through a garbage function pointer (the source's 0x13370000): the pc lies
/// outside all code, and the frame that made the call is named.
#[test]
fn windows_call_through_a_garbage_pointer_is_a_bad_jump() {
    let (_case, a) = analysed("badjump", &["-O1"], "badjump.c", ACCESS_VIOLATION);
    assert_eq!(a["kind"], "bad-jump", "{a}");
    assert_eq!(a["evidence"]["pc"], "0x13370000", "{a}");
    assert_eq!(a["evidence"]["access"], "execute", "{a}");
    assert_eq!(a["evidence"]["caller"], "dispatch", "{a}");
}

/// EXCEPTION_INT_DIVIDE_BY_ZERO in `average`.
#[test]
fn windows_integer_division_by_zero() {
    let (_case, a) = analysed("divzero", &["-O1"], "divzero.c", 0xC000_0094);
    assert_eq!(a["kind"], "divide-by-zero", "{a}");
    assert_eq!(a["evidence"]["function"], "average", "{a}");
}

/// A fast fail, STATUS_STACK_BUFFER_OVERRUN with its code as the parameter (fastfail.c,
/// with `FAST_FAIL_CODE` winnt.h's FAST_FAIL_INVALID_ARG, whose value the program prints):
/// the code is read and named, and the frame that failed is the program's, past
/// kernelbase's `RaiseException`. (A real `__fastfail` runs no filter that could write the
/// dump.)
#[test]
fn windows_fast_fail_names_its_code() {
    let name = "FAST_FAIL_INVALID_ARG";
    let (case, a) = analysed(
        "fastfail",
        &["-O1", &format!("-DFAST_FAIL_CODE={name}")],
        "fastfail.c",
        0xC000_0409,
    );
    let code = case
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("code "))
        .unwrap_or_else(|| panic!("fastfail.exe printed no code: {:?}", case.stdout));
    assert_eq!(a["kind"], "abort", "{a}");
    assert_eq!(a["evidence"]["fast_fail_code"], code.trim(), "{a}");
    assert_eq!(a["evidence"]["fast_fail"], name, "{a}");
    assert_eq!(a["evidence"]["function"], "RaiseException", "{a}");
    assert_eq!(a["evidence"]["caller"], "check_length", "{a}");
    assert!(a["summary"].as_str().unwrap().contains(name), "{a}");
}

/// The codes only Windows raises (raise.c, `RaiseException`): the heap's corruption
/// check, an MSVC C++ exception and a breakpoint, each analysed with its exception and the
/// program's frame that raised it.
#[test]
fn windows_raised_exceptions_are_analysed() {
    for (code, kind, words) in [
        (0xC000_0374_u32, "abort", "heap corruption"),
        (0xE06D_7363, "abort", "C++ exception"),
        (0x8000_0003, "illegal-instruction", "breakpoint"),
    ] {
        let define = format!("-DRAISED={code:#x}");
        let (case, a) = analysed(
            &format!("analysed_{code:08x}"),
            &["-O1", &define],
            "raise.c",
            code,
        );
        assert_eq!(a["kind"], kind, "{a}");
        assert_eq!(
            a["evidence"]["exception"], case.report["crash"]["exception"]["name"],
            "{a}"
        );
        assert_eq!(a["evidence"]["caller"], "raise_it", "{a}");
        assert!(a["summary"].as_str().unwrap().contains(words), "{a}");
    }
}

/// A write through a non-canonical pointer (noncanon.c's 0x8000000000001000): Windows
/// reports no address (0xffffffffffffffff), and the decoded instruction gives it.
#[test]
fn windows_non_canonical_pointer_is_a_general_protection_fault() {
    let (_case, a) = analysed("noncanon", &["-O1"], "noncanon.c", ACCESS_VIOLATION);
    assert_eq!(a["kind"], "general-protection", "{a}");
    assert_eq!(a["evidence"]["address"], "0x8000000000001000", "{a}");
    assert_eq!(a["evidence"]["access"], "write", "{a}");
    assert_eq!(a["evidence"]["function"], "store", "{a}");
}

/// `STATUS_STACK_OVERFLOW`.
const STACK_OVERFLOW: u32 = 0xc000_00fd;

/// A stack overflow (the guard page), issue 20's case: overflow.c recurses on a thread of
/// its own until its 1 MiB stack runs out, some two thousand frames of `descend`; the
/// dump is written by another process (the thread that overflowed has no stack left to
/// write it), with the exception's context. The reference is the program's: the system's
/// own walk of the crashed thread over its live stack (`RtlVirtualUnwind`, rtl_walk.c,
/// every frame, pc and stack pointer), the exception's address, the return addresses of
/// `descend`'s calls and how deep it went; and winedbg's `bt` of the dump, which stops at
/// its own limit of 200 frames, inside the recursion.
///
/// Checked: every frame of the crashed thread equals the system's walk (pc and stack
/// pointer, as many); frame 0 is the exception's address in `descend`, the frames below
/// it are the calls of `descend` (as many as counted themselves) at the return address
/// of its call of itself, then `overflow_thread` at the first call's, each named as
/// addr2line names its pc; every caller found by `.pdata` (`cfi`), through the whole
/// recursion, and the same walk from dump_syms' `.sym` files; winedbg's frames are ours; the analysis says `stack-overflow` on that
/// thread, not on the main thread that waits. Then the same dump walked with a frame
/// budget smaller than the stack: the walk stops at the budget, and says so — the
/// thread's `end`, a `frames-cut` warning, and the analysis's depth a lower bound.
#[test]
fn windows_stack_overflow_in_deep_recursion() {
    let case = record_dying_of(
        "overflow",
        &["-O0"],
        &["overflow.c", "rtl_walk.c", "rtl_walk.h"],
        Build::Gcc,
        None,
        STACK_OVERFLOW,
    );
    let out = &case.stdout;
    let tid = printed(out, "tid ");
    let depth = usize::try_from(printed(out, "depth ")).unwrap();
    let counted = printed(out, "counted ");
    let into_descend = printed(out, "into_descend ");
    let into_caller = printed(out, "into_caller ");
    let fault_pc = printed(out, "exception_address ");
    let words: Vec<&str> = out
        .lines()
        .find_map(|l| l.strip_prefix("walk "))
        .unwrap_or_else(|| panic!("overflow.exe printed no walk: {out:?}"))
        .split_whitespace()
        .collect();
    let system = hex_pairs(&words[1..]);
    assert_eq!(
        system.len(),
        usize::from_str_radix(words[0], 16).unwrap(),
        "the program's walk"
    );
    // a frame 0 stopped in `descend`'s prologue did not count itself
    let recursion = depth + usize::from(fault_pc < counted);
    // the reference itself: two thousand calls or so (1 MiB, 400-byte buffers), the
    // system's walk through all of them, and addr2line's names of the three pcs
    assert!((1000..5000).contains(&depth), "depth {depth}");
    assert_eq!(
        system.len(),
        recursion + 3,
        "the system's walk: descend's frames, overflow_thread, BaseThreadInitThunk, \
         RtlUserThreadStart"
    );
    assert_eq!(
        case.program_names(&[fault_pc, into_descend, into_caller]),
        [
            Some(vec!["descend".to_owned()]),
            Some(vec!["descend".to_owned()]),
            Some(vec!["overflow_thread".to_owned()])
        ],
        "addr2line's names"
    );
    assert_eq!(case.dump.crashed_tid.map(u64::from), Some(tid));
    assert!(
        case.dump.threads.len() >= 2,
        "the dump holds the main thread too: {:?}",
        case.dump.threads
    );

    let thread = case.crashed_thread();
    let ours = physical_frames(thread);
    let pcs_sps = pcs_and_sps(thread);
    if let Some(i) = (0..pcs_sps.len().max(system.len())).find(|&i| pcs_sps.get(i) != system.get(i))
    {
        panic!(
            "frame {i} differs from the system's walk ({} frames ours, {} the system's): \
             ours {:x?}, the system's {:x?}",
            pcs_sps.len(),
            system.len(),
            pcs_sps.get(i),
            system.get(i)
        );
    }
    for (i, o) in ours.iter().enumerate() {
        let (pc, function) = match i {
            0 => (fault_pc, "descend"),
            i if i < recursion => (into_descend, "descend"),
            i if i == recursion => (into_caller, "overflow_thread"),
            _ => break,
        };
        assert_eq!(
            (o.pc, o.names()),
            (pc, vec![function.to_owned()]),
            "frame {i} of {}",
            ours.len()
        );
    }
    callers_from_pdata(&case, &ours);
    assert_eq!(thread["end"], "pc-zero", "as the system's walk ends");
    sym_walk_equals_image_walk(&case);
    // winedbg stops at 200 frames; its frames all share the recursion's return address,
    // which `parse_backtrace` takes for inlined calls: compared as they are
    assert!(case.winedbg.len() > 100 && case.winedbg.len() <= ours.len());
    for (i, w) in case.winedbg.iter().enumerate() {
        assert_eq!(ours[i].pc, w.pc, "frame {i}: winedbg's is {}", w.text);
    }

    let a = &case.report["crash"]["analysis"];
    assert_eq!(a["kind"], "stack-overflow", "{a}");
    assert_eq!(case.report["crash"]["tid"].as_u64(), Some(tid));
    assert_eq!(a["evidence"]["thread"], tid.to_string(), "{a}");
    assert_eq!(a["evidence"]["function"], "descend", "{a}");
    assert_eq!(a["evidence"]["recursing"], "descend", "{a}");
    assert_eq!(a["evidence"]["depth"], system.len().to_string(), "{a}");
    assert_eq!(hex(&a["evidence"]["sp"]), system[0].1, "{a}");
    assert!(a["evidence"].get("depth_cut").is_none(), "{a}");
    let summary = a["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("thread {tid} "))
            && summary.contains(&format!("{} frames deep", system.len())),
        "{a}"
    );
    for w in case.report["warnings"].as_array().unwrap() {
        assert!(
            !["frame-limit", "frames-cut", "report-cut"].contains(&w["code"].as_str().unwrap()),
            "the whole stack fits the default limits: {w}"
        );
    }

    // a frame budget of a third of the stack: the crashed thread, walked first, gets it
    // all, the main thread only its context frame; each says why it stopped
    let budget = system.len() / 3;
    let cut = walk_with(
        &case.minidump,
        &case.symbols,
        &["--max-total-frames", &budget.to_string()],
    );
    let thread = case.crashed_thread_of(&cut);
    assert_eq!(pcs_and_sps(thread), system[..budget], "the budget's frames");
    assert_eq!(thread["end"], "frame-limit");
    let warning = cut["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "frames-cut")
        .unwrap_or_else(|| panic!("no frames-cut warning: {}", cut["warnings"]));
    let says = |v: &Value, text: String| v.as_str().unwrap().contains(&text);
    assert!(
        says(&warning["message"], format!("at most {budget} frames")),
        "{warning}"
    );
    for t in cut["threads"].as_array().unwrap() {
        if t["tid"].as_u64() != Some(tid) {
            assert_eq!(t["frames"].as_array().unwrap().len(), 1, "{t}");
            assert_eq!(t["end"], "frame-limit", "{t}");
        }
    }
    let a = &cut["crash"]["analysis"];
    assert_eq!(a["kind"], "stack-overflow", "{a}");
    assert_eq!(a["evidence"]["recursing"], "descend", "{a}");
    assert_eq!(a["evidence"]["depth"], budget.to_string(), "{a}");
    assert_eq!(a["evidence"]["depth_cut"], "frame-limit", "{a}");
    assert!(
        says(&a["summary"], format!("at least {budget} frames deep")),
        "the analysis does not pass the budget's cut for the stack's depth: {a}"
    );
    let system_pcs: Vec<u64> = system.iter().map(|&(pc, _)| pc).collect();
    let (ours, _) = correct_frames_beside_minidump_stackwalk(&case, &system_pcs);
    assert_eq!(
        ours,
        system_pcs.len(),
        "the .sym walk is the system's whole"
    );
}

/// Two DLLs the process had unloaded: Windows paths, as Windows' dbghelp records them.
const UNLOADED: [(&str, u64, u32, u32); 2] = [
    (
        "C:\\windows\\system32\\version.dll",
        0x7ffb_1230_0000,
        0x1_2000,
        0x5f3c_1a2b,
    ),
    (
        "C:\\Program Files\\App\\plügin.dll",
        0x1_8000_0000,
        0x3000,
        0x6500_0001,
    ),
];

/// `minidump-stackwalk --json DUMP` and `postmortem-walk DUMP --format stackwalk-json`.
fn both_stackwalk_documents(dump: &Path) -> (Value, Value) {
    let theirs = std::process::Command::new("minidump-stackwalk")
        .arg("--json")
        .arg(dump)
        .output()
        .expect("run minidump-stackwalk (see test.sh)");
    assert!(
        theirs.status.success(),
        "minidump-stackwalk failed: {}",
        String::from_utf8_lossy(&theirs.stderr)
    );
    let walk_only = std::env::var_os("POSTMORTEM_WALK_BIN").map_or_else(
        || Path::new(env!("CARGO_BIN_EXE_postmortem")).with_file_name("postmortem-walk"),
        PathBuf::from,
    );
    let ours = std::process::Command::new(&walk_only)
        .arg(dump)
        .args(["--format", "stackwalk-json"])
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", walk_only.display()));
    assert!(
        ours.status.success(),
        "postmortem-walk failed: {}",
        String::from_utf8_lossy(&ours.stderr)
    );
    (
        serde_json::from_slice(&theirs.stdout).unwrap(),
        serde_json::from_slice(&ours.stdout).unwrap(),
    )
}

/// Each thread's id and `thread_name`, and each unloaded module's fields, of a
/// minidump-stackwalk document.
fn names_and_unloaded(doc: &Value) -> (Vec<(u64, Value)>, Vec<Value>) {
    let mut threads: Vec<(u64, Value)> = doc["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .map(|t| (t["thread_id"].as_u64().unwrap(), t["thread_name"].clone()))
        .collect();
    threads.sort_by_key(|t| t.0);
    let unloaded = doc["unloaded_modules"]
        .as_array()
        .expect("unloaded_modules");
    (threads, unloaded.clone())
}

/// threads.c's dump with a name for each of its threads (ids from the dump) and two
/// unloaded DLLs, in the streams Windows' dbghelp writes them in and wine's does not
/// (`windows::with_thread_names`, `windows::with_unloaded_modules`): the report's threads
/// carry those names, its unloaded modules are those DLLs; minidump-stackwalk reads the
/// same from the same file, and postmortem-walk's document equals its on those fields.
#[test]
fn windows_thread_names_and_unloaded_modules() {
    let case = record("thread_names", &["-O2"], "threads.c");
    let work = case.symbols.parent().unwrap();
    let names: Vec<(u32, String)> = case
        .dump
        .threads
        .iter()
        .enumerate()
        .map(|(i, &tid)| {
            let name = if Some(tid) == case.dump.crashed_tid {
                "main thread".to_owned()
            } else {
                format!("wörker {i}")
            };
            (tid, name)
        })
        .collect();
    let named: Vec<(u32, &str)> = names.iter().map(|(t, n)| (*t, n.as_str())).collect();
    let with_names = work.join("with-names.dmp");
    windows::with_thread_names(&case.minidump, &with_names, &named);
    let dump = work.join("with-names-and-unloaded.dmp");
    windows::with_unloaded_modules(&with_names, &dump, &UNLOADED);

    let report = walk(&dump, &case.symbols);
    assert_eq!(frame_rows(&report), frame_rows(&case.report));
    for (tid, name) in &names {
        let thread = report["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tid"] == *tid)
            .unwrap_or_else(|| panic!("no thread {tid}"));
        assert_eq!(thread["name"], name.as_str(), "thread {tid}");
    }
    let unloaded: Vec<(String, u64, u64)> = report["unloaded_modules"]
        .as_array()
        .expect("unloaded_modules")
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_owned(),
                hex(&m["base"]),
                hex(&m["end"]),
            )
        })
        .collect();
    let want: Vec<(String, u64, u64)> = UNLOADED
        .iter()
        .map(|(name, base, size, _)| {
            let file = name.rsplit('\\').next().unwrap().to_owned();
            (file, *base, base + u64::from(*size))
        })
        .collect();
    assert_eq!(unloaded, want, "{}", report["unloaded_modules"]);

    let (theirs, ours) = both_stackwalk_documents(&dump);
    let (their_threads, their_unloaded) = names_and_unloaded(&theirs);
    let mut named_by_dump: Vec<(u64, Value)> = names
        .iter()
        .map(|(t, n)| (u64::from(*t), Value::from(n.as_str())))
        .collect();
    named_by_dump.sort_by_key(|t| t.0);
    assert_eq!(their_threads, named_by_dump, "minidump-stackwalk's names");
    assert_eq!(
        their_unloaded.len(),
        UNLOADED.len(),
        "minidump-stackwalk's: {their_unloaded:?}"
    );
    for (m, (name, base, size, _)) in their_unloaded.iter().zip(UNLOADED) {
        assert_eq!(hex(&m["base_addr"]), base, "{m}");
        assert_eq!(hex(&m["end_addr"]), base + u64::from(size), "{m}");
        assert!(
            m["filename"]
                .as_str()
                .unwrap()
                .ends_with(name.rsplit('\\').next().unwrap()),
            "{m}"
        );
    }
    let (our_threads, our_unloaded) = names_and_unloaded(&ours);
    assert_eq!(our_threads, their_threads, "postmortem-walk's thread names");
    // field for field: the ranges, the Windows path as `filename`, and the code id
    // (TimeDateStamp and SizeOfImage)
    let fields = |m: &Value| {
        (
            m["base_addr"].clone(),
            m["end_addr"].clone(),
            m["filename"].clone(),
            m["code_id"].clone(),
        )
    };
    assert_eq!(
        our_unloaded.iter().map(fields).collect::<Vec<_>>(),
        their_unloaded.iter().map(fields).collect::<Vec<_>>(),
        "postmortem-walk's unloaded modules against minidump-stackwalk's"
    );
    // and the report keeps them: the path as the dump records it, the code id as
    // minidump-stackwalk gives it
    for (m, theirs) in report["unloaded_modules"]
        .as_array()
        .expect("unloaded_modules")
        .iter()
        .zip(&their_unloaded)
    {
        assert_eq!(m["path"], theirs["filename"], "{m}");
        assert_eq!(m["code_id"], theirs["code_id"], "{m}");
    }
}

/// Hostile streams: a thread name whose RVA is past the end of the file, and an
/// unloaded-module list claiming more entries than its stream holds. The walk succeeds,
/// with the names and modules that are there.
#[test]
fn windows_hostile_thread_names_and_unloaded_modules() {
    let case = record("thread_names_hostile", &["-O2"], "threads.c");
    let work = case.symbols.parent().unwrap();
    let (good, bad) = (case.dump.threads[0], case.dump.threads[1]);
    let with_names = work.join("hostile-names.dmp");
    windows::with_stream(
        &case.minidump,
        &with_names,
        windows::THREAD_NAMES_STREAM,
        |rva| {
            let mut list = 2u32.to_le_bytes().to_vec();
            list.extend_from_slice(&good.to_le_bytes());
            list.extend_from_slice(&(u64::from(rva) + 4 + 24).to_le_bytes());
            list.extend_from_slice(&bad.to_le_bytes());
            list.extend_from_slice(&(u64::from(rva) + (1 << 32)).to_le_bytes());
            let size = list.len();
            list.extend(windows::minidump_string("good"));
            (list, size)
        },
    );
    let dump = work.join("hostile.dmp");
    windows::with_stream(
        &with_names,
        &dump,
        windows::UNLOADED_MODULE_LIST_STREAM,
        |rva| {
            let mut list = Vec::new();
            for field in [12u32, 24, 1000] {
                list.extend_from_slice(&field.to_le_bytes());
            }
            let (name, base, size, stamp) = UNLOADED[0];
            list.extend_from_slice(&base.to_le_bytes());
            list.extend_from_slice(&size.to_le_bytes());
            list.extend_from_slice(&0u32.to_le_bytes());
            list.extend_from_slice(&stamp.to_le_bytes());
            list.extend_from_slice(&(rva + 12 + 24).to_le_bytes());
            let size = list.len();
            list.extend(windows::minidump_string(name));
            (list, size)
        },
    );
    let report = walk(&dump, &case.symbols);
    assert_eq!(frame_rows(&report), frame_rows(&case.report));
    let name_of = |tid: u32| {
        report["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tid"] == tid)
            .unwrap()["name"]
            .clone()
    };
    assert_eq!(name_of(good), "good", "{}", report["warnings"]);
    assert_eq!(name_of(bad), Value::Null);
    // the entry the stream holds, and a warning for the 999 it does not
    let (name, base, size, stamp) = UNLOADED[0];
    assert_eq!(
        report["unloaded_modules"],
        serde_json::json!([{
            "name": name.rsplit('\\').next().unwrap(),
            "path": name,
            "base": format!("{base:#x}"),
            "end": format!("{:#x}", base + u64::from(size)),
            "build_id": null,
            "debug_id": null,
            "code_id": format!("{stamp:08x}{size:x}"),
        }]),
        "{}",
        report["warnings"]
    );
    let warnings = report["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w["code"] == "truncated-dump"
            && w["message"]
                .as_str()
                .unwrap()
                .contains("says 1000 modules; 1 could")),
        "{}",
        report["warnings"]
    );
    assert!(
        warnings.iter().any(|w| w["code"] == "minidump-reader"
            && w["message"]
                .as_str()
                .unwrap()
                .contains(&format!("thread id {bad}"))),
        "{}",
        report["warnings"]
    );
    // minidump-stackwalk reads the same names, and drops the whole unloaded-module list
    let (theirs, ours) = both_stackwalk_documents(&dump);
    let (their_threads, their_unloaded) = names_and_unloaded(&theirs);
    let (our_threads, our_unloaded) = names_and_unloaded(&ours);
    assert_eq!(our_threads, their_threads);
    assert!(their_unloaded.is_empty(), "{their_unloaded:?}");
    assert_eq!(our_unloaded.len(), 1, "{our_unloaded:?}");
}

/// Issue 21 on Windows minidumps: `postmortem walk --json DUMP STORE` against
/// `minidump-stackwalk --json DUMP STORE` with the same Breakpad symbol store, field by
/// field as `postmortem_testsupport::stackwalk` lays down, and the `--human` texts the
/// same way. The store holds every module's `.sym` file (dump_syms of the program — from
/// its PDB for the clang builds —, of its DLLs and of wine's), and the dump the CodeView
/// records minidump-stackwalk needs to find them ([`windows::stackwalk_store`]). Where the
/// walks part, ours must be the reference's: winedbg's frames on the crashed thread, the
/// walk from the images' `.pdata` (which the other tests compare with winedbg) on the
/// others. Cases: C at -O0, and at -O2 linked with `--build-id` (a CodeView record naming
/// no PDB), clang with a PDB, inlined calls from a PDB, alloca/XMM/`qsort`, three
/// threads, a DLL of the program's, a C++ virtual call.
#[test]
fn windows_stackwalk_json_agrees_with_minidump_stackwalk() {
    let cases: Vec<Case> = vec![
        record("sw_c_o0", &["-O0"], "basic.c"),
        record("sw_c_o2_build_id", &["-O2", "-Wl,--build-id"], "basic.c"),
        record_sources("sw_pdb", &["-O1"], &["basic.c"], Build::ClangPdb, None),
        record_sources(
            "sw_pdb_inl",
            &["-O2"],
            &["inlined.c"],
            Build::ClangPdb,
            None,
        ),
        record("sw_unusual", &["-O2"], "unusual.c"),
        record("sw_threads", &["-O2"], "threads.c"),
        record_sources(
            "sw_plugin",
            &["-O2"],
            &["plugin_main.c"],
            Build::Gcc,
            Some(("plugin.c", "plugin.dll")),
        ),
        record("sw_cxx_virtual", &["-O2", CXX_STATIC], "virtual.cpp"),
    ];
    let mut totals = stackwalk::Differences::default();
    for case in &cases {
        let name = case.exe_name();
        let work = case.symbols.parent().unwrap();
        let sw = windows::stackwalk_store(&case.minidump, &module_images(case), work);
        let program_record = &sw
            .records
            .iter()
            .find(|(n, _)| n == name)
            .expect("the program's record")
            .1;
        if name.contains("build_id") {
            // mingw-w64's record: a GUID and no PDB name (dump_syms' MODULE line leaves
            // the name blank)
            assert_eq!(program_record.path, "", "{name}: {program_record:?}");
        }
        let os = std::ffi::OsStr::new;
        let (dump, store) = (sw.dump.as_os_str(), sw.store.as_os_str());
        let theirs: Value = serde_json::from_str(&stackwalk::run(
            Path::new("minidump-stackwalk"),
            &[os("--json"), dump, store],
        ))
        .unwrap();
        // minidump-stackwalk's own command line; the local files it never reads (the
        // dump's paths) turned off
        let local_off = [os("--no-dump-paths"), os("--no-system-debug")];
        let ours: Value = serde_json::from_str(&stackwalk::run(
            &postmortem(),
            &[&[os("walk"), os("--json"), dump, store][..], &local_off].concat(),
        ))
        .unwrap();
        // both found every module's .sym file
        for doc in [&theirs, &ours] {
            for m in doc["modules"].as_array().unwrap() {
                assert_eq!(m["corrupt_symbols"], false, "{name}: {m}");
                assert_eq!(m["missing_symbols"], false, "{name}: {m}");
            }
        }
        let crashed = u64::from(case.dump.crashed_tid.unwrap());
        let reference = |tid: u64| -> Option<stackwalk::Reference> {
            let t = case.thread(tid);
            let images_walk = physical_frames(t);
            let (pcs, stop): (Vec<u64>, String) = if tid == crashed {
                let pcs = case.winedbg.iter().filter(|f| !f.inlined).map(|f| f.pc);
                (pcs.collect(), "winedbg's outermost frame".to_owned())
            } else {
                let pcs = images_walk.iter().map(|f| f.pc);
                (pcs.collect(), format!("the images' walk: {}", t["end"]))
            };
            // names from the images' DWARF and PDBs, not from the .sym files
            let names = pcs
                .iter()
                .map(|pc: &u64| {
                    let f = images_walk.iter().find(|f| f.pc == *pc)?.entries.last()?;
                    Some((
                        f["function"].as_str()?.to_owned(),
                        f["file"].as_str().map(str::to_owned),
                        f["line"].as_u64(),
                    ))
                })
                .collect();
            Some(stackwalk::Reference {
                pcs,
                complete: true,
                stop,
                names,
            })
        };
        let d = stackwalk::assert_agree(name, &theirs, &ours, &reference);
        eprintln!("{name}: {d:?}");
        totals += &d;
        stackwalk::assert_human_text_agrees(
            name,
            (dump, store),
            (
                &postmortem(),
                &[&[os("walk"), os("--human"), dump, store][..], &local_off].concat(),
            ),
            &ours,
            &theirs,
        );
    }
    eprintln!("all cases: {totals:?}");
    assert!(totals.same_frames > 40, "{totals:?}");
}

/// The service finds a Windows module's `.sym` file by its `INFO CODE_ID` record: wine's
/// dump names no module by a debug id (no CodeView record), so the `.sym` files dump_syms
/// wrote of the program and of wine's DLLs, uploaded over the API (without a name: a
/// `.sym` file names its image), are found by the image name and code id the dump gives
/// each module. Every module is then walked and named from its `.sym` file, and the
/// crash's frames equal the CLI's with the same files under `--symbols`.
#[tokio::test]
async fn windows_sym_files_found_by_code_id_through_the_service() {
    let case = record("svc_sym", &["-O2"], "threads.c");
    let dir = sym_only(&case);
    let (_data, _server, base) = serve();
    let c = common::client();
    for sym in std::fs::read_dir(&dir).unwrap() {
        let sym = sym.unwrap().path();
        let r = c
            .post(format!("{base}/api/v1/binaries"))
            .body(std::fs::read(&sym).unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", sym.display());
        let body: Value = r.json().await.unwrap();
        let row = &body["binaries"][0];
        assert_eq!(row["format"], "breakpad", "{row}");
        // the image it describes, as dump_syms names it
        let image = sym.file_stem().unwrap().to_str().unwrap();
        assert_eq!(row["code_file"], image, "{row}");
        let module = case
            .dump
            .module(image)
            .unwrap_or_else(|| panic!("the dump lists no {image}"));
        let code_id = format!("{:08X}{:X}", module.time_date_stamp, module.size);
        assert_eq!(row["code_id"], code_id.as_str(), "{row}");
    }
    let dump = std::fs::read(&case.minidump).unwrap();
    let id = common::upload_crash(&c, &base, &dump).await;
    let done = common::poll_done(&c, &base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    let report = &done["report"];
    for m in report["modules"].as_array().unwrap() {
        assert_eq!(
            (&m["status"], &m["unwind"], &m["symbols"]),
            (
                &serde_json::json!("ok"),
                &serde_json::json!(["breakpad"]),
                &serde_json::json!(["breakpad"])
            ),
            "every module from its uploaded .sym file: {m}"
        );
    }
    let cli = walk(&case.minidump, &dir);
    let threads = |r: &Value| -> Vec<Vec<[Value; 5]>> {
        r["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| {
                        ["pc", "function", "trust", "unwind_source", "module"].map(|k| f[k].clone())
                    })
                    .collect()
            })
            .collect()
    };
    assert_eq!(
        threads(report),
        threads(&cli),
        "the service's frames are the CLI's"
    );
}

/// veh_fault.c: a fault inside a vectored exception handler. On x64 ntdll's
/// `KiUserExceptionDispatcher` has `.pdata` that describes its machine frame, so winedbg's
/// walk and ours both go through the dispatcher to `victim`, the frame the first fault
/// interrupted (the x86 walk reads the dispatcher's `CONTEXT` itself:
/// `windows_x86_minidump::windows_x86_fault_inside_a_vectored_exception_handler`).
#[test]
fn windows_fault_inside_a_vectored_exception_handler() {
    let case = record("x64_veh", &["-O0"], "veh_fault.c");
    check(&case, &["handler_fault", "on_exception", "victim", "main"]);
}
