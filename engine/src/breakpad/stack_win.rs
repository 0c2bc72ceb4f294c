//! Breakpad `STACK WIN` records: Windows x86 frame data (from a PDB's FPO and FrameData
//! streams), read from `.sym` text and kept in the unwind table.
//!
//! A record is (Breakpad's `symbol_files.md`, "STACK WIN records"; every number hex):
//!
//! ```text
//! STACK WIN type rva code_size prologue_size epilogue_size parameter_size
//!           saved_register_size local_size max_stack_size has_program_string
//!           (program_string | allocates_base_pointer)
//! ```
//!
//! Type 4 (`FrameData`) and type 0 (`FPO`) are the ones unwinders use; the other types
//! (trap, TSS, standard) are skipped as Breakpad skips them. The walker needs the sizes,
//! the program string or the `allocates_base_pointer` flag; the table keeps them in its
//! expression area (the model and its encoding are [`crate::unwind::win_frame`]'s, shared
//! with the PDB's frame data), and the walker evaluates the program with
//! [`super::postfix`]. This module reads the text.

use super::tokenize::fields;
pub use crate::unwind::win_frame::{WinFrame, WinKind, WinRecord};

fn hex(tok: Option<&str>) -> Option<u64> {
    u64::from_str_radix(tok?, 16).ok()
}

fn hex32(tok: Option<&str>) -> Option<u32> {
    u32::try_from(hex(tok)?).ok()
}

/// Reads what follows `STACK ` on a `STACK WIN` line (`WIN 4 1000 …`): `None` for another
/// `STACK` record, a type other than 0 and 4, or a malformed record.
pub fn parse(rest: &str) -> Option<WinRecord<'_>> {
    let rest = rest.strip_prefix("WIN ")?;
    let [ty, rva, size, _prologue, _epilogue, params, saved, locals, _max_stack, has_program, tail] =
        fields::<11>(rest);
    let kind = match hex(ty)? {
        0 => WinKind::Fpo,
        4 => WinKind::FrameData,
        _ => return None,
    };
    let (rva, size) = (hex(rva)?, hex(size)?);
    let (parameter_size, saved_register_size, local_size) =
        (hex32(params)?, hex32(saved)?, hex32(locals)?);
    let tail = tail?.trim();
    let (program, allocates_base_pointer) = if hex(has_program)? != 0 {
        if tail.is_empty() {
            return None;
        }
        (Some(tail), false)
    } else {
        (None, hex(Some(tail))? != 0)
    };
    Some(WinRecord {
        rva,
        size,
        frame: WinFrame {
            kind,
            parameter_size,
            saved_register_size,
            local_size,
            program,
            allocates_base_pointer,
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn records_of_breakpads_test_app_parse_and_round_trip() {
        // the two kinds as dump_syms writes them (Breakpad's test_app.sym)
        let fd = parse(
            "WIN 4 1000 26 7 0 c 4 0 0 1 $T0 $ebp = $eip $T0 4 + ^ = $ebp $T0 ^ = $esp $T0 8 + =",
        )
        .unwrap();
        assert_eq!((fd.rva, fd.size), (0x1000, 0x26));
        assert_eq!(fd.frame.kind, WinKind::FrameData);
        assert_eq!(fd.frame.parameter_size, 0xc);
        assert_eq!(fd.frame.saved_register_size, 4);
        assert_eq!(
            fd.frame.program,
            Some("$T0 $ebp = $eip $T0 4 + ^ = $ebp $T0 ^ = $esp $T0 8 + =")
        );
        let fpo = parse("WIN 0 7c8116f1 4b 0 0 8 0 10 0 0 1").unwrap();
        assert_eq!(fpo.frame.kind, WinKind::Fpo);
        assert_eq!(fpo.frame.program, None);
        assert!(fpo.frame.allocates_base_pointer);
        assert_eq!(fpo.frame.local_size, 0x10);
        for r in [fd, fpo] {
            let bytes = r.frame.encode();
            assert_eq!(WinFrame::decode(&bytes), Some(r.frame));
        }
    }

    #[test]
    fn other_types_and_malformed_records_are_none() {
        assert_eq!(parse("WIN 1 1000 10 0 0 0 0 0 0 0 0"), None);
        assert_eq!(parse("CFI INIT 1000 10 .cfa: $esp 4 +"), None);
        assert_eq!(parse("WIN 4 1000 10 0 0 0 0 0 0 1"), None);
        assert_eq!(parse("WIN 4 1000 10 0 0 0 0 0"), None);
        assert_eq!(parse("WIN 4 zz 10 0 0 0 0 0 0 0 0"), None);
        assert_eq!(parse("WIN 4 1000 10 0 0 100000000 0 0 0 0 0"), None);
        assert_eq!(WinFrame::decode(&[4, 1, 0]), None);
        assert_eq!(WinFrame::decode(&[9; 20]), None);
    }
}
