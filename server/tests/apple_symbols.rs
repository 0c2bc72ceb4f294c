//! Apple symbol files, end to end: Mach-O programs built with clang for macOS (arm64 and
//! x86_64), their dSYMs (dsymutil), a universal binary and a universal dSYM (llvm-lipo),
//! and the minidump a Mac crash reporter writes for a process running one of them
//! (`testsupport::apple`).
//!
//! - `postmortem walk --symbols DIR` with the universal binary and the universal dSYM
//!   bundle in DIR: the slice the dump's module UUID names gives every frame, whose
//!   functions, files and lines (inlined frames included) are llvm-symbolizer's on that
//!   slice's DWARF at the same addresses;
//! - `POST /api/v1/binaries` with the universal binary (each slice filed by its UUID),
//!   then a crash (names from the symbol table only; the missing-symbols page names the
//!   missing dSYM by UUID with its upload command, the report says the image had no
//!   dSYM), then the zipped universal dSYM: the crash is processed again by itself, and
//!   its frames are llvm-symbolizer's;
//! - hostile zips refused with their typed errors: a path leaving the archive, too many
//!   entries, a zip bomb, no dSYM at all.
//!
//! Skipped (with a line saying so) where clang, ld64.lld, dsymutil or llvm-lipo is
//! missing (`test.sh` installs them with Debian's `clang`, `lld` and `llvm`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use postmortem_testsupport::apple::{self, Build, MacCpu};
use serde_json::Value;

/// Where the module is mapped in the crashed process (a slid `__TEXT`).
const BASE: u64 = 0x1_0460_0000;
const MODULE_PATH: &str = "/Applications/Crash.app/Contents/MacOS/crash";

/// Both thin builds of `crash`, the universal binary and the universal dSYM bundle.
struct Fixture {
    _dir: tempfile::TempDir,
    arm64: Build,
    x86_64: Build,
    /// A folder holding the universal `crash` and `crash.dSYM` (what `--symbols` gets).
    symbols: PathBuf,
}

fn fixture() -> Option<Fixture> {
    if !apple::can_build() {
        eprintln!("skipped: clang with ld64.lld, dsymutil and llvm-lipo are needed");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let arm64 = apple::build(dir.path(), apple::CRASH_C, "crash", "arm64");
    let x86_64 = apple::build(dir.path(), apple::CRASH_C, "crash", "x86_64");
    assert_ne!(arm64.uuid, x86_64.uuid);
    let symbols = dir.path().join("symbols");
    let dwarf = symbols.join("crash.dSYM/Contents/Resources/DWARF");
    std::fs::create_dir_all(&dwarf).unwrap();
    apple::lipo_create(&[&arm64.exe, &x86_64.exe], &symbols.join("crash"));
    apple::lipo_create(&[&arm64.dwarf, &x86_64.dwarf], &dwarf.join("crash"));
    std::fs::copy(
        arm64.dsym.join("Contents/Info.plist"),
        symbols.join("crash.dSYM/Contents/Info.plist"),
    )
    .unwrap();
    Some(Fixture {
        _dir: dir,
        arm64,
        x86_64,
        symbols,
    })
}

/// The crash of `build` as a Mac minidump, written next to it.
fn dump_of(build: &Build, cpu: MacCpu) -> (PathBuf, apple::MacCrash) {
    let crash = apple::crash_of(&build.exe, cpu, BASE, MODULE_PATH);
    let path = build.exe.with_file_name("crash.dmp");
    std::fs::write(&path, apple::mac_minidump(&crash)).unwrap();
    (path, crash)
}

/// The crashed thread's frames: (function, file name, line, inlined) of each.
fn frames(report: &Value) -> Vec<(String, String, u64, bool)> {
    let thread = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["crashed"] == true)
        .unwrap_or(&report["threads"][0]);
    thread["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let file = f["file"].as_str().unwrap_or_default();
            (
                f["function"].as_str().unwrap_or_default().to_string(),
                file.rsplit('/').next().unwrap_or(file).to_string(),
                f["line"].as_u64().unwrap_or(0),
                f["inlined"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// llvm-symbolizer's frames for the crash: the faulting pc's inline stack, then each
/// caller's at its call instruction (return address − 1 on x86_64, − 4 on arm64, where
/// the walker looks), outermost last. Link-time addresses, as the DWARF holds them.
fn expected(
    build: &Build,
    crash: &apple::MacCrash,
    cpu: MacCpu,
) -> Vec<(String, String, u64, bool)> {
    let to_link = |a: u64| a - BASE + 0x1_0000_0000;
    let (pc, ret, back) = match cpu {
        MacCpu::Arm64 => (crash.registers[32], crash.registers[30], 4),
        MacCpu::X86_64 => (
            crash.registers[16],
            u64::from_le_bytes(crash.stack[8..16].try_into().unwrap()),
            1,
        ),
    };
    let mut out = Vec::new();
    for address in [to_link(pc), to_link(ret) - back] {
        let stack = apple::symbolizer(&build.dwarf, address);
        let n = stack.len();
        for (i, l) in stack.into_iter().enumerate() {
            out.push((l.function, l.file, u64::from(l.line), i + 1 < n));
        }
    }
    out
}

#[test]
fn walk_takes_the_slice_the_dump_names_from_a_universal_binary_and_dsym() {
    let Some(f) = fixture() else { return };
    for (build, cpu) in [(&f.arm64, MacCpu::Arm64), (&f.x86_64, MacCpu::X86_64)] {
        let (dump, crash) = dump_of(build, cpu);
        let out = std::process::Command::new(common::bin())
            .args(["walk", "--no-dump-paths", "--symbols"])
            .arg(&f.symbols)
            .arg(&dump)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let want = expected(build, &crash, cpu);
        assert_eq!(want.len(), 3, "{cpu:?}: inner inlined in middle, then main");
        assert_eq!(frames(&report), want, "{cpu:?}");
        let module = &report["modules"][0];
        assert_eq!(module["status"], "ok", "{module}");
        let mut files: Vec<&str> = module["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap())
            .collect();
        files.sort_unstable();
        assert_eq!(files, ["binary", "debug"], "{cpu:?}: {module}");
        let no_dsym = report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "no-dsym");
        assert!(!no_dsym, "{}", report["warnings"]);
    }
}

/// The walk with the binary alone says the image had no dSYM, naming its UUID.
#[test]
fn walk_without_the_dsym_says_the_image_had_none() {
    let Some(f) = fixture() else { return };
    let only_binary = f.symbols.with_file_name("binary-only");
    std::fs::create_dir_all(&only_binary).unwrap();
    std::fs::copy(f.symbols.join("crash"), only_binary.join("crash")).unwrap();
    let (dump, _) = dump_of(&f.arm64, MacCpu::Arm64);
    let out = std::process::Command::new(common::bin())
        .args(["walk", "--no-dump-paths", "--symbols"])
        .arg(&only_binary)
        .arg(&dump)
        .output()
        .unwrap();
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let warning = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "no-dsym")
        .unwrap_or_else(|| panic!("{}", report["warnings"]));
    let uuid = uuid_text(&f.arm64.uuid);
    assert!(
        warning["message"].as_str().unwrap().contains(&uuid),
        "{warning}"
    );
    // the binary's own symbol table still names the frame
    assert_eq!(frames(&report)[0].0, "middle");
}

/// A thin Mach-O binary under `--symbols` is taken by its UUID (verified, with its dSYM),
/// and another build of the same name is never taken for the crashed one: the module is
/// then missing, and the warning names its UUID and asks for its dSYM.
#[test]
fn walk_takes_a_thin_binary_by_its_uuid_never_by_its_name() {
    let Some(f) = fixture() else { return };
    let (dump, _) = dump_of(&f.arm64, MacCpu::Arm64);
    let walk = |symbols: &Path| walk_json(symbols, &dump);
    let thin = f.symbols.with_file_name("thin");
    std::fs::create_dir_all(thin.join("crash.dSYM/Contents/Resources/DWARF")).unwrap();
    std::fs::copy(&f.arm64.exe, thin.join("crash")).unwrap();
    std::fs::copy(
        &f.arm64.dwarf,
        thin.join("crash.dSYM/Contents/Resources/DWARF/crash"),
    )
    .unwrap();
    let report = walk(&thin);
    let module = &report["modules"][0];
    assert_eq!(module["status"], "ok", "{module}");
    assert_eq!(module["verified"], true, "{module}");

    // another arm64 build named `crash`, with a UUID of its own
    let other_dir = f.symbols.with_file_name("other-build");
    let other_source = format!(
        "{}\nint another_build(void) {{ return 7; }}\n",
        apple::CRASH_C
    );
    let other = apple::build(&other_dir, &other_source, "crash", "arm64");
    assert_ne!(other.uuid, f.arm64.uuid);
    let stranger = f.symbols.with_file_name("stranger");
    std::fs::create_dir_all(&stranger).unwrap();
    std::fs::copy(&other.exe, stranger.join("crash")).unwrap();
    let report = walk(&stranger);
    let module = &report["modules"][0];
    assert_eq!(module["status"], "missing", "{module}");
    let missing = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "module-missing" && w["module"] == 0)
        .unwrap_or_else(|| panic!("{}", report["warnings"]));
    let text = missing["message"].as_str().unwrap();
    assert!(
        text.contains(&uuid_text(&f.arm64.uuid)) && text.contains("dSYM"),
        "{text}"
    );
    assert!(!text.contains("build-id"), "{text}");
}

/// `4C4C4437-5555-3144-A14F-ACE88C39A0D2`.
fn uuid_text(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02X}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

async fn post_binary(c: &reqwest::Client, base: &str, name: &str, body: Vec<u8>) -> (u16, Value) {
    let r = c
        .post(format!("{base}/api/v1/binaries"))
        .header("x-file-name", name)
        .body(body);
    answer(r).await
}

/// A request's status and JSON body.
async fn answer(r: reqwest::RequestBuilder) -> (u16, Value) {
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

#[tokio::test]
async fn a_dsym_zip_uploaded_after_the_crash_reprocesses_it() {
    let Some(f) = fixture() else { return };
    let server = common::TempServer::start(&["--workers", "1"]);
    let c = common::client();
    let base = &server.base;

    // the universal binary: one row per slice, each by its own UUID
    let (status, v) = post_binary(
        &c,
        base,
        "crash",
        std::fs::read(f.symbols.join("crash")).unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let mut ids: Vec<String> = v["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["build_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    let mut want: Vec<String> = [f.arm64.uuid, f.x86_64.uuid]
        .iter()
        .map(|u| u.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    want.sort();
    assert_eq!(ids, want, "{v}");

    let (dump, crash) = dump_of(&f.arm64, MacCpu::Arm64);
    let id = common::upload_crash(&c, base, &std::fs::read(&dump).unwrap()).await;
    common::poll_done(&c, base, &id).await;
    let report = common::get_json(&c, format!("{base}/api/v1/crashes/{id}")).await;
    let report = if report.get("report").is_some() {
        report["report"].clone()
    } else {
        report
    };
    let before = frames(&report);
    assert_eq!(before[0].0, "middle", "{before:?}");
    assert!(
        before.iter().all(|f| f.2 == 0),
        "no lines without the dSYM: {before:?}"
    );
    assert!(
        report["warnings"].to_string().contains("no-dsym"),
        "{}",
        report["warnings"]
    );

    // the missing-symbols page names the dSYM by UUID, with the command that uploads it
    let page = common::get_text(&c, &format!("{base}/missing")).await;
    assert!(page.contains(&uuid_text(&f.arm64.uuid)), "{page}");
    assert!(page.contains("crash.dSYM.zip"), "{page}");

    // the zipped universal dSYM: each slice's DWARF file filed by its UUID
    let zip = apple::zip_dsym(&f.symbols.join("crash.dSYM"));
    let (status, v) = post_binary(&c, base, "crash.dSYM.zip", zip).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["binaries"].as_array().unwrap().len(), 2, "{v}");
    assert!(
        v["binaries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["kind"] == "debug"),
        "{v}"
    );

    // processed again by itself
    let want = expected(&f.arm64, &crash, MacCpu::Arm64);
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let report = common::get_json(&c, format!("{base}/api/v1/crashes/{id}")).await;
        let report = if report.get("report").is_some() {
            report["report"].clone()
        } else {
            report
        };
        if report["threads"].is_array() && frames(&report) == want {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not reprocessed with the dSYM: {:?}",
            report["threads"].as_array().map(|_| frames(&report))
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn hostile_dsym_zips_are_refused_with_typed_errors() {
    let server = common::TempServer::start(&["--workers", "0", "--max-zip-entries", "8"]);
    let c = common::client();
    let base = &server.base;
    let entry = |name: &str, bytes: Vec<u8>| (name.to_string(), bytes);
    type Entries = Vec<(String, Vec<u8>)>;
    let cases: Vec<(&str, Entries)> = vec![
        (
            "zip-unsafe-path",
            vec![entry(
                "../evil.dSYM/Contents/Resources/DWARF/evil",
                vec![1; 10],
            )],
        ),
        (
            "zip-too-many-entries",
            (0..9)
                .map(|i| entry(&format!("a.dSYM/Contents/Resources/x{i}"), vec![0; 4]))
                .collect(),
        ),
        (
            "zip-bomb",
            vec![entry("a.dSYM/Contents/Resources/DWARF/a", vec![0; 4 << 20])],
        ),
        (
            "no-dsym-in-zip",
            vec![entry("readme.txt", b"no bundle here".to_vec())],
        ),
    ];
    for (code, entries) in cases {
        let (status, v) = post_binary(&c, base, "x.zip", apple::zip_of(&entries)).await;
        assert_eq!((status, v["code"].as_str()), (422, Some(code)), "{v}");
    }
    // nothing was stored
    let v = common::get_json(&c, format!("{base}/api/v1/binaries")).await;
    assert_eq!(v["binaries"].as_array().unwrap().len(), 0, "{v}");
}

/// Two dylibs built here (`libdemo` with an exported and a `static` function, `libother`)
/// and the dyld shared cache `testsupport::dyld_cache` writes of them into `dir/cache`
/// (there is no Apple tool to make one): (libdemo's path, the cache's directory).
fn demo_cache(dir: &Path) -> (PathBuf, PathBuf) {
    let demo = apple::build_dylib(
        dir,
        "static __attribute__((noinline)) int demo_local(int *p) { return *p + 1; }\n\
         int demo_crash(int *p) { return demo_local(p) * 2; }\n",
        "libdemo.dylib",
        "/usr/lib/system/libdemo.dylib",
    );
    let other = apple::build_dylib(
        dir,
        "int other_function(int x) { return x * 7; }\n",
        "libother.dylib",
        "/usr/lib/libother.dylib",
    );
    let symbols = dir.join("cache");
    std::fs::create_dir_all(&symbols).unwrap();
    let dylibs: Vec<postmortem_testsupport::dyld_cache::Dylib> = [
        (&other, "/usr/lib/libother.dylib"),
        (&demo, "/usr/lib/system/libdemo.dylib"),
    ]
    .iter()
    .map(|(p, install)| postmortem_testsupport::dyld_cache::Dylib {
        install_path: install.to_string(),
        bytes: std::fs::read(p).unwrap(),
    })
    .collect();
    postmortem_testsupport::dyld_cache::write(&dylibs, &symbols.join("dyld_shared_cache_arm64"));
    (demo, symbols)
}

/// A Mac minidump of a crash in libdemo (loaded at `base`) at `pc`, the link register
/// `lr` (0 for none), no frame pointer.
fn demo_minidump(demo: &Path, base: u64, pc: u64, lr: u64) -> Vec<u8> {
    let module = apple::MacModule {
        path: "/usr/lib/system/libdemo.dylib".into(),
        base,
        size: 0x8000,
        uuid: apple::uuid_of(&std::fs::read(demo).unwrap()),
    };
    let mut registers = vec![0u64; 33];
    registers[30] = lr;
    registers[31] = SP;
    registers[32] = pc;
    apple::mac_minidump(&apple::MacCrash {
        cpu: MacCpu::Arm64,
        registers,
        stack_start: SP,
        stack: vec![0; 64],
        fault_address: 0,
        modules: vec![module],
    })
}

/// The stack pointer of [`arm64_minidump`]'s thread: its stack starts there.
const SP: u64 = 0x16f0_0000;

/// An arm64 Mac minidump of one thread at `pc` with frame pointer `fp`, its stack the
/// `words` from [`SP`], and `modules`.
fn arm64_minidump((pc, fp): (u64, u64), words: &[u64], modules: Vec<apple::MacModule>) -> Vec<u8> {
    let mut registers = vec![0u64; 33];
    registers[29] = fp;
    registers[31] = SP;
    registers[32] = pc;
    apple::mac_minidump(&apple::MacCrash {
        cpu: MacCpu::Arm64,
        registers,
        stack_start: SP,
        stack: words.iter().flat_map(|w| w.to_le_bytes()).collect(),
        fault_address: 0,
        modules,
    })
}

/// `postmortem walk --symbols SYMBOLS DUMP`'s JSON report.
pub(crate) fn walk_json(symbols: &Path, dump: &Path) -> Value {
    let out = std::process::Command::new(common::bin())
        .args(["walk", "--no-dump-paths", "--symbols"])
        .arg(symbols)
        .arg(dump)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Writes `records` as the `.sym` file of Mac module `name` with `uuid` under `dir`, in
/// Breakpad's store layout.
fn write_sym(dir: &Path, name: &str, uuid: [u8; 16], records: &str) {
    let id: String = uuid.iter().map(|b| format!("{b:02X}")).collect();
    let sym_dir = dir.join(format!("{name}/{id}0"));
    std::fs::create_dir_all(&sym_dir).unwrap();
    let text = format!("MODULE mac arm64 {id}0 {name}\n{records}");
    std::fs::write(sym_dir.join(format!("{name}.sym")), text).unwrap();
}

/// A system library's names from a dyld shared cache under `--symbols`: its exported
/// names from the image's own symbol table, its local ones (a `static` function) from
/// the cache's `.symbols` subcache, each as llvm-symbolizer names the same address of
/// the dylib the cache was made of.
#[test]
fn walk_names_system_frames_from_a_dyld_shared_cache() {
    if !apple::can_build() {
        eprintln!("skipped: clang with ld64.lld is needed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (demo, symbols) = demo_cache(dir.path());
    let bytes = std::fs::read(&demo).unwrap();
    let base = 0x1_9a40_0000u64;
    for function in ["demo_local", "demo_crash"] {
        // a pc inside the function, as the dylib was linked (its __TEXT at 0)
        let address = apple::symbol_address(&bytes, &format!("_{function}")) + 4;
        let want = apple::symbolizer(&demo, address);
        assert_eq!(want[0].function, function, "llvm-symbolizer: {want:?}");
        let dump = dir.path().join(format!("{function}.dmp"));
        std::fs::write(&dump, demo_minidump(&demo, base, base + address, 0)).unwrap();
        let report = walk_json(&symbols, &dump);
        assert_eq!(
            frames(&report)[0].0,
            want[0].function,
            "{}",
            report["modules"]
        );
        assert_eq!(
            report["modules"][0]["status"], "ok",
            "{}",
            report["modules"][0]
        );
    }
}

/// Posts `parts` (file name, bytes) as one multipart upload of symbol files.
async fn post_parts(c: &reqwest::Client, base: &str, parts: &[(&str, Vec<u8>)]) -> (u16, Value) {
    let mut form = reqwest::multipart::Form::new();
    for (name, bytes) in parts {
        let part = reqwest::multipart::Part::bytes(bytes.clone()).file_name(name.to_string());
        form = form.part("file", part);
    }
    answer(c.post(format!("{base}/api/v1/binaries")).multipart(form)).await
}

/// A dyld shared cache uploaded to the service (the cache and its `.symbols` subcache in
/// one multipart request) after a crash in one of its images: each image becomes a `.sym`
/// file filed by its UUID, and the crash is processed again by itself, its frame named as
/// llvm-symbolizer names the same address of the dylib the cache was made of (a `static`
/// function: the name comes from the subcache's local symbols), and its caller found by
/// the image's unwind rules (`STACK CFI` in the stored `.sym`: the frameless leaf's
/// return address in lr), `trust: cfi`. A cache without its
/// subcache, or a subcache alone, is refused whole and stores nothing.
#[tokio::test]
async fn a_dyld_shared_cache_uploaded_after_the_crash_names_its_frames() {
    if !apple::can_build() {
        eprintln!("skipped: clang with ld64.lld is needed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (demo, cache) = demo_cache(dir.path());
    let main = std::fs::read(cache.join("dyld_shared_cache_arm64")).unwrap();
    let symbols = std::fs::read(cache.join("dyld_shared_cache_arm64.symbols")).unwrap();
    let server = common::TempServer::start(&["--workers", "1"]);
    let c = common::client();
    let base = &server.base;

    // refused whole: a part missing, a stray part, a part without a name
    for parts in [
        vec![("dyld_shared_cache_arm64", main.clone())],
        vec![("dyld_shared_cache_arm64.symbols", symbols.clone())],
    ] {
        let (status, v) = post_parts(&c, base, &parts).await;
        assert_eq!(
            (status, v["code"].as_str()),
            (422, Some("dyld-cache-incomplete")),
            "{v}"
        );
    }
    // a cache sent raw, without X-File-Name: its subcaches cannot be told apart by name
    let (status, v) = answer(c.post(format!("{base}/api/v1/binaries")).body(main.clone())).await;
    assert_eq!(
        (status, v["code"].as_str()),
        (422, Some("dyld-cache-incomplete")),
        "{v}"
    );
    let v = common::get_json(&c, format!("{base}/api/v1/binaries")).await;
    assert_eq!(v["binaries"].as_array().unwrap().len(), 0, "{v}");

    let bytes = std::fs::read(&demo).unwrap();
    let address = apple::symbol_address(&bytes, "_demo_local") + 4;
    let want = apple::symbolizer(&demo, address);
    assert_eq!(want[0].function, "demo_local", "llvm-symbolizer: {want:?}");
    let load = 0x1_9a40_0000u64;
    // called from demo_crash: the return address after its `bl`, still in lr (demo_local
    // is a frameless leaf: its compact unwind says so, and only that says so)
    let code = apple::disassembly(&demo, "_demo_crash");
    let call = code.iter().position(|(_, t)| t.contains("\tbl\t")).unwrap();
    let ret = code[call + 1].0;
    let dump = demo_minidump(&demo, load, load + address, load + ret);
    let id = common::upload_crash(&c, base, &dump).await;
    common::poll_done(&c, base, &id).await;
    let report = |v: Value| {
        if v.get("report").is_some() {
            v["report"].clone()
        } else {
            v
        }
    };
    let before = report(common::get_json(&c, format!("{base}/api/v1/crashes/{id}")).await);
    assert_ne!(
        frames(&before)[0].0,
        "demo_local",
        "named before the cache: {before}"
    );

    let (status, v) = post_parts(
        &c,
        base,
        &[
            ("dyld_shared_cache_arm64", main),
            ("dyld_shared_cache_arm64.symbols", symbols),
        ],
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let mut stored: Vec<(String, String)> = v["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let id = b["debug_id"].as_str().unwrap_or("").replace('-', "");
            (
                b["file_name"].as_str().unwrap_or("").to_string(),
                id.to_ascii_uppercase(),
            )
        })
        .collect();
    stored.sort();
    // the Breakpad debug id of a Mach-O: its UUID upper-case, age 0
    let uuid: String = apple::uuid_of(&bytes)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    assert_eq!(stored.len(), 2, "one .sym per image: {v}");
    assert!(
        stored.contains(&("libdemo.dylib.sym".to_string(), format!("{uuid}0"))),
        "libdemo by its UUID {uuid}: {v}"
    );

    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let r = report(common::get_json(&c, format!("{base}/api/v1/crashes/{id}")).await);
        if r["threads"].is_array() && frames(&r)[0].0 == want[0].function {
            // the caller by the image's unwind rules, which the .sym file carries
            let caller = &r["threads"][0]["frames"][1];
            let s = |k: &str| caller[k].as_str().unwrap_or_default().to_string();
            let want_caller = apple::symbolizer(&demo, ret - 4)[0].function.clone();
            assert_eq!(
                (s("function"), s("trust"), s("unwind_source")),
                (want_caller, "cfi".to_string(), "breakpad".to_string()),
                "{r}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not processed again with the cache's names: {r}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A scanned word in a Mac module known only by its `.sym` file, where the word lies
/// before the first function, under `PUBLIC 0 0 _mh_execute_header` (the Mach header's
/// symbol, which dump_syms writes for every Mach-O): the header names no function, so
/// the word is no return address (symbolicator's `macos-no-fp.dmp` fixture, walked with
/// its truncated `.sym`, gave two such frames). The next word, inside a `FUNC`, is.
#[test]
fn a_scanned_word_under_the_mach_header_symbol_is_no_frame() {
    let dir = tempfile::tempdir().unwrap();
    let uuid = [0x42u8; 16];
    write_sym(
        dir.path(),
        "libdemo.dylib",
        uuid,
        "PUBLIC 0 0 _mh_execute_header\nFUNC 1000 100 0 real_function\n\
         FUNC 1100 100 0 crashed_function\n",
    );
    let base = 0x1_0000_0000u64;
    // the stack: a word into the header region, then a return address into real_function
    let words = [0u64, base + 0x20, 0, base + 0x1010, 0, 0, 0, 0];
    let module = apple::MacModule {
        path: "/usr/lib/libdemo.dylib".into(),
        base,
        size: 0x8000,
        uuid,
    };
    let path = dir.path().join("crash.dmp");
    std::fs::write(
        &path,
        arm64_minidump((base + 0x1150, 0), &words, vec![module]),
    )
    .unwrap();
    let report = walk_json(dir.path(), &path);
    let names: Vec<String> = frames(&report).into_iter().map(|f| f.0).collect();
    assert_eq!(
        names.get(..2),
        Some(&["crashed_function".to_string(), "real_function".to_string()][..]),
        "{:#}",
        report["threads"][0]
    );
    assert!(
        !names.iter().any(|n| n == "_mh_execute_header"),
        "{names:?}"
    );
}

/// The main thread of a Mac process ends at dyld's `start`, where `main` returns: past it
/// the stack holds the process's arguments and environment, and a word there that points
/// into the program (a stale return address) is no frame. (symbolicator's
/// `macos-no-fp.dmp` fixture, walked with its full `.sym`, gave a `metric_thread_func`
/// frame after dyld's.) A dyld frame in the middle of a stack (a static initializer's
/// crash) is not the end: only the one `main` returns into.
#[test]
fn the_main_thread_ends_at_dyld_start() {
    let dir = tempfile::tempdir().unwrap();
    let uuid = [0x43u8; 16];
    write_sym(
        dir.path(),
        "app",
        uuid,
        "FUNC 1000 100 0 main\nFUNC 2000 100 0 metric_thread_func\n",
    );
    let (app, dyld) = (0x1_0000_0000u64, 0x1_8000_0000u64);
    // main's frame record at SP+0x10: the saved fp (0) and the return into dyld; above
    // it, a stale word into metric_thread_func
    let words = [0u64, 0, 0, dyld + 0x4b98, app + 0x2010, 0, 0, 0];
    let modules = vec![
        apple::MacModule {
            path: "/Applications/App.app/Contents/MacOS/app".into(),
            base: app,
            size: 0x8000,
            uuid,
        },
        apple::MacModule {
            path: "/usr/lib/dyld".into(),
            base: dyld,
            size: 0x10000,
            uuid: [0x44; 16],
        },
    ];
    let path = dir.path().join("crash.dmp");
    let dump = arm64_minidump((app + 0x1050, SP + 0x10), &words, modules);
    std::fs::write(&path, dump).unwrap();
    let report = walk_json(dir.path(), &path);
    let thread = &report["threads"][0];
    let pcs: Vec<&str> = thread["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["pc"].as_str().unwrap())
        .collect();
    let want = [
        format!("{:#x}", app + 0x1050),
        format!("{:#x}", dyld + 0x4b98),
    ];
    assert_eq!(pcs, want, "{thread:#}");
    assert_eq!(thread["end"], "outermost", "{thread:#}");
}
