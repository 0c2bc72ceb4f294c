//! Writes the Breakpad microdump of an aarch64 or 32-bit arm crash from QEMU's core of it,
//! as the logcat lines Breakpad's Linux/Android client logs on a crash.
//!
//! Breakpad's microdump writer runs inside the crashing process (Chrome and WebView on
//! Android); no test here can run it, and its own test files cannot be committed. What it
//! writes is laid out by google/breakpad's `src/client/linux/microdump_writer/
//! microdump_writer.cc` (read at `418aacd6`; no code of it is copied), record by record,
//! from the crashed thread at the instant of the crash — which QEMU's core of the same
//! crash holds. Numbers are printed as the writer's `LogAppend` prints an integer: upper-case
//! hex, two digits a byte of its C type, so a pointer or `size_t` is 16 digits on aarch64
//! and 8 on arm:
//!
//! - `O L arm64 CPUS aarch64 VERSION` (aarch64) or `O A arm CPUS armv7l VERSION` (arm, as an
//!   Android process writes it): the OS (`L` Linux, `A` Android), the runtime
//!   architecture, the CPU count (two hex digits) and `uname`'s machine and release;
//! - `R SIGNAL NAME ADDRESS`: the signal (8 hex digits), its name and the fault address
//!   (a pointer), from the core's `NT_PRSTATUS` (QEMU records no siginfo, so the address
//!   is 0, as [`crate::core_to_minidump`] writes it);
//! - `G UNKNOWN` (no GPU fingerprint given);
//! - on arm only (`DumpFreeSpace`, written for 32-bit processes):
//!   `H LO HI HOLES LARGEST TOTAL [LOG2:COUNT…]`, the free address space from the lowest
//!   mapping up to the stack's, computed from the core's `PT_LOAD` segments (QEMU writes
//!   one for each of the guest's mappings) as the writer computes it from
//!   `/proc/PID/maps` ([`free_space`]); the count is a `uint16_t`, the histogram's bucket
//!   and count `uint8_t`s;
//! - `S 0 SP START LEN`, then `S ADDRESS HEX` in 384-byte chunks: the stack from the page
//!   holding `sp` up, at most 32 KiB and not past the memory range holding it
//!   (`LinuxDumper::GetStackInfo`);
//! - `C HEX`: the CPU context as `RawContextCPU` is, each byte two upper-case hex digits.
//!   On aarch64 `MDRawContextARM64_Old` (flags `MD_CONTEXT_ARM64_FULL_OLD`, x0–x30, sp,
//!   pc, cpsr, then the FP area, which QEMU's core does not hold: zeros), 796 bytes; on
//!   arm `MDRawContextARM` (flags `MD_CONTEXT_ARM_FULL`, r0–r15, cpsr, then the VFP area:
//!   zeros, as the writer leaves it on `__ARM_EABI__`), 368 bytes;
//! - `M BASE OFFSET SIZE ID NAME`: each module the core's dynamic linker lists that has
//!   a file, its build-id's first 16 bytes as an `MDGUID` (`data1`–`data3` read
//!   little-endian and printed as numbers), then the age `0`.
//!
//! The core is read with the engine's ELF core reader (its modules from QEMU's `r_debug`,
//! its registers and memory), whose reading of these cores is compared with gdb by the
//! ELF-core suite, as in [`crate::core_to_minidump`]; its segments (for `H`) with the
//! `object` crate.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use engine::dump::{self, Arch};

/// `MD_CONTEXT_ARM_FULL`: `MD_CONTEXT_ARM` (`0x4000_0000`) with its integer (2) and
/// floating-point (4) groups.
const CONTEXT_ARM_FULL: u32 = 0x4000_0006;
/// `MD_CONTEXT_ARM64_FULL_OLD`: `MD_CONTEXT_ARM64_OLD` (`0x8000_0000`) with its integer
/// (2) and floating-point (4) groups.
const CONTEXT_ARM64_FULL_OLD: u64 = 0x8000_0006;
/// Breakpad's bound on the stack it copies (`kStackToCapture`).
const STACK_TO_CAPTURE: u64 = 32 * 1024;
/// Bytes of stack per `S` line (`STACK_DUMP_CHUNK_SIZE`).
const STACK_CHUNK: usize = 384;
/// The page size of QEMU's aarch64 and arm user modes (and of Linux with 4 KiB pages).
const PAGE: u64 = 4096;

/// A microdump written from a core, and what went into it for the test to check.
pub struct Written {
    /// The microdump's records, one per line, without logcat's prefix.
    pub records: Vec<String>,
    /// (module path, build-id) of each `M` record.
    pub modules: Vec<(String, Vec<u8>)>,
    /// The `sp` and `pc` of the crashed thread.
    pub sp: u64,
    pub pc: u64,
    /// What the `H` record says (arm only).
    pub free_space: Option<FreeSpace>,
}

/// The free address space of a 32-bit process as the `H` record gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeSpace {
    /// The lowest mapping's start.
    pub low: u64,
    /// The end of the mapping the walk stopped at (the stack's).
    pub high: u64,
    /// The unmapped holes between `low` and `high`: how many, the largest, their total.
    pub holes: u64,
    pub largest: u64,
    pub total: u64,
    /// (floor(log2(size)), how many holes) for each size class that has holes.
    pub histogram: Vec<(u32, u64)>,
}

impl Written {
    /// The records as `adb logcat -v brief` prints them: `F/google-breakpad( PID): …`,
    /// each line of another process's log between them (a logcat holds other lines).
    pub fn logcat_brief(&self, pid: u32) -> String {
        let mut out = String::from("--------- beginning of crash\n");
        out.push_str("I/ActivityManager(  512): Start proc com.example.app\n");
        for r in &self.records {
            let _ = writeln!(out, "F/google-breakpad({pid:>5}): {r}");
        }
        out.push_str("I/ActivityManager(  512): Process com.example.app has died\n");
        out
    }
}

/// How the writer prints one architecture's records.
struct Layout {
    /// Hex digits of a pointer or `size_t`.
    width: usize,
    /// The `O` record.
    os: &'static str,
    /// (sp, pc) by DWARF register number.
    sp_pc: (u16, u16),
}

const AARCH64: Layout = Layout {
    width: 16,
    os: "O L arm64 01 aarch64 6.1.0 #1 SMP (qemu-aarch64-static)",
    sp_pc: (31, 32),
};
const ARM: Layout = Layout {
    width: 8,
    os: "O A arm 01 armv7l 6.1.0 #1 SMP (qemu-arm-static)",
    sp_pc: (13, 15),
};

/// The microdump of the crashed thread of the aarch64 or arm QEMU core `core`.
/// `module_file` gives the file of a module from its path in the crashed process (for
/// its build-id); a module without one is left out, as Breakpad leaves out mappings
/// without a file.
pub fn from_core(core: &[u8], module_file: impl Fn(&str) -> Option<PathBuf>) -> Written {
    let d = dump::read_dump(core).expect("the engine reads the core");
    let layout = match d.arch {
        Arch::Aarch64 => AARCH64,
        Arch::Arm => ARM,
        other => panic!("an aarch64 or arm core, not {other}"),
    };
    let crash = d
        .crash
        .as_ref()
        .expect("the core records the crashed thread");
    let thread = d
        .threads
        .iter()
        .find(|t| t.tid == crash.tid)
        .expect("the crashed thread is in the core");
    let reg = |n: u16| thread.registers.get(n).unwrap_or(0);
    let (sp, pc) = (reg(layout.sp_pc.0), reg(layout.sp_pc.1));
    let w = layout.width;
    let mut records = vec![
        "-----BEGIN BREAKPAD MICRODUMP-----".to_owned(),
        "V postmortem-test:1.0".to_owned(),
        layout.os.to_owned(),
        "P browser".to_owned(),
    ];
    let signal = crash.signal.unwrap_or(0);
    records.push(format!(
        "R {signal:08X} {} {:0w$X}",
        signal_name(signal),
        crash.address.unwrap_or(0)
    ));
    records.push("G UNKNOWN".to_owned());
    // `DumpFreeSpace` stops at the main thread's stack, whichever thread crashed
    let main_sp = d
        .threads
        .iter()
        .find(|t| d.pid == Some(t.tid))
        .and_then(|t| t.registers.get(layout.sp_pc.0))
        .unwrap_or(sp);
    let free_space = (d.arch == Arch::Arm).then(|| free_space(&segments(core), main_sp));
    if let Some(f) = &free_space {
        records.push(free_space_record(f));
    }
    records.extend(stack_records(&d, sp, w));
    let context = match d.arch {
        Arch::Arm => arm_context(&reg),
        _ => context(&reg),
    };
    records.push(format!("C {}", upper_hex(&context)));
    let mut modules = Vec::new();
    for m in &d.modules {
        let path = m.path.clone().unwrap_or_else(|| m.name.clone());
        let Some(id) = module_file(&path).and_then(|f| build_id_of(&f)) else {
            continue;
        };
        records.push(format!(
            "M {:0w$X} {:0w$X} {:0w$X} {}0 {}",
            m.base,
            0,
            m.end - m.base,
            guid_of(&id),
            m.name
        ));
        modules.push((path, id));
    }
    records.push("-----END BREAKPAD MICRODUMP-----".to_owned());
    Written {
        records,
        modules,
        sp,
        pc,
        free_space,
    }
}

/// The signal's name as Breakpad's `GetCrashSignalString` gives it, for the ones these
/// crashes die of.
fn signal_name(signal: u32) -> &'static str {
    match signal {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        11 => "SIGSEGV",
        _ => "UNKNOWN",
    }
}

/// The `S` records: the header, then the stack from `sp`'s page up in chunks; addresses
/// and lengths `w` hex digits wide.
fn stack_records(d: &dump::Dump<'_>, sp: u64, w: usize) -> Vec<String> {
    let lower = sp & !(PAGE - 1);
    let (start, bytes) = d
        .memory
        .ranges()
        .find(|&(a, b)| a <= lower && lower < a + b.len() as u64)
        .expect("the core holds the stack page of sp");
    let to_end = start + bytes.len() as u64 - lower;
    let len = to_end.min(STACK_TO_CAPTURE);
    let from = usize::try_from(lower - start).unwrap();
    let stack = &bytes[from..from + usize::try_from(len).unwrap()];
    let mut out = vec![format!("S 0 {sp:0w$X} {lower:0w$X} {len:0w$X}")];
    for (i, chunk) in stack.chunks(STACK_CHUNK).enumerate() {
        let at = lower + (i * STACK_CHUNK) as u64;
        out.push(format!("S {at:0w$X} {}", upper_hex(chunk)));
    }
    out
}

/// `MDRawContextARM64_Old`, packed to 4 bytes: flags (8), x0–x30, sp, pc (33 × 8), cpsr
/// (4), fpsr and fpcr (4 each), v0–v31 (32 × 16).
fn context(reg: &impl Fn(u16) -> u64) -> Vec<u8> {
    let mut c = Vec::with_capacity(796);
    c.extend_from_slice(&CONTEXT_ARM64_FULL_OLD.to_le_bytes());
    for n in 0..=32 {
        c.extend_from_slice(&reg(n).to_le_bytes());
    }
    let cpsr = u32::try_from(reg(33) & 0xffff_ffff).unwrap();
    c.extend_from_slice(&cpsr.to_le_bytes());
    c.resize(c.len() + 4 + 4 + 32 * 16, 0);
    assert_eq!(c.len(), 796, "sizeof(MDRawContextARM64_Old)");
    c
}

/// `MDRawContextARM`: flags (4), r0–r15 (16 × 4), cpsr (4), then the VFP area: fpscr (8),
/// d0–d31 (32 × 8), extra (8 × 4), which the writer leaves zero on arm.
fn arm_context(reg: &impl Fn(u16) -> u64) -> Vec<u8> {
    let mut c = Vec::with_capacity(368);
    c.extend_from_slice(&CONTEXT_ARM_FULL.to_le_bytes());
    for n in 0..=15 {
        let r = u32::try_from(reg(n)).expect("a 32-bit register");
        c.extend_from_slice(&r.to_le_bytes());
    }
    let cpsr = u32::try_from(reg(engine::arch::arm::CPSR_SLOT)).expect("a 32-bit cpsr");
    c.extend_from_slice(&cpsr.to_le_bytes());
    c.resize(c.len() + 8 + 32 * 8 + 8 * 4, 0);
    assert_eq!(c.len(), 368, "sizeof(MDRawContextARM)");
    c
}

/// The core's `PT_LOAD` segments as (start, end), by start: the guest's mappings.
fn segments(core: &[u8]) -> Vec<(u64, u64)> {
    use object::read::elf::{ElfFile32, ProgramHeader};
    let file = ElfFile32::<object::Endianness>::parse(core).expect("a 32-bit ELF core");
    let endian = file.endian();
    let mut out: Vec<(u64, u64)> = file
        .elf_program_headers()
        .iter()
        .filter(|h| h.p_type(endian) == object::elf::PT_LOAD && h.p_memsz(endian) > 0)
        .map(|h| {
            let start = u64::from(h.p_vaddr(endian));
            (start, start + u64::from(h.p_memsz(endian)))
        })
        .collect();
    out.sort_unstable();
    out
}

/// The free address space as `DumpFreeSpace` computes it over `maps` (start, end, sorted
/// by start as `/proc/PID/maps` lists them): from the lowest mapping, each run of
/// adjacent (or overlapping) mappings is skipped to its last, and the gap from its end to
/// the start of the mapping that ends next is a hole, until the run's last mapping is the
/// one holding `sp`, the main thread's stack pointer (its stack: the top of what an
/// allocation could get), or no mapping ends later. `high` is the end of the mapping it stopped at.
pub fn free_space(maps: &[(u64, u64)], sp: u64) -> FreeSpace {
    assert!(!maps.is_empty(), "the core has mappings");
    let stack = maps.iter().position(|&(s, e)| s <= sp && sp < e);
    let adjacent = |a: (u64, u64), b: (u64, u64)| a.0 <= b.0 && a.1 >= b.0;
    let mut histogram = std::collections::BTreeMap::<u32, u64>::new();
    let (mut holes, mut largest, mut total) = (0u64, 0u64, 0u64);
    let mut curr = 0;
    loop {
        while curr + 1 < maps.len() && adjacent(maps[curr], maps[curr + 1]) {
            curr += 1;
        }
        if Some(curr) == stack {
            break;
        }
        // the mapping that ends next after this one
        let Some(next) = (0..maps.len())
            .filter(|&i| maps[i].1 > maps[curr].1)
            .min_by_key(|&i| maps[i].1)
        else {
            break;
        };
        let (lo, hi) = (maps[curr].1, maps[next].0);
        if hi > lo {
            let size = hi - lo;
            holes += 1;
            total += size;
            largest = largest.max(size);
            *histogram.entry(size.ilog2()).or_default() += 1;
        }
        curr = next;
    }
    FreeSpace {
        low: maps[0].0,
        high: maps[curr].1,
        holes,
        largest,
        total,
        histogram: histogram.into_iter().collect(),
    }
}

/// The `H` record of `f`, as a 32-bit writer prints it: pointers and sizes 8 hex digits,
/// the count 4 (a `uint16_t`, saturated), each bucket and its count 2 (`uint8_t`s).
fn free_space_record(f: &FreeSpace) -> String {
    let mut line = format!(
        "H {:08X} {:08X} {:04X} {:08X} {:08X}",
        f.low,
        f.high,
        f.holes.min(0xffff),
        f.largest,
        f.total
    );
    for (bits, count) in &f.histogram {
        let _ = write!(line, " {bits:02X}:{:02X}", count.min(&0xff));
    }
    line
}

/// The `MDGUID` of a build-id's first 16 bytes (zero-padded), printed as the writer prints
/// it: `data1` (u32), `data2` and `data3` (u16) as numbers of the little-endian bytes, then
/// `data4`'s eight bytes.
fn guid_of(build_id: &[u8]) -> String {
    let mut b = [0u8; 16];
    let n = build_id.len().min(16);
    b[..n].copy_from_slice(&build_id[..n]);
    let data1 = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let data2 = u16::from_le_bytes([b[4], b[5]]);
    let data3 = u16::from_le_bytes([b[6], b[7]]);
    format!("{data1:08X}{data2:04X}{data3:04X}{}", upper_hex(&b[8..]))
}

fn upper_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02X}");
    }
    s
}

/// The GNU build-id of the ELF file at `path`.
fn build_id_of(path: &Path) -> Option<Vec<u8>> {
    use object::Object;
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    file.build_id().ok()?.map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Breakpad's `MDGUID` printing of a build-id: `data1`–`data3` byte-swapped, as in
    /// the module lines of its own microdump test files (`…0` after the 32 digits).
    /// `DumpFreeSpace` over mappings: an adjacent run counts as one, holes between runs
    /// up to the stack's mapping, none past it; the histogram by floor(log2(size)).
    #[test]
    fn free_space_stops_at_the_stack() {
        let maps = [
            (0x1_0000, 0x1_1000),
            (0x1_1000, 0x2_0000),       // adjacent: one run
            (0x2_1000, 0x2_2000),       // a 4 KiB hole before it
            (0x4000_0000, 0x4000_1000), // a hole of 0x3ffd_e000
            (0x4000_3000, 0x4080_0000), // 8 KiB: the stack
            (0xffff_0000, 0xffff_1000), // above the stack: not counted
        ];
        let f = free_space(&maps, 0x407f_0000);
        assert_eq!(
            (f.low, f.high, f.holes, f.largest, f.total),
            (
                0x1_0000,
                0x4080_0000,
                3,
                0x3ffd_e000,
                0x1000 + 0x3ffd_e000 + 0x2000
            )
        );
        assert_eq!(f.histogram, vec![(12, 1), (13, 1), (29, 1)]);
        assert_eq!(
            free_space_record(&f),
            "H 00010000 40800000 0003 3FFDE000 3FFE1000 0C:01 0D:01 1D:01"
        );
    }

    #[test]
    fn guid_swaps_the_first_three_fields() {
        let id: Vec<u8> = (0u8..20).collect();
        assert_eq!(guid_of(&id), "030201000504070608090A0B0C0D0E0F");
    }
}
