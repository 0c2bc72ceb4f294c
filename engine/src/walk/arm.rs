//! 32-bit arm: the link register of a leaf, ARM/Thumb interworking, `r11`/`r7` frame
//! records in the layouts compilers write, call decoding and sigreturn trampolines.
//!
//! What differs from aarch64: a return address carries the caller's instruction set in
//! its low bit (set: Thumb), which is cleared before the address is used or reported
//! ([`Arm::strip_pac`], named for the hook it implements), and instructions are 2-byte
//! aligned. The frame pointer is `r11` in ARM code and `r7` in Thumb code, and compilers
//! lay the record out two ways: clang's `push {fp, lr}; mov fp, sp` (`[fp]` = caller fp,
//! `[fp + 4]` = return address, caller sp `fp + 8`) and GCC's ARM-mode `push {fp, lr};
//! add fp, sp, #4` (`[fp]` = return address, `[fp - 4]` = caller fp, caller sp `fp + 4`).
//! A record is taken only where its return address lies in code just after a call; GCC's
//! Thumb `r7` points below the locals and is no record at all (CFI or the scan find
//! those callers). Before the records, a function the symbols locate but no unwind rule
//! describes has its prologue read ([`super::arm_prologue`]), as gdb does; such callers
//! are reported with `trust: fp`.
//!
//! Signal frames: a handler returns to a sigreturn trampoline (`mov r7, #119` or `#173`,
//! then `svc`, in ARM or Thumb code: the kernel's `sigreturn_codes`, which QEMU copies),
//! and the interrupted registers are read from the `struct sigcontext` on its stack.

use super::arch::{inherit, ArchWalker};
use super::arm_prologue::{self, MAX_PROLOGUE_BYTES};
use super::{Caller, Trust, WalkContext, WalkFrame};
use crate::arch::arm::{Reg, CPSR_SLOT, CPSR_THUMB, LR, PC, SP};
use crate::dump::{Arch, RegisterSet};

/// The arm walker.
pub struct Arm;

/// The frame-pointer registers: `r11` (ARM code), `r7` (Thumb code).
const FRAME_POINTERS: [Reg; 2] = [Reg::R11, Reg::R7];
/// r4–r10 and r11: what a caller found by a frame record or the link register inherits
/// (the callee keeps them unless its CFI says otherwise).
const INHERITED: &[u16] = crate::arch::arm::CALLEE_SAVED;

/// The sigreturn trampolines' first instructions, as the two little-endian words at their
/// address and the mask of the second word that must match: the kernel's (and QEMU's)
/// ARM `mov r7, #119; svc #0x900077` and Thumb `movs r7, #119; svc #0`, glibc's own
/// restorers (`__default_sa_restorer`: ARM `svc #0`, Thumb-2 `mov.w r7, #119; svc #0`),
/// and the same for rt_sigreturn (173). The flag: an rt frame.
const SIGRETURN_CODES: [(u32, u32, u32, bool); 8] = [
    (0xe3a0_7077, 0xef90_0077, u32::MAX, false),
    (0xe3a0_7077, 0xef00_0000, u32::MAX, false),
    (0xdf00_2777, 0, 0, false),
    (0x0777_f04f, 0xdf00, 0xffff, false),
    (0xe3a0_70ad, 0xef90_00ad, u32::MAX, true),
    (0xe3a0_70ad, 0xef00_0000, u32::MAX, true),
    (0xdf00_27ad, 0, 0, true),
    (0x07ad_f04f, 0xdf00, 0xffff, true),
];
/// Offset of `uc_mcontext.arm_r0` from a `struct ucontext`: uc_flags, uc_link, uc_stack
/// (12 bytes), then the sigcontext's trap_no, error_code and oldmask.
const UCONTEXT_R0: u64 = 20 + 12;
/// Size of the `siginfo_t` an rt signal frame starts with.
const SIGINFO_SIZE: u64 = 128;

impl Arm {
    /// A caller from the frame record at `fp` in either layout, the first whose return
    /// address lies in code after a call. `fp_reg` is set to the caller's value.
    fn caller_from_record(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
        fp_reg: Reg,
        fp: u64,
    ) -> Option<Caller> {
        let sp = callee.sp?;
        if fp < sp || !fp.is_multiple_of(4) {
            return None;
        }
        let read = |addr: u64| ctx.memory.read_u32(addr).map(u64::from);
        // (caller fp, return address, caller sp): clang's layout, then GCC's
        let layouts = [
            (
                read(fp),
                fp.checked_add(4).and_then(read),
                fp.checked_add(8),
            ),
            (
                fp.checked_sub(4).and_then(read),
                read(fp),
                fp.checked_add(4),
            ),
        ];
        for (caller_fp, ra, caller_sp) in layouts {
            let (Some(caller_fp), Some(ra), Some(caller_sp)) = (caller_fp, ra, caller_sp) else {
                continue;
            };
            if !self.returns_after_call(ctx, ra) {
                continue;
            }
            let pc = self.strip_pac(ctx, ra);
            let mut regs = RegisterSet::new(Arch::Arm);
            inherit(&callee.registers, &mut regs, INHERITED);
            regs.set(PC, pc);
            self.note_return_address(ra, &mut regs);
            regs.set(SP, caller_sp);
            regs.set(fp_reg, caller_fp);
            return Some(Caller {
                regs,
                trust: Trust::Fp,
                source: None,
                exact_pc: false,
            });
        }
        None
    }

    /// The caller from the prologue of the function holding `callee`'s pc: its start from
    /// the symbols (its `cpsr`'s T bit says Thumb: the dump's, a signal frame's, or the
    /// one [`Arm::note_return_address`] set from a return address), the instructions from
    /// there to the pc analysed, the return address from where `lr` was pushed (frame 0:
    /// from `lr` itself when it was not).
    fn caller_from_prologue(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
    ) -> Option<Caller> {
        let entry = ctx
            .code
            .function_start(callee.address_for_lookup(self.lookup_back()))?;
        let first = callee.trust == Trust::Context;
        let thumb = callee
            .registers
            .get(CPSR_SLOT)
            .is_some_and(|c| c & CPSR_THUMB != 0);
        let start = entry & !1;
        let len = callee.pc.checked_sub(start)?.min(MAX_PROLOGUE_BYTES);
        let code = match len {
            0 => Vec::new(),
            _ => ctx
                .code
                .bytes_before(start.checked_add(len)?, usize::try_from(len).ok()?)?,
        };
        let p = arm_prologue::analyze(&code, thumb);
        let cfa = callee.sp?.checked_add(p.frame_size)?;
        let read = |below: u64| {
            cfa.checked_sub(below)
                .and_then(|a| ctx.memory.read_u32(a))
                .map(u64::from)
        };
        let raw = match p.saved[usize::from(LR.dwarf())] {
            Some(below) => read(below)?,
            None if first => callee.registers.get(LR)?,
            None => return None,
        };
        let pc = self.strip_pac(ctx, raw);
        if !self.is_signal_trampoline(ctx, pc) && !self.returns_after_call(ctx, raw) {
            return None;
        }
        let mut regs = RegisterSet::new(Arch::Arm);
        inherit(&callee.registers, &mut regs, INHERITED);
        for &r in INHERITED {
            if let Some(below) = p.saved[usize::from(r)] {
                match read(below) {
                    Some(v) => regs.set(r, v),
                    None => regs.clear(r),
                }
            }
        }
        regs.set(PC, pc);
        self.note_return_address(raw, &mut regs);
        regs.set(SP, cfa);
        Some(Caller {
            regs,
            trust: Trust::Fp,
            source: None,
            exact_pc: false,
        })
    }

    /// Whether the return address `raw` (Thumb bit included) lies in code and, where the
    /// code before it is readable, follows a call.
    fn returns_after_call(&self, ctx: &WalkContext<'_, '_>, raw: u64) -> bool {
        let pc = raw & !1;
        if !ctx.is_return_code(pc) {
            return false;
        }
        match ctx.code.bytes_before(pc, self.call_check_len()) {
            Some(code) => self.is_call_before_return(raw, &code),
            None => true,
        }
    }

    /// Frame 0 without a rule: a leaf's caller is in lr, with the same sp and every
    /// callee-saved register unchanged. lr itself is not passed on.
    fn caller_from_link_register(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
    ) -> Option<Caller> {
        let lr = callee.registers.get(LR)?;
        let pc = self.strip_pac(ctx, lr);
        // a signal handler's lr is the sigreturn trampoline, which no call precedes
        if !self.is_signal_trampoline(ctx, pc) && !self.returns_after_call(ctx, lr) {
            return None;
        }
        let mut regs = RegisterSet::new(Arch::Arm);
        inherit(&callee.registers, &mut regs, INHERITED);
        regs.set(PC, pc);
        self.note_return_address(lr, &mut regs);
        regs.set(SP, callee.sp?);
        Some(Caller {
            regs,
            trust: Trust::Fp,
            source: None,
            exact_pc: false,
        })
    }

    /// The first two instruction words at `pc`, when the code is readable.
    fn words_at(ctx: &WalkContext<'_, '_>, pc: u64) -> Option<(u32, u32)> {
        let code = ctx.code.bytes_before(pc.checked_add(8)?, 8)?;
        let word = |i: usize| -> Option<u32> {
            let b = code.get(i..i + 4)?;
            Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        Some((word(0)?, word(4)?))
    }

    /// Whether `pc` is a sigreturn trampoline, and whether an rt one (its frame starts
    /// with a siginfo).
    fn trampoline_kind(ctx: &WalkContext<'_, '_>, pc: u64) -> Option<bool> {
        let (first, second) = Self::words_at(ctx, pc)?;
        SIGRETURN_CODES
            .iter()
            .find(|&&(a, b, mask, _)| first == a && second & mask == b)
            .map(|&(_, _, _, rt)| rt)
    }
}

impl ArchWalker for Arm {
    fn arch(&self) -> Arch {
        Arch::Arm
    }

    /// Clears the Thumb bit of a return address (the caller's instruction set, not part
    /// of the address); arm has no pointer authentication.
    fn strip_pac(&self, _ctx: &WalkContext<'_, '_>, addr: u64) -> u64 {
        addr & !1
    }

    /// The caller runs Thumb code where its return address's low bit is set: kept as
    /// `cpsr`'s T bit (returning there sets it on the CPU too).
    fn note_return_address(&self, raw: u64, caller: &mut RegisterSet) {
        caller.set(CPSR_SLOT, if raw & 1 != 0 { CPSR_THUMB } else { 0 });
    }

    /// The function's prologue where the symbols locate it. Else frame 0 (and a frame a
    /// signal interrupted) may be a leaf whose caller is still in lr; a record it already
    /// built agrees with lr. Every other frame follows the record at r11, else at r7.
    fn caller_by_fp(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
        _first: bool,
    ) -> Option<Caller> {
        if let Some(c) = self.caller_from_prologue(ctx, callee) {
            return Some(c);
        }
        let record = FRAME_POINTERS.iter().find_map(|&r| {
            let fp = callee.registers.get(r)?;
            self.caller_from_record(ctx, callee, r, fp)
        });
        if callee.trust == Trust::Context {
            if let Some(leaf) = self.caller_from_link_register(ctx, callee) {
                return match record {
                    Some(r) if r.regs.pc() == leaf.regs.pc() => Some(r),
                    _ => Some(leaf),
                };
            }
        }
        record
    }

    fn call_check_len(&self) -> usize {
        4
    }

    /// Either instruction set's call ([`is_arm_call_before`] or [`is_thumb_call_before`]):
    /// without the return address, the caller's instruction set is not known.
    fn is_call_before(&self, code: &[u8]) -> bool {
        is_arm_call_before(code) || is_thumb_call_before(code)
    }

    /// The call of the return address's instruction set: Thumb where its low bit is set,
    /// else ARM (whose return addresses are 4-byte aligned).
    fn is_call_before_return(&self, raw: u64, code: &[u8]) -> bool {
        if raw & 1 != 0 {
            is_thumb_call_before(code)
        } else {
            raw.is_multiple_of(4) && is_arm_call_before(code)
        }
    }

    /// Thumb instructions are 2 bytes aligned.
    fn instruction_alignment(&self) -> u64 {
        2
    }

    /// A leaf (frame 0) keeps its caller's sp: it may not have moved sp at all.
    fn allows_same_sp(&self, callee: &WalkFrame) -> bool {
        callee.trust == Trust::Context
    }

    fn is_signal_trampoline(&self, ctx: &WalkContext<'_, '_>, pc: u64) -> bool {
        Self::trampoline_kind(ctx, pc).is_some()
    }

    /// The interrupted frame: r0–r15 from the `struct sigcontext` in the signal frame at
    /// the trampoline's sp. Its pc is exact and, like frame 0, it may be a leaf whose
    /// caller is still in lr.
    fn caller_from_signal_frame(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
    ) -> Option<Caller> {
        let rt = Self::trampoline_kind(ctx, callee.pc)?;
        let frame = callee.sp?;
        let ucontext = if rt {
            frame.checked_add(SIGINFO_SIZE)?
        } else {
            frame
        };
        let r0 = ucontext.checked_add(UCONTEXT_R0)?;
        let slot = |i: u16| {
            r0.checked_add(4 * u64::from(i))
                .and_then(|a| ctx.memory.read_u32(a))
                .map(u64::from)
        };
        let mut regs = RegisterSet::new(Arch::Arm);
        for r in Reg::R0.dwarf()..=Reg::R14.dwarf() {
            if let Some(v) = slot(r) {
                regs.set(r, v);
            }
        }
        regs.set(SP, slot(SP.dwarf())?);
        regs.set(PC, slot(PC.dwarf())? & !1);
        // arm_cpsr follows arm_pc
        if let Some(cpsr) = slot(PC.dwarf() + 1) {
            regs.set(CPSR_SLOT, cpsr);
        }
        Some(Caller {
            regs,
            trust: Trust::Context,
            source: None,
            exact_pc: true,
        })
    }
}

/// The last `N` bytes of `code`, if it has them.
fn last<const N: usize>(code: &[u8]) -> Option<[u8; N]> {
    let from = code.len().checked_sub(N)?;
    code.get(from..)?.try_into().ok()
}

/// ARM `bl`, `blx imm` or `blx rN` in the 4 bytes before a return address.
fn is_arm_call_before(code: &[u8]) -> bool {
    let Some(bytes) = last::<4>(code) else {
        return false;
    };
    let insn = u32::from_le_bytes(bytes);
    let always_or_conditional = insn >> 28 != 0xf;
    (insn & 0x0f00_0000 == 0x0b00_0000 && always_or_conditional) // bl
        || insn & 0xfe00_0000 == 0xfa00_0000 // blx imm
        || (insn & 0x0fff_fff0 == 0x012f_ff30 && always_or_conditional) // blx rN
}

/// Thumb `blx rN` (16-bit) in the last 2 bytes, or Thumb-2 `bl`/`blx imm` (32-bit: first
/// halfword `11110…`, second `11x1…` or `11x0…0`) in the last 4.
fn is_thumb_call_before(code: &[u8]) -> bool {
    if last::<2>(code).is_some_and(|h| u16::from_le_bytes(h) & 0xff87 == 0x4780) {
        return true;
    }
    let Some(b) = last::<4>(code) else {
        return false;
    };
    let (h1, h2) = (
        u16::from_le_bytes([b[0], b[1]]),
        u16::from_le_bytes([b[2], b[3]]),
    );
    h1 & 0xf800 == 0xf000 && (h2 & 0xd000 == 0xd000 || h2 & 0xd001 == 0xc000)
}

#[cfg(test)]
#[path = "arm_tests.rs"]
mod tests;
