//! The serialized unwind table: layout, version history and the writer.
//!
//! ```text
//! Header (64 bytes, little-endian)
//! page_index   (page_count + 1) × u32   index of the first row whose start ≥ page << 16
//! row_offsets  row_count × u16          row start minus its page's base (start & PAGE_MASK)
//! row_rules    row_count × u16 | u32    palette index (width in the header); 0 = no rule
//! palette      palette_count × RuleRecord (120 bytes each); entry 0 is RuleRecord::NONE
//! expressions  expr_len bytes           DWARF expressions referenced by slots
//! ```
//!
//! Row starts are offsets from the binary's link-time base (lowest `PT_LOAD` vaddr, page
//! aligned), so one table serves every load address. A row lasts until the next row's start;
//! the builder ends every described range with an explicit no-rule row, so a lookup never
//! falls into a neighbour's rule. A row costs 4 bytes (2 + 2) while the palette has fewer
//! than 65 536 distinct rules, which real binaries do. Pages are 4 KiB: a page then holds a
//! few dozen rows, so the binary search after the page-index step touches one or two
//! cache lines (with 64 KiB pages it was hundreds of rows and several cache misses); the
//! index costs 4 bytes per 4 KiB of code.
//!
//! # Version history
//! - 1: first version (64 KiB pages).
//! - 2: 4 KiB pages (`PAGE_SHIFT` 12): faster lookups in large binaries.

use bytemuck::{Pod, Zeroable};

use super::rule::RuleRecord;
use crate::dump::Arch;

/// Magic at offset 0.
pub const MAGIC: [u8; 8] = *b"PMUNWTAB";
/// Bumped on any change of layout or meaning; an older table is rebuilt, never misread.
pub const UNWIND_TABLE_VERSION: u32 = 3;
/// Bytes of the header.
pub const HEADER_SIZE: usize = 64;
/// Row starts must be below this (4 GiB from the link base); the builder drops others.
pub const MAX_ADDRESS: u64 = 1 << 32;
/// log2 of the page size of the row index.
pub const PAGE_SHIFT: u32 = 12;
/// Mask of a row start's offset within its page.
pub const PAGE_MASK: u64 = (1 << PAGE_SHIFT) - 1;

/// The fixed header.
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq, Eq)]
#[repr(C)]
pub struct Header {
    pub magic: [u8; 8],
    pub version: u32,
    /// 0 x86_64, 1 aarch64, 2 x86, 3 arm.
    pub arch: u32,
    pub row_count: u32,
    pub page_count: u32,
    pub palette_count: u32,
    /// 2 or 4: bytes per palette index.
    pub index_width: u32,
    pub expr_len: u32,
    /// Bit mask of `UnwindSource::bit()` for the sources the rows came from.
    pub sources: u32,
    pub _reserved: [u32; 6],
}

const _: () = assert!(std::mem::size_of::<Header>() == HEADER_SIZE);

pub fn arch_code(arch: Arch) -> u32 {
    match arch {
        Arch::X86_64 => 0,
        Arch::Aarch64 => 1,
        Arch::X86 => 2,
        Arch::Arm => 3,
    }
}

pub fn arch_from_code(code: u32) -> Option<Arch> {
    Some(match code {
        0 => Arch::X86_64,
        1 => Arch::Aarch64,
        2 => Arch::X86,
        3 => Arch::Arm,
        _ => return None,
    })
}

/// Serializes finished rows. `rows` are sorted by start, starts are unique and below
/// [`MAX_ADDRESS`], and every rule index is below `palette.len()`; `palette[0]` is
/// [`RuleRecord::NONE`]. The builder guarantees all of this.
pub(crate) fn write(
    arch: Arch,
    sources: u32,
    rows: &[(u32, u32)],
    palette: &[RuleRecord],
    expressions: &[u8],
) -> Vec<u8> {
    let page_count = rows
        .last()
        .map(|&(start, _)| (start >> PAGE_SHIFT) + 1)
        .unwrap_or(0);
    let index_width: u32 = if palette.len() <= 1 << 16 { 2 } else { 4 };
    let header = Header {
        magic: MAGIC,
        version: UNWIND_TABLE_VERSION,
        arch: arch_code(arch),
        row_count: rows.len() as u32,
        page_count,
        palette_count: palette.len() as u32,
        index_width,
        expr_len: expressions.len() as u32,
        sources,
        _reserved: [0; 6],
    };
    let size = HEADER_SIZE
        + (page_count as usize + 1) * 4
        + rows.len() * (2 + index_width as usize)
        + std::mem::size_of_val(palette)
        + expressions.len();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(bytemuck::bytes_of(&header));
    // page index: first row with start >= page << 16, for pages 0..=page_count
    let mut row = 0usize;
    for page in 0..=page_count {
        let page_base = u64::from(page) << PAGE_SHIFT;
        while row < rows.len() && u64::from(rows[row].0) < page_base {
            row += 1;
        }
        out.extend_from_slice(&(row as u32).to_le_bytes());
    }
    for &(start, _) in rows {
        out.extend_from_slice(&((u64::from(start) & PAGE_MASK) as u16).to_le_bytes());
    }
    for &(_, rule) in rows {
        if index_width == 2 {
            out.extend_from_slice(&(rule as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&rule.to_le_bytes());
        }
    }
    for rec in palette {
        out.extend_from_slice(bytemuck::bytes_of(rec));
    }
    out.extend_from_slice(expressions);
    debug_assert_eq!(out.len(), size);
    out
}
