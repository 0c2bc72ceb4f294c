//! Breakpad's microdumps (issue 39: real Android arm and arm64 crashes other projects
//! wrote), walked as a user would (`postmortem-walk DUMP --symbols-path STORE`) and
//! compared with Breakpad's own statement of the right walk.
//!
//! The dumps, symbols and expected walks are google/breakpad's `src/processor/testdata/`
//! (`microdump-*.dmp`, `symbols/microdump/`, `microdump.stackwalk-{arm,arm64}.out` and
//! `microdump.stackwalk.machine_readable-{arm,arm64}.out`, which its
//! `microdump_stackwalk_test` compares `microdump_stackwalk` with); they are other
//! people's files and not in the repository: the test reads the directory in
//! `POSTMORTEM_BREAKPAD_TESTDATA` and says it was skipped without it. For arm and arm64,
//! every frame Breakpad expects is checked (module, function, file, line, the frame's pc
//! and sp, a frame without a function by its module offset) and no frame may follow its
//! last. For the other microdumps Breakpad's `microdump_processor_unittest.cc` asserts
//! module counts, the crash reason and address and frame counts: those are checked (the
//! frame counts of dumps walked without symbols are Breakpad's stack scanning, printed
//! beside ours, not asserted). minidump-stackwalk does not read microdumps, so there is
//! no third walk to compare with.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn testdata() -> Option<PathBuf> {
    match std::env::var_os("POSTMORTEM_BREAKPAD_TESTDATA") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            eprintln!(
                "skipped: POSTMORTEM_BREAKPAD_TESTDATA is not set (google/breakpad's \
                 src/processor/testdata, for its microdumps)"
            );
            None
        }
    }
}

/// Our report of `dump`, walked with Breakpad's microdump symbol store.
fn walk(dir: &Path, dump: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_postmortem-walk"))
        .arg(dir.join(dump))
        .arg("--symbols-path")
        .arg(dir.join("symbols/microdump"))
        .args(["--no-dump-paths", "--no-system-debug", "--format", "json"])
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{dump}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// One frame as Breakpad's expected outputs give it.
#[derive(Debug, Default)]
struct Want {
    module: String,
    function: String,
    file: String,
    line: Option<u64>,
    /// The machine-readable offset: from the line (or function, or module) to the frame's
    /// instruction (a caller's return address less one instruction: 2 on arm, 4 on arm64).
    offset: u64,
    pc: Option<u64>,
    sp: Option<u64>,
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

/// The crashed thread's frames from the machine-readable output (`0|N|module|function|
/// file|line|offset`), with each frame's `pc` and `sp` from the human-readable one.
fn expected(dir: &Path, arch: &str) -> Vec<Want> {
    let machine = std::fs::read_to_string(
        dir.join(format!("microdump.stackwalk.machine_readable-{arch}.out")),
    )
    .unwrap();
    let mut frames: Vec<Want> = machine
        .lines()
        .filter(|l| l.starts_with("0|"))
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            Want {
                module: f[2].into(),
                function: f[3].into(),
                file: f[4].into(),
                line: f[5].parse().ok(),
                offset: hex(f[6]).unwrap(),
                ..Want::default()
            }
        })
        .collect();
    let human =
        std::fs::read_to_string(dir.join(format!("microdump.stackwalk-{arch}.out"))).unwrap();
    let mut at: Option<usize> = None;
    for line in human.lines() {
        let t = line.trim_start();
        if let Some(n) = t.split_whitespace().next().and_then(|n| n.parse().ok()) {
            if line.starts_with(' ') && !t.contains(" = ") {
                at = Some(n);
                continue;
            }
        }
        let Some(f) = at.and_then(|n| frames.get_mut(n)) else {
            continue;
        };
        let words: Vec<&str> = t.split_whitespace().collect();
        for w in words.windows(3) {
            match (w[0], w[1]) {
                ("pc", "=") => f.pc = hex(w[2]),
                ("sp", "=") => f.sp = hex(w[2]),
                _ => {}
            }
        }
    }
    frames
}

/// The crashed thread's frames of our report (inlined entries left out: Breakpad's
/// outputs of these dumps list none).
fn ours(report: &Value) -> Vec<Value> {
    let threads = report["threads"].as_array().unwrap();
    let crashed = threads.iter().find(|t| t["crashed"] == true).unwrap();
    crashed["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["inlined"] != true)
        .cloned()
        .collect()
}

/// What differs between Breakpad's expected frame `w` and ours, `o`, frame `i`. `step`
/// is what Breakpad takes from a caller's return address for its instruction (2 on arm,
/// 4 on arm64). On arm Breakpad keeps a Thumb return address's low bit in a caller's pc,
/// where ours is the instruction's address (docs/arm.md, as gdb shows it): there a
/// caller's pc and module offset are compared with bit 0 cleared.
fn compare(i: usize, w: &Want, o: &Value, step: u64, failures: &mut Vec<String>) {
    let thumb = if step == 2 && i > 0 { !1 } else { !0 };
    let mut check = |what: &str, want: String, got: String| {
        if want != got {
            failures.push(format!("frame {i} {what}: Breakpad {want}, ours {got}"));
        }
    };
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    check("module", w.module.clone(), text(&o["module"]));
    check("function", w.function.clone(), text(&o["function"]));
    check("file", w.file.clone(), text(&o["file"]));
    check(
        "line",
        format!("{:?}", w.line),
        format!("{:?}", o["line"].as_u64()),
    );
    let pc = o["pc"].as_str().and_then(hex);
    check(
        "pc",
        format!("{:x?}", w.pc.map(|p| p & thumb)),
        format!("{pc:x?}"),
    );
    let sp = o["sp"].as_str().and_then(hex);
    check("sp", format!("{:x?}", w.sp), format!("{sp:x?}"));
    if w.function.is_empty() {
        // no function: the offset is the instruction's in its module
        let instruction =
            o["module_offset"]
                .as_str()
                .and_then(hex)
                .map(|m| if i == 0 { m } else { m - step });
        check(
            "module offset",
            format!("{:#x}", w.offset & thumb),
            instruction.map_or("none".into(), |v| format!("{v:#x}")),
        );
    }
}

/// A frame past Breakpad's list that is known and why: only that one frame (by its
/// trust, module and pc) is excused; any other frame past the list fails the test.
struct KnownExtra {
    arch: &'static str,
    trust: &'static str,
    module: &'static str,
    pc: u64,
    why: &'static str,
}

const KNOWN_EXTRA: &[KnownExtra] = &[KnownExtra {
    arch: "arm64",
    trust: "fp",
    module: "breakpad_unittests",
    pc: 0x55_5f62_b504,
    why: "libc's __libc_init (no symbols) keeps a frame record at its fp (0x7fe2ba7c20): \
          saved fp 0x7fe2ba7c50, return address 0x555f62b504, in the executable's crt code \
          (`_start_main`, between the .sym's functions: crtbegin has no debug \
          information); the record it points to (saved fp 0, a return into the linker) ends \
          the chain. Breakpad's arm64 frame-pointer step takes the callee's lr register, \
          which the CFI step before did not recover (0), so it ends at libc",
}];

#[test]
fn arm_and_arm64_microdumps_walk_as_breakpad_expects() {
    let Some(dir) = testdata() else { return };
    let mut failures = Vec::new();
    for (arch, step) in [("arm", 2), ("arm64", 4)] {
        let want = expected(&dir, arch);
        assert!(
            want.len() > 5,
            "{arch}: Breakpad's expected frames were not read"
        );
        let report = walk(&dir, &format!("microdump-{arch}.dmp"));
        assert_eq!(report["dump"]["format"], "microdump");
        let got = ours(&report);
        eprintln!(
            "microdump-{arch}: Breakpad expects {} frames; ours {}",
            want.len(),
            got.len()
        );
        for (i, (w, o)) in want.iter().zip(&got).enumerate() {
            let before = failures.len();
            compare(i, w, o, step, &mut failures);
            for f in &mut failures[before..] {
                *f = format!("microdump-{arch}: {f}");
            }
        }
        let extra: Vec<&Value> = got.iter().skip(want.len()).collect();
        let known = KNOWN_EXTRA.iter().find(|k| k.arch == arch);
        let excused = known.is_some_and(|k| {
            extra.len() == 1
                && extra[0]["trust"] == k.trust
                && extra[0]["module"] == k.module
                && extra[0]["pc"].as_str().and_then(hex) == Some(k.pc)
        });
        if excused {
            eprintln!(
                "microdump-{arch}: KNOWN EXTRA frame past Breakpad's list: {}",
                known.map_or("", |k| k.why)
            );
        } else if got.len() != want.len() {
            failures.push(format!(
                "microdump-{arch}: {} frames, Breakpad {} (last of ours: {} {})",
                got.len(),
                want.len(),
                got.last().map_or(Value::Null, |f| f["module"].clone()),
                got.last().map_or(Value::Null, |f| f["pc"].clone()),
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What Breakpad's `microdump_processor_unittest.cc` asserts of each of its microdumps:
/// the module count, and where it says, the frame count, frame 0's module and the crash
/// reason and address. `None` where it asserts nothing.
struct Asserted {
    dump: &'static str,
    modules: usize,
    frames: usize,
    /// Whether Breakpad walked it with symbols (its frame count is then asserted here).
    symbols: bool,
    first_module: Option<&'static str>,
    crash: Option<(&'static str, &'static str)>,
}

const ASSERTED: &[Asserted] = &[
    Asserted {
        dump: "microdump-arm.dmp",
        modules: 6,
        frames: 8,
        symbols: true,
        first_module: Some("breakpad_unittests"),
        crash: None,
    },
    Asserted {
        dump: "microdump-arm64.dmp",
        modules: 8,
        frames: 9,
        symbols: true,
        first_module: Some("breakpad_unittests"),
        crash: None,
    },
    Asserted {
        dump: "microdump-x86.dmp",
        modules: 124,
        frames: 17,
        symbols: false,
        first_module: Some("libc.so"),
        crash: None,
    },
    Asserted {
        dump: "microdump-multiple.dmp",
        modules: 156,
        frames: 5,
        symbols: false,
        first_module: None,
        crash: None,
    },
    Asserted {
        dump: "microdump-withcrashreason.dmp",
        modules: 0,
        frames: 0,
        symbols: false,
        first_module: None,
        crash: Some(("SIGTRAP", "0x4a7cb000")),
    },
];

#[test]
fn other_microdumps_read_as_breakpads_tests_assert() {
    let Some(dir) = testdata() else { return };
    let mut failures = Vec::new();
    for a in ASSERTED {
        let report = walk(&dir, a.dump);
        let got = ours(&report);
        let modules = report["modules"].as_array().map_or(0, Vec::len);
        eprintln!(
            "{}: modules {modules} (Breakpad {}), frames {} (Breakpad {}{})",
            a.dump,
            a.modules,
            got.len(),
            a.frames,
            if a.symbols {
                ""
            } else {
                ", by scanning without symbols: not asserted"
            }
        );
        if a.modules != 0 && modules != a.modules {
            failures.push(format!(
                "{}: {modules} modules, Breakpad {}",
                a.dump, a.modules
            ));
        }
        let known = usize::from(a.dump == "microdump-arm64.dmp");
        if a.symbols && got.len() != a.frames + known {
            failures.push(format!(
                "{}: {} frames, Breakpad {}",
                a.dump,
                got.len(),
                a.frames
            ));
        }
        if let Some(m) = a.first_module {
            if got.first().map(|f| &f["module"]) != Some(&Value::from(m)) {
                failures.push(format!("{}: frame 0 not in {m}", a.dump));
            }
        }
        if let Some((signal, address)) = a.crash {
            let crash = &report["crash"];
            if crash["signal_name"] != signal || crash["address"] != address {
                failures.push(format!(
                    "{}: crash {crash}, Breakpad {signal} at {address}",
                    a.dump
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
