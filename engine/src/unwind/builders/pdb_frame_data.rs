//! Windows x86 frame data from a PDB: its FPO (`FPO_DATA`) and FrameData streams, read
//! into the records a `.sym` file's `STACK WIN` lines hold, so that a Windows x86 walk is
//! the same from the PDB as from the `.sym` file `dump_syms` makes of it.
//!
//! 32-bit Windows code keeps no unwind table in its image (x64's `.pdata` has no x86
//! counterpart): where a function omits the frame pointer, only the PDB says how to find
//! its caller. The streams are read with the `pdb2` crate's `frame_table`, and each entry
//! becomes records exactly as `dump_syms` (symbolic-cfi's `process_pdb`) writes them:
//!
//! - an entry repeating the previous one's type, start, size and prologue size is
//!   skipped (DIA lists many such; so does `dump_syms`), and so is one whose code size
//!   exceeds `i32::MAX` (they are not sizes: such entries lie at function ends);
//! - the entry's prologue and body are mapped to image RVAs through the address map
//!   (OMAP, for images rearranged after linking) separately: one record where both stay
//!   contiguous, else one per piece;
//! - type 4 (`FrameData`) keeps its program string (from the PDB's `/names` table), type
//!   0 (`FPO`) its "uses a base pointer" flag; other types are not used by unwinders and
//!   are passed over (not counted as unreadable);
//! - an FPO entry's prologue length and base-pointer flag are read from its record's
//!   bytes as `winnt.h` lays them out ([`super::pdb_fpo`]), not as `pdb2` reads them (it
//!   takes them from the wrong bits): here the records differ from those of a `dump_syms`
//!   built on the `pdb` crate, which shares the misreading, and equal those of Breakpad's
//!   `dump_syms` built on Microsoft's DIA.
//!
//! The records then become rows as a `.sym` file's do
//! ([`crate::unwind::win_frame::push_win_records`]: `FrameData` over `FPO`, the innermost
//! of nested records), under [`UnwindSource::PdbFrameData`], and the walker evaluates
//! them as Breakpad's x86 walker does (`walk::stack_win`).
//!
//! Hostile files: the crate's arithmetic may overflow on hostile offsets, so the read runs
//! under the PDB reader's panic guard; the pieces one entry maps to are bounded
//! ([`MAX_PIECES`]), and so are the records of a file ([`MAX_RECORDS`]) and a program's
//! length ([`MAX_PROGRAM_BYTES`]); each program is read once and shared by the records
//! naming it, so memory stays in proportion to the file.

use std::collections::HashMap;
use std::io::Cursor;
use std::sync::Arc;

use pdb2::FallibleIterator;

use super::pdb_fpo::{self, FpoAttributes};
use super::{BuiltTable, TableWriter};
use crate::arch::Arch;
use crate::unwind::win_frame::{WinFrame, WinKind, WinRecord};
use crate::unwind::{UnwindError, UnwindSource};

/// Pieces one entry's prologue or body may map to through the address map.
const MAX_PIECES: usize = 1024;

/// Records read from one PDB (a large system PDB has a few hundred thousand).
const MAX_RECORDS: usize = 1 << 22;

/// Bytes of one program string (real ones are under 200; the evaluator takes 512 tokens).
const MAX_PROGRAM_BYTES: usize = 4096;

/// Programs read so far, by their offset in the string table: each is read and kept
/// once, however many entries name it.
type Programs = HashMap<u32, Option<Arc<str>>>;

/// One record read from the PDB: a `STACK WIN` record whose program is owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdbFrameRecord {
    pub kind: WinKind,
    /// Image RVA and size of the code described.
    pub rva: u64,
    pub size: u64,
    pub parameter_size: u32,
    pub saved_register_size: u32,
    pub local_size: u32,
    /// Shared by every record whose entry names the same string.
    pub program: Option<Arc<str>>,
    pub allocates_base_pointer: bool,
}

impl PdbFrameRecord {
    /// The record in the form the `.sym` reader gives.
    pub fn as_win(&self) -> WinRecord<'_> {
        WinRecord {
            rva: self.rva,
            size: self.size,
            frame: WinFrame {
                kind: self.kind,
                parameter_size: self.parameter_size,
                saved_register_size: self.saved_register_size,
                local_size: self.local_size,
                program: self.program.as_deref(),
                allocates_base_pointer: self.allocates_base_pointer,
            },
        }
    }
}

/// What [`read`] found: the records, and the entries it could not read.
#[derive(Debug, Default)]
pub struct PdbFrames {
    pub records: Vec<PdbFrameRecord>,
    /// Entries skipped (a program not in the string table, a range that overflows), and
    /// the first reason. Types unwinders do not use (trap, TSS, standard) are passed
    /// over without counting: they are not errors.
    pub skipped: usize,
    pub first_skip: Option<String>,
}

impl PdbFrames {
    fn skip(&mut self, why: impl FnOnce() -> String) {
        self.skipped += 1;
        if self.first_skip.is_none() {
            self.first_skip = Some(why());
        }
    }
}

/// Whether a PDB describes 32-bit x86 code (its debug-information stream's machine).
fn is_x86<'s, S: pdb2::Source<'s> + 's>(pdb: &mut pdb2::PDB<'s, S>) -> bool {
    pdb.debug_information()
        .ok()
        .and_then(|d| d.machine_type().ok())
        .is_some_and(|m| m == pdb2::MachineType::X86)
}

/// Reads the frame data of an x86 PDB; `Ok` with no records for a PDB of another
/// architecture (whose frame streams, if any, no unwinder uses) or without frame data.
pub fn read(data: &[u8]) -> Result<PdbFrames, String> {
    crate::binary::pdb_guarded(|| read_unguarded(data))
}

fn read_unguarded(data: &[u8]) -> Result<PdbFrames, String> {
    let mut out = PdbFrames::default();
    let mut pdb = pdb2::PDB::open(Cursor::new(data)).map_err(|e| e.to_string())?;
    if !is_x86(&mut pdb) {
        return Ok(out);
    }
    let fpo = fpo_attributes(&mut pdb);
    let table = pdb.frame_table().map_err(|e| e.to_string())?;
    let map = pdb.address_map().map_err(|e| e.to_string())?;
    let strings = pdb.string_table().ok();
    let mut frames = table.iter();
    let mut last: Option<(pdb2::FrameType, u32, u32, u16)> = None;
    let mut programs = Programs::new();
    while let Some(f) = frames.next().map_err(|e| e.to_string())? {
        if out.records.len() >= MAX_RECORDS {
            out.skip(|| format!("more than {MAX_RECORDS} frame data records"));
            break;
        }
        let key = (f.ty, f.code_start.0, f.code_size, f.prolog_size);
        if f.code_size > i32::MAX as u32 || last == Some(key) {
            continue;
        }
        last = Some(key);
        let mut f = f;
        if f.ty == pdb2::FrameType::FPO {
            if let Some(&word) = fpo.get(&f.code_start.0) {
                let a = FpoAttributes::decode(word);
                f.prolog_size = a.prolog_size;
                f.uses_base_pointer = a.uses_base_pointer;
                f.has_structured_eh = a.has_seh;
            }
        }
        entry(&f, &map, strings.as_ref(), &mut programs, &mut out);
    }
    Ok(out)
}

/// The FPO stream's attribute words by code start ([`pdb_fpo`]); empty where the PDB
/// has no FPO stream or its DBI stream cannot be read (pdb2's own reading then stands).
fn fpo_attributes<'s, S: pdb2::Source<'s> + 's>(pdb: &mut pdb2::PDB<'s, S>) -> HashMap<u32, u16> {
    let index = pdb
        .raw_stream(pdb2::StreamIndex(pdb_fpo::DBI_STREAM))
        .ok()
        .flatten()
        .and_then(|dbi| pdb_fpo::fpo_stream_index(dbi.as_slice()));
    index
        .and_then(|i| pdb.raw_stream(pdb2::StreamIndex(i)).ok().flatten())
        .map(|fpo| pdb_fpo::attributes_by_start(fpo.as_slice()))
        .unwrap_or_default()
}

/// The records of one frame table entry (see the module documentation).
fn entry(
    f: &pdb2::FrameData,
    map: &pdb2::AddressMap<'_>,
    strings: Option<&pdb2::StringTable<'_>>,
    programs: &mut Programs,
    out: &mut PdbFrames,
) {
    let start = f.code_start.0;
    let kind = match f.ty {
        pdb2::FrameType::FrameData => WinKind::FrameData,
        pdb2::FrameType::FPO => WinKind::Fpo,
        // trap, TSS and standard frames: not used by unwinders, and no error
        _ => return,
    };
    let program = match (f.program, strings) {
        (None, _) => None,
        (Some(p), Some(s)) => match programs.entry(p.0).or_insert_with(|| program(p, s)) {
            Some(text) => Some(Arc::clone(text)),
            None => {
                return out.skip(|| format!("frame data at {start:#x}: its program is unreadable"))
            }
        },
        (Some(_), None) => {
            return out
                .skip(|| format!("frame data at {start:#x}: no string table for its program"))
        }
    };
    let (Some(prolog_end), Some(end)) = (
        start.checked_add(u32::from(f.prolog_size)),
        start.checked_add(f.code_size),
    ) else {
        return out.skip(|| format!("frame data at {start:#x}: its range overflows"));
    };
    let pieces = |from: u32, to: u32| -> Vec<(u32, u32)> {
        let mut v: Vec<(u32, u32)> = map
            .rva_ranges(pdb2::PdbInternalRva(from)..pdb2::PdbInternalRva(to))
            .take(MAX_PIECES)
            .filter(|r| r.end.0 > r.start.0)
            .map(|r| (r.start.0, r.end.0))
            .collect();
        v.sort_unstable();
        v
    };
    let (prologue, body) = (pieces(start, prolog_end), pieces(prolog_end, end));
    let record = |(from, to): (u32, u32)| PdbFrameRecord {
        kind,
        rva: u64::from(from),
        size: u64::from(to - from),
        parameter_size: f.params_size,
        saved_register_size: u32::from(f.saved_regs_size),
        local_size: f.locals_size,
        program: program.clone(),
        allocates_base_pointer: program.is_none() && f.uses_base_pointer,
    };
    match (prologue.as_slice(), body.as_slice()) {
        // contiguous: one record, as dump_syms writes it
        ([p], [b]) if p.1 == b.0 => out.records.push(record((p.0, b.1))),
        _ => out
            .records
            .extend(prologue.into_iter().chain(body).map(record)),
    }
}

/// The program string `p` names, trimmed: `None` where it is not in the table, empty, or
/// longer than [`MAX_PROGRAM_BYTES`].
fn program(p: pdb2::StringRef, strings: &pdb2::StringTable<'_>) -> Option<Arc<str>> {
    let text = p.to_string_lossy(strings).ok()?;
    let text = text.trim();
    (!text.is_empty() && text.len() <= MAX_PROGRAM_BYTES).then(|| Arc::from(text))
}

/// Adds the frame data of the x86 PDB `data` to `w` (x86): the number of records.
pub fn add_pdb_frame_data(w: &mut TableWriter, data: &[u8]) -> usize {
    w.stats.source_bytes += data.len();
    match read(data) {
        Ok(frames) => {
            w.stats.entries += frames.records.len();
            if let Some(why) = frames.first_skip {
                w.stats.entries_skipped += frames.skipped.saturating_sub(1);
                w.stats.skip(|| why);
            }
            let records: Vec<WinRecord<'_>> =
                frames.records.iter().map(PdbFrameRecord::as_win).collect();
            if !records.is_empty() {
                w.note_source(UnwindSource::PdbFrameData);
            }
            crate::unwind::win_frame::push_win_records(w, &records, UnwindSource::PdbFrameData);
            records.len()
        }
        Err(e) => {
            w.stats.skip(|| format!("PDB frame data: {e}"));
            0
        }
    }
}

/// The unwind table of an x86 PDB's frame data alone (a PDB found without its image);
/// an error for a PDB of another architecture.
pub fn build_from_pdb(data: &[u8]) -> Result<BuiltTable, UnwindError> {
    let x86 = crate::binary::pdb_guarded(|| {
        Ok(pdb2::PDB::open(Cursor::new(data))
            .ok()
            .is_some_and(|mut p| is_x86(&mut p)))
    });
    let x86 = x86.unwrap_or(false);
    if !x86 {
        return Err(UnwindError::UnsupportedArch(
            "a PDB of code other than 32-bit x86 (its unwind rules are in the image)".into(),
        ));
    }
    let mut w = TableWriter::new(Arch::X86);
    add_pdb_frame_data(&mut w, data);
    let mut built = w.finish();
    if built.stats.rows > 0 {
        built.inputs = vec![0];
    }
    Ok(built)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::breakpad::stack_win;

    /// An entry of the frame table (fields as the FPO stream's reader fills them).
    fn frame(ty: pdb2::FrameType, start: u32, size: u32, program: Option<u32>) -> pdb2::FrameData {
        pdb2::FrameData {
            ty,
            code_start: pdb2::PdbInternalRva(start),
            code_size: size,
            locals_size: 0x10,
            params_size: 8,
            prolog_size: 3,
            saved_regs_size: 4,
            max_stack_size: None,
            has_structured_eh: false,
            has_cpp_eh: false,
            is_function_start: true,
            uses_base_pointer: true,
            program: program.map(pdb2::StringRef),
        }
    }

    fn records(f: &pdb2::FrameData) -> PdbFrames {
        let mut out = PdbFrames::default();
        entry(
            f,
            &pdb2::AddressMap::default(),
            None,
            &mut Programs::new(),
            &mut out,
        );
        out
    }

    #[test]
    fn an_fpo_entry_is_the_record_dump_syms_writes() {
        // symbolic-cfi's `write_pdb_stackinfo` for this entry: type, rva, size, prologue,
        // epilogue 0, parameters, saved registers, locals, max stack 0, no program, and
        // the base-pointer flag
        let want = stack_win::parse("WIN 0 7c8116f1 4b 3 0 8 4 10 0 0 1").unwrap();
        let got = records(&frame(pdb2::FrameType::FPO, 0x7c81_16f1, 0x4b, None));
        assert_eq!(got.skipped, 0);
        assert_eq!(got.records.len(), 1);
        assert_eq!(got.records[0].as_win(), want);
    }

    #[test]
    fn unusable_entries_are_skipped_and_counted() {
        // a type unwinders do not use: no record, and not an error
        let got = records(&frame(pdb2::FrameType::Trap, 0x1000, 0x10, None));
        assert!(got.records.is_empty());
        assert_eq!(got.skipped, 0);
        // a program without the string table it names, a range past the 32-bit space
        for f in [
            frame(pdb2::FrameType::FrameData, 0x1000, 0x10, Some(1)),
            frame(pdb2::FrameType::FPO, 0xffff_fff0, 0x20, None),
        ] {
            let got = records(&f);
            assert!(got.records.is_empty(), "{f:?}");
            assert_eq!(got.skipped, 1, "{f:?}");
            assert!(got.first_skip.is_some());
        }
    }

    #[test]
    fn bytes_that_are_not_a_pdb_are_an_error() {
        assert!(read(b"not a pdb").is_err());
        assert!(build_from_pdb(b"not a pdb").is_err());
    }
}
