//! Writes a Linux arm64 (or 32-bit arm, [`Layout::Arm32`], or i386, [`Layout::X86`])
//! minidump from the ELF core of the same crash.
//!
//! ptrace does not reach programs running under qemu-user, so arm64 crashes cannot be
//! recorded by `minidump-writer` the way x86_64 ones are (see `record`). QEMU writes a
//! real core instead; this converter lays out what a Breakpad/Crashpad client would have
//! written at the same instant, from that core's own registers and memory:
//!
//! - header, directory, `SystemInfo` (ARM64, Linux);
//! - `ThreadList`: every thread with an ARM64 `CONTEXT` (integer and control groups:
//!   x0–x28, fp, lr, sp, pc, cpsr; QEMU's core has no FP/SIMD note, so that group is
//!   absent and its flag unset) and its stack from `sp` up to the end of its memory range;
//! - memory: every byte the core holds (`Memory64List`), or, in the old Breakpad style,
//!   only the thread stacks (`MemoryList`);
//! - `ModuleList` with `BpEL` CodeView records carrying the ELF build-id, read from the
//!   module's file (the test says where it is) or, for images whose headers are in the
//!   core (the vdso), from the core's memory;
//! - `Exception`: the crashed thread, its signal (`pr_cursig`), `si_code` and fault
//!   address where the core records a siginfo (QEMU's does not: both 0), its context;
//! - `LinuxCmdLine` from the core's `NT_PRPSINFO` arguments.
//!
//! The core is read with the engine's ELF core reader (threads, registers, memory,
//! modules found through `r_debug`), whose output on these cores is itself compared with
//! gdb by the ELF-core suite. Every value written comes from the core or the module
//! files: nothing is made up, and what the core lacks is left out.

use std::path::PathBuf;

use engine::dump::{self, Arch, Dump};

/// Which context record and CPU id to write: ARM64's (three layouts), 32-bit arm's or
/// x86's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Today's layout (Windows `CONTEXT_ARM64`, flags `0x0040_0000`, CPU id 12), as
    /// Crashpad and minidump-writer write it; all memory in a `Memory64List`.
    Current,
    /// Breakpad's first arm64 layout (`MDRawContextARM64_Old`: 64-bit flags
    /// `0x8000_0000`, 33 integer registers, then cpsr; CPU id `0x8003`), with only the
    /// stacks in a `MemoryList`, as old Breakpad clients wrote them.
    BreakpadOld,
    /// Today's context layout with only the thread stacks (from `sp` to the end of the
    /// stack's range) in a `MemoryList`: what minidump-writer and Breakpad's Linux client
    /// write for a crash, and what the x86_64 cases record with minidump-writer itself.
    Client,
    /// A 32-bit arm core's minidump: Breakpad's and Crashpad's `MDRawContextARM` (flags
    /// `MD_CONTEXT_ARM | INTEGER`, r0–r15, cpsr, the VFP area left zero: 368 bytes; CPU
    /// id 5), all memory in a `Memory64List`.
    Arm32,
    /// An i386 core's minidump: Breakpad's and Crashpad's `MDRawContextX86` (flags
    /// `MD_CONTEXT_X86 | CONTROL | INTEGER | SEGMENTS`; the general registers, `eip`,
    /// `eflags`, `esp`, the floating-point and extended areas left zero: 716 bytes; CPU id
    /// 0, `PROCESSOR_ARCHITECTURE_INTEL`), all memory in a `Memory64List`.
    X86,
}

impl Layout {
    /// Whether every byte of the core is written (else only the stacks).
    fn all_memory(self) -> bool {
        matches!(self, Layout::Current | Layout::Arm32 | Layout::X86)
    }

    /// The core's architecture this layout is for.
    fn arch(self) -> Arch {
        match self {
            Layout::Arm32 => Arch::Arm,
            Layout::X86 => Arch::X86,
            _ => Arch::Aarch64,
        }
    }
}

const STREAM_THREAD_LIST: u32 = 3;
const STREAM_MODULE_LIST: u32 = 4;
const STREAM_MEMORY_LIST: u32 = 5;
const STREAM_EXCEPTION: u32 = 6;
const STREAM_SYSTEM_INFO: u32 = 7;
const STREAM_MEMORY64_LIST: u32 = 9;
const STREAM_LINUX_CMD_LINE: u32 = 0x4767_0006;

const PROCESSOR_ARCHITECTURE_ARM64: u16 = 12;
const PROCESSOR_ARCHITECTURE_ARM: u16 = 5;
const PROCESSOR_ARCHITECTURE_INTEL: u16 = 0;
/// `MD_CONTEXT_X86 | CONTROL | INTEGER | SEGMENTS`.
const CONTEXT_X86_CONTROL_INTEGER_SEGMENTS: u32 = 0x0001_0007;
/// `MD_CONTEXT_ARM | MD_CONTEXT_ARM_INTEGER`: r0–r15 and cpsr.
const CONTEXT_ARM_INTEGER: u32 = 0x4000_0002;
const PROCESSOR_ARCHITECTURE_ARM64_OLD: u16 = 0x8003;
const PLATFORM_LINUX: u32 = 0x8201;

/// `CONTEXT_ARM64 | CONTROL | INTEGER`.
const CONTEXT_ARM64_CONTROL_INTEGER: u32 = 0x0040_0003;
/// `MD_CONTEXT_ARM64_OLD | CONTROL | INTEGER`.
const CONTEXT_ARM64_OLD_CONTROL_INTEGER: u64 = 0x8000_0003;
/// `MD_CVINFOELF_SIGNATURE`: the bytes "LEpB", which Breakpad names `BpEL`.
const CODEVIEW_ELF: u32 = 0x4270_454c;

/// What went into a converted minidump, for tests to check against.
#[derive(Debug, Clone)]
pub struct Converted {
    pub bytes: Vec<u8>,
    /// (module path, build-id) for each module given a CodeView record.
    pub build_ids: Vec<(String, Vec<u8>)>,
}

/// Little-endian byte writer with 4-byte aligned appends.
#[derive(Default)]
struct Out {
    b: Vec<u8>,
}

impl Out {
    fn pos(&self) -> u32 {
        u32::try_from(self.b.len()).expect("minidump under 4 GiB")
    }
    fn align(&mut self, to: usize) {
        while !self.b.len().is_multiple_of(to) {
            self.b.push(0);
        }
    }
    fn u16(&mut self, v: u16) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn zeros(&mut self, n: usize) {
        self.b.resize(self.b.len() + n, 0);
    }
    /// Appends `bytes` at an aligned offset; returns (rva, size).
    fn blob(&mut self, bytes: &[u8]) -> (u32, u32) {
        self.align(8);
        let rva = self.pos();
        self.b.extend_from_slice(bytes);
        (rva, u32::try_from(bytes.len()).expect("blob under 4 GiB"))
    }
    /// A `MINIDUMP_STRING` (byte length, UTF-16LE, NUL); returns its rva.
    fn string(&mut self, s: &str) -> u32 {
        self.align(4);
        let rva = self.pos();
        let units: Vec<u16> = s.encode_utf16().collect();
        self.u32(u32::try_from(units.len() * 2).expect("short string"));
        for u in units {
            self.u16(u);
        }
        self.u16(0);
        rva
    }
}

/// One thread's context record in the chosen layout.
fn context(layout: Layout, regs: &dump::RegisterSet) -> Vec<u8> {
    let reg = |n: u16| regs.get(n).unwrap_or(0);
    let mut c = Out::default();
    match layout {
        Layout::Current | Layout::Client => {
            // ContextFlags, Cpsr, X0–X28 Fp Lr, Sp, Pc, V[32], Fpcr, Fpsr, Bcr[8], Bvr[8],
            // Wcr[2], Wvr[2]: 912 bytes.
            c.u32(CONTEXT_ARM64_CONTROL_INTEGER);
            c.u32(u32::try_from(reg(33) & 0xffff_ffff).unwrap_or(0));
            for n in 0..=30 {
                c.u64(reg(n));
            }
            c.u64(reg(31));
            c.u64(reg(32));
            c.zeros(32 * 16 + 4 + 4 + 8 * 4 + 8 * 8 + 2 * 4 + 2 * 8);
            assert_eq!(c.b.len(), 912);
        }
        Layout::BreakpadOld => {
            // context_flags (u64), iregs[33] (x0–x30, sp, pc), cpsr, fpsr, fpcr,
            // regs[32] (u128), packed: 796 bytes.
            c.u64(CONTEXT_ARM64_OLD_CONTROL_INTEGER);
            for n in 0..=32 {
                c.u64(reg(n));
            }
            c.u32(u32::try_from(reg(33) & 0xffff_ffff).unwrap_or(0));
            c.zeros(4 + 4 + 32 * 16);
            assert_eq!(c.b.len(), 796);
        }
        Layout::Arm32 => {
            c.u32(CONTEXT_ARM_INTEGER);
            for n in 0..=16 {
                // r0–r15, then cpsr (engine::arch::arm::CPSR_SLOT)
                c.u32(u32::try_from(reg(n) & 0xffff_ffff).unwrap_or(0));
            }
            c.zeros(8 + 32 * 8 + 8 * 4);
            assert_eq!(c.b.len(), 368);
        }
        Layout::X86 => {
            use engine::arch::x86::Reg;
            let reg32 = |r: Reg| u32::try_from(reg(r.dwarf()) & 0xffff_ffff).unwrap_or(0);
            c.u32(CONTEXT_X86_CONTROL_INTEGER_SEGMENTS);
            // dr0–dr3, dr6, dr7; FLOATING_SAVE_AREA; gs, fs, es, ds (the core's
            // registers say nothing the walk reads there)
            c.zeros(6 * 4 + 112 + 4 * 4);
            for r in [
                Reg::Edi,
                Reg::Esi,
                Reg::Ebx,
                Reg::Edx,
                Reg::Ecx,
                Reg::Eax,
                Reg::Ebp,
                Reg::Eip,
            ] {
                c.u32(reg32(r));
            }
            c.u32(0); // cs
            c.u32(reg32(Reg::Eflags));
            c.u32(reg32(Reg::Esp));
            c.u32(0); // ss
            c.zeros(512); // extended registers
            assert_eq!(c.b.len(), 716);
        }
    }
    c.b
}

/// Converts the ELF core `core` (aarch64, arm or i386, as `layout` says) into a minidump. `module_file` names the file of
/// a module given its path in the crashed process (the test knows its sysroot), for the
/// build-id; modules it has no file for keep no CodeView record unless their headers are
/// in the core.
pub fn core_to_minidump(
    core: &[u8],
    layout: Layout,
    module_file: impl Fn(&str) -> Option<PathBuf>,
) -> Converted {
    let d = dump::read_dump(core).expect("the engine reads the core");
    assert_eq!(d.arch, layout.arch(), "a core of the layout's architecture");
    let build_ids: Vec<(String, Vec<u8>)> = d
        .modules
        .iter()
        .filter_map(|m| {
            let path = m.path.clone().unwrap_or_else(|| m.name.clone());
            let id = module_file(&path)
                .and_then(|f| build_id_of_file(&f, layout.arch()))
                .or_else(|| m.build_id.clone())?;
            Some((path, id))
        })
        .collect();
    let bytes = write(&d, layout, &build_ids);
    Converted { bytes, build_ids }
}

fn build_id_of_file(path: &std::path::Path, arch: Arch) -> Option<Vec<u8>> {
    use object::Object;
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let wanted = match arch {
        Arch::Arm => object::Architecture::Arm,
        Arch::X86 => object::Architecture::I386,
        _ => object::Architecture::Aarch64,
    };
    if file.architecture() != wanted {
        return None;
    }
    file.build_id().ok()?.map(<[u8]>::to_vec)
}

/// A stream's directory entry: (stream type, rva, size).
type DirEntry = (u32, u32, u32);

fn write(d: &Dump<'_>, layout: Layout, build_ids: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut o = Out::default();
    // Header; directory rva and count are patched at the end.
    o.u32(0x504d_444d); // "MDMP"
    o.u32(0xa793);
    o.u32(0); // stream count
    o.u32(0); // directory rva
    o.u32(0); // checksum
    o.u32(0); // time: the core records none
    o.u64(0);
    let mut dir: Vec<DirEntry> = Vec::new();
    let range_rva = write_memory(&mut o, d, layout, &mut dir);
    let stacks = write_stacks(&mut o, d, layout, &range_rva, &mut dir);
    dir.push(write_threads(&mut o, d, layout, &stacks));
    dir.push(write_modules(&mut o, d, build_ids));
    if let Some(entry) = write_exception(&mut o, d, layout) {
        dir.push(entry);
    }
    dir.push(write_system_info(&mut o, layout));
    if let Some(cmd) = &d.command_line {
        let mut raw = cmd.replace(' ', "\0").into_bytes();
        raw.push(0);
        let (rva, size) = o.blob(&raw);
        dir.push((STREAM_LINUX_CMD_LINE, rva, size));
    }

    o.align(4);
    let dir_rva = o.pos();
    for (kind, rva, size) in &dir {
        o.u32(*kind);
        o.u32(*size);
        o.u32(*rva);
    }
    let count = u32::try_from(dir.len()).expect("stream count");
    o.b[8..12].copy_from_slice(&count.to_le_bytes());
    o.b[12..16].copy_from_slice(&dir_rva.to_le_bytes());
    o.b
}

/// Memory: in the current layout all of the core's bytes, back to back, so that the
/// stacks can point into them (the rva of each range returned); in the old one, nothing
/// here (each stack is written on its own).
fn write_memory(o: &mut Out, d: &Dump<'_>, layout: Layout, dir: &mut Vec<DirEntry>) -> Vec<u64> {
    let ranges: Vec<(u64, &[u8])> = d.memory.ranges().collect();
    let mut range_rva: Vec<u64> = Vec::new();
    if layout.all_memory() {
        o.align(8);
        let base = u64::from(o.pos());
        let mut at = base;
        for &(_, bytes) in &ranges {
            range_rva.push(at);
            o.b.extend_from_slice(bytes);
            at += bytes.len() as u64;
        }
        let list_rva = o.pos();
        o.u64(ranges.len() as u64);
        o.u64(base);
        for &(addr, bytes) in &ranges {
            o.u64(addr);
            o.u64(bytes.len() as u64);
        }
        dir.push((STREAM_MEMORY64_LIST, list_rva, o.pos() - list_rva));
    }
    range_rva
}

/// Thread stacks, from sp to the end of the range holding it: (start, rva, size) each.
fn write_stacks(
    o: &mut Out,
    d: &Dump<'_>,
    layout: Layout,
    range_rva: &[u64],
    dir: &mut Vec<DirEntry>,
) -> Vec<(u64, u32, u32)> {
    let ranges: Vec<(u64, &[u8])> = d.memory.ranges().collect();
    let mut stacks: Vec<(u64, u32, u32)> = Vec::new(); // (start, rva, size)
    for t in &d.threads {
        let sp = t.registers.sp().unwrap_or(0);
        let found = ranges
            .iter()
            .enumerate()
            .find(|(_, (a, b))| *a <= sp && sp < a + b.len() as u64);
        let Some((i, (start, bytes))) = found else {
            stacks.push((sp, 0, 0));
            continue;
        };
        let off = usize::try_from(sp - start).expect("offset");
        let stack = &bytes[off..];
        let size = u32::try_from(stack.len()).expect("stack under 4 GiB");
        let rva = if layout.all_memory() {
            u32::try_from(range_rva[i] + off as u64).expect("rva")
        } else {
            o.blob(stack).0
        };
        stacks.push((sp, rva, size));
    }
    if !layout.all_memory() {
        o.align(4);
        let list_rva = o.pos();
        o.u32(u32::try_from(stacks.len()).expect("thread count"));
        for &(start, rva, size) in &stacks {
            o.u64(start);
            o.u32(size);
            o.u32(rva);
        }
        dir.push((STREAM_MEMORY_LIST, list_rva, o.pos() - list_rva));
    }
    stacks
}

/// The threads' contexts, then the thread list.
fn write_threads(
    o: &mut Out,
    d: &Dump<'_>,
    layout: Layout,
    stacks: &[(u64, u32, u32)],
) -> DirEntry {
    let contexts: Vec<(u32, u32)> = d
        .threads
        .iter()
        .map(|t| o.blob(&context(layout, &t.registers)))
        .collect();
    o.align(4);
    let list_rva = o.pos();
    o.u32(u32::try_from(d.threads.len()).expect("thread count"));
    for ((t, &(start, rva, size)), &(ctx_rva, ctx_size)) in
        d.threads.iter().zip(stacks).zip(&contexts)
    {
        o.u32(t.tid);
        o.u32(0); // suspend count
        o.u32(0); // priority class
        o.u32(0); // priority
        o.u64(0); // teb
        o.u64(start);
        o.u32(size);
        o.u32(rva);
        o.u32(ctx_size);
        o.u32(ctx_rva);
    }
    (STREAM_THREAD_LIST, list_rva, o.pos() - list_rva)
}

/// Modules: the main executable first, as clients write it.
fn write_modules(o: &mut Out, d: &Dump<'_>, build_ids: &[(String, Vec<u8>)]) -> DirEntry {
    let mut modules: Vec<&dump::Module> = d.modules.iter().collect();
    modules.sort_by_key(|m| !m.main);
    let mut records = Vec::new();
    for m in &modules {
        let path = m.path.clone().unwrap_or_else(|| m.name.clone());
        let name_rva = o.string(&path);
        let cv = build_ids
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, id)| {
                let mut rec = CODEVIEW_ELF.to_le_bytes().to_vec();
                rec.extend_from_slice(id);
                o.blob(&rec)
            })
            .unwrap_or((0, 0));
        records.push((m, name_rva, cv));
    }
    o.align(4);
    let list_rva = o.pos();
    o.u32(u32::try_from(records.len()).expect("module count"));
    for (m, name_rva, (cv_rva, cv_size)) in records {
        o.u64(m.base);
        o.u32(u32::try_from(m.end - m.base).expect("module under 4 GiB"));
        o.u32(0); // checksum
        o.u32(0); // time stamp
        o.u32(name_rva);
        o.zeros(13 * 4); // VS_FIXEDFILEINFO
        o.u32(cv_size);
        o.u32(cv_rva);
        o.u32(0); // misc record
        o.u32(0);
        o.u64(0);
        o.u64(0);
    }
    (STREAM_MODULE_LIST, list_rva, o.pos() - list_rva)
}

/// The exception stream, when the core records a crash.
fn write_exception(o: &mut Out, d: &Dump<'_>, layout: Layout) -> Option<DirEntry> {
    let crash = d.crash.as_ref()?;
    let regs = d
        .threads
        .iter()
        .find(|t| t.tid == crash.tid)
        .map(|t| &t.registers)
        .expect("the crashed thread is in the core");
    let (ctx_rva, ctx_size) = o.blob(&context(layout, regs));
    o.align(4);
    let rva = o.pos();
    o.u32(crash.tid);
    o.u32(0);
    o.u32(crash.signal.unwrap_or(0));
    o.u32(crash.code.unwrap_or(0) as u32);
    o.u64(0); // nested record
    o.u64(crash.address.unwrap_or(0));
    o.u32(0); // parameters
    o.u32(0);
    o.zeros(15 * 8);
    o.u32(ctx_size);
    o.u32(ctx_rva);
    Some((STREAM_EXCEPTION, rva, o.pos() - rva))
}

/// The system info stream: the CPU the layout names, Linux.
fn write_system_info(o: &mut Out, layout: Layout) -> DirEntry {
    let csd = o.string("");
    o.align(4);
    let rva = o.pos();
    o.u16(match layout {
        Layout::Current | Layout::Client => PROCESSOR_ARCHITECTURE_ARM64,
        Layout::BreakpadOld => PROCESSOR_ARCHITECTURE_ARM64_OLD,
        Layout::Arm32 => PROCESSOR_ARCHITECTURE_ARM,
        Layout::X86 => PROCESSOR_ARCHITECTURE_INTEL,
    });
    o.u16(0); // level
    o.u16(0); // revision
    o.b.push(0); // processors: the core does not say
    o.b.push(0); // product type
    o.u32(0); // major
    o.u32(0); // minor
    o.u32(0); // build
    o.u32(PLATFORM_LINUX);
    o.u32(csd);
    o.u16(0);
    o.u16(0);
    o.zeros(24); // CPU_INFORMATION
    (STREAM_SYSTEM_INFO, rva, o.pos() - rva)
}
