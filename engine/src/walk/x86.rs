//! x86 (32-bit): the `ebp` chain, call-instruction decoding, the `ebp` a stack scan
//! restores and sigreturn trampolines. Windows frame data (`STACK WIN`) is evaluated by
//! [`super::stack_win`] when the unwind table's rule for a pc holds such a record.
//!
//! A frame stopped at a return instruction (`ret`, `ret imm16`) with no unwind rule:
//! the return address is the word at `esp`, whatever the function's frame was (wine's
//! i386 system-call stubs, where every thread waiting in the system is stopped, have no
//! CFI and keep no `ebp` frame: the `ebp` chain would skip their callers).
//!
//! Signal frames: a handler returns to a sigreturn trampoline, the vDSO's
//! `__kernel_sigreturn`/`__kernel_rt_sigreturn` or, where the kernel gives no vDSO (QEMU's
//! user mode), glibc's own `__restore`/`__restore_rt`, which Debian's `libc6-i386`
//! describes by no CFI. Both are recognised by their code, as gdb recognises them, and the
//! interrupted registers read from the `struct sigcontext` of the signal frame on the
//! trampoline's stack.
//!
//! Windows exception dispatch: `ntdll!KiUserExceptionDispatcher`, where Windows (and wine)
//! enter user mode to dispatch an exception, is entered without a return address, the
//! `EXCEPTION_RECORD` and the interrupted `CONTEXT` pointed to by the words at `esp`; it
//! pushes both and calls `RtlDispatchException` (wine: `dispatch_exception`), so in the
//! frame that call returns to, `esp` and `esp + 4` point to them again. Its caller is the
//! context's frame, the faulting function ([`X86::caller_from_exception_context`]): what
//! WinDbg shows, where the `ebp` chain (and winedbg) go from the dispatcher straight to
//! the faulting function's caller, or read the record's pointer as a return address.

use super::arch::{ArchWalker, RecordRegisters};
use super::{Caller, Trust, WalkContext, WalkFrame};
use crate::arch::x86::Reg::{Ebp, Ebx, Edi, Eip, Esi, Esp};
use crate::dump::{Arch, RegisterSet};

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

/// The sigreturn trampolines' code: `pop %eax; mov $119, %eax; int $0x80` (sigreturn) and
/// `mov $173, %eax; int $0x80` (rt_sigreturn), the kernel's vDSO's and glibc's alike. The
/// flag: an rt frame.
const SIGRETURN_CODES: [(&[u8], bool); 2] = [
    (&[0x58, 0xb8, 0x77, 0, 0, 0, 0xcd, 0x80], false),
    (&[0xb8, 0xad, 0, 0, 0, 0xcd, 0x80], true),
];
/// Where the `struct sigcontext` starts above the trampoline's `esp` (the handler's
/// return popped `pretcode`): after the signal number in a sigreturn frame; in an rt one
/// after the signal number, the `siginfo` and `ucontext` pointers, the 128-byte
/// `siginfo` and the ucontext's `uc_flags`, `uc_link` and `uc_stack` (20 bytes).
const SIGCONTEXT: u64 = 4;
const RT_SIGCONTEXT: u64 = 12 + 128 + 20;
/// The `struct sigcontext` word of each DWARF register (`eax`…`edi`, `eip`): gs, fs, es,
/// ds, edi, esi, ebp, esp, ebx, edx, ecx, eax, trapno, err, eip.
/// `CONTEXT_i386 | CONTEXT_CONTROL`: the context holds `ebp`, `eip`, `eflags` and `esp`.
const CONTEXT_I386_CONTROL: u32 = 0x0001_0001;
/// `CONTEXT_i386 | CONTEXT_INTEGER`: and `edi`…`eax`.
const CONTEXT_I386_INTEGER: u32 = 0x0001_0002;
/// Where each DWARF register is in an x86 `CONTEXT` (bytes; `MDRawContextX86` is the same
/// layout): the integer group (`eax`…`edi`), then the control group (`ebp`, `esp`, `eip`).
const CONTEXT_INTEGER_AT: [(u16, u64); 6] =
    [(0, 176), (1, 172), (2, 168), (3, 164), (6, 160), (7, 156)];
const CONTEXT_CONTROL_AT: [(u16, u64); 3] = [(5, 180), (4, 196), (8, 184)];
/// `EXCEPTION_RECORD.ExceptionAddress`.
const RECORD_ADDRESS_AT: u64 = 12;

const SIGCONTEXT_WORDS: [(u16, u64); 9] = [
    (0, 11),
    (1, 10),
    (2, 9),
    (3, 8),
    (4, 7),
    (5, 6),
    (6, 5),
    (7, 4),
    (8, 14),
];

impl X86 {
    /// Whether `pc` is a sigreturn trampoline, and whether an rt one.
    fn trampoline_kind(ctx: &WalkContext<'_, '_>, pc: u64) -> Option<bool> {
        SIGRETURN_CODES.iter().find_map(|&(code, rt)| {
            let len = code.len();
            let end = pc.checked_add(len as u64)?;
            let bytes = ctx.code.bytes_before(end, len)?;
            (bytes == code).then_some(rt)
        })
    }
}

impl X86 {
    /// The frame an exception interrupted, when `callee` is ntdll's
    /// `KiUserExceptionDispatcher` after its call (see the module comment): read from the
    /// `CONTEXT` at the word `esp + 4` points to. Taken only when the module is
    /// `ntdll.dll`, the words at `esp + 8` and `esp + 12` repeat those at `esp` and `esp +
    /// 4` (the dispatcher's arguments above the copies it pushed), the context says it
    /// holds the control registers, and the
    /// `EXCEPTION_RECORD` at the word at `esp` names the context's `eip` as the
    /// exception's address (a fault's instruction; `RaiseException`'s return address,
    /// which `RtlRaiseException` gives both). Its pc is exact.
    fn caller_from_exception_context(
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
    ) -> Option<Caller> {
        let module = ctx.modules.get(ctx.module_for(callee.pc)?)?;
        if !module.name.eq_ignore_ascii_case("ntdll.dll") || callee.exact_pc {
            return None;
        }
        let sp = callee.sp?;
        let stack = |at: u64| Some(u64::from(ctx.memory.read_u32(sp.checked_add(at)?)?));
        let (record, context) = (stack(0)?, stack(4)?);
        // the dispatcher's own arguments above the copies it pushed: another ntdll
        // function calling with (record, context) has no such second pair
        if stack(8)? != record || stack(12)? != context {
            return None;
        }
        let flags = ctx.memory.read_u32(context)?;
        if flags & CONTEXT_I386_CONTROL != CONTEXT_I386_CONTROL {
            return None;
        }
        let word = |at: u64| Some(u64::from(ctx.memory.read_u32(context.checked_add(at)?)?));
        let eip = word(184)?;
        let address = u64::from(
            ctx.memory
                .read_u32(record.checked_add(RECORD_ADDRESS_AT)?)?,
        );
        if address != eip {
            return None;
        }
        let mut regs = RegisterSet::new(Arch::X86);
        for (reg, at) in CONTEXT_CONTROL_AT {
            regs.set(reg, word(at)?);
        }
        if flags & CONTEXT_I386_INTEGER == CONTEXT_I386_INTEGER {
            for (reg, at) in CONTEXT_INTEGER_AT {
                regs.set(reg, word(at)?);
            }
        }
        Some(Caller {
            regs,
            trust: Trust::Context,
            source: None,
            exact_pc: true,
        })
    }

    /// The caller of a frame whose pc is a return instruction, `ret` (`c3`) or
    /// `ret imm16` (`c2 iw`, a stdcall function's, which pops its arguments): the
    /// function has undone its frame, so `eip` is the word at `esp` and the caller's `esp`
    /// is past it and the `imm16` bytes; `ebp`, `ebx`, `esi` and `edi` are already the
    /// caller's. Taken, as gdb's i386 epilogue unwinder takes it, only where the word is a
    /// return address after a call in a module's code. Tried before the `ebp` chain: a
    /// function at its `ret` may have kept no frame record (wine's system-call stubs,
    /// `mov $n,%eax; mov $dispatcher,%edx; call *%edx; ret $args`, stopped at the `ret`),
    /// and `ebp` is then some caller's, which the chain would skip to.
    fn caller_at_return(&self, ctx: &WalkContext<'_, '_>, callee: &WalkFrame) -> Option<Caller> {
        let pc = callee.pc;
        let popped = match ctx.code.bytes_before(pc.checked_add(1)?, 1)?.as_slice() {
            [0xc3] => 0,
            [0xc2] => {
                let code = ctx.code.bytes_before(pc.checked_add(3)?, 3)?;
                u64::from(u16::from_le_bytes([*code.get(1)?, *code.get(2)?]))
            }
            _ => return None,
        };
        let esp = callee.sp?;
        let ra = u64::from(ctx.memory.read_u32(esp)?);
        if !ctx.is_return_code(ra) {
            return None;
        }
        let code = ctx.code.bytes_before(ra, self.call_check_len())?;
        if !self.is_call_before(&code) {
            return None;
        }
        let mut regs = RegisterSet::new(Arch::X86);
        regs.set(Eip, ra);
        regs.set(Esp, esp.checked_add(4)?.checked_add(popped)?);
        super::arch::inherit(
            &callee.registers,
            &mut regs,
            &[Ebp.dwarf(), Ebx.dwarf(), Esi.dwarf(), Edi.dwarf()],
        );
        Some(Caller {
            regs,
            trust: Trust::Fp,
            source: None,
            exact_pc: false,
        })
    }
}

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
        if let Some(c) = self.caller_at_return(ctx, callee) {
            return Some(c);
        }
        let ebp = callee.registers.get(Ebp)?;
        super::arch::caller_from_record(self, ctx, callee, ebp, &RECORD)
    }

    fn call_check_len(&self) -> usize {
        7
    }

    fn is_signal_trampoline(&self, ctx: &WalkContext<'_, '_>, pc: u64) -> bool {
        Self::trampoline_kind(ctx, pc).is_some()
    }

    /// The interrupted frame: `eax`…`edi` and `eip` from the `struct sigcontext` of the
    /// signal frame at the trampoline's `esp` (as gdb's `i386_linux_sigcontext_addr`
    /// finds it); its pc is exact.
    fn caller_from_signal_frame(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
    ) -> Option<Caller> {
        let Some(rt) = Self::trampoline_kind(ctx, callee.pc) else {
            return Self::caller_from_exception_context(ctx, callee);
        };
        let sigcontext = callee
            .sp?
            .checked_add(if rt { RT_SIGCONTEXT } else { SIGCONTEXT })?;
        let mut regs = RegisterSet::new(Arch::X86);
        for (reg, word) in SIGCONTEXT_WORDS {
            let value = ctx.memory.read_u32(sigcontext.checked_add(4 * word)?)?;
            regs.set(reg, u64::from(value));
        }
        Some(Caller {
            regs,
            trust: Trust::Context,
            source: None,
            exact_pc: true,
        })
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

    /// glibc's sigreturn restorers at 0x40_3000 (`__restore`) and 0x40_3010
    /// (`__restore_rt`); before every other address, a `call rel32`.
    struct Restorers;
    impl CodeReader for Restorers {
        fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
            let code: &[u8] = match addr.checked_sub(len as u64)? {
                0x40_3000 => &[0x58, 0xb8, 0x77, 0, 0, 0, 0xcd, 0x80],
                0x40_3010 => &[0xb8, 0xad, 0, 0, 0, 0xcd, 0x80],
                _ => &[0, 0, 0xe8, 0, 0, 0, 0],
            };
            Some(code.get(..len)?.to_vec())
        }
    }

    /// A handler at 0x40_1000 whose `ebp` record returns to the trampoline at `tramp`;
    /// the signal frame at 0x1008 holds the interrupted registers in its sigcontext at
    /// `sigcontext`. Returns the walk's frames.
    fn signal_walk(tramp: u64, sigcontext: u64) -> WalkResult {
        let mut stack = vec![0u32; 0x80];
        stack[1] = u32::try_from(tramp).unwrap();
        let sc = usize::try_from((sigcontext - 0x1000) / 4).unwrap();
        stack[sc + 4] = 0x77; // edi
        stack[sc + 6] = 0x1180; // ebp
        stack[sc + 7] = 0x1100; // esp
        stack[sc + 8] = 0x88; // ebx
        stack[sc + 11] = 0x99; // eax
        stack[sc + 14] = 0x40_2000; // eip: the fault
        let opts = WalkOptions {
            enable_scan: false,
            ..WalkOptions::default()
        };
        let mut regs = RegisterSet::new(Arch::X86);
        regs.set(Eip, 0x40_1000);
        regs.set(Esp, 0x1000);
        regs.set(Ebp, 0x1000);
        walk_code(0x1000, &stack, None, &opts, &regs, &Restorers)
    }

    fn assert_interrupted(r: &WalkResult, tramp: u64) {
        let pcs: Vec<u64> = r.frames.iter().map(|f| f.pc).collect();
        assert_eq!(pcs[..3], [0x40_1000, tramp, 0x40_2000], "{:?}", r.frames);
        let interrupted = &r.frames[2];
        assert!(interrupted.exact_pc);
        assert_eq!(interrupted.trust, Trust::Context);
        assert_eq!(interrupted.sp, Some(0x1100));
        assert_eq!(interrupted.registers.get(Ebp), Some(0x1180));
        assert_eq!(interrupted.registers.get(Ebx), Some(0x88));
        assert_eq!(interrupted.registers.get(Edi), Some(0x77));
    }

    #[test]
    fn sigreturn_frame_restores_the_interrupted_registers() {
        // sigreturn: the signal number at esp, then the sigcontext
        assert_interrupted(&signal_walk(0x40_3000, 0x100c), 0x40_3000);
    }

    #[test]
    fn rt_sigreturn_frame_restores_the_interrupted_registers() {
        // rt_sigreturn: signal number, two pointers, siginfo (128), ucontext's first 20
        assert_interrupted(&signal_walk(0x40_3010, 0x1008 + 12 + 128 + 20), 0x40_3010);
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

    /// wine's i386 system-call stub at 0x40_5000 (`mov $0x32,%eax; mov $0x40_6000,%edx;
    /// call *%edx; ret $8`, the `ret` at 0x40_500c), a plain `ret` at 0x40_5020; before
    /// every other address, a `call rel32`.
    struct Stubs;
    impl CodeReader for Stubs {
        fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
            let stub: [u8; 16] = [
                0xb8, 0x32, 0, 0, 0, 0xba, 0, 0x60, 0x40, 0, 0xff, 0xd2, 0xc2, 8, 0, 0x90,
            ];
            let start = addr.checked_sub(len as u64)?;
            if (0x40_5000..0x40_5010).contains(&start) {
                let at = usize::try_from(start - 0x40_5000).ok()?;
                return Some(stub.get(at..at + len)?.to_vec());
            }
            if start == 0x40_5020 {
                return Some([0xc3, 0x90, 0x90].get(..len)?.to_vec());
            }
            let mut code = vec![0x90; len];
            code[len.checked_sub(5)?] = 0xe8;
            Some(code)
        }
    }

    #[test]
    fn at_a_return_instruction_the_caller_is_the_word_at_esp() {
        // a thread stopped at the stub's `ret $8`: its return address at esp, then its 8
        // bytes of arguments; ebp (0x1020) is an outer frame's, whose record names
        // 0x40_2000: the ebp chain would skip the stub's caller
        let stack = [0x40_1234, 1, 2, 0, 0, 0, 0, 0, 0x1040, 0x40_2000, 0, 0];
        let opts = WalkOptions {
            enable_scan: false,
            ..WalkOptions::default()
        };
        let mut regs = RegisterSet::new(Arch::X86);
        regs.set(Eip, 0x40_500c);
        regs.set(Esp, 0x1000);
        regs.set(Ebp, 0x1020);
        regs.set(Esi, 0x55);
        let r = walk_code(0x1000, &stack, None, &opts, &regs, &Stubs);
        let frames: Vec<(u64, Option<u64>, Trust)> =
            r.frames.iter().map(|f| (f.pc, f.sp, f.trust)).collect();
        assert_eq!(
            frames[..3],
            [
                (0x40_500c, Some(0x1000), Trust::Context),
                (0x40_1234, Some(0x100c), Trust::Fp),
                (0x40_2000, Some(0x1028), Trust::Fp),
            ]
        );
        assert_eq!(r.frames[1].registers.get(Ebp), Some(0x1020));
        assert_eq!(r.frames[1].registers.get(Esi), Some(0x55));
        // a plain `ret` pops the return address only
        regs.set(Eip, 0x40_5020);
        let r = walk_code(0x1000, &stack, None, &opts, &regs, &Stubs);
        assert_eq!(r.frames[1].pc, 0x40_1234);
        assert_eq!(r.frames[1].sp, Some(0x1004));
        // a word at esp that follows no call is no return address: the ebp chain
        let stack = [0x1234, 1, 2, 0, 0, 0, 0, 0, 0x1040, 0x40_2000, 0, 0];
        regs.set(Eip, 0x40_500c);
        let r = walk_code(0x1000, &stack, None, &opts, &regs, &Stubs);
        assert_eq!(r.frames[1].pc, 0x40_2000);
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

    /// ntdll at 0x7b00_0000 (`name`), the dispatcher's frame at pc 0x7b00_1005 with its
    /// stack at 0x1000: `words` from there. Returns the caller the exception context
    /// gives, if any.
    fn dispatcher_caller(name: &str, words: &[u32]) -> Option<Caller> {
        let bytes = words32(words);
        let mem = MemoryMap::new(vec![(0x1000, &bytes[..])]);
        let mut ntdll = module(0x7b00_0000, 0x7b10_0000);
        ntdll.name = name.into();
        let modules = vec![ntdll];
        let tables = vec![None];
        let opts = WalkOptions::default();
        let ctx = WalkContext {
            memory: &mem,
            modules: &modules,
            tables: &tables,
            code: &NoCode,
            options: &opts,
            pac_mask: 0,
            pac_signed_seen: None,
        };
        let callee = WalkFrame {
            pc: 0x7b00_1005,
            sp: Some(0x1000),
            trust: Trust::Cfi,
            unwind_source: None,
            module: Some(0),
            exact_pc: false,
            registers: crate::dump::FrameRegisters::none(Arch::X86),
        };
        X86::caller_from_exception_context(&ctx, &callee)
    }

    /// The dispatcher's stack: the copies of the record and context pointers it pushed,
    /// the same two it was entered with, the `EXCEPTION_RECORD` at 0x1100 (its address
    /// at +12) and the `CONTEXT` at 0x1200.
    fn dispatcher_stack(flags: u32, address: u32) -> Vec<u32> {
        let mut w = vec![0u32; 0x200];
        w[..4].copy_from_slice(&[0x1100, 0x1200, 0x1100, 0x1200]);
        w[0x100 / 4 + 3] = address;
        let context = 0x200 / 4;
        w[context] = flags;
        for (at, value) in [
            (156, 7),         // edi
            (164, 3),         // ebx
            (176, 1),         // eax
            (180, 0x1f00),    // ebp
            (184, 0x40_2000), // eip
            (196, 0x1e00),    // esp
        ] {
            w[context + at / 4] = value;
        }
        w
    }

    #[test]
    fn the_exception_dispatcher_returns_to_the_context_it_was_given() {
        let c = dispatcher_caller("NTDLL.DLL", &dispatcher_stack(0x1_0007, 0x40_2000)).unwrap();
        assert_eq!(c.trust, Trust::Context);
        assert!(c.exact_pc);
        for (reg, value) in [
            (Eip, 0x40_2000),
            (Esp, 0x1e00),
            (Ebp, 0x1f00),
            (Ebx, 3),
            (Edi, 7),
        ] {
            assert_eq!(c.regs.get(reg), Some(value), "{reg:?}");
        }
        // the control group alone: no integer registers
        let c = dispatcher_caller("ntdll.dll", &dispatcher_stack(0x1_0001, 0x40_2000)).unwrap();
        assert_eq!(c.regs.get(Eip), Some(0x40_2000));
        assert_eq!(c.regs.get(Ebx), None);
    }

    #[test]
    fn only_the_dispatcher_of_ntdll_with_an_agreeing_record_gives_a_context() {
        let good = dispatcher_stack(0x1_0007, 0x40_2000);
        assert!(
            dispatcher_caller("kernel32.dll", &good).is_none(),
            "not ntdll"
        );
        // a function of ntdll calling with (record, context): no second pair above
        let mut call = good.clone();
        call[2] = 0x1234;
        assert!(dispatcher_caller("ntdll.dll", &call).is_none(), "one pair");
        // a context without its control registers, or a record of another address
        assert!(dispatcher_caller("ntdll.dll", &dispatcher_stack(0x1_0002, 0x40_2000)).is_none());
        assert!(dispatcher_caller("ntdll.dll", &dispatcher_stack(0x1_0007, 0x40_2001)).is_none());
        // pointers outside the dump
        let mut away = good;
        away[1] = 0xdead_0000;
        away[3] = 0xdead_0000;
        assert!(dispatcher_caller("ntdll.dll", &away).is_none());
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
