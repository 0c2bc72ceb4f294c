//! Android tombstones of our own aarch64 crashes: a library (`libcrash.so`, position
//! independent as every Android library is, with a build-id and DWARF) called from a
//! program, cross-compiled with `aarch64-linux-gnu-gcc` and crashed under
//! `qemu-aarch64-static`. gdb-multiarch reads QEMU's core for the real stack (its pcs)
//! and `info sharedlibrary` with `readelf` for where each library was loaded; from those
//! the test writes the tombstone debuggerd would have written — text and
//! `tombstone.proto`, the proto encoded here by hand from AOSP's field numbers, not with
//! the reader's own structs — with each frame's `rel_pc` as libunwindstack computes it
//! (the pc's offset in the file; callers at their return address − 4, the adjustment
//! libunwindstack makes on arm64). Then `postmortem walk` and `POST /api/v1/crashes`
//! must name every frame of the libraries whose files they have (inlined frames included)
//! as `llvm-symbolizer --inlining --obj=FILE` names the same `rel_pc`, keep the device's
//! name for the program (its file deliberately not given: a missing build-id, which the
//! report and the missing-symbols page name), and analyse the crash as the signal.
//!
//! The program is linked `-no-pie` (gdb cannot relocate a PIE from QEMU's core, which has
//! no NT_FILE: see gdb_compare/aarch64.rs); Android's linker never loads such an
//! `ET_EXEC`, and postmortem's rule for `rel_pc` (an offset from a link base of 0) is not
//! meant for one, so its frames are only the missing module's here.
//!
//! Skipped, saying why, when the cross tools or llvm-symbolizer are absent (test.sh
//! installs them).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use postmortem_testsupport::gdb::{self, GdbFrame};
use postmortem_testsupport::program::Workdir;
use postmortem_testsupport::qemu;

const LIB: &str = r#"#include <stdlib.h>
volatile int *volatile target;
static inline __attribute__((always_inline)) int store(int v) { *target = v; return v + 1; }
__attribute__((noinline)) int leaf(int v) { return store(v) * 3; }
__attribute__((noinline)) int middle(int v) { return leaf(v + 1) + 7; }
__attribute__((noinline)) void fail(int v) { if (v > 2) abort(); }
__attribute__((noinline)) int checked(int v) { fail(v); return v + 1; }
"#;

const MAIN_SEGV: &str = "int middle(int);\nint main(void) { return middle(4) + 1; }\n";
const MAIN_ABORT: &str = "int checked(int);\nint main(void) { return checked(5) + 1; }\n";

const EXE_DEVICE_PATH: &str = "/system/bin/crasher";
const ABORT_MESSAGE: &str = "checked: value 5 out of range";

/// How a target's program runs and crashes.
#[derive(Clone, Copy)]
enum Runner {
    /// Under `qemu` (`-cpu`, the cross libc as `-L sysroot`), its core read by
    /// gdb-multiarch set to `gdb_arch`.
    Qemu {
        qemu: &'static str,
        cpu: &'static str,
        sysroot: &'static str,
        gdb_arch: &'static str,
    },
    /// Natively: the kernel's core, read by gdb.
    Native,
}

/// One architecture: the tools that build and crash its programs, and what debuggerd
/// writes there.
struct Target {
    /// The report's `dump.arch`.
    arch: &'static str,
    /// The tombstone's `ABI:`; the proto's `Architecture` (ARM32 0, ARM64 1, X86 2, X86_64 3).
    abi: &'static str,
    proto_arch: u64,
    cc: &'static str,
    /// Flags every compile gets (`-m32`, `-mthumb`).
    cflags: &'static [&'static str],
    /// The device's system library directory (`lib64`, `lib`).
    lib_dir: &'static str,
    /// Hex digits of a pointer as debuggerd prints it (`pointer_width * 2`).
    digits: usize,
    /// debuggerd's register rows for the crashed thread, given (pc, return address).
    registers: fn(u64, u64) -> String,
    /// The report shows a caller's pc at the device's pc + this (`Arch::call_back`, see
    /// docs/android.md).
    call_back: u64,
    run: Runner,
}

/// aarch64 under QEMU (pointer authentication off: gdb and QEMU disagree on its mask).
const AARCH64: Target = Target {
    arch: "aarch64",
    abi: "arm64",
    proto_arch: 1,
    cc: qemu::CC,
    cflags: &[],
    lib_dir: "lib64",
    digits: 16,
    registers: |pc, lr| {
        format!(
            "    x0  0000000000000005  x1  0000000000000000  x2  0000000000000000  x3  0000000000000000\n    lr  {lr:016x}  sp  0000007fffffe000  pc  {pc:016x}  pst 0000000060000000\n"
        )
    },
    call_back: 4,
    run: Runner::Qemu {
        qemu: qemu::QEMU,
        cpu: "max,pauth=off",
        sysroot: qemu::SYSROOT,
        gdb_arch: "aarch64",
    },
};

/// armhf (`armeabi-v7a`'s instruction set) under QEMU, in Thumb-2 as Debian builds its
/// armhf libc (and as Android builds its arm32 code); registers as libunwindstack's
/// `RegsArm::IterateRegisters` names them (r0–r11, ip, sp, lr, pc), `ip sp lr pc` in
/// the special row of tombstone_proto_to_text.cpp.
const ARM: Target = Target {
    arch: "arm",
    abi: "arm",
    proto_arch: 0,
    cc: "arm-linux-gnueabihf-gcc",
    cflags: &["-mthumb"],
    lib_dir: "lib",
    digits: 8,
    registers: |pc, lr| {
        format!(
            "    r0  00000005  r1  00000000  r2  00000000  r3  00000000\n    r4  00000000  r5  00000000  r6  00000000  r7  fffee8f0\n    r8  00000000  r9  00000000  r10 00000000  r11 00000000\n    ip  00000000  sp  fffee8e8  lr  {lr:08x}  pc  {pc:08x}\n"
        )
    },
    call_back: 2,
    run: Runner::Qemu {
        qemu: "qemu-arm-static",
        cpu: "cortex-a15",
        sysroot: "/usr/arm-linux-gnueabihf",
        gdb_arch: "arm",
    },
};

/// i386, crashed natively (`gcc -m32`); registers as `RegsX86::IterateRegisters` names
/// them, `ebp esp eip` in the special row.
const X86: Target = Target {
    arch: "x86",
    abi: "x86",
    proto_arch: 2,
    cc: "gcc",
    cflags: &["-m32"],
    lib_dir: "lib",
    digits: 8,
    registers: |pc, _| {
        format!(
            "    eax 00000005  ebx 00000000  ecx 00000000  edx 00000000\n    esi 00000000  edi 00000000\n    ebp ffffd0e8  esp ffffd0d0  eip {pc:08x}\n"
        )
    },
    call_back: 1,
    run: Runner::Native,
};

const X86_64: Target = Target {
    arch: "x86_64",
    abi: "x86_64",
    proto_arch: 3,
    cc: "gcc",
    cflags: &[],
    lib_dir: "lib64",
    digits: 16,
    // debuggerd's x86_64 rows (libunwindstack's register names, four to a row)
    registers: |pc, _| {
        format!(
            "    rax 0000000000000000  rbx 0000000000000000  rcx 0000000000000000  rdx 0000000000000000\n    r8  0000000000000000  r9  0000000000000000  r10 0000000000000000  r11 0000000000000000\n    r12 0000000000000000  r13 0000000000000000  r14 0000000000000000  r15 0000000000000000\n    rdi 0000000000000005  rsi 0000000000000000\n    rbp 00007fffffffe0f0  rsp 00007fffffffe0d0  rip {pc:016x}\n"
        )
    },
    call_back: 1,
    run: Runner::Native,
};

impl Target {
    fn lib_device_path(&self) -> String {
        format!(
            "/data/app/~~Xy3==/com.example.crasher-Ab1==/lib/{}/libcrash.so",
            self.abi
        )
    }

    fn libc_device_path(&self) -> String {
        format!("/apex/com.android.runtime/{}/bionic/libc.so", self.lib_dir)
    }

    /// gdb, and the commands it runs first.
    fn gdb(&self, dir: &Path) -> (&'static str, Vec<String>) {
        let search = format!("set solib-search-path {}", dir.display());
        match self.run {
            Runner::Qemu {
                sysroot, gdb_arch, ..
            } => (
                "gdb-multiarch",
                vec![
                    format!("set sysroot {sysroot}"),
                    search,
                    format!("set architecture {gdb_arch}"),
                ],
            ),
            Runner::Native => ("gdb", vec![search]),
        }
    }
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

fn tools_present(t: &Target) -> bool {
    let mut tools = vec!["llvm-symbolizer", "readelf", t.cc];
    match t.run {
        Runner::Qemu { qemu, sysroot, .. } => {
            tools.extend([qemu, "gdb-multiarch"]);
            if !Path::new(sysroot).join("lib/libc.so.6").is_file() {
                eprintln!(
                    "skipping the {} tombstones: no cross libc under {sysroot}",
                    t.arch
                );
                return false;
            }
        }
        Runner::Native => tools.push("gdb"),
    }
    for tool in tools {
        if !have(tool) {
            eprintln!(
                "skipping the {} tombstones: {tool} is not installed (see test.sh)",
                t.arch
            );
            return false;
        }
    }
    if t.cflags.contains(&"-m32") {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("probe.c");
        std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
        let linked = Command::new(t.cc)
            .arg("-m32")
            .arg(&src)
            .arg("-o")
            .arg(dir.path().join("probe"))
            .output()
            .is_ok_and(|o| o.status.success());
        if !linked {
            eprintln!("skipping the x86 tombstones: gcc -m32 cannot link (gcc-12-multilib)");
            return false;
        }
    }
    true
}

/// A module the crash ran in, as the reference tools place it.
#[derive(Debug, Clone)]
struct Lib {
    /// The file on this machine.
    file: PathBuf,
    /// Where the tombstone says it lies.
    device_path: String,
    /// The run-time address of its virtual address 0 (gdb's `.text` start − `.text`'s
    /// address in the file); 0 for the `ET_EXEC` program.
    base: u64,
    /// The addresses its code lies at: gdb's `.text` range for a library, its `PT_LOAD`s
    /// for the program.
    text: (u64, u64),
    build_id: String,
    /// Its mapping (for the memory map): start, end.
    map: (u64, u64),
}

/// One frame of the tombstone.
#[derive(Debug, Clone)]
struct TFrame {
    rel_pc: u64,
    /// The absolute pc debuggerd records (adjusted as `rel_pc`).
    pc: u64,
    /// gdb's pc (a caller's return address).
    gdb_pc: u64,
    /// Its module in `Crash::libs`; `None` for the vDSO (no file: `[vdso]`).
    lib: Option<usize>,
    function: Option<String>,
    function_offset: u64,
}

/// A crash, its modules and its frames as debuggerd would list them.
struct Crash {
    target: &'static Target,
    work: Workdir,
    libs: Vec<Lib>,
    frames: Vec<TFrame>,
    lwp: u64,
    signal: (u32, &'static str, i32, &'static str, Option<u64>),
    abort_message: Option<&'static str>,
    /// A GWP-ASan use-after-free: (deallocating thread, allocating thread); see
    /// [`as_use_after_free`].
    heap: Option<(u64, u64)>,
}

/// The build-id `readelf -n` prints for `file`.
fn build_id(file: &Path) -> String {
    let out = run(Command::new("readelf").arg("-n").arg(file));
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("{} has no build-id", file.display()))
        .trim()
        .to_string()
}

/// `.text`'s address in `file` (`readelf -SW`).
fn text_address(file: &Path) -> u64 {
    let out = run(Command::new("readelf").arg("-SW").arg(file));
    let line = out
        .lines()
        .find(|l| l.contains(" .text "))
        .expect("a .text section");
    let after = line.split(" .text ").nth(1).unwrap();
    let addr = after.split_whitespace().nth(1).unwrap();
    u64::from_str_radix(addr, 16).unwrap()
}

/// `file`'s `PT_LOAD`s (`readelf -lW`): (offset, vaddr, filesz, memsz).
fn loads(file: &Path) -> Vec<(u64, u64, u64, u64)> {
    let out = run(Command::new("readelf").arg("-lW").arg(file));
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.first() != Some(&"LOAD") {
                return None;
            }
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            Some((hex(w[1])?, hex(w[2])?, hex(w[4])?, hex(w[5])?))
        })
        .collect()
}

/// The 4 bytes of `file` at its virtual address `vaddr`, little-endian.
fn word_at(file: &Path, vaddr: u64) -> u32 {
    let (offset, start, _, _) = loads(file)
        .into_iter()
        .find(|&(_, v, filesz, _)| v <= vaddr && vaddr + 4 <= v + filesz)
        .unwrap_or_else(|| panic!("{vaddr:#x} is in no PT_LOAD of {}", file.display()));
    let bytes = std::fs::read(file).unwrap();
    let at = usize::try_from(vaddr - start + offset).unwrap();
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

/// gdb's `info sharedlibrary`: (.text start, end, path) of each library.
fn shared_libraries(
    t: &Target,
    work: &Workdir,
    exe: &Path,
    core: &Path,
) -> Vec<(u64, u64, PathBuf)> {
    let (gdb, setup) = t.gdb(work.path());
    let mut cmd = Command::new(gdb);
    cmd.args(["-batch", "-nx"]);
    for s in &setup {
        cmd.args(["-ex", s]);
    }
    let out = run(cmd
        .args(["-ex", "info sharedlibrary"])
        .arg(exe)
        .arg(core)
        .env("LC_ALL", "C"));
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let hex = |s: &str| u64::from_str_radix(s.strip_prefix("0x")?, 16).ok();
            let (from, to) = (hex(w.first()?)?, hex(w.get(1)?)?);
            Some((from, to, PathBuf::from(w.last()?)))
        })
        .collect()
}

/// gdb's `info auxv`: the vDSO's address (`AT_SYSINFO_EHDR`), if the process had one.
fn vdso_base(t: &Target, work: &Workdir, exe: &Path, core: &Path) -> Option<u64> {
    let (gdb, setup) = t.gdb(work.path());
    let mut cmd = Command::new(gdb);
    cmd.args(["-batch", "-nx"]);
    for s in &setup {
        cmd.args(["-ex", s]);
    }
    let out = cmd
        .args(["-ex", "info auxv"])
        .arg(exe)
        .arg(core)
        .env("LC_ALL", "C")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let hex = l
            .contains("AT_SYSINFO_EHDR")
            .then(|| l.split_whitespace().last())??;
        u64::from_str_radix(hex.strip_prefix("0x")?, 16).ok()
    })
}

/// `readelf -sW`'s value of the function `name` in `file` (`.symtab`, else `.dynsym`),
/// for the device's own `(function+offset)`; a Thumb function's has its low bit set
/// (`nm` would clear it).
fn symbol_start(file: &Path, name: &str) -> Option<u64> {
    let out = Command::new("readelf").arg("-sW").arg(file).output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        let bare = w.get(7)?.split('@').next()?;
        (w.len() == 8 && w[3] == "FUNC" && bare == name)
            .then(|| u64::from_str_radix(w[1], 16).ok())?
    })
}

/// libunwindstack's pc adjustment of a caller frame whose return address is `ra` (in
/// `file`'s virtual addresses): 4 on arm64, 1 on x86; on arm (`RegsArm::GetPcAdjustment`)
/// 4 for ARM code, and for Thumb code (a return address with its low bit set) 4 after a
/// 32-bit `bl`/`blx` (the halfwords before it match `0xe000f000`), else 2.
fn pc_adjustment(t: &Target, file: &Path, ra: u64) -> u64 {
    match t.abi {
        "arm64" => 4,
        "x86" | "x86_64" => 1,
        _ => {
            let thumb_ra = ra | 1;
            let value = word_at(file, thumb_ra - 5);
            if value & 0xe000_f000 == 0xe000_f000 {
                4
            } else {
                2
            }
        }
    }
}

/// Builds the library and `main`, crashes the program and lays out its tombstone frames
/// from gdb's.
fn crash(t: &'static Target, case: &str, main: &str) -> Crash {
    let work = Workdir::new(&format!("tomb-{}-{case}", t.arch));
    let dir = work.path().to_path_buf();
    std::fs::write(dir.join("lib.c"), LIB).unwrap();
    std::fs::write(dir.join("main.c"), main).unwrap();
    let mut lib_flags = t.cflags.to_vec();
    lib_flags.extend([
        "-g",
        "-O1",
        "-fPIC",
        "-shared",
        "-Wl,--build-id",
        "-o",
        "libcrash.so",
        "lib.c",
    ]);
    work.run_tool(t.cc, &lib_flags);
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    let mut exe_flags = t.cflags.to_vec();
    exe_flags.extend([
        "-g",
        "-O1",
        "-no-pie",
        "-Wl,--build-id",
        "-o",
        "crasher",
        "main.c",
        "-L.",
        "-lcrash",
        &rpath,
    ]);
    work.run_tool(t.cc, &exe_flags);
    let exe = dir.join("crasher");
    let core = match t.run {
        Runner::Qemu {
            qemu, cpu, sysroot, ..
        } => qemu::crash_under(qemu, &dir, &exe, cpu, sysroot),
        Runner::Native => work.crash(&exe),
    };
    let (gdb_name, setup) = t.gdb(&dir);
    let setup: Vec<&str> = setup.iter().map(String::as_str).collect();
    let g = gdb::frames_with(gdb_name, &setup, &dir, &exe, &core);
    let thread = g.crashed();
    let lwp = thread.lwp;
    let physical: Vec<GdbFrame> = thread
        .frames
        .iter()
        .filter(|f| f.kind != "INLINE")
        .cloned()
        .collect();
    let exe_range = loads(&exe)
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), &(_, v, _, m)| {
            (lo.min(v), hi.max(v + m))
        });
    let mut libs = vec![Lib {
        file: exe.clone(),
        device_path: EXE_DEVICE_PATH.to_string(),
        base: 0,
        text: exe_range,
        build_id: build_id(&exe),
        map: (0, 0),
    }];
    for (from, to, path) in shared_libraries(t, &work, &exe, &core) {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let device_path = match name.as_str() {
            "libcrash.so" => t.lib_device_path(),
            n if n.starts_with("libc.so") => t.libc_device_path(),
            _ => continue,
        };
        let base = from - text_address(&path);
        let size = std::fs::metadata(&path).unwrap().len();
        libs.push(Lib {
            build_id: build_id(&path),
            file: path,
            device_path,
            base,
            text: (from, to),
            map: (base, (base + size).next_multiple_of(0x1000)),
        });
    }
    assert!(libs.len() == 3, "gdb lists libcrash.so and libc: {libs:#?}");
    let vdso = vdso_base(t, &work, &exe, &core);
    let frames = physical
        .iter()
        .enumerate()
        .map(|(k, f)| tombstone_frame(t, &libs, vdso, k, f))
        .collect::<Vec<_>>();
    assert!(frames.len() >= 3, "gdb's frames: {physical:#?}");
    let abort = main.contains("checked");
    Crash {
        target: t,
        work,
        libs,
        frames,
        lwp,
        signal: if abort {
            (6, "SIGABRT", -6, "SI_TKILL", None)
        } else {
            (11, "SIGSEGV", 1, "SEGV_MAPERR", Some(0))
        },
        abort_message: abort.then_some(ABORT_MESSAGE),
        heap: None,
    }
}

/// The heap object of the GWP-ASan report: its address (the fault, in GWP-ASan's guarded
/// page) and size.
const HEAP_OBJECT: (u64, u64) = (0x007a_6a2c_bff0, 32);
/// debuggerd's cause for it (`gwp_asan.cpp`'s format).
const GWP_ASAN_CAUSE: &str =
    "[GWP-ASan]: Use After Free, 0 bytes into a 32-byte allocation at 0x7a6a2cbff0";

/// The crash as GWP-ASan would have reported a use-after-free at it: a SEGV_ACCERR in the
/// guarded page, the cause, and the object's deallocation and allocation backtraces —
/// here the crash's own callers (frames 1.. and 2..: real frames of these binaries as
/// libunwindstack lists a recorded trace, every frame a return address adjusted back).
fn as_use_after_free(mut c: Crash) -> Crash {
    c.signal = (11, "SIGSEGV", 2, "SEGV_ACCERR", Some(HEAP_OBJECT.0));
    c.heap = Some((c.lwp + 1, c.lwp));
    c
}

/// A heap error's backtraces: (debuggerd's heading, its frames).
fn heap_stacks(c: &Crash) -> Vec<(String, &[TFrame])> {
    match c.heap {
        Some((dealloc, alloc)) => vec![
            (format!("deallocated by thread {dealloc}"), &c.frames[1..]),
            (format!("allocated by thread {alloc}"), &c.frames[2..]),
        ],
        None => Vec::new(),
    }
}

/// Frame lines as tombstone_proto_to_text.cpp's `print_backtrace` writes them.
fn frame_lines(c: &Crash, frames: &[TFrame]) -> String {
    let w = c.target.digits;
    let mut s = String::new();
    for (k, f) in frames.iter().enumerate() {
        let (path, id) = match f.lib {
            Some(l) => (c.libs[l].device_path.as_str(), Some(&c.libs[l].build_id)),
            None => ("[vdso]", None),
        };
        write!(s, "      #{k:02} pc {:0w$x}  {path}", f.rel_pc).unwrap();
        if let Some(name) = &f.function {
            write!(s, " ({name}+{})", f.function_offset).unwrap();
        }
        if let Some(id) = id {
            write!(s, " (BuildId: {id})").unwrap();
        }
        s.push('\n');
    }
    s
}

/// gdb's frame `k` as debuggerd lists it: its module, `rel_pc` (a caller's adjusted as
/// libunwindstack adjusts it), and its function with the offset from the symbol.
fn tombstone_frame(t: &Target, libs: &[Lib], vdso: Option<u64>, k: usize, f: &GdbFrame) -> TFrame {
    let lib = libs
        .iter()
        .position(|l| l.text.0 <= f.pc && f.pc < l.text.1);
    let Some(lib) = lib else {
        // the vDSO: no file; its rel_pc from the vDSO's start (linked at 0)
        let base = vdso.unwrap_or_else(|| panic!("frame {k} at {:#x} is in no module", f.pc));
        let adjust = if k == 0 { 0 } else { t.call_back };
        return TFrame {
            rel_pc: f.pc - adjust - base,
            pc: f.pc - adjust,
            gdb_pc: f.pc,
            lib: None,
            function: f.name.clone(),
            function_offset: 0,
        };
    };
    let l = &libs[lib];
    let symbol = f.name.as_deref().and_then(|n| symbol_start(&l.file, n));
    let ra = f.pc - l.base;
    let thumb = t.abi == "arm";
    if thumb {
        if let Some(s) = symbol {
            assert_eq!(s & 1, 1, "{:?} is Thumb code, as the test assumes", f.name);
        }
    }
    // a Thumb frame's pc keeps its low bit in libunwindstack (gdb's has it cleared);
    // frame 0's pc is the pc register, even
    let (adjust, low) = match k {
        0 => (0, 0),
        _ => (pc_adjustment(t, &l.file, ra), u64::from(thumb)),
    };
    let rel_pc = (ra | low) - adjust;
    TFrame {
        rel_pc,
        pc: (f.pc | low) - adjust,
        gdb_pc: f.pc,
        lib: Some(lib),
        function: f.name.clone(),
        function_offset: symbol.map_or(0, |s| rel_pc.saturating_sub(s & !1)),
    }
}

/// The text tombstone debuggerd (tombstone_proto_to_text.cpp) writes for the crash; the
/// program left out of the memory map (no address for it: made up by the reader).
fn tombstone_text(c: &Crash) -> String {
    let t = c.target;
    let w = t.digits;
    let (number, name, code, code_name, addr) = c.signal;
    let mut s = String::new();
    s.push_str("*** *** *** *** *** *** *** *** *** *** *** *** *** *** *** ***\n");
    s.push_str(
        "Build fingerprint: 'google/raven/raven:14/UQ1A.240105.004/11206848:user/release-keys'\n",
    );
    writeln!(s, "Revision: 'MP1.0'\nABI: '{}'", t.abi).unwrap();
    s.push_str("Timestamp: 2024-01-20 10:11:12.123456789+0000\nProcess uptime: 1s\n");
    writeln!(s, "Cmdline: {EXE_DEVICE_PATH}").unwrap();
    writeln!(
        s,
        "pid: {0}, tid: {0}, name: crasher  >>> {EXE_DEVICE_PATH} <<<",
        c.lwp
    )
    .unwrap();
    s.push_str("uid: 2000\n");
    if t.abi == "arm64" {
        s.push_str("tagged_addr_ctrl: 0000000000000001 (PR_TAGGED_ADDR_ENABLE)\n");
    }
    let fault = addr.map_or("--------".to_string(), |a| format!("0x{a:0w$x}"));
    writeln!(
        s,
        "signal {number} ({name}), code {code} ({code_name}), fault addr {fault}"
    )
    .unwrap();
    if c.heap.is_some() {
        writeln!(s, "Cause: {GWP_ASAN_CAUSE}").unwrap();
    } else if number == 11 {
        s.push_str("Cause: null pointer dereference\n");
    }
    if let Some(m) = c.abort_message {
        writeln!(s, "Abort message: '{m}'").unwrap();
    }
    let ra = c.frames.get(1).map_or(0, |f| f.gdb_pc);
    s.push_str(&(t.registers)(c.frames[0].pc, ra));
    writeln!(s, "\n{} total frames\nbacktrace:", c.frames.len()).unwrap();
    s.push_str(&frame_lines(c, &c.frames));
    for (heading, frames) in heap_stacks(c) {
        writeln!(s, "\n{heading}:").unwrap();
        s.push_str(&frame_lines(c, frames));
    }
    writeln!(s, "\nmemory near {}:", if w == 16 { "x1" } else { "r1" }).unwrap();
    if w == 16 {
        s.push_str("    0000007fffffe000 0000000000000000 0000000000000000  ................\n\n");
    } else {
        s.push_str("    fffee000 00000000 00000000 00000000 00000000  ................\n\n");
    }
    writeln!(s, "memory map ({} entries):", c.libs.len() - 1).unwrap();
    let pointer = |p: u64| {
        if w == 16 {
            format!("{:08x}'{:08x}", p >> 32, p & 0xffff_ffff)
        } else {
            format!("{p:08x}")
        }
    };
    for l in c.libs.iter().skip(1) {
        writeln!(
            s,
            "    {}-{} r-x         0  {:8x}  {} (BuildId: {})",
            pointer(l.map.0),
            pointer(l.map.1 - 1),
            l.map.1 - l.map.0,
            l.device_path,
            l.build_id
        )
        .unwrap();
    }
    s.push_str("\nopen files:\n    fd 0: /dev/null (unowned)\n");
    s
}

/// The `adb logcat -v` formats the tests print a tombstone's logged lines in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Logcat {
    /// liblog's `"%s %s%5d %5d %c %-8.*s: "` (adb's default)
    Threadtime,
    /// `"%c/%-8.*s(%s%5d): "`
    Brief,
    /// a header `"[ %s %s%5d:%5d %c/%-8.*s ]"`, the message, a blank line; with
    /// `-v color`'s `ESC[38;5;Nm` … `ESC[0m` around each entry
    LongColor,
    /// `"%c(%s%5d) "`, the message, `"  (%s)"` (the tag)
    Process,
    /// `"%c(%s%5d:%5d) "` (no tag)
    Thread,
}

impl Logcat {
    const ALL: [Logcat; 5] = [
        Logcat::Threadtime,
        Logcat::Brief,
        Logcat::LongColor,
        Logcat::Process,
        Logcat::Thread,
    ];

    /// One entry as this format prints it.
    fn entry(self, out: &mut String, k: usize, ids: (u64, u64), (p, tag): (char, &str), msg: &str) {
        let (pid, tid) = ids;
        match self {
            Logcat::Threadtime => {
                writeln!(out, "11-29 14:35:46.{k:03} {pid:5} {tid:5} {p} {tag:<8}: {msg}")
            }
            Logcat::Brief => writeln!(out, "{p}/{tag:<8}({pid:5}): {msg}"),
            Logcat::LongColor => write!(
                out,
                "\x1b[38;5;196m[ 11-29 14:35:46.{k:03} {pid:5}:{tid:5} {p}/{tag:<8} ]\n{msg}\x1b[0m\n\n"
            ),
            Logcat::Process => writeln!(out, "{p}({pid:5}) {msg}  ({tag})"),
            Logcat::Thread => writeln!(out, "{p}({pid:5}:{tid:5}) {msg}"),
        }
        .unwrap();
    }
}

/// The lines of `tombstone_text` debuggerd also logs (libdebuggerd's `CBL` lines: up to
/// the crashed thread's backtrace; blank lines are not logged), as `adb logcat` prints
/// them in `format` (liblog's `android_log_formatLogLine`), with other processes' lines
/// between them (crash_dump's pid is not the crashed one's).
fn tombstone_logcat(c: &Crash, format: Logcat) -> String {
    let text = tombstone_text(c);
    let dumper = 31337;
    let mut out = String::from("--------- beginning of crash\n");
    let fatal = format!(
        "Fatal signal {1} ({2}), code {3} in tid {0} (crasher), pid {0} (crasher)",
        c.lwp, c.signal.0, c.signal.1, c.signal.2
    );
    format.entry(&mut out, 1, (c.lwp, c.lwp), ('F', "libc"), &fatal);
    for (k, line) in text
        .lines()
        .take_while(|l| !l.starts_with("memory near"))
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        format.entry(&mut out, k + 100, (dumper, dumper), ('F', "DEBUG"), line);
        if k % 5 == 2 {
            let died = format!("Process com.example.crasher (pid {}) has died", c.lwp);
            format.entry(
                &mut out,
                k + 100,
                (1000, 1207),
                ('I', "ActivityManager"),
                &died,
            );
        }
    }
    out
}

/// Protocol buffers, written by hand: a varint, a key, a length-delimited field.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}
fn field_varint(out: &mut Vec<u8>, field: u64, v: u64) {
    varint(out, field << 3);
    varint(out, v);
}
fn field_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The tombstone.proto debuggerd writes for the crash, by AOSP's `tombstone.proto`
/// field numbers (Tombstone: arch 1, build_fingerprint 2, pid 5, tid 6, uid 7,
/// command_line 9, signal_info 10, abort_message 14, causes 15, threads 16 (map entry:
/// key 1, value 2), memory_mappings 17; Signal: number 1, name 2, code 3, code_name 4,
/// has_fault_address 8, fault_address 9; Thread: id 1, name 2, registers 3,
/// current_backtrace 4; Register: name 1, u64 2; BacktraceFrame: rel_pc 1, pc 2, sp 3,
/// function_name 4, function_offset 5, file_name 6, build_id 8; MemoryMapping:
/// begin_address 1, end_address 2, offset 3, read 4, execute 6, mapping_name 7,
/// build_id 8).
fn tombstone_proto(c: &Crash) -> Vec<u8> {
    let (number, name, code, code_name, addr) = c.signal;
    let mut t = Vec::new();
    // proto3 leaves a 0 (ARM32) out
    if c.target.proto_arch != 0 {
        field_varint(&mut t, 1, c.target.proto_arch);
    }
    field_bytes(
        &mut t,
        2,
        b"google/raven/raven:14/UQ1A.240105.004/11206848:user/release-keys",
    );
    field_varint(&mut t, 5, c.lwp);
    field_varint(&mut t, 6, c.lwp);
    field_varint(&mut t, 7, 2000);
    field_bytes(&mut t, 9, EXE_DEVICE_PATH.as_bytes());
    let mut s = Vec::new();
    field_varint(&mut s, 1, u64::from(number));
    field_bytes(&mut s, 2, name.as_bytes());
    field_varint(&mut s, 3, code as i64 as u64);
    field_bytes(&mut s, 4, code_name.as_bytes());
    if let Some(a) = addr {
        field_varint(&mut s, 8, 1);
        field_varint(&mut s, 9, a);
    }
    field_bytes(&mut t, 10, &s);
    if let Some(m) = c.abort_message {
        field_bytes(&mut t, 14, m.as_bytes());
    }
    if let Some((dealloc_tid, alloc_tid)) = c.heap {
        // Cause: human_readable 1, memory_error 2 (MemoryError: tool 1 (GWP_ASAN 0), type
        // 2 (USE_AFTER_FREE 1), heap 3 (HeapObject: address 1, size 2, allocation_tid 3,
        // allocation_backtrace 4, deallocation_tid 5, deallocation_backtrace 6))
        let stacks = heap_stacks(c);
        let mut heap = Vec::new();
        field_varint(&mut heap, 1, HEAP_OBJECT.0);
        field_varint(&mut heap, 2, HEAP_OBJECT.1);
        field_varint(&mut heap, 3, alloc_tid);
        for f in stacks[1].1 {
            field_bytes(&mut heap, 4, &frame_pb(c, f));
        }
        field_varint(&mut heap, 5, dealloc_tid);
        for f in stacks[0].1 {
            field_bytes(&mut heap, 6, &frame_pb(c, f));
        }
        let mut error = Vec::new();
        field_varint(&mut error, 2, 1);
        field_bytes(&mut error, 3, &heap);
        let mut cause = Vec::new();
        field_bytes(&mut cause, 1, GWP_ASAN_CAUSE.as_bytes());
        field_bytes(&mut cause, 2, &error);
        field_bytes(&mut t, 15, &cause);
    } else if number == 11 {
        let mut cause = Vec::new();
        field_bytes(&mut cause, 1, b"null pointer dereference");
        field_bytes(&mut t, 15, &cause);
    }
    let mut thread = Vec::new();
    field_varint(&mut thread, 1, c.lwp);
    field_bytes(&mut thread, 2, b"crasher");
    let pc_name = match c.target.abi {
        "x86" => "eip",
        _ => "pc",
    };
    for (reg, v) in [
        (if pc_name == "eip" { "eax" } else { "r0" }, 5),
        (pc_name, c.frames[0].pc),
    ] {
        let mut r = Vec::new();
        field_bytes(&mut r, 1, reg.as_bytes());
        field_varint(&mut r, 2, v);
        field_bytes(&mut thread, 3, &r);
    }
    for f in &c.frames {
        field_bytes(&mut thread, 4, &frame_pb(c, f));
    }
    let mut entry = Vec::new();
    field_varint(&mut entry, 1, c.lwp);
    field_bytes(&mut entry, 2, &thread);
    field_bytes(&mut t, 16, &entry);
    for l in c.libs.iter().skip(1) {
        let mut m = Vec::new();
        field_varint(&mut m, 1, l.map.0);
        field_varint(&mut m, 2, l.map.1);
        field_varint(&mut m, 4, 1);
        field_varint(&mut m, 6, 1);
        field_bytes(&mut m, 7, l.device_path.as_bytes());
        field_bytes(&mut m, 8, l.build_id.as_bytes());
        field_bytes(&mut t, 17, &m);
    }
    t
}

/// A `BacktraceFrame` message.
fn frame_pb(c: &Crash, f: &TFrame) -> Vec<u8> {
    let mut fr = Vec::new();
    field_varint(&mut fr, 1, f.rel_pc);
    field_varint(&mut fr, 2, f.pc);
    field_varint(&mut fr, 3, 0xffff_e000);
    if let Some(n) = &f.function {
        field_bytes(&mut fr, 4, n.as_bytes());
        field_varint(&mut fr, 5, f.function_offset);
    }
    match f.lib {
        Some(l) => {
            field_bytes(&mut fr, 6, c.libs[l].device_path.as_bytes());
            field_bytes(&mut fr, 8, c.libs[l].build_id.as_bytes());
        }
        None => field_bytes(&mut fr, 6, b"[vdso]"),
    }
    fr
}

/// llvm-symbolizer's inline stack at `addr` of `file`.
fn symbolize(file: &Path, addr: u64) -> Vec<Value> {
    let out = run(Command::new("llvm-symbolizer")
        .arg(format!("--obj={}", file.display()))
        .args(["--inlining", "--output-style=JSON"])
        .arg(format!("{addr:#x}")));
    let v: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    v[0]["Symbol"].as_array().unwrap().clone()
}

/// Whether `a` and `b` name the same address in the symbol tables of `lib` and of its
/// debug file under `/usr/lib/debug/.build-id` (versions, `@GLIBC_…`, dropped).
fn aliases(lib: &Path, a: &str, b: &str) -> bool {
    let mut files = vec![lib.to_path_buf()];
    let notes = run(Command::new("readelf").arg("-n").arg(lib));
    if let Some(id) = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .filter(|id| id.len() > 2)
    {
        let (dir, rest) = id.split_at(2);
        files.push(PathBuf::from(format!(
            "/usr/lib/debug/.build-id/{dir}/{rest}.debug"
        )));
    }
    let address = |name: &str| -> Vec<String> {
        let mut found = Vec::new();
        for f in files.iter().filter(|f| f.is_file()) {
            let out = run(Command::new("llvm-nm").arg("--defined-only").arg(f));
            for line in out.lines() {
                let mut words = line.split_whitespace();
                if let (Some(addr), Some(_), Some(sym)) = (words.next(), words.next(), words.next())
                {
                    if sym.split('@').next() == Some(name) {
                        found.push(addr.to_string());
                    }
                }
            }
        }
        found
    };
    let at_a = address(a);
    address(b).iter().any(|x| at_a.contains(x))
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

/// The directory `--symbols` gets: libcrash.so and the cross libc, not the program.
fn symbols_dir(c: &Crash) -> PathBuf {
    let dir = c.work.path().join("symbols");
    std::fs::create_dir_all(&dir).unwrap();
    for l in c.libs.iter().skip(1) {
        std::fs::copy(&l.file, dir.join(l.file.file_name().unwrap())).unwrap();
    }
    dir
}

/// Every frame of the crashed thread against llvm-symbolizer at the frame's `rel_pc`
/// (libraries given), or the device's name (the program, whose file is missing).
fn check_frames(c: &Crash, report: &Value, what: &str, real_addresses: bool) {
    let thread = &report["threads"][0];
    assert_eq!(thread["crashed"], true, "{what}");
    check_stack(c, thread, &c.frames, what, real_addresses);
    // the libcrash frames carry DWARF (file and line), inlined `store` among them
    let lib_lines = physical(thread)
        .iter()
        .flatten()
        .filter(|f| f["module"] == "libcrash.so" && f["line"].is_u64())
        .count();
    assert!(lib_lines >= 2, "{what}: {thread:#}");
}

/// Every frame of a report's thread (or stack) against `frames` of the tombstone:
/// llvm-symbolizer at the frame's `rel_pc` where the library is given, else the device's
/// name.
fn check_stack(c: &Crash, thread: &Value, frames: &[TFrame], what: &str, real_addresses: bool) {
    let groups = physical(thread);
    assert_eq!(groups.len(), frames.len(), "{what}: {thread:#}");
    for (k, (f, got)) in frames.iter().zip(&groups).enumerate() {
        let Some(lib) = f.lib else {
            // the vDSO: no file, the device's name
            assert_eq!(got.len(), 1, "{what}: frame {k}: {got:#?}");
            assert_eq!(
                got[0]["function"].as_str(),
                f.function.as_deref(),
                "{what}: frame {k}: {got:#?}"
            );
            continue;
        };
        let l = &c.libs[lib];
        let module = l.device_path.rsplit('/').next().unwrap();
        assert_eq!(got[0]["module"], module, "{what}: frame {k}");
        if lib == 0 {
            assert_eq!(got.len(), 1, "{what}: frame {k}: {got:#?}");
            assert_eq!(
                got[0]["function"].as_str(),
                f.function.as_deref(),
                "{what}: frame {k}"
            );
            assert_eq!(got[0]["symbol_source"], "report", "{what}: frame {k}");
            continue;
        }
        let expected = symbolize(&l.file, f.rel_pc);
        assert_eq!(
            got.len(),
            expected.len(),
            "{what}: frame {k} at {:#x}: {got:#?} vs {expected:#?}",
            f.rel_pc
        );
        for (g, e) in got.iter().zip(&expected) {
            // where llvm-symbolizer knows no name (libc's static functions: the cross
            // libc has no .symtab), the frame keeps the device's, if it gave one
            let function = e["FunctionName"]
                .as_str()
                .filter(|f| !f.is_empty())
                .or(f.function.as_deref());
            // llvm-symbolizer prefers the symbol table's name, gdb and we the DWARF
            // one: for the machine's libc (x86_64) they are aliases of one function
            // (`__libc_start_main` and `__libc_start_main_impl`)
            let same = match (g["function"].as_str(), function) {
                (Some(ours), Some(theirs)) if ours != theirs => aliases(&l.file, ours, theirs),
                _ => false,
            };
            if !same {
                assert_eq!(g["function"].as_str(), function, "{what}: frame {k}: {g:#}");
            }
            let file = e["FileName"].as_str().filter(|f| !f.is_empty());
            // a relative path (glibc's) as llvm-symbolizer joins it with its unit's
            // relative directory (`./nptl/./nptl/pthread_kill.c`), and as the line
            // table names it (gdb and we: `./nptl/pthread_kill.c`)
            let relative_same = match (g["file"].as_str(), file) {
                (Some(ours), Some(theirs))
                    if !ours.starts_with('/') && !theirs.starts_with('/') =>
                {
                    let ours = ours.trim_start_matches("./");
                    theirs.ends_with(&format!("/{ours}"))
                }
                _ => false,
            };
            if !relative_same {
                assert_eq!(g["file"].as_str(), file, "{what}: frame {k}: {g:#}");
            }
            let line = e["Line"].as_u64().filter(|&l| l != 0);
            assert_eq!(g["line"].as_u64(), line, "{what}: frame {k}: {g:#}");
        }
        if real_addresses {
            // the device's address space: frame 0 at its pc, callers at the device's pc +
            // the call-back, which on arm64 and x86 (adjusted by as much) is their return
            // address as gdb shows it
            let pc = got[0]["pc"].as_str().unwrap();
            let expected = match (k, c.target.abi) {
                (0, _) => f.gdb_pc,
                (_, "arm") => f.pc + c.target.call_back,
                _ => f.gdb_pc,
            };
            assert_eq!(pc, format!("{expected:#x}"), "{what}: frame {k}'s pc");
        }
    }
}

/// The crash as the signal: the analysis, the abort message, debuggerd's cause; the
/// program's missing build-id named.
fn check_crash(c: &Crash, report: &Value, what: &str) {
    let crash = &report["crash"];
    assert_eq!(crash["signal"], c.signal.0, "{what}: {crash:#}");
    let analysis = &crash["analysis"];
    if c.heap.is_some() {
        check_use_after_free(c, report, what);
    } else if c.signal.0 == 11 {
        assert_eq!(analysis["kind"], "null-pointer", "{what}: {crash:#}");
        assert_eq!(
            analysis["evidence"]["cause"], "null pointer dereference",
            "{what}"
        );
    } else {
        assert_eq!(analysis["kind"], "abort", "{what}: {crash:#}");
        let text = analysis.to_string();
        assert!(text.contains(ABORT_MESSAGE), "{what}: {analysis:#}");
    }
    let exe_id = &c.libs[0].build_id;
    let warnings = report["warnings"].as_array().unwrap();
    let missing: Vec<&Value> = warnings
        .iter()
        .filter(|w| w["code"] == "missing-build-id")
        .collect();
    assert_eq!(missing.len(), 1, "{what}: {warnings:#?}");
    assert!(
        missing[0]["message"]
            .as_str()
            .unwrap()
            .contains(exe_id.as_str()),
        "{what}: {missing:#?}"
    );
    let exe = report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "crasher")
        .expect("the program is a module");
    assert_eq!(exe["build_id"].as_str(), Some(exe_id.as_str()), "{what}");
    assert_eq!(exe["status"], "missing", "{what}");
}

/// GWP-ASan's diagnosis as the analysis: its kind, the object, and the deallocation and
/// allocation backtraces as its stacks, each frame as llvm-symbolizer names it; the
/// report's threads stay the process's.
fn check_use_after_free(c: &Crash, report: &Value, what: &str) {
    let analysis = &report["crash"]["analysis"];
    assert_eq!(analysis["kind"], "use-after-free", "{what}: {analysis:#}");
    let evidence = &analysis["evidence"];
    assert_eq!(evidence["tool"], "GWP-ASan", "{what}");
    assert_eq!(evidence["allocation"], "0x7a6a2cbff0", "{what}");
    assert_eq!(evidence["allocation_size"], "32", "{what}");
    assert_eq!(evidence["cause"], GWP_ASAN_CAUSE, "{what}");
    assert_eq!(report["threads"].as_array().unwrap().len(), 1, "{what}");
    let stacks = analysis["stacks"].as_array().unwrap();
    let expected = heap_stacks(c);
    assert_eq!(stacks.len(), expected.len(), "{what}: {analysis:#}");
    for (got, (heading, frames)) in stacks.iter().zip(&expected) {
        assert_eq!(got["name"].as_str(), Some(heading.as_str()), "{what}");
        assert_eq!(got["crashed"], false, "{what}");
        check_stack(c, got, frames, &format!("{what}: {heading}"), false);
    }
}

/// `postmortem walk FILE --symbols DIR` as JSON. The system's debug files
/// (`/usr/lib/debug/.build-id`) are looked in as llvm-symbolizer looks in them: the
/// x86_64 cases' libc is the machine's, whose libc6-dbg file both sides then read.
fn walk(file: &Path, symbols: &Path) -> Value {
    let out = run(Command::new(common::bin())
        .args(["walk", "--format", "json"])
        .arg(file)
        .arg("--symbols")
        .arg(symbols)
        .env_remove("DEBUGINFOD_URLS"));
    serde_json::from_str(&out).unwrap()
}

#[test]
fn tombstones_of_our_aarch64_crashes_symbolicate_as_llvm_symbolizer_does() {
    symbolicate_as_llvm_symbolizer(&AARCH64);
}

#[test]
fn tombstones_of_our_arm32_crashes_symbolicate_as_llvm_symbolizer_does() {
    symbolicate_as_llvm_symbolizer(&ARM);
}

#[test]
fn tombstones_of_our_x86_64_crashes_symbolicate_as_llvm_symbolizer_does() {
    symbolicate_as_llvm_symbolizer(&X86_64);
}

#[test]
fn tombstones_of_our_x86_crashes_symbolicate_as_llvm_symbolizer_does() {
    symbolicate_as_llvm_symbolizer(&X86);
}

/// Each case crashed on `t`, its tombstone as text, proto and logcat (threadtime and
/// brief), walked with the libraries' files: every frame as gdb and llvm-symbolizer say.
fn symbolicate_as_llvm_symbolizer(t: &'static Target) {
    if !tools_present(t) {
        return;
    }
    for (case, main) in [("segv", MAIN_SEGV), ("abort", MAIN_ABORT)] {
        let c = crash(t, case, main);
        let symbols = symbols_dir(&c);
        let text = c.work.path().join("tombstone_00");
        std::fs::write(&text, tombstone_text(&c)).unwrap();
        let pb = c.work.path().join("tombstone_00.pb");
        std::fs::write(&pb, tombstone_proto(&c)).unwrap();
        let mut files = vec![
            (text, "android-tombstone", false),
            (pb, "android-tombstone-proto", false),
        ];
        for format in Logcat::ALL {
            let log = c.work.path().join(format!("logcat-{format:?}.txt"));
            std::fs::write(&log, tombstone_logcat(&c, format)).unwrap();
            files.push((log, "android-tombstone", true));
        }
        for (file, format, logcat) in &files {
            let (format, logcat) = (*format, *logcat);
            let what = format!("{case} {}", file.display());
            let report = walk(file, &symbols);
            assert_eq!(report["dump"]["format"], format, "{what}");
            assert_eq!(report["dump"]["os"], "android", "{what}");
            assert_eq!(report["dump"]["arch"], t.arch, "{what}");
            // logcat has no memory map: no library at the device's address
            check_frames(&c, &report, &what, !logcat);
            check_crash(&c, &report, &what);
            // the program is in no memory map of the text (and logcat has none): its
            // addresses are made up
            let made_up = report["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["code"] == "tombstone-addresses");
            assert_eq!(made_up, format == "android-tombstone", "{what}");
            let source = &report["annotations"]["android.source"];
            assert_eq!(source.as_str(), logcat.then_some("logcat"), "{what}");
        }
    }
}

#[test]
fn gwp_asan_use_after_free_names_the_bug_and_symbolicates_its_stacks() {
    if !tools_present(&AARCH64) {
        return;
    }
    let c = as_use_after_free(crash(&AARCH64, "gwp-asan", MAIN_SEGV));
    let symbols = symbols_dir(&c);
    let text = c.work.path().join("tombstone_00");
    std::fs::write(&text, tombstone_text(&c)).unwrap();
    let pb = c.work.path().join("tombstone_00.pb");
    std::fs::write(&pb, tombstone_proto(&c)).unwrap();
    let log = c.work.path().join("logcat.txt");
    std::fs::write(&log, tombstone_logcat(&c, Logcat::Threadtime)).unwrap();
    for (file, logcat) in [(&text, false), (&pb, false), (&log, true)] {
        let what = file.display().to_string();
        let report = walk(file, &symbols);
        check_frames(&c, &report, &what, !logcat);
        check_crash(&c, &report, &what);
    }
    // the text view shows the stacks under their headings
    let out = run(Command::new(common::bin())
        .args(["walk", "--no-system-debug", "--format", "text"])
        .arg(&text)
        .arg("--symbols")
        .arg(&symbols)
        .env_remove("DEBUGINFOD_URLS"));
    assert!(out.contains("Analysis: [use-after-free]"), "{out}");
    for heading in ["deallocated by thread", "allocated by thread"] {
        assert!(out.contains(&format!(": {heading} ")), "{out}");
    }
}

/// gdb's `x/4gx $sp` of the crashed thread in QEMU's core: (sp, the four words).
fn words_at_sp(c: &Crash) -> (u64, Vec<u64>) {
    let t = c.target;
    let (gdb, setup) = t.gdb(c.work.path());
    let mut cmd = Command::new(gdb);
    cmd.args(["-batch", "-nx"]);
    for s in &setup {
        cmd.args(["-ex", s]);
    }
    let exe = c.libs[0].file.clone();
    let core = std::fs::read_dir(c.work.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".core"))
        .expect("QEMU's core");
    let out = run(cmd
        .args(["-ex", "x/4gx $sp"])
        .arg(&exe)
        .arg(&core)
        .env("LC_ALL", "C"));
    let hex = |s: &str| {
        u64::from_str_radix(s.trim().trim_end_matches(':').trim_start_matches("0x"), 16).ok()
    };
    let mut sp = None;
    let mut words = Vec::new();
    for line in out.lines().filter(|l| l.starts_with("0x")) {
        let mut w = line.split_whitespace();
        let at = w.next().and_then(hex).unwrap();
        sp.get_or_insert(at);
        words.extend(w.filter_map(hex));
    }
    assert_eq!(words.len(), 4, "{out}");
    (sp.unwrap(), words)
}

#[test]
fn memory_near_registers_becomes_the_dumps_memory() {
    if !tools_present(&AARCH64) {
        return;
    }
    let c = crash(&AARCH64, "memory", MAIN_SEGV);
    let (sp, words) = words_at_sp(&c);
    // as print_thread_memory_dump writes it: 16 bytes a row, the row's address with an
    // MTE tag in its top byte, little-endian words, the ASCII column
    let mut text = tombstone_text(&c);
    let mut rows = "\nmemory near sp ([stack]):\n".to_string();
    for (k, pair) in words.chunks(2).enumerate() {
        let at = (sp + 16 * k as u64) | (0x0b << 56);
        writeln!(
            rows,
            "    {at:016x} {:016x} {:016x}  ................",
            pair[0], pair[1]
        )
        .unwrap();
    }
    let at = text.find("\nmemory map").unwrap();
    text.insert_str(at, &rows);
    // and as the proto's Thread.memory_dump (MemoryDump: begin_address 3, memory 4)
    let mut dump = Vec::new();
    field_bytes(&mut dump, 1, b"sp");
    field_varint(&mut dump, 3, sp);
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    field_bytes(&mut dump, 4, &bytes);
    let mut thread = Vec::new();
    field_varint(&mut thread, 1, c.lwp);
    field_bytes(&mut thread, 5, &dump);
    let mut entry = Vec::new();
    field_varint(&mut entry, 1, c.lwp);
    field_bytes(&mut entry, 2, &thread);
    let mut pb = tombstone_proto(&c);
    // a second entry for the crashed thread's key: protobuf merges it into the first
    field_bytes(&mut pb, 16, &entry);
    for (what, tombstone) in [("text", text.into_bytes()), ("proto", pb)] {
        let d = engine::dump::read_dump(&tombstone).unwrap();
        for (k, w) in words.iter().enumerate() {
            let at = sp + 8 * k as u64;
            assert_eq!(
                d.memory.read_u64(at),
                Some(*w),
                "{what}: the word at {at:#x}"
            );
        }
        assert_eq!(d.memory.read_u64(sp + 32), None, "{what}: past the dump");
    }
}

#[test]
fn broken_tombstones_are_refused_with_the_readers_reason() {
    let header = "*** *** *** *** *** *** *** *** *** *** *** *** *** *** *** ***\n";
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "no-threads",
            format!("{header}ABI: 'arm64'\n").into_bytes(),
            "no thread",
        ),
        (
            "bad-frame",
            format!("{header}ABI: 'arm64'\npid: 1, tid: 1, name: x  >>> x <<<\n\nbacktrace:\n      #00 pc zz  /x\n")
                .into_bytes(),
            "line 6",
        ),
        (
            "riscv",
            format!("{header}ABI: 'riscv64'\npid: 1, tid: 1, name: x  >>> x <<<\n").into_bytes(),
            "riscv64",
        ),
        (
            "truncated-proto",
            {
                let mut t = Vec::new();
                field_varint(&mut t, 1, 1);
                field_bytes(&mut t, 2, b"google/raven/raven:14/UQ1A/1:user/release-keys");
                // a thread entry that claims more bytes than follow
                t.extend_from_slice(&[0x82, 0x01, 0x40, 0x08]);
                t
            },
            "truncated",
        ),
    ];
    for (name, bytes, expected) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, &bytes).unwrap();
        let out = Command::new(common::bin())
            .args(["walk", "--no-system-debug"])
            .arg(&file)
            .env_remove("DEBUGINFOD_URLS")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}

#[tokio::test]
async fn the_service_takes_tombstones_symbolicates_them_and_groups_them() {
    if !tools_present(&AARCH64) {
        return;
    }
    let c = crash(&AARCH64, "service", MAIN_SEGV);
    let server = common::TempServer::start(&[]);
    let client = common::client();
    for l in c.libs.iter().skip(1) {
        let name = l.file.file_name().unwrap().to_string_lossy().to_string();
        common::upload_binary(&client, &server.base, &l.file, &name).await;
    }
    let mut signatures = Vec::new();
    for (bytes, format, logcat) in [
        (tombstone_text(&c).into_bytes(), "android-tombstone", false),
        (tombstone_proto(&c), "android-tombstone-proto", false),
        // without adb's buffer mark: its first line, longer than the 64 bytes of a
        // dump's magic the upload checks first, tells a logcat
        (
            tombstone_logcat(&c, Logcat::Threadtime)
                .split_once('\n')
                .unwrap()
                .1
                .as_bytes()
                .to_vec(),
            "android-tombstone",
            true,
        ),
    ] {
        let id = common::upload_crash(&client, &server.base, &bytes).await;
        let record = common::poll_done(&client, &server.base, &id).await;
        assert_eq!(record["status"], "done", "{record:#}");
        let report = &record["report"];
        assert_eq!(report["dump"]["format"], format);
        check_frames(&c, report, format, !logcat);
        check_crash(&c, report, format);
        signatures.push(record["signature"].as_str().unwrap_or_default().to_string());
    }
    // one crash, three forms: one signature, one group of three
    assert_eq!(signatures[0], signatures[1]);
    assert_eq!(signatures[0], signatures[2]);
    // starting at frame 0's innermost function, as llvm-symbolizer names it
    let innermost = symbolize(&c.libs[c.frames[0].lib.unwrap()].file, c.frames[0].rel_pc);
    let innermost = innermost[0]["FunctionName"].as_str().unwrap();
    assert!(signatures[0].starts_with(innermost), "{signatures:?}");
    let groups = common::get_json(&client, format!("{}/api/v1/groups", server.base)).await;
    let group = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == signatures[0].as_str())
        .unwrap_or_else(|| panic!("{groups:#}"));
    assert_eq!(group["count"], 3, "{groups:#}");
    // the program's build-id is on the missing-symbols page
    let page = common::get_text(&client, &server.url("/missing")).await;
    assert!(page.contains(&c.libs[0].build_id), "{page}");
    // garbage behind a tombstone header, and a truncated proto: 422 with the reason
    for (body, reason) in [
        (
            b"*** *** *** *** ***\nABI: 'arm64'\npid: 1, tid: 1\n\nbacktrace:\n   #00 pc\n"
                .to_vec(),
            "line 6",
        ),
        (
            {
                let pb = tombstone_proto(&c);
                pb[..pb.len() - 10].to_vec()
            },
            "truncated",
        ),
        (
            // a logcat without debuggerd's lines
            b"--------- beginning of main\n11-29 14:35:46.123  1000  1207 I ActivityManager: Start proc 4321:com.x/u0a1\n"
                .to_vec(),
            "holds no tombstone",
        ),
    ] {
        let r = client
            .post(format!("{}/api/v1/crashes", server.base))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422);
        let text = r.text().await.unwrap();
        assert!(text.contains(reason), "{text}");
    }
}
