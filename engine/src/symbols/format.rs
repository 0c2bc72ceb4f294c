//! The serialized symbol table: layout, version history and the writer.
//!
//! ```text
//! Header (64 bytes, little-endian)
//! functions     function_count × FunctionRecord (16 bytes), sorted by start, disjoint
//! lines         line_count × LineRecord (16 bytes), sorted by address, unique addresses
//! depth_index   (depth_count + 1) × u32   first inline record of each depth
//! inlines       inline_count × InlineRecord (24 bytes), sorted by (depth, start)
//! files         file_count × u32          string offsets of source file paths
//! strings       strings_len bytes         each string: u32 length, then UTF-8 bytes
//! ```
//!
//! Addresses are offsets from the binary's link base (see `binary::link_base`), so one
//! table serves every load address; they must be below [`MAX_ADDRESS`]. A function lasts
//! from `start` to `end` (exclusive). A line row lasts until the next row; a row whose
//! file is [`NONE`] ends a line sequence (no line information from there on). Inline
//! records of one depth never overlap in a table our builder wrote, so the inline stack at
//! an address is one binary search per depth, outermost (depth 0) first.
//!
//! Nothing is deserialized: lookups read records with unaligned `Pod` reads straight from
//! the bytes. Name and file references are byte offsets into the string area; [`NONE`]
//! means absent.
//!
//! # Version history
//! - 1: first version.
//! - 2: same layout; PLT stubs are named `<function>@plt` (a version-1 table lacks them,
//!   so stored ones are rebuilt and reprocessing picks the names up).

use bytemuck::{Pod, Zeroable};

/// Magic at offset 0.
pub const MAGIC: [u8; 8] = *b"PMSYMTAB";
/// Bumped on any change of layout or meaning; an older table is rebuilt, never misread.
pub const SYMBOL_TABLE_VERSION: u32 = 3;
/// Bytes of the header.
pub const HEADER_SIZE: usize = 64;
/// Addresses must be below this (4 GiB from the link base); the builder drops others.
pub const MAX_ADDRESS: u64 = 1 << 32;
/// "Absent" for name, file and string references.
pub const NONE: u32 = u32::MAX;

/// The fixed header.
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq, Eq)]
#[repr(C)]
pub struct Header {
    pub magic: [u8; 8],
    pub version: u32,
    /// Bit mask of `SymbolSource::bit()` for the sources the functions came from.
    pub sources: u32,
    pub function_count: u32,
    pub line_count: u32,
    pub depth_count: u32,
    pub inline_count: u32,
    pub file_count: u32,
    pub strings_len: u32,
    pub _reserved: [u32; 6],
}

/// One function (or symbol) range.
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq, Eq)]
#[repr(C)]
pub struct FunctionRecord {
    pub start: u32,
    pub end: u32,
    /// String offset of the demangled name, or [`NONE`].
    pub name: u32,
    /// `SymbolSource::code()`.
    pub source: u32,
}

/// One line-table row.
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq, Eq)]
#[repr(C)]
pub struct LineRecord {
    pub address: u32,
    /// Index into the file table, or [`NONE`] for an end-of-sequence row.
    pub file: u32,
    /// 0 = unknown.
    pub line: u32,
    /// 0 = unknown.
    pub column: u32,
}

/// One range of an inlined call. Its depth is given by the depth index.
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq, Eq)]
#[repr(C)]
pub struct InlineRecord {
    pub start: u32,
    pub end: u32,
    /// String offset of the inlined function's demangled name, or [`NONE`].
    pub name: u32,
    /// Index into the file table of the call site, or [`NONE`].
    pub call_file: u32,
    /// 0 = unknown.
    pub call_line: u32,
    /// 0 = unknown.
    pub call_column: u32,
}

const _: () = assert!(std::mem::size_of::<Header>() == HEADER_SIZE);
const _: () = assert!(std::mem::size_of::<FunctionRecord>() == 16);
const _: () = assert!(std::mem::size_of::<LineRecord>() == 16);
const _: () = assert!(std::mem::size_of::<InlineRecord>() == 24);

/// The finished, sorted content of a table; [`write`] serializes it.
#[derive(Debug, Default)]
pub(crate) struct TableParts {
    pub sources: u32,
    pub functions: Vec<FunctionRecord>,
    pub lines: Vec<LineRecord>,
    /// Inline records grouped by depth: `inlines[d]` sorted by start.
    pub inlines: Vec<Vec<InlineRecord>>,
    pub files: Vec<u32>,
    pub strings: Vec<u8>,
}

fn count(n: usize, what: &'static str) -> Result<u32, super::SymbolsError> {
    u32::try_from(n).map_err(|_| super::SymbolsError::TooLarge(what))
}

/// Serializes finished parts. The builder guarantees sorting and reference validity.
pub(crate) fn write(parts: &TableParts) -> Result<Vec<u8>, super::SymbolsError> {
    let inline_count: usize = parts.inlines.iter().map(Vec::len).sum();
    let header = Header {
        magic: MAGIC,
        version: SYMBOL_TABLE_VERSION,
        sources: parts.sources,
        function_count: count(parts.functions.len(), "functions")?,
        line_count: count(parts.lines.len(), "line rows")?,
        depth_count: count(parts.inlines.len(), "inline depth")?,
        inline_count: count(inline_count, "inline records")?,
        file_count: count(parts.files.len(), "files")?,
        strings_len: count(parts.strings.len(), "strings")?,
        _reserved: [0; 6],
    };
    let size = HEADER_SIZE
        + std::mem::size_of_val(parts.functions.as_slice())
        + std::mem::size_of_val(parts.lines.as_slice())
        + (parts.inlines.len() + 1) * 4
        + inline_count * std::mem::size_of::<InlineRecord>()
        + parts.files.len() * 4
        + parts.strings.len();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(bytemuck::bytes_of(&header));
    out.extend_from_slice(bytemuck::cast_slice(&parts.functions));
    out.extend_from_slice(bytemuck::cast_slice(&parts.lines));
    let mut first = 0usize;
    for depth in &parts.inlines {
        out.extend_from_slice(&count(first, "inline records")?.to_le_bytes());
        first += depth.len();
    }
    out.extend_from_slice(&count(first, "inline records")?.to_le_bytes());
    for depth in &parts.inlines {
        out.extend_from_slice(bytemuck::cast_slice(depth));
    }
    for f in &parts.files {
        out.extend_from_slice(&f.to_le_bytes());
    }
    out.extend_from_slice(&parts.strings);
    debug_assert_eq!(out.len(), size);
    Ok(out)
}
