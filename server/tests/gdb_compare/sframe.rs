//! SFrame-only unwinding on real processes: the binutils-built SFrame fixtures
//! (`fixtures/sframe/*-x86_64-shapes-*.elf`) are run under gdb, stopped in
//! `leaf_add` and in the deepest `fib` calls, and dumped with `gcore`. Each core is walked
//! twice: once with the fixture itself (its `.eh_frame`), once with a copy stripped of
//! `.eh_frame`/`.eh_frame_hdr` (same build-id, so it is the file used), where the
//! program's frames can only come from `.sframe`. Every thread's frames must be the same
//! (pc and function), the program's callers must come from `sframe` rules in the second
//! walk, and both must end as the outermost frame.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::report;
use postmortem_testsupport::program::Workdir;

fn fixtures() -> PathBuf {
    postmortem_testsupport::workspace_root().join("fixtures/sframe")
}

/// One thread's (pc, function) frames and its end reason.
type ThreadFrames = (Vec<(String, Option<String>)>, String);

/// (pc, function) of every frame of every thread, and each thread's end reason.
fn frames(report: &Value) -> Vec<ThreadFrames> {
    report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .map(|t| {
            let frames = t["frames"]
                .as_array()
                .expect("frames")
                .iter()
                .map(|f| {
                    (
                        f["pc"].as_str().expect("pc").to_owned(),
                        f["function"].as_str().map(str::to_owned),
                    )
                })
                .collect();
            (frames, t["end"].as_str().expect("end").to_owned())
        })
        .collect()
}

const GCORE_SCRIPT: &str = r#"
import gdb
n = 0
while n < 10:
    try:
        gdb.execute("gcore core.%d" % n, to_string=True)
    except gdb.error:
        break
    n += 1
    try:
        gdb.execute("continue", to_string=True)
    except gdb.error:
        break
"#;

fn check_fixture(name: &str) {
    let fixture = fixtures().join(name);
    assert!(
        fixture.is_file(),
        "missing fixture {} (the shared/ folder must sit beside the repository)",
        fixture.display()
    );
    let work = Workdir::new(&format!("sframe-{name}"));
    let eh = work.path().join("eh");
    let sf = work.path().join("sf");
    for d in [&eh, &sf] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let prog = eh.join("prog");
    std::fs::copy(&fixture, &prog).expect("copy the fixture");
    let status = Command::new("chmod")
        .arg("+x")
        .arg(&prog)
        .status()
        .expect("chmod");
    assert!(status.success());
    let status = Command::new("objcopy")
        .args([
            "--remove-section",
            ".eh_frame",
            "--remove-section",
            ".eh_frame_hdr",
        ])
        .arg(&prog)
        .arg(sf.join("prog"))
        .status()
        .expect("run objcopy");
    assert!(status.success(), "objcopy failed");
    let script = work.path().join("gcores.py");
    std::fs::write(&script, GCORE_SCRIPT).expect("write the gdb script");
    let out = Command::new("gdb")
        .current_dir(work.path())
        .args(["-batch", "-nx"])
        .args([
            "-ex",
            "set pagination off",
            "-ex",
            "set debuginfod enabled off",
        ])
        .args([
            "-ex",
            "break leaf_add",
            "-ex",
            "break fib if n == 0",
            "-ex",
            "run",
        ])
        .arg("-x")
        .arg(&script)
        .arg(&prog)
        .output()
        .expect("run gdb");
    let cores: Vec<PathBuf> = (0..10)
        .map(|i| work.path().join(format!("core.{i}")))
        .filter(|p| p.is_file())
        .collect();
    assert!(
        cores.len() >= 8,
        "gdb made {} cores of {name}: {}",
        cores.len(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut sframe_frames = 0usize;
    for core in &cores {
        let with_eh = report::walk_report(core, &eh);
        let with_sframe = report::walk_report(core, &sf);
        assert_eq!(
            frames(&with_sframe),
            frames(&with_eh),
            "{name} {}: the .sframe-only walk differs from the .eh_frame walk",
            core.display()
        );
        for (f, _) in frames(&with_eh) {
            assert!(f.len() >= 3, "{name}: too few frames: {f:?}");
        }
        let t0 = &with_sframe["threads"][0];
        assert_eq!(t0["end"], "outermost", "{t0}");
        sframe_frames += t0["frames"]
            .as_array()
            .expect("frames")
            .iter()
            .filter(|f| f["unwind_source"] == "sframe")
            .count();
    }
    assert!(
        sframe_frames >= cores.len(),
        "{name}: the stripped copy's frames should come from .sframe rules ({sframe_frames})"
    );
}

#[test]
fn sframe_only_walks_equal_eh_frame_walks_v3_o2() {
    check_fixture("v3-x86_64-shapes-o2.elf");
}

#[test]
fn sframe_only_walks_equal_eh_frame_walks_v3_fp() {
    check_fixture("v3-x86_64-shapes-fp.elf");
}

#[test]
fn sframe_only_walks_equal_eh_frame_walks_v2_o2() {
    check_fixture("v2-241-x86_64-shapes-o2.elf");
}

#[test]
fn sframe_only_walks_equal_eh_frame_walks_v2_fp() {
    check_fixture("v2-241-x86_64-shapes-fp.elf");
}
