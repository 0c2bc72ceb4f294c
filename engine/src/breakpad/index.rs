//! A Breakpad `.sym` file indexed for one walk: its tables built only where the walk looks.
//!
//! `postmortem walk` builds a module's tables, walks one dump and exits. For a libc-sized
//! `.sym` file (3 MB, 10^5 records) building the two whole tables costs several times the
//! walk itself, while the walk visits a few dozen functions. [`BreakpadIndex::new`] reads
//! the text once and cheaply — each record's kind, address and extent; no rules, names or
//! lines — and then:
//! - [`BreakpadIndex::find_rule`] builds the unwind rows of one `STACK CFI INIT` block (the
//!   `INIT` line and every line up to the next `INIT`) the first time the walk looks inside
//!   it, with the whole-file builder ([`crate::breakpad::unwind::build_from_breakpad`]), and keeps
//!   them;
//! - [`BreakpadIndex::symbols_for`] builds a symbol table from the records the walk's
//!   addresses need — per address, the `FUNC` block with the greatest start at or before
//!   it, and for the nearest `PUBLIC` symbol before it that symbol with its aliases, the
//!   symbols at the next address and the `FUNC` blocks around it (together they decide
//!   where it starts and ends) — plus every `FILE` and `INLINE_ORIGIN` line, in file
//!   order, with the whole-file builder ([`crate::breakpad::symbols::build_symbol_table_breakpad`]).
//!
//! [`BreakpadIndex::from_file`] reads a file in small pieces and keeps it open: the lines
//! needed later are read back by offset, so no copy of the file is held (on a virtual
//! machine the page faults of such a copy cost more than the indexing).
//!
//! Both equal the whole-file tables at every address asked about when the file is laid out
//! as `dump_syms` writes it: the `MODULE` line first, the whole text UTF-8, `FUNC` ranges
//! disjoint, `STACK CFI INIT` ranges disjoint (records the builder cannot read are skipped
//! here exactly as there) and each `FUNC`'s line and `INLINE` records inside it. The index
//! declines files that break the first three and the caller builds the whole tables. The
//! last is not checked (it would mean parsing every line record, the cost this module
//! avoids): a line record spilling past its function gives a line to addresses beyond it
//! in the whole table and not here (both answers are garbage from such a file). The
//! service keeps building whole tables: it caches them and walks many dumps with them.

use std::borrow::Cow;
use std::io::Read;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::tokenize::{self, classify_str, parse_module_line, Record};
use super::unwind::breakpad_arch;
use crate::dump::Arch;
use crate::symbols::{self, BuiltSymbols, SymbolsError};
use crate::unwind::{Rule, UnwindTable};

/// Bytes read from a file at a time while indexing: a buffer this size is reused, so a
/// large file costs no page faults for a copy of itself (each fresh page costs several
/// microseconds on a virtual machine: for a one-shot walk they were most of the cost).
const CHUNK: usize = 32 * 1024;

/// Lines the symbol table needs that are at most this far apart are read at once.
const READ_GAP: usize = 4096;

/// Where the `N` of `INIT` is in `"\nSTACK CFI INIT "`.
const INIT_N: usize = 12;

/// Where some lines are in the file (files past 4 GiB are declined): small, as the index
/// holds one per record it keeps, and fresh memory costs page faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Extent {
    at: u32,
    len: u32,
}

impl Extent {
    fn new(range: Range<usize>) -> Self {
        let at = u32::try_from(range.start).unwrap_or(u32::MAX);
        let len = u32::try_from(range.len()).unwrap_or(u32::MAX);
        Extent { at, len }
    }

    fn range(self) -> Range<usize> {
        let at = self.at as usize;
        at..at + self.len as usize
    }
}

/// A contiguous stretch of records with the address range its header gives.
#[derive(Debug, Clone)]
struct Span {
    start: u64,
    end: u64,
    text: Extent,
}

pub use crate::unwind::on_demand::Declined;

/// Where the text is: in memory, or in a file whose pieces are read when needed.
enum Source {
    Bytes(Arc<Vec<u8>>),
    File(std::fs::File),
}

impl Source {
    /// The bytes of `range` (a range the index found in this source).
    fn read(&self, range: Range<usize>) -> Option<Cow<'_, [u8]>> {
        match self {
            Source::Bytes(b) => b.get(range).map(Cow::Borrowed),
            Source::File(f) => {
                let mut buf = vec![0u8; range.len()];
                f.read_exact_at(&mut buf, u64::try_from(range.start).ok()?)
                    .ok()?;
                Some(Cow::Owned(buf))
            }
        }
    }
}

/// See the module documentation.
pub struct BreakpadIndex {
    source: Source,
    arch: Arch,
    /// A Windows x64 module's leaf rule, for code outside every block
    /// ([`super::unwind::windows_leaf_rule`]).
    leaf: Option<Rule<'static>>,
    /// The `MODULE` line, ending in a newline.
    module_line: Vec<u8>,
    /// `STACK CFI INIT` blocks with a non-empty range: sorted by start, disjoint.
    blocks: Vec<Span>,
    /// Serialized unwind tables of the blocks looked into, by block index (`None`: the
    /// block builds no table).
    built: Mutex<FxHashMap<usize, Option<Box<[u8]>>>>,
    /// `FUNC` blocks with a readable range: sorted by start, disjoint.
    funcs: Vec<Span>,
    /// The readable `PUBLIC` symbols, sorted by address (their lines are read back when
    /// needed).
    publics: Vec<Public>,
    /// `FILE` and `INLINE_ORIGIN` lines, kept: stretches of whole lines as (offset in the
    /// file, range in `shared_text`), in file order.
    shared: Vec<(usize, Range<usize>)>,
    shared_text: Vec<u8>,
}

/// A `PUBLIC` line the builder reads.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Public {
    /// Its table offset.
    at: u32,
    /// The line, in the file.
    text: Extent,
}

impl std::fmt::Debug for BreakpadIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreakpadIndex")
            .field("arch", &self.arch)
            .field("cfi_blocks", &self.blocks.len())
            .field("funcs", &self.funcs.len())
            .field("publics", &self.publics.len())
            .finish()
    }
}

/// Whether every newline of `region` but a last one is followed by `S`: compared 64
/// bytes at a time with no early exit inside a block, so the compiler makes vector code of
/// it (a search per line, or an iterator chain, cost several times more).
fn only_s_lines(region: &[u8]) -> bool {
    let (Some(firsts), Some(seconds)) = (
        region.get(..region.len().saturating_sub(1)),
        region.get(1..),
    ) else {
        return true;
    };
    let mut a = firsts.chunks_exact(64);
    let mut b = seconds.chunks_exact(64);
    let clean = |x: &[u8; 64], y: &[u8; 64]| {
        let mut bad = 0u8;
        for i in 0..64 {
            bad |= u8::from(x[i] == b'\n') & u8::from(y[i] != b'S');
        }
        bad == 0
    };
    for (x, y) in a.by_ref().zip(b.by_ref()) {
        let (Ok(x), Ok(y)) = (<&[u8; 64]>::try_from(x), <&[u8; 64]>::try_from(y)) else {
            return false;
        };
        if !clean(x, y) {
            return false;
        }
    }
    // the rest, padded with bytes that pass
    let (mut x, mut y) = ([0u8; 64], [b'S'; 64]);
    let (ra, rb) = (a.remainder(), b.remainder());
    if let (Some(dx), Some(dy)) = (x.get_mut(..ra.len()), y.get_mut(..rb.len())) {
        dx.copy_from_slice(ra);
        dy.copy_from_slice(rb);
    }
    clean(&x, &y)
}

/// Sorts spans by start; whether they are then disjoint.
fn sort_disjoint(spans: &mut [Span]) -> bool {
    // dump_syms writes STACK CFI INIT records in .eh_frame order, not by address
    if !spans.is_sorted_by_key(|s| s.start) {
        // sorted as plain integers `start << INDEX_BITS | index` (several times faster
        // than sorting the records), else as records; spans with one start overlap (they
        // are not empty) and are declined whatever their order
        const INDEX_BITS: u32 = 24;
        let fits =
            spans.len() < 1 << INDEX_BITS && spans.iter().all(|s| s.start < 1 << (64 - INDEX_BITS));
        if fits {
            let mut keys: Vec<u64> = (0u64..)
                .zip(spans.iter())
                .map(|(i, s)| s.start << INDEX_BITS | i)
                .collect();
            keys.sort_unstable();
            // keys[i]'s index is the span that belongs at i: moved there cycle by cycle,
            // in place (a sorted copy would be fresh memory, i.e. page faults)
            let index = |k: u64| (k & ((1 << INDEX_BITS) - 1)) as usize;
            for start in 0..keys.len() {
                let mut at = start;
                while index(keys[at]) != start {
                    let from = index(keys[at]);
                    spans.swap(at, from);
                    keys[at] = keys[at] & !((1 << INDEX_BITS) - 1) | at as u64;
                    at = from;
                }
                keys[at] = keys[at] & !((1 << INDEX_BITS) - 1) | at as u64;
            }
        } else {
            spans.sort_unstable_by_key(|s| s.start);
        }
    }
    spans.windows(2).all(|w| w[0].end <= w[1].start)
}

/// The state of one pass over the lines.
struct Scan {
    ranges: symbols::BreakpadRanges,
    module_line: Option<Vec<u8>>,
    blocks: Vec<Span>,
    /// The open `INIT` block: its range when readable, and where it starts (an
    /// unreadable `INIT` still ends the block before it).
    open_block: Option<(Option<(u64, u64)>, usize)>,
    funcs: Vec<Span>,
    open_func: Option<(u64, u64, usize)>,
    publics: Vec<Public>,
    shared: Vec<(usize, Range<usize>)>,
    shared_text: Vec<u8>,
}

impl Scan {
    /// For a file of about `len` bytes: the lists are given room for the records such a
    /// file usually has up front (untouched room costs no memory; growing by copying
    /// touches every page twice), but for a libc-sized file less than glibc's 128 KiB
    /// threshold for giving an allocation a mapping of its own (a system call to make and
    /// one to unmap).
    fn new(len: usize) -> Self {
        Scan {
            ranges: symbols::breakpad_ranges(),
            module_line: None,
            blocks: Vec::with_capacity(len / 192),
            open_block: None,
            funcs: Vec::with_capacity(len / 512),
            open_func: None,
            publics: Vec::with_capacity(len / 256),
            shared: Vec::new(),
            shared_text: Vec::new(),
        }
    }

    fn close_func(&mut self, at: usize) {
        if let Some((s, e, from)) = self.open_func.take() {
            self.funcs.push(Span {
                start: s,
                end: e,
                text: Extent::new(from..at),
            });
        }
    }

    fn close_block(&mut self, at: usize) {
        // empty or unreadable: no rows, but the block before ends here
        if let Some((Some((start, end)), from)) = self.open_block.take() {
            if start < end {
                self.blocks.push(Span {
                    start,
                    end,
                    text: Extent::new(from..at),
                });
            }
        }
    }

    fn keep(&mut self, offset: usize, line: &[u8]) {
        let at = self.shared_text.len();
        self.shared_text.extend_from_slice(line);
        match self.shared.last_mut() {
            Some((o, r)) if *o + r.len() == offset => r.end = self.shared_text.len(),
            _ => self.shared.push((offset, at..self.shared_text.len())),
        }
    }

    /// The complete lines of `text` (each ending in a newline, but perhaps the file's
    /// last), which starts at file offset `base`.
    fn lines(&mut self, base: usize, text: &[u8]) -> Result<(), Declined> {
        if text.is_empty() {
            return Ok(());
        }
        let s = std::str::from_utf8(text).map_err(|_| Declined("the text is not UTF-8"))?;
        // no skipping before this offset in `text` (a skip that failed looked up to it)
        let mut no_skip_until = 0usize;
        let mut start = 0usize;
        while start < text.len() {
            let rest = text.get(start..).unwrap_or(&[]);
            let end = memchr::memchr(b'\n', rest).map_or(text.len(), |nl| start + nl + 1);
            let range = start..end;
            start = end;
            let offset = base + range.start;
            let bytes = text.get(range.clone()).unwrap_or(&[]);
            if self.module_line.is_none() {
                self.module_line = Some(bytes.to_vec());
                continue;
            }
            // Most lines are a FUNC's line records (a hex digit first: trimming the end
            // cannot change that) or STACK CFI deltas (which end an open FUNC block):
            // settled from their first bytes.
            match bytes.first() {
                None | Some(b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'E') => continue,
                Some(b'S')
                    if bytes.starts_with(b"STACK CFI ")
                        && !bytes.starts_with(b"STACK CFI INIT ") =>
                {
                    self.close_func(offset);
                }
                _ => {
                    // INIT and PUBLIC lines with nothing to trim are read as they are
                    let line = s.get(range).unwrap_or("");
                    if !self.simple_record(offset, line) {
                        self.record(offset, bytes, classify_str(line.trim_end()));
                    }
                    if !bytes.starts_with(b"STACK CFI INIT ") {
                        continue;
                    }
                }
            }
            // After a STACK CFI line: on to the next INIT line if every line before it
            // starts with `S` (they change nothing: no FUNC is open)
            if end > no_skip_until {
                match self.stack_cfi_skip(text, end) {
                    Ok(next) => start = next,
                    Err(looked) => no_skip_until = looked,
                }
            }
        }
        Ok(())
    }

    /// From `at` (a line's start, just after a newline) in `text`: the start of the next
    /// `STACK CFI INIT` line (or the end of `text`) when every line before it starts with
    /// `S`; else how far it looked. Such lines (STACK CFI deltas, in dump_syms output)
    /// can only end an open FUNC block, and none is open after a STACK CFI line: so they
    /// need not be looked at one by one, which was most of the indexing's cost.
    fn stack_cfi_skip(&self, text: &[u8], at: usize) -> Result<usize, usize> {
        let from = at.saturating_sub(1);
        // the newline before the next INIT line: the next `N` (rare in STACK CFI
        // deltas, which hold hex digits and register names) that ends such a prefix
        let mut to = text.len();
        let mut look = from;
        while let Some(n) = memchr::memchr(b'N', text.get(look..).unwrap_or(&[])) {
            let n = look + n;
            let line = n.checked_sub(INIT_N).and_then(|l| text.get(l..));
            if line.is_some_and(|l| l.starts_with(b"\nSTACK CFI INIT ")) {
                to = n - INIT_N + 1;
                break;
            }
            look = n + 1;
        }
        let region = text.get(from..to).unwrap_or(&[]);
        if only_s_lines(region) {
            Ok(to)
        } else {
            Err(to)
        }
    }

    /// A `STACK CFI INIT` or `PUBLIC` line whose end needs no trimming, read exactly as
    /// [`Scan::record`] reads it (without classifying it first); false for any other line.
    fn simple_record(&mut self, offset: usize, line: &str) -> bool {
        let body = line.strip_suffix('\n').unwrap_or(line);
        if !body.as_bytes().last().is_some_and(u8::is_ascii_graphic) {
            return false;
        }
        if let Some(init) = body.strip_prefix("STACK CFI INIT ") {
            self.close_func(offset);
            self.init(offset, init);
            return true;
        }
        if let Some(rest) = body.strip_prefix("PUBLIC ") {
            self.close_func(offset);
            self.public(offset, rest, line.len());
            return true;
        }
        false
    }

    /// A `STACK CFI INIT` line at `offset`, given what follows `STACK CFI INIT `: it ends
    /// the open block and opens one (with no rows when its range is unreadable).
    fn init(&mut self, offset: usize, rest: &str) {
        let range = tokenize::cfi_init(rest).and_then(|i| Some((i.range.addr, i.range.end()?)));
        self.close_block(offset);
        self.open_block = Some((range, offset));
    }

    /// A `PUBLIC` line at `offset`, `len` bytes long, given what follows `PUBLIC `; one
    /// the builder cannot read is skipped here too.
    fn public(&mut self, offset: usize, rest: &str, len: usize) {
        let Some(p) = tokenize::public(rest) else {
            return;
        };
        if let Some(at) = self.ranges.offset(p.addr) {
            self.publics.push(Public {
                at,
                text: Extent::new(offset..offset + len),
            });
        }
    }

    /// One line that is not a line record, read as the two builders read it.
    fn record(&mut self, offset: usize, bytes: &[u8], record: Record<'_>) {
        match record {
            Record::Blank | Record::Line(_) | Record::Inline(_) | Record::NotUtf8 { .. } => return,
            _ => {}
        }
        self.close_func(offset);
        match record {
            Record::Func(rest) => {
                // a FUNC the builder cannot read opens nothing: its lines are ignored
                let range = tokenize::func(rest).and_then(|f| {
                    f.range
                        .end()
                        .and_then(|e| self.ranges.range(f.range.addr, e))
                });
                if let Some((s, e)) = range {
                    self.open_func = Some((u64::from(s), u64::from(e), offset));
                }
            }
            Record::File(_) | Record::InlineOrigin(_) => self.keep(offset, bytes),
            Record::Public(rest) => self.public(offset, rest, bytes.len()),
            Record::CfiInit(rest) => self.init(offset, rest),
            _ => {}
        }
    }

    fn finish(mut self, source: Source, len: usize) -> Result<BreakpadIndex, Declined> {
        if u32::try_from(len).is_err() {
            return Err(Declined("the file is larger than 4 GiB"));
        }
        let mut module_line = self.module_line.take().ok_or(Declined("no MODULE line"))?;
        let module = parse_module_line(&module_line).ok_or(Declined("no MODULE line"))?;
        let arch = breakpad_arch(&module.arch).ok_or(Declined("an architecture we do not walk"))?;
        // STACK WIN records nest and are resolved over the whole file (the unwind
        // builder's `win_rows`), which blocks of STACK CFI lines cannot answer for
        if arch == Arch::X86 {
            return Err(Declined(
                "an x86 file, whose STACK WIN records need the whole table",
            ));
        }
        // The unwind builder reads the line its own way (any whitespace between fields):
        // where it fails on the whole file, every block would fail too, with no warning.
        if super::unwind::build_from_breakpad(&module_line).is_err() {
            return Err(Declined("the unwind builder cannot read the MODULE line"));
        }
        if !module_line.ends_with(b"\n") {
            module_line.push(b'\n');
        }
        self.close_func(len);
        self.close_block(len);
        let mut blocks = std::mem::take(&mut self.blocks);
        if !sort_disjoint(&mut blocks) {
            return Err(Declined("STACK CFI INIT ranges overlap"));
        }
        if !sort_disjoint(&mut self.funcs) {
            return Err(Declined("FUNC ranges overlap"));
        }
        // aliases are taken as a group, in file order
        if !self.publics.is_sorted_by_key(|p| p.at) {
            self.publics.sort_unstable_by_key(|p| p.at);
        }
        let leaf = super::unwind::windows_leaf_rule(&module_line).map(Rule::without_expressions);
        Ok(BreakpadIndex {
            source,
            arch,
            leaf,
            module_line,
            blocks,
            built: Mutex::new(FxHashMap::default()),
            funcs: self.funcs,
            publics: self.publics,
            shared: self.shared,
            shared_text: self.shared_text,
        })
    }
}

impl BreakpadIndex {
    /// Indexes `text`, or declines (see the module documentation).
    pub fn new(text: Arc<Vec<u8>>) -> Result<Self, Declined> {
        let mut scan = Scan::new(text.len());
        scan.lines(0, &text)?;
        let len = text.len();
        scan.finish(Source::Bytes(text), len)
    }

    /// Indexes the file read from `file` a piece at a time, keeping it open to read the
    /// records a walk needs; declines like [`BreakpadIndex::new`], and on read errors.
    pub fn from_file(mut file: std::fs::File) -> Result<Self, Declined> {
        let len = file
            .metadata()
            .ok()
            .and_then(|m| usize::try_from(m.len()).ok())
            .unwrap_or(0);
        let mut scan = Scan::new(len);
        // no larger than the file: zeroing pages the file does not fill would fault them
        // in for nothing (for a small file, most of its cost)
        let mut buf = vec![0u8; CHUNK.min(len.saturating_add(1)).max(64)];
        // buf[..filled] holds the bytes from file offset `base` not yet indexed
        let (mut base, mut filled) = (0usize, 0usize);
        loop {
            if filled == buf.len() {
                // one line longer than the buffer
                buf.resize(buf.len() * 2, 0);
            }
            let n = file
                .read(&mut buf[filled..])
                .map_err(|_| Declined("the file could not be read"))?;
            if n == 0 {
                scan.lines(base, &buf[..filled])?;
                base += filled;
                break;
            }
            filled += n;
            let Some(nl) = memchr::memrchr(b'\n', &buf[..filled]) else {
                continue;
            };
            let done = nl + 1;
            scan.lines(base, &buf[..done])?;
            buf.copy_within(done..filled, 0);
            base += done;
            filled -= done;
        }
        scan.finish(Source::File(file), base)
    }

    /// The architecture of the `MODULE` line.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Whether the file has unwind rules (a `STACK CFI INIT` block with a range, or a
    /// Windows x64 module's leaf rule).
    pub fn has_unwind(&self) -> bool {
        !self.blocks.is_empty() || self.leaf.is_some()
    }

    /// Whether the file has symbols (a `FUNC` or `PUBLIC` record).
    pub fn has_symbols(&self) -> bool {
        !self.funcs.is_empty() || !self.publics.is_empty()
    }

    /// The rule for table offset `rel`: the one the whole-file table gives there.
    pub fn find_rule(&self, rel: u64) -> Option<Rule<'static>> {
        // a Windows x64 module's code outside every block: a leaf (the whole table's
        // row under every block's)
        let outside = || self.leaf.filter(|_| rel < 1 << 32);
        let Some(i) = self
            .blocks
            .partition_point(|b| b.start <= rel)
            .checked_sub(1)
        else {
            return outside();
        };
        let block = self.blocks.get(i)?;
        if rel >= block.end {
            return outside();
        }
        let mut built = self.built.lock().ok()?;
        let bytes = built.entry(i).or_insert_with(|| {
            let mut text = self.module_line.clone();
            text.extend_from_slice(&self.source.read(block.text.range())?);
            super::unwind::build_from_breakpad(&text)
                .ok()
                .map(|b| b.bytes.into_boxed_slice())
        });
        // Breakpad rules never refer to expressions: the rule needs nothing of the table
        let rule = UnwindTable::open(bytes.as_deref()?).ok()?.find(rel)?;
        Some(Rule::without_expressions(rule.record))
    }

    /// The text a symbol table for the table offsets `rels` is built from: the `MODULE`
    /// line, the `FILE`, `INLINE_ORIGIN` and `PUBLIC` lines and the `FUNC` blocks the
    /// offsets need, in file order.
    pub fn symbol_text_for(&self, rels: &[u64]) -> Vec<u8> {
        let before = |addr: u64| {
            self.funcs
                .partition_point(|f| f.start <= addr)
                .checked_sub(1)
        };
        let mut chosen: Vec<usize> = Vec::with_capacity(rels.len() * 2);
        // PUBLIC lines by index: those at the symbol's address and at the next one
        let mut publics: Vec<usize> = Vec::new();
        for &rel in rels {
            // the function at or before the address (it contains it, if any does) …
            chosen.extend(before(rel));
            // … and, for the PUBLIC symbol there, the functions around its start (one may
            // cover it, the next may end it), its aliases, and the symbols at the next
            // address (they end it)
            let p = self.publics.partition_point(|p| u64::from(p.at) <= rel);
            let Some(public) = p.checked_sub(1).and_then(|i| self.publics.get(i)) else {
                continue;
            };
            let next = self
                .funcs
                .partition_point(|f| f.start <= u64::from(public.at));
            chosen.extend(next.checked_sub(1));
            chosen.push(next);
            let first = self.publics.partition_point(|q| q.at < public.at);
            let next_at = self.publics.get(p).map(|q| q.at);
            let last = next_at.map_or(p, |at| self.publics.partition_point(|q| q.at <= at));
            publics.extend(first..last);
        }
        chosen.sort_unstable();
        chosen.dedup();
        publics.sort_unstable();
        publics.dedup();
        let mut wanted: Vec<Range<usize>> = publics
            .iter()
            .filter_map(|&i| self.publics.get(i))
            .map(|p| p.text.range())
            .chain(
                chosen
                    .iter()
                    .filter_map(|&i| self.funcs.get(i))
                    .map(|f| f.text.range()),
            )
            .collect();
        wanted.sort_unstable_by_key(|r| r.start);
        // pieces near each other are read at once: a system call each cost more than
        // reading the lines between them
        let mut runs: Vec<(Range<usize>, Cow<'_, [u8]>)> = Vec::new();
        let mut i = 0;
        while let Some(first) = wanted.get(i) {
            let mut run = first.clone();
            i += 1;
            while let Some(r) = wanted.get(i).filter(|r| r.start <= run.end + READ_GAP) {
                run.end = run.end.max(r.end);
                i += 1;
            }
            if let Some(bytes) = self.source.read(run.clone()) {
                runs.push((run, bytes));
            }
        }
        // (offset in the file, bytes)
        let mut pieces: Vec<(usize, &[u8])> = self
            .shared
            .iter()
            .filter_map(|(o, r)| Some((*o, self.shared_text.get(r.clone())?)))
            .collect();
        pieces.extend(wanted.iter().filter_map(|r| {
            let (run, bytes) = runs.get(
                runs.partition_point(|(run, _)| run.start <= r.start)
                    .checked_sub(1)?,
            )?;
            let piece =
                bytes.get(r.start.checked_sub(run.start)?..r.end.checked_sub(run.start)?)?;
            Some((r.start, piece))
        }));
        pieces.sort_unstable_by_key(|p| p.0);
        let mut out = self.module_line.clone();
        for (_, bytes) in pieces {
            out.extend_from_slice(bytes);
            if !out.ends_with(b"\n") {
                out.push(b'\n');
            }
        }
        out
    }

    /// A symbol table that answers like the whole file's at every offset in `rels`.
    pub fn symbols_for(&self, rels: &[u64]) -> Result<BuiltSymbols, SymbolsError> {
        super::symbols::build_symbol_table_breakpad(&self.symbol_text_for(rels))
    }
}

impl crate::symbols::SymbolIndex for BreakpadIndex {
    fn symbols_for(&self, rels: &[u64]) -> Result<BuiltSymbols, SymbolsError> {
        BreakpadIndex::symbols_for(self, rels)
    }
    fn has_symbols(&self) -> bool {
        BreakpadIndex::has_symbols(self)
    }
    fn sources(&self) -> Vec<symbols::SymbolSource> {
        vec![symbols::SymbolSource::Breakpad]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breakpad::text::test_texts::{for_damaged_pieces, libc_sym, Rng};
    use crate::symbols::SymbolTable;

    /// Addresses worth asking about: every record's start, end and neighbours, and
    /// random ones across the file's range.
    fn probes(index: &BreakpadIndex, rng: &mut Rng, random: usize) -> Vec<u64> {
        let mut out = Vec::new();
        for s in index.funcs.iter().chain(&index.blocks) {
            for a in [
                s.start,
                s.start + 1,
                s.start + (s.end - s.start) / 2,
                s.end - 1,
                s.end,
            ] {
                out.push(a);
            }
            out.push(s.start.saturating_sub(1));
        }
        for p in index.publics.iter().map(|p| u64::from(p.at)) {
            out.extend([p, p + 1, p.saturating_sub(1)]);
        }
        let top = out.iter().copied().max().unwrap_or(0x1000) + 0x100;
        out.extend((0..random).map(|_| rng.below(top as usize) as u64));
        out
    }

    /// The index answers exactly as the whole-file tables at every probe: unwind rules one
    /// by one, symbols from tables built for batches of probes.
    fn same_as_whole(text: &[u8], rng: &mut Rng, random: usize) -> bool {
        let Ok(index) = BreakpadIndex::new(Arc::new(text.to_vec())) else {
            return false;
        };
        let whole_unwind =
            crate::breakpad::unwind::build_from_breakpad(text).expect("the MODULE line was read");
        let whole_unwind = UnwindTable::open(&whole_unwind.bytes).expect("open");
        let whole_symbols =
            crate::breakpad::symbols::build_symbol_table_breakpad(text).expect("build");
        let whole_symbols = SymbolTable::open(&whole_symbols.bytes).expect("open");
        let mut probes = probes(&index, rng, random);
        for &a in &probes {
            let whole = whole_unwind.find(a);
            let indexed = index.find_rule(a);
            assert_eq!(
                whole.map(|r| r.record),
                indexed.map(|r| r.record),
                "unwind rule at {a:#x}"
            );
        }
        // in file order and shuffled, in batches
        for round in 0..2 {
            if round == 1 {
                for i in (1..probes.len()).rev() {
                    probes.swap(i, rng.below(i + 1));
                }
            }
            for batch in probes.chunks(64) {
                let mut rels = batch.to_vec();
                rels.sort_unstable();
                rels.dedup();
                let built = index.symbols_for(&rels).expect("build");
                let table = SymbolTable::open(&built.bytes).expect("open");
                for &a in &rels {
                    let (mut whole, mut indexed) = (Vec::new(), Vec::new());
                    whole_symbols.lookup(a, &mut whole);
                    table.lookup(a, &mut indexed);
                    assert_eq!(whole, indexed, "symbols at {a:#x}");
                }
            }
        }
        assert_eq!(index.has_symbols(), !whole_symbols.sources().is_empty());
        true
    }

    #[test]
    fn a_windows_x64_sym_file_answers_the_leaf_rule_like_the_whole_table() {
        // dump_syms' shape for a PE image: one block per .pdata entry, code between them
        // (leaf functions) and past them covered by the leaf rule alone
        let text = "MODULE windows x86_64 0123456789ABCDEF0123456789ABCDEF1 app.pdb\n\
INFO CODE_ID 5F3A2B1C1000 app.exe\n\
FILE 0 a.c\n\
FUNC 1000 20 0 caller\n\
FUNC 1020 8 0 leaf\n\
STACK CFI INIT 1000 20 .cfa: $rsp 48 + .ra: .cfa 8 - ^\n\
PUBLIC 2000 0 stub\n\
STACK CFI INIT 3000 10 .cfa: $rsp 16 + $rbx: .cfa 16 - ^ .ra: .cfa 8 - ^\n";
        assert!(same_as_whole(text.as_bytes(), &mut Rng::new(3), 500));
        let index = BreakpadIndex::new(Arc::new(text.as_bytes().to_vec())).expect("index");
        let leaf = index.find_rule(0x1024).expect("a leaf's rule").record;
        assert_eq!(leaf.cfa, crate::unwind::Slot::offset(7, 8));
        assert_eq!(leaf.ra, crate::unwind::Slot::offset(0, -8));
        assert_eq!(
            index.find_rule(0x1010).expect("the block's").record.cfa,
            crate::unwind::Slot::offset(7, 48)
        );
        assert!(index.find_rule(1 << 32).is_none(), "past a PE image");
        // a Linux module's code outside every block has no rule
        let linux = text.replace("MODULE windows", "MODULE Linux");
        let index = BreakpadIndex::new(Arc::new(linux.into_bytes())).expect("index");
        assert!(index.find_rule(0x1024).is_none());
    }

    #[test]
    fn libc_sym_is_indexed_and_answers_like_the_whole_tables() {
        let sym = libc_sym();
        let mut rng = Rng::new(0x1dec_5eed);
        assert!(
            same_as_whole(sym.as_bytes(), &mut rng, 5000),
            "dump_syms output is indexed: {:?}",
            BreakpadIndex::new(Arc::new(sym.as_bytes().to_vec())).err()
        );
    }

    #[test]
    fn damaged_pieces_answer_like_the_whole_tables_or_are_declined() {
        let mut indexed = 0;
        for_damaged_pieces(
            &libc_sym(),
            |_| true,
            0x5eed_1dec,
            300,
            |text, rng| {
                if same_as_whole(text, rng, 50) {
                    indexed += 1;
                }
            },
        );
        assert!(
            indexed > 100,
            "most damaged pieces are still indexed ({indexed})"
        );
    }

    #[test]
    fn public_symbols_with_aliases_answer_like_the_whole_tables() {
        // a library without debug info: mostly PUBLIC symbols (as for a cross libc), some
        // at one address (aliases), a few FUNCs among them, in shuffled order
        let mut rng = Rng::new(0xa11a5);
        let mut lines = Vec::new();
        let mut addr = 0x100u64;
        for i in 0..400 {
            // FUNCs stay disjoint: at most 0xf bytes from addr + 2
            addr += 0x11 + rng.below(0x80) as u64;
            lines.push(format!("PUBLIC {addr:x} 0 sym{i}"));
            if rng.below(5) == 0 {
                lines.push(format!("PUBLIC m {addr:x} 0 alias{i}"));
            }
            if rng.below(7) == 0 {
                let size = 1 + rng.below(0xe);
                lines.push(format!(
                    "FUNC {:x} {size:x} 0 f{i}\n{:x} {size:x} {i} 0",
                    addr + 2,
                    addr + 2
                ));
            }
        }
        for i in (1..lines.len()).rev() {
            lines.swap(i, rng.below(i + 1));
        }
        let text = format!(
            "MODULE Linux arm64 0123456789ABCDEF0123456789ABCDEF0 libc.so.6\nFILE 0 a.c\n{}\n",
            lines.join("\n")
        );
        assert!(same_as_whole(text.as_bytes(), &mut rng, 3000));
    }

    #[test]
    fn a_range_past_the_table_format_answers_like_the_whole_table() {
        // found by the fuzz target: the whole table clips a range at 2^32 and used to
        // answer for every address beyond it
        let text = "MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 x\n\
STACK CFI INIT 610 32c625c40 .cfa: $rsp 8 + .ra: .cfa -8 + ^\n";
        let mut rng = Rng::new(3);
        assert!(same_as_whole(text.as_bytes(), &mut rng, 100));
        let index = BreakpadIndex::new(Arc::new(text.as_bytes().to_vec())).expect("indexed");
        assert!(index.find_rule(u64::MAX).is_none());
        assert!(index.find_rule(0x1_0000_0000).is_none());
    }

    #[test]
    fn aliases_of_one_length_are_chosen_as_in_the_whole_table() {
        // found by the fuzz target: the tie between `_fini` and `xzzzi` was broken by
        // which name the builder met first, and the whole file met `_fini` at 0x797
        let text = "MODULE Linux arm64 0123456789ABCDEF0123456789ABCDEF0 x\n\
PUBLIC 797 0 _fini\n\
PUBLIC 798 0 xzzzi\n\
PUBLIC 798 0 _fini\n";
        let mut rng = Rng::new(5);
        assert!(same_as_whole(text.as_bytes(), &mut rng, 100));
    }

    #[test]
    fn records_among_stack_cfi_lines_answer_like_the_whole_tables() {
        // The indexer passes over runs of lines that all start with `S` after a STACK CFI
        // line: every other kind of line among them (FUNC blocks, PUBLIC, FILE, line
        // records, blank lines, INITs with trailing blanks, `N` inside deltas) must be
        // read as the whole-file builders read it, at any place in a 64-byte block.
        let templates: &[&str] = &[
            "STACK CFI {a} .cfa: $rsp 16 + .ra: .cfa -8 + ^",
            "STACK CFI {a} .cfa: $rsp {n} +",
            "STACK CFI {a} $rbx: .cfa -24 + ^ NaN",
            "STACK CFI INIT {a} {s} .cfa: $rsp 8 + .ra: .cfa -8 + ^",
            "STACK CFI INIT {a} {s} .cfa: $rsp 8 + .ra: .cfa -8 + ^ ",
            "STACK CFI INIT {a} 0 .cfa: $rsp 8 + .ra: .cfa -8 + ^",
            "STACK WIN 4 {a} {s} 0 0 0 0 0 0 1 $eip",
            "STACK CFI INITIAL {a}",
            "SOMETHING ELSE",
            "FUNC {a} {s} 0 f{n}",
            "{a} {s} {n} 0",
            "PUBLIC {a} 0 p{n}",
            "FILE {n} f{n}.c",
            "INLINE_ORIGIN {n} g{n}",
            "INFO x",
            "",
            " STACK CFI INIT {a} {s} .cfa: $rsp 8 +",
        ];
        let mut rng = Rng::new(0x057a_ccf1);
        let mut indexed = 0;
        for _ in 0..150 {
            let mut text =
                String::from("MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 x\n");
            let mut addr = 0x1000u64;
            for _ in 0..(50 + rng.below(250)) {
                // mostly deltas, as in dump_syms output, so long runs are passed over
                let t = if rng.below(3) == 0 {
                    templates[rng.below(templates.len())]
                } else {
                    templates[rng.below(2)]
                };
                addr += rng.below(0x40) as u64;
                let line = t
                    .replace("{a}", &format!("{addr:x}"))
                    .replace("{s}", &format!("{:x}", 1 + rng.below(0x30)))
                    .replace("{n}", &rng.below(40).to_string());
                text.push_str(&line);
                text.push('\n');
            }
            if same_as_whole(text.as_bytes(), &mut rng, 200) {
                indexed += 1;
            }
        }
        assert!(indexed > 50, "most such files are indexed ({indexed})");
    }

    #[test]
    fn unusual_files_are_declined() {
        let overlap = "MODULE Linux x86_64 00 x\nFUNC 10 20 0 f\nFUNC 20 8 0 g\n";
        assert!(BreakpadIndex::new(Arc::new(overlap.as_bytes().to_vec())).is_err());
        let overlap_cfi = "MODULE Linux x86_64 00 x\n\
STACK CFI INIT 10 20 .cfa: $rsp 8 + .ra: .cfa -8 + ^\n\
STACK CFI INIT 18 20 .cfa: $rsp 8 + .ra: .cfa -8 + ^\n";
        assert!(BreakpadIndex::new(Arc::new(overlap_cfi.as_bytes().to_vec())).is_err());
        let not_utf8 = b"MODULE Linux x86_64 00 x\nFUNC 10 20 0 \xff\n";
        assert!(BreakpadIndex::new(Arc::new(not_utf8.to_vec())).is_err());
        assert!(BreakpadIndex::new(Arc::new(b"FUNC 10 20 0 f\n".to_vec())).is_err());
        assert!(BreakpadIndex::new(Arc::new(b"MODULE Linux sparc 00 x\n".to_vec())).is_err());
        // found by the fuzz target: the symbol builder reads `x86_64` as the architecture
        // here, the unwind builder `E`; both builders must accept the line
        let two_spaces = b"MODULE  x86_64 E sao\nSTACK CFI INIT 10 20 .cfa: $rsp 8 +\n";
        assert!(BreakpadIndex::new(Arc::new(two_spaces.to_vec())).is_err());
    }

    #[test]
    fn hand_written_records_answer_like_the_whole_tables() {
        // a FUNC the builder skips, lines without a FUNC, a malformed INIT ending a block,
        // CFI lines after other records, PUBLIC symbols inside and between functions
        let text = "MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 crash\n\
FILE 0 a.c\n\
INLINE_ORIGIN 0 inl()\n\
FUNC 1000 0 0 empty\n\
1000 10 1 0\n\
FUNC 1000 40 0 f(int)\n\
1000 10 2 0\n\
INLINE 0 3 0 0 1008 8\n\
1010 30 4 0\n\
PUBLIC 1020 0 inside\n\
PUBLIC 1050 0 between\n\
FUNC m 1060 20 0 g\n\
1060 20 5 0\n\
INFO x\n\
1070 4 6 0\n\
PUBLIC 1100 0 after\n\
STACK CFI INIT 1000 40 .cfa: $rsp 8 + .ra: .cfa -8 + ^\n\
STACK CFI 1001 .cfa: $rsp 16 +\n\
STACK CFI INIT zz 10 .cfa: $rsp 8 +\n\
STACK CFI 1020 .cfa: $rsp 32 +\n\
STACK CFI INIT 1060 20 .cfa: $rsp 8 + .ra: .cfa -8 + ^\n\
FUNC 2000 10 0 late\n\
STACK CFI 1064 .cfa: $rsp 24 +\n\
STACK CFI INIT 1080 0 .cfa: $rsp 8 + .ra: .cfa -8 + ^\n";
        let mut rng = Rng::new(7);
        assert!(same_as_whole(text.as_bytes(), &mut rng, 200));
        let index = BreakpadIndex::new(Arc::new(text.as_bytes().to_vec())).expect("indexed");
        assert_eq!(
            index.blocks.len(),
            2,
            "the zero-sized and unreadable INITs hold no rows"
        );
        let rule = index.find_rule(0x1068).expect("a rule after the FUNC line");
        assert_eq!(rule.record.cfa, crate::unwind::Slot::offset(7, 24));
    }
}

#[cfg(test)]
mod file_tests {
    use super::*;
    use crate::breakpad::text::test_texts::libc_sym;

    /// The index read from a file a piece at a time equals the one of the same bytes in
    /// memory: same records found, same pieces read back.
    fn same_from_file(text: &[u8]) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("x.sym");
        std::fs::write(&path, text).expect("write");
        let file = std::fs::File::open(&path).expect("open");
        let a = BreakpadIndex::new(Arc::new(text.to_vec())).expect("indexed");
        let b = BreakpadIndex::from_file(file).expect("indexed from the file");
        let spans = |i: &BreakpadIndex| {
            i.funcs
                .iter()
                .chain(&i.blocks)
                .map(|s| (s.start, s.end, s.text))
                .collect::<Vec<_>>()
        };
        assert_eq!(spans(&a), spans(&b));
        assert_eq!(a.publics, b.publics);
        assert_eq!(a.shared, b.shared);
        assert_eq!(a.shared_text, b.shared_text);
        let rels: Vec<u64> = a.funcs.iter().map(|f| f.start).step_by(7).collect();
        assert_eq!(a.symbol_text_for(&rels), b.symbol_text_for(&rels));
        for blk in a.blocks.iter().step_by(11) {
            let (x, y) = (a.find_rule(blk.start), b.find_rule(blk.start));
            assert_eq!(x.map(|r| r.record), y.map(|r| r.record));
        }
    }

    #[test]
    fn file_index_equals_memory_index() {
        // libc's .sym spans many read pieces
        same_from_file(libc_sym().as_bytes());
        // a line longer than the read buffer, and no newline at the end
        let long = format!(
            "MODULE Linux x86_64 00 x\nFILE 0 a.c\nFUNC 10 20 0 {}\n10 20 1 0\nPUBLIC 40 0 p\n\
STACK CFI INIT 10 20 .cfa: $rsp 8 + .ra: .cfa -8 + ^",
            "n".repeat(CHUNK + 100)
        );
        same_from_file(long.as_bytes());
    }
}
