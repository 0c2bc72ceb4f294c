//! WoW64: a 32-bit Windows process dumped by a 64-bit writer, read as its 32-bit view.
//!
//! On 64-bit Windows a 32-bit program runs under WoW64: its threads execute 32-bit code,
//! and every system call passes through a 64-bit layer (`wow64.dll`, `wow64cpu.dll`,
//! `wow64win.dll`) with a 64-bit stack of its own. A 64-bit writer — Task Manager's
//! "Create dump file", procdump, Windows Error Reporting, a 64-bit debugger, dbghelp in a
//! 64-bit crash handler — records the process as it sees it: `AMD64` in the system info,
//! and for each thread the 64-bit context, which for a thread waiting in a system call
//! is somewhere in that layer, with the program's frames nowhere on its stack. Walked as
//! written, such a dump shows a few frames of WoW64 and none of the program
//! (minidump-stackwalk's walk of it stops there).
//!
//! The program's registers are in the dump all the same:
//! - a thread stopped in 32-bit code has a 64-bit context whose code segment is the 32-bit
//!   one (`cs` = `0x23`): its `eip`, `esp` and the rest are the low halves of the 64-bit
//!   registers;
//! - a thread in the 64-bit layer saved its 32-bit context in its WoW64 CPU area, which
//!   the thread's 64-bit TEB points to from `TlsSlots[WOW64_TLS_CPURESERVED]` (slot 1,
//!   at offset `0x1488`): a `WOW64_CPURESERVED` header (`USHORT Flags`, `USHORT Machine`,
//!   `0x014c` for i386) followed by the x86 `CONTEXT` (4-byte aligned: at offset 4). This
//!   is what WinDbg's `!wow64exts.sw` and `.effmach x86` read; it is in the dump where the
//!   writer kept the TEBs (a full-memory dump, or `MiniDumpWithProcessThreadData`);
//! - an exception a writer was handed from the 32-bit side comes with an x86 `CONTEXT`.
//!
//! lldb's minidump reader reads WoW64 dumps the same way (`ProcessMinidump`: a module
//! named `wow64.dll`; `MinidumpParser::GetThreadContextWow64`: the context at slot 1's
//! pointer + 4), and its test of a real one (`fizzbuzz_wow64.dmp`, whose file is not in
//! the public snapshots this project can read) asserts the registers so found: `cs`
//! `0x23`, `eip` in 32-bit `ntdll.dll`.
//!
//! A dump is taken for WoW64 when it is `AMD64` and lists `wow64.dll`; then, if any
//! thread's 32-bit context is found, the whole dump is read as x86 (every thread from its
//! 32-bit context, the 32-bit modules walked as in any x86 dump; the 64-bit ones stay
//! listed, no 32-bit frame runs in them). Layouts: `winnt.h`'s `CONTEXT` for i386 and
//! AMD64, and the CPU area as Wine's `RtlWow64GetCurrentCpuArea` and WinDbg's extension
//! read it.

use super::{Arch, MemoryMap, Module, RegisterSet, Thread, Warning};
use crate::arch::x86;

/// Offset of `TlsSlots[WOW64_TLS_CPURESERVED]` in a 64-bit TEB (`TlsSlots` at `0x1480`,
/// slot 1).
const TEB64_CPU_AREA_SLOT: u64 = 0x1480 + 8;
/// `IMAGE_FILE_MACHINE_I386`, the `Machine` of an x86 program's CPU area.
const MACHINE_I386: u16 = 0x014c;
/// The x86 `CONTEXT` in the CPU area follows its 4-byte header.
const CPU_AREA_CONTEXT: u64 = 4;
/// The code segment selector of 32-bit code under WoW64 (`KGDT64_R3_CMCODE | RPL_MASK`).
const CS_32_BIT: u16 = 0x23;

/// `CONTEXT_i386` and `CONTEXT_AMD64`, the CPU bits of a context's flags.
const CONTEXT_I386: u32 = 0x0001_0000;
const CONTEXT_AMD64: u32 = 0x0010_0000;
/// The register groups of a context's flags (the same bits on both CPUs).
const CONTROL: u32 = 1;
const INTEGER: u32 = 2;

/// Bytes of an x86 `CONTEXT` up to its extended registers (`SegSs` ends at `0xcc`), and of
/// an AMD64 `CONTEXT`.
const X86_CONTEXT_BASE: usize = 0xcc;
const AMD64_CONTEXT: usize = 0x4d0;

/// What the dump recorded of one thread, in thread-list order: its 64-bit TEB and the
/// bytes of its context (the exception's context for the crashed thread).
pub(super) struct Recorded<'a> {
    pub teb: u64,
    pub context: Option<&'a [u8]>,
}

/// If the dump is a WoW64 process's (an `AMD64` dump listing `wow64.dll`) and any
/// thread's 32-bit context is in it, replaces every thread's registers with its 32-bit
/// context and returns true: the dump is then read as x86. Threads whose 32-bit context
/// is not in the dump keep no registers, with a warning; if no thread's is, the dump is
/// left as it is, with a warning that says why.
pub(super) fn thirty_two_bit_view(
    modules: &[Module],
    recorded: &[Recorded<'_>],
    memory: &MemoryMap<'_>,
    threads: &mut [Thread],
    warnings: &mut Vec<Warning>,
) -> bool {
    if !modules
        .iter()
        .any(|m| m.name.eq_ignore_ascii_case("wow64.dll"))
    {
        return false;
    }
    let views: Vec<Option<RegisterSet>> = recorded
        .iter()
        .map(|r| {
            r.context
                .and_then(thirty_two_bit_registers)
                .or_else(|| cpu_area_context(memory, r.teb))
        })
        .collect();
    if views.iter().all(Option::is_none) {
        warnings.push(Warning::new(
            "memory-missing",
            "a 32-bit process on 64-bit Windows (WoW64: wow64.dll is loaded), but no \
             thread's 32-bit registers are in the dump (neither a 32-bit context nor the \
             threads' WoW64 CPU areas, which a dump with the threads' TEBs holds): the \
             threads are walked in WoW64's 64-bit layer only",
        ));
        return false;
    }
    let mut missing = Vec::new();
    for (thread, view) in threads.iter_mut().zip(views) {
        thread.registers = view.unwrap_or_else(|| {
            missing.push(thread.tid);
            RegisterSet::new(Arch::X86)
        });
    }
    warnings.push(Warning::new(
        "wow64",
        "a 32-bit process on 64-bit Windows (WoW64): every thread is walked from its 32-bit \
         registers (its WoW64 CPU area, or the 32-bit context the dump recorded); the \
         frames of WoW64's 64-bit layer are not shown",
    ));
    if !missing.is_empty() {
        let shown: Vec<String> = missing.iter().take(16).map(u32::to_string).collect();
        warnings.push(Warning::new(
            "memory-missing",
            format!(
                "{} thread(s) of this WoW64 process have no 32-bit registers in the dump \
                 (their WoW64 CPU area is not in it): {}{}",
                missing.len(),
                shown.join(", "),
                if missing.len() > shown.len() {
                    ", …"
                } else {
                    ""
                }
            ),
        ));
    }
    true
}

/// The 32-bit registers a recorded context holds: an x86 `CONTEXT`, or an AMD64 one
/// captured while the thread ran 32-bit code (`cs` = `0x23`).
fn thirty_two_bit_registers(context: &[u8]) -> Option<RegisterSet> {
    // an x86 CONTEXT is 0x2cc bytes (0xcc without its extended registers), an AMD64 one
    // 0x4d0 and more: the size tells them apart before either's flags are trusted
    if context.len() < AMD64_CONTEXT {
        return x86_context(context);
    }
    let flags = le_u32(context, 0x30).filter(|f| f & CONTEXT_AMD64 != 0)?;
    let cs = u16::from_le_bytes([*context.get(0x38)?, *context.get(0x39)?]);
    if flags & CONTROL == 0 || cs != CS_32_BIT {
        return None;
    }
    let low = |at: usize| le_u32(context, at);
    Some(x86_registers(
        flags,
        // eax, ecx, edx, ebx, esi, edi; esp, ebp, eip, eflags
        [
            low(0x78)?,
            low(0x80)?,
            low(0x88)?,
            low(0x90)?,
            low(0xa8)?,
            low(0xb0)?,
        ],
        [low(0x98)?, low(0xa0)?, low(0xf8)?, low(0x44)?],
    ))
}

/// An x86 `CONTEXT` (`winnt.h`): flags at 0, `Edi`…`Eax` from `0x9c`, then `Ebp`, `Eip`,
/// `SegCs`, `EFlags`, `Esp`.
fn x86_context(context: &[u8]) -> Option<RegisterSet> {
    let flags = le_u32(context, 0)?;
    if flags & CONTEXT_I386 == 0 || context.len() < X86_CONTEXT_BASE {
        return None;
    }
    let at = |offset: usize| le_u32(context, offset);
    Some(x86_registers(
        flags,
        [
            at(0xb0)?,
            at(0xac)?,
            at(0xa8)?,
            at(0xa4)?,
            at(0xa0)?,
            at(0x9c)?,
        ],
        [at(0xc4)?, at(0xb4)?, at(0xb8)?, at(0xc0)?],
    ))
}

/// The x86 registers of a context whose flags declare `flags`'s groups: `integer` is
/// eax, ecx, edx, ebx, esi, edi; `control` esp, ebp, eip, eflags.
fn x86_registers(flags: u32, integer: [u32; 6], control: [u32; 4]) -> RegisterSet {
    use x86::Reg::*;
    let mut r = RegisterSet::new(Arch::X86);
    if flags & INTEGER != 0 {
        for (reg, v) in [Eax, Ecx, Edx, Ebx, Esi, Edi].into_iter().zip(integer) {
            r.set(reg, u64::from(v));
        }
    }
    if flags & CONTROL != 0 {
        for (reg, v) in [Esp, Ebp, Eip, Eflags].into_iter().zip(control) {
            r.set(reg, u64::from(v));
        }
    }
    r
}

/// The x86 context saved in the WoW64 CPU area of the thread whose 64-bit TEB is at
/// `teb`, where the dump holds the TEB's slot and the area.
fn cpu_area_context(memory: &MemoryMap<'_>, teb: u64) -> Option<RegisterSet> {
    let area = memory.read_u64(teb.checked_add(TEB64_CPU_AREA_SLOT)?)?;
    let header = memory.read_bytes(area, 4)?;
    if u16::from_le_bytes([header[2], header[3]]) != MACHINE_I386 {
        return None;
    }
    let context = memory.read_bytes(area.checked_add(CPU_AREA_CONTEXT)?, X86_CONTEXT_BASE)?;
    x86_context(context)
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    let bytes = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x86_context_bytes(eip: u32, esp: u32, ebp: u32) -> Vec<u8> {
        let mut c = vec![0u8; 0x2cc];
        c[0..4].copy_from_slice(&(CONTEXT_I386 | CONTROL | INTEGER).to_le_bytes());
        c[0xb0..0xb4].copy_from_slice(&7u32.to_le_bytes()); // eax
        c[0xb4..0xb8].copy_from_slice(&ebp.to_le_bytes());
        c[0xb8..0xbc].copy_from_slice(&eip.to_le_bytes());
        c[0xc4..0xc8].copy_from_slice(&esp.to_le_bytes());
        c
    }

    fn amd64_context_bytes(cs: u16, rip: u64, rsp: u64) -> Vec<u8> {
        let mut c = vec![0u8; 0x4d0];
        c[0x30..0x34].copy_from_slice(&(CONTEXT_AMD64 | CONTROL | INTEGER).to_le_bytes());
        c[0x38..0x3a].copy_from_slice(&cs.to_le_bytes());
        c[0x98..0xa0].copy_from_slice(&rsp.to_le_bytes());
        c[0xf8..0x100].copy_from_slice(&rip.to_le_bytes());
        c
    }

    #[test]
    fn an_x86_context_is_read_as_it_is() {
        let r = thirty_two_bit_registers(&x86_context_bytes(0x0040_1000, 0x0019_ff00, 0x0019_ff40))
            .expect("an x86 context");
        assert_eq!(r.arch(), Arch::X86);
        assert_eq!(r.pc(), Some(0x0040_1000));
        assert_eq!(r.sp(), Some(0x0019_ff00));
        assert_eq!(r.get(x86::Reg::Ebp), Some(0x0019_ff40));
        assert_eq!(r.get(x86::Reg::Eax), Some(7));
    }

    #[test]
    fn a_64_bit_context_in_32_bit_code_gives_its_low_halves() {
        let r = thirty_two_bit_registers(&amd64_context_bytes(0x23, 0x7701_2345, 0x0019_fe00))
            .expect("32-bit registers");
        assert_eq!(r.pc(), Some(0x7701_2345));
        assert_eq!(r.sp(), Some(0x0019_fe00));
    }

    #[test]
    fn a_64_bit_context_in_64_bit_code_has_no_32_bit_registers() {
        let c = amd64_context_bytes(0x33, 0x7ffe_1234_5678, 0x0000_00ff_fe00);
        assert!(thirty_two_bit_registers(&c).is_none());
    }

    #[test]
    fn short_and_foreign_contexts_give_nothing() {
        assert!(thirty_two_bit_registers(&[]).is_none());
        assert!(thirty_two_bit_registers(&x86_context_bytes(1, 2, 3)[..0x40]).is_none());
        let mut not_x86 = x86_context_bytes(1, 2, 3);
        not_x86[0..4].copy_from_slice(&0x0040_0003u32.to_le_bytes()); // ARM64's CPU bit
        assert!(thirty_two_bit_registers(&not_x86).is_none());
    }

    #[test]
    fn the_cpu_area_is_found_through_the_teb() {
        let teb = 0x7ffd_f000_u64;
        let area = 0x0010_0000_u64;
        let mut teb_bytes = vec![0u8; 0x1490];
        teb_bytes[0x1488..0x1490].copy_from_slice(&area.to_le_bytes());
        let mut area_bytes = vec![0u8; 4];
        area_bytes[2..4].copy_from_slice(&MACHINE_I386.to_le_bytes());
        area_bytes.extend(x86_context_bytes(0x0040_2000, 0x0019_fd00, 0x0019_fd40));
        let memory = MemoryMap::owned(vec![(teb, teb_bytes.clone()), (area, area_bytes.clone())]);
        let r = cpu_area_context(&memory, teb).expect("the area's context");
        assert_eq!(r.pc(), Some(0x0040_2000));
        // an area of another machine (an ARM64 host's x86 emulation keeps another layout)
        area_bytes[2..4].copy_from_slice(&0xaa64u16.to_le_bytes());
        let memory = MemoryMap::owned(vec![(teb, teb_bytes), (area, area_bytes)]);
        assert!(cpu_area_context(&memory, teb).is_none());
        // no TEB in the dump
        assert!(cpu_area_context(&MemoryMap::owned(Vec::new()), teb).is_none());
        assert!(cpu_area_context(&MemoryMap::owned(Vec::new()), u64::MAX).is_none());
    }

    fn thread(tid: u32) -> Thread {
        Thread {
            tid,
            name: None,
            registers: RegisterSet::new(Arch::X86_64),
            prewalked: None,
            evidence: false,
        }
    }

    fn module(name: &str) -> Module {
        Module {
            name: name.to_owned(),
            ..Module::default()
        }
    }

    #[test]
    fn the_view_needs_wow64_and_one_thread_it_can_read() {
        let x86 = x86_context_bytes(0x0040_1000, 0x0019_ff00, 0x0019_ff40);
        let layer = amd64_context_bytes(0x33, 0x7ffe_1234_5678, 0x00ff_fe00);
        let memory = MemoryMap::owned(Vec::new());
        let recorded = [
            Recorded {
                teb: 0x1000,
                context: Some(&x86),
            },
            Recorded {
                teb: 0x3000,
                context: Some(&layer),
            },
        ];
        // not WoW64: nothing changes, nothing said
        let mut threads = [thread(1), thread(2)];
        let mut warnings = Vec::new();
        let modules = [module("ntdll.dll")];
        assert!(!thirty_two_bit_view(
            &modules,
            &recorded,
            &memory,
            &mut threads,
            &mut warnings
        ));
        assert!(warnings.is_empty());
        // WoW64, one thread's 32-bit registers recorded, the other's CPU area missing
        let modules = [module("ntdll.dll"), module("WOW64.DLL")];
        assert!(thirty_two_bit_view(
            &modules,
            &recorded,
            &memory,
            &mut threads,
            &mut warnings
        ));
        assert_eq!(threads[0].registers.pc(), Some(0x0040_1000));
        assert_eq!(threads[1].registers.arch(), Arch::X86);
        assert_eq!(threads[1].registers.pc(), None);
        let codes: Vec<&str> = warnings.iter().map(|w| w.code.as_str()).collect();
        assert_eq!(codes, ["wow64", "memory-missing"]);
        assert!(
            warnings[1].message.contains(": 2"),
            "{}",
            warnings[1].message
        );
        // WoW64 with no thread's 32-bit registers: read as the 64-bit dump it is
        let mut threads = [thread(2)];
        let mut warnings = Vec::new();
        let layer_only = [Recorded {
            teb: 0x3000,
            context: Some(&layer),
        }];
        assert!(!thirty_two_bit_view(
            &modules,
            &layer_only,
            &memory,
            &mut threads,
            &mut warnings
        ));
        assert_eq!(threads[0].registers.arch(), Arch::X86_64);
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].code, "memory-missing");
    }
}
