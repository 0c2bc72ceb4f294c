//! Opening a serialized symbol table and looking up the inline stack at an address.
//!
//! [`SymbolTable::open`] checks the header and that every section lies inside the bytes,
//! once. [`SymbolTable::lookup`] is then a few binary searches over fixed-size records
//! (function, line row, one per inline depth) read with unaligned `Pod` reads: no
//! deserialization pass, no allocation besides pushing to the caller's vector. Bytes that
//! passed `open` but are still inconsistent (a hostile table) make lookups answer less or
//! nothing, never panic.

use bytemuck::Pod;

use super::error::SymbolsError;
use super::format::{
    self, FunctionRecord, Header, InlineRecord, LineRecord, HEADER_SIZE, MAX_ADDRESS, NONE,
};
use super::{SymbolFrame, SymbolSource};

/// A borrowed, validated view of a serialized symbol table.
#[derive(Clone, Copy)]
pub struct SymbolTable<'a> {
    sources: u32,
    functions: &'a [u8],
    lines: &'a [u8],
    depth_index: &'a [u8],
    inlines: &'a [u8],
    files: &'a [u8],
    strings: &'a [u8],
}

impl std::fmt::Debug for SymbolTable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymbolTable")
            .field("functions", &self.function_count())
            .field("lines", &self.line_count())
            .field("inlines", &self.inline_count())
            .finish()
    }
}

/// The record at index `i` of a section of `T`s, if it lies inside the section.
fn record<T: Pod>(section: &[u8], i: usize) -> Option<T> {
    let size = std::mem::size_of::<T>();
    let start = i.checked_mul(size)?;
    Some(bytemuck::pod_read_unaligned(
        section.get(start..start.checked_add(size)?)?,
    ))
}

fn u32_at(section: &[u8], i: usize) -> Option<u32> {
    record::<[u8; 4]>(section, i).map(u32::from_le_bytes)
}

/// Index of the last record in `0..len` whose key is ≤ `key`, for records sorted by key.
/// # Bounded time: O(log len)
fn last_at_or_before(len: usize, key: u32, key_of: impl Fn(usize) -> Option<u32>) -> Option<usize> {
    let (mut lo, mut hi) = (0usize, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if key_of(mid)? <= key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.checked_sub(1)
}

impl<'a> SymbolTable<'a> {
    /// Validates the header and section bounds.
    pub fn open(bytes: &'a [u8]) -> Result<Self, SymbolsError> {
        let head = bytes
            .get(..HEADER_SIZE)
            .ok_or(SymbolsError::TableTruncated)?;
        let header: Header = bytemuck::pod_read_unaligned(head);
        if header.magic != format::MAGIC {
            return Err(SymbolsError::TableMagic);
        }
        if header.version != format::SYMBOL_TABLE_VERSION {
            return Err(SymbolsError::TableVersion(header.version));
        }
        let n = |v: u32| usize::try_from(v).map_err(|_| SymbolsError::TableCorrupt("size"));
        let mut rest = &bytes[HEADER_SIZE..];
        let mut take = |len: Option<usize>| -> Result<&'a [u8], SymbolsError> {
            let len = len.ok_or(SymbolsError::TableCorrupt("section size overflows"))?;
            if rest.len() < len {
                return Err(SymbolsError::TableTruncated);
            }
            let (a, b) = rest.split_at(len);
            rest = b;
            Ok(a)
        };
        let functions =
            take(n(header.function_count)?.checked_mul(std::mem::size_of::<FunctionRecord>()))?;
        let lines = take(n(header.line_count)?.checked_mul(std::mem::size_of::<LineRecord>()))?;
        let depth_index = take(
            n(header.depth_count)?
                .checked_add(1)
                .and_then(|d| d.checked_mul(4)),
        )?;
        let inlines =
            take(n(header.inline_count)?.checked_mul(std::mem::size_of::<InlineRecord>()))?;
        let files = take(n(header.file_count)?.checked_mul(4))?;
        let strings = take(Some(n(header.strings_len)?))?;
        if !rest.is_empty() {
            return Err(SymbolsError::TableCorrupt("trailing bytes"));
        }
        if u32_at(depth_index, 0) != Some(0)
            || u32_at(depth_index, n(header.depth_count)?) != Some(header.inline_count)
        {
            return Err(SymbolsError::TableCorrupt("depth index"));
        }
        Ok(SymbolTable {
            sources: header.sources,
            functions,
            lines,
            depth_index,
            inlines,
            files,
            strings,
        })
    }

    pub fn function_count(&self) -> usize {
        self.functions.len() / std::mem::size_of::<FunctionRecord>()
    }
    pub fn line_count(&self) -> usize {
        self.lines.len() / std::mem::size_of::<LineRecord>()
    }
    pub fn inline_count(&self) -> usize {
        self.inlines.len() / std::mem::size_of::<InlineRecord>()
    }
    fn depth_count(&self) -> usize {
        (self.depth_index.len() / 4).saturating_sub(1)
    }

    /// The source files the table's lines and inlined calls name, in table order, each
    /// once: what `postmortem upload --include-sources` puts in a build's bundle, spelled
    /// as the report's frames spell them.
    pub fn source_files(&self) -> Vec<&'a str> {
        (0..self.files.len() / 4)
            .filter_map(|i| self.string(u32_at(self.files, i)?))
            .collect()
    }

    /// The sources the functions came from.
    pub fn sources(&self) -> Vec<SymbolSource> {
        SymbolSource::ALL
            .into_iter()
            .filter(|s| self.sources & s.bit() != 0)
            .collect()
    }

    /// Every function as (start, end, name, source), for tests and diagnostics.
    pub fn functions(
        &self,
    ) -> impl Iterator<Item = (u64, u64, Option<&'a str>, Option<SymbolSource>)> + '_ {
        (0..self.function_count()).filter_map(move |i| {
            let f: FunctionRecord = record(self.functions, i)?;
            Some((
                u64::from(f.start),
                u64::from(f.end),
                self.string(f.name),
                SymbolSource::from_code(f.source),
            ))
        })
    }

    /// The string at a string offset; `None` for [`NONE`], out-of-bounds or non-UTF-8.
    fn string(&self, offset: u32) -> Option<&'a str> {
        if offset == NONE {
            return None;
        }
        let start = usize::try_from(offset).ok()?;
        let len = u32::from_le_bytes(
            self.strings
                .get(start..start.checked_add(4)?)?
                .try_into()
                .ok()?,
        );
        let from = start.checked_add(4)?;
        let bytes = self
            .strings
            .get(from..from.checked_add(usize::try_from(len).ok()?)?)?;
        std::str::from_utf8(bytes).ok()
    }

    fn file(&self, index: u32) -> Option<&'a str> {
        if index == NONE {
            return None;
        }
        self.string(u32_at(self.files, usize::try_from(index).ok()?)?)
    }

    /// The function record covering `addr`.
    fn function_at(&self, addr: u32) -> Option<FunctionRecord> {
        let i = last_at_or_before(self.function_count(), addr, |i| {
            record::<FunctionRecord>(self.functions, i).map(|f| f.start)
        })?;
        let f: FunctionRecord = record(self.functions, i)?;
        (addr < f.end).then_some(f)
    }

    /// The line row covering `addr`, unless it is an end-of-sequence row.
    fn line_at(&self, addr: u32) -> Option<LineRecord> {
        let i = last_at_or_before(self.line_count(), addr, |i| {
            record::<LineRecord>(self.lines, i).map(|l| l.address)
        })?;
        let l: LineRecord = record(self.lines, i)?;
        (l.file != NONE).then_some(l)
    }

    /// The inline record of `depth` covering `addr`.
    fn inline_at(&self, depth: usize, addr: u32) -> Option<InlineRecord> {
        let first = usize::try_from(u32_at(self.depth_index, depth)?).ok()?;
        let end = usize::try_from(u32_at(self.depth_index, depth.checked_add(1)?)?).ok()?;
        let len = end.checked_sub(first)?;
        let i = last_at_or_before(len, addr, |i| {
            record::<InlineRecord>(self.inlines, first.checked_add(i)?).map(|r| r.start)
        })?;
        let r: InlineRecord = record(self.inlines, first.checked_add(i)?)?;
        (addr < r.end).then_some(r)
    }

    /// Inline stack at `offset` (from the link base), innermost first; the last entry is
    /// the outermost (non-inlined) function. Appends to `out`; returns whether anything
    /// was found.
    /// # Bounded time: O(depth × log n); no allocation besides `out`
    pub fn lookup(&self, offset: u64, out: &mut Vec<SymbolFrame<'a>>) -> bool {
        if offset >= MAX_ADDRESS {
            return false;
        }
        let addr = offset as u32;
        let function = self.function_at(addr);
        let line = self.line_at(addr);
        if function.is_none() && line.is_none() {
            return false;
        }
        let source = function
            .and_then(|f| SymbolSource::from_code(f.source))
            .unwrap_or(SymbolSource::Dwarf);
        let nonzero = |v: u32| (v != 0).then_some(v);
        // Location of the innermost entry: the line row.
        let (mut file, mut line_no, mut column) = match line {
            // A column means nothing without a line.
            Some(l) => (
                self.file(l.file),
                nonzero(l.line),
                nonzero(l.column).filter(|_| l.line != 0),
            ),
            None => (None, None, None),
        };
        // Inline chain, outermost first: find its length, then emit innermost first.
        let mut depth = 0usize;
        if matches!(
            source,
            SymbolSource::Dwarf | SymbolSource::Breakpad | SymbolSource::Pdb
        ) {
            while depth < self.depth_count() && self.inline_at(depth, addr).is_some() {
                depth += 1;
            }
        }
        for d in (0..depth).rev() {
            let Some(r) = self.inline_at(d, addr) else {
                continue;
            };
            out.push(SymbolFrame {
                function: self.string(r.name),
                function_start: None,
                file,
                line: line_no,
                column,
                inlined: true,
                // a PDB's inlined calls are its own; a .sym file's come from DWARF
                source: if source == SymbolSource::Pdb {
                    SymbolSource::Pdb
                } else {
                    SymbolSource::Dwarf
                },
            });
            file = self.file(r.call_file);
            line_no = nonzero(r.call_line);
            column = nonzero(r.call_column);
        }
        out.push(SymbolFrame {
            function: function.and_then(|f| self.string(f.name)),
            function_start: function.map(|f| u64::from(f.start)),
            file,
            line: line_no,
            column,
            inlined: false,
            source,
        });
        true
    }
}
