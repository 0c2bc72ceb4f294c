//! The `scan` strategy: look up the stack for a word that could be a return address.
//!
//! A candidate must point into executable code of a mapped module and, when the module's
//! code bytes are available, the bytes just before it must decode as a call. Scanning is
//! the last resort: frames it finds carry `trust: scan`.

use super::arch::ArchWalker;
use super::{Caller, Trust, WalkContext, WalkFrame};
use crate::dump::RegisterSet;

pub(crate) fn caller_by_scan(
    arch: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    callee: &WalkFrame,
    words: usize,
    stack_range: Option<(u64, u64)>,
) -> Option<Caller> {
    let sp = callee.sp?;
    let word = arch.pointer_size();
    let limit = stack_range.map(|(_, hi)| hi).unwrap_or(u64::MAX);
    for i in 0..words as u64 {
        let addr = sp.checked_add(i.checked_mul(word)?)?;
        if addr.checked_add(word)? > limit {
            break;
        }
        let Some(value) = (if word == 8 {
            ctx.memory.read_u64(addr)
        } else {
            ctx.memory.read_u32(addr).map(u64::from)
        }) else {
            break;
        };
        let candidate = arch.strip_pac(ctx, value);
        if !ctx.is_code(candidate) {
            continue;
        }
        if let Some(code) = ctx.code.bytes_before(candidate, arch.call_check_len()) {
            if !arch.is_call_before(&code) {
                continue;
            }
        }
        let mut regs = RegisterSet::new(callee.registers.arch());
        regs.set(regs.pc_reg(), candidate);
        regs.set(regs.sp_reg(), addr + word);
        // Callee-saved registers cannot be recovered by a scan; frame pointers often
        // still hold the caller's value, which later fp steps may use.
        for &r in arch.callee_saved() {
            if let Some(v) = callee.registers.get(r) {
                regs.set(r, v);
            }
        }
        return Some(Caller {
            regs,
            trust: Trust::Scan,
            source: None,
            exact_pc: false,
        });
    }
    None
}
