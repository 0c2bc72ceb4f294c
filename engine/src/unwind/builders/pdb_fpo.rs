//! The attribute word of a PDB's FPO records (`FPO_DATA`), read as `winnt.h` lays it out.
//!
//! `winnt.h` packs a function's prologue length, saved registers and flags into one
//! 16-bit word: `cbProlog` bits 0–7, `cbRegs` 8–10, `fHasSEH` 11, `fUseBP` 12, a reserved
//! bit 13 and `cbFrame` 14–15. The `pdb2` crate (as the `pdb` crate and LLVM's `FpoData`
//! it follows) reads the prologue length from bits 0–3 only and the two flags from bits 9
//! and 10, which are `cbRegs`' own: a prologue of 16 bytes or more came out short, and a
//! function saving four or more registers came out as one that uses `ebp` as its frame
//! pointer (so the walk took its caller's `ebp` from the wrong place), while a function
//! that does use it came out as one that does not. Microsoft's DIA, and Breakpad's
//! `dump_syms` built on it, follow `winnt.h`.
//!
//! So the FPO stream's records are read here once more, from the stream's bytes: the
//! stream is found through the DBI stream's optional debug header (its first entry), and
//! each 16-byte record's word is kept by the record's code start, for
//! [`super::pdb_frame_data`] to take the prologue length and the base-pointer flag from.

use std::collections::HashMap;

/// Bytes of one `FPO_DATA` record.
const RECORD: usize = 16;

/// Bytes of the DBI stream's header, which the substreams follow.
const DBI_HEADER: usize = 64;

/// The DBI stream's index in every PDB.
pub const DBI_STREAM: u16 = 3;

/// One FPO record's attribute word, decoded as `winnt.h` lays it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FpoAttributes {
    /// `cbProlog`: bytes of the prologue.
    pub prolog_size: u16,
    /// `cbRegs`: registers the function saves.
    pub saved_registers: u16,
    /// `fHasSEH`: the function sets up structured exception handling.
    pub has_seh: bool,
    /// `fUseBP`: the function keeps `ebp` as its frame pointer.
    pub uses_base_pointer: bool,
    /// `cbFrame`: the frame type (0 FPO, 1 trap, 2 TSS, 3 non-FPO).
    pub frame_type: u16,
}

impl FpoAttributes {
    /// Decodes an attribute word.
    pub fn decode(word: u16) -> Self {
        FpoAttributes {
            prolog_size: word & 0xff,
            saved_registers: (word >> 8) & 0x7,
            has_seh: word & (1 << 11) != 0,
            uses_base_pointer: word & (1 << 12) != 0,
            frame_type: word >> 14,
        }
    }
}

/// The FPO stream's index, from the DBI stream's bytes: the first entry of its optional
/// debug header, which follows the header and the module, section contribution, section
/// map, file, type server map and EC substreams. `None` where the stream is truncated,
/// a size is negative, or the PDB has no FPO stream (index `0xffff`).
pub fn fpo_stream_index(dbi: &[u8]) -> Option<u16> {
    let size_at = |at: usize| -> Option<usize> {
        let bytes: [u8; 4] = dbi.get(at..at.checked_add(4)?)?.try_into().ok()?;
        usize::try_from(i32::from_le_bytes(bytes)).ok()
    };
    let mut at = DBI_HEADER;
    // module info, section contributions, section map, file info, type server map, EC
    for size in [24, 28, 32, 36, 40, 52] {
        at = at.checked_add(size_at(size)?)?;
    }
    if size_at(48)? < 2 {
        return None;
    }
    let bytes: [u8; 2] = dbi.get(at..at.checked_add(2)?)?.try_into().ok()?;
    let index = u16::from_le_bytes(bytes);
    (index != 0xffff).then_some(index)
}

/// Each FPO record's attribute word by the record's code start (`ulOffStart`); a
/// trailing partial record is ignored.
pub fn attributes_by_start(fpo: &[u8]) -> HashMap<u32, u16> {
    fpo.chunks_exact(RECORD)
        .filter_map(|r| {
            let start: [u8; 4] = r.get(0..4)?.try_into().ok()?;
            let word: [u8; 2] = r.get(14..16)?.try_into().ok()?;
            Some((u32::from_le_bytes(start), u16::from_le_bytes(word)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_word_is_read_as_winnt_h_lays_it_out() {
        // cbProlog 0x13, cbRegs 4, fHasSEH 0, fUseBP 1, cbFrame 0 (FPO): the prologue is
        // longer than 15 bytes, and bit 10 (cbRegs' top bit) is set without fUseBP's
        let word = 0x13 | (4 << 8) | (1 << 12);
        let a = FpoAttributes::decode(word);
        assert_eq!(a.prolog_size, 0x13);
        assert_eq!(a.saved_registers, 4);
        assert!(!a.has_seh);
        assert!(a.uses_base_pointer);
        assert_eq!(a.frame_type, 0);
        // four saved registers, no frame pointer, SEH, a non-FPO frame
        let a = FpoAttributes::decode((4 << 8) | (1 << 11) | (3 << 14));
        assert_eq!(a.saved_registers, 4);
        assert!(a.has_seh);
        assert!(!a.uses_base_pointer);
        assert_eq!(a.frame_type, 3);
    }

    /// One FPO record's bytes.
    fn fpo_bytes(start: u32, size: u32, word: u16) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&start.to_le_bytes());
        r.extend_from_slice(&size.to_le_bytes());
        r.extend_from_slice(&2u32.to_le_bytes()); // cdwLocals
        r.extend_from_slice(&1u16.to_le_bytes()); // cdwParams
        r.extend_from_slice(&word.to_le_bytes());
        r
    }

    #[test]
    fn records_are_keyed_by_their_code_start() {
        let mut stream = fpo_bytes(0x1000, 0x20, 0x1013);
        stream.extend(fpo_bytes(0x2000, 0x40, 0x0405));
        stream.extend_from_slice(&[1, 2, 3]); // a partial record
        let by_start = attributes_by_start(&stream);
        assert_eq!(by_start.len(), 2);
        assert_eq!(by_start[&0x1000], 0x1013);
        assert_eq!(by_start[&0x2000], 0x0405);
    }

    /// A DBI stream whose substreams have the given sizes and whose optional debug
    /// header holds `header`.
    fn dbi(sizes: [i32; 6], header: &[u16]) -> Vec<u8> {
        let mut d = vec![0u8; DBI_HEADER];
        for (at, size) in [24usize, 28, 32, 36, 40, 52].into_iter().zip(sizes) {
            d[at..at + 4].copy_from_slice(&size.to_le_bytes());
        }
        let header_bytes = i32::try_from(header.len() * 2).unwrap();
        d[48..52].copy_from_slice(&header_bytes.to_le_bytes());
        let skipped: i32 = sizes.iter().map(|s| (*s).max(0)).sum();
        d.extend(std::iter::repeat_n(0xaa, usize::try_from(skipped).unwrap()));
        for w in header {
            d.extend_from_slice(&w.to_le_bytes());
        }
        d
    }

    #[test]
    fn the_fpo_stream_is_the_optional_headers_first_entry() {
        let d = dbi([10, 20, 4, 8, 0, 6], &[12, 13, 0xffff]);
        assert_eq!(fpo_stream_index(&d), Some(12));
        // no FPO stream, no optional header, a truncated stream, a negative size
        assert_eq!(fpo_stream_index(&dbi([0; 6], &[0xffff, 5])), None);
        assert_eq!(fpo_stream_index(&dbi([0; 6], &[])), None);
        assert_eq!(fpo_stream_index(&d[..d.len() - 5]), None);
        assert_eq!(fpo_stream_index(&dbi([-4, 0, 0, 0, 0, 0], &[1])), None);
        assert_eq!(fpo_stream_index(&[]), None);
    }
}
