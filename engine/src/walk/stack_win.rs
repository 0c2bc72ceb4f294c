//! Windows x86 frame data (`STACK WIN` records of `.sym` files, from a PDB's FPO and
//! FrameData streams): the caller of a frame whose unwind rule holds such a record, as
//! Breakpad's x86 walker (`StackwalkerX86::GetCallerByWindowsFrameInfo`) computes it.
//!
//! The record's program is evaluated ([`crate::breakpad::postfix`]) with the callee's
//! `ebp`, `esp` and (when known) `ebx`, the record's sizes (`.cbSavedRegs`, `.cbLocals`,
//! `.cbParams`), the size of the parameters of the frame it called (`.cbCalleeParams`,
//! from that frame's record) and `.raSearchStart`/`.raSearch`: where the return address
//! should be, `esp` plus those parameters, the locals and the saved registers — moved up
//! to a return address found within three words (the stack may have been aligned), or
//! to `ebp + 4` when the program aligns (`@`). A record without a program gets Breakpad's
//! standard one: the return address at `.raSearchStart`, and `ebp` saved in the register
//! area when the function allocates a base pointer, else unchanged.
//!
//! Then, as Breakpad does: a return address outside every module is replaced by one a
//! scan finds above `.raSearchStart` (the frame is then `scan`), and an `ebp` that is not
//! readable memory, or lies below the return address after such a scan, is looked for in
//! the saved-register area. Only `ebx`, `esi` and `edi` the program assigns are passed
//! on. A program that fails (an undefined variable, memory the dump lacks) or sets no
//! `$eip` or `$esp` gives no caller here: the walker's other strategies go on.

use super::arch::ArchWalker;
use super::cfi::rule_of;
use super::{scan, Caller, CfiOutcome, Trust, WalkContext, WalkFrame};
use crate::arch::x86::Reg::{Ebp, Ebx, Edi, Eip, Esi, Esp};
use crate::breakpad::postfix::{self, Variables};
use crate::dump::RegisterSet;
use crate::unwind::win_frame::{WinFrame, WinKind};
use crate::unwind::{Rule, SlotKind};

/// Most words of a saved-register area searched for the caller's `ebp`.
const MAX_EBP_SEARCH_WORDS: u32 = 1024;

/// Words scanned above `.raSearchStart` for a return address (Breakpad's three).
const ALIGNMENT_SCAN_WORDS: u64 = 3;

/// Breakpad's program for a frame that allocates a base pointer but has no program.
const BASE_POINTER_PROGRAM: &str = "$eip .raSearchStart ^ = \
     $ebp $esp .cbCalleeParams + .cbSavedRegs + 8 - ^ = \
     $esp .raSearchStart 4 + =";
/// Breakpad's program for a frame that does not touch `ebp` (its `ebx` kept too).
const NO_BASE_POINTER_PROGRAM: &str = "$eip .raSearchStart ^ = $esp .raSearchStart 4 + =";
const NO_BASE_POINTER_PROGRAM_EBX: &str =
    "$eip .raSearchStart ^ = $esp .raSearchStart 4 + = $ebx $ebx =";

/// The frame data of `rule`, if it holds any.
fn frame_of<'a>(rule: &Rule<'a>) -> Option<WinFrame<'a>> {
    if rule.record.cfa.kind() != Some(SlotKind::WinFrame) {
        return None;
    }
    WinFrame::decode(rule.expression(rule.record.cfa)?)
}

/// The caller of `callee` by the frame data `rule` holds; `inner` is the frame `callee`
/// called.
pub(crate) fn caller(
    arch: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    callee: &WalkFrame,
    inner: Option<&WalkFrame>,
    rule: &Rule<'_>,
) -> CfiOutcome {
    let Some(frame) = frame_of(rule) else {
        return CfiOutcome::NoRule;
    };
    let callee_params = inner
        .and_then(|f| rule_of(ctx, arch, f))
        .and_then(|r| frame_of(&r))
        .map_or(0, |f| f.parameter_size);
    match evaluate(arch, ctx, callee, callee_params, &frame) {
        // the rule's own source: a `.sym` file's STACK WIN or a PDB's frame data
        Some(mut c) => {
            c.source = rule.record.source().or(c.source);
            CfiOutcome::Caller(Box::new(c))
        }
        None => CfiOutcome::NoRule,
    }
}

/// A 32-bit register of the callee.
fn reg32(regs: &RegisterSet, r: crate::arch::x86::Reg) -> Option<u32> {
    regs.get(r).and_then(|v| u32::try_from(v).ok())
}

/// Breakpad's `.raSearchStart`: past the callee's parameters, locals and saved
/// registers, moved to a return address found within three words.
fn ra_search_start(
    arch: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    callee: &WalkFrame,
    frame: &WinFrame<'_>,
    esp: u32,
    callee_params: u32,
    limit: u64,
) -> u32 {
    let start = esp
        .wrapping_add(callee_params)
        .wrapping_add(frame.local_size)
        .wrapping_add(frame.saved_register_size);
    let Some((at, found)) =
        scan::find_return_address(arch, ctx, u64::from(start), ALIGNMENT_SCAN_WORDS, limit)
    else {
        return start;
    };
    let at = u32::try_from(at).unwrap_or(start);
    // An FPO system call in the context frame: the callee returned, but its return
    // address (the current pc) is still on top of the stack. Skip it.
    if callee.trust == Trust::Context
        && frame.kind == WinKind::Fpo
        && at == start
        && found == callee.pc
    {
        let next = start.wrapping_add(4);
        return scan::find_return_address(arch, ctx, u64::from(next), ALIGNMENT_SCAN_WORDS, limit)
            .and_then(|(a, _)| u32::try_from(a).ok())
            .unwrap_or(next);
    }
    at
}

/// The caller's registers by Breakpad's rules (see the module documentation).
fn evaluate(
    arch: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    callee: &WalkFrame,
    callee_params: u32,
    frame: &WinFrame<'_>,
) -> Option<Caller> {
    let regs = &callee.registers.to_set();
    let (esp, ebp) = (reg32(regs, Esp)?, reg32(regs, Ebp));
    let ebx = reg32(regs, Ebx);
    let limit = ctx
        .memory
        .range_of(u64::from(esp))
        .map_or(u64::MAX, |(_, hi)| hi);
    let mut ra_start = ra_search_start(arch, ctx, callee, frame, esp, callee_params, limit);
    let (program, recover_ebp) = match (frame.program, frame.allocates_base_pointer, ebx) {
        (Some(p), ..) => (p, true),
        (None, true, _) => (BASE_POINTER_PROGRAM, true),
        (None, false, Some(_)) => (NO_BASE_POINTER_PROGRAM_EBX, false),
        (None, false, None) => (NO_BASE_POINTER_PROGRAM, false),
    };
    if let Some(ebp) = ebp.filter(|_| program.contains('@')) {
        ra_start = ebp.wrapping_add(4);
    }
    let mut vars = Variables::new();
    vars.set("$esp", esp).ok()?;
    if let Some(v) = ebp {
        vars.set("$ebp", v).ok()?;
    }
    if let Some(v) = ebx {
        vars.set("$ebx", v).ok()?;
    }
    for (name, v) in [
        (".cbCalleeParams", callee_params),
        (".cbSavedRegs", frame.saved_register_size),
        (".cbLocals", frame.local_size),
        (".cbParams", frame.parameter_size),
        (".raSearchStart", ra_start),
        (".raSearch", ra_start),
    ] {
        vars.set(name, v).ok()?;
    }
    let mut read = |a: u32| ctx.memory.read_u32(u64::from(a));
    postfix::evaluate(program, &mut vars, &mut read).ok()?;
    let mut eip = vars.assigned("$eip")?;
    let mut new_esp = vars.assigned("$esp")?;
    let mut new_ebp = vars.get("$ebp");
    let mut trust = Trust::Cfi;
    if eip != 0 || new_ebp.unwrap_or(0) != 0 {
        let mut offset = 0u32;
        if ctx.module_for(u64::from(eip)).is_none() {
            let from = ra_start.wrapping_add(4);
            let words = if callee.trust == Trust::Context {
                ctx.options.scan_words_first
            } else {
                ctx.options.scan_words
            };
            if let Some((at, found)) =
                scan::find_return_address(arch, ctx, u64::from(from), words as u64, limit)
            {
                let at = u32::try_from(at).ok()?;
                eip = u32::try_from(found).ok()?;
                new_esp = at.wrapping_add(4);
                offset = at.wrapping_sub(from);
                trust = Trust::Scan;
            }
        }
        if recover_ebp {
            new_ebp = recovered_ebp(
                ctx,
                frame,
                esp,
                callee_params,
                new_ebp,
                trust,
                ra_start,
                offset,
            );
        }
    }
    let mut caller = RegisterSet::new(regs.arch());
    caller.set(Eip, u64::from(eip));
    caller.set(Esp, u64::from(new_esp));
    if let Some(v) = new_ebp {
        caller.set(Ebp, u64::from(v));
    }
    for (name, r) in [("$ebx", Ebx), ("$esi", Esi), ("$edi", Edi)] {
        if let Some(v) = vars.assigned(name) {
            caller.set(r, u64::from(v));
        }
    }
    Some(Caller {
        regs: caller,
        trust,
        source: Some(crate::unwind::UnwindSource::Breakpad),
        exact_pc: false,
    })
}

/// Breakpad's search for the caller's `ebp` in the saved-register area, from its highest
/// word down, when the `ebp` the program gives is not readable memory or lies below the
/// return address a scan found.
#[allow(clippy::too_many_arguments)]
fn recovered_ebp(
    ctx: &WalkContext<'_, '_>,
    frame: &WinFrame<'_>,
    esp: u32,
    callee_params: u32,
    ebp: Option<u32>,
    trust: Trust,
    ra_start: u32,
    offset: u32,
) -> Option<u32> {
    let readable = |a: u32| ctx.memory.read_u32(u64::from(a)).is_some();
    let skipped = trust != Trust::Cfi && ebp.is_some_and(|e| e <= ra_start.wrapping_add(offset));
    if !skipped && ebp.is_some_and(readable) {
        return ebp;
    }
    let end = esp.wrapping_add(callee_params);
    let mut at = end.wrapping_add(frame.saved_register_size.wrapping_add(offset));
    // bounded: the saved-register area plus the scan's offset, one word at a time
    let words = (frame.saved_register_size.wrapping_add(offset) / 4).min(MAX_EBP_SEARCH_WORDS);
    for _ in 0..=words {
        if at < end {
            break;
        }
        let Some(candidate) = ctx.memory.read_u32(u64::from(at)) else {
            break;
        };
        if readable(candidate) {
            return Some(candidate);
        }
        at = at.wrapping_sub(4);
    }
    ebp
}
