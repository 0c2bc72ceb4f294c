//! Compares gdb's stacks with a report's, frame by frame, and draws the two side by side
//! when they differ.
//!
//! Per thread (matched by tid = LWP) the report must have the same frames as gdb, in the
//! same order: same pc, same function, same inline structure (`inlined: true` exactly
//! where gdb has an `INLINE_FRAME`), same file and line. Where gdb's walk ended because
//! the unwind rules say there is no caller, the report must end there too; where gdb gave
//! up on an error, only gdb's frames are compared and the report may have more.
//! Every legitimate difference between the two tools is handled in [`normalize`] and
//! nowhere else.

use std::fmt::Write as _;

use serde_json::Value;

use crate::gdb::{GdbCore, GdbFrame, GdbThread};

/// Where gdb ended on "previous frame identical to this frame (corrupt stack?)", it
/// had been unwinding garbage since the first physical frame that repeats its caller's pc:
/// what it shows after that repeat varies from run to run with whatever the stack held
/// (seen: an aarch64 thread interrupted in `read`, where gdb sometimes adds a data symbol,
/// `pipe_fds`, after a repeated `main`). Only the frames up to the repeat are gdb's answer.
fn trust_gdb_up_to_its_repeat(expected: &mut Vec<Frame>) {
    let repeat = expected
        .windows(2)
        .position(|w| !w[1].inlined && w[1].pc == w[0].pc);
    if let Some(i) = repeat {
        expected.truncate(i + 2);
    }
}

/// A frame in the form both sides are compared in.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub pc: u64,
    pub function: Option<String>,
    pub inlined: bool,
    /// gdb: a `TAILCALL_FRAME`, synthesized from `DW_TAG_call_site` records.
    pub tailcall: bool,
    pub file: Option<String>,
    /// gdb only: the file name as the debug info records it, before gdb resolves it
    /// against its source path (see [`same_file`]).
    pub recorded_file: Option<String>,
    pub line: Option<u64>,
    /// The frame's source line: gdb's as its `frame` command prints it, ours the
    /// report's `context_line`.
    pub source: Option<String>,
    /// Only for the table: gdb's frame type or our trust.
    pub note: String,
}

impl Frame {
    fn from_gdb(f: &GdbFrame) -> Frame {
        Frame {
            pc: f.pc,
            function: f.name.clone(),
            inlined: f.kind == "INLINE",
            tailcall: f.kind == "TAILCALL",
            file: f.fullname.clone().or_else(|| f.file.clone()),
            recorded_file: f.file.clone(),
            line: f.line,
            source: f.source_text.clone(),
            note: f.kind.to_lowercase(),
        }
    }

    fn from_report(f: &Value) -> Frame {
        let pc = f["pc"]
            .as_str()
            .and_then(parse_hex)
            .unwrap_or_else(|| panic!("frame without a hex pc: {f}"));
        Frame {
            pc,
            function: f["function"].as_str().map(str::to_owned),
            inlined: f["inlined"].as_bool().unwrap_or(false),
            tailcall: false,
            file: f["file"].as_str().map(str::to_owned),
            recorded_file: None,
            line: f["line"].as_u64(),
            source: f["context_line"].as_str().map(str::to_owned),
            note: f["trust"].as_str().unwrap_or("?").to_owned(),
        }
    }
}

pub fn parse_hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// The known, legitimate differences between gdb's frames and ours; applied to every
/// frame of both sides before they are compared. Returns None for a frame that is not
/// compared at all.
///
/// 1. gdb's `TAILCALL_FRAME`s are dropped. gdb synthesizes them from the callee's
///    `DW_TAG_call_site` records (e.g. `__pthread_kill_internal` between
///    `__pthread_kill_implementation` and `raise`); no return address on the stack
///    belongs to them, and the report format has no such frames.
/// 2. Rust function names are compared without generic arguments and closure/impl
///    disambiguators: gdb builds them from DWARF namespaces
///    (`std::rt::lang_start::{closure#0}<()>`, `core::ops::function::impls::{impl#2}::call_once<…>`),
///    a demangled legacy Rust symbol has neither (`std::rt::lang_start::{{closure}}`).
///    Both name the same function. C and C++ names are compared as they are.
/// 3. Paths are compared after lexical clean-up (`a/./b` → `a/b`, `a/../b` → `b`):
///    gdb's `fullname()` joins the compilation directory and the file name without
///    cleaning them (`./nptl/./nptl/pthread_kill.c`). Where the debug info records a
///    relative path, gdb's `fullname()` may resolve it to an unrelated file of the same
///    name in its working directory (libc's `assert/assert.c` became the test's own
///    `assert.c`), so the path as recorded (`symtab.filename`) counts as well.
/// 4. Empty path segments left by removing a turbofish (`begin_panic::<&str>::{closure}`
///    → `begin_panic::{closure}`) are dropped.
///
/// 5. A C++ function named from the symbol table alone (no debug info: the cross libc,
///    libstdc++) is printed by gdb with its demangled parameter list
///    (`__gnu_cxx::__verbose_terminate_handler()`); the report's names never have one.
///    The list is dropped from gdb's names of frames without a source file.
///
/// gdb's frame names need no other mapping: its Python `frame.name()` already gives the
/// signal trampoline's symbol (`__restore_rt`) rather than `<signal handler called>`,
/// and None where `bt` prints `??`, as the report's null.
pub fn normalize(frame: Frame, rust: bool) -> Option<Frame> {
    if frame.tailcall {
        return None;
    }
    let from_symbol_table = frame.file.is_none();
    Some(Frame {
        function: frame.function.map(|name| {
            if rust {
                rust_canonical_name(&name)
            } else if from_symbol_table {
                without_parameters(&name).to_owned()
            } else {
                name
            }
        }),
        file: frame.file.map(|file| clean_path(&file)),
        recorded_file: frame.recorded_file.map(|file| clean_path(&file)),
        ..frame
    })
}

/// `a::b::{closure#0}<T>::c<U, V>` → `a::b::{closure}::c`.
fn rust_canonical_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    let mut result = String::with_capacity(out.len());
    for segment in out.split("::").filter(|s| !s.is_empty()) {
        if !result.is_empty() {
            result.push_str("::");
        }
        let bare = segment.trim_matches(|c| c == '{' || c == '}');
        let kind = bare.split('#').next().unwrap_or(bare);
        if segment.starts_with('{')
            && matches!(kind, "closure" | "impl" | "closure_env" | "constant")
        {
            let _ = write!(result, "{{{kind}}}");
        } else {
            result.push_str(segment);
        }
    }
    result
}

/// `ns::f(int, char const*) const` → `ns::f`; `S::operator()(int)` → `S::operator()`;
/// a name without a parameter list is returned as it is.
fn without_parameters(name: &str) -> &str {
    let trimmed = name
        .trim_end_matches(" const")
        .trim_end_matches(" volatile");
    let trimmed = trimmed.trim_end_matches(['&', ' ']);
    if !trimmed.ends_with(')') {
        return name;
    }
    let mut depth = 0usize;
    for (i, c) in trimmed.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    let head = &trimmed[..i];
                    return if head.is_empty() || head.ends_with("operator") {
                        name
                    } else {
                        head
                    };
                }
            }
            _ => {}
        }
    }
    name
}

/// Removes `.` components and folds `x/..` lexically (no file system access).
fn clean_path(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Equal paths, or, where one side is relative (the compilation directory was relative,
/// as in Debian's libc), the relative one is a whole-component suffix of the other.
fn same_file(gdb: Option<&str>, ours: Option<&str>) -> bool {
    match (gdb, ours) {
        (None, None) => true,
        (Some(g), Some(o)) if g == o => true,
        (Some(g), Some(o)) => {
            let suffix = |long: &str, short: &str| {
                !short.starts_with('/') && long.ends_with(&format!("/{short}"))
            };
            suffix(g, o) || suffix(o, g)
        }
        _ => false,
    }
}

fn frames_match(g: &Frame, o: &Frame) -> bool {
    g.pc == o.pc
        && g.function == o.function
        && g.inlined == o.inlined
        && g.line == o.line
        && (same_file(g.file.as_deref(), o.file.as_deref())
            || (g.recorded_file.is_some()
                && same_file(g.recorded_file.as_deref(), o.file.as_deref())))
}

/// Is this thread's code Rust? Decided from gdb's view: any frame from a `.rs` file.
fn is_rust(thread: &GdbThread) -> bool {
    thread
        .frames
        .iter()
        .any(|f| f.file.as_deref().is_some_and(|file| file.ends_with(".rs")))
}

/// The x86_64 kernel's "restart this system call" codes (`-ERESTARTSYS`,
/// `-ERESTARTNOINTR`, `-ERESTARTNOHAND`, `-ERESTART_RESTARTBLOCK`) as `rax` holds them.
const SYSCALL_RESTART_CODES: [u64; 4] = [
    512u64.wrapping_neg(),
    513u64.wrapping_neg(),
    514u64.wrapping_neg(),
    516u64.wrapping_neg(),
];

/// A thread blocked in a system call is stopped twice when a crash is recorded: by the
/// minidump writer's ptrace attach, and by the kernel writing the core. Stopped by ptrace
/// inside the call, its registers show `rip` just past the 2-byte `syscall` with `rax` a
/// restart code; the kernel then restarts the call (`rip -= 2`) before the core is
/// written, so gdb's frame 0 is at the `syscall` itself. Both are true pictures of the
/// thread, taken at different moments — which one the minidump gets is a race (seen once
/// in CI on a thread in `futex_wait`). Only that exact case is undone here: `rax` a
/// restart code and gdb's pc 2 below ours; the frames at that pc (the function and its
/// inlined callees) then take gdb's pc, everything else is compared as it is.
fn rewind_interrupted_syscall(ours: &Value, gdb_pc: u64, actual: &mut [Frame]) {
    let register = |name: &str| ours["registers"][name].as_str().and_then(parse_hex);
    let (Some(rax), Some(rip)) = (register("rax"), register("rip")) else {
        return;
    };
    if !restarted_syscall(rax, rip, gdb_pc) {
        return;
    }
    for frame in actual.iter_mut().take_while(|f| f.pc == rip) {
        frame.pc = gdb_pc;
    }
}

/// Whether a thread the minidump shows at `rip` with `rax` and the core at `core_pc` is the
/// one thread seen on both sides of a system call's restart ([`rewind_interrupted_syscall`]):
/// `rax` a restart code, and the core's pc the `syscall` instruction 2 bytes below.
pub fn restarted_syscall(rax: u64, rip: u64, core_pc: u64) -> bool {
    SYSCALL_RESTART_CODES.contains(&rax) && rip.checked_sub(2) == Some(core_pc)
}

/// Compares every thread of `gdb` with `report`; panics with side-by-side tables of all
/// threads that differ.
/// gdb's frames of a thread and the report's, normalized, in the order they are compared.
fn compared_frames(gdb_thread: &GdbThread, ours: &Value) -> (Vec<Frame>, Vec<Frame>) {
    let rust = is_rust(gdb_thread);
    let mut expected: Vec<Frame> = gdb_thread
        .frames
        .iter()
        .filter_map(|f| normalize(Frame::from_gdb(f), rust))
        .collect();
    if !gdb_thread.complete && gdb_thread.stop.contains("identical") {
        trust_gdb_up_to_its_repeat(&mut expected);
    }
    let mut actual: Vec<Frame> = ours["frames"]
        .as_array()
        .expect("frames array")
        .iter()
        .filter_map(|f| normalize(Frame::from_report(f), rust))
        .collect();
    if let Some(first) = expected.first() {
        rewind_interrupted_syscall(ours, first.pc, &mut actual);
    }
    (expected, actual)
}

/// Each gdb thread the report has too (by tid): gdb's, ours, and both sides' frames as
/// [`compared_frames`] gives them.
fn paired_threads<'g, 'r>(
    gdb: &'g GdbCore,
    report: &'r Value,
) -> Vec<(&'g GdbThread, &'r Value, Vec<Frame>, Vec<Frame>)> {
    let threads = report["threads"].as_array().expect("threads array");
    gdb.threads
        .iter()
        .filter_map(|gdb_thread| {
            let ours = threads
                .iter()
                .find(|t| t["tid"].as_u64() == Some(gdb_thread.lwp))?;
            let (expected, actual) = compared_frames(gdb_thread, ours);
            Some((gdb_thread, ours, expected, actual))
        })
        .collect()
}

/// Asserts that every frame for which gdb prints a source line (its `frame N` command's
/// `LINE<tab>TEXT`) has that text as its `context_line`, frame for frame as
/// [`assert_same_stacks`] pairs them (which must pass first). Returns how many frames
/// were compared, so that a caller can require some.
pub fn assert_same_source_lines(gdb: &GdbCore, report: &Value) -> usize {
    let mut problems = String::new();
    let mut compared = 0;
    for (gdb_thread, _, expected, actual) in paired_threads(gdb, report) {
        for (i, (g, o)) in expected.iter().zip(&actual).enumerate() {
            let Some(text) = &g.source else { continue };
            // gdb may have read another file: a relative path resolved against its
            // working directory (see `normalize`, 3); ours reads only the recorded path
            if g.file != o.file {
                continue;
            }
            compared += 1;
            if o.source.as_ref() != Some(text) {
                let _ = writeln!(
                    problems,
                    "thread {} frame {i} ({}:{}): gdb prints {text:?}, context_line is {:?}",
                    gdb_thread.lwp,
                    g.file.as_deref().unwrap_or("?"),
                    g.line.unwrap_or(0),
                    o.source
                );
            }
        }
    }
    assert!(
        problems.is_empty(),
        "source lines differ from gdb's:\n{problems}"
    );
    compared
}

pub fn assert_same_stacks(gdb: &GdbCore, report: &Value) {
    let threads = report["threads"].as_array().expect("threads array");
    let mut problems = String::new();

    let mut our_tids: Vec<u64> = threads.iter().filter_map(|t| t["tid"].as_u64()).collect();
    let mut gdb_tids: Vec<u64> = gdb.threads.iter().map(|t| t.lwp).collect();
    our_tids.sort_unstable();
    gdb_tids.sort_unstable();
    if our_tids != gdb_tids {
        let _ = writeln!(
            problems,
            "thread ids differ: gdb {gdb_tids:?}, ours {our_tids:?}"
        );
    }

    for (gdb_thread, ours, expected, actual) in paired_threads(gdb, report) {
        let count_ok = if gdb_thread.complete {
            actual.len() == expected.len()
        } else {
            actual.len() >= expected.len()
        };
        let frames_ok = expected
            .iter()
            .zip(&actual)
            .all(|(g, o)| frames_match(g, o));
        if !(count_ok && frames_ok) {
            let _ = writeln!(
                problems,
                "\nthread {} differs: gdb has {} frames (stopped: {}{}), ours {} (end: {})",
                gdb_thread.lwp,
                expected.len(),
                gdb_thread.stop,
                if gdb_thread.complete {
                    ""
                } else {
                    ", so ours may have more"
                },
                actual.len(),
                ours["end"].as_str().unwrap_or("?")
            );
            problems.push_str(&side_by_side(&expected, &actual));
        }
    }
    assert!(
        problems.is_empty(),
        "postmortem and gdb disagree:\n{problems}"
    );
}

fn describe(f: &Frame) -> String {
    let name = f.function.as_deref().unwrap_or("??");
    let inline = if f.inlined { " [inlined]" } else { "" };
    let location = match (&f.file, f.line) {
        (Some(file), Some(line)) => format!(" at {}:{line}", short_path(file)),
        (Some(file), None) => format!(" at {}", short_path(file)),
        _ => String::new(),
    };
    format!("{:#x} {name}{inline}{location} ({})", f.pc, f.note)
}

/// The last two components: enough to tell files apart in a table.
fn short_path(path: &str) -> &str {
    match path.rmatch_indices('/').nth(1) {
        Some((i, _)) => &path[i + 1..],
        None => path,
    }
}

/// Both stacks in two columns, a `<<` on each row that differs.
fn side_by_side(gdb: &[Frame], ours: &[Frame]) -> String {
    let rows = gdb.len().max(ours.len());
    let left: Vec<String> = gdb.iter().map(describe).collect();
    let width = left
        .iter()
        .map(String::len)
        .max()
        .unwrap_or(0)
        .clamp(10, 90);
    let mut out = format!("  #   {:<width$} | ours\n", "gdb");
    for i in 0..rows {
        let l = left.get(i).map(String::as_str).unwrap_or("-");
        let r = ours.get(i).map(describe).unwrap_or_else(|| "-".to_owned());
        let differs = match (gdb.get(i), ours.get(i)) {
            (Some(g), Some(o)) => !frames_match(g, o),
            _ => true,
        };
        let mark = if differs { "  <<" } else { "" };
        let _ = writeln!(out, "  {i:<3} {l:<width$} | {r}{mark}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_names_lose_generics_and_disambiguators() {
        assert_eq!(
            rust_canonical_name("std::rt::lang_start::{closure#0}<()>"),
            "std::rt::lang_start::{closure}"
        );
        assert_eq!(
            rust_canonical_name("std::rt::lang_start::{{closure}}"),
            "std::rt::lang_start::{closure}"
        );
        assert_eq!(
            rust_canonical_name("core::ops::function::impls::{impl#2}::call_once<(), (dyn core::ops::function::Fn<(), Output=i32>)>"),
            "core::ops::function::impls::{impl}::call_once"
        );
        assert_eq!(
            rust_canonical_name("rust_panic::validate"),
            "rust_panic::validate"
        );
    }

    #[test]
    fn symbol_table_names_lose_their_parameter_list() {
        assert_eq!(
            without_parameters("__gnu_cxx::__verbose_terminate_handler()"),
            "__gnu_cxx::__verbose_terminate_handler"
        );
        assert_eq!(
            without_parameters("std::string::size(char const*) const"),
            "std::string::size"
        );
        assert_eq!(
            without_parameters("Fn::operator()(std::pair<int, int>) &&"),
            "Fn::operator()"
        );
        assert_eq!(without_parameters("operator()"), "operator()");
        assert_eq!(without_parameters("raise"), "raise");
        assert_eq!(without_parameters("__libc_start_main"), "__libc_start_main");
    }

    #[test]
    fn paths_are_cleaned_and_relative_ones_match_as_suffixes() {
        assert_eq!(
            clean_path("./nptl/./nptl/pthread_kill.c"),
            "nptl/nptl/pthread_kill.c"
        );
        assert_eq!(
            clean_path("./signal/../sysdeps/posix/raise.c"),
            "sysdeps/posix/raise.c"
        );
        assert_eq!(clean_path("/tmp/x/../a.c"), "/tmp/a.c");
        assert!(same_file(
            Some("nptl/pthread_kill.c"),
            Some("/build/nptl/pthread_kill.c")
        ));
        assert!(!same_file(
            Some("ptl/pthread_kill.c"),
            Some("/build/nptl/pthread_kill.c")
        ));
        assert!(!same_file(Some("/a/b.c"), Some("/c/b.c")));
        assert!(!same_file(Some("/a/b.c"), None));
    }
}

#[cfg(test)]
mod comparison_tests {
    //! The comparison itself must be able to fail: a synthetic gdb view against
    //! hand-written reports.

    use serde_json::json;

    use super::assert_same_stacks;
    use crate::gdb::{GdbCore, GdbFrame, GdbThread};

    fn frame(pc: u64, name: &str, kind: &str, line: u64) -> GdbFrame {
        GdbFrame {
            pc,
            name: Some(name.to_owned()),
            kind: kind.to_owned(),
            file: Some("a.c".to_owned()),
            fullname: Some("/src/a.c".to_owned()),
            line: Some(line),
            source_text: None,
        }
    }

    fn gdb() -> GdbCore {
        GdbCore {
            crashed_lwp: Some(7),
            signal: Some(11),
            threads: vec![GdbThread {
                lwp: 7,
                frames: vec![
                    frame(0x1010, "leaf", "INLINE", 3),
                    frame(0x1010, "outer", "NORMAL", 9),
                    frame(0x2000, "tail", "TAILCALL", 12),
                    frame(0x3004, "main", "NORMAL", 20),
                ],
                complete: true,
                stop: "outermost".to_owned(),
            }],
            solibs: Vec::new(),
        }
    }

    fn ours(frames: serde_json::Value) -> serde_json::Value {
        json!({ "threads": [ { "tid": 7, "end": "outermost", "frames": frames } ] })
    }

    fn f(pc: &str, function: &str, inlined: bool, line: u64) -> serde_json::Value {
        json!({ "pc": pc, "function": function, "inlined": inlined, "file": "/src/a.c", "line": line, "trust": "cfi" })
    }

    fn fails(report: serde_json::Value) -> bool {
        std::panic::catch_unwind(|| assert_same_stacks(&gdb(), &report)).is_err()
    }

    #[test]
    fn equal_stacks_pass_and_tailcall_frames_are_skipped() {
        assert!(!fails(ours(json!([
            f("0x1010", "leaf", true, 3),
            f("0x1010", "outer", false, 9),
            f("0x3004", "main", false, 20)
        ]))));
    }

    #[test]
    fn any_difference_fails() {
        let wrong_pc = ours(json!([
            f("0x1010", "leaf", true, 3),
            f("0x1010", "outer", false, 9),
            f("0x3005", "main", false, 20)
        ]));
        let wrong_name = ours(json!([
            f("0x1010", "leaf", true, 3),
            f("0x1010", "outr", false, 9),
            f("0x3004", "main", false, 20)
        ]));
        let not_inlined = ours(json!([
            f("0x1010", "leaf", false, 3),
            f("0x1010", "outer", false, 9),
            f("0x3004", "main", false, 20)
        ]));
        let wrong_line = ours(json!([
            f("0x1010", "leaf", true, 4),
            f("0x1010", "outer", false, 9),
            f("0x3004", "main", false, 20)
        ]));
        let extra = ours(json!([
            f("0x1010", "leaf", true, 3),
            f("0x1010", "outer", false, 9),
            f("0x3004", "main", false, 20),
            f("0x4000", "beyond", false, 1)
        ]));
        let missing = ours(json!([
            f("0x1010", "leaf", true, 3),
            f("0x1010", "outer", false, 9)
        ]));
        for (what, report) in [
            ("pc", wrong_pc),
            ("name", wrong_name),
            ("inlined", not_inlined),
            ("line", wrong_line),
            ("extra frame", extra),
            ("missing frame", missing),
        ] {
            assert!(fails(report), "a wrong {what} passed");
        }
        assert!(fails(json!({ "threads": [] })), "a missing thread passed");
    }

    /// A thread the minidump writer stopped inside a system call (`rip` past the
    /// `syscall`, `rax` = -ERESTARTSYS) matches gdb's core, written after the restart;
    /// any other `rax`, or another distance, is still a difference.
    #[test]
    fn a_syscall_interrupted_before_its_restart_matches_the_restarted_one() {
        let with = |rax: &str, rip: &str| {
            json!({ "threads": [ { "tid": 7, "end": "outermost",
                "registers": { "rax": rax, "rip": rip },
                "frames": [
                    f(rip, "leaf", true, 3),
                    f(rip, "outer", false, 9),
                    f("0x3004", "main", false, 20)
                ] } ] })
        };
        assert!(!fails(with("0xfffffffffffffe00", "0x1012")));
        assert!(!fails(with("0xfffffffffffffdfc", "0x1012")));
        assert!(fails(with("0x0", "0x1012")), "no restart code");
        assert!(
            fails(with("0xfffffffffffffe00", "0x1013")),
            "not 2 bytes past"
        );
        assert!(fails(with("0xfffffffffffffe00", "0x1011")), "1 byte past");
    }
}

/// The report's module list equals gdb's `info sharedlibrary` plus the executable and the
/// vdso: the same libraries (by the file each path names, so `/lib` and `/usr/lib` spellings
/// of one file agree), none listed twice, exactly one main executable.
pub fn assert_same_modules(gdb: &GdbCore, report: &Value) {
    let name_of = |path: &str| {
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.into());
        real.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let modules = report["modules"].as_array().expect("modules array");
    let mains = modules.iter().filter(|m| m["main"] == true).count();
    assert_eq!(mains, 1, "one main executable: {modules:#?}");
    let mut ours: Vec<String> = modules
        .iter()
        .filter(|m| m["main"] != true && m["name"] != "linux-vdso.so.1")
        .map(|m| {
            name_of(
                m["path"]
                    .as_str()
                    .unwrap_or_else(|| m["name"].as_str().unwrap_or("")),
            )
        })
        .collect();
    let mut theirs: Vec<String> = gdb.solibs.iter().map(|p| name_of(p)).collect();
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs, "modules: ours vs gdb's info sharedlibrary");
}
