//! The crashing instruction, decoded (x86_64): its text, and the memory it reads or
//! writes, at the addresses the crashed thread's registers give. A person reading
//! `SIGSEGV at 0x18` wants to know which pointer was null and whether the code was
//! reading or writing; a general-protection fault reports no address at all, and only
//! the instruction's operands say which non-canonical pointer it used.
//!
//! Decoded with yaxpeax-x86, the disassembler rust-minidump uses, so the text reads as
//! minidump-stackwalk's `crash_info.instruction` does. The code bytes come from the dump
//! (a minidump holds the memory around the crashing pc) or else from the module's file.
//! Which operand is written follows the instruction's kind where that is certain (moves,
//! arithmetic on memory, pushes, pops, calls and returns); other instructions' accesses
//! are listed without saying which way they go.

use std::collections::BTreeMap;

use yaxpeax_x86::amd64::{InstDecoder, Instruction, Opcode, Operand, RegSpec};

use crate::dump::{Arch, Dump};
use crate::report::{AccessKind, Addr, CrashInstruction, MemoryAccess};

use crate::tables::Loaded;

/// Longest x86 instruction.
const MAX_LEN: usize = 15;

/// The crashed thread's instruction at `pc`, decoded, with its memory accesses computed
/// from `registers` (the thread's context at the fault, by the report's names).
pub(super) fn crashing_instruction(
    dump: &Dump<'_>,
    loaded: &[Loaded],
    pc: u64,
    registers: &BTreeMap<String, Addr>,
) -> Option<CrashInstruction> {
    if dump.arch != Arch::X86_64 {
        return None;
    }
    let bytes = crate::tables::read_image(dump, loaded, pc, MAX_LEN)?;
    let inst = InstDecoder::default().decode_slice(bytes).ok()?;
    let len = yaxpeax_arch::LengthedInstruction::len(&inst).to_const();
    let regs = Registers {
        values: registers,
        next_pc: pc.checked_add(len)?,
    };
    Some(CrashInstruction {
        text: inst.to_string(),
        accesses: accesses(&inst, &regs),
        jump: jump(&inst, &regs, |a| dump.memory.read_u64(a)).map(Addr),
    })
}

/// Where a call, jump or return sends the pc: a register operand's value, the pointer a
/// memory operand holds (`read` reads the dump), the return address at the stack
/// pointer. `None` for other instructions, conditional jumps and relative targets.
fn jump(
    inst: &Instruction,
    regs: &Registers<'_>,
    read: impl Fn(u64) -> Option<u64>,
) -> Option<u64> {
    match inst.opcode() {
        Opcode::CALL | Opcode::CALLF | Opcode::JMP | Opcode::JMPF => match inst.operand(0) {
            Operand::Register { reg } => regs.get(reg),
            operand if operand.is_memory() => read(address_of(&operand, regs)?.0),
            _ => None,
        },
        Opcode::RETURN | Opcode::RETF => read(regs.get(RegSpec::rsp())?),
        _ => None,
    }
}

/// The register values an address is computed from.
struct Registers<'r> {
    values: &'r BTreeMap<String, Addr>,
    /// `rip` as an operand means the next instruction's address.
    next_pc: u64,
}

impl Registers<'_> {
    fn get(&self, reg: RegSpec) -> Option<u64> {
        let name = reg.name();
        if name == "rip" {
            return Some(self.next_pc);
        }
        let read = |n: &str| self.values.get(n).map(|v| v.get());
        if let Some(v) = read(name) {
            return Some(v);
        }
        // a 32-bit register in an address (an address-size prefix): the low half
        let wide = match name {
            "eax" => "rax",
            "ebx" => "rbx",
            "ecx" => "rcx",
            "edx" => "rdx",
            "esi" => "rsi",
            "edi" => "rdi",
            "ebp" => "rbp",
            "esp" => "rsp",
            n => {
                let n = n.strip_suffix('d')?;
                return read(n).map(|v| v & 0xffff_ffff);
            }
        };
        read(wide).map(|v| v & 0xffff_ffff)
    }
}

/// Which way an instruction moves its `index`th operand's memory, where that is certain.
fn direction(op: Opcode, index: u8) -> Option<AccessKind> {
    use Opcode::*;
    match (op, index) {
        (MOV | MOVAPS | MOVUPS, 0) | (POP, 0) => Some(AccessKind::Write),
        (MOV | MOVAPS | MOVUPS, 1) | (ADD | SUB, 1) => Some(AccessKind::Read),
        (ADD | SUB | INC | DEC, 0) => Some(AccessKind::ReadWrite),
        (CMP | UCOMISS, _) | (CALL | JMP | JMPF | PUSH, 0) => Some(AccessKind::Read),
        _ => None,
    }
}

/// The instruction's memory accesses: each memory operand, then the stack slot a push,
/// call, pop or return touches.
fn accesses(inst: &Instruction, regs: &Registers<'_>) -> Vec<MemoryAccess> {
    let Some(size) = inst.mem_size().map(|s| s.bytes_size()) else {
        return Vec::new();
    };
    let size = size.map(u32::from);
    let op = inst.opcode();
    let mut out = Vec::new();
    for index in 0..inst.operand_count() {
        let operand = inst.operand(index);
        if !operand.is_memory() || op == Opcode::LEA {
            continue;
        }
        let Some((address, base_null)) = address_of(&operand, regs) else {
            continue;
        };
        out.push(MemoryAccess {
            address: Addr(address),
            size,
            access: direction(op, index),
            base_null,
        });
    }
    let rsp = regs.get(RegSpec::rsp());
    let stack = match op {
        Opcode::CALL | Opcode::PUSH => rsp
            .and_then(|sp| sp.checked_sub(8))
            .map(|a| (a, AccessKind::Write)),
        Opcode::POP | Opcode::RETURN | Opcode::RETF => rsp.map(|a| (a, AccessKind::Read)),
        _ => None,
    };
    if let Some((address, access)) = stack {
        out.push(MemoryAccess {
            address: Addr(address),
            size,
            access: Some(access),
            base_null: false,
        });
    }
    out
}

/// A memory operand's address, and whether its base register held 0 (a field of a null
/// pointer, however large the offset).
fn address_of(operand: &Operand, regs: &Registers<'_>) -> Option<(u64, bool)> {
    let disp = |d: &i32| i64::from(*d) as u64;
    let scaled =
        |index: &RegSpec, scale: &u8| regs.get(*index).map(|v| v.wrapping_mul(u64::from(*scale)));
    let with_base = |base: &RegSpec, rest: u64| {
        let b = regs.get(*base)?;
        Some((b.wrapping_add(rest), b == 0))
    };
    match operand {
        Operand::AbsoluteU32 { addr } => Some((u64::from(*addr), false)),
        Operand::AbsoluteU64 { addr } => Some((*addr, false)),
        Operand::MemDeref { base } | Operand::MemDerefMasked { base, .. } => with_base(base, 0),
        Operand::Disp { base, disp: d } | Operand::DispMasked { base, disp: d, .. } => {
            with_base(base, disp(d))
        }
        Operand::MemIndexScale { index, scale }
        | Operand::MemIndexScaleMasked { index, scale, .. } => Some((scaled(index, scale)?, false)),
        Operand::MemIndexScaleDisp {
            index,
            scale,
            disp: d,
        }
        | Operand::MemIndexScaleDispMasked {
            index,
            scale,
            disp: d,
            ..
        } => Some((scaled(index, scale)?.wrapping_add(disp(d)), false)),
        Operand::MemBaseIndexScale { base, index, scale }
        | Operand::MemBaseIndexScaleMasked {
            base, index, scale, ..
        } => with_base(base, scaled(index, scale)?),
        Operand::MemBaseIndexScaleDisp {
            base,
            index,
            scale,
            disp: d,
        }
        | Operand::MemBaseIndexScaleDispMasked {
            base,
            index,
            scale,
            disp: d,
            ..
        } => with_base(base, scaled(index, scale)?.wrapping_add(disp(d))),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    fn decode(bytes: &[u8], regs: &[(&str, u64)]) -> CrashInstruction {
        let values: BTreeMap<String, Addr> = regs
            .iter()
            .map(|(n, v)| (n.to_string(), Addr(*v)))
            .collect();
        let inst = InstDecoder::default().decode_slice(bytes).unwrap();
        let regs = Registers {
            values: &values,
            next_pc: 0x1000 + bytes.len() as u64,
        };
        CrashInstruction {
            text: inst.to_string(),
            accesses: accesses(&inst, &regs),
            jump: jump(&inst, &regs, |a| {
                (a == 0x7000).then_some(0xdead_0000_0000_0000)
            })
            .map(Addr),
        }
    }

    #[test]
    fn stores_loads_and_stack_slots_have_their_direction_and_address() {
        // mov dword [rdi], eax: a write through rdi
        let i = decode(&[0x89, 0x07], &[("rdi", 0), ("rax", 5)]);
        assert_eq!(i.text, "mov dword [rdi], eax");
        assert_eq!(i.accesses.len(), 1);
        assert_eq!(i.accesses[0].address, Addr(0x0));
        assert_eq!(i.accesses[0].access, Some(AccessKind::Write));
        assert_eq!(i.accesses[0].size, Some(4));
        assert!(i.accesses[0].base_null);
        // mov rax, qword [rbx + rcx * 8 + 0x18]: a read
        let i = decode(
            &[0x48, 0x8b, 0x44, 0xcb, 0x18],
            &[("rbx", 0x1000), ("rcx", 2)],
        );
        assert_eq!(i.accesses[0].address, Addr(0x1028));
        assert_eq!(i.accesses[0].access, Some(AccessKind::Read));
        assert!(!i.accesses[0].base_null);
        // add dword [rdx + 0x4], 1: read and write
        let i = decode(&[0x83, 0x42, 0x04, 0x01], &[("rdx", 0x2000)]);
        assert_eq!(i.accesses[0].access, Some(AccessKind::ReadWrite));
        assert_eq!(i.accesses[0].address, Addr(0x2004));
        // push rbp: the slot below the stack pointer
        let i = decode(&[0x55], &[("rsp", 0x7000), ("rbp", 1)]);
        assert_eq!(i.accesses.len(), 1);
        assert_eq!(i.accesses[0].address, Addr(0x6ff8));
        assert_eq!(i.accesses[0].access, Some(AccessKind::Write));
        // lea touches no memory
        let i = decode(&[0x48, 0x8d, 0x47, 0x08], &[("rdi", 0)]);
        assert!(i.accesses.is_empty());
        // a register the context lacks: no address
        let i = decode(&[0x89, 0x07], &[]);
        assert!(i.accesses.is_empty());
        // ret: to the address at the stack pointer; call rax: to rax; mov: nowhere
        let i = decode(&[0xc3], &[("rsp", 0x7000)]);
        assert_eq!(i.text, "ret");
        assert_eq!(i.jump, Some(Addr(0xdead_0000_0000_0000)));
        let i = decode(&[0xff, 0xd0], &[("rax", 0x4242), ("rsp", 0x8000)]);
        assert_eq!(i.jump, Some(Addr(0x4242)));
        // call qword [rax + 0x10]: the pointer read there
        let i = decode(&[0xff, 0x50, 0x10], &[("rax", 0x6ff0), ("rsp", 0x9000)]);
        assert_eq!(i.jump, Some(Addr(0xdead_0000_0000_0000)));
        let i = decode(&[0x89, 0x07], &[("rdi", 0)]);
        assert_eq!(i.jump, None);
        // rip-relative: from the next instruction
        let i = decode(&[0x8b, 0x05, 0x10, 0x00, 0x00, 0x00], &[]);
        assert_eq!(i.accesses[0].address, Addr(0x1006 + 0x10));
    }
}
