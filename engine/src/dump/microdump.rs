//! Breakpad microdump reader: the text Breakpad's Linux/Android client writes to the
//! system log (logcat) on a crash (Chrome and WebView on Android did), read into the
//! [`Dump`] model. A microdump holds the crashed thread's registers and stack memory, so
//! it is walked as a minidump is, not taken as a report walked on the device.
//!
//! The format is documented only by its writer and reader, google/breakpad's
//! `src/client/linux/microdump_writer/microdump_writer.cc` and `src/processor/microdump.cc`.
//! Each line carries the tag `google-breakpad` (with logcat's prefix before it, in any of
//! its formats: `W/google-breakpad( 3745): …`, `02-23 15:49:14.700  1740  1739 F
//! google-breakpad: …`), then `: `, then one record:
//!
//! ```text
//! -----BEGIN BREAKPAD MICRODUMP-----
//! V product:version                      (optional)
//! O A arm 02 armv7l build fingerprint    (OS: A Android / L Linux; arch; CPUs hex; hw arch; version)
//! P process type                         (optional)
//! R 00000005 SIGTRAP 4A7CB000            (optional: signal hex, its name, fault address hex)
//! G GL version|vendor|renderer           (or UNKNOWN)
//! H LO HI HOLES LARGEST TOTAL [BITS:N…]  (32-bit only: the free address space, below)
//! S 0 SP STACK_START STACK_LENGTH        (stack header: hex)
//! S ADDRESS HEXBYTES                     (stack memory, in chunks)
//! C HEXBYTES                             (the CPU context: the minidump context struct, raw)
//! M BASE FILE_OFFSET SIZE DEBUG_ID NAME  (one per module)
//! -----END BREAKPAD MICRODUMP-----
//! ```
//!
//! The `H` record, which Breakpad's reader skips, is the writer's summary of the free
//! address space of a 32-bit process (`DumpFreeSpace`, not written for 64-bit ones): from
//! the lowest mapping's start `LO` up to the stack's mapping (`HI`, its end), the number of
//! unmapped holes between mappings, the largest hole and their total size in bytes, then a
//! histogram of hole sizes (`log2:count`). A 32-bit process often dies of an exhausted or
//! fragmented address space (an allocation failing with memory free, none of it in one
//! piece), so the report keeps the summary as annotations: `free_address_space_largest`,
//! `free_address_space_total` (bytes, decimal) and `free_address_space_holes`. A record
//! that does not read so is left out with a `microdump-free-space-unreadable` warning: it
//! says nothing about the stack.
//!
//! As Breakpad's reader does, lines without the tag are skipped, and only the first
//! microdump of a log is read (a `microdump-several` warning says how many the log held).
//! Unlike it, hex that is not hex, a context of the wrong size or a missing context or
//! architecture is an error, never a guess. Sizes are bounded: the input
//! ([`MAX_MICRODUMP_BYTES`]), the stack ([`MAX_STACK_BYTES`]), the modules
//! ([`MAX_MODULES`]). Architectures: arm, arm64 (both of Breakpad's context layouts) and
//! x86; mips is refused as unsupported.

use std::collections::BTreeMap;

use super::{
    Arch, CrashInfo, Dump, DumpError, DumpFormat, Identity, Mapping, MemoryMap, Module, Os,
    RegisterSet, SystemInfo, Thread, Warning,
};
use crate::arch::{aarch64, arm, x86};

/// Most bytes of a log read as a microdump (Breakpad's own writer writes a few hundred
/// KiB at most: a 32 KiB stack dump and a few hundred modules).
pub const MAX_MICRODUMP_BYTES: usize = 64 << 20;
/// Most bytes of stack memory kept.
pub const MAX_STACK_BYTES: usize = 8 << 20;
/// Most modules kept.
pub const MAX_MODULES: usize = 16384;
/// Longest text field kept (a build fingerprint, a GPU string).
const MAX_TEXT: usize = 1024;

/// The tag every microdump line carries.
const TAG: &str = "google-breakpad";
const BEGIN: &str = "-----BEGIN BREAKPAD MICRODUMP-----";
const END: &str = "-----END BREAKPAD MICRODUMP-----";

/// `sizeof(MDRawContextARM)`.
const ARM_CONTEXT: usize = 368;
/// `sizeof(MDRawContextARM64)` (32-bit flags, then cpsr, x0–x31, pc).
const ARM64_CONTEXT: usize = 912;
/// `sizeof(MDRawContextARM64_Old)` (64-bit flags, x0–x31, pc, then cpsr).
const ARM64_OLD_CONTEXT: usize = 796;
/// `sizeof(MDRawContextX86)`.
const X86_CONTEXT: usize = 716;

/// Whether `bytes` hold a microdump: a line with Breakpad's tag and its begin marker.
pub fn sniff(bytes: &[u8]) -> bool {
    let Some(bytes) = bytes.get(..bytes.len().min(MAX_MICRODUMP_BYTES)) else {
        return false;
    };
    memchr::memmem::find_iter(bytes, BEGIN.as_bytes()).any(|at| {
        let start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |n| n + 1);
        memchr::memmem::find(&bytes[start..at], TAG.as_bytes()).is_some()
    })
}

/// What the first microdump of a log says, record by record.
#[derive(Debug, Default)]
struct Parsed {
    /// How many begin markers the log holds.
    count: usize,
    ended: bool,
    os: Option<Os>,
    arch: Option<String>,
    cpus: Option<u32>,
    hw_arch: Option<String>,
    os_version: Option<String>,
    context: Option<Vec<u8>>,
    crash: Option<(u32, Option<String>, u64)>,
    annotations: BTreeMap<String, String>,
    modules: Vec<Module>,
    stack: Vec<(u64, Vec<u8>)>,
    stack_bytes: usize,
    warnings: Vec<Warning>,
}

/// Reads the first microdump in `bytes` (see the module documentation).
pub fn read(bytes: &[u8]) -> Result<Dump<'static>, DumpError> {
    if bytes.len() > MAX_MICRODUMP_BYTES {
        return Err(DumpError::Unsupported(format!(
            "a microdump log of {} bytes is over the {MAX_MICRODUMP_BYTES} read",
            bytes.len()
        )));
    }
    let text = String::from_utf8_lossy(bytes);
    let mut p = Parsed::default();
    for (n, line) in text.lines().enumerate() {
        let Some(record) = record_of(line) else {
            continue;
        };
        if record.contains(BEGIN) {
            p.count += 1;
        } else if p.count == 1 && !p.ended {
            if record.contains(END) {
                p.ended = true;
            } else {
                p.record(record).map_err(|e| at_line(n + 1, e))?;
            }
        }
    }
    if p.count == 0 {
        return Err(DumpError::NotADump);
    }
    p.into_dump()
}

/// The record of a microdump line: what follows `: ` after Breakpad's tag.
fn record_of(line: &str) -> Option<&str> {
    let after = &line[line.find(TAG)? + TAG.len()..];
    let at = after.find(": ")?;
    Some(after[at + 2..].trim_end_matches('\r'))
}

fn at_line(n: usize, e: DumpError) -> DumpError {
    match e {
        DumpError::Malformed(m) => DumpError::Malformed(format!("microdump line {n}: {m}")),
        other => other,
    }
}

fn malformed(what: impl Into<String>) -> DumpError {
    DumpError::Malformed(what.into())
}

/// A hex number of at most 16 digits.
fn number(field: Option<&str>, what: &str) -> Result<u64, DumpError> {
    let s = field.ok_or_else(|| malformed(format!("no {what}")))?;
    if s.is_empty() || s.len() > 16 {
        return Err(malformed(format!(
            "{what} {:?} is not a hex number",
            cut(s)
        )));
    }
    u64::from_str_radix(s, 16)
        .map_err(|_| malformed(format!("{what} {:?} is not a hex number", cut(s))))
}

/// Bytes written as hex, two digits a byte.
fn hex_bytes(s: &str, what: &str) -> Result<Vec<u8>, DumpError> {
    if !s.len().is_multiple_of(2) {
        return Err(malformed(format!("{what}: an odd number of hex digits")));
    }
    s.as_bytes()
        .chunks_exact(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| malformed(format!("{what}: {:?} is not hex", cut(s))))
        })
        .collect()
}

/// `s` cut to [`MAX_TEXT`] bytes at a character boundary.
fn cut(s: &str) -> String {
    let mut end = s.len().min(MAX_TEXT);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

impl Parsed {
    /// Takes one record of the microdump in.
    fn record(&mut self, record: &str) -> Result<(), DumpError> {
        let (tag, rest) = record.split_once(' ').unwrap_or((record, ""));
        match tag {
            "O" => self.os_line(rest),
            "S" => self.stack_line(rest)?,
            "C" => {
                if self.context.is_some() {
                    return Err(malformed("a second CPU context (C line)"));
                }
                self.context = Some(hex_bytes(rest.trim(), "the CPU context")?);
            }
            "R" => self.crash_line(rest)?,
            "M" => self.module_line(rest)?,
            "G" if !rest.trim().is_empty() && rest.trim() != "UNKNOWN" => {
                self.annotations.insert("gpu".into(), cut(rest.trim()));
            }
            "H" => self.free_space_line(rest),
            "V" => {
                self.annotations.insert("product".into(), cut(rest.trim()));
            }
            "P" => {
                self.annotations
                    .insert("process_type".into(), cut(rest.trim()));
            }
            _ => {}
        }
        Ok(())
    }

    /// `O A arm 02 armv7l VERSION…`.
    fn os_line(&mut self, rest: &str) {
        let mut fields = rest.splitn(5, ' ');
        self.os = Some(match fields.next() {
            Some("A") => Os::Android,
            Some("L") => Os::Linux,
            _ => Os::Unknown,
        });
        self.arch = fields.next().map(cut);
        self.cpus = fields.next().and_then(|c| u32::from_str_radix(c, 16).ok());
        self.hw_arch = fields.next().map(cut);
        self.os_version = fields.next().map(|v| cut(v.trim()));
    }

    /// `H LO HI HOLES LARGEST TOTAL [BITS:N…]` (hex), into three annotations; a record
    /// that does not read so is left out with a warning.
    fn free_space_line(&mut self, rest: &str) {
        let mut fields = rest.split_whitespace();
        let read: Result<Vec<u64>, DumpError> =
            ["low end", "high end", "holes", "largest", "total"]
                .into_iter()
                .map(|what| number(fields.next(), what))
                .collect();
        match read.as_deref() {
            Ok(&[_, _, holes, largest, total]) => {
                for (key, value) in [
                    ("free_address_space_largest", largest),
                    ("free_address_space_total", total),
                    ("free_address_space_holes", holes),
                ] {
                    self.annotations.insert(key.into(), value.to_string());
                }
            }
            Ok(_) => {}
            Err(e) => self.warnings.push(Warning::new(
                "microdump-free-space-unreadable",
                format!("the free address space record (H) was left out: {e}"),
            )),
        }
    }

    /// `S 0 SP START LEN` (the header, skipped as Breakpad does) or `S ADDRESS HEX`.
    fn stack_line(&mut self, rest: &str) -> Result<(), DumpError> {
        let mut fields = rest.split_whitespace();
        let address = number(fields.next(), "stack address")?;
        if address == 0 {
            return Ok(());
        }
        let bytes = hex_bytes(fields.next().unwrap_or(""), "stack memory")?;
        self.stack_bytes = self.stack_bytes.saturating_add(bytes.len());
        if self.stack_bytes > MAX_STACK_BYTES {
            return Err(DumpError::Unsupported(format!(
                "the microdump's stack is over {MAX_STACK_BYTES} bytes"
            )));
        }
        match self.stack.last_mut() {
            Some((start, kept)) if start.checked_add(kept.len() as u64) == Some(address) => {
                kept.extend_from_slice(&bytes);
            }
            _ => self.stack.push((address, bytes)),
        }
        Ok(())
    }

    /// `R SIGNAL NAME ADDRESS`, all but the name in hex.
    fn crash_line(&mut self, rest: &str) -> Result<(), DumpError> {
        let mut fields = rest.split_whitespace();
        let signal = number(fields.next(), "signal")?;
        let signal = u32::try_from(signal).map_err(|_| malformed("signal out of range"))?;
        let name = fields.next().map(cut);
        let address = number(fields.next(), "crash address")?;
        self.crash = Some((signal, name, address));
        Ok(())
    }

    /// `M BASE FILE_OFFSET SIZE DEBUG_ID NAME`.
    fn module_line(&mut self, rest: &str) -> Result<(), DumpError> {
        if self.modules.len() >= MAX_MODULES {
            return Err(DumpError::Unsupported(format!(
                "the microdump lists over {MAX_MODULES} modules"
            )));
        }
        let mut fields = rest.split_whitespace();
        let base = number(fields.next(), "module base")?;
        let file_offset = number(fields.next(), "module file offset")?;
        let size = number(fields.next(), "module size")?;
        let id = fields.next().ok_or_else(|| malformed("no module id"))?;
        if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(malformed(format!("module id {:?} is not hex", cut(id))));
        }
        let name = cut(fields.next().unwrap_or(""));
        let end = base
            .checked_add(size)
            .ok_or_else(|| malformed("a module ends past the address space"))?;
        if size == 0 {
            return Ok(());
        }
        self.modules.push(Module {
            name,
            base,
            end,
            load_base: base,
            debug_id: Some(id.to_ascii_uppercase()),
            identity: Identity::BuildId,
            mappings: vec![Mapping {
                start: base,
                end,
                file_offset,
                executable: None,
            }],
            ..Module::default()
        });
        Ok(())
    }

    fn into_dump(mut self) -> Result<Dump<'static>, DumpError> {
        let arch_name = self
            .arch
            .take()
            .ok_or_else(|| malformed("the microdump has no OS line (O), so its CPU is unknown"))?;
        let arch = match arch_name.as_str() {
            "arm" => Arch::Arm,
            "arm64" => Arch::Aarch64,
            "x86" => Arch::X86,
            other => return Err(DumpError::UnsupportedArch(format!("microdump of {other}"))),
        };
        let context = self
            .context
            .take()
            .ok_or_else(|| malformed("the microdump has no CPU context (C line)"))?;
        let registers = registers_of(arch, &context)?;
        let mut warnings = std::mem::take(&mut self.warnings);
        if self.count > 1 {
            warnings.push(Warning::new(
                "microdump-several",
                format!(
                    "the log holds {} microdumps: only the first was read",
                    self.count
                ),
            ));
        }
        if !self.ended {
            warnings.push(Warning::new(
                "microdump-unended",
                "the microdump has no end marker: the log may be cut short",
            ));
        }
        let modules = sorted(std::mem::take(&mut self.modules));
        let (signal, address) = match &self.crash {
            Some((s, _, a)) => (Some(*s), Some(*a)),
            None => (None, None),
        };
        Ok(Dump {
            format: DumpFormat::Microdump,
            arch,
            os: self.os.unwrap_or(Os::Unknown),
            writer: Some("breakpad-microdump".into()),
            pid: None,
            executable: None,
            command_line: None,
            created: None,
            threads: vec![Thread {
                tid: 0,
                name: None,
                registers,
                prewalked: None,
                evidence: false,
            }],
            modules,
            unloaded_modules: Vec::new(),
            memory: MemoryMap::owned(std::mem::take(&mut self.stack)),
            regions: super::Regions::default(),
            // a microdump is written for a crash, of the thread that crashed
            crash: Some(CrashInfo {
                tid: 0,
                signal,
                address,
                ..CrashInfo::default()
            }),
            annotations: self.annotations,
            warnings,
            pac_mask: None,
            system: SystemInfo {
                os_version: self.os_version,
                cpu_info: self.hw_arch,
                cpu_count: self.cpus,
                ..SystemInfo::default()
            },
        })
    }
}

/// The modules by base; where two overlap (load biasing moves a start down), the lower
/// one ends where the upper starts, as Breakpad's reader truncates them on Android.
fn sorted(mut modules: Vec<Module>) -> Vec<Module> {
    modules.sort_by_key(|m| (m.base, m.end));
    modules.dedup_by_key(|m| m.base);
    let bases: Vec<u64> = modules.iter().skip(1).map(|m| m.base).collect();
    for (m, next) in modules.iter_mut().zip(bases) {
        if m.end > next {
            m.end = next;
            for map in &mut m.mappings {
                map.end = map.end.min(next);
            }
        }
    }
    modules
}

fn le32(c: &[u8], at: usize) -> u64 {
    c.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, |b| u64::from(u32::from_le_bytes(b)))
}

fn le64(c: &[u8], at: usize) -> u64 {
    c.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// The registers of a raw minidump CPU context of `arch`, whose size must be the
/// struct's (the writer copies the whole struct).
fn registers_of(arch: Arch, c: &[u8]) -> Result<RegisterSet, DumpError> {
    let mut r = RegisterSet::new(arch);
    let wrong = || {
        malformed(format!(
            "a {arch} CPU context of {} bytes (Breakpad's is {})",
            c.len(),
            match arch {
                Arch::Arm => ARM_CONTEXT.to_string(),
                Arch::Aarch64 => format!("{ARM64_CONTEXT} or {ARM64_OLD_CONTEXT}"),
                _ => X86_CONTEXT.to_string(),
            }
        ))
    };
    match (arch, c.len()) {
        (Arch::Arm, ARM_CONTEXT) => {
            // context_flags, r0–r15, cpsr
            for (i, reg) in (arm::Reg::R0.dwarf()..).take(16).enumerate() {
                r.set(reg, le32(c, 4 + 4 * i));
            }
            r.set(arm::CPSR_SLOT, le32(c, 68));
        }
        (Arch::Aarch64, ARM64_CONTEXT | ARM64_OLD_CONTEXT) => {
            // both layouts keep x0–x30, sp and pc from byte 8; cpsr is before them in the
            // new one (after 32-bit flags), after them in the old (64-bit flags)
            for (i, reg) in (aarch64::Reg::X0.dwarf()..).take(31).enumerate() {
                r.set(reg, le64(c, 8 + 8 * i));
            }
            r.set(aarch64::Reg::Sp, le64(c, 256));
            r.set(aarch64::Reg::Pc, le64(c, 264));
            let cpsr = if c.len() == ARM64_CONTEXT {
                le32(c, 4)
            } else {
                le32(c, 272)
            };
            r.set(aarch64::Reg::Pstate, cpsr);
        }
        (Arch::X86, X86_CONTEXT) => {
            use x86::Reg::*;
            for (reg, at) in [
                (Edi, 156),
                (Esi, 160),
                (Ebx, 164),
                (Edx, 168),
                (Ecx, 172),
                (Eax, 176),
                (Ebp, 180),
                (Eip, 184),
                (Eflags, 192),
                (Esp, 196),
            ] {
                r.set(reg, le32(c, at));
            }
        }
        _ => return Err(wrong()),
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small arm microdump in logcat's brief format: `stack` at 0x1000.
    fn arm(stack: &str, extra: &str) -> String {
        let mut ctx = vec![0u8; ARM_CONTEXT];
        ctx[0..4].copy_from_slice(&0x4000_0006u32.to_le_bytes());
        ctx[4 + 13 * 4..4 + 14 * 4].copy_from_slice(&0x1000u32.to_le_bytes()); // sp
        ctx[4 + 15 * 4..4 + 16 * 4].copy_from_slice(&0xaa01u32.to_le_bytes()); // pc
        let lines = [
            BEGIN.to_string(),
            "O A arm 02 armv7l OS VERSION INFO".into(),
            "S 0 1000 1000 00000010".into(),
            format!("S 1000 {stack}"),
            format!("C {}", crate::ids::hex(&ctx)),
            "M 0000A000 00000000 00001000 DA7778FB66018A4E9B4110ED06E730D00 app".into(),
            extra.to_string(),
            END.to_string(),
        ];
        lines
            .iter()
            .map(|l| format!("W/google-breakpad( 3745): {l}\n"))
            .collect()
    }

    #[test]
    fn reads_registers_stack_and_modules() {
        let text = arm(
            "00112233445566778899AABBCCDDEEFF",
            "R 0000000B SIGSEGV 0000DEAD",
        );
        assert!(sniff(text.as_bytes()));
        let d = read(text.as_bytes()).expect("reads");
        assert_eq!(
            (d.format, d.arch, d.os),
            (DumpFormat::Microdump, Arch::Arm, Os::Android)
        );
        let r = &d.threads[0].registers;
        assert_eq!(
            (r.get(arm::SP), r.get(arm::PC)),
            (Some(0x1000), Some(0xaa01))
        );
        assert_eq!(d.memory.read_u32(0x1004), Some(0x7766_5544));
        assert_eq!(d.modules.len(), 1);
        assert_eq!(
            d.modules[0].breakpad_sym_path().as_deref(),
            Some("app/DA7778FB66018A4E9B4110ED06E730D00/app.sym")
        );
        let crash = d.crash.expect("crash");
        assert_eq!((crash.signal, crash.address), (Some(11), Some(0xdead)));
        assert_eq!(d.system.cpu_count, Some(2));
        assert_eq!(d.system.os_version.as_deref(), Some("OS VERSION INFO"));
    }

    #[test]
    fn takes_the_first_of_several_and_any_logcat_prefix() {
        let first = arm("00", "");
        let second = arm("11", "").replace(
            "W/google-breakpad( 3745): ",
            "02-23 15:49:14.700  1740  1739 F google-breakpad: ",
        );
        let text = format!("noise\n{first}other line\n{second}");
        let d = read(text.as_bytes()).expect("reads");
        assert_eq!(d.memory.read_bytes(0x1000, 1), Some(&[0u8][..]));
        assert!(d.warnings.iter().any(|w| w.code == "microdump-several"));
        assert!(read(second.as_bytes()).is_ok());
    }

    #[test]
    fn hostile_input_is_a_typed_error() {
        let good = arm("00", "");
        let cases = [
            // bad hex, odd hex, huge numbers
            good.replace("S 1000 00", "S 1000 0G"),
            good.replace("S 1000 00", "S 1000 000"),
            good.replace("M 0000A000", "M 1FFFFFFFFFFFFFFFFF"),
            good.replace("M 0000A000 00000000 00001000", "M FFFFFFFFFFFFFFFF 0 10"),
            arm("00", "R"),
            arm("00", "R 5 SIGTRAP"),
            // a context cut short, no context, no OS line, an unsupported CPU
            good.replacen("C 06", "C ", 1),
            good.replacen("C 06000040", "C 40", 1),
            good.lines()
                .filter(|l| !l.contains(": C "))
                .collect::<Vec<_>>()
                .join("\n"),
            good.lines()
                .filter(|l| !l.contains(": O "))
                .collect::<Vec<_>>()
                .join("\n"),
            good.replace("O A arm ", "O A mips "),
            // no microdump at all
            "W/google-breakpad( 1): S 1000 00\n".into(),
        ];
        for (i, c) in cases.iter().enumerate() {
            assert!(read(c.as_bytes()).is_err(), "case {i} was read");
        }
        // a stack over the bound
        let big = arm(&"00".repeat(MAX_STACK_BYTES + 1), "");
        assert!(matches!(
            read(big.as_bytes()),
            Err(DumpError::Unsupported(_))
        ));
    }

    #[test]
    fn a_cut_log_keeps_what_it_has() {
        let good = arm("0011", "");
        let cut_at = good.find(END).expect("end");
        let d = read(&good.as_bytes()[..cut_at]).expect("reads");
        assert!(d.warnings.iter().any(|w| w.code == "microdump-unended"));
        // every prefix of the text reads or fails, never panics
        for n in 0..good.len() {
            let _ = read(&good.as_bytes()[..n]);
        }
    }

    /// An `H` record as Breakpad's `DumpFreeSpace` writes it on a 32-bit process (hex
    /// `uintptr_t`s, a `uint16_t` count, then `log2:count` bytes): its largest hole, total
    /// and count become annotations; a record cut short is a warning, not an error.
    #[test]
    fn the_free_space_record_becomes_annotations() {
        let d = read(
            arm(
                "00",
                "H 00008000 F7FFF000 0012 10000000 2A000000 0C:03 1C:01",
            )
            .as_bytes(),
        )
        .expect("reads");
        let a = |k: &str| d.annotations.get(k).map(String::as_str);
        assert_eq!(a("free_address_space_largest"), Some("268435456"));
        assert_eq!(a("free_address_space_total"), Some("704643072"));
        assert_eq!(a("free_address_space_holes"), Some("18"));
        let d = read(arm("00", "H 00008000 F7FFF000 0012").as_bytes()).expect("reads");
        assert!(!d.annotations.contains_key("free_address_space_largest"));
        assert!(d
            .warnings
            .iter()
            .any(|w| w.code == "microdump-free-space-unreadable"));
    }

    #[test]
    fn overlapping_modules_are_cut_at_the_next_base() {
        let m = |base, end| Module {
            base,
            end,
            ..Module::default()
        };
        let s = sorted(vec![m(0x3000, 0x4000), m(0x1000, 0x3800)]);
        assert_eq!((s[0].base, s[0].end, s[1].base), (0x1000, 0x3000, 0x3000));
    }
}
