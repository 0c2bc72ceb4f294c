//! A Windows x64 image's unwind rules built only where the walk looks: one `.pdata`
//! function at a time, found by a binary search of its `RUNTIME_FUNCTION` entries.
//!
//! A one-shot walk asks about a dozen addresses; the whole table ([`build_from_elf`] →
//! `builders::pe_x64`) replays the unwind codes of every function of every module and
//! decodes all of their code for epilogues. [`PdataUnwind::find_rule`] finds the entry
//! whose range holds the address, builds that function's rows with the whole build's own
//! code (`pe_x64::add_function`, the [`TableWriter`]) the first time it is asked about,
//! and keeps them.
//!
//! The answers equal the whole table's at every address when the entries are sorted,
//! non-empty and disjoint (checked once, at the first lookup, reading 12 bytes per
//! entry): inside an entry's range the whole table holds that function's rows alone (the
//! `.pdata` rows win over the leaf rule; no other entry overlaps), or nothing when the
//! function's unwind info cannot be read — as here. An address outside every entry (a
//! leaf function, or no code) is answered by the whole table, built once when first
//! needed; so are all addresses when the entries are laid out otherwise. Rule records
//! are equal except where a slot refers to an expression (a machine frame's return
//! address): its offset is into this function's expression area, and
//! [`Rule::expression`] gives the same bytes.

use std::sync::OnceLock;

use super::builders::pe_x64::{add_function, image_reader, pdata_of};
use super::builders::{build_from_elf, TableWriter};
use super::lookup::{Rule, UnwindTable};
use super::rule::UnwindSource;
use crate::binary::FileBytes;
use crate::dump::Arch;

pub use super::on_demand::Declined;

/// Size of a `RUNTIME_FUNCTION`.
const ENTRY_SIZE: usize = 12;

/// One image's unwind rules, built a function at a time.
pub struct PdataUnwind {
    binary: FileBytes,
    /// The exception directory's bytes in the file.
    pdata: std::ops::Range<usize>,
    /// Whether the entries are sorted and disjoint (decided at the first lookup).
    per_function: OnceLock<bool>,
    /// Each entry's table, built when first asked about.
    tables: Vec<OnceLock<FunctionTable>>,
    /// The whole table, for addresses no entry holds (or all, see `per_function`).
    whole: OnceLock<(Box<[u8]>, Vec<usize>)>,
    inputs: OnceLock<Vec<usize>>,
}

/// The rows of one function, addresses offsets from `base` (the page of its start).
struct FunctionTable {
    base: u64,
    bytes: Box<[u8]>,
    pushed: bool,
}

impl PdataUnwind {
    /// Declines (the caller builds the whole table) anything but a PE32+ x64 image whose
    /// exception directory lies in the file, and images with extra files (a PE image's
    /// table comes from itself alone).
    pub fn new(binary: FileBytes, extra: &[FileBytes]) -> Result<PdataUnwind, Declined> {
        if !extra.is_empty() {
            return Err(Declined("a PE image with extra files"));
        }
        let data: &[u8] = (*binary).as_ref();
        let file = object::File::parse(data).map_err(|_| Declined("not an object file"))?;
        let (rva, size) = pdata_of(&file).ok_or(Declined("not an x64 image with .pdata"))?;
        let slice = image_reader(&file)(rva, size as usize)
            .ok_or(Declined("the .pdata is not all in the file"))?;
        // where the reader found it: an offset into the file's bytes
        let start = (slice.as_ptr() as usize)
            .checked_sub(data.as_ptr() as usize)
            .ok_or(Declined("the .pdata is not in the file"))?;
        let pdata = start..start + slice.len();
        let count = slice.len() / ENTRY_SIZE;
        Ok(PdataUnwind {
            binary,
            pdata,
            per_function: OnceLock::new(),
            tables: (0..count).map(|_| OnceLock::new()).collect(),
            whole: OnceLock::new(),
            inputs: OnceLock::new(),
        })
    }

    fn bytes(&self) -> &[u8] {
        (*self.binary).as_ref()
    }

    /// Entry `i`: (begin, end, unwind info) RVAs.
    fn entry(&self, i: usize) -> Option<(u32, u32, u32)> {
        let pdata = self.bytes().get(self.pdata.clone())?;
        pdata.chunks_exact(ENTRY_SIZE).nth(i).map(decode_entry)
    }

    fn entries(&self) -> Vec<(u32, u32, u32)> {
        let pdata = self.bytes().get(self.pdata.clone()).unwrap_or_default();
        pdata.chunks_exact(ENTRY_SIZE).map(decode_entry).collect()
    }

    /// Whether per-function answers equal the whole table's: every entry non-empty,
    /// sorted, none starting before the previous one ends.
    pub fn per_function(&self) -> bool {
        *self.per_function.get_or_init(|| {
            let entries = self.entries();
            entries.iter().all(|&(b, e, _)| b < e) && entries.windows(2).all(|w| w[0].1 <= w[1].0)
        })
    }

    fn whole(&self) -> &(Box<[u8]>, Vec<usize>) {
        self.whole
            .get_or_init(|| match build_from_elf(self.bytes(), &[]) {
                Ok(b) => (b.bytes.into_boxed_slice(), b.inputs),
                Err(_) => (Box::default(), Vec::new()),
            })
    }

    /// The entry whose range holds `rel`, by binary search.
    fn entry_holding(&self, rel: u64) -> Option<usize> {
        let rel = u32::try_from(rel).ok()?;
        let (mut lo, mut hi) = (0usize, self.tables.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (begin, _, _) = self.entry(mid)?;
            if begin <= rel {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let i = lo.checked_sub(1)?;
        let (begin, end, _) = self.entry(i)?;
        (begin <= rel && rel < end).then_some(i)
    }

    /// The rule for table offset `rel` (an RVA): the one the whole table gives there.
    pub fn find_rule(&self, rel: u64) -> Option<Rule<'_>> {
        if self.per_function() {
            if let Some(i) = self.entry_holding(rel) {
                let t = self.tables.get(i)?.get_or_init(|| self.build_function(i));
                return UnwindTable::open(&t.bytes)
                    .ok()?
                    .find(rel.checked_sub(t.base)?);
            }
        }
        UnwindTable::open(&self.whole().0).ok()?.find(rel)
    }

    /// The whole table's sources: `.pdata` (noted whenever the image has one).
    pub fn sources(&self) -> Vec<UnwindSource> {
        vec![UnwindSource::Pdata]
    }

    /// The whole build's `inputs`: `[0]` when a function (or the leaf rule) gives a row.
    pub fn inputs(&self) -> Vec<usize> {
        self.inputs
            .get_or_init(|| {
                let any = self.per_function()
                    && self
                        .tables
                        .iter()
                        .enumerate()
                        .any(|(i, t)| t.get_or_init(|| self.build_function(i)).pushed);
                if any {
                    vec![0]
                } else {
                    self.whole().1.clone()
                }
            })
            .clone()
    }

    /// The table of entry `i`'s function alone.
    fn build_function(&self, i: usize) -> FunctionTable {
        let mut w = TableWriter::new(Arch::X86_64);
        let mut base = 0;
        if let (Ok(file), Some((begin, end, info))) =
            (object::File::parse(self.bytes()), self.entry(i))
        {
            base = u64::from(begin) & !0xfff;
            // a function whose unwind info cannot be read has no rows, as in the whole table
            let _ = add_function(&mut w, &image_reader(&file), begin, end, info);
        }
        let pushed = w.ranges_added() > 0;
        w.rebase(base);
        FunctionTable {
            base,
            bytes: w.finish().bytes.into_boxed_slice(),
            pushed,
        }
    }
}

/// A `RUNTIME_FUNCTION`'s (begin, end, unwind info) RVAs, from its 12 bytes.
fn decode_entry(b: &[u8]) -> (u32, u32, u32) {
    let word = |k: usize| {
        b.get(k..k + 4)
            .map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
    };
    (word(0), word(4), word(8))
}

impl std::fmt::Debug for PdataUnwind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PdataUnwind")
            .field("functions", &self.tables.len())
            .finish()
    }
}
