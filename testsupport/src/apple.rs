//! Apple crashes without a Mac: Mach-O programs and their dSYMs built with clang for
//! `arm64-apple-macos11` / `x86_64-apple-macos11` (ld64.lld, `dsymutil`, `llvm-lipo`),
//! zipped dSYMs as users upload them, and the minidump a Mac crash reporter would write
//! for a process running them.
//!
//! The minidump ([`mac_minidump`]) is laid out as Breakpad's and Crashpad's Mac writers
//! lay it out: `SystemInfo` with platform `MacOS` (0x8101), one thread with its
//! `CONTEXT_ARM64` or `CONTEXT_AMD64` and its stack, the `Exception` stream with the
//! Mach exception (`EXC_BAD_ACCESS`, `KERN_INVALID_ADDRESS`), and a `ModuleList` whose
//! CodeView records are `RSDS` with the module's `LC_UUID` as the GUID (its first three
//! fields read big-endian, so that the debug id is the UUID's bytes in order, then age
//! 0: what `dump_syms` writes on the `MODULE` line of a Mach-O and what the engine reads
//! for the corpus' real macOS minidump).
//!
//! The reference for names and lines is `llvm-symbolizer --inlining` on the dSYM's DWARF
//! file ([`symbolizer`]).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The first of `names` that runs (`--version`), e.g. `llvm-lipo` or `llvm-lipo-14`.
pub fn tool(names: &[&str]) -> Option<String> {
    names
        .iter()
        .find(|n| {
            Command::new(n)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(|n| n.to_string())
}

/// `llvm-lipo`, by any of the names Debian gives it.
pub fn lipo() -> Option<String> {
    tool(&[
        "llvm-lipo",
        "llvm-lipo-19",
        "llvm-lipo-18",
        "llvm-lipo-17",
        "llvm-lipo-16",
        "llvm-lipo-15",
        "llvm-lipo-14",
    ])
}

/// `dsymutil`, by any of the names Debian gives it.
pub fn dsymutil() -> Option<String> {
    tool(&[
        "dsymutil",
        "dsymutil-19",
        "dsymutil-18",
        "dsymutil-17",
        "dsymutil-16",
        "dsymutil-15",
        "dsymutil-14",
    ])
}

/// Whether the Apple tool chain is here (clang with ld64.lld, dsymutil, llvm-lipo).
pub fn can_build() -> bool {
    dsymutil().is_some() && lipo().is_some() && tool(&["ld64.lld", "ld64.lld-14"]).is_some()
}

fn run(cmd: &str, args: &[&str], dir: &Path) -> String {
    let out = Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A crash program of one C file for macOS: a NULL read in `inner`, inlined into
/// `middle`, called from `main`.
pub const CRASH_C: &str = r#"static int depth;
static inline __attribute__((always_inline)) int inner(int *p, int v) {
    depth += v;
    return *p + v;
}
__attribute__((noinline)) int middle(int *p, int v) {
    return inner(p, v * 3) + 1;
}
int main(int argc, char **argv) {
    (void)argv;
    return middle((int *)0, argc);
}
"#;

/// One Mach-O build: the executable and its dSYM bundle.
#[derive(Debug, Clone)]
pub struct Build {
    pub exe: PathBuf,
    pub dsym: PathBuf,
    /// The DWARF file inside the bundle.
    pub dwarf: PathBuf,
    pub uuid: [u8; 16],
}

/// Builds `source` (C) as `name` for `arch` (`arm64` or `x86_64`) in `dir/arch/`,
/// optimized (`-O1`, so that `inner` is inlined) with DWARF, then its dSYM with dsymutil.
pub fn build(dir: &Path, source: &str, name: &str, arch: &str) -> Build {
    let dir = dir.join(arch);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("crash.c"), source).unwrap();
    let target = format!("{arch}-apple-macos11");
    run(
        "clang",
        &[
            "-target", &target, "-g", "-O1", "-c", "crash.c", "-o", "crash.o",
        ],
        &dir,
    );
    run(
        "clang",
        &[
            "-target",
            &target,
            "-fuse-ld=lld",
            "-nostdlib",
            "-Wl,-e,_main",
            "crash.o",
            "-o",
            name,
        ],
        &dir,
    );
    let dsym = dir.join(format!("{name}.dSYM"));
    run(
        &dsymutil().unwrap(),
        &[name, "-o", &format!("{name}.dSYM")],
        &dir,
    );
    let exe = dir.join(name);
    let uuid = uuid_of(&std::fs::read(&exe).unwrap());
    Build {
        dwarf: dsym.join("Contents/Resources/DWARF").join(name),
        exe,
        dsym,
        uuid,
    }
}

/// A dylib of `source` (C) for `arm64-apple-macos11`, installed as `install` (its
/// `LC_ID_DYLIB`), optimized, without DWARF (a system library's), in `dir/name`.
pub fn build_dylib(dir: &Path, source: &str, name: &str, install: &str) -> PathBuf {
    build_dylib_for(dir, source, name, install, "arm64", &[])
}

/// [`build_dylib`] for `arch` (`arm64` or `x86_64`) with extra compiler `flags`
/// (`-fomit-frame-pointer`).
pub fn build_dylib_for(
    dir: &Path,
    source: &str,
    name: &str,
    install: &str,
    arch: &str,
    flags: &[&str],
) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let c = format!("{name}.c");
    std::fs::write(dir.join(&c), source).unwrap();
    let target = format!("{arch}-apple-macos11");
    let install = format!("-Wl,-install_name,{install}");
    let mut args = vec!["-target", &target, "-O1"];
    args.extend_from_slice(flags);
    args.extend([
        "-fuse-ld=lld",
        "-nostdlib",
        "-dynamiclib",
        &install,
        &c,
        "-o",
        name,
    ]);
    run("clang", &args, dir);
    dir.join(name)
}

/// The `LC_UUID` of a thin Mach-O file.
pub fn uuid_of(bytes: &[u8]) -> [u8; 16] {
    use object::Object;
    object::File::parse(bytes)
        .unwrap()
        .mach_uuid()
        .unwrap()
        .expect("an LC_UUID")
}

/// `llvm-lipo -create` of `inputs` into `out`.
pub fn lipo_create(inputs: &[&Path], out: &Path) {
    let mut args: Vec<&str> = vec!["-create"];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    args.extend(["-output", out.to_str().unwrap()]);
    run(&lipo().unwrap(), &args, Path::new("."));
}

/// The address of symbol `name` (`_middle`) in a thin Mach-O file.
pub fn symbol_address(bytes: &[u8], name: &str) -> u64 {
    use object::{Object, ObjectSymbol};
    let file = object::File::parse(bytes).unwrap();
    file.symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("no symbol {name}"))
        .address()
}

/// The addresses of a thin Mach-O file's instructions, as `llvm-objdump -d` lists them:
/// (address, text) of each line of function `name` (`_middle`).
pub fn disassembly(exe: &Path, name: &str) -> Vec<(u64, String)> {
    let text = run(
        "llvm-objdump",
        &["--macho", "-d", exe.to_str().unwrap()],
        Path::new("."),
    );
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.ends_with(':') && !line.starts_with(|c: char| c.is_ascii_hexdigit()) {
            inside = line.trim_end_matches(':') == name;
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((addr, rest)) = line.split_once(':') {
            if let Ok(a) = u64::from_str_radix(addr.trim(), 16) {
                out.push((a, rest.trim().to_string()));
            }
        }
    }
    out
}

/// One frame as llvm-symbolizer gives it: function, file name (last component), line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub function: String,
    pub file: String,
    pub line: u32,
}

/// `llvm-symbolizer --obj=DWARF --inlining ADDRESS`: the inline stack, innermost first.
pub fn symbolizer(dwarf: &Path, address: u64) -> Vec<Line> {
    let text = run(
        "llvm-symbolizer",
        &[
            &format!("--obj={}", dwarf.display()),
            "--inlining",
            &format!("{address:#x}"),
        ],
        Path::new("."),
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    lines
        .chunks(2)
        .map(|pair| {
            let location = pair.get(1).copied().unwrap_or_default();
            let mut parts = location.rsplitn(3, ':');
            let _column = parts.next();
            let line = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
            let path = parts.next().unwrap_or_default();
            Line {
                function: pair[0].to_string(),
                file: path.rsplit('/').next().unwrap_or(path).to_string(),
                line,
            }
        })
        .collect()
}

/// The dSYM bundle `dsym` zipped as `zip -r NAME.dSYM.zip NAME.dSYM` zips it (entries
/// under the bundle's own name, deflated).
pub fn zip_dsym(dsym: &Path) -> Vec<u8> {
    let root = dsym.parent().unwrap();
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    let mut stack = vec![dsym.to_path_buf()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string();
                entries.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    entries.sort();
    zip_of(&entries)
}

/// A zip archive of `entries` (name, bytes), deflated, the names written as given (a
/// hostile archive's `../` too).
pub fn zip_of(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    use std::io::Write;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in entries {
        w.start_file(name.as_str(), options).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// The CPU of a Mac minidump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacCpu {
    Arm64,
    X86_64,
}

/// One module of a Mac process: its path, where its Mach header is mapped, its size and
/// `LC_UUID`.
#[derive(Debug, Clone)]
pub struct MacModule {
    pub path: String,
    pub base: u64,
    pub size: u32,
    pub uuid: [u8; 16],
}

/// A crashed Mac process with one thread: its registers (arm64: x0–x30, sp, pc;
/// x86_64: rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8–r15, rip in DWARF order), its
/// stack's bytes from `stack_start`, the fault address of an `EXC_BAD_ACCESS`.
#[derive(Debug, Clone)]
pub struct MacCrash {
    pub cpu: MacCpu,
    pub registers: Vec<u64>,
    pub stack_start: u64,
    pub stack: Vec<u8>,
    pub fault_address: u64,
    pub modules: Vec<MacModule>,
}

const STREAM_THREAD_LIST: u32 = 3;
const STREAM_MODULE_LIST: u32 = 4;
const STREAM_MEMORY_LIST: u32 = 5;
const STREAM_EXCEPTION: u32 = 6;
const STREAM_SYSTEM_INFO: u32 = 7;
const PLATFORM_MACOS: u32 = 0x8101;
const EXC_BAD_ACCESS: u32 = 1;
const KERN_INVALID_ADDRESS: u32 = 1;

fn u16le(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn u32le(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn u64le(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

/// The thread's context record.
fn mac_context(c: &MacCrash) -> Vec<u8> {
    let reg = |n: usize| c.registers.get(n).copied().unwrap_or(0);
    let mut b = Vec::new();
    match c.cpu {
        MacCpu::Arm64 => {
            u32le(&mut b, 0x0040_0003); // CONTEXT_ARM64 | CONTROL | INTEGER
            u32le(&mut b, 0x6000_0000); // cpsr
            for n in 0..=32 {
                u64le(&mut b, reg(n)); // x0–x30, sp, pc
            }
            b.resize(912, 0);
        }
        MacCpu::X86_64 => {
            b.resize(48, 0); // P1Home–P6Home
            u32le(&mut b, 0x0010_0003); // CONTEXT_AMD64 | CONTROL | INTEGER
            u32le(&mut b, 0); // MxCsr
            b.resize(120, 0); // segments, EFlags, Dr0–Dr7
                              // CONTEXT's order: rax rcx rdx rbx rsp rbp rsi rdi r8–r15, then rip; the
                              // registers are given in DWARF order (rax rdx rcx rbx rsi rdi rbp rsp r8…)
            for n in [0usize, 2, 1, 3, 7, 6, 4, 5] {
                u64le(&mut b, reg(n));
            }
            for n in 8..=16 {
                u64le(&mut b, reg(n));
            }
            b.resize(1232, 0);
        }
    }
    b
}

/// A `MINIDUMP_STRING`.
fn md_string(b: &mut Vec<u8>, s: &str) -> u32 {
    while !b.len().is_multiple_of(4) {
        b.push(0);
    }
    let rva = b.len() as u32;
    let units: Vec<u16> = s.encode_utf16().collect();
    u32le(b, (units.len() * 2) as u32);
    for u in units {
        u16le(b, u);
    }
    u16le(b, 0);
    rva
}

/// The minidump of `c`, as a Mac crash reporter writes it (see the module doc).
pub fn mac_minidump(c: &MacCrash) -> Vec<u8> {
    let mut b = Vec::new();
    u32le(&mut b, 0x504d_444d); // MDMP
    u32le(&mut b, 0xa793);
    u32le(&mut b, 0); // stream count, patched
    u32le(&mut b, 0); // directory rva, patched
    u32le(&mut b, 0);
    u32le(&mut b, 0x6500_0000);
    u64le(&mut b, 0);
    let mut dir: Vec<(u32, u32, u32)> = Vec::new();
    let align = |b: &mut Vec<u8>| {
        while !b.len().is_multiple_of(8) {
            b.push(0);
        }
    };

    align(&mut b);
    let stack_rva = b.len() as u32;
    b.extend_from_slice(&c.stack);
    align(&mut b);
    let ctx_rva = b.len() as u32;
    let ctx = mac_context(c);
    b.extend_from_slice(&ctx);

    let rva = b.len() as u32;
    u32le(&mut b, 1);
    u64le(&mut b, c.stack_start);
    u32le(&mut b, c.stack.len() as u32);
    u32le(&mut b, stack_rva);
    dir.push((STREAM_MEMORY_LIST, rva, b.len() as u32 - rva));

    let rva = b.len() as u32;
    u32le(&mut b, 1);
    u32le(&mut b, 0x103); // thread id
    u32le(&mut b, 0);
    u32le(&mut b, 0);
    u32le(&mut b, 0);
    u64le(&mut b, 0);
    u64le(&mut b, c.stack_start);
    u32le(&mut b, c.stack.len() as u32);
    u32le(&mut b, stack_rva);
    u32le(&mut b, ctx.len() as u32);
    u32le(&mut b, ctx_rva);
    dir.push((STREAM_THREAD_LIST, rva, b.len() as u32 - rva));

    dir.push(mac_modules(&mut b, c));

    dir.push(mac_exception(&mut b, c, &ctx));

    dir.push(mac_system_info(&mut b, c));

    while !b.len().is_multiple_of(4) {
        b.push(0);
    }
    let dir_rva = b.len() as u32;
    for (kind, rva, size) in &dir {
        u32le(&mut b, *kind);
        u32le(&mut b, *size);
        u32le(&mut b, *rva);
    }
    let n = dir.len() as u32;
    b[8..12].copy_from_slice(&n.to_le_bytes());
    b[12..16].copy_from_slice(&dir_rva.to_le_bytes());
    b
}

/// The module list: each module's name and an RSDS CodeView record holding its UUID.
fn mac_modules(b: &mut Vec<u8>, c: &MacCrash) -> (u32, u32, u32) {
    let mut records = Vec::new();
    for m in &c.modules {
        let name = md_string(b, &m.path);
        while !b.len().is_multiple_of(8) {
            b.push(0);
        }
        let cv = b.len() as u32;
        b.extend_from_slice(b"RSDS");
        let u = &m.uuid;
        // GUID { data1: u32, data2: u16, data3: u16, data4: [u8; 8] }, little-endian in
        // the file, holding the UUID's fields read big-endian
        u32le(b, u32::from_be_bytes([u[0], u[1], u[2], u[3]]));
        u16le(b, u16::from_be_bytes([u[4], u[5]]));
        u16le(b, u16::from_be_bytes([u[6], u[7]]));
        b.extend_from_slice(&u[8..16]);
        u32le(b, 0); // age
        let file = m.path.rsplit('/').next().unwrap_or(&m.path);
        b.extend_from_slice(file.as_bytes());
        b.push(0);
        records.push((m, name, cv, b.len() as u32 - cv));
    }
    while !b.len().is_multiple_of(4) {
        b.push(0);
    }
    let rva = b.len() as u32;
    u32le(b, records.len() as u32);
    for (m, name, cv, cv_size) in records {
        u64le(b, m.base);
        u32le(b, m.size);
        u32le(b, 0);
        u32le(b, 0);
        u32le(b, name);
        b.resize(b.len() + 13 * 4, 0);
        u32le(b, cv_size);
        u32le(b, cv);
        u32le(b, 0);
        u32le(b, 0);
        u64le(b, 0);
        u64le(b, 0);
    }
    (STREAM_MODULE_LIST, rva, b.len() as u32 - rva)
}

/// The exception stream: EXC_BAD_ACCESS / KERN_INVALID_ADDRESS at the fault address.
fn mac_exception(b: &mut Vec<u8>, c: &MacCrash, ctx: &[u8]) -> (u32, u32, u32) {
    while !b.len().is_multiple_of(8) {
        b.push(0);
    }
    let ex_ctx = b.len() as u32;
    b.extend_from_slice(ctx);
    let rva = b.len() as u32;
    u32le(b, 0x103);
    u32le(b, 0);
    u32le(b, EXC_BAD_ACCESS);
    u32le(b, KERN_INVALID_ADDRESS);
    u64le(b, 0);
    u64le(b, c.fault_address);
    u32le(b, 2); // parameters: code, subcode (the address)
    u32le(b, 0);
    u64le(b, u64::from(KERN_INVALID_ADDRESS));
    u64le(b, c.fault_address);
    b.resize(b.len() + 13 * 8, 0);
    u32le(b, ctx.len() as u32);
    u32le(b, ex_ctx);
    (STREAM_EXCEPTION, rva, b.len() as u32 - rva)
}

/// The system info stream: the CPU, macOS 11.
fn mac_system_info(b: &mut Vec<u8>, c: &MacCrash) -> (u32, u32, u32) {
    let csd = md_string(b, "");
    while !b.len().is_multiple_of(4) {
        b.push(0);
    }
    let rva = b.len() as u32;
    u16le(
        b,
        match c.cpu {
            MacCpu::Arm64 => 12,
            MacCpu::X86_64 => 9,
        },
    );
    u16le(b, 0);
    u16le(b, 0);
    b.push(1);
    b.push(1);
    u32le(b, 11);
    u32le(b, 0);
    u32le(b, 0);
    u32le(b, PLATFORM_MACOS);
    u32le(b, csd);
    u16le(b, 0);
    u16le(b, 0);
    b.resize(b.len() + 24, 0);
    (STREAM_SYSTEM_INFO, rva, b.len() as u32 - rva)
}

/// The crash of [`CRASH_C`]'s build `exe` (thin, `cpu`) loaded at `base`: stopped at
/// `middle`'s load through the NULL pointer (inside the inlined `inner`), called from
/// `main`, whose caller is the outermost frame (return address 0). The stack is laid out
/// as the compiled code leaves it, from the disassembly.
pub fn crash_of(exe: &Path, cpu: MacCpu, base: u64, path: &str) -> MacCrash {
    let bytes = std::fs::read(exe).unwrap();
    let uuid = uuid_of(&bytes);
    let text_base = 0x1_0000_0000u64;
    let at = |a: u64| a - text_base + base;
    let middle = disassembly(exe, "_middle");
    let main = disassembly(exe, "_main");
    // the faulting load: the one instruction reading through the pointer argument
    let fault = middle
        .iter()
        .find(|(_, t)| match cpu {
            MacCpu::Arm64 => t.contains("[x0]"),
            MacCpu::X86_64 => t.contains("(%rdi)"),
        })
        .expect("the NULL read")
        .0;
    // the return address into main: the instruction after its call
    let call = main
        .iter()
        .position(|(_, t)| t.contains("bl\t") || t.contains("callq"))
        .expect("main's call");
    let ret = main[call + 1].0;
    let stack_start = 0x7ff7_bfef_f000u64;
    let mut stack = vec![0u8; 0x100];
    let mut registers = vec![0u64; 33];
    match cpu {
        MacCpu::Arm64 => {
            // middle is a leaf (return address in lr); main saved fp, lr at sp
            registers[29] = stack_start;
            registers[30] = at(ret);
            registers[31] = stack_start;
            registers[32] = at(fault);
        }
        MacCpu::X86_64 => {
            // middle: push rbp; mov rbp, rsp. main: push rbp; mov rbp, rsp; call.
            let rsp = stack_start;
            stack[0..8].copy_from_slice(&(rsp + 16).to_le_bytes()); // main's rbp
            stack[8..16].copy_from_slice(&at(ret).to_le_bytes());
            registers[6] = rsp;
            registers[7] = rsp;
            registers[16] = at(fault);
        }
    }
    MacCrash {
        cpu,
        registers,
        stack_start,
        stack,
        fault_address: 0,
        modules: vec![MacModule {
            path: path.to_string(),
            base,
            size: 0xc000,
            uuid,
        }],
    }
}
