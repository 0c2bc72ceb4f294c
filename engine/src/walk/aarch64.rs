//! aarch64: frame records, the link register of a leaf, call decoding and pointer
//! authentication.
//!
//! What differs from x86_64: the return address arrives in a register (x30, the link
//! register) and stays there until a non-leaf function saves it, so the innermost frame
//! may still hold its caller's pc in x30 — only frame 0 may use it, every later frame's
//! x30 is unknown. Frame records are `[x29] = caller x29`, `[x29 + 8] = caller pc`, and the
//! caller's sp is `x29 + 16`. Return addresses may carry a pointer-authentication code in
//! their top bits (`-mbranch-protection=pac-ret`); every recovered return address and
//! every scanned candidate is stripped ([`Aarch64::strip_pac`]) before it is used or
//! reported.
//!
//! Signal frames: a handler returns to a sigreturn trampoline, `mov x8, #139; svc #0` —
//! the vDSO's `__kernel_rt_sigreturn` on a real kernel, a page of QEMU's own under its
//! user-mode emulator (outside every module). The trampoline is recognised by those two
//! instructions (or, where its code is not available, by a signal-frame unwind rule),
//! and the interrupted frame's registers are read from the `struct rt_sigframe` at the
//! trampoline's sp, as gdb does: the vDSO's own CFI only follows the frame record to the
//! interrupted function's caller, skipping the frame the signal interrupted.

use super::arch::ArchWalker;
use super::{Caller, Trust, WalkContext, WalkFrame};
use crate::arch::aarch64::{Reg, CALLEE_SAVED_GENERAL, FP, LR};

/// The frame record's registers; x19–x28 pass to the caller unchanged.
const RECORD: super::arch::RecordRegisters = super::arch::RecordRegisters {
    pc: Reg::Pc.dwarf(),
    sp: Reg::Sp.dwarf(),
    fp: FP.dwarf(),
    inherited: CALLEE_SAVED_GENERAL,
};
use crate::dump::{Arch, FrameRegisters, RegisterSet};
/// `mov x8, #139` (`__NR_rt_sigreturn`), `svc #0`: the sigreturn trampoline.
const SIGRETURN_CODE: [u32; 2] = [0xd280_1168, 0xd400_0001];
/// Offset of the interrupted registers from the sp of a sigreturn trampoline: `struct
/// rt_sigframe` starts at sp with a `siginfo_t` (128 bytes), then the `ucontext`, whose
/// `uc_mcontext` (`struct sigcontext`) is 176 bytes in (uc_flags, uc_link, uc_stack,
/// uc_sigmask padded to 1024 bits, 16-byte alignment); the sigcontext's `fault_address`
/// (8 bytes) comes before `regs[31]`, `sp`, `pc`.
const SIGFRAME_REGS: u64 = 128 + 176 + 8;
/// User-space addresses have at least this many significant bits (48-bit VA, 4 KiB pages).
const MIN_VA_BITS: u32 = 48;

/// The aarch64 walker.
pub struct Aarch64;

/// The bits of a user-space code address that can hold a PAC when the dump records no
/// mask: everything above the larger of 48 bits and the bit length of the highest mapped
/// module's last address (a 52-bit address space shows itself in its mappings).
fn inferred_pac_mask(ctx: &WalkContext<'_, '_>) -> u64 {
    let top = ctx
        .modules
        .iter()
        .map(|m| m.end.saturating_sub(1))
        .max()
        .unwrap_or(0);
    let bits = (64 - top.leading_zeros()).max(MIN_VA_BITS);
    if bits >= 64 {
        0
    } else {
        !((1u64 << bits) - 1)
    }
}

impl Aarch64 {
    /// The callee-saved registers (x19–x28) the caller inherits when a frame record,
    /// not a rule, found it: they hold the caller's values unless the callee saved and
    /// reused them, which only its CFI could tell.
    fn inherit_callee_saved(callee: &FrameRegisters, caller: &mut RegisterSet) {
        super::arch::inherit(callee, caller, RECORD.inherited);
    }

    /// The caller from the frame record at `fp`: `(sp, x29, pc) = (fp + 16, *fp, *(fp + 8))`.
    fn caller_from_record(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
        fp: u64,
    ) -> Option<Caller> {
        super::arch::caller_from_record(self, ctx, callee, fp, &RECORD)
    }

    /// Frame 0 without a rule: a frameless leaf's caller is in x30, with the same sp and
    /// every callee-saved register (x29 included) unchanged. x30 itself is not passed on:
    /// the caller's own link register is unknown.
    fn caller_from_link_register(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
    ) -> Option<Caller> {
        let lr = self.strip_pac(ctx, callee.registers.get(LR)?);
        let sp = callee.sp?;
        // A signal handler's x30 is the sigreturn trampoline, which no call precedes.
        if !self.is_signal_trampoline(ctx, lr) {
            if !ctx.is_return_code(lr) {
                return None;
            }
            if let Some(code) = ctx.code.bytes_before(lr, self.call_check_len()) {
                if !self.is_call_before(&code) {
                    return None;
                }
            }
        }
        let mut regs = RegisterSet::new(Arch::Aarch64);
        regs.set(Reg::Pc, lr);
        regs.set(Reg::Sp, sp);
        if let Some(fp) = callee.registers.get(FP) {
            regs.set(FP, fp);
        }
        Self::inherit_callee_saved(&callee.registers, &mut regs);
        Some(Caller {
            regs,
            trust: Trust::Fp,
            source: None,
            exact_pc: false,
        })
    }
}

impl ArchWalker for Aarch64 {
    fn arch(&self) -> Arch {
        Arch::Aarch64
    }

    /// Clears the pointer-authentication bits: with the dump's mask (NT_ARM_PAC_MASK) where
    /// it has one, else with the mask inferred from the address space. As the kernel and
    /// gdb do, an address with bit 55 set (the upper, kernel half) gets the bits set instead.
    fn strip_pac(&self, ctx: &WalkContext<'_, '_>, addr: u64) -> u64 {
        let mask = if ctx.pac_mask != 0 {
            ctx.pac_mask
        } else {
            inferred_pac_mask(ctx)
        };
        let stripped = if ctx.pac_mask != 0 && addr & (1 << 55) != 0 {
            addr | mask
        } else {
            addr & !mask
        };
        if let Some(seen) = ctx.pac_signed_seen {
            if stripped != addr && ctx.is_code(stripped) {
                seen.set(true);
            }
        }
        stripped
    }

    /// Frame 0 (and a frame a signal interrupted) may be a frameless leaf whose caller is
    /// still in x30; its frame record, if it built one, holds the same address. Every
    /// other frame follows the record at x29.
    fn caller_by_fp(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
        _first: bool,
    ) -> Option<Caller> {
        let record = callee
            .registers
            .get(FP)
            .and_then(|fp| self.caller_from_record(ctx, callee, fp));
        // Frame 0 and a frame a signal interrupted: their registers, x30 included, are
        // the saved context.
        if callee.trust == Trust::Context {
            if let Some(leaf) = self.caller_from_link_register(ctx, callee) {
                // The leaf's own record (if it already pushed one) agrees with x30 and
                // gives the better sp; otherwise x29 is the caller's record and following
                // it would skip the caller.
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

    /// A64 instructions are 4 bytes, 4-aligned.
    fn instruction_alignment(&self) -> u64 {
        4
    }

    fn is_signal_trampoline(&self, ctx: &WalkContext<'_, '_>, pc: u64) -> bool {
        let code = pc
            .checked_add(8)
            .and_then(|end| ctx.code.bytes_before(end, 8));
        match code {
            Some(code) => {
                let expected: Vec<u8> = SIGRETURN_CODE
                    .iter()
                    .flat_map(|i| i.to_le_bytes())
                    .collect();
                code == expected
            }
            // The vDSO's FDE for `__kernel_rt_sigreturn` is a signal frame and starts at
            // the nop before it, where a return-address lookup (`pc - 4`) lands.
            None => {
                super::cfi::is_signal_frame_rule(ctx, pc)
                    || pc
                        .checked_sub(4)
                        .is_some_and(|a| super::cfi::is_signal_frame_rule(ctx, a))
            }
        }
    }

    /// The interrupted frame: x0–x30, sp and pc from the sigcontext. Its pc is exact (the
    /// instruction the signal interrupted) and, like frame 0, it may be a leaf whose
    /// caller is still in x30.
    fn caller_from_signal_frame(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
    ) -> Option<Caller> {
        if !self.is_signal_trampoline(ctx, callee.pc) {
            return None;
        }
        let base = callee.sp?.checked_add(SIGFRAME_REGS)?;
        let slot = |i: u64| base.checked_add(i * 8).and_then(|a| ctx.memory.read_u64(a));
        let mut regs = RegisterSet::new(Arch::Aarch64);
        // regs[0..=30], sp, pc: in DWARF order
        for r in Reg::X0.dwarf()..=Reg::X30.dwarf() {
            if let Some(v) = slot(u64::from(r)) {
                regs.set(r, v);
            }
        }
        regs.set(Reg::Sp, slot(u64::from(Reg::Sp.dwarf()))?);
        regs.set(Reg::Pc, slot(u64::from(Reg::Pc.dwarf()))?);
        Some(Caller {
            regs,
            trust: Trust::Context,
            source: None,
            exact_pc: true,
        })
    }

    /// `BL imm26`, `BLR Xn`, or the authenticating `BLRAA`/`BLRAB`(`Z`) forms, in the 4
    /// bytes before the return address.
    fn is_call_before(&self, code: &[u8]) -> bool {
        let Some(last) = code.len().checked_sub(4).and_then(|i| code.get(i..)) else {
            return false;
        };
        let Ok(bytes) = <[u8; 4]>::try_from(last) else {
            return false;
        };
        let insn = u32::from_le_bytes(bytes);
        insn >> 26 == 0b100101 // BL
            || insn & 0xffff_fc1f == 0xd63f_0000 // BLR
            || insn & 0xfeff_f800 == 0xd63f_0800 // BLRAA, BLRAAZ, BLRAB, BLRABZ
    }

    /// A leaf (frame 0) keeps its caller's sp: it may not have moved sp at all.
    fn allows_same_sp(&self, callee: &WalkFrame) -> bool {
        callee.trust == Trust::Context
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::aarch64::Reg::{Sp as SP, X29, X30};
    use crate::dump::MemoryMap;
    use crate::walk::tests::{module_at as module, stack_bytes};
    use crate::walk::{walk_thread, CodeReader, EndReason, WalkOptions};

    /// Code bytes: every address's preceding 4 bytes are a `BL`.
    struct AllCalls;
    impl CodeReader for AllCalls {
        fn bytes_before(&self, _addr: u64, _len: usize) -> Option<Vec<u8>> {
            Some(0x9400_0010u32.to_le_bytes().to_vec())
        }
    }

    /// Code bytes: nothing before any address is a call.
    struct NoCalls;
    impl CodeReader for NoCalls {
        fn bytes_before(&self, _addr: u64, _len: usize) -> Option<Vec<u8>> {
            Some(0xd503_201fu32.to_le_bytes().to_vec()) // NOP
        }
    }

    fn regs(pc: u64, sp: u64, fp: u64, lr: Option<u64>) -> RegisterSet {
        let mut r = RegisterSet::new(Arch::Aarch64);
        r.set(32, pc);
        r.set(SP, sp);
        r.set(X29, fp);
        if let Some(lr) = lr {
            r.set(X30, lr);
        }
        r
    }

    fn walk(
        stack_base: u64,
        words: &[u64],
        regs: &RegisterSet,
        pac_mask: u64,
        code: &dyn CodeReader,
    ) -> crate::walk::WalkResult {
        let bytes = stack_bytes(words);
        let mem = MemoryMap::new(vec![(stack_base, &bytes[..])]);
        let modules = vec![module(0x40_0000, 0x50_0000)];
        let tables = vec![None];
        let opts = WalkOptions {
            enable_scan: false,
            ..WalkOptions::default()
        };
        let ctx = WalkContext {
            memory: &mem,
            modules: &modules,
            tables: &tables,
            code,
            options: &opts,
            pac_mask,
            pac_signed_seen: None,
        };
        walk_thread(&Aarch64, &ctx, regs)
    }

    #[test]
    fn call_decoding() {
        let a = Aarch64;
        let le = |i: u32| i.to_le_bytes().to_vec();
        assert!(a.is_call_before(&le(0x97ff_fff0))); // bl -64
        assert!(a.is_call_before(&le(0x9400_0001))); // bl +4
        assert!(a.is_call_before(&le(0xd63f_0020))); // blr x1
        assert!(a.is_call_before(&le(0xd63f_03c0))); // blr x30
        assert!(a.is_call_before(&le(0xd73f_0a21))); // blraa x17, x1
        assert!(a.is_call_before(&le(0xd63f_0c3f))); // blrabz x1
        assert!(!a.is_call_before(&le(0x1400_0001))); // b +4
        assert!(!a.is_call_before(&le(0xd61f_0020))); // br x1
        assert!(!a.is_call_before(&le(0xd65f_03c0))); // ret
        assert!(!a.is_call_before(&[0x01, 0x00, 0x00]));
        assert!(!a.is_call_before(&[]));
        let mut longer = vec![0u8; 4];
        longer.extend(le(0xd63f_0020));
        assert!(a.is_call_before(&longer));
    }

    #[test]
    fn frame_record_chain() {
        // Frame 0 is not a leaf (x30 holds an address inside itself, already reused), so
        // its record at x29 = 0x1010 is followed: [0x1030, ra1]; then [0x1050, ra2];
        // then [0, 0]: pc zero ends the walk.
        let words = [
            0, 0, //          0x1000
            0x1030, 0x40_1234, // 0x1010: frame 0's record
            0, 0, //          0x1020
            0x1050, 0x40_2000, // 0x1030: frame 1's record
            0, 0, //          0x1040
            0, 0, //          0x1050: frame 2's record: outermost
        ];
        let r = walk(
            0x1000,
            &words,
            &regs(0x40_1000, 0x1000, 0x1010, None),
            0,
            &AllCalls,
        );
        let pcs: Vec<u64> = r.frames.iter().map(|f| f.pc).collect();
        assert_eq!(pcs, vec![0x40_1000, 0x40_1234, 0x40_2000]);
        let sps: Vec<Option<u64>> = r.frames.iter().map(|f| f.sp).collect();
        assert_eq!(sps, vec![Some(0x1000), Some(0x1020), Some(0x1040)]);
        assert_eq!(r.frames[1].trust, Trust::Fp);
        assert_eq!(r.frames[2].registers.get(X29), Some(0x1050));
        // frame 2's record is all zeros: the chain's end, no scan past it
        assert_eq!(r.end, EndReason::PcZero);
    }

    #[test]
    fn leaf_returns_through_x30_and_only_frame_0_uses_it() {
        // A frameless leaf: sp = 0x1000, x29 = 0x1010 is its caller's record,
        // x30 = 0x40_1500 the caller's pc. The caller's record gives the caller's caller.
        let words = [
            0, 0, //               0x1000
            0x1030, 0x40_2000, //  0x1010: the caller's record
            0, 0, 0, 0, //         0x1020
        ];
        let r = walk(
            0x1000,
            &words,
            &regs(0x40_1000, 0x1000, 0x1010, Some(0x40_1500)),
            0,
            &AllCalls,
        );
        let pcs: Vec<u64> = r.frames.iter().map(|f| f.pc).collect();
        assert_eq!(pcs, vec![0x40_1000, 0x40_1500, 0x40_2000]);
        // the leaf's caller keeps the leaf's sp
        assert_eq!(r.frames[1].sp, Some(0x1000));
        assert_eq!(r.frames[1].registers.get(X30), None, "x30 is not inherited");
        assert_eq!(r.frames[2].sp, Some(0x1020));

        // The same registers, but x30 does not follow a call: it is not a return
        // address, and the record at x29 is used instead.
        let r = walk(
            0x1000,
            &words,
            &regs(0x40_1000, 0x1000, 0x1010, Some(0x40_1500)),
            0,
            &NoCalls,
        );
        assert_eq!(r.frames.get(1).map(|f| f.pc), Some(0x40_2000));
    }

    #[test]
    fn leaf_with_own_record_uses_the_record() {
        // Frame 0 already pushed its record (x29 = sp), holding x30: same pc either way,
        // and the record gives the caller's real sp.
        let words = [0x1030, 0x40_1500, 0, 0, 0, 0, 0, 0];
        let r = walk(
            0x1000,
            &words,
            &regs(0x40_1000, 0x1000, 0x1000, Some(0x40_1500)),
            0,
            &AllCalls,
        );
        assert_eq!(r.frames[1].pc, 0x40_1500);
        assert_eq!(r.frames[1].sp, Some(0x1010));
    }

    #[test]
    fn pac_signed_return_addresses_are_stripped() {
        // Signed return addresses: PAC bits in 48..=54 and 56..=63.
        let signed1 = 0x003a_0000_0040_1234u64;
        let signed2 = 0x7f12_0000_0040_2000u64;
        let words = [0, 0, 0x1030, signed1, 0, 0, 0x1050, signed2, 0, 0, 0, 0];
        let expect = vec![0x40_1000, 0x40_1234, 0x40_2000];
        // inferred mask (the dump has none)
        let r = walk(
            0x1000,
            &words,
            &regs(0x40_1000, 0x1000, 0x1010, None),
            0,
            &AllCalls,
        );
        assert_eq!(r.frames.iter().map(|f| f.pc).collect::<Vec<_>>(), expect);
        // the dump's mask
        let r = walk(
            0x1000,
            &words,
            &regs(0x40_1000, 0x1000, 0x1010, None),
            0xff7f_0000_0000_0000,
            &AllCalls,
        );
        assert_eq!(r.frames.iter().map(|f| f.pc).collect::<Vec<_>>(), expect);
        // a signed x30 in a leaf
        let r = walk(
            0x1000,
            &[0; 8],
            &regs(0x40_1000, 0x1000, 0, Some(0x0055_0000_0040_1500)),
            0,
            &AllCalls,
        );
        assert_eq!(r.frames.get(1).map(|f| f.pc), Some(0x40_1500));
    }

    /// Code bytes: the sigreturn trampoline in the page at `TRAMP`, a `BL` before every
    /// other address.
    struct WithTrampoline;
    const TRAMP: u64 = 0x7000_0000;
    impl CodeReader for WithTrampoline {
        fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
            if addr == TRAMP + 8 && len == 8 {
                return Some(
                    SIGRETURN_CODE
                        .iter()
                        .flat_map(|i| i.to_le_bytes())
                        .collect(),
                );
            }
            if (TRAMP..TRAMP + 0x1000).contains(&addr) {
                return Some(vec![0; len]);
            }
            AllCalls.bytes_before(addr, len)
        }
    }

    #[test]
    fn signal_frame_restores_the_interrupted_registers() {
        // A frameless handler (frame 0) returns through x30 to the trampoline; the
        // rt_sigframe at its sp holds the interrupted frame: a leaf at 0x40_2000 whose
        // caller 0x40_3000 is still in its x30, with its caller's record at x29.
        let sp = 0x1000u64;
        let mut words = vec![0u64; 0x200 / 8 + 40];
        let regs_at = (SIGFRAME_REGS / 8) as usize;
        words[regs_at + 19] = 0x1919; // x19
        words[regs_at + 29] = 0x1400; // x29
        words[regs_at + 30] = 0x0012_0000_0040_3000; // x30, signed
        words[regs_at + 31] = 0x1300; // sp
        words[regs_at + 32] = 0x40_2000; // pc
        let mut stack = words;
        // the interrupted leaf's caller's record at 0x1400: [0, 0] (outermost)
        stack.resize(((0x1400 - sp) / 8) as usize + 2, 0);
        let r = walk(
            sp,
            &stack,
            &regs(0x40_1000, sp, 0x1800, Some(TRAMP)),
            0,
            &WithTrampoline,
        );
        let pcs: Vec<u64> = r.frames.iter().map(|f| f.pc).collect();
        assert_eq!(pcs, vec![0x40_1000, TRAMP, 0x40_2000, 0x40_3000]);
        let interrupted = &r.frames[2];
        assert_eq!(interrupted.trust, Trust::Context);
        assert!(interrupted.exact_pc, "the interrupted pc is exact");
        assert!(
            r.frames[1].exact_pc,
            "the trampoline is symbolized at its pc"
        );
        assert_eq!(interrupted.sp, Some(0x1300));
        assert_eq!(interrupted.registers.get(19), Some(0x1919));
        assert_eq!(r.frames[3].registers.get(19), Some(0x1919));

        // The same stack, but the code at x30 is not the trampoline: no signal frame.
        let r = walk(
            sp,
            &stack,
            &regs(0x40_1000, sp, 0x1800, Some(TRAMP)),
            0,
            &AllCalls,
        );
        assert!(r.frames.iter().all(|f| f.pc != 0x40_2000), "{:?}", r.frames);
    }

    #[test]
    fn a_handler_on_an_alternate_stack_returns_to_the_thread_stack() {
        // The handler runs on a signal stack at 0x9000; the interrupted frame (not a leaf:
        // x30 already reused) has sp 0x1000 on the thread's stack, and its record at
        // x29 = 0x1010 leads to 0x40_3000, whose record ends the walk.
        let alt = 0x9000u64;
        let mut alt_words = vec![0u64; 0x200 / 8 + 40];
        let at = (SIGFRAME_REGS / 8) as usize;
        alt_words[at + 29] = 0x1010;
        // x30 = 0: already reused, not a return address
        alt_words[at + 31] = 0x1000;
        alt_words[at + 32] = 0x40_2000;
        let alt_bytes = stack_bytes(&alt_words);
        let thread_bytes = stack_bytes(&[0, 0, 0x1030, 0x40_3000, 0, 0, 0, 0]);
        let mem = MemoryMap::new(vec![(0x1000, &thread_bytes[..]), (alt, &alt_bytes[..])]);
        let modules = vec![module(0x40_0000, 0x50_0000)];
        let tables = vec![None];
        let opts = WalkOptions {
            enable_scan: false,
            ..WalkOptions::default()
        };
        let ctx = WalkContext {
            memory: &mem,
            modules: &modules,
            tables: &tables,
            code: &WithTrampoline,
            options: &opts,
            pac_mask: 0,
            pac_signed_seen: None,
        };
        let r = walk_thread(&Aarch64, &ctx, &regs(0x40_1000, alt, 0, Some(TRAMP)));
        let pcs: Vec<u64> = r.frames.iter().map(|f| f.pc).collect();
        assert_eq!(pcs, vec![0x40_1000, TRAMP, 0x40_2000, 0x40_3000]);
        assert_eq!(r.frames[3].sp, Some(0x1020));
    }

    /// Code bytes: none at all (a dump without the vDSO's pages).
    struct NoCode;
    impl CodeReader for NoCode {
        fn bytes_before(&self, _addr: u64, _len: usize) -> Option<Vec<u8>> {
            None
        }
    }

    #[test]
    fn vdso_sigreturn_is_recognised_by_its_signal_frame_rule_without_code() {
        use crate::unwind::rule::{RuleRecord, Slot, UnwindSource, FLAG_SIGNAL_FRAME};
        use crate::unwind::{TableWriter, UnwindTable};
        // The vDSO at 0x5000_0000: `__kernel_rt_sigreturn` at +0x800, its FDE (a signal
        // frame: CFA = x29, x29 and x30 from the frame record) from the nop at +0x7fc.
        // Its code is not in the dump. Following that rule would give the interrupted
        // function's caller (x30 of the record); the sigcontext gives the interrupted
        // frame itself.
        let vdso = 0x5000_0000u64;
        let mut w = TableWriter::new(Arch::Aarch64);
        let mut rec = RuleRecord::new(
            UnwindSource::EhFrame,
            Slot::offset(29, 0),
            Slot::offset(0, 8),
        );
        rec.flags |= FLAG_SIGNAL_FRAME;
        rec.set_reg(Arch::Aarch64, 29, Slot::offset(0, 0));
        w.push(0x7fc, 0x808, &rec, 0);
        let table = w.finish().bytes;
        let sp = 0x1000u64;
        let mut words = vec![0u64; 0x200 / 8 + 40];
        let at = (SIGFRAME_REGS / 8) as usize;
        words[at + 29] = 0x1400;
        words[at + 30] = 0x40_3000;
        words[at + 31] = 0x1300;
        words[at + 32] = 0x40_2000;
        words.resize(((0x1400 - sp) / 8) as usize + 2, 0);
        let bytes = stack_bytes(&words);
        let mem = MemoryMap::new(vec![(sp, &bytes[..])]);
        let modules = vec![module(0x40_0000, 0x50_0000), module(vdso, vdso + 0x2000)];
        let tables = vec![
            None,
            Some(crate::walk::ModuleUnwind::Table(
                UnwindTable::open(&table).expect("the table just written opens"),
            )),
        ];
        let opts = WalkOptions {
            enable_scan: false,
            ..WalkOptions::default()
        };
        let ctx = WalkContext {
            memory: &mem,
            modules: &modules,
            tables: &tables,
            code: &NoCode,
            options: &opts,
            pac_mask: 0,
            pac_signed_seen: None,
        };
        let r = walk_thread(
            &Aarch64,
            &ctx,
            &regs(0x40_1000, sp, 0x1800, Some(vdso + 0x800)),
        );
        let pcs: Vec<u64> = r.frames.iter().map(|f| f.pc).collect();
        assert_eq!(pcs, vec![0x40_1000, vdso + 0x800, 0x40_2000, 0x40_3000]);
        assert_eq!(r.frames[2].trust, Trust::Context);
    }

    #[test]
    fn inferred_mask_follows_the_highest_module() {
        let mem = MemoryMap::default();
        let opts = WalkOptions::default();
        let tables = vec![None, None];
        let modules = vec![
            module(0x40_0000, 0x50_0000),
            module(0x000f_0000_0000_0000, 0x000f_0000_0010_0000),
        ];
        let ctx = WalkContext {
            memory: &mem,
            modules: &modules,
            tables: &tables,
            code: &AllCalls,
            options: &opts,
            pac_mask: 0,
            pac_signed_seen: None,
        };
        // 52 significant bits: bits 52.. are PAC
        assert_eq!(inferred_pac_mask(&ctx), 0xfff0_0000_0000_0000);
        assert_eq!(
            Aarch64.strip_pac(&ctx, 0x123f_0000_0000_1000),
            0x000f_0000_0000_1000
        );
        let ctx = WalkContext {
            modules: &modules[..1],
            ..ctx
        };
        assert_eq!(inferred_pac_mask(&ctx), 0xffff_0000_0000_0000);
    }

    /// Issue 35 item 9: a signed return address is one whose stripped value lies in code;
    /// an address without PAC bits, or garbage that strips to no code, is not one.
    #[test]
    fn a_signed_return_address_is_seen_and_a_plain_one_is_not() {
        let mem = MemoryMap::default();
        let opts = WalkOptions::default();
        let tables = vec![None];
        let modules = vec![module(0x40_0000, 0x50_0000)];
        for (addr, signed) in [
            (0x40_1004, false),             // no PAC bits
            (0x002a_0000_0040_1004, true),  // PAC bits over a code address
            (0x002a_0000_0090_0000, false), // PAC-like bits over no code
        ] {
            let seen = std::cell::Cell::new(false);
            let ctx = WalkContext {
                memory: &mem,
                modules: &modules,
                tables: &tables,
                code: &AllCalls,
                options: &opts,
                pac_mask: 0,
                pac_signed_seen: Some(&seen),
            };
            Aarch64.strip_pac(&ctx, addr);
            assert_eq!(seen.get(), signed, "{addr:#x}");
        }
    }

    #[test]
    fn hostile_registers_do_not_panic() {
        let bytes = stack_bytes(&[u64::MAX; 8]);
        let mem = MemoryMap::new(vec![(u64::MAX - 63, &bytes[..])]);
        let modules = vec![module(0x40_0000, 0x50_0000)];
        let tables = vec![None];
        let opts = WalkOptions::default();
        for pac_mask in [0, u64::MAX] {
            let ctx = WalkContext {
                memory: &mem,
                modules: &modules,
                tables: &tables,
                code: &AllCalls,
                options: &opts,
                pac_mask,
                pac_signed_seen: None,
            };
            let mut r = RegisterSet::new(Arch::Aarch64);
            r.set(32, u64::MAX);
            r.set(SP, u64::MAX - 7);
            r.set(X29, u64::MAX - 7);
            r.set(X30, u64::MAX);
            let w = walk_thread(&Aarch64, &ctx, &r);
            assert_eq!(w.frames.len(), 1);
        }
    }
}
