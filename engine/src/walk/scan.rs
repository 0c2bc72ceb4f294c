//! The `scan` strategy: look up the stack for a word that could be a return address.
//!
//! Scanning is the last resort, and a word on the stack is far more often a pointer to
//! data, a module's base (the auxiliary vector near the top of a Linux stack holds
//! `AT_BASE` and `AT_SYSINFO_EHDR`) or a stale value than a return address. So a
//! candidate must pass every rule below, and where none does the walk ends and says why
//! ([`Rejected`]) instead of inventing a frame:
//!
//! 1. it is aligned as the architecture's instructions are (4 bytes on aarch64);
//! 2. it lies in executable code: a module's executable mapping or section (as the dump's
//!    mappings, the module's file or the dump's memory regions tell), never a module's
//!    first byte (its header, which a base address in a variable points to), nor just
//!    after a call that would lie in its first [`HEADER_BYTES`] (every executable format
//!    starts with a header that long, never code: a symbol file's bogus function at a
//!    low address, as Breakpad's `dump_syms` wrote for folded code, cannot vouch for it);
//! 3. where the code before it is readable (from the dump's memory or the module's file),
//!    that code ends with a call instruction;
//! 4. where it is not, a symbol file names the function holding the call (Breakpad's
//!    rule); with neither code, file nor symbols nothing vouches for it.
//!
//! Frames the scan finds carry `trust: scan`. See `docs/stack-scanning.md`.

use super::arch::ArchWalker;
use super::{Caller, Trust, WalkContext, WalkFrame};
use crate::dump::RegisterSet;

/// The bytes at a module's start that are its file's header in every format it can be:
/// ELF64's header is 64 bytes (ELF32's 52, its program headers next), a PE image's DOS
/// header 64, a Mach-O's header 28 or 32 and its load commands after.
pub const HEADER_BYTES: u64 = 64;

/// Why stack words were not taken as return addresses, counted over one scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rejected {
    /// Words read.
    pub words: u64,
    /// Not aligned as instructions are.
    pub misaligned: u64,
    /// Outside every module's executable code (and every mapping the dump lists as
    /// executable).
    pub not_code: u64,
    /// A module's first byte, or just after a call in its header.
    pub module_start: u64,
    /// The code before it is readable and is not a call.
    pub not_after_call: u64,
    /// No code, no file: the module's symbol file names no function there.
    pub not_in_function: u64,
    /// No code, no file and no symbol file: nothing vouches for it.
    pub unverifiable: u64,
    /// Passed every rule, but the caller it gives is not a valid one (its stack
    /// pointer, or a repeated frame).
    pub invalid_caller: u64,
    /// The scan stopped early: the dump lacks the next stack word.
    pub memory_ended: bool,
}

/// Why one word is not a return address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reject {
    Misaligned,
    NotCode,
    ModuleStart,
    NotAfterCall,
    NotInFunction,
    Unverifiable,
}

impl Rejected {
    fn count(&mut self, why: Reject) {
        let n = match why {
            Reject::Misaligned => &mut self.misaligned,
            Reject::NotCode => &mut self.not_code,
            Reject::ModuleStart => &mut self.module_start,
            Reject::NotAfterCall => &mut self.not_after_call,
            Reject::NotInFunction => &mut self.not_in_function,
            Reject::Unverifiable => &mut self.unverifiable,
        };
        *n += 1;
    }

    /// One sentence for the thread's `end_detail`: how many words were read and why
    /// none was taken (only the reasons that occurred).
    pub fn describe(&self) -> String {
        let reasons = [
            (self.not_code, "outside every module's executable code"),
            (
                self.module_start,
                "a module's first byte (its base address) or in its header",
            ),
            (self.misaligned, "not aligned as instructions are"),
            (
                self.not_after_call,
                "not just after a call instruction (the code is readable)",
            ),
            (
                self.not_in_function,
                "in no function of the module's symbol file (neither its code nor its file is at hand)",
            ),
            (
                self.unverifiable,
                "in a module with neither code, file nor symbol file at hand to verify it",
            ),
            (self.invalid_caller, "giving an invalid caller"),
        ];
        let parts: Vec<String> = reasons
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, why)| format!("{n} {why}"))
            .collect();
        let mut s = format!(
            "the stack scan read {} word{} and took none as a return address",
            self.words,
            if self.words == 1 { "" } else { "s" }
        );
        if !parts.is_empty() {
            s.push_str(": ");
            s.push_str(&parts.join(", "));
        }
        if self.memory_ended {
            s.push_str("; the dump's stack memory ended there");
        }
        s
    }
}

/// Whether `candidate` (the stack word `raw` with pointer-authentication bits, or arm's
/// Thumb bit, stripped) may be a return address, by the rules of the module doc.
fn check_candidate(
    arch: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    raw: u64,
    candidate: u64,
) -> Result<(), Reject> {
    if !candidate.is_multiple_of(arch.instruction_alignment()) {
        return Err(Reject::Misaligned);
    }
    match ctx.module_for(candidate) {
        Some(i) => {
            let m = &ctx.modules[i];
            let in_header = candidate
                .checked_sub(m.base)
                .is_some_and(|off| off <= HEADER_BYTES);
            if in_header || candidate == m.load_base {
                return Err(Reject::ModuleStart);
            }
            if !ctx.is_return_code(candidate) {
                return Err(Reject::NotCode);
            }
        }
        // Generated code: only a mapping the dump lists as executable, and only where
        // its bytes are in the dump (no symbol file describes it).
        None if ctx.code.is_executable(candidate) == Some(true) => {}
        None => return Err(Reject::NotCode),
    }
    if let Some(code) = ctx.code.bytes_before(candidate, arch.call_check_len()) {
        return if arch.is_call_before_return(raw, &code) {
            Ok(())
        } else {
            Err(Reject::NotAfterCall)
        };
    }
    let lookup = candidate.saturating_sub(arch.lookup_back());
    match ctx.code.names_function(lookup) {
        Some(true) => Ok(()),
        Some(false) => Err(Reject::NotInFunction),
        None => Err(Reject::Unverifiable),
    }
}

/// Scans up to `words` stack words from the callee's sp (never past the stack's top) for
/// the first that passes [`check_candidate`] and gives a caller `accept` takes; else
/// what was rejected and why.
pub(crate) fn caller_by_scan(
    arch: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    callee: &WalkFrame,
    words: usize,
    stack_range: Option<(u64, u64)>,
    accept: &dyn Fn(&Caller) -> bool,
) -> Result<Caller, Rejected> {
    let mut rejected = Rejected::default();
    let Some(sp) = callee.sp else {
        return Err(rejected);
    };
    let word = arch.pointer_size();
    let limit = stack_range.map(|(_, hi)| hi).unwrap_or(u64::MAX);
    for i in 0..words as u64 {
        let Some(addr) = i.checked_mul(word).and_then(|o| sp.checked_add(o)) else {
            break;
        };
        if addr.checked_add(word).is_none_or(|end| end > limit) {
            break;
        }
        let Some(value) = (if word == 8 {
            ctx.memory.read_u64(addr)
        } else {
            ctx.memory.read_u32(addr).map(u64::from)
        }) else {
            rejected.memory_ended = true;
            break;
        };
        rejected.words += 1;
        let candidate = arch.strip_pac(ctx, value);
        if let Err(why) = check_candidate(arch, ctx, value, candidate) {
            rejected.count(why);
            continue;
        }
        let Some(caller_sp) = addr.checked_add(word) else {
            break;
        };
        let mut caller = scanned_caller(arch, callee, candidate, caller_sp);
        arch.note_return_address(value, &mut caller.regs);
        arch.after_scan(ctx, &mut caller);
        if accept(&caller) {
            return Ok(caller);
        }
        rejected.invalid_caller += 1;
    }
    Err(rejected)
}

/// The first of `words` stack words from `start` (never past `limit`) that passes
/// [`check_candidate`]: its address and value. (Windows frame data's scans near where
/// its program says the return address is: [`super::stack_win`].)
pub(crate) fn find_return_address(
    arch: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    start: u64,
    words: u64,
    limit: u64,
) -> Option<(u64, u64)> {
    let word = arch.pointer_size();
    for i in 0..words {
        let addr = i.checked_mul(word).and_then(|o| start.checked_add(o))?;
        if addr.checked_add(word).is_none_or(|end| end > limit) {
            return None;
        }
        let value = (if word == 8 {
            ctx.memory.read_u64(addr)
        } else {
            ctx.memory.read_u32(addr).map(u64::from)
        })?;
        let candidate = arch.strip_pac(ctx, value);
        if check_candidate(arch, ctx, value, candidate).is_ok() {
            return Some((addr, candidate));
        }
    }
    None
}

/// The caller a scanned return address gives: its pc, the sp just above the word, and
/// the callee-saved registers the callee still holds (a scan cannot recover them; frame
/// pointers often still hold the caller's value, which later fp steps may use).
fn scanned_caller(arch: &dyn ArchWalker, callee: &WalkFrame, pc: u64, caller_sp: u64) -> Caller {
    let mut regs = RegisterSet::new(callee.registers.arch());
    regs.set(regs.pc_reg(), pc);
    regs.set(regs.sp_reg(), caller_sp);
    for &r in arch.callee_saved() {
        if let Some(v) = callee.registers.get(r) {
            regs.set(r, v);
        }
    }
    Caller {
        regs,
        trust: Trust::Scan,
        source: None,
        exact_pc: false,
    }
}
