//! Writes the Breakpad microdump of an aarch64 crash from QEMU's core of it, as the
//! logcat lines Breakpad's Linux/Android client logs on a crash.
//!
//! Breakpad's microdump writer runs inside the crashing process (Chrome and WebView on
//! Android); no test here can run it, and its own test files cannot be committed. What it
//! writes is laid out by google/breakpad's `src/client/linux/microdump_writer/
//! microdump_writer.cc` (read at `418aacd6`; no code of it is copied), record by record,
//! from the crashed thread at the instant of the crash — which QEMU's core of the same
//! crash holds:
//!
//! - `O L arm64 CPUS aarch64 VERSION`: the OS (`L` Linux), the runtime architecture, the
//!   CPU count (two hex digits) and `uname`'s machine and release;
//! - `R SIGNAL NAME ADDRESS`: the signal (8 hex digits), its name and the fault address
//!   (16), from the core's `NT_PRSTATUS` (QEMU records no siginfo, so the address is 0, as
//!   [`crate::core_to_minidump`] writes it);
//! - `G UNKNOWN` (no GPU fingerprint given); no `H` record, which Breakpad writes only
//!   for 32-bit processes;
//! - `S 0 SP START LEN`, then `S ADDRESS HEX` in 384-byte chunks: the stack from the page
//!   holding `sp` up, at most 32 KiB and not past the memory range holding it
//!   (`LinuxDumper::GetStackInfo`);
//! - `C HEX`: the CPU context as `RawContextCPU` is on aarch64, `MDRawContextARM64_Old`
//!   (flags `MD_CONTEXT_ARM64_FULL_OLD`, x0–x30, sp, pc, cpsr, then the FP area, which
//!   QEMU's core does not hold: zeros), 796 bytes, each byte two upper-case hex digits;
//! - `M BASE OFFSET SIZE ID NAME`: each module the core's dynamic linker lists that has
//!   a file, its build-id's first 16 bytes as an `MDGUID` (`data1`–`data3` read
//!   little-endian and printed as numbers), then the age `0`.
//!
//! The core is read with the engine's ELF core reader (its modules from QEMU's `r_debug`,
//! its registers and memory), whose reading of these cores is compared with gdb by the
//! ELF-core suite, as in [`crate::core_to_minidump`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use engine::dump::{self, Arch};

/// `MD_CONTEXT_ARM64_FULL_OLD`: `MD_CONTEXT_ARM64_OLD` (`0x8000_0000`) with its integer
/// (2) and floating-point (4) groups.
const CONTEXT_ARM64_FULL_OLD: u64 = 0x8000_0006;
/// Breakpad's bound on the stack it copies (`kStackToCapture`).
const STACK_TO_CAPTURE: u64 = 32 * 1024;
/// Bytes of stack per `S` line (`STACK_DUMP_CHUNK_SIZE`).
const STACK_CHUNK: usize = 384;
/// The page size of QEMU's aarch64 user mode (and of Linux on aarch64 with 4 KiB pages).
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

/// The microdump of the crashed thread of the aarch64 QEMU core `core`. `module_file`
/// gives the file of a module from its path in the crashed process (for its build-id);
/// a module without one is left out, as Breakpad leaves out mappings without a file.
pub fn from_core(core: &[u8], module_file: impl Fn(&str) -> Option<PathBuf>) -> Written {
    let d = dump::read_dump(core).expect("the engine reads the core");
    assert_eq!(d.arch, Arch::Aarch64, "an aarch64 core");
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
    let (sp, pc) = (reg(31), reg(32));
    let mut records = vec![
        "-----BEGIN BREAKPAD MICRODUMP-----".to_owned(),
        "V postmortem-test:1.0".to_owned(),
        "O L arm64 01 aarch64 6.1.0 #1 SMP (qemu-aarch64-static)".to_owned(),
        "P browser".to_owned(),
    ];
    let signal = crash.signal.unwrap_or(0);
    records.push(format!(
        "R {signal:08X} {} {:016X}",
        signal_name(signal),
        crash.address.unwrap_or(0)
    ));
    records.push("G UNKNOWN".to_owned());
    records.extend(stack_records(&d, sp));
    records.push(format!("C {}", upper_hex(&context(&reg))));
    let mut modules = Vec::new();
    for m in &d.modules {
        let path = m.path.clone().unwrap_or_else(|| m.name.clone());
        let Some(id) = module_file(&path).and_then(|f| build_id_of(&f)) else {
            continue;
        };
        records.push(format!(
            "M {:016X} {:016X} {:016X} {}0 {}",
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

/// The `S` records: the header, then the stack from `sp`'s page up in chunks.
fn stack_records(d: &dump::Dump<'_>, sp: u64) -> Vec<String> {
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
    let mut out = vec![format!("S 0 {sp:016X} {lower:016X} {len:016X}")];
    for (i, chunk) in stack.chunks(STACK_CHUNK).enumerate() {
        let at = lower + (i * STACK_CHUNK) as u64;
        out.push(format!("S {at:016X} {}", upper_hex(chunk)));
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
    #[test]
    fn guid_swaps_the_first_three_fields() {
        let id: Vec<u8> = (0u8..20).collect();
        assert_eq!(guid_of(&id), "030201000504070608090A0B0C0D0E0F");
    }
}
