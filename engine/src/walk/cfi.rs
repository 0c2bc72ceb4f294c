//! The `cfi` strategy: apply the unwind table's rule for a frame's pc.
//!
//! CFA first (register + offset, dereferenced register + offset, or an expression), then
//! the return address and every callee-saved register from their slots. A register whose
//! rule cannot be applied (memory missing, unknown base register) becomes unknown for the
//! caller — never guessed. A rule holding Windows x86 frame data is evaluated by
//! [`super::stack_win`] instead.

use super::arch::ArchWalker;
use super::eval;
use super::{Caller, CfiOutcome, Trust, WalkContext, WalkFrame};
use crate::dump::RegisterSet;
use crate::unwind::rule::{Slot, SlotKind};
use crate::unwind::Rule;

/// The caller the unwind rule at `callee`'s pc gives; `inner` is the frame `callee`
/// called, if any (Windows frame data needs its parameter size).
pub(crate) fn caller_by_cfi(
    arch: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    callee: &WalkFrame,
    inner: Option<&WalkFrame>,
) -> CfiOutcome {
    let Some(module_index) = callee.module else {
        return CfiOutcome::NoRule;
    };
    let Some(Some(table)) = ctx.tables.get(module_index) else {
        return CfiOutcome::NoRule;
    };
    let module = &ctx.modules[module_index];
    let lookup = callee.address_for_lookup(arch.lookup_back());
    let Some(rel) = lookup.checked_sub(module.load_base) else {
        return CfiOutcome::NoRule;
    };
    let Some(rule) = table.find(rel) else {
        return CfiOutcome::NoRule;
    };
    if rule.record.cfa.kind() == Some(SlotKind::WinFrame) {
        return super::stack_win::caller(arch, ctx, callee, inner, &rule);
    }
    apply_rule(arch, ctx, callee, &rule)
}

/// The rule of the table describing `frame`, if any.
pub(crate) fn rule_of<'a>(
    ctx: &WalkContext<'a, '_>,
    arch: &dyn ArchWalker,
    frame: &WalkFrame,
) -> Option<Rule<'a>> {
    let i = frame.module?;
    let table = ctx.tables.get(i)?.as_ref()?;
    let lookup = frame.address_for_lookup(arch.lookup_back());
    table.find(lookup.checked_sub(ctx.modules.get(i)?.load_base)?)
}

/// Whether the unwind rule describing `addr` (a lookup address) marks a signal
/// trampoline (the CIE's `S` augmentation, SFrame's signal bit).
pub(crate) fn is_signal_frame_rule(ctx: &WalkContext<'_, '_>, addr: u64) -> bool {
    let Some(i) = ctx.module_for(addr) else {
        return false;
    };
    let Some(Some(table)) = ctx.tables.get(i) else {
        return false;
    };
    addr.checked_sub(ctx.modules[i].load_base)
        .and_then(|rel| table.find(rel))
        .is_some_and(|rule| rule.record.is_signal_frame())
}

/// Applies one rule to the callee's registers.
pub(crate) fn apply_rule(
    arch: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    callee: &WalkFrame,
    rule: &Rule<'_>,
) -> CfiOutcome {
    let rec = &rule.record;
    let regs = &callee.registers.to_set();
    let addr_size = arch.pointer_size() as u8;
    let read = |addr: u64| -> Option<u64> {
        if addr_size == 8 {
            ctx.memory.read_u64(addr)
        } else {
            ctx.memory.read_u32(addr).map(u64::from)
        }
    };
    let cfa = match cfa_of(ctx, rule, regs, addr_size, &read) {
        Ok(cfa) => cfa,
        Err(outcome) => return outcome,
    };
    if rec.is_nt_context() {
        return nt_context_caller(ctx, rule, cfa);
    }
    let ra_reg = arch.return_address_register();
    // Recover one slot's value: Ok(Some(v)) known, Ok(None) unknown, Err(()) memory missing.
    let recover = |slot: Slot, own_reg: u16| -> Result<Option<u64>, ()> {
        match slot.kind() {
            Some(SlotKind::Unchanged) => Ok(regs.get(own_reg)),
            Some(SlotKind::Undefined) | None => Ok(None),
            Some(SlotKind::Offset) => read(cfa.wrapping_add(slot.value as i64 as u64))
                .map(Some)
                .ok_or(()),
            Some(SlotKind::ValOffset) => Ok(Some(cfa.wrapping_add(slot.value as i64 as u64))),
            Some(SlotKind::Register) => Ok(regs.get(u16::from(slot.reg))),
            Some(SlotKind::Expression) => {
                let Some(expr) = rule.expression(slot) else {
                    return Ok(None);
                };
                let addr = eval::evaluate(expr, addr_size, Some(cfa), regs, ctx.memory);
                match addr {
                    Some(a) => read(a).map(Some).ok_or(()),
                    None => Err(()),
                }
            }
            Some(SlotKind::ValExpression) => {
                let Some(expr) = rule.expression(slot) else {
                    return Ok(None);
                };
                Ok(eval::evaluate(expr, addr_size, Some(cfa), regs, ctx.memory))
            }
            Some(SlotKind::DerefOffset | SlotKind::WinFrame) => Ok(None),
        }
    };
    if rec.ra.kind() == Some(SlotKind::Undefined) {
        return CfiOutcome::Outermost;
    }
    let ra = match recover(rec.ra, ra_reg) {
        Ok(Some(v)) => v,
        Ok(None) => return CfiOutcome::NoRule,
        Err(()) => return CfiOutcome::MemoryMissing,
    };
    let raw_ra = ra;
    let ra = arch.strip_pac(ctx, ra);
    let mut caller = RegisterSet::new(regs.arch());
    caller.set(caller.pc_reg(), ra);
    arch.note_return_address(raw_ra, &mut caller);
    let sp = match rec.is_machine_frame() {
        // the interrupted frame's sp, in the machine frame's first word
        true => match read(cfa) {
            Some(sp) => sp,
            None => return CfiOutcome::MemoryMissing,
        },
        false => arch.sp_from_cfa(cfa),
    };
    caller.set(caller.sp_reg(), sp);
    for (i, &reg) in arch.callee_saved().iter().enumerate() {
        let slot = rec.regs.get(i).copied().unwrap_or(Slot::UNCHANGED);
        if let Ok(Some(v)) = recover(slot, reg) {
            caller.set(reg, v);
        }
    }
    CfiOutcome::Caller(Box::new(Caller {
        regs: caller,
        trust: Trust::Cfi,
        source: rule.source(),
        exact_pc: rec.is_signal_frame() || rec.is_machine_frame(),
    }))
}

/// The CFA `rule` gives from `regs`, or why it gives none.
fn cfa_of(
    ctx: &WalkContext<'_, '_>,
    rule: &Rule<'_>,
    regs: &RegisterSet,
    addr_size: u8,
    read: &dyn Fn(u64) -> Option<u64>,
) -> Result<u64, CfiOutcome> {
    let rec = &rule.record;
    // For expressions that read the pc register, give the frame's real pc.
    match rec.cfa.kind() {
        Some(SlotKind::Offset) => match regs.get(u16::from(rec.cfa.reg)) {
            Some(base) => Ok(base.wrapping_add(rec.cfa.value as i64 as u64)),
            None => Err(CfiOutcome::NoRule),
        },
        Some(SlotKind::DerefOffset) => match regs.get(u16::from(rec.cfa.reg)) {
            Some(base) => match read(base.wrapping_add(rec.cfa.value as i64 as u64)) {
                Some(v) => Ok(v),
                None => Err(CfiOutcome::MemoryMissing),
            },
            None => Err(CfiOutcome::NoRule),
        },
        Some(SlotKind::Expression) | Some(SlotKind::ValExpression) => {
            let Some(expr) = rule.expression(rec.cfa) else {
                return Err(CfiOutcome::NoRule);
            };
            match eval::evaluate(expr, addr_size, None, regs, ctx.memory) {
                Some(v) => Ok(v),
                None => Err(CfiOutcome::MemoryMissing),
            }
        }
        _ => Err(CfiOutcome::NoRule),
    }
}

/// Bytes of an `ARM64_NT_CONTEXT` up to its pc: flags and cpsr, x0–x28, fp, lr, sp, pc.
const NT_CONTEXT_X0: u64 = 8;
const NT_CONTEXT_PC: u64 = 0x108;

/// The caller an `ARM64_NT_CONTEXT` at `cfa` holds (the frame is a Windows ARM64
/// dispatcher's, whose `.xdata` says `MSFT_OP_CONTEXT`): x0–x30, sp and pc as the context
/// gives them, as `RtlVirtualUnwind` restores them; its pc exact. Like the frame a Linux
/// signal interrupted, its registers are a saved context (`Trust::Context`): it may be a
/// leaf whose caller is still in lr.
fn nt_context_caller(ctx: &WalkContext<'_, '_>, rule: &Rule<'_>, cfa: u64) -> CfiOutcome {
    let Some(bytes) = ctx.memory.read_bytes(cfa, (NT_CONTEXT_PC + 8) as usize) else {
        return CfiOutcome::MemoryMissing;
    };
    let word = |at: u64| {
        let at = at as usize;
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    let mut caller = RegisterSet::new(crate::dump::Arch::Aarch64);
    // x0–x30 (x29 fp, x30 lr), then sp (31) and pc (32): consecutive words
    for reg in 0..=32u16 {
        if let Some(v) = word(NT_CONTEXT_X0 + 8 * u64::from(reg)) {
            caller.set(reg, v);
        }
    }
    CfiOutcome::Caller(Box::new(Caller {
        regs: caller,
        trust: Trust::Context,
        source: rule.source(),
        exact_pc: true,
    }))
}
