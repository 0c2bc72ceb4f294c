//! Windows x86 frame data: the model of one `FPO`/`FrameData` record (a `.sym` file's
//! `STACK WIN` line, or an entry of a PDB's FPO and FrameData streams), its encoding in
//! the unwind table's expression area, and the rows the records become.
//!
//! Both readers — `breakpad::stack_win` (text) and `builders::pdb_frame_data` (PDB) —
//! produce [`WinRecord`]s and hand them to [`push_win_records`], so a Windows x86 walk is
//! the same from either. A row's CFA slot is of kind
//! [`SlotKind::WinFrame`](super::rule::SlotKind::WinFrame) and points at the record's
//! bytes ([`WinFrame::encode`]); the walker decodes them ([`WinFrame::decode`]) and
//! evaluates the program as Breakpad's x86 walker does (`walk::stack_win`).
//!
//! As in Breakpad's resolver, a `FrameData` record wins over an `FPO` record and both over
//! `STACK CFI` rows ([`FRAME_DATA_PRIORITY`], [`FPO_PRIORITY`], both above Breakpad's
//! CFI priority of 10), and where records of one type nest (a prologue's record inside its
//! function's) the innermost describes the address; a record that overlaps another
//! without nesting in it, or repeats its range, is skipped ([`win_rows`]).

use super::rule::{RuleRecord, Slot, UnwindSource};
use super::{BuildStats, TableWriter};

/// The record's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WinKind {
    /// Type 0: an `FPO_DATA` entry (no program string, or one dump_syms wrote).
    Fpo,
    /// Type 4: a `FRAMEDATA` entry with its program string.
    FrameData,
}

/// One `STACK WIN` record's unwind information.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WinFrame<'a> {
    pub kind: WinKind,
    /// Bytes of parameters the function takes (its callers pushed them).
    pub parameter_size: u32,
    /// Bytes of callee-saved registers the prologue pushes.
    pub saved_register_size: u32,
    /// Bytes of locals.
    pub local_size: u32,
    /// The postfix program, when the record has one.
    pub program: Option<&'a str>,
    /// Without a program: whether the function sets up `ebp` for its own use.
    pub allocates_base_pointer: bool,
}

/// A parsed record: its range (`rva`, `code_size`) and information.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WinRecord<'a> {
    pub rva: u64,
    pub size: u64,
    pub frame: WinFrame<'a>,
}

/// Bytes before the program string in [`WinFrame::encode`]'s form.
const HEADER: usize = 14;

impl<'a> WinFrame<'a> {
    /// The table's form: kind (0 or 4), flags (1: has a program, 2: allocates the base
    /// pointer), the three sizes as little-endian u32s, then the program's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let program = self.program.unwrap_or("");
        let mut out = Vec::with_capacity(HEADER + program.len());
        out.push(match self.kind {
            WinKind::Fpo => 0,
            WinKind::FrameData => 4,
        });
        out.push(u8::from(self.program.is_some()) | (u8::from(self.allocates_base_pointer) << 1));
        for v in [
            self.parameter_size,
            self.saved_register_size,
            self.local_size,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(program.as_bytes());
        out
    }

    /// Reads [`Self::encode`]'s form back; `None` for bytes it did not write.
    pub fn decode(bytes: &'a [u8]) -> Option<Self> {
        let kind = match bytes.first()? {
            0 => WinKind::Fpo,
            4 => WinKind::FrameData,
            _ => return None,
        };
        let flags = *bytes.get(1)?;
        let u32_at = |i: usize| -> Option<u32> {
            Some(u32::from_le_bytes(bytes.get(i..i + 4)?.try_into().ok()?))
        };
        let program = std::str::from_utf8(bytes.get(HEADER..)?).ok()?;
        Some(WinFrame {
            kind,
            parameter_size: u32_at(2)?,
            saved_register_size: u32_at(6)?,
            local_size: u32_at(10)?,
            program: (flags & 1 != 0).then_some(program),
            allocates_base_pointer: flags & 2 != 0,
        })
    }
}

/// Priority of `STACK WIN` type 4 (`FrameData`) rows: over `FPO` and `STACK CFI` rows.
pub const FRAME_DATA_PRIORITY: u8 = 8;
/// Priority of `STACK WIN` type 0 (`FPO`) rows: over `STACK CFI` rows.
pub const FPO_PRIORITY: u8 = 9;

/// Pushes Windows frame data records (a `.sym` file's `STACK WIN` records, or a PDB's
/// FPO and FrameData streams read into the same form) as rows of `source`: `FrameData`
/// over `FPO`, the innermost of nested records of one type (see the module documentation).
pub fn push_win_records(w: &mut TableWriter, records: &[WinRecord<'_>], source: UnwindSource) {
    for (kind, priority) in [
        (WinKind::FrameData, FRAME_DATA_PRIORITY),
        (WinKind::Fpo, FPO_PRIORITY),
    ] {
        let of_kind: Vec<&WinRecord<'_>> =
            records.iter().filter(|r| r.frame.kind == kind).collect();
        for (start, end, r) in win_rows(&of_kind, &mut w.stats) {
            let bytes = r.frame.encode();
            match w.add_expression(&bytes) {
                Some((off, len)) => {
                    let cfa = Slot::win_frame(off, len);
                    let rule = RuleRecord::new(source, cfa, Slot::UNCHANGED);
                    w.push(start, end, &rule, priority);
                }
                None => w
                    .stats
                    .skip(|| format!("frame data at {start:#x}: the program is too long")),
            }
        }
    }
}

/// The rows of one type's `STACK WIN` records: disjoint `[start, end)` pieces, each
/// described by the innermost record holding it (see the module documentation).
fn win_rows<'r, 'a>(
    records: &[&'r WinRecord<'a>],
    stats: &mut BuildStats,
) -> Vec<(u64, u64, &'r WinRecord<'a>)> {
    let mut sorted: Vec<(u64, u64, &'r WinRecord<'a>)> = Vec::with_capacity(records.len());
    for r in records {
        match r.rva.checked_add(r.size) {
            Some(end) if r.size > 0 => sorted.push((r.rva, end, r)),
            _ => stats.skip(|| format!("STACK WIN at {:#x}: an empty or overflowing range", r.rva)),
        }
    }
    // containers before what they contain; a stable sort keeps file order among equals
    sorted.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut rows = Vec::with_capacity(sorted.len());
    let mut open: Vec<(u64, u64, &'r WinRecord<'a>)> = Vec::new();
    let mut cursor = 0u64;
    fn emit<'r, 'a>(
        rows: &mut Vec<(u64, u64, &'r WinRecord<'a>)>,
        from: u64,
        to: u64,
        r: &'r WinRecord<'a>,
    ) {
        if from < to {
            rows.push((from, to, r));
        }
    }
    for rec in sorted {
        while let Some(&(_, end, r)) = open.last().filter(|o| o.1 <= rec.0) {
            emit(&mut rows, cursor, end, r);
            cursor = cursor.max(end);
            open.pop();
        }
        if let Some(&(start, end, r)) = open.last() {
            if rec.1 > end || (rec.0 == start && rec.1 == end) {
                stats.skip(|| format!("STACK WIN at {:#x}: overlaps another record", rec.0));
                continue;
            }
            emit(&mut rows, cursor, rec.0, r);
        }
        cursor = rec.0;
        open.push(rec);
    }
    while let Some((_, end, r)) = open.pop() {
        emit(&mut rows, cursor, end, r);
        cursor = cursor.max(end);
    }
    rows
}
