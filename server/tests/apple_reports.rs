//! Apple's own crash reports (`.ips` JSON and `.crash` text) of our own Mach-O builds —
//! macOS arm64 and x86_64, iOS arm64, built with clang, ld64.lld and dsymutil — walked by
//! `postmortem walk X --symbols DIR` and uploaded to `postmortem serve`: every frame
//! (inlined ones included) is checked against `llvm-symbolizer --inlining` on the same
//! dSYM's DWARF file at the same address (frame 0 at its pc, callers at their return
//! address − 1, as llvm-symbolizer and lldb look callers up), and the crash against the
//! exception the report names, as Apple names it.
//!
//! The crash points come from the build itself (`llvm-objdump` and `llvm-symbolizer`):
//! frame 0 is the instruction of the inlined store in `leaf`, the callers the return
//! addresses after the calls to `leaf` and `middle`. Skipped, saying so, where clang,
//! ld64.lld or dsymutil are not installed (test.sh installs them: clang, lld, llvm).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

const SOURCE: &str = r#"volatile int *volatile target;
static inline __attribute__((always_inline)) int store(int v) { *target = v; return v + 1; }
__attribute__((noinline)) int leaf(int v) { return store(v) * 3; }
__attribute__((noinline)) int middle(int v) { return leaf(v + 1) + 7; }
int main(void) { return middle(4) + 1; }
"#;

/// Where the image is loaded in the made-up crashed process.
const LOAD: u64 = 0x1_04c8_c000;
/// A system image the reports list without files: dyld, whose frame the report names.
const DYLD_LOAD: u64 = 0x1_1bea_f000;
const DYLD_UUID: &str = "b70ce1ec-b902-3852-8268-05de00bfa8d5";

/// One build and the crash points taken from it.
struct Build {
    target: &'static str,
    name: String,
    /// The dSYM bundle, and the DWARF file inside it.
    dsym: PathBuf,
    dwarf: PathBuf,
    uuid: String,
    /// `__TEXT`'s vmaddr (`__mh_execute_header`).
    text: u64,
    /// Frame 0 (the inlined store in `leaf`), then the return addresses into `middle` and
    /// `main`, as link-time addresses.
    frames: [u64; 3],
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The linker clang runs for `-fuse-ld=lld` on a Darwin target is `ld64.lld`: Debian
/// installs it as `ld64.lld-14` (and so on), so a directory with the name is made.
fn ld64_dir(dir: &Path) -> Option<PathBuf> {
    let bin = dir.join("ld");
    std::fs::create_dir_all(&bin).ok()?;
    for v in ["", "-19", "-18", "-17", "-16", "-15", "-14"] {
        let found = Path::new("/usr/bin").join(format!("ld64.lld{v}"));
        if found.exists() {
            let link = bin.join("ld64.lld");
            let _ = std::os::unix::fs::symlink(&found, &link);
            return Some(bin);
        }
    }
    None
}

fn tools_missing() -> Option<&'static str> {
    [
        "clang",
        "dsymutil",
        "llvm-objdump",
        "llvm-symbolizer",
        "llvm-nm",
        "llvm-dwarfdump",
    ]
    .into_iter()
    .find(|t| !have(t))
}

/// Builds `SOURCE` for `target` in `dir`, its dSYM, and finds the crash points.
fn build(dir: &Path, target: &'static str) -> Build {
    let name = format!("crash-{target}");
    let src = dir.join("crash.c");
    std::fs::write(&src, SOURCE).unwrap();
    let ld = ld64_dir(dir).expect("ld64.lld (Debian's lld package)");
    let exe = dir.join(&name);
    // compiled apart: the debug map dsymutil follows names the object file, which a
    // one-step build would delete
    let obj = dir.join(format!("{name}.o"));
    run(Command::new("clang")
        .args(["-target", target, "-g", "-O1", "-c", "-o"])
        .arg(&obj)
        .arg(&src));
    run(Command::new("clang")
        .args(["-target", target, "-fuse-ld=lld", "-nostdlib"])
        .arg("-B")
        .arg(&ld)
        .args(["-Wl,-e,_main", "-o"])
        .arg(&exe)
        .arg(&obj));
    let dsym = dir.join(format!("{name}.dSYM"));
    run(Command::new("dsymutil").arg(&exe).arg("-o").arg(&dsym));
    let dwarf = dsym.join("Contents/Resources/DWARF").join(&name);
    assert!(dwarf.is_file(), "dsymutil made no {}", dwarf.display());
    let uuid = run(Command::new("llvm-dwarfdump").arg("--uuid").arg(&dwarf))
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_ascii_lowercase();
    let nm = run(Command::new("llvm-nm").arg(&exe));
    let text = nm
        .lines()
        .find(|l| l.ends_with(" __mh_execute_header"))
        .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .unwrap();
    let frames = crash_points(&exe, &dwarf);
    Build {
        target,
        name,
        dsym,
        dwarf,
        uuid,
        text,
        frames,
    }
}

/// The instructions of each function `llvm-objdump --macho -d` lists: (address, text).
fn disassembly(exe: &Path) -> Vec<(String, Vec<(u64, String)>)> {
    let text = run(Command::new("llvm-objdump")
        .args(["--macho", "-d"])
        .arg(exe));
    let mut out: Vec<(String, Vec<(u64, String)>)> = Vec::new();
    for line in text.lines() {
        if let Some(f) = line.strip_suffix(':').filter(|l| l.starts_with('_')) {
            out.push((f.to_string(), Vec::new()));
        } else if let (Some((addr, rest)), Some(last)) = (line.split_once(':'), out.last_mut()) {
            if let Ok(a) = u64::from_str_radix(addr.trim(), 16) {
                last.1.push((a, rest.to_string()));
            }
        }
    }
    out
}

/// Frame 0: the first instruction of `leaf` that llvm-symbolizer puts in the inlined
/// `store`; the callers: the instructions after the calls to `leaf` and `middle`.
fn crash_points(exe: &Path, dwarf: &Path) -> [u64; 3] {
    let funcs = disassembly(exe);
    let body = |f: &str| {
        funcs
            .iter()
            .find(|(n, _)| n == f)
            .map(|(_, b)| b.clone())
            .unwrap()
    };
    let store = body("_leaf")
        .into_iter()
        .map(|(a, _)| a)
        .find(|&a| symbolize(dwarf, a)[0]["FunctionName"] == "store")
        .expect("an instruction of the inlined store");
    let after_call = |f: &str, callee: &str| {
        let b = body(f);
        let i = b.iter().position(|(_, t)| t.contains(callee)).unwrap();
        b[i + 1].0
    };
    [
        store,
        after_call("_middle", "_leaf"),
        after_call("_main", "_middle"),
    ]
}

/// llvm-symbolizer's inline stack at a link-time address of the DWARF file.
fn symbolize(dwarf: &Path, addr: u64) -> Vec<Value> {
    let out = run(Command::new("llvm-symbolizer")
        .arg(format!("--obj={}", dwarf.display()))
        .args(["--inlining", "--output-style=JSON"])
        .arg(format!("{addr:#x}")));
    let v: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    v[0]["Symbol"].as_array().unwrap().clone()
}

/// The exception each build's report names: a bad access on macOS, a Swift-style trap
/// on iOS.
fn exception(b: &Build) -> (Value, &'static str, &'static str) {
    if b.target.contains("ios") {
        (
            json!({"type": "EXC_BREAKPOINT", "signal": "SIGTRAP",
                   "codes": "0x0000000000000001, 0x0000000000000000", "rawCodes": [1, 0]}),
            "EXC_BREAKPOINT (SIGTRAP)",
            "Trace/BPT trap: 5",
        )
    } else {
        (
            json!({"type": "EXC_BAD_ACCESS", "signal": "SIGSEGV",
                   "subtype": "KERN_INVALID_ADDRESS at 0x0000000000000000",
                   "codes": "0x0000000000000001, 0x0000000000000000", "rawCodes": [1, 0]}),
            "EXC_BAD_ACCESS (SIGSEGV)",
            "Segmentation fault: 11",
        )
    }
}

fn arch_of(b: &Build) -> (&'static str, &'static str) {
    if b.target.starts_with("x86_64") {
        ("X86-64", "x86_64")
    } else {
        ("ARM-64", "arm64")
    }
}

fn os_version(b: &Build) -> &'static str {
    if b.target.contains("ios") {
        "iPhone OS 15.5 (19F77)"
    } else {
        "macOS 12.4 (21F79)"
    }
}

/// The `.ips` report of the crash at `b.frames`, as Apple's documentation lays it out:
/// a one-line header object, then the body; the crashed thread ends in dyld's `start`,
/// and a second thread waits in dyld too.
fn ips(b: &Build) -> String {
    let (exc, _, indicator) = exception(b);
    let (cpu, arch) = arch_of(b);
    let off = |a: u64| a - b.text;
    let header = json!({"app_name": b.name, "bug_type": "309", "os_version": os_version(b),
                        "slice_uuid": b.uuid, "name": b.name});
    let body = json!({
        "procName": b.name, "pid": 1710, "cpuType": cpu,
        "procPath": format!("/Applications/{}", b.name),
        "captureTime": "2022-08-03 20:36:44.3125 +0900",
        "osVersion": {"train": os_version(b).rsplit_once(' ').unwrap().0, "build": "x"},
        "exception": exc,
        "termination": {"flags": 0, "code": 11, "namespace": "SIGNAL", "indicator": indicator},
        "asi": {"dyld": ["a message of the report's own"]},
        "faultingThread": 0,
        "threads": [
            {"triggered": true, "id": 16613413, "queue": "com.apple.main-thread",
             "frames": [
                {"imageOffset": off(b.frames[0]), "imageIndex": 0},
                {"imageOffset": off(b.frames[1]), "imageIndex": 0},
                {"imageOffset": off(b.frames[2]), "imageIndex": 0},
                {"imageOffset": 21790, "symbol": "start", "symbolLocation": 462, "imageIndex": 1}]},
            {"id": 16613414, "name": "worker",
             "frames": [{"imageOffset": 4000, "symbol": "__wait4", "symbolLocation": 10, "imageIndex": 1}]}
        ],
        "usedImages": [
            {"source": "P", "arch": arch, "base": LOAD, "size": 0x8000, "uuid": b.uuid,
             "path": format!("/Applications/{}", b.name), "name": b.name},
            {"source": "P", "arch": arch, "base": DYLD_LOAD, "size": 442368, "uuid": DYLD_UUID,
             "path": "/usr/lib/dyld", "name": "dyld"},
            {"size": 0, "source": "A", "base": 0, "uuid": "00000000-0000-0000-0000-000000000000"}
        ]
    });
    format!("{header}\n{}", serde_json::to_string_pretty(&body).unwrap())
}

/// The same crash as a legacy `.crash` text report.
fn crash_text(b: &Build) -> String {
    let (_, exc_type, indicator) = exception(b);
    let (cpu, arch) = arch_of(b);
    let codes = if b.target.contains("ios") {
        "Exception Codes:       0x0000000000000001, 0x0000000000000000\n".to_string()
    } else {
        "Exception Codes:       KERN_INVALID_ADDRESS at 0x0000000000000000\n\
         Exception Codes:       0x0000000000000001, 0x0000000000000000\n"
            .to_string()
    };
    let line = |n: usize, image: &str, addr: u64, rest: String| {
        format!("{n:<4}{image:<30}\t{addr:>#18x} {rest}\n")
    };
    let mut t = format!(
        "Process:               {name} [1710]\nPath:                  /Applications/{name}\n\
         Code Type:             {cpu} (Native)\n\nDate/Time:             2022-08-03 20:36:44.3125 +0900\n\
         OS Version:            {os}\n\nCrashed Thread:        0  Dispatch queue: com.apple.main-thread\n\n\
         Exception Type:        {exc_type}\n{codes}\n\
         Termination Reason:    Namespace SIGNAL, Code 11 {indicator}\n\n\
         Thread 0 Crashed::  Dispatch queue: com.apple.main-thread\n",
        name = b.name,
        os = os_version(b),
    );
    for (k, &a) in b.frames.iter().enumerate() {
        let runtime = LOAD + (a - b.text);
        t.push_str(&line(
            k,
            &b.name,
            runtime,
            format!("{LOAD:#x} + {}", a - b.text),
        ));
    }
    t.push_str(&line(3, "dyld", DYLD_LOAD + 21790, "start + 462".into()));
    t.push_str("\nThread 1 name:  worker\nThread 1:\n");
    t.push_str(&line(0, "dyld", DYLD_LOAD + 4000, "__wait4 + 10".into()));
    t.push_str(&format!(
        "\nBinary Images:\n{LOAD:>#18x} - {:>#18x} {name} (*) <{uuid}> /Applications/{name}\n\
         {DYLD_LOAD:>#18x} - {:>#18x} dyld {arch} <{DYLD_UUID}> /usr/lib/dyld\n",
        LOAD + 0x7fff,
        DYLD_LOAD + 442367,
        name = b.name,
        uuid = b.uuid,
    ));
    t
}

/// `postmortem walk FILE --symbols DIR --format FORMAT`.
fn walk(file: &Path, symbols: &Path, format: &str) -> String {
    run(Command::new(common::bin())
        .args(["walk", "--no-system-debug", "--format", format])
        .arg(file)
        .arg("--symbols")
        .arg(symbols)
        .env_remove("DEBUGINFOD_URLS"))
}

/// The report's frames of its first thread grouped by physical frame.
fn physical(thread: &Value) -> Vec<Vec<Value>> {
    let mut groups = Vec::new();
    let mut group = Vec::new();
    for f in thread["frames"].as_array().unwrap() {
        group.push(f.clone());
        if f["inlined"] == false {
            groups.push(std::mem::take(&mut group));
        }
    }
    groups
}

/// Every frame of the crashed thread's first three physical frames as llvm-symbolizer
/// names it at the same address (callers at return address − 1), inlined ones included;
/// dyld's frame by the name the report gives it.
fn check_against_llvm_symbolizer(b: &Build, report: &Value, what: &str) {
    let thread = &report["threads"][0];
    assert_eq!(thread["crashed"], true, "{what}");
    let groups = physical(thread);
    assert_eq!(groups.len(), 4, "{what}: {thread:#}");
    for (k, &a) in b.frames.iter().enumerate() {
        let at = if k == 0 { a } else { a - 1 };
        let expected = symbolize(&b.dwarf, at);
        let got = &groups[k];
        assert_eq!(
            got.len(),
            expected.len(),
            "{what}: frame {k} at {at:#x}: {got:#?} vs {expected:#?}"
        );
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(g["function"], e["FunctionName"], "{what}: frame {k}");
            assert_eq!(g["file"], e["FileName"], "{what}: frame {k}");
            assert_eq!(g["line"], e["Line"], "{what}: frame {k}");
            assert_eq!(g["symbol_source"], "dwarf", "{what}: frame {k}");
        }
        let pc = u64::from_str_radix(got[0]["pc"].as_str().unwrap().trim_start_matches("0x"), 16)
            .unwrap();
        assert_eq!(pc, LOAD + (a - b.text), "{what}: frame {k}'s pc");
        let expected_trust = if k == 0 { "context" } else { "prewalked" };
        assert_eq!(got.last().unwrap()["trust"], expected_trust, "{what}");
    }
    let dyld = &groups[3][0];
    assert_eq!(dyld["function"], "start", "{what}");
    assert_eq!(dyld["symbol_source"], "report", "{what}");
    assert_eq!(dyld["module"], "dyld", "{what}");
}

fn check_crash(b: &Build, report: &Value, what: &str) {
    let (_, name, _) = exception(b);
    let crash = &report["crash"];
    assert_eq!(crash["exception"]["name"], name, "{what}");
    if b.target.contains("ios") {
        assert_eq!(crash["reason"], "EXC_BREAKPOINT (SIGTRAP)", "{what}");
        assert_eq!(crash["signal"], 5, "{what}");
    } else {
        assert_eq!(
            crash["reason"], "EXC_BAD_ACCESS (SIGSEGV) / KERN_INVALID_ADDRESS at 0x0",
            "{what}"
        );
        assert_eq!(crash["signal"], 11, "{what}");
        assert_eq!(
            crash["analysis"]["kind"], "null-pointer",
            "{what}: {crash:#}"
        );
    }
    // the image without a dSYM (dyld) is listed, the one with a dSYM is not
    let warnings = report["warnings"].as_array().unwrap();
    let no_dsym: Vec<&Value> = warnings.iter().filter(|w| w["code"] == "no-dsym").collect();
    assert_eq!(no_dsym.len(), 1, "{what}: {warnings:#?}");
    assert!(
        no_dsym[0]["message"].as_str().unwrap().contains("dyld"),
        "{what}"
    );
    assert!(
        no_dsym[0]["message"]
            .as_str()
            .unwrap()
            .contains(&DYLD_UUID.to_ascii_uppercase()),
        "{what}"
    );
    let sig = report["signature"]["text"].as_str().unwrap_or_default();
    // the signature starts at frame 0's innermost function, as llvm-symbolizer names it
    let innermost = symbolize(&b.dwarf, b.frames[0]);
    let innermost = innermost[0]["FunctionName"].as_str().unwrap();
    assert!(sig.starts_with(innermost), "{what}: signature {sig:?}");
}

#[test]
fn apple_reports_of_our_mach_o_builds_symbolicate_as_llvm_symbolizer_does() {
    if let Some(t) = tools_missing() {
        eprintln!("skipped: {t} is not installed (test.sh installs clang, lld and llvm)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for target in [
        "arm64-apple-macos11",
        "x86_64-apple-macos11",
        "arm64-apple-ios14",
    ] {
        let work = dir.path().join(target);
        std::fs::create_dir_all(&work).unwrap();
        let b = build(&work, target);
        // only the dSYM is given: it is found by its UUID inside the bundle
        let symbols = work.join("symbols");
        std::fs::create_dir_all(&symbols).unwrap();
        std::fs::rename(&b.dsym, symbols.join(b.dsym.file_name().unwrap())).unwrap();
        let b = Build {
            dwarf: symbols.join(format!(
                "{}.dSYM/Contents/Resources/DWARF/{}",
                b.name, b.name
            )),
            ..b
        };
        for (ext, text) in [("ips", ips(&b)), ("crash", crash_text(&b))] {
            let file = work.join(format!("report.{ext}"));
            std::fs::write(&file, &text).unwrap();
            let what = format!("{target} .{ext}");
            let report: Value = serde_json::from_str(&walk(&file, &symbols, "json")).unwrap();
            let format = if ext == "ips" {
                "apple-ips"
            } else {
                "apple-crash"
            };
            assert_eq!(report["dump"]["format"], format, "{what}");
            assert_eq!(
                report["dump"]["os"],
                if target.contains("ios") {
                    "ios"
                } else {
                    "macos"
                }
            );
            check_against_llvm_symbolizer(&b, &report, &what);
            check_crash(&b, &report, &what);
            check_apple_text(&b, &walk(&file, &symbols, "apple"), &what);
        }
    }
}

/// The re-rendered report: the crashed thread's frame lines as `atos -i` names them
/// (one line per inlined function, innermost first), dyld's line as the report had it.
fn check_apple_text(b: &Build, text: &str, what: &str) {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("Thread 0 Crashed"))
        .unwrap_or_else(|| panic!("{what}: no crashed thread in\n{text}"));
    let frames: Vec<&str> = lines[start + 1..]
        .iter()
        .take_while(|l| !l.is_empty())
        .copied()
        .collect();
    let mut expected = Vec::new();
    for (k, &a) in b.frames.iter().enumerate() {
        let at = if k == 0 { a } else { a - 1 };
        for s in symbolize(&b.dwarf, at) {
            let file = s["FileName"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_string();
            expected.push(format!(
                "{k:<4}{:<30}\t{:>#18x} {} (in {}) ({file}:{})",
                b.name,
                LOAD + (a - b.text),
                s["FunctionName"].as_str().unwrap(),
                b.name,
                s["Line"]
            ));
        }
    }
    expected.push(format!(
        "3   {:<30}\t{:>#18x} start + 462",
        "dyld",
        DYLD_LOAD + 21790
    ));
    assert_eq!(frames, expected, "{what}:\n{text}");
}

#[tokio::test]
async fn the_service_takes_an_ips_report_and_symbolicates_it_with_an_uploaded_dsym() {
    if let Some(t) = tools_missing() {
        eprintln!("skipped: {t} is not installed (test.sh installs clang, lld and llvm)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let b = build(dir.path(), "arm64-apple-macos11");
    let server = common::TempServer::start(&[]);
    let c = common::client();
    // the dSYM's DWARF file, uploaded before the crash
    common::upload_binary(&c, &server.base, &b.dwarf, &b.name).await;
    for (text, format) in [(ips(&b), "apple-ips"), (crash_text(&b), "apple-crash")] {
        let id = common::upload_crash(&c, &server.base, text.as_bytes()).await;
        let record = common::poll_done(&c, &server.base, &id).await;
        assert_eq!(record["status"], "done", "{record:#}");
        let report = &record["report"];
        assert_eq!(report["dump"]["format"], format);
        check_against_llvm_symbolizer(&b, report, format);
        check_crash(&b, report, format);
        let page = common::get_text(&c, &server.url(&format!("/crashes/{id}"))).await;
        assert!(
            page.contains("leaf"),
            "the dashboard shows the symbolicated frame"
        );
    }
    // not a report: refused at upload with the reader's reason
    let r = c
        .post(format!("{}/api/v1/crashes", server.base))
        .body("{\"bug_type\":\"309\"}\n{\"cpuType\":\"ARM-64\",\"threads\":[{\"frames\":[{\"imageIndex\":3}]}]}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let body = r.text().await.unwrap();
    assert!(body.contains("image 3"), "{body}");
}
