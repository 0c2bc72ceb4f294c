//! Opening a serialized unwind table and looking up the rule for an address.
//!
//! [`UnwindTable::open`] checks the header and that every section lies inside the bytes,
//! once. [`UnwindTable::find`] is then a page-index step and a binary search over 16-bit
//! row offsets, and one unaligned read of a palette record: no deserialization pass, no
//! allocation, no hashing. Bytes that passed `open` but are still inconsistent (a hostile
//! table) make lookups answer `None`, never panic.

use super::error::UnwindError;
use super::format::{self, Header, HEADER_SIZE, PAGE_MASK, PAGE_SHIFT};
use super::rule::{RuleRecord, Slot, UnwindSource};
use crate::dump::Arch;

const RECORD_SIZE: usize = std::mem::size_of::<RuleRecord>();

/// A borrowed, validated view of a serialized unwind table.
#[derive(Clone, Copy)]
pub struct UnwindTable<'a> {
    arch: Arch,
    sources: u32,
    row_count: usize,
    page_count: usize,
    index_width: usize,
    page_index: &'a [u8],
    row_offsets: &'a [u8],
    row_rules: &'a [u8],
    palette: &'a [u8],
    expressions: &'a [u8],
    /// Typed views of the sections when the bytes are suitably aligned on a
    /// little-endian host (the usual case: a heap buffer); lookups then search native
    /// slices. Otherwise every read goes through the bounds-checked byte path.
    fast: Option<FastView<'a>>,
}

#[derive(Clone, Copy)]
struct FastView<'a> {
    page_index: &'a [u32],
    row_offsets: &'a [u16],
}

impl std::fmt::Debug for UnwindTable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnwindTable")
            .field("arch", &self.arch)
            .field("rows", &self.row_count)
            .field("palette", &self.palette_len())
            .finish()
    }
}

/// The rule found for an address, borrowing the table's expression area.
#[derive(Debug, Clone, Copy)]
pub struct Rule<'a> {
    pub record: RuleRecord,
    expressions: &'a [u8],
}

impl Rule<'static> {
    /// A rule whose slots refer to no expression (Breakpad's, say), owning nothing.
    pub fn without_expressions(record: RuleRecord) -> Self {
        Rule {
            record,
            expressions: &[],
        }
    }
}

impl<'a> Rule<'a> {
    /// The bytes of the expression a slot refers to, if they lie inside the table.
    pub fn expression(&self, slot: Slot) -> Option<&'a [u8]> {
        let start = usize::try_from(slot.value).ok()?;
        self.expressions
            .get(start..start.checked_add(usize::from(slot.expr_len))?)
    }
    pub fn source(&self) -> Option<UnwindSource> {
        self.record.source()
    }
}

fn u32_at(bytes: &[u8], i: usize) -> Option<u32> {
    let b = bytes.get(i.checked_mul(4)?..i.checked_mul(4)?.checked_add(4)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

fn u16_at(bytes: &[u8], i: usize) -> Option<u16> {
    let b = bytes.get(i.checked_mul(2)?..i.checked_mul(2)?.checked_add(2)?)?;
    Some(u16::from_le_bytes(b.try_into().ok()?))
}

impl<'a> UnwindTable<'a> {
    /// Validates the header and section bounds.
    pub fn open(bytes: &'a [u8]) -> Result<Self, UnwindError> {
        let head = bytes
            .get(..HEADER_SIZE)
            .ok_or(UnwindError::TableTruncated)?;
        let header: Header = bytemuck::pod_read_unaligned(head);
        if header.magic != format::MAGIC {
            return Err(UnwindError::TableMagic);
        }
        if header.version != format::UNWIND_TABLE_VERSION {
            return Err(UnwindError::TableVersion(header.version));
        }
        let arch = format::arch_from_code(header.arch).ok_or(UnwindError::TableCorrupt("arch"))?;
        let index_width = match header.index_width {
            2 => 2usize,
            4 => 4,
            _ => return Err(UnwindError::TableCorrupt("index width")),
        };
        let to_usize = |v: u32| usize::try_from(v).map_err(|_| UnwindError::TableCorrupt("size"));
        let row_count = to_usize(header.row_count)?;
        let page_count = to_usize(header.page_count)?;
        let palette_count = to_usize(header.palette_count)?;
        let expr_len = to_usize(header.expr_len)?;
        let mut rest = &bytes[HEADER_SIZE..];
        let mut take = |len: Option<usize>| -> Result<&'a [u8], UnwindError> {
            let len = len.ok_or(UnwindError::TableCorrupt("section size overflows"))?;
            if rest.len() < len {
                return Err(UnwindError::TableTruncated);
            }
            let (a, b) = rest.split_at(len);
            rest = b;
            Ok(a)
        };
        let page_index = take(page_count.checked_add(1).and_then(|n| n.checked_mul(4)))?;
        let row_offsets = take(row_count.checked_mul(2))?;
        let row_rules = take(row_count.checked_mul(index_width))?;
        let palette = take(palette_count.checked_mul(RECORD_SIZE))?;
        let expressions = take(Some(expr_len))?;
        if !rest.is_empty() {
            return Err(UnwindError::TableCorrupt("trailing bytes"));
        }
        let fast = if cfg!(target_endian = "little") {
            match (
                bytemuck::try_cast_slice::<u8, u32>(page_index),
                bytemuck::try_cast_slice::<u8, u16>(row_offsets),
            ) {
                (Ok(page_index), Ok(row_offsets)) => Some(FastView {
                    page_index,
                    row_offsets,
                }),
                _ => None,
            }
        } else {
            None
        };
        Ok(UnwindTable {
            fast,
            arch,
            sources: header.sources,
            row_count,
            page_count,
            index_width,
            page_index,
            row_offsets,
            row_rules,
            palette,
            expressions,
        })
    }

    pub fn arch(&self) -> Arch {
        self.arch
    }
    pub fn row_count(&self) -> usize {
        self.row_count
    }
    pub fn palette_len(&self) -> usize {
        self.palette.len() / RECORD_SIZE
    }
    /// The unwind sources the rows came from.
    pub fn sources(&self) -> Vec<UnwindSource> {
        use strum::VariantArray;
        UnwindSource::VARIANTS
            .iter()
            .copied()
            .filter(|s| self.sources & s.bit() != 0)
            .collect()
    }

    /// The index of the row covering `addr` (offset from the link base).
    /// # Bounded time, no allocation
    fn row_for(&self, addr: u64) -> Option<usize> {
        // Tables describe [0, MAX_ADDRESS): a range clipped there has no terminator row,
        // and must not answer for addresses past the format's reach.
        if addr >= format::MAX_ADDRESS {
            return None;
        }
        let page = usize::try_from(addr >> PAGE_SHIFT).ok()?;
        if page >= self.page_count {
            // Past the last row's page: the last row (always a no-rule terminator from
            // our builder) covers it.
            return self.row_count.checked_sub(1);
        }
        let within = (addr & PAGE_MASK) as u16;
        if let Some(f) = &self.fast {
            let lo = *f.page_index.get(page)? as usize;
            let hi = (*f.page_index.get(page + 1)? as usize).min(self.row_count);
            let rows = f.row_offsets.get(lo.min(hi)..hi)?;
            // last row in the page whose offset <= within; none: the previous page's last
            let n = rows.partition_point(|&o| o <= within);
            return (lo.min(hi) + n).checked_sub(1);
        }
        let lo = u32_at(self.page_index, page)? as usize;
        let hi = (u32_at(self.page_index, page + 1)? as usize).min(self.row_count);
        // first row in [lo, hi) whose offset > within
        let (mut l, mut h) = (lo.min(hi), hi);
        while l < h {
            let mid = l + (h - l) / 2;
            if u16_at(self.row_offsets, mid)? <= within {
                l = mid + 1;
            } else {
                h = mid;
            }
        }
        l.checked_sub(1)
    }

    /// The rule covering `addr` (an offset from the binary's link base), or `None` where
    /// the table has no information.
    /// # Bounded time, no allocation
    pub fn find(&self, addr: u64) -> Option<Rule<'a>> {
        let row = self.row_for(addr)?;
        let rule = if self.index_width == 2 {
            usize::from(u16_at(self.row_rules, row)?)
        } else {
            u32_at(self.row_rules, row)? as usize
        };
        if rule == 0 {
            return None;
        }
        let off = rule.checked_mul(RECORD_SIZE)?;
        let rec = self.palette.get(off..off.checked_add(RECORD_SIZE)?)?;
        Some(Rule {
            record: bytemuck::pod_read_unaligned(rec),
            expressions: self.expressions,
        })
    }

    /// Every row as (start, rule or None), for tests and diagnostics.
    pub fn rows(&self) -> impl Iterator<Item = (u64, Option<RuleRecord>)> + '_ {
        let mut page = 0usize;
        (0..self.row_count).map(move |row| {
            while page < self.page_count
                && u32_at(self.page_index, page + 1).is_some_and(|first| first as usize <= row)
            {
                page += 1;
            }
            let start = ((page as u64) << PAGE_SHIFT)
                | u64::from(u16_at(self.row_offsets, row).unwrap_or(0));
            let rule = if self.index_width == 2 {
                u16_at(self.row_rules, row).map(usize::from)
            } else {
                u32_at(self.row_rules, row).map(|v| v as usize)
            };
            let rec = rule.filter(|&r| r != 0).and_then(|r| {
                let off = r.checked_mul(RECORD_SIZE)?;
                let b = self.palette.get(off..off.checked_add(RECORD_SIZE)?)?;
                Some(bytemuck::pod_read_unaligned::<RuleRecord>(b))
            });
            (start, rec)
        })
    }
}
