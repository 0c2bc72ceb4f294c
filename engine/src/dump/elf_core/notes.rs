//! Decoders for the Linux core notes: NT_PRSTATUS, NT_PRPSINFO, NT_SIGINFO, NT_AUXV, NT_FILE,
//! NT_ARM_PAC_MASK.
//!
//! Each decoder takes one note's descriptor bytes and answers `None` when they are too short
//! for the structure, so one bad note costs that note only. Layouts are those of the 64-bit
//! Linux ABI (`struct elf_prstatus`, `struct elf_prpsinfo`, `siginfo_t`), written out as
//! offsets, and of the i386 and arm ABIs for 32-bit cores (the `…32` decoders: 32-bit
//! words, i386's `user_regs_struct`, arm's `pt_regs`); floating-point and vector state (NT_FPREGSET,
//! NT_X86_XSTATE) are not read.

use super::parse::{c_str, i32_at, u16_at, u32_at, u64_at};
use crate::arch::{aarch64, arm, x86, x86_64};
use crate::dump::{Arch, RegisterSet};

pub(super) const NT_PRSTATUS: u32 = 1;
pub(super) const NT_PRPSINFO: u32 = 3;
pub(super) const NT_AUXV: u32 = 6;
pub(super) const NT_SIGINFO: u32 = 0x5349_4749;
pub(super) const NT_FILE: u32 = 0x4649_4c45;
pub(super) const NT_ARM_PAC_MASK: u32 = 0x406;

pub(super) const AT_NULL: u64 = 0;
pub(super) const AT_PHDR: u64 = 3;
pub(super) const AT_PHNUM: u64 = 5;
pub(super) const AT_BASE: u64 = 7;
pub(super) const AT_ENTRY: u64 = 9;
pub(super) const AT_EXECFN: u64 = 31;
pub(super) const AT_SYSINFO_EHDR: u64 = 33;

/// Offset of `pr_reg` in `struct elf_prstatus` (64-bit): siginfo (12), cursig (2) + pad,
/// sigpend, sighold, pid, ppid, pgrp, sid, four timevals.
const PR_REG_OFFSET: usize = 112;

/// x86_64 `user_regs_struct` order (`None`: orig_rax, which has no DWARF number).
const X86_64_PR_REG: [Option<x86_64::Reg>; 27] = {
    use x86_64::Reg::*;
    [
        Some(R15),
        Some(R14),
        Some(R13),
        Some(R12),
        Some(Rbp),
        Some(Rbx),
        Some(R11),
        Some(R10),
        Some(R9),
        Some(R8),
        Some(Rax),
        Some(Rcx),
        Some(Rdx),
        Some(Rsi),
        Some(Rdi),
        None,
        Some(Rip),
        Some(Cs),
        Some(Rflags),
        Some(Rsp),
        Some(Ss),
        Some(FsBase),
        Some(GsBase),
        Some(Ds),
        Some(Es),
        Some(Fs),
        Some(Gs),
    ]
};

/// Offset of `pr_reg` in i386's `struct elf_prstatus`: siginfo (12), cursig (2) + pad,
/// sigpend, sighold, pid, ppid, pgrp, sid (4 each), four 8-byte timevals.
const PR_REG_OFFSET_32: usize = 72;

/// i386 `user_regs_struct` order (`None`: the segment registers and orig_eax, which the
/// walk does not use).
const X86_PR_REG: [Option<x86::Reg>; 17] = {
    use x86::Reg::*;
    [
        Some(Ebx),
        Some(Ecx),
        Some(Edx),
        Some(Esi),
        Some(Edi),
        Some(Ebp),
        Some(Eax),
        None,
        None,
        None,
        None,
        None,
        Some(Eip),
        None,
        Some(Eflags),
        Some(Esp),
        None,
    ]
};

/// arm `pt_regs` order (`elf_gregset_t`, 18 words): r0–r15 (DWARF 0–15), cpsr, orig_r0
/// (`None`: not used by the walk).
const ARM_PR_REG: [Option<u16>; 18] = {
    let mut regs = [None; 18];
    let mut i = 0;
    while i < 16 {
        regs[i] = Some(i as u16);
        i += 1;
    }
    regs[16] = Some(arm::CPSR_SLOT);
    regs
};

/// Decodes a 32-bit NT_PRSTATUS (i386 or arm; both kernels lay `struct elf_prstatus`
/// out alike): the thread id and the general registers.
pub(super) fn prstatus32(desc: &[u8], arch: Arch) -> Option<PrStatus> {
    let cursig = u16_at(desc, 12)?;
    let tid = u32_at(desc, 24)?;
    let mut registers = RegisterSet::new(arch);
    let table: Vec<Option<u16>> = match arch {
        Arch::Arm => ARM_PR_REG.to_vec(),
        _ => X86_PR_REG.iter().map(|r| r.map(x86::Reg::dwarf)).collect(),
    };
    for (i, &r) in table.iter().enumerate() {
        let value = u32_at(desc, PR_REG_OFFSET_32.checked_add(i.checked_mul(4)?)?)?;
        if let Some(r) = r {
            registers.set(r, u64::from(value));
        }
    }
    Some(PrStatus {
        tid,
        cursig,
        registers,
    })
}

/// Decodes an i386 NT_PRPSINFO (124 bytes: 16-bit uid and gid, 32-bit flag).
pub(super) fn prpsinfo32(desc: &[u8]) -> Option<PrPsInfo> {
    prpsinfo_at(desc, 12, 28)
}

/// Decodes an i386 NT_SIGINFO (`si_addr` a 32-bit word at 12).
pub(super) fn siginfo32(desc: &[u8]) -> Option<SigInfo> {
    Some(SigInfo {
        signo: i32_at(desc, 0)?,
        code: i32_at(desc, 8)?,
        addr: u64::from(u32_at(desc, 12)?),
    })
}

/// A 32-bit NT_AUXV in the 64-bit layout [`auxv_get`] and the module readers take.
pub(super) fn auxv_widen(auxv: &[u8]) -> Vec<u8> {
    auxv.chunks_exact(4)
        .flat_map(|w| u64::from(u32::from_le_bytes([w[0], w[1], w[2], w[3]])).to_le_bytes())
        .collect()
}

/// Decodes a 32-bit NT_FILE (`count`, `page_size` and each record's three fields are
/// 32-bit words), as [`nt_file`] does the 64-bit one.
pub(super) fn nt_file32(desc: &[u8]) -> Option<Vec<FileMapping>> {
    let count = u64::from(u32_at(desc, 0)?);
    let page_size = u64::from(u32_at(desc, 4)?);
    let records = desc.get(8..)?;
    nt_file_records(records, count, page_size, 12, |rec| {
        Some((
            u64::from(u32_at(rec, 0)?),
            u64::from(u32_at(rec, 4)?),
            u64::from(u32_at(rec, 8)?),
        ))
    })
}

/// One thread's NT_PRSTATUS.
#[derive(Debug, Clone)]
pub(super) struct PrStatus {
    pub tid: u32,
    pub cursig: u16,
    pub registers: RegisterSet,
}

/// Decodes NT_PRSTATUS: the thread id and the general registers.
pub(super) fn prstatus(desc: &[u8], arch: Arch) -> Option<PrStatus> {
    let cursig = u16_at(desc, 12)?;
    let tid = u32_at(desc, 32)?;
    let mut registers = RegisterSet::new(arch);
    let reg = |i: usize| u64_at(desc, PR_REG_OFFSET.checked_add(i.checked_mul(8)?)?);
    match arch {
        Arch::X86_64 => {
            for (i, &r) in X86_64_PR_REG.iter().enumerate() {
                let value = reg(i)?;
                if let Some(r) = r {
                    registers.set(r, value);
                }
            }
        }
        Arch::Aarch64 => {
            // x0..x30, sp, pc, pstate: DWARF 0..=32, pstate kept in slot 33.
            for i in aarch64::Reg::X0.dwarf()..=aarch64::Reg::Pstate.dwarf() {
                registers.set(i, reg(usize::from(i))?);
            }
        }
        Arch::X86 | Arch::Arm => return None,
    }
    Some(PrStatus {
        tid,
        cursig,
        registers,
    })
}

/// NT_PRPSINFO: process id, short name and argument string.
#[derive(Debug, Clone)]
pub(super) struct PrPsInfo {
    pub pid: u32,
    pub fname: String,
    pub psargs: String,
}

/// Decodes NT_PRPSINFO (64-bit `struct elf_prpsinfo`, 136 bytes).
pub(super) fn prpsinfo(desc: &[u8]) -> Option<PrPsInfo> {
    prpsinfo_at(desc, 24, 40)
}

/// NT_PRPSINFO with `pr_pid` at `pid_at` and `pr_fname` (16 bytes, then 80 of
/// `pr_psargs`) at `fname_at`.
fn prpsinfo_at(desc: &[u8], pid_at: usize, fname_at: usize) -> Option<PrPsInfo> {
    let pid = u32_at(desc, pid_at)?;
    let fname = desc.get(fname_at..fname_at + 16)?;
    let psargs = desc.get(fname_at + 16..fname_at + 96)?;
    let text = |b: &[u8]| {
        String::from_utf8_lossy(c_str(b))
            .trim_end_matches([' ', '\0'])
            .to_string()
    };
    Some(PrPsInfo {
        pid,
        fname: text(fname),
        psargs: text(psargs),
    })
}

/// The fields of NT_SIGINFO the report uses.
#[derive(Debug, Clone, Copy)]
pub(super) struct SigInfo {
    pub signo: i32,
    pub code: i32,
    /// `si_addr`, meaningful for fault signals only.
    pub addr: u64,
}

/// Decodes NT_SIGINFO (`siginfo_t`: signo, errno, code, then the union at 16).
pub(super) fn siginfo(desc: &[u8]) -> Option<SigInfo> {
    Some(SigInfo {
        signo: i32_at(desc, 0)?,
        code: i32_at(desc, 8)?,
        addr: u64_at(desc, 16)?,
    })
}

/// The value of auxv entry `key`, from NT_AUXV bytes.
pub(super) fn auxv_get(auxv: &[u8], key: u64) -> Option<u64> {
    for pair in auxv.chunks_exact(16) {
        let k = u64_at(pair, 0)?;
        if k == AT_NULL {
            return None;
        }
        if k == key {
            return u64_at(pair, 8);
        }
    }
    None
}

/// One NT_FILE entry: a file-backed mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileMapping {
    pub start: u64,
    pub end: u64,
    /// Byte offset in the file (NT_FILE stores it in pages).
    pub file_offset: u64,
    pub path: String,
}

/// Size of one NT_FILE (start, end, page offset) record.
const FILE_RECORD: usize = 24;

/// Decodes NT_FILE: `count`, `page_size`, `count` records, then `count` NUL-terminated paths.
/// A count larger than the note can hold is clamped to what it holds; entries with
/// nonsensical ranges are dropped.
pub(super) fn nt_file(desc: &[u8]) -> Option<Vec<FileMapping>> {
    let count = u64_at(desc, 0)?;
    let page_size = u64_at(desc, 8)?;
    let records = desc.get(16..)?;
    nt_file_records(records, count, page_size, FILE_RECORD, |rec| {
        Some((u64_at(rec, 0)?, u64_at(rec, 8)?, u64_at(rec, 16)?))
    })
}

/// NT_FILE's `count` records of `size` bytes (each read by `read` as start, end and
/// page offset) and the paths after them.
fn nt_file_records(
    records: &[u8],
    count: u64,
    page_size: u64,
    size: usize,
    read: impl Fn(&[u8]) -> Option<(u64, u64, u64)>,
) -> Option<Vec<FileMapping>> {
    // The count comes from the file: at most as many records as the bytes can hold.
    let fits = records.len() / size;
    let count = usize::try_from(count).unwrap_or(usize::MAX).min(fits);
    let names_start = count.checked_mul(size)?;
    let mut names = records.get(names_start..)?.split(|&b| b == 0);
    let mut out = Vec::with_capacity(count);
    for rec in records.chunks_exact(size).take(count) {
        let (start, end, pgoff) = read(rec)?;
        let Some(name) = names.next() else { break };
        let Some(file_offset) = pgoff.checked_mul(page_size) else {
            continue;
        };
        if end <= start || name.is_empty() {
            continue;
        }
        out.push(FileMapping {
            start,
            end,
            file_offset,
            path: String::from_utf8_lossy(name).into_owned(),
        });
    }
    Some(out)
}

/// Decodes NT_ARM_PAC_MASK: the data mask (the insn mask follows and is the same on Linux).
pub(super) fn pac_mask(desc: &[u8]) -> Option<u64> {
    u64_at(desc, 0)
}
