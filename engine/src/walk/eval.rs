//! Evaluation of the DWARF expressions unwind rules carry (PLT entries, signal
//! trampolines, stack realignment), through gimli's evaluator with bounded steps.
//!
//! Memory comes from the dump and registers from the frame being unwound; anything the
//! expression asks for that we cannot give makes the result unknown, never a guess.

use gimli::{EndianSlice, Evaluation, EvaluationResult, LittleEndian, Location, Value};

use crate::dump::{MemoryMap, RegisterSet};

/// Upper bound on evaluation steps: real unwind expressions take fewer than 20.
const MAX_ITERATIONS: u32 = 1000;

/// Evaluates `expr` with `initial` pushed first (the CFA for register rules), and returns
/// the address or value it computes.
pub fn evaluate(
    expr: &[u8],
    address_size: u8,
    initial: Option<u64>,
    regs: &RegisterSet,
    memory: &MemoryMap<'_>,
) -> Option<u64> {
    let encoding = gimli::Encoding {
        address_size,
        format: gimli::Format::Dwarf32,
        version: 4,
    };
    let expression = gimli::Expression(EndianSlice::new(expr, LittleEndian));
    let mut eval: Evaluation<EndianSlice<'_, LittleEndian>> = expression.evaluation(encoding);
    eval.set_max_iterations(MAX_ITERATIONS);
    if let Some(v) = initial {
        eval.set_initial_value(v);
    }
    let mut result = eval.evaluate().ok()?;
    loop {
        match result {
            EvaluationResult::Complete => break,
            EvaluationResult::RequiresMemory { address, size, .. } => {
                let v = match size {
                    8 => memory.read_u64(address)?,
                    4 => u64::from(memory.read_u32(address)?),
                    1 => u64::from(*memory.read_bytes(address, 1)?.first()?),
                    2 => {
                        let b = memory.read_bytes(address, 2)?;
                        u64::from(u16::from_le_bytes([b[0], b[1]]))
                    }
                    _ => return None,
                };
                result = eval.resume_with_memory(Value::Generic(v)).ok()?;
            }
            EvaluationResult::RequiresRegister { register, .. } => {
                let v = regs.get(register.0)?;
                result = eval.resume_with_register(Value::Generic(v)).ok()?;
            }
            _ => return None,
        }
    }
    let pieces = eval.result();
    let piece = pieces.first()?;
    match piece.location {
        Location::Address { address } => Some(address),
        Location::Value { value } => value.to_u64(u64::MAX).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dump::Arch;

    #[test]
    fn plt_cfa_expression() {
        // x86_64 .plt: CFA = rsp + 8 + ((rip & 15) >= 11 ? 8 : 0)
        let expr = [
            0x77, 0x08, // DW_OP_breg7 (rsp) 8
            0x80, 0x00, // DW_OP_breg16 (rip) 0
            0x3f, // DW_OP_lit15
            0x1a, // DW_OP_and
            0x3b, // DW_OP_lit11
            0x2a, // DW_OP_ge
            0x33, // DW_OP_lit3
            0x24, // DW_OP_shl
            0x22, // DW_OP_plus
        ];
        let mem = MemoryMap::default();
        let mut regs = RegisterSet::new(Arch::X86_64);
        regs.set(7, 0x1000);
        regs.set(16, 0x4020);
        assert_eq!(evaluate(&expr, 8, None, &regs, &mem), Some(0x1008));
        regs.set(16, 0x402b);
        assert_eq!(evaluate(&expr, 8, None, &regs, &mem), Some(0x1010));
    }

    #[test]
    fn deref_reads_memory_and_missing_memory_is_none() {
        // DW_OP_breg7 (rsp) 160; DW_OP_deref  (glibc __restore_rt CFA)
        let expr = [0x77, 0xa0, 0x01, 0x06];
        let stack = 0x7777u64.to_le_bytes();
        let mem = MemoryMap::new(vec![(0x10a0, &stack[..])]);
        let mut regs = RegisterSet::new(Arch::X86_64);
        regs.set(7, 0x1000);
        assert_eq!(evaluate(&expr, 8, None, &regs, &mem), Some(0x7777));
        regs.set(7, 0x2000);
        assert_eq!(evaluate(&expr, 8, None, &regs, &mem), None);
        regs.clear(7);
        assert_eq!(evaluate(&expr, 8, None, &regs, &mem), None);
    }

    #[test]
    fn garbage_never_panics() {
        let mem = MemoryMap::default();
        let regs = RegisterSet::new(Arch::X86_64);
        for b in 0..=255u8 {
            let _ = evaluate(&[b, 0xff, 0xff, 0xff, 0xff], 8, Some(1), &regs, &mem);
            let _ = evaluate(&[b], 8, None, &regs, &mem);
        }
        // an infinite loop: DW_OP_skip -3
        let _ = evaluate(&[0x2f, 0xfd, 0xff], 8, None, &regs, &mem);
    }
}
