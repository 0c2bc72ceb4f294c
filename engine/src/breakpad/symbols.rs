//! Breakpad `.sym` text → the symbol table, in the same format the DWARF builder writes.
//!
//! `FUNC` records become functions, the line records after each `FUNC` become line rows
//! (each ending at `address + size`), `INLINE`/`INLINE_ORIGIN` become inline records of
//! their nesting depth, `FILE` names the files, and `PUBLIC` symbols fill the addresses no
//! `FUNC` covers (each lasting until the next symbol), as `.symtab` does for DWARF. Every
//! function is marked [`SymbolSource::Breakpad`]. Names lose their parameter lists
//! (`Square::area() const` → `Square::area`), as debuggers print them in a backtrace.
//!
//! Hostile text is skipped record by record: malformed numbers, unknown file or origin
//! numbers, inline depths beyond [`MAX_INLINE_DEPTH`] and non-UTF-8 lines never panic and
//! never allocate beyond the input's size.

use rustc_hash::FxHashMap;

use super::text::for_each_line;
use super::tokenize::{self, classify, parse_module_line, Extent, Record};
use crate::symbols::builders::{finish, BuiltSymbols, Collector, RawFunction};
use crate::symbols::format::{self, InlineRecord, LineRecord};
use crate::symbols::{SymbolSource, SymbolsError};

/// Deeper inline nesting is dropped (real code stays far below).
pub const MAX_INLINE_DEPTH: u32 = 256;

use crate::symbols::demangle::strip_parameters;

/// A `FILE` record's path and, once a record used it, its file-table index: a line record
/// names its file by number, and hashing the path again for each of them was the largest
/// cost of a build.
struct FileSlot<'a> {
    path: &'a str,
    index: Option<u32>,
}

/// An `INLINE_ORIGIN` record's name (parameters stripped) and, once used, its string.
struct OriginSlot<'a> {
    name: &'a str,
    string: Option<u32>,
}

/// The state of one pass over a `.sym` file's records.
struct Reader<'a> {
    c: Collector,
    files: FxHashMap<u64, FileSlot<'a>>,
    origins: FxHashMap<u64, OriginSlot<'a>>,
    /// (start, name)
    publics: Vec<(u32, u32)>,
    /// Whether line and `INLINE` records belong to a function (the last `FUNC` was read
    /// and no other record came since).
    in_func: bool,
    skipped: usize,
}

impl<'a> Reader<'a> {
    fn new() -> Self {
        Reader {
            c: Collector::new(0),
            files: FxHashMap::default(),
            origins: FxHashMap::default(),
            publics: Vec::new(),
            in_func: false,
            skipped: 0,
        }
    }

    /// The file-table index of `FILE` number `n`, interned on first use (interning the
    /// same path again would return the same index, so the cache changes nothing but the
    /// time).
    fn file_index(&mut self, n: u64) -> Option<u32> {
        let slot = self.files.get_mut(&n)?;
        Some(*slot.index.get_or_insert_with(|| self.c.file(slot.path)))
    }

    /// The table range of a record's range, `None` (counted as skipped) when it overflows
    /// or lies outside the table.
    fn range(&mut self, r: Extent) -> Option<(u32, u32)> {
        let range = r.end().and_then(|e| self.c.range(r.addr, e));
        if range.is_none() {
            self.skipped += 1;
        }
        range
    }

    fn record(&mut self, record: Record<'a>) {
        match record {
            Record::NotUtf8 { .. } => self.skipped += 1,
            Record::Blank => {}
            Record::Line(line) => self.line(line),
            Record::Inline(rest) => self.inline(rest),
            Record::File(rest) => {
                self.in_func = false;
                match tokenize::file(rest) {
                    Some((n, path)) => {
                        self.files.insert(n, FileSlot { path, index: None });
                    }
                    None => self.skipped += 1,
                }
            }
            Record::InlineOrigin(rest) => {
                self.in_func = false;
                match tokenize::inline_origin(rest) {
                    Some((n, name)) => {
                        let name = strip_parameters(name);
                        self.origins.insert(n, OriginSlot { name, string: None });
                    }
                    None => self.skipped += 1,
                }
            }
            Record::Func(rest) => {
                self.in_func = false;
                self.func(rest);
            }
            Record::Public(rest) => {
                self.in_func = false;
                self.public(rest);
            }
            Record::CfiInit(_) | Record::Cfi(_) | Record::OtherStack(_) | Record::Other => {
                self.in_func = false;
            }
        }
    }

    /// A line record of the current `FUNC`: a line row, ended at `address + size`.
    fn line(&mut self, line: &str) {
        if !self.in_func {
            return;
        }
        let Some(l) = tokenize::line(line) else {
            self.skipped += 1;
            return;
        };
        // both evaluated, in this order: the file is interned even for a bad range
        let range = l.range.end().and_then(|e| self.c.range(l.range.addr, e));
        let file = self.file_index(l.file);
        let (Some((start, end)), Some(file)) = (range, file) else {
            self.skipped += 1;
            return;
        };
        self.c.lines.push(LineRecord {
            address: start,
            file,
            line: u32::try_from(l.line).unwrap_or(0),
            column: 0,
        });
        self.c.lines.push(LineRecord {
            address: end,
            file: format::NONE,
            line: 0,
            column: 0,
        });
    }

    fn func(&mut self, rest: &str) {
        let Some(f) = tokenize::func(rest) else {
            self.skipped += 1;
            return;
        };
        let Some((start, end)) = self.range(f.range) else {
            return;
        };
        let name = self.c.string(strip_parameters(f.name));
        self.c.functions.push(RawFunction {
            start,
            end,
            name,
            source: SymbolSource::Breakpad,
            input: 0,
        });
        self.in_func = true;
    }

    fn inline(&mut self, rest: &str) {
        let Some(inline) = tokenize::inline(rest) else {
            self.skipped += 1;
            return;
        };
        let depth = match u32::try_from(inline.depth) {
            Ok(d) if d < MAX_INLINE_DEPTH && self.in_func => d,
            _ => {
                self.skipped += 1;
                return;
            }
        };
        let name = match self.origins.get_mut(&inline.origin) {
            Some(o) => *o.string.get_or_insert_with(|| self.c.string(o.name)),
            None => format::NONE,
        };
        let call_file = self.file_index(inline.call_file).unwrap_or(format::NONE);
        let call_line = u32::try_from(inline.call_line).unwrap_or(0);
        for range in inline.ranges {
            let Some(range) = range else {
                self.skipped += 1;
                break;
            };
            let Some((start, end)) = self.range(range) else {
                continue;
            };
            let record = InlineRecord {
                start,
                end,
                name,
                call_file,
                call_line,
                call_column: 0,
            };
            self.c.inlines.push((depth, record));
        }
    }

    fn public(&mut self, rest: &str) {
        let Some(p) = tokenize::public(rest) else {
            self.skipped += 1;
            return;
        };
        let Some(start) = self.c.offset(p.addr) else {
            self.skipped += 1;
            return;
        };
        let name = self.c.string(strip_parameters(p.name));
        self.publics.push((start, name));
    }

    /// `PUBLIC` symbols as functions, each lasting until the next symbol or function start.
    fn public_functions(&self) -> Vec<RawFunction> {
        let mut starts: Vec<u32> = self
            .publics
            .iter()
            .map(|p| p.0)
            .chain(self.c.functions.iter().map(|f| f.start))
            .collect();
        starts.sort_unstable();
        starts.dedup();
        self.publics
            .iter()
            .filter_map(|&(start, name)| {
                let i = starts.partition_point(|&s| s <= start);
                let end = starts
                    .get(i)
                    .copied()
                    .unwrap_or_else(|| start.saturating_add(1));
                (end > start).then_some(RawFunction {
                    start,
                    end,
                    name,
                    source: SymbolSource::Breakpad,
                    input: 0,
                })
            })
            .collect()
    }

    /// The table of the records read.
    fn finish(mut self) -> Result<BuiltSymbols, SymbolsError> {
        if self.skipped > 0 {
            self.c.warn(format!(
                "{} Breakpad records could not be read and were skipped",
                self.skipped
            ));
        }
        let symbols = self.public_functions();
        finish(self.c, symbols)?.into_built()
    }
}

/// Builds a symbol table from a Breakpad `.sym` file.
pub fn build_symbol_table_breakpad(text: &[u8]) -> Result<BuiltSymbols, SymbolsError> {
    if parse_module_line(text).is_none() {
        return Err(SymbolsError::Object(
            "not a Breakpad .sym file (no MODULE line)".into(),
        ));
    }
    let mut reader = Reader::new();
    for_each_line(text, |line| reader.record(classify(line)));
    reader.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breakpad::tokenize::parse_module_line;
    use crate::symbols::SymbolTable;

    const SYM: &str = "MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 crash\n\
INFO CODE_ID 0123\n\
FILE 0 /src/crash.c\n\
FILE 1 /src/inl.h\n\
INLINE_ORIGIN 0 helper(int)\n\
FUNC 1000 40 0 shapes::Square::area() const\n\
INLINE 0 12 0 0 1010 8\n\
1000 10 10 0\n\
1010 8 3 1\n\
1018 28 11 0\n\
FUNC m 2000 10 0 main\n\
2000 10 20 0\n\
PUBLIC 3000 0 _start\n\
PUBLIC m 3100 0 other_public\n\
STACK CFI INIT 1000 40 .cfa: $rsp 8 + .ra: .cfa -8 + ^\n";

    #[test]
    fn module_line_and_names() {
        let m = parse_module_line(SYM.as_bytes()).expect("module");
        assert_eq!(m.debug_id, "0123456789ABCDEF0123456789ABCDEF0");
        assert_eq!(m.arch, "x86_64");
        assert_eq!(m.name, "crash");
        assert_eq!(strip_parameters("a::b(int, char const*) const"), "a::b");
        assert_eq!(strip_parameters("S::operator()(int)"), "S::operator()");
        assert_eq!(strip_parameters("S::operator()"), "S::operator()");
        assert_eq!(strip_parameters("operator()"), "operator()");
        assert_eq!(strip_parameters("S::operator()() const"), "S::operator()");
        assert_eq!(strip_parameters("main"), "main");
        assert_eq!(
            strip_parameters("(anonymous namespace)::f(std::vector<int>&)"),
            "(anonymous namespace)::f"
        );
    }

    #[test]
    fn records_become_a_symbol_table() {
        let built = build_symbol_table_breakpad(SYM.as_bytes()).expect("build");
        assert_eq!(built.sources, vec![SymbolSource::Breakpad]);
        let t = SymbolTable::open(&built.bytes).expect("open");
        let mut out = Vec::new();
        t.lookup(0x1004, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].function, Some("shapes::Square::area"));
        assert_eq!(out[0].line, Some(10));
        assert_eq!(out[0].file, Some("/src/crash.c"));
        assert_eq!(out[0].source, SymbolSource::Breakpad);
        out.clear();
        t.lookup(0x1012, &mut out);
        let names: Vec<_> = out
            .iter()
            .map(|f| (f.function, f.line, f.inlined))
            .collect();
        assert_eq!(
            names,
            vec![
                (Some("helper"), Some(3), true),
                (Some("shapes::Square::area"), Some(12), false)
            ]
        );
        out.clear();
        t.lookup(0x3050, &mut out);
        assert_eq!(out.first().and_then(|f| f.function), Some("_start"));
        out.clear();
        t.lookup(0x2004, &mut out);
        assert_eq!(out.first().and_then(|f| f.function), Some("main"));
    }

    #[test]
    fn hostile_text_never_panics() {
        assert!(build_symbol_table_breakpad(b"").is_err());
        for cut in 0..SYM.len() {
            let _ = build_symbol_table_breakpad(&SYM.as_bytes()[..cut]);
        }
        let hostile = "MODULE Linux x86_64 00 x\n\
FILE 99999999999999999999999 a\n\
FUNC ffffffffffffffff 10 0 f\n\
FUNC 10 ffffffffffffffff 0 g(\n\
1 2\n\
INLINE 4294967295 1 1 1 10 10\n\
INLINE 0 1 77 88 10 10 20\n\
INLINE_ORIGIN x y\n\
PUBLIC zz 0 q\n\
FUNC 100 10 0 ))((\n\
100 10 5 12345\n\
\u{ff}\n";
        let built = build_symbol_table_breakpad(hostile.as_bytes()).expect("builds");
        let t = SymbolTable::open(&built.bytes).expect("open");
        let mut out = Vec::new();
        for a in [0u64, 0x10, 0x100, 0x105, u64::MAX] {
            out.clear();
            t.lookup(a, &mut out);
        }
    }

    /// The table built from `case` between good records: the skip count in its warning,
    /// and what the good function's line and the PUBLIC symbol look up to.
    fn around(case: &[u8]) -> (usize, Option<u32>, Option<String>) {
        let mut text = b"MODULE Linux x86_64 00 x\nFILE 0 a.c\nFUNC 100 10 0 good\n\
100 10 7 0\n"
            .to_vec();
        text.extend_from_slice(case);
        text.extend_from_slice(b"\nPUBLIC 200 0 pub\n");
        let built = build_symbol_table_breakpad(&text).expect("build");
        let skipped = built
            .warnings
            .iter()
            .find_map(|w| w.strip_suffix(" Breakpad records could not be read and were skipped"))
            .map_or(0, |n| n.parse().expect("a count"));
        let t = SymbolTable::open(&built.bytes).expect("open");
        let mut out = Vec::new();
        t.lookup(0x100, &mut out);
        let line = out.first().and_then(|f| f.line);
        out.clear();
        t.lookup(0x200, &mut out);
        let public = out.first().and_then(|f| f.function).map(str::to_owned);
        (skipped, line, public)
    }

    #[test]
    fn each_malformed_record_is_skipped_and_counted() {
        let counted: &[&[u8]] = &[
            b"FILE x a.c",
            b"FILE 1",
            b"INLINE_ORIGIN x f",
            b"FUNC zz 10 0 f",
            b"FUNC 10 10",
            b"FUNC ffffffffffffffff 10 0 f",
            b"PUBLIC zz 0 p",
            b"PUBLIC 30",
            b"PUBLIC",
            b"\xff\xfe",
            // in the function: line and INLINE records
            b"104 4",
            b"104 4 7 9",
            b"104 ffffffffffffffff 7 0",
            b"FUNC",
            b"INLINE x",
            b"INLINE 0 1 0 0 zz 4",
            b"INLINE 0 1 0 0 104 4 zz 4",
            b"INLINE 256 1 0 0 104 4",
            b"INLINE 0 1 0 0 104 ffffffffffffffff",
        ];
        for case in counted {
            let (skipped, line, public) = around(case);
            let what = String::from_utf8_lossy(case);
            assert_eq!(skipped, 1, "{what:?} is counted once");
            assert_eq!(line, Some(7), "{what:?} leaves the good line");
            assert_eq!(public.as_deref(), Some("pub"), "{what:?}");
        }
        let quiet: &[&[u8]] = &[
            b"",
            b"   ",
            b"INFO CODE_ID 00",
            b"STACK WIN 4 100 10 0 0 0 0 0 0 1 $eip",
            b"STACK CFI INIT 100 10 .cfa: $rsp 8 +",
            b"SOMETHING else",
            // line records after another record belong to no function: ignored
            b"INFO x\n100 10 9 0",
            b"PUBLIC 300 0 q\n104 4",
        ];
        for case in quiet {
            let what = String::from_utf8_lossy(case);
            assert_eq!(around(case), (0, Some(7), Some("pub".into())), "{what:?}");
        }
        // a blank line does not end the function: its line records still count
        assert_eq!(around(b"\n100 10 9 0"), (0, Some(9), Some("pub".into())));
        assert_eq!(
            around(b"INLINE 0 1 0 0 100 4"),
            (0, Some(7), Some("pub".into()))
        );
    }
}
