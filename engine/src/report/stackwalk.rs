//! minidump-stackwalk's outputs, made from a report: its JSON document (the schema
//! rust-minidump documents in `minidump-processor/json-schema.md`, the one Socorro's
//! processor and crash-stats tooling read) and its human-readable text.
//!
//! A pipeline that runs `minidump-stackwalk --json` can run `postmortem-walk --json`
//! instead and read the same fields. Both are renderings of the one report, as the text
//! view is, so they can never say something the report does not; they differ from
//! minidump-stackwalk's where postmortem's walk does (more frames, fewer scanned ones),
//! never in what a field means. Where the report has no counterpart for a field
//! (rust-minidump's disassembly of the crashing instruction, Windows handles, macOS crash
//! info) the field is `null`, as the schema allows for any field.
//!
//! Conventions followed from minidump-stackwalk: addresses are hex strings padded to the
//! pointer width; a caller frame's `offset` is its return address minus one instruction
//! step (1 on x86_64, 4 on aarch64) — the call, not the instruction after it — and
//! `module_offset`/`function_offset` are measured from that; inlined functions are listed
//! in their real frame's `inlines`, innermost first; only the crashed thread's copy in
//! `crashing_thread` carries registers.

use std::fmt::Write;

use super::{Frame, Report, Thread};
use crate::dump::{Arch, DumpFormat, Os};
use crate::walk::Trust;

mod json;
#[cfg(test)]
mod tree;

pub use json::{document, write_json, Document};

/// minidump-stackwalk's `--human` text (`--brief`: the summary and the crashed thread).
pub fn human(report: &Report, brief: bool) -> String {
    let width = Width::of(report.dump.arch);
    let system = &report.dump.system;
    let mut out = String::new();
    human_system(&mut out, report);
    out.push('\n');
    match &report.crash {
        Some(c) => human_crash(&mut out, report, c, width),
        None => {
            let _ = writeln!(out, "No crash");
        }
    }
    if let Some(a) = report.crash.as_ref().and_then(|c| c.assertion.as_ref()) {
        let _ = writeln!(out, "Assertion: {a}");
    }
    match system.uptime_seconds {
        Some(s) => {
            let _ = writeln!(out, "Process uptime: {s} seconds");
        }
        None => {
            let _ = writeln!(out, "Process uptime: not available");
        }
    }
    out.push('\n');
    if let Some(n) = system.memory_map_count {
        let _ = writeln!(out, "Linux memory map count: {n}\n");
    }
    let crashed = report.crash.as_ref().map(|c| c.thread);
    if let Some(t) = crashed.and_then(|i| report.threads.get(i)) {
        human_thread(&mut out, t, " (crashed)", report, width);
        out.push('\n');
    }
    if brief {
        return out;
    }
    for t in &report.threads {
        if Some(t.index) == crashed {
            continue;
        }
        human_thread(&mut out, t, "", report, width);
    }
    out.push_str("\nLoaded modules:\n");
    let mut modules: Vec<&super::Module> = report.modules.iter().collect();
    modules.sort_by_key(|m| m.base);
    for m in modules {
        let (base, end) = (m.base.get(), m.end.get());
        let _ = writeln!(
            out,
            "{base:#010x} - {:#010x}  {}  {}{}",
            end.saturating_sub(1),
            m.name,
            m.version.as_deref().unwrap_or("???"),
            if m.main { "  (main)" } else { "" }
        );
    }
    out.push_str("\nUnloaded modules:\n");
    for m in &report.unloaded_modules {
        let (base, end) = (m.base.get(), m.end.get());
        let _ = writeln!(
            out,
            "{base:#010x} - {:#010x}  {}",
            end.saturating_sub(1),
            m.name
        );
    }
    out
}

/// The system the dump was written on: OS, CPU, Linux distribution.
fn human_system(out: &mut String, report: &Report) {
    let system = &report.dump.system;
    let _ = writeln!(out, "Operating system: {}", os_name(report.dump.os));
    if let Some(v) = &system.os_version {
        let _ = writeln!(out, "                  {v}");
    }
    let _ = writeln!(out, "CPU: {}", cpu_name(report.dump.arch));
    if let Some(info) = &system.cpu_info {
        let _ = writeln!(out, "     {info}");
    }
    if let Some(n) = system.cpu_count {
        let _ = writeln!(out, "     {n} CPU{}", if n > 1 { "s" } else { "" });
    }
    if let Some(d) = &system.distribution {
        let _ = writeln!(
            out,
            "Linux {} {} - {} ({})",
            d.id, d.release, d.codename, d.description
        );
    }
}

/// The crash: its reason and address, the crashing instruction, flipped-bit candidates
/// and our analysis.
fn human_crash(out: &mut String, report: &Report, c: &super::Crash, width: Width) {
    let _ = writeln!(out, "Crash reason:  {}", crash_type(report));
    let address = c.address.map(|a| width.addr(a));
    let address = address.as_deref().unwrap_or("(none)");
    match adjusted(report) {
        Some(Adjusted::NullPointer(offset)) => {
            let _ = writeln!(out, "Crash address: {address} **");
            let _ = writeln!(
                out,
                "    ** Null pointer detected with offset: {}",
                width.hex(offset)
            );
        }
        Some(Adjusted::NonCanonical(a)) => {
            let _ = writeln!(out, "Crash address: {address} **");
            let _ = writeln!(
                out,
                "    ** Non-canonical address detected: {}",
                width.hex(a)
            );
        }
        None => {
            let _ = writeln!(out, "Crash address: {address}");
        }
    }
    if let Some(i) = &c.instruction {
        human_instruction(out, i, width);
    }
    let mut flips = bit_flips(report, width);
    if !flips.is_empty() {
        let _ = writeln!(out, "Crashing address may be the result of a flipped bit:");
        // most likely first, then by address
        flips.sort_by(|a, b| {
            b.confidence()
                .total_cmp(&a.confidence())
                .then(a.address.cmp(&b.address))
        });
        for (n, f) in flips.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {n}. Valid address: {} ({:.3})",
                width.hex(f.address),
                f.confidence()
            );
        }
    }
    if let Some(a) = &c.analysis {
        let _ = writeln!(out, "Crash analysis: [{}] {}", a.kind, a.summary);
    }
}

/// The crashing instruction and the memory it accesses.
fn human_instruction(out: &mut String, i: &super::CrashInstruction, width: Width) {
    let _ = writeln!(out, "Crashing instruction: `{}`", i.text);
    if i.accesses.is_empty() {
        let _ = writeln!(out, "No memory accessed by instruction");
    } else {
        let _ = writeln!(out, "Memory accessed by instruction:");
    }
    for (n, a) in i.accesses.iter().enumerate() {
        let _ = writeln!(out, "  {n}. Address: {}", width.addr(a.address));
        match a.size {
            Some(size) => {
                let _ = writeln!(out, "     Size: {size}");
            }
            None => {
                let _ = writeln!(out, "     Size: Unknown");
            }
        }
        if let Some(k) = a.access {
            let _ = writeln!(out, "     Access type: {}", access_type(k));
        }
    }
    if let Some(j) = i.jump {
        let _ = writeln!(out, "Instruction pointer update done by instruction:");
        let _ = writeln!(out, "  Address: {}", width.addr(j));
    } else if !is_branch(&i.text) {
        let _ = writeln!(out, "No instruction pointer update by instruction");
    }
}

/// One thread's heading (`tag`: ` (crashed)` or nothing) and frames as
/// minidump-stackwalk prints them.
fn human_thread(out: &mut String, t: &Thread, tag: &str, report: &Report, width: Width) {
    let _ = writeln!(
        out,
        "Thread {} {}{tag} - tid: {}",
        t.index,
        t.name.as_deref().unwrap_or(""),
        t.tid
    );
    if t.frames.is_empty() {
        out.push_str("<no frames>\n");
    }
    let mut n = 0usize;
    for (i, real) in real_frames(t).into_iter().enumerate() {
        for inline in real.inlines {
            let _ = write!(out, "{n:2}  {}!", inline.module.as_deref().unwrap_or(""));
            out.push_str(inline.function.as_deref().unwrap_or("<unknown>"));
            if let (Some(file), Some(line)) = (&inline.file, inline.line) {
                let _ = write!(out, " [{} : {line}]", basename(file));
            }
            out.push_str("\n    Found by: inlining\n");
            n += 1;
        }
        let f = real.frame;
        let at = Address::of(f, i, report.dump.arch);
        let _ = write!(out, "{n:2}  ");
        match (&f.module, at.module_offset) {
            (Some(module), Some(module_offset)) => {
                out.push_str(module);
                match (&f.function, at.function_offset) {
                    (Some(func), Some(function_offset)) => {
                        let _ = write!(out, "!{func}");
                        match (&f.file, f.line) {
                            (Some(file), Some(line)) => {
                                let _ = write!(out, " [{} : {line}]", basename(file));
                            }
                            _ => {
                                let _ = write!(out, " + {function_offset:#x}");
                            }
                        }
                    }
                    _ => {
                        let _ = write!(out, " + {module_offset:#x}");
                    }
                }
            }
            _ => {
                let _ = write!(out, "{:#x}", at.offset);
            }
        }
        out.push('\n');
        // frame 0: the whole context; a caller: the stack and instruction pointers the
        // walk recovered (the report keeps no other register of a caller)
        let registers = if i == 0 {
            gprs(t, report.dump.arch, width)
        } else {
            caller_registers(f, report.dump.arch, width)
        };
        let mut line = String::new();
        for (name, value) in registers {
            let next = format!(" {name: >6} = {value}");
            if line.chars().count() + next.chars().count() > 80 {
                let _ = writeln!(out, " {line}");
                line.clear();
            }
            line.push_str(&next);
        }
        if !line.is_empty() {
            let _ = writeln!(out, " {line}");
        }
        let _ = writeln!(out, "    Found by: {}", trust_description(f.trust));
        n += 1;
    }
}

/// A frame as the stack holds it, with the functions inlined at its address.
struct RealFrame<'r> {
    frame: &'r Frame,
    /// Innermost first, as the report lists them.
    inlines: Vec<&'r Frame>,
}

/// The report lists an inlined function as an entry of its own before the frame it was
/// inlined into; minidump-stackwalk nests them in that frame.
fn real_frames(t: &Thread) -> Vec<RealFrame<'_>> {
    let mut out = Vec::new();
    let mut inlines = Vec::new();
    for f in &t.frames {
        if f.inlined {
            inlines.push(f);
        } else {
            out.push(RealFrame {
                frame: f,
                inlines: std::mem::take(&mut inlines),
            });
        }
    }
    out
}

/// Where a real frame is, in minidump-stackwalk's terms.
struct Address {
    offset: u64,
    module_offset: Option<u64>,
    function_offset: Option<u64>,
}

impl Address {
    /// Frame `index` (counting real frames) of a thread: frame 0 is where the thread
    /// was; a caller's address is the call instruction's (return address minus one
    /// step), and its offsets are measured from there.
    fn of(f: &Frame, index: usize, arch: Arch) -> Address {
        let pc = f.pc.get();
        let back = if index == 0 {
            0
        } else {
            match arch {
                Arch::Aarch64 => 4,
                Arch::Arm => 2,
                Arch::X86_64 | Arch::X86 => 1,
            }
        };
        let from = |offset: &Option<super::Addr>| offset.map(|o| o.get().saturating_sub(back));
        Address {
            offset: pc.saturating_sub(back),
            module_offset: from(&f.module_offset),
            function_offset: from(&f.function_offset),
        }
    }
}

/// The analysis's evidence key listing the mapped addresses one flipped bit from the
/// faulting address (`crash.analysis.evidence.bit_flip_of`, space-separated).
const BIT_FLIP_OF: &str = "bit_flip_of";

/// Registers holding a value this close to a corrected address count as "nearby"
/// (rust-minidump's `NEARBY_REGISTER_DISTANCE`).
const NEARBY_REGISTER_DISTANCE: u64 = 1 << 12;
/// Addresses up to this are "low" (rust-minidump's `LOW_ADDRESS_CUTOFF`).
const LOW_ADDRESS_CUTOFF: u64 = NEARBY_REGISTER_DISTANCE * 2;

/// One of rust-minidump's `possible_bit_flips`: an address one flipped bit from the
/// faulting one that the program could have meant, with the heuristics its confidence
/// rests on.
struct BitFlip {
    address: u64,
    is_null: bool,
    was_low: bool,
    nearby_registers: u32,
    poison_registers: bool,
}

impl BitFlip {
    /// The flip to `address` of the faulting address `original`, judged by the crashed
    /// thread's general-purpose register values, as rust-minidump's
    /// `PossibleBitFlip::calculate_heuristics` does.
    fn new(address: u64, original: u64, registers: &[u64], width: Width) -> BitFlip {
        let is_null = address == 0;
        let repeated = |v: u64| {
            let byte = v & 0xff;
            match width.0 {
                8 => v == byte * 0x0101_0101,
                _ => v == byte * 0x0101_0101_0101_0101,
            }
        };
        // the fill patterns of allocators' freed memory (rust-minidump's list)
        let poison = |v: u64| {
            repeated(v)
                && matches!(
                    v & 0xff,
                    0x2b | 0x2d
                        | 0x2f
                        | 0x49
                        | 0x4b
                        | 0x4d
                        | 0x4f
                        | 0x6b
                        | 0x8b
                        | 0x9b
                        | 0x9f
                        | 0xa5
                        | 0xbb
                        | 0xcc
                        | 0xcd
                        | 0xce
                        | 0xdb
                        | 0xe5
                )
        };
        let nearby = if address > LOW_ADDRESS_CUTOFF {
            registers
                .iter()
                .filter(|&&r| address.abs_diff(r) <= NEARBY_REGISTER_DISTANCE)
                .count()
        } else {
            0
        };
        BitFlip {
            address,
            is_null,
            was_low: is_null && original <= LOW_ADDRESS_CUTOFF,
            nearby_registers: u32::try_from(nearby).unwrap_or(u32::MAX),
            poison_registers: registers.iter().any(|&r| poison(r)),
        }
    }

    /// rust-minidump's `BitFlipDetails::confidence`, with its weights: a baseline, more
    /// for a null correction (less if the faulting address was low) and for registers
    /// near the corrected address, halved if a register holds a poison pattern (a
    /// use-after-free rather than a flip). The faulting address here is never
    /// non-canonical: the analysis looks for flips of an unmapped, canonical address.
    fn confidence(&self) -> f32 {
        const MEDIUM: f32 = 0.50;
        const LOW: f32 = 0.25;
        const NEARBY: [f32; 4] = [MEDIUM, MEDIUM + 0.05, MEDIUM + 0.1, MEDIUM + 0.15];
        let mut values = vec![LOW];
        if self.is_null {
            values.push(if self.was_low {
                MEDIUM * MEDIUM
            } else {
                MEDIUM
            });
        }
        if self.nearby_registers > 0 {
            let i = usize::try_from(self.nearby_registers)
                .unwrap_or(usize::MAX)
                .min(NEARBY.len())
                - 1;
            values.extend(NEARBY.get(i));
        }
        let combined = 1.0 - values.iter().map(|v| 1.0 - v).product::<f32>();
        if self.poison_registers {
            combined * MEDIUM
        } else {
            combined
        }
    }
}

/// The crash analysis's bit flips of the faulting address (see [`BIT_FLIP_OF`]), in
/// rust-minidump's order (by the flipped bit, low first).
fn bit_flips(report: &Report, width: Width) -> Vec<BitFlip> {
    let Some(c) = &report.crash else {
        return Vec::new();
    };
    let Some(flips) = c
        .analysis
        .as_ref()
        .and_then(|a| a.evidence.get(BIT_FLIP_OF))
    else {
        return Vec::new();
    };
    let original = c.address.map_or(0, super::Addr::get);
    let registers: Vec<u64> = report
        .threads
        .get(c.thread)
        .map(|t| {
            gpr_values(t, report.dump.arch)
                .into_iter()
                .map(|(_, v)| v)
                .collect()
        })
        .unwrap_or_default();
    flips
        .split_whitespace()
        .filter_map(|w| super::Addr::parse(w).map(super::Addr::get))
        .map(|a| BitFlip::new(a, original, &registers, width))
        .collect()
}

/// What the crashing instruction's operands say the faulting address really was.
enum Adjusted {
    /// An access through a base register holding 0, at this offset.
    NullPointer(u64),
    /// A general-protection fault (no address reported) at this non-canonical address.
    NonCanonical(u64),
}

/// minidump-stackwalk's `adjusted_address`, from the decoded instruction.
fn adjusted(report: &Report) -> Option<Adjusted> {
    let c = report.crash.as_ref()?;
    let instruction = c.instruction.as_ref()?;
    let accesses = &instruction.accesses;
    let address = |a: &super::MemoryAccess| a.address.get();
    let jump = instruction.jump.map(super::Addr::get);
    if let Some(offset) = accesses.iter().find(|a| a.base_null).map(address) {
        return Some(Adjusted::NullPointer(offset));
    }
    if jump == Some(0) {
        return Some(Adjusted::NullPointer(0));
    }
    let general_protection = report.dump.arch == Arch::X86_64
        && c.signal_name.as_deref() == Some("SIGSEGV")
        && c.code_name.as_deref() == Some("SI_KERNEL");
    if !general_protection {
        return None;
    }
    accesses
        .iter()
        .map(address)
        .chain(jump)
        .find(|a| (0x0000_8000_0000_0000..=0xffff_7fff_ffff_ffff).contains(a))
        .map(Adjusted::NonCanonical)
}

/// Whether an instruction (by its text) sets the pc: calls, jumps, returns.
fn is_branch(text: &str) -> bool {
    let mnemonic = text.split_whitespace().next().unwrap_or("");
    mnemonic.starts_with('j') || mnemonic.starts_with("call") || mnemonic.starts_with("ret")
}

/// minidump-stackwalk's word for an access's direction.
fn access_type(k: super::AccessKind) -> &'static str {
    match k {
        super::AccessKind::Read => "Read",
        super::AccessKind::Write => "Write",
        super::AccessKind::ReadWrite => "ReadWrite",
    }
}

/// `SIGSEGV / SEGV_MAPERR`, `EXCEPTION_ACCESS_VIOLATION_READ`: the reason without the
/// address (minidump-stackwalk gives that a field of its own).
fn crash_type(report: &Report) -> String {
    let Some(c) = &report.crash else {
        return String::new();
    };
    if let Some(e) = &c.exception {
        if c.signal_name.is_none() {
            return e.name.clone();
        }
    }
    match (&c.signal_name, &c.code_name) {
        // rust-minidump names a signal sent by a process (`SI_USER`, code 0) alone
        (Some(s), Some(code)) if code == "SI_USER" => s.clone(),
        (Some(s), Some(code)) => format!("{s} / {code}"),
        (Some(s), None) => s.clone(),
        _ => c
            .reason
            .split(" at ")
            .next()
            .unwrap_or(&c.reason)
            .to_string(),
    }
}

/// The crashed thread's general-purpose registers, in minidump-stackwalk's order and
/// names (`fp`/`lr` for aarch64's x29/x30).
fn gprs(t: &Thread, arch: Arch, width: Width) -> Vec<(&'static str, String)> {
    gpr_values(t, arch)
        .into_iter()
        .map(|(shown, v)| (shown, width.hex(v)))
        .collect()
}

/// The values of [`gprs`].
fn gpr_values(t: &Thread, arch: Arch) -> Vec<(&'static str, u64)> {
    const X86_64: &[(&str, &str)] = &[
        ("rax", "rax"),
        ("rdx", "rdx"),
        ("rcx", "rcx"),
        ("rbx", "rbx"),
        ("rsi", "rsi"),
        ("rdi", "rdi"),
        ("rbp", "rbp"),
        ("rsp", "rsp"),
        ("r8", "r8"),
        ("r9", "r9"),
        ("r10", "r10"),
        ("r11", "r11"),
        ("r12", "r12"),
        ("r13", "r13"),
        ("r14", "r14"),
        ("r15", "r15"),
        ("rip", "rip"),
    ];
    const AARCH64: &[(&str, &str)] = &[
        ("x0", "x0"),
        ("x1", "x1"),
        ("x2", "x2"),
        ("x3", "x3"),
        ("x4", "x4"),
        ("x5", "x5"),
        ("x6", "x6"),
        ("x7", "x7"),
        ("x8", "x8"),
        ("x9", "x9"),
        ("x10", "x10"),
        ("x11", "x11"),
        ("x12", "x12"),
        ("x13", "x13"),
        ("x14", "x14"),
        ("x15", "x15"),
        ("x16", "x16"),
        ("x17", "x17"),
        ("x18", "x18"),
        ("x19", "x19"),
        ("x20", "x20"),
        ("x21", "x21"),
        ("x22", "x22"),
        ("x23", "x23"),
        ("x24", "x24"),
        ("x25", "x25"),
        ("x26", "x26"),
        ("x27", "x27"),
        ("x28", "x28"),
        ("fp", "x29"),
        ("lr", "x30"),
        ("sp", "sp"),
        ("pc", "pc"),
    ];
    let names = match arch {
        Arch::X86_64 => X86_64,
        Arch::Aarch64 => AARCH64,
        Arch::X86 | Arch::Arm => &[],
    };
    names
        .iter()
        .filter_map(|&(shown, ours)| Some((shown, t.registers.get(ours)?.get())))
        .collect()
}

/// A caller frame's stack pointer and pc (its return address), by minidump-stackwalk's
/// names.
fn caller_registers(f: &Frame, arch: Arch, width: Width) -> Vec<(&'static str, String)> {
    let (sp, pc) = match arch {
        Arch::X86_64 => ("rsp", "rip"),
        Arch::X86 => ("esp", "eip"),
        Arch::Aarch64 | Arch::Arm => ("sp", "pc"),
    };
    let mut out = Vec::new();
    if let Some(v) = f.sp {
        out.push((sp, width.addr(v)));
    }
    out.push((pc, width.addr(f.pc)));
    out
}

/// minidump-stackwalk's `debug_id` of a module the dump gives none (a Windows module
/// without a CodeView record): the nil id, as rust-minidump writes it.
const NIL_DEBUG_ID: &str = "000000000000000000000000000000000";

/// minidump-stackwalk's `debug_file`: the PDB a Windows module's CodeView record names;
/// an ELF module's own name (its record is its build-id); empty where a minidump names
/// none (a Windows module without a record, or one naming no PDB: mingw-w64's
/// `--build-id`).
fn debug_file<'m>(m: &'m super::Module, report: &Report) -> &'m str {
    match (&m.debug_file, report.dump.format) {
        (Some(file), _) => file,
        (None, DumpFormat::Minidump) if m.build_id.is_none() => "",
        (None, _) => &m.name,
    }
}

/// The modules with the main executable first (minidump-stackwalk's `main_module` is
/// always 0), then by address.
fn main_first(report: &Report) -> Vec<&super::Module> {
    let mut modules: Vec<&super::Module> = report.modules.iter().collect();
    modules.sort_by_key(|m| !m.main);
    modules
}

fn trust_name(t: Trust) -> &'static str {
    match t {
        Trust::Context => "context",
        Trust::Cfi => "cfi",
        Trust::Fp => "frame_pointer",
        Trust::Scan => "scan",
        Trust::Prewalked => "prewalked",
    }
}

fn trust_description(t: Trust) -> &'static str {
    match t {
        Trust::Context => "given as instruction pointer in context",
        Trust::Cfi => "call frame info",
        Trust::Fp => "previous frame's frame pointer",
        Trust::Scan => "stack scanning",
        Trust::Prewalked => "previous walk",
    }
}

fn os_name(os: Os) -> &'static str {
    match os {
        Os::Linux => "Linux",
        Os::Android => "Android",
        Os::Macos => "Mac OS X",
        Os::Ios => "iOS",
        Os::Windows => "Windows NT",
        Os::Unknown => "Unknown",
    }
}

fn cpu_name(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "amd64",
        Arch::Aarch64 => "arm64",
        Arch::X86 => "x86",
        Arch::Arm => "arm",
    }
}

fn basename(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// Hex padded to the crashed process's pointer width, as minidump-stackwalk writes
/// addresses (`0x00007f5140aca4c0`).
#[derive(Clone, Copy)]
struct Width(usize);

impl Width {
    fn of(arch: Arch) -> Width {
        match arch {
            Arch::X86 | Arch::Arm => Width(8),
            Arch::X86_64 | Arch::Aarch64 => Width(16),
        }
    }
    fn hex(self, v: u64) -> String {
        format!("0x{v:0w$x}", w = self.0)
    }
    /// A report address (`0x1a`) padded.
    fn addr(self, a: super::Addr) -> String {
        self.hex(a.get())
    }
}
