//! x86_64: the frame-pointer chain and call-instruction decoding.

use super::arch::{ArchWalker, RecordRegisters};
use super::{Caller, WalkContext, WalkFrame};
use crate::arch::x86_64::Reg::{Rbp, Rbx, Rip, Rsp, R12, R13, R14, R15};
use crate::dump::Arch;

/// The `rbp` chain's registers; rbx and r12–r15 pass to the caller unchanged.
const RECORD: RecordRegisters = RecordRegisters {
    pc: Rip.dwarf(),
    sp: Rsp.dwarf(),
    fp: Rbp.dwarf(),
    inherited: &[
        Rbx.dwarf(),
        R12.dwarf(),
        R13.dwarf(),
        R14.dwarf(),
        R15.dwarf(),
    ],
};

/// The x86_64 walker.
pub struct X86_64;

impl ArchWalker for X86_64 {
    fn arch(&self) -> Arch {
        Arch::X86_64
    }

    /// `(rsp, rbp, rip) = (rbp + 16, *rbp, *(rbp + 8))`.
    fn caller_by_fp(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
        first: bool,
    ) -> Option<Caller> {
        if let Some(c) = super::arch::caller_of_call_into_nowhere(self, ctx, callee, first) {
            return Some(c);
        }
        let rbp = callee.registers.get(Rbp)?;
        super::arch::caller_from_record(self, ctx, callee, rbp, &RECORD)
    }

    fn call_check_len(&self) -> usize {
        7
    }

    /// `call rel32` (E8 xx xx xx xx) or one of the `FF /2` indirect call forms.
    fn is_call_before(&self, code: &[u8]) -> bool {
        is_call_before(code)
    }
}

/// Whether `code` ends with a call instruction: `call rel32` (E8 xx xx xx xx) or one of
/// the `FF /2` indirect call forms. The encodings are the same in 32-bit code (x86).
pub(crate) fn is_call_before(code: &[u8]) -> bool {
    let n = code.len();
    if n >= 5 && code[n - 5] == 0xe8 {
        return true;
    }
    // FF /2: call r/m64. ModRM reg field = 2. Lengths 2 (reg/[reg]), 3 (disp8 or SIB),
    // 4 (SIB + disp8), 6 (disp32 / rip-relative), 7 (SIB + disp32); an optional REX
    // prefix adds one byte and is covered by the shorter forms' checks.
    for len in [2usize, 3, 4, 6, 7] {
        if n < len {
            continue;
        }
        let op = code[n - len];
        let modrm = code[n - len + 1];
        if op != 0xff || (modrm >> 3) & 7 != 2 {
            continue;
        }
        let md = modrm >> 6;
        let rm = modrm & 7;
        let sib = rm == 4 && md != 3;
        let disp = match md {
            0 if rm == 5 => 4,
            0 if sib && n - len + 2 < n && code[n - len + 2] & 7 == 5 => 4,
            0 => 0,
            1 => 1,
            2 => 4,
            _ => 0,
        };
        if 2 + usize::from(sib) + disp == len {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dump::MemoryMap;
    use crate::dump::RegisterSet;
    use crate::walk::tests::{module_at as module, stack_bytes};
    use crate::walk::Trust;
    use crate::walk::{walk_thread, CodeReader, EndReason, WalkOptions};

    struct NoCode;
    impl CodeReader for NoCode {
        fn bytes_before(&self, _addr: u64, _len: usize) -> Option<Vec<u8>> {
            None
        }
    }

    #[test]
    fn call_decoding() {
        let x = X86_64;
        assert!(x.is_call_before(&[0x90, 0x90, 0xe8, 1, 2, 3, 4]));
        assert!(x.is_call_before(&[0, 0, 0, 0, 0, 0xff, 0xd0])); // call *%rax
        assert!(x.is_call_before(&[0, 0, 0, 0, 0, 0x41, 0xff, 0xd4][1..])); // call *%r12
        assert!(x.is_call_before(&[0, 0xff, 0x15, 1, 2, 3, 4])); // call *rel(%rip)
        assert!(x.is_call_before(&[0, 0, 0, 0, 0xff, 0x50, 0x10])); // call *0x10(%rax)
        assert!(!x.is_call_before(&[0, 0, 0, 0, 0, 0x89, 0xc7])); // mov
        assert!(!x.is_call_before(&[]));
    }

    #[test]
    fn frame_pointer_chain_to_stack_end() {
        // stack at 0x1000: frame0 rbp=0x1010 -> [0x1030, ret1]; 0x1030 -> [0, 0]
        let base = 0x1000u64;
        let words = [0u64, 0, 0x1030, 0x40_1234, 0, 0, 0, 0x40_2000];
        let bytes = stack_bytes(&words);
        let mem = MemoryMap::new(vec![(base, &bytes[..])]);
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
            code: &NoCode,
            options: &opts,
            pac_mask: 0,
            pac_signed_seen: None,
        };
        let mut regs = RegisterSet::new(Arch::X86_64);
        regs.set(16, 0x40_1000);
        regs.set(7, 0x1000);
        regs.set(6, 0x1010);
        let r = walk_thread(&X86_64, &ctx, &regs);
        let pcs: Vec<u64> = r.frames.iter().map(|f| f.pc).collect();
        assert_eq!(pcs, vec![0x40_1000, 0x40_1234, 0x40_2000]);
        assert_eq!(r.frames[1].trust, Trust::Fp);
        assert_eq!(r.frames[1].sp, Some(0x1020));
        assert_eq!(r.frames[2].sp, Some(0x1040));
        // frame 2's rbp is 0 and its sp is the top of the captured stack
        assert_eq!(r.end, EndReason::StackEnd);
    }

    #[test]
    fn hostile_registers_do_not_panic() {
        let bytes = stack_bytes(&[u64::MAX; 8]);
        let mem = MemoryMap::new(vec![(u64::MAX - 63, &bytes[..])]);
        let modules = vec![module(0x40_0000, 0x50_0000)];
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
        let mut regs = RegisterSet::new(Arch::X86_64);
        regs.set(16, u64::MAX);
        regs.set(7, u64::MAX - 7);
        regs.set(6, u64::MAX - 7);
        let r = walk_thread(&X86_64, &ctx, &regs);
        assert_eq!(r.frames.len(), 1);
    }
}
