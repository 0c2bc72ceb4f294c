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

use super::{finish, BuiltSymbols, Collector, Finished, RawFunction};
use crate::breakpad_text::{for_each_line, parse_u64, Fields};
use crate::symbols::format::{self, InlineRecord, LineRecord};
use crate::symbols::{SymbolSource, SymbolsError};

/// Deeper inline nesting is dropped (real code stays far below).
pub const MAX_INLINE_DEPTH: u32 = 256;

/// The fields of a `.sym` file's `MODULE os arch debug_id name` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakpadModule {
    pub os: String,
    pub arch: String,
    /// Upper-case, as Breakpad writes it (GUID + age).
    pub debug_id: String,
    pub name: String,
}

/// Reads the `MODULE` line at the start of a `.sym` file, or `None` for anything else.
pub fn parse_module_line(text: &[u8]) -> Option<BreakpadModule> {
    let first = text.split(|&b| b == b'\n').next()?;
    let first = std::str::from_utf8(first).ok()?.trim_end();
    let rest = first.strip_prefix("MODULE ")?;
    let mut it = rest.splitn(4, ' ');
    let (os, arch, id, name) = (it.next()?, it.next()?, it.next()?, it.next()?);
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(BreakpadModule {
        os: os.to_owned(),
        arch: arch.to_owned(),
        debug_id: id.to_ascii_uppercase(),
        name: name.to_owned(),
    })
}

/// `ns::f(int, char const*) const` → `ns::f`; a name without a trailing parameter list is
/// kept (`operator()` stays).
pub fn strip_parameters(name: &str) -> &str {
    let mut s = name.trim_end();
    for suffix in [" const", " volatile", " &&", " &", " noexcept"] {
        if let Some(t) = s.strip_suffix(suffix) {
            s = t.trim_end();
        }
    }
    if !s.ends_with(')') {
        return name.trim_end();
    }
    let mut depth = 0usize;
    for (i, c) in s.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    let head = &s[..i];
                    // `(anonymous namespace)` or a bare `(...)`: nothing to strip
                    return if head.is_empty() {
                        name.trim_end()
                    } else {
                        head
                    };
                }
            }
            _ => {}
        }
    }
    name.trim_end()
}

fn hex(tok: Option<&str>) -> Option<u64> {
    parse_u64(tok?.as_bytes(), 16)
}

fn dec(tok: Option<&str>) -> Option<u64> {
    parse_u64(tok?.as_bytes(), 10)
}

/// Splits off an optional `m` (multiple) marker.
fn skip_m(rest: &str) -> &str {
    rest.strip_prefix("m ").unwrap_or(rest)
}

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

/// The file-table index of `FILE` number `n`, interned on first use (interning the same
/// path again would return the same index, so the cache changes nothing but the time).
fn file_index(c: &mut Collector, files: &mut FxHashMap<u64, FileSlot<'_>>, n: u64) -> Option<u32> {
    let slot = files.get_mut(&n)?;
    Some(*slot.index.get_or_insert_with(|| c.file(slot.path)))
}

/// Builds a symbol table from a Breakpad `.sym` file.
pub fn build_symbol_table_breakpad(text: &[u8]) -> Result<BuiltSymbols, SymbolsError> {
    if parse_module_line(text).is_none() {
        return Err(SymbolsError::Object(
            "not a Breakpad .sym file (no MODULE line)".into(),
        ));
    }
    let mut c = Collector::new(0);
    let mut files: FxHashMap<u64, FileSlot<'_>> = FxHashMap::default();
    let mut origins: FxHashMap<u64, OriginSlot<'_>> = FxHashMap::default();
    let mut publics: Vec<(u32, u32)> = Vec::new(); // (start, name)
    let mut in_func = false;
    let mut skipped = 0usize;
    for_each_line(text, |line| {
        let Ok(line) = line else {
            skipped += 1;
            return;
        };
        let line = line.trim_end();
        let Some(first) = line.bytes().next() else {
            return;
        };
        if first.is_ascii_hexdigit() && !line.starts_with("FUNC ") && !line.starts_with("FILE ") {
            // a line record of the current FUNC: address size line file
            if !in_func {
                return;
            }
            let mut it = Fields::new(line);
            let (Some(addr), Some(size), Some(no), Some(f)) = (
                hex(it.next()),
                hex(it.next()),
                dec(it.next()),
                dec(it.next()),
            ) else {
                skipped += 1;
                return;
            };
            // both evaluated, in this order: the file is interned even for a bad range
            let range = addr.checked_add(size).and_then(|e| c.range(addr, e));
            let file = file_index(&mut c, &mut files, f);
            let (Some((start, end)), Some(file)) = (range, file) else {
                skipped += 1;
                return;
            };
            c.lines.push(LineRecord {
                address: start,
                file,
                line: u32::try_from(no).unwrap_or(0),
                column: 0,
            });
            c.lines.push(LineRecord {
                address: end,
                file: format::NONE,
                line: 0,
                column: 0,
            });
            return;
        }
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "FILE" => {
                in_func = false;
                let (n, path) = rest.split_once(' ').unwrap_or((rest, ""));
                match parse_u64(n.as_bytes(), 10) {
                    Some(n) if !path.is_empty() => {
                        files.insert(n, FileSlot { path, index: None });
                    }
                    _ => skipped += 1,
                }
            }
            "INLINE_ORIGIN" => {
                in_func = false;
                let (n, name) = rest.split_once(' ').unwrap_or((rest, ""));
                match parse_u64(n.as_bytes(), 10) {
                    Some(n) => {
                        origins.insert(
                            n,
                            OriginSlot {
                                name: strip_parameters(name),
                                string: None,
                            },
                        );
                    }
                    None => skipped += 1,
                }
            }
            "FUNC" => {
                in_func = false;
                let mut it = skip_m(rest).splitn(4, ' ');
                let (Some(addr), Some(size), Some(_params), name) =
                    (hex(it.next()), hex(it.next()), it.next(), it.next())
                else {
                    skipped += 1;
                    return;
                };
                let Some((start, end)) = addr.checked_add(size).and_then(|e| c.range(addr, e))
                else {
                    skipped += 1;
                    return;
                };
                let name = c.string(strip_parameters(name.unwrap_or("")));
                c.functions.push(RawFunction {
                    start,
                    end,
                    name,
                    source: SymbolSource::Breakpad,
                    input: 0,
                });
                in_func = true;
            }
            "INLINE" => {
                // INLINE depth call_line call_file origin (addr size)+
                let mut it = Fields::new(rest);
                let (Some(depth), Some(call_line), Some(call_file), Some(origin)) = (
                    dec(it.next()),
                    dec(it.next()),
                    dec(it.next()),
                    dec(it.next()),
                ) else {
                    skipped += 1;
                    return;
                };
                let Ok(depth) = u32::try_from(depth) else {
                    skipped += 1;
                    return;
                };
                if depth >= MAX_INLINE_DEPTH || !in_func {
                    skipped += 1;
                    return;
                }
                let name = match origins.get_mut(&origin) {
                    Some(o) => *o.string.get_or_insert_with(|| c.string(o.name)),
                    None => format::NONE,
                };
                let call_file = file_index(&mut c, &mut files, call_file).unwrap_or(format::NONE);
                loop {
                    let (a, s) = (it.next(), it.next());
                    if a.is_none() {
                        break;
                    }
                    let (Some(addr), Some(size)) = (hex(a), hex(s)) else {
                        skipped += 1;
                        break;
                    };
                    let Some((start, end)) = addr.checked_add(size).and_then(|e| c.range(addr, e))
                    else {
                        skipped += 1;
                        continue;
                    };
                    c.inlines.push((
                        depth,
                        InlineRecord {
                            start,
                            end,
                            name,
                            call_file,
                            call_line: u32::try_from(call_line).unwrap_or(0),
                            call_column: 0,
                        },
                    ));
                }
            }
            "PUBLIC" => {
                in_func = false;
                let mut it = skip_m(rest).splitn(3, ' ');
                let (Some(addr), Some(_params), name) = (hex(it.next()), it.next(), it.next())
                else {
                    skipped += 1;
                    return;
                };
                let Some(start) = c.offset(addr) else {
                    skipped += 1;
                    return;
                };
                let name = c.string(strip_parameters(name.unwrap_or("")));
                publics.push((start, name));
            }
            _ => in_func = false,
        }
    });
    if skipped > 0 {
        c.warn(format!(
            "{skipped} Breakpad records could not be read and were skipped"
        ));
    }
    // PUBLIC symbols last until the next symbol or function start.
    let mut starts: Vec<u32> = publics
        .iter()
        .map(|p| p.0)
        .chain(c.functions.iter().map(|f| f.start))
        .collect();
    starts.sort_unstable();
    starts.dedup();
    let symbols: Vec<RawFunction> = publics
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
        .collect();
    let Finished {
        table,
        warnings,
        inputs,
    } = finish(c, symbols)?;
    let (functions, line_rows) = (table.functions.len(), table.lines.len());
    let inline_records = table.inlines.iter().map(Vec::len).sum();
    let sources = if functions > 0 {
        vec![SymbolSource::Breakpad]
    } else {
        Vec::new()
    };
    Ok(BuiltSymbols {
        bytes: format::write(&table)?,
        sources,
        inputs,
        functions,
        line_rows,
        inline_records,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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

    /// The fast builder writes exactly the reference builder's table (and warnings).
    fn same_as_reference(text: &[u8]) {
        use super::super::breakpad_reference::build_symbol_table_breakpad_reference as reference;
        match (build_symbol_table_breakpad(text), reference(text)) {
            (Ok(fast), Ok(slow)) => {
                assert!(
                    fast.bytes == slow.bytes,
                    "tables differ for {:?}",
                    String::from_utf8_lossy(text)
                );
                assert_eq!(fast.warnings, slow.warnings);
                assert_eq!(fast.sources, slow.sources);
                assert_eq!(
                    (fast.functions, fast.line_rows, fast.inline_records),
                    (slow.functions, slow.line_rows, slow.inline_records)
                );
            }
            (Err(fast), Err(slow)) => assert_eq!(fast.to_string(), slow.to_string()),
            (fast, slow) => panic!(
                "one builder failed: fast {:?}, reference {:?}",
                fast.err(),
                slow.err()
            ),
        }
    }

    #[test]
    fn fast_builder_equals_reference_on_hand_written_text() {
        same_as_reference(SYM.as_bytes());
        for cut in 0..SYM.len() {
            same_as_reference(&SYM.as_bytes()[..cut]);
        }
        let hostile = "MODULE Linux x86_64 00 x\n\
FILE 0 a.c\n\
FILE 1 b.c\n\
FILE 0 c.c\n\
INLINE_ORIGIN 0 f(int)\n\
INLINE_ORIGIN 0 g()\n\
FUNC +10 +20 0 f\n\
+10 8 1 0\n\
18 -8 2 1\n\
18 8 3 +1\n\
20 8 4 7\n\
INLINE 0 1 0 0 10 4 14 4\n\
INLINE 0 1 0 0 10 4  14 4\n\
INLINE 1 1 0 1 zz 4 14 4\n\
FILE 1 d.c\r\n\
28 8 5 1\n\
FUNC 28 8 0 g\n\
28 8 5 1\n\
\u{a0}28 8 5 1\n\
FUNC\n\
28 8 5 1\n\
PUBLIC 30 0 p\n\
PUBLIC m 30 0 q\n\
PUBLIC\n\
\u{ff}\n\
FUNC 40 10 0 h\n\
40 ffffffffffffffff 1 0\n\
40 10 99999999999999999999 0\n";
        same_as_reference(hostile.as_bytes());
        let mut with_bad_utf8 = hostile.as_bytes().to_vec();
        with_bad_utf8.extend_from_slice(b"FUNC 50 10 0 \xff\xfe\n50 10 1 0\n");
        same_as_reference(&with_bad_utf8);
    }

    #[test]
    fn fast_builder_equals_reference_on_libc_and_damaged_pieces() {
        use crate::breakpad_text::test_texts::{for_damaged_pieces, libc_sym};
        let sym = libc_sym();
        same_as_reference(sym.as_bytes());
        for_damaged_pieces(
            &sym,
            |_| true,
            0x5eed_0005,
            400,
            |piece, _| same_as_reference(piece),
        );
    }
}
