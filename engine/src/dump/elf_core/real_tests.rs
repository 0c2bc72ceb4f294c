//! Tests over real cores made at test time: a crashing two-thread C program (kernel core)
//! and `gcore` of a live process, compared against what `object` reads from the files.
//!
//! Skipped, with a printed reason, only when gcc or gdb are absent.

use std::path::{Path, PathBuf};
use std::process::Command;

use object::Object;

use super::read;
use crate::dump::{Dump, Identity};

const PROGRAM: &str = r#"
#include <pthread.h>
#include <unistd.h>
static volatile int *bad = (int *)0x10;
static void *worker(void *a) { (void)a; usleep(200000); *bad = 1; return 0; }
static void *sleeper(void *a) { (void)a; for (;;) sleep(100); return 0; }
int main(int argc, char **argv) {
    (void)argv;
    pthread_t t1, t2;
    pthread_create(&t2, 0, sleeper, 0);
    if (argc > 1) { for (;;) sleep(100); }
    pthread_create(&t1, 0, worker, 0);
    pthread_join(t1, 0);
    return 0;
}
"#;

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Compiles the program into a fresh temp dir.
fn build() -> Option<(tempfile::TempDir, PathBuf)> {
    if !have("gcc") {
        eprintln!("skipped: gcc is not installed");
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("prog.c");
    std::fs::write(&src, PROGRAM).expect("write source");
    let exe = dir.path().join("prog");
    let st = Command::new("gcc")
        .args(["-g", "-O0", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc failed");
    Some((dir, exe))
}

/// The core file the kernel wrote into `dir` (`core` or `core.PID`).
fn find_core(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "core" || n.starts_with("core."))
        })
}

fn file_build_id(path: &Path) -> Option<Vec<u8>> {
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    file.build_id().ok()?.map(<[u8]>::to_vec)
}

/// Checks the modules every core of the program must list.
fn check_modules(dump: &Dump<'_>, exe: &Path) {
    let sorted = dump.modules.windows(2).all(|w| w[0].base <= w[1].base);
    assert!(sorted, "modules sorted by base");
    let main: Vec<_> = dump.modules.iter().filter(|m| m.main).collect();
    assert_eq!(
        main.len(),
        1,
        "exactly one main module: {:#?}",
        dump.modules
    );
    let main = main[0];
    assert_eq!(main.name, "prog");
    assert_eq!(main.identity, Identity::BuildId);
    assert_eq!(main.build_id, file_build_id(exe), "main build-id");
    assert!(main.mappings.iter().any(|m| m.executable == Some(true)));
    assert!(main.load_base >= main.base && main.load_base < main.end);

    let libc = dump
        .modules
        .iter()
        .find(|m| m.name.starts_with("libc.so"))
        .expect("libc module");
    let libc_path = libc.path.as_deref().expect("libc path");
    assert!(libc.build_id.is_some(), "libc build-id read from the core");
    assert_eq!(libc.build_id, file_build_id(Path::new(libc_path)));

    let vdso = dump
        .modules
        .iter()
        .find(|m| m.name == "linux-vdso.so.1")
        .expect("vdso module");
    assert_eq!(vdso.path, None);
    assert!(vdso.build_id.is_some(), "vdso build-id");
    assert!(
        !dump.modules.iter().any(|m| m
            .path
            .as_deref()
            .is_some_and(|p| p.starts_with("/dev/") || p.contains("locale-archive"))),
        "no device or locale mappings as modules"
    );
    // The executable path is the main module's NT_FILE / link_map path.
    assert_eq!(dump.executable.as_deref(), main.path.as_deref());
}

#[test]
fn kernel_core_of_a_crash() {
    let Some((dir, exe)) = build() else { return };
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -c unlimited; exec ./prog")
        .current_dir(dir.path())
        .output()
        .expect("run program");
    assert!(!out.status.success(), "the program must crash");
    let Some(core_path) = find_core(dir.path()) else {
        eprintln!("skipped: no core file was written (core_pattern or limits)");
        return;
    };
    let bytes = std::fs::read(&core_path).expect("read core");
    let dump = read(&bytes).expect("read kernel core");
    assert_eq!(dump.writer.as_deref(), Some("linux-kernel"));
    assert!(dump.threads.len() >= 2, "two or more threads");
    let crash = dump.crash.as_ref().expect("crash info");
    assert_eq!(crash.signal, Some(11));
    assert_eq!(crash.code, Some(1), "SEGV_MAPERR");
    assert_eq!(crash.address, Some(0x10));
    assert_eq!(crash.tid, dump.threads[0].tid);
    // The crashing thread is the worker, not the main thread (whose tid is the pid).
    assert_ne!(Some(crash.tid), dump.pid);
    assert!(dump.threads.iter().any(|t| Some(t.tid) == dump.pid));
    // rip of the crashed thread lies in the main module's code; rsp is in memory.
    let regs = &dump.threads[0].registers;
    let pc = regs.pc().expect("pc");
    let main = dump.modules.iter().find(|m| m.main).expect("main");
    assert!(main.contains_code(pc), "crash pc {pc:#x} in prog's code");
    let sp = regs.sp().expect("sp");
    assert!(dump.memory.read_u64(sp).is_some(), "stack memory present");
    assert_eq!(dump.command_line.as_deref(), Some("./prog"));
    assert!(dump.warnings.is_empty(), "{:?}", dump.warnings);
    check_modules(&dump, &exe);

    // Without NT_FILE, the modules come from the dynamic linker's list.
    let stripped = strip_nt_file(&bytes);
    let without = read(&stripped).expect("read core without NT_FILE");
    assert_ne!(without.writer.as_deref(), Some("gcore"));
    check_modules(&without, &exe);
    let key = |d: &Dump<'_>| -> Vec<_> {
        d.modules
            .iter()
            .map(|m| {
                (
                    m.name.clone(),
                    m.base,
                    m.load_base,
                    m.build_id.clone(),
                    m.main,
                )
            })
            .collect()
    };
    assert_eq!(key(&without), key(&dump));

    // Truncated: half the core still reads, with a warning.
    let half = &bytes[..bytes.len() / 2];
    let cut = read(half).expect("read half a core");
    assert!(cut.warnings.iter().any(|w| w.code == "truncated-dump"));
    assert_eq!(cut.threads.len(), dump.threads.len());
}

/// A copy of a core whose NT_FILE note type is rewritten to an unknown type.
fn strip_nt_file(core: &[u8]) -> Vec<u8> {
    let mut out = core.to_vec();
    let le = |b: &[u8], off: usize, n: usize| -> u64 {
        let mut v = 0u64;
        for i in (0..n).rev() {
            v = (v << 8) | u64::from(b[off + i]);
        }
        v
    };
    let phoff = le(core, 32, 8) as usize;
    let phnum = le(core, 56, 2) as usize;
    let mut found = false;
    for i in 0..phnum {
        let ph = phoff + i * 56;
        if le(core, ph, 4) != 4 {
            continue;
        }
        let (off, size) = (le(core, ph + 8, 8) as usize, le(core, ph + 32, 8) as usize);
        let mut p = off;
        while p + 12 <= off + size {
            let namesz = le(core, p, 4) as usize;
            let descsz = le(core, p + 4, 4) as usize;
            if le(core, p + 8, 4) == 0x4649_4c45 {
                out[p + 8..p + 12].copy_from_slice(&0x7777_7777u32.to_le_bytes());
                found = true;
            }
            p += 12 + namesz.div_ceil(4) * 4 + descsz.div_ceil(4) * 4;
        }
    }
    assert!(found, "the core has an NT_FILE note");
    out
}

#[test]
fn gcore_of_a_live_process() {
    if !have("gdb") {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    let Some((dir, exe)) = build() else { return };
    let mut child = Command::new(&exe)
        .arg("live")
        .current_dir(dir.path())
        .spawn()
        .expect("start program");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let prefix = dir.path().join("gcore");
    let out = Command::new("gcore")
        .arg("-o")
        .arg(&prefix)
        .arg(child.id().to_string())
        .output();
    let _ = child.kill();
    let _ = child.wait();
    let out = out.expect("run gcore");
    let core_path = dir.path().join(format!("gcore.{}", child.id()));
    if !out.status.success() || !core_path.exists() {
        eprintln!(
            "skipped: gcore could not attach (ptrace restrictions?): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let bytes = std::fs::read(&core_path).expect("read gcore core");
    let dump = read(&bytes).expect("read gcore core");
    assert_eq!(dump.writer.as_deref(), Some("gcore"));
    assert!(dump.crash.is_none(), "a live process has no crash");
    assert_eq!(dump.threads.len(), 2);
    assert_eq!(dump.pid, Some(child.id()));
    check_modules(&dump, &exe);
}
