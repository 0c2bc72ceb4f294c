//! The records of a Breakpad `.sym` file: which kind each line is and what its fields are.
//!
//! Every reader of `.sym` text (the symbol builder, the unwind builder and the index)
//! classifies lines with [`classify`] and reads a record's fields with the function of
//! its kind here, so a line is read one way wherever it is read. The rules are the ones
//! the builders have always applied (tables built from any text are unchanged by them):
//! - trailing whitespace is trimmed; a line empty then is [`Record::Blank`];
//! - a line starting with a hex digit that is not `FUNC `/`FILE ` is a line record of the
//!   current `FUNC` (so a bare `FUNC` is a malformed line record, as in the first builder);
//! - otherwise the word before the first space is the record's kind, and for `STACK` the
//!   words after it (`CFI INIT`, `CFI`, anything else such as `WIN`);
//! - fields are separated by single spaces (`str::split(' ')`), numbers are read by
//!   [`super::text`] exactly as `u64::from_str_radix`/`str::parse` read them, and a record
//!   whose fields cannot be read is `None` (its reader counts it as skipped).

use super::text::{parse_u64, Fields};

/// One line, classified (see the module documentation); `&str`s are the rest of the line
/// after the record's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    /// Not UTF-8; `stack` when its bytes start with `STACK ` (the unwind builder counts
    /// those as skipped STACK records, the symbol builder counts every such line).
    NotUtf8 {
        stack: bool,
    },
    /// Nothing but whitespace.
    Blank,
    /// `addr size line file`: the whole (trimmed) line.
    Line(&'a str),
    File(&'a str),
    InlineOrigin(&'a str),
    Func(&'a str),
    Inline(&'a str),
    Public(&'a str),
    /// `STACK CFI INIT …`: what follows `INIT `.
    CfiInit(&'a str),
    /// `STACK CFI …`: what follows `CFI `.
    Cfi(&'a str),
    /// `STACK WIN …` or any other `STACK` record: what follows `STACK ` (the unwind
    /// builder reads `STACK WIN` records of x86 files).
    OtherStack(&'a str),
    /// `MODULE`, `INFO` and any kind we do not know.
    Other,
}

/// The record of one line, as [`super::text::for_each_line`] hands it over.
pub(crate) fn classify<'a>(line: Result<&'a str, &'a [u8]>) -> Record<'a> {
    match line {
        Ok(line) => classify_str(line.trim_end()),
        Err(raw) => Record::NotUtf8 {
            stack: raw.starts_with(b"STACK "),
        },
    }
}

/// The record of a line whose trailing whitespace is trimmed.
pub(crate) fn classify_str(line: &str) -> Record<'_> {
    let Some(first) = line.bytes().next() else {
        return Record::Blank;
    };
    if first.is_ascii_hexdigit() && !line.starts_with("FUNC ") && !line.starts_with("FILE ") {
        return Record::Line(line);
    }
    let (kind, rest) = split_space(line).unwrap_or((line, ""));
    match kind {
        "FILE" => Record::File(rest),
        "INLINE_ORIGIN" => Record::InlineOrigin(rest),
        "FUNC" => Record::Func(rest),
        "INLINE" => Record::Inline(rest),
        "PUBLIC" => Record::Public(rest),
        "STACK" => {
            if let Some(init) = rest.strip_prefix("CFI INIT ") {
                Record::CfiInit(init)
            } else if let Some(delta) = rest.strip_prefix("CFI ") {
                Record::Cfi(delta)
            } else {
                Record::OtherStack(rest)
            }
        }
        _ => Record::Other,
    }
}

/// `s.split_once(' ')` without the searcher's set-up cost (tokens here are short).
pub(crate) fn split_space(s: &str) -> Option<(&str, &str)> {
    let i = s.bytes().position(|b| b == b' ')?;
    Some((s.get(..i)?, s.get(i + 1..)?))
}

/// The first `N - 1` space-separated fields of `s` and the rest, as `s.splitn(N, ' ')`
/// yields them (`None` where that yields nothing).
pub(crate) fn fields<const N: usize>(s: &str) -> [Option<&str>; N] {
    let mut out = [None; N];
    let mut rest = Some(s);
    for (i, slot) in out.iter_mut().enumerate() {
        let Some(r) = rest else { break };
        if i + 1 == N {
            *slot = Some(r);
            break;
        }
        match split_space(r) {
            Some((head, tail)) => {
                *slot = Some(head);
                rest = Some(tail);
            }
            None => {
                *slot = Some(r);
                rest = None;
            }
        }
    }
    out
}

fn hex(tok: Option<&str>) -> Option<u64> {
    parse_u64(tok?.as_bytes(), 16)
}

fn dec(tok: Option<&str>) -> Option<u64> {
    parse_u64(tok?.as_bytes(), 10)
}

/// `s.splitn(3, ' ')` with the first field read as a hex number. The usual first field,
/// up to 15 hex digits and a space, is read in one pass (an `INIT` or `PUBLIC` line per
/// function: this was a tenth of the index's time).
fn hex_then_fields(s: &str) -> (Option<u64>, Option<&str>, Option<&str>) {
    let bytes = s.as_bytes();
    let mut v = 0u64;
    let mut i = 0;
    while let Some(d) = bytes.get(i).and_then(|&b| super::text::hex_digit(b)) {
        v = v << 4 | d;
        i += 1;
    }
    if (1..=15).contains(&i) && bytes.get(i) == Some(&b' ') {
        let [second, rest] = fields::<2>(s.get(i + 1..).unwrap_or(""));
        return (Some(v), second, rest);
    }
    let [first, second, rest] = fields::<3>(s);
    (hex(first), second, rest)
}

/// Splits off an optional `m` (multiple) marker.
fn skip_m(rest: &str) -> &str {
    rest.strip_prefix("m ").unwrap_or(rest)
}

/// An address range as a record gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extent {
    pub addr: u64,
    pub size: u64,
}

impl Extent {
    /// The end address, `None` when it overflows.
    pub(crate) fn end(self) -> Option<u64> {
        self.addr.checked_add(self.size)
    }
}

/// `FUNC [m] addr size param_size name`: the range and the name (empty when missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Func<'a> {
    pub range: Extent,
    pub name: &'a str,
}

/// Reads what follows `FUNC `.
pub(crate) fn func(rest: &str) -> Option<Func<'_>> {
    let [addr, size, params, name] = fields::<4>(skip_m(rest));
    let range = Extent {
        addr: hex(addr)?,
        size: hex(size)?,
    };
    params?;
    Some(Func {
        range,
        name: name.unwrap_or(""),
    })
}

/// `PUBLIC [m] addr param_size name`: the address and the name (empty when missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Public<'a> {
    pub addr: u64,
    pub name: &'a str,
}

/// Reads what follows `PUBLIC `.
pub(crate) fn public(rest: &str) -> Option<Public<'_>> {
    let (addr, params, name) = hex_then_fields(skip_m(rest));
    let addr = addr?;
    params?;
    Some(Public {
        addr,
        name: name.unwrap_or(""),
    })
}

/// A line record: `addr size line file` (fields after the fourth are ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line {
    pub range: Extent,
    pub line: u64,
    pub file: u64,
}

/// Reads a [`Record::Line`].
pub(crate) fn line(line: &str) -> Option<Line> {
    let mut it = Fields::new(line);
    let (addr, size, no, file) = (
        hex(it.next()),
        hex(it.next()),
        dec(it.next()),
        dec(it.next()),
    );
    Some(Line {
        range: Extent {
            addr: addr?,
            size: size?,
        },
        line: no?,
        file: file?,
    })
}

/// Reads what follows `FILE ` (`number path`, the path not empty) or `INLINE_ORIGIN `
/// (`number name`, the name perhaps empty when `path_needed` is false).
fn numbered(rest: &str, path_needed: bool) -> Option<(u64, &str)> {
    let (n, text) = split_space(rest).unwrap_or((rest, ""));
    let n = parse_u64(n.as_bytes(), 10)?;
    (!path_needed || !text.is_empty()).then_some((n, text))
}

/// `FILE number path`.
pub(crate) fn file(rest: &str) -> Option<(u64, &str)> {
    numbered(rest, true)
}

/// `INLINE_ORIGIN number name`.
pub(crate) fn inline_origin(rest: &str) -> Option<(u64, &str)> {
    numbered(rest, false)
}

/// `INLINE depth call_line call_file origin (addr size)+`.
#[derive(Debug, Clone)]
pub(crate) struct Inline<'a> {
    pub depth: u64,
    pub call_line: u64,
    pub call_file: u64,
    pub origin: u64,
    /// The `addr size` pairs.
    pub ranges: InlineRanges<'a>,
}

/// Reads what follows `INLINE `.
pub(crate) fn inline(rest: &str) -> Option<Inline<'_>> {
    let mut it = Fields::new(rest);
    let (depth, call_line, call_file, origin) = (
        dec(it.next()),
        dec(it.next()),
        dec(it.next()),
        dec(it.next()),
    );
    Some(Inline {
        depth: depth?,
        call_line: call_line?,
        call_file: call_file?,
        origin: origin?,
        ranges: InlineRanges { fields: Some(it) },
    })
}

/// The ranges of an `INLINE` record: `Some(range)` for each pair, then `None` once for a
/// pair that cannot be read (nothing after it is read).
#[derive(Debug, Clone)]
pub(crate) struct InlineRanges<'a> {
    fields: Option<Fields<'a>>,
}

impl Iterator for InlineRanges<'_> {
    type Item = Option<Extent>;

    fn next(&mut self) -> Option<Option<Extent>> {
        let it = self.fields.as_mut()?;
        let (a, s) = (it.next(), it.next());
        a?;
        match (hex(a), hex(s)) {
            (Some(addr), Some(size)) => Some(Some(Extent { addr, size })),
            _ => {
                self.fields = None;
                Some(None)
            }
        }
    }
}

/// `STACK CFI INIT addr size rules`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CfiInit<'a> {
    pub range: Extent,
    /// Empty when missing.
    pub rules: &'a str,
}

/// Reads what follows `STACK CFI INIT `.
pub(crate) fn cfi_init(rest: &str) -> Option<CfiInit<'_>> {
    let (addr, size, rules) = hex_then_fields(rest);
    Some(CfiInit {
        range: Extent {
            addr: addr?,
            size: hex(size)?,
        },
        rules: rules.unwrap_or(""),
    })
}

/// Reads what follows `STACK CFI ` (`addr rules`): the address and the rules (empty when
/// missing).
pub(crate) fn cfi(rest: &str) -> Option<(u64, &str)> {
    let [addr, rules] = fields::<2>(rest);
    Some((hex(addr)?, rules.unwrap_or("")))
}

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
///
/// The name may be empty: dump_syms writes `MODULE windows x86_64 ID ` (the name left
/// blank) for a mingw-w64 image whose CodeView record names no PDB, as the record it is
/// read from does; such a file is looked up under the image's own name.
pub fn parse_module_line(text: &[u8]) -> Option<BreakpadModule> {
    let first = text.split(|&b| b == b'\n').next()?;
    let first = std::str::from_utf8(first)
        .ok()?
        .trim_end_matches(['\r', '\n']);
    let rest = first.strip_prefix("MODULE ")?;
    let mut it = rest.splitn(4, ' ');
    let (os, arch, id) = (it.next()?, it.next()?, it.next()?);
    let name = it.next().unwrap_or("").trim_end();
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

/// Lines read for `INFO` records, which `dump_syms` writes right after `MODULE`.
const INFO_LINES: usize = 16;

/// The `INFO CODE_ID <id> [<code file>]` record of a `.sym` file's first lines: the code id
/// as written, and the name of the image it describes where one is given (dump_syms
/// writes it for Windows modules, whose `MODULE` line names the PDB).
pub fn parse_code_id_line(text: &[u8]) -> Option<(String, Option<String>)> {
    let line = text
        .split(|&b| b == b'\n')
        .take(INFO_LINES)
        .find_map(|l| l.strip_prefix(b"INFO CODE_ID "))?;
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let (id, file) = match line.split_once(' ') {
        Some((id, file)) => (id, Some(file.trim()).filter(|f| !f.is_empty())),
        None => (line, None),
    };
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| (id.to_owned(), file.map(str::to_owned)))
}

/// The architecture word of the `MODULE` line as the unwind builder has always read it:
/// the first line decoded lossily, fields split at any ASCII whitespace (so it may differ
/// from [`parse_module_line`]'s on odd text; the index declines files where they differ).
pub(crate) fn module_arch_word(text: &[u8]) -> Option<String> {
    let first = text.split(|&b| b == b'\n').next()?;
    let first = String::from_utf8_lossy(first);
    let rest = first.trim_end().strip_prefix("MODULE ")?;
    rest.split_ascii_whitespace().nth(1).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_line_may_leave_the_name_blank() {
        // dump_syms on a mingw-w64 image linked with --build-id (a CodeView record
        // without a PDB name)
        let m =
            parse_module_line(b"MODULE windows x86_64 2B7B2081BA9B9D6C23A3CA1B6C252F071 \nINFO")
                .expect("read");
        assert_eq!(
            (
                m.os.as_str(),
                m.arch.as_str(),
                m.debug_id.as_str(),
                m.name.as_str()
            ),
            ("windows", "x86_64", "2B7B2081BA9B9D6C23A3CA1B6C252F071", "")
        );
        let m = parse_module_line(b"MODULE Linux x86_64 ABC0 a b.so \r\n").expect("read");
        assert_eq!(m.name, "a b.so");
        assert!(parse_module_line(b"MODULE windows x86_64\n").is_none());
        assert!(parse_module_line(b"MODULE windows x86_64 \n").is_none());
    }

    #[test]
    fn code_id_lines_name_the_image() {
        let sym = b"MODULE windows x86_64 9F85221 inl.pdb\nINFO CODE_ID 6B08FDD210000 inl.exe\r\n";
        assert_eq!(
            parse_code_id_line(sym),
            Some(("6B08FDD210000".into(), Some("inl.exe".into())))
        );
        let linux = b"MODULE Linux x86_64 ABC0 a\nINFO CODE_ID abcdef01\n";
        assert_eq!(parse_code_id_line(linux), Some(("abcdef01".into(), None)));
        assert_eq!(parse_code_id_line(b"MODULE Linux x86_64 ABC0 a\n"), None);
        assert_eq!(parse_code_id_line(b"INFO CODE_ID xyz a\n"), None);
    }

    fn rec(line: &str) -> Record<'_> {
        classify(Ok(line))
    }

    #[test]
    fn each_record_kind_is_classified() {
        assert_eq!(rec("MODULE Linux x86_64 00 x"), Record::Other);
        assert_eq!(rec("INFO CODE_ID 0123"), Record::Other);
        assert_eq!(rec("FILE 3 /src/a b.c\r"), Record::File("3 /src/a b.c"));
        assert_eq!(
            rec("INLINE_ORIGIN 2 f(int)"),
            Record::InlineOrigin("2 f(int)")
        );
        assert_eq!(rec("FUNC m 10 20 0 f"), Record::Func("m 10 20 0 f"));
        assert_eq!(rec("10 4 7 3"), Record::Line("10 4 7 3"));
        assert_eq!(rec("INLINE 0 5 1 2 10 4"), Record::Inline("0 5 1 2 10 4"));
        assert_eq!(rec("PUBLIC 30 0 p"), Record::Public("30 0 p"));
        assert_eq!(
            rec("STACK CFI INIT 10 20 .cfa: $rsp 8 +  "),
            Record::CfiInit("10 20 .cfa: $rsp 8 +")
        );
        assert_eq!(
            rec("STACK CFI 11 .cfa: $rsp 16 +"),
            Record::Cfi("11 .cfa: $rsp 16 +")
        );
        assert_eq!(
            rec("STACK WIN 4 10 20 0 0 0 0 0 0 1 $eip"),
            Record::OtherStack("WIN 4 10 20 0 0 0 0 0 0 1 $eip")
        );
        assert_eq!(rec(" \t\r"), Record::Blank);
        assert_eq!(rec(""), Record::Blank);
        assert_eq!(
            classify(Err(b"STACK CFI \xff")),
            Record::NotUtf8 { stack: true }
        );
        assert_eq!(
            classify(Err(b"FUNC \xff")),
            Record::NotUtf8 { stack: false }
        );
    }

    #[test]
    fn odd_lines_are_classified_as_the_builders_always_read_them() {
        // a bare FUNC or FILE starts with a hex digit: a (malformed) line record
        assert_eq!(rec("FUNC"), Record::Line("FUNC"));
        assert_eq!(rec("FILE\r"), Record::Line("FILE"));
        assert_eq!(rec("fade 1 2 3"), Record::Line("fade 1 2 3"));
        // not a hex digit first: the word before the space is the kind
        assert_eq!(rec(" 10 4 7 3"), Record::Other);
        assert_eq!(rec("\u{a0}10 4 7 3"), Record::Other);
        assert_eq!(rec("STACK"), Record::OtherStack(""));
        assert_eq!(rec("STACK "), Record::OtherStack(""));
        assert_eq!(rec("STACK  CFI 10"), Record::OtherStack(" CFI 10"));
        assert_eq!(rec("STACK CFI INIT"), Record::Cfi("INIT"));
        assert_eq!(rec("STACK CFI INITIAL 10"), Record::Cfi("INITIAL 10"));
        assert_eq!(rec("PUBLIC"), Record::Public(""));
        assert_eq!(rec("INLINE_ORIGINS 1 f"), Record::Other);
    }

    #[test]
    fn fields_of_each_record() {
        let ext = |addr, size| Extent { addr, size };
        assert_eq!(
            func("m 10 20 8 ns::f(int) const"),
            Some(Func {
                range: ext(0x10, 0x20),
                name: "ns::f(int) const"
            })
        );
        assert_eq!(
            func("10 20 8"),
            Some(Func {
                range: ext(0x10, 0x20),
                name: ""
            })
        );
        assert_eq!(
            public("m 30 0 p q"),
            Some(Public {
                addr: 0x30,
                name: "p q"
            })
        );
        // past the one-pass reader's 15 digits: read as `u64::from_str_radix` reads them
        assert_eq!(
            public("ffffffffffffffff 0 p").map(|p| p.addr),
            Some(u64::MAX)
        );
        assert_eq!(
            public("1ffffffffffffffff 0 p"),
            None,
            "17 hex digits overflow"
        );
        assert_eq!(
            public("+30 0 p"),
            Some(Public {
                addr: 0x30,
                name: "p"
            })
        );
        assert_eq!(
            line("10 4 7 3 extra"),
            Some(Line {
                range: ext(0x10, 4),
                line: 7,
                file: 3
            })
        );
        assert_eq!(file("3 /a b.c"), Some((3, "/a b.c")));
        assert_eq!(inline_origin("2 "), Some((2, "")));
        assert_eq!(inline_origin("2"), Some((2, "")));
        let i = inline("1 5 2 4 10 4 20 8").expect("inline");
        assert_eq!((i.depth, i.call_line, i.call_file, i.origin), (1, 5, 2, 4));
        assert_eq!(
            i.ranges.collect::<Vec<_>>(),
            vec![Some(ext(0x10, 4)), Some(ext(0x20, 8))]
        );
        assert_eq!(
            cfi_init("10 20 .cfa: $rsp 8 +"),
            Some(CfiInit {
                range: ext(0x10, 0x20),
                rules: ".cfa: $rsp 8 +"
            })
        );
        assert_eq!(cfi("18 .cfa: $rsp 16 +"), Some((0x18, ".cfa: $rsp 16 +")));
        assert_eq!(cfi("18"), Some((0x18, "")));
        assert_eq!(ext(u64::MAX, 1).end(), None);
        let m = parse_module_line(b"MODULE Linux x86_64 0123abcd0 lib c.so\nFUNC").expect("m");
        assert_eq!(
            (
                m.os.as_str(),
                m.arch.as_str(),
                m.debug_id.as_str(),
                m.name.as_str()
            ),
            ("Linux", "x86_64", "0123ABCD0", "lib c.so")
        );
        // the unwind builder's reading skips empty fields
        assert_eq!(
            module_arch_word(b"MODULE  x86_64 E sao").as_deref(),
            Some("E")
        );
        assert_eq!(
            parse_module_line(b"MODULE  x86_64 E sao").map(|m| m.arch),
            Some("x86_64".to_owned())
        );
    }

    #[test]
    fn malformed_records_are_none() {
        for bad in [
            "",
            "10",
            "10 20",
            "zz 20 0 f",
            "10 zz 0 f",
            "-10 20 0 f",
            "10 20",
            "m 10 20",
            "10  20 0 f",
            "10000000000000000 20 0 f",
        ] {
            assert_eq!(func(bad), None, "FUNC {bad:?}");
        }
        for bad in ["", "30", "zz 0 p", "m 30", "30", "-30 0 p", "m"] {
            assert_eq!(public(bad), None, "PUBLIC {bad:?}");
        }
        for bad in [
            "",
            "10 4 7",
            "10 4 7 x",
            "10 4 -7 3",
            "10 4 7 99999999999999999999",
            "10  4 7 3",
        ] {
            assert_eq!(line(bad), None, "line {bad:?}");
        }
        for bad in ["", "x a.c", "3", "3 ", "-3 a.c"] {
            assert_eq!(file(bad), None, "FILE {bad:?}");
        }
        for bad in ["", "x f", "-1 f"] {
            assert_eq!(inline_origin(bad), None, "INLINE_ORIGIN {bad:?}");
        }
        for bad in ["", "0 5 2", "0 5 2 x 10 4", "-1 5 2 4 10 4"] {
            assert!(inline(bad).is_none(), "INLINE {bad:?}");
        }
        // a bad pair ends the ranges, once
        let i = inline("0 5 2 4 10 4 zz 4 20 4").expect("inline");
        assert_eq!(
            i.ranges.collect::<Vec<_>>(),
            vec![
                Some(Extent {
                    addr: 0x10,
                    size: 4
                }),
                None
            ]
        );
        let i = inline("0 5 2 4 10").expect("inline");
        assert_eq!(i.ranges.collect::<Vec<_>>(), vec![None]);
        for bad in ["", "10", "zz 20 r", "10 zz r", "10  20 r"] {
            assert_eq!(cfi_init(bad), None, "STACK CFI INIT {bad:?}");
        }
        for bad in ["", "zz .cfa: $rsp 8 +", " 18 .cfa: $rsp 8 +"] {
            assert_eq!(cfi(bad), None, "STACK CFI {bad:?}");
        }
        for bad in [
            &b"FUNC 1 2 3 f"[..],
            b"MODULE Linux x86_64",
            b"MODULE Linux x86_64 xyz a",
            b"MODULE Linux x86_64  a",
            b"MODULE \xff x86_64 00 a",
        ] {
            assert_eq!(parse_module_line(bad), None, "{bad:?}");
        }
        assert_eq!(module_arch_word(b"MODULE Linux"), None);
        assert_eq!(module_arch_word(b"FUNC 1 2 3"), None);
    }
}
