//! x86 (32-bit): the `ebp` chain, call-instruction decoding and the `ebp` a stack scan
//! restores. Windows frame data (`STACK WIN`) is evaluated by [`super::stack_win`] when
//! the unwind table's rule for a pc holds such a record.

use super::arch::{ArchWalker, RecordRegisters};
use super::{Caller, WalkContext, WalkFrame};
use crate::arch::x86::Reg::{Ebp, Ebx, Edi, Eip, Esi, Esp};
use crate::dump::Arch;

/// The `ebp` chain's registers; ebx, esi and edi pass to the caller unchanged.
const RECORD: RecordRegisters = RecordRegisters {
    pc: Eip.dwarf(),
    sp: Esp.dwarf(),
    fp: Ebp.dwarf(),
    inherited: &[Ebx.dwarf(), Esi.dwarf(), Edi.dwarf()],
};

/// The x86 walker.
pub struct X86;

/// Largest gap between a scanned caller's stack pointer and the `ebp` restored for it
/// (Breakpad's `kMaxReasonableGapBetweenFrames`).
const MAX_FRAME_GAP: u64 = 128 * 1024;

impl ArchWalker for X86 {
    fn arch(&self) -> Arch {
        Arch::X86
    }

    /// `(esp, ebp, eip) = (ebp + 8, *ebp, *(ebp + 4))`.
    fn caller_by_fp(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
        first: bool,
    ) -> Option<Caller> {
        if let Some(c) = super::arch::caller_of_call_into_nowhere(self, ctx, callee, first) {
            return Some(c);
        }
        let ebp = callee.registers.get(Ebp)?;
        super::arch::caller_from_record(self, ctx, callee, ebp, &RECORD)
    }

    fn call_check_len(&self) -> usize {
        7
    }

    fn is_call_before(&self, code: &[u8]) -> bool {
        super::x86_64::is_call_before(code)
    }

    /// Breakpad's x86 scan: the caller's `ebp` was pushed just below the return address
    /// when the word there points above it, within [`MAX_FRAME_GAP`] of the caller's
    /// stack pointer; else the callee's `ebp` is kept.
    fn after_scan(&self, ctx: &WalkContext<'_, '_>, caller: &mut Caller) {
        let Some(esp) = caller.regs.get(Esp) else {
            return;
        };
        let Some(slot) = esp.checked_sub(8) else {
            return;
        };
        if let Some(ebp) = ctx.memory.read_u32(slot).map(u64::from) {
            if ebp > slot && ebp.wrapping_sub(esp) <= MAX_FRAME_GAP {
                caller.regs.set(Ebp, ebp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::dump::MemoryMap;
    use crate::dump::RegisterSet;
    use crate::walk::tests::module_at as module;
    use crate::walk::Trust;
    use crate::walk::{walk_thread, CodeReader, EndReason, ModuleUnwind, WalkOptions, WalkResult};

    struct NoCode;
    impl CodeReader for NoCode {
        fn bytes_before(&self, _addr: u64, _len: usize) -> Option<Vec<u8>> {
            None
        }
    }

    fn words32(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// Walks `regs` over `stack` (at `stack_at`) in one module at 0x40_0000 whose unwind
    /// data is `table`.
    fn walk(
        stack_at: u64,
        stack: &[u32],
        table: Option<ModuleUnwind<'_>>,
        opts: &WalkOptions,
        regs: &RegisterSet,
    ) -> WalkResult {
        walk_code(stack_at, stack, table, opts, regs, &NoCode)
    }

    /// Code in which every address follows a `call` (`e8 rel32`): a scan takes any word
    /// in the module.
    struct CallsEverywhere;
    impl CodeReader for CallsEverywhere {
        fn bytes_before(&self, _addr: u64, len: usize) -> Option<Vec<u8>> {
            let mut code = vec![0x90; len];
            let at = len.checked_sub(5)?;
            code[at] = 0xe8;
            Some(code)
        }
    }

    /// [`walk`] with the module's code read by `code`.
    fn walk_code(
        stack_at: u64,
        stack: &[u32],
        table: Option<ModuleUnwind<'_>>,
        opts: &WalkOptions,
        regs: &RegisterSet,
        code: &dyn CodeReader,
    ) -> WalkResult {
        let bytes = words32(stack);
        let mem = MemoryMap::new(vec![(stack_at, &bytes[..])]);
        let modules = vec![module(0x40_0000, 0x50_0000)];
        let tables = vec![table];
        let ctx = WalkContext {
            memory: &mem,
            modules: &modules,
            tables: &tables,
            code,
            options: opts,
            pac_mask: 0,
            pac_signed_seen: None,
        };
        walk_thread(&X86, &ctx, regs)
    }

    #[test]
    fn ebp_chain_to_stack_end() {
        // stack at 0x1000: frame0 ebp=0x1008 -> [0x1018, ret1]; 0x1018 -> [0, 0x402000]
        let stack = [0, 0, 0x1018, 0x40_1234, 0, 0, 0, 0x40_2000];
        let opts = WalkOptions {
            enable_scan: false,
            ..WalkOptions::default()
        };
        let mut regs = RegisterSet::new(Arch::X86);
        regs.set(Eip, 0x40_1000);
        regs.set(Esp, 0x1000);
        regs.set(Ebp, 0x1008);
        let r = walk(0x1000, &stack, None, &opts, &regs);
        let pcs: Vec<u64> = r.frames.iter().map(|f| f.pc).collect();
        assert_eq!(pcs, vec![0x40_1000, 0x40_1234, 0x40_2000]);
        assert_eq!(r.frames[1].trust, Trust::Fp);
        assert_eq!(r.frames[1].sp, Some(0x1010));
        assert_eq!(r.frames[2].sp, Some(0x1020));
        assert_eq!(r.end, EndReason::StackEnd);
    }

    #[test]
    fn a_zero_frame_record_ends_the_walk_before_any_scan() {
        // frame 1's ebp (0x1010) points at the chain's terminator, a frame record of
        // zeros, as Windows' RtlUserThreadStart leaves it; above it lies a stale word in
        // the module (the thread's start address), which a scan would take
        let stack = [0, 0, 0x1010, 0x40_1234, 0, 0, 0x40_2000, 0];
        let mut regs = RegisterSet::new(Arch::X86);
        regs.set(Eip, 0x40_1000);
        regs.set(Esp, 0x1000);
        regs.set(Ebp, 0x1008);
        let opts = WalkOptions::default();
        let r = walk_code(0x1000, &stack, None, &opts, &regs, &CallsEverywhere);
        let pcs: Vec<u64> = r.frames.iter().map(|f| f.pc).collect();
        assert_eq!(pcs, vec![0x40_1000, 0x40_1234], "{:?}", r.end_detail);
        assert_eq!(r.end, EndReason::PcZero);
        // a record whose saved ebp is not 0 is no terminator: the scan goes on
        let stack = [0, 0, 0x1010, 0x40_1234, 0x1020, 0, 0x40_2000, 0];
        let r = walk_code(0x1000, &stack, None, &opts, &regs, &CallsEverywhere);
        let pcs: Vec<u64> = r.frames.iter().map(|f| f.pc).collect();
        assert_eq!(pcs[..3], [0x40_1000, 0x40_1234, 0x40_2000]);
        // frame 0's own ebp at a record of zeros (a function without a frame pointer
        // called from the outermost frame): its return address is still scanned for
        let stack = [0x40_1234, 0, 0, 0];
        regs.set(Ebp, 0x1004);
        let r = walk_code(0x1000, &stack, None, &opts, &regs, &CallsEverywhere);
        let pcs: Vec<u64> = r.frames.iter().map(|f| f.pc).collect();
        assert_eq!(pcs[..2], [0x40_1000, 0x40_1234]);
    }

    /// Walks `regs` over `stack` (at 0x1000) in one module at 0x40_0000 whose `.sym`
    /// file holds `records` (offsets from the module's base).
    fn walk_sym(records: &str, stack: &[u32], regs: &RegisterSet) -> Vec<(u64, u64, Trust)> {
        let sym = format!("MODULE windows x86 0123456789ABCDEF0123456789ABCDEF1 t.pdb\n{records}");
        let built = crate::breakpad::unwind::build_from_breakpad(sym.as_bytes()).unwrap();
        let table = crate::unwind::UnwindTable::open(&built.bytes).unwrap();
        let opts = WalkOptions {
            enable_scan: false,
            enable_fp: false,
            ..WalkOptions::default()
        };
        let r = walk(0x1000, stack, Some(ModuleUnwind::Table(table)), &opts, regs);
        r.frames
            .iter()
            .map(|f| (f.pc, f.sp.unwrap_or(0), f.trust))
            .collect()
    }

    #[test]
    fn frame_data_program_and_fpo_records_with_callee_parameters() {
        // frame 0 at +0x1004 has an ebp frame (FrameData program); its caller at +0x2010
        // an FPO frame without base pointer: 8 bytes of locals, 4 of saved registers,
        // and it pushed 8 bytes of parameters for frame 0 (frame 0's parameter size)
        let records = "STACK WIN 4 1000 20 3 0 8 0 0 0 1 \
                       $T0 $ebp = $eip $T0 4 + ^ = $ebp $T0 ^ = $esp $T0 8 + =\n\
                       STACK WIN 0 2000 40 0 0 0 4 8 0 0 0\n";
        let stack = [
            0,
            0,
            0,
            0,           // 0x1000: frame 0's locals
            0x1fff_0000, // 0x1010: saved ebp (the caller's ebp, not a pointer here)
            0x40_2010,   // 0x1014: return address into the FPO function
            7,
            8, // 0x1018: the 8 bytes of parameters frame 0 takes
            0,
            0,         // 0x1020: the FPO function's locals
            0,         // 0x1028: its saved register
            0x40_3000, // 0x102c: its return address
            0,
        ];
        let mut regs = RegisterSet::new(Arch::X86);
        regs.set(Eip, 0x40_1004);
        regs.set(Esp, 0x1000);
        regs.set(Ebp, 0x1010);
        let frames = walk_sym(records, &stack, &regs);
        assert_eq!(
            frames,
            vec![
                (0x40_1004, 0x1000, Trust::Context),
                (0x40_2010, 0x1018, Trust::Cfi),
                (0x40_3000, 0x1030, Trust::Cfi),
            ]
        );
    }

    #[test]
    fn a_failing_program_gives_no_frame_data_caller() {
        let records = "STACK WIN 4 1000 20 3 0 0 0 0 0 1 $eip $T9 ^ = $esp $esp 4 + =\n";
        let mut regs = RegisterSet::new(Arch::X86);
        regs.set(Eip, 0x40_1004);
        regs.set(Esp, 0x1000);
        regs.set(Ebp, 0x1010);
        let frames = walk_sym(records, &[0x40_2010, 0, 0, 0], &regs);
        assert_eq!(frames.len(), 1, "{frames:?}");
    }

    #[test]
    fn hostile_registers_do_not_panic() {
        let mut regs = RegisterSet::new(Arch::X86);
        regs.set(Eip, 0xffff_ffff);
        regs.set(Esp, 0xffff_fffc);
        regs.set(Ebp, 0xffff_fffc);
        let r = walk(
            0xffff_ffe0,
            &[u32::MAX; 8],
            None,
            &WalkOptions::default(),
            &regs,
        );
        assert_eq!(r.frames.len(), 1);
    }
}
