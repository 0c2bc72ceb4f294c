//! The lines, fields and numbers of a Breakpad `.sym` file, read fast and exactly as the
//! standard library would read them ([`super::tokenize`] reads records with them).
//!
//! Both `.sym` builders (unwind rules and symbols) walk a file of some 10^5 short lines.
//! Validating each line as UTF-8 and parsing its numbers through `str::parse` dominated
//! their time, so this module validates the whole text once (lines of valid UTF-8 text are
//! valid UTF-8 too), falls back to line-by-line validation only for text that is not, and
//! parses numbers from bytes. The number parsers accept exactly what `u64::from_str_radix`
//! and `i64::from_str` accept (an optional `+`, for `i64` an optional `-`, no empty digits,
//! no overflow), so a record is read or skipped exactly as before.

/// Calls `f` with every `\n`-separated line of `text` (the last one may be empty): `Ok`
/// with the line when it is UTF-8, `Err` with its bytes when it is not. Lines keep a
/// trailing `\r`.
pub(crate) fn for_each_line<'a>(text: &'a [u8], mut f: impl FnMut(Result<&'a str, &'a [u8]>)) {
    let Ok(s) = std::str::from_utf8(text) else {
        for raw in text.split(|&b| b == b'\n') {
            f(std::str::from_utf8(raw).map_err(|_| raw));
        }
        return;
    };
    let mut start = 0usize;
    for nl in memchr::memchr_iter(b'\n', text) {
        // a '\n' byte is always a character boundary, so `get` never fails here
        f(s.get(start..nl).ok_or(&[]));
        start = nl + 1;
    }
    f(s.get(start..).ok_or(&[]));
}

/// The value of each byte as a digit, 0xff for a byte that is no digit of any radix.
const DIGITS: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut b = 0usize;
    while b < 256 {
        t[b] = match b as u8 {
            c @ b'0'..=b'9' => c - b'0',
            c @ b'a'..=b'z' => c - b'a' + 10,
            c @ b'A'..=b'Z' => c - b'A' + 10,
            _ => 0xff,
        };
        b += 1;
    }
    t
};

/// The value of a hex digit.
#[inline]
pub(crate) fn hex_digit(b: u8) -> Option<u64> {
    digit(b, 16)
}

#[inline]
fn digit(b: u8, radix: u32) -> Option<u64> {
    let d = DIGITS[usize::from(b)];
    (u32::from(d) < radix).then_some(u64::from(d))
}

/// Unsigned digits of `radix` (10 or 16) after an optional sign has been removed.
#[inline]
fn magnitude(digits: &[u8], radix: u32) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    // Up to 15 hex or 19 decimal digits cannot overflow: no checked arithmetic (the
    // common case, and most of a `.sym` file's parsing time).
    let safe = if radix == 16 { 15 } else { 19 };
    let mut v = 0u64;
    if digits.len() <= safe && radix <= 16 {
        for &b in digits {
            v = v * u64::from(radix) + digit(b, radix)?;
        }
        return Some(v);
    }
    for &b in digits {
        v = v
            .checked_mul(u64::from(radix))?
            .checked_add(digit(b, radix)?)?;
    }
    Some(v)
}

/// `u64::from_str_radix(tok, radix)`, from bytes (inlined: with a constant radix the
/// digit loop needs no multiplication).
#[inline]
pub(crate) fn parse_u64(tok: &[u8], radix: u32) -> Option<u64> {
    match tok {
        [b'+' | b'-'] => None,
        [b'+', rest @ ..] => magnitude(rest, radix),
        _ => magnitude(tok, radix),
    }
}

/// `tok.parse::<i64>()`, from bytes.
pub(crate) fn parse_i64(tok: &[u8]) -> Option<i64> {
    match tok {
        [b'+' | b'-'] => None,
        [b'-', rest @ ..] => {
            // i64::MIN has no positive counterpart: accumulate negatively
            if rest.is_empty() {
                return None;
            }
            let mut v = 0i64;
            for &b in rest {
                let d = i64::try_from(digit(b, 10)?).ok()?;
                v = v.checked_mul(10)?.checked_sub(d)?;
            }
            Some(v)
        }
        [b'+', rest @ ..] => i64::try_from(magnitude(rest, 10)?).ok(),
        _ => i64::try_from(magnitude(tok, 10)?).ok(),
    }
}

/// `str::split(' ')` over bytes, without the iterator machinery of `str::Split`.
#[derive(Debug, Clone)]
pub(crate) struct Fields<'a> {
    rest: Option<&'a str>,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(s: &'a str) -> Self {
        Fields { rest: Some(s) }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let s = self.rest?;
        // fields are a few bytes long: a plain scan beats setting up a vector search
        match s.bytes().position(|b| b == b' ') {
            Some(i) => {
                self.rest = s.get(i + 1..);
                s.get(..i)
            }
            None => {
                self.rest = None;
                Some(s)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKENS: &[&str] = &[
        "",
        "+",
        "-",
        "0",
        "+0",
        "-0",
        "00",
        "1f",
        "1F",
        "+ff",
        "-ff",
        "--1",
        "++1",
        "+-1",
        "g",
        "12g",
        " 1",
        "1 ",
        "ffffffffffffffff",
        "10000000000000000",
        "18446744073709551615",
        "18446744073709551616",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "+9223372036854775807",
        "123456789",
        "-42",
        "\u{ff}1",
        "١",
        "z",
        "Z",
    ];

    #[test]
    fn numbers_parse_exactly_like_std() {
        for t in TOKENS {
            assert_eq!(
                parse_u64(t.as_bytes(), 16),
                u64::from_str_radix(t, 16).ok(),
                "{t:?} hex"
            );
            assert_eq!(
                parse_u64(t.as_bytes(), 10),
                t.parse::<u64>().ok(),
                "{t:?} dec"
            );
            assert_eq!(parse_i64(t.as_bytes()), t.parse::<i64>().ok(), "{t:?} i64");
        }
    }

    #[test]
    fn fields_split_like_std() {
        for s in [
            "",
            " ",
            "a",
            "a b",
            "a  b",
            " a b ",
            "FUNC 1 2 3 name with spaces",
        ] {
            let ours: Vec<&str> = Fields::new(s).collect();
            let std: Vec<&str> = s.split(' ').collect();
            assert_eq!(ours, std, "{s:?}");
        }
    }

    #[test]
    fn lines_like_split_and_utf8_per_line() {
        for text in [
            &b""[..],
            b"\n",
            b"a\nb",
            b"a\nb\n",
            b"a\r\n\xff\xfe\nc",
            b"\xc3\n\xa9",
            b"MODULE x\nFUNC 1 2 3 f\n",
        ] {
            let mut ours = Vec::new();
            for_each_line(text, |l| {
                ours.push(l.map(str::to_owned).map_err(<[u8]>::to_vec))
            });
            let std: Vec<Result<String, Vec<u8>>> = text
                .split(|&b| b == b'\n')
                .map(|l| {
                    std::str::from_utf8(l)
                        .map(str::to_owned)
                        .map_err(|_| l.to_vec())
                })
                .collect();
            assert_eq!(ours, std, "{text:?}");
        }
    }
}

/// `.sym` texts for the tests that hold the index to the whole-file builders: the
/// `dump_syms` output of this process's libc (with its separate debug file's functions
/// and lines when the system has one, as a symbol store made for minidumps holds it), and
/// seeded random damage of pieces of it.
#[cfg(test)]
pub(crate) mod test_texts {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    fn dump_syms(binary: &Path) -> String {
        let out = Command::new("dump_syms")
            .arg(binary)
            .output()
            .expect("run dump_syms (cargo install --locked dump_syms; see test.sh)");
        assert!(out.status.success(), "dump_syms {}", binary.display());
        String::from_utf8(out.stdout).expect("dump_syms writes UTF-8")
    }

    /// The libc this test process runs with, from /proc/self/maps.
    fn own_libc() -> PathBuf {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
        let path = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .expect("libc mapped in this process");
        PathBuf::from(path)
    }

    /// libc's `.sym`: the library's MODULE line and STACK records, and its debug file's
    /// FILE/FUNC/line/INLINE records when `/usr/lib/debug/.build-id` has it.
    pub(crate) fn libc_sym() -> String {
        let own = dump_syms(&own_libc());
        let debug = own
            .lines()
            .find_map(|l| l.strip_prefix("INFO CODE_ID "))
            .map(str::to_lowercase)
            .filter(|id| id.len() > 2)
            .map(|id| {
                PathBuf::from(format!(
                    "/usr/lib/debug/.build-id/{}/{}.debug",
                    &id[..2],
                    &id[2..]
                ))
            })
            .filter(|p| p.is_file());
        let Some(debug) = debug else {
            return own;
        };
        let debug_text = dump_syms(&debug);
        let mut merged: String = own.lines().take(1).map(|l| format!("{l}\n")).collect();
        for line in debug_text.lines().skip(1) {
            if !line.starts_with("STACK ") {
                merged.push_str(line);
                merged.push('\n');
            }
        }
        for line in own.lines().filter(|l| l.starts_with("STACK ")) {
            merged.push_str(line);
            merged.push('\n');
        }
        merged
    }

    /// A small xorshift generator: the damage is random but the same on every run.
    pub(crate) struct Rng(u64);

    impl Rng {
        pub(crate) fn new(seed: u64) -> Self {
            Rng(seed | 1)
        }
        pub(crate) fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n.max(1) as u64) as usize
        }
    }

    const TOKENS: &[&[u8]] = &[
        b"",
        b" ",
        b"  ",
        b"+",
        b"-",
        b"+10",
        b"-8",
        b"0",
        b"ffffffffffffffff",
        b"fffffffff",
        b"99999999999999999999",
        b"zz",
        b"\xff",
        b"\xc3\xa9",
        b"\r",
        b"\t",
        b"m",
        b":",
        b".cfa:",
        b".ra:",
        b"$rsp",
        b"$rbp",
        b"^",
        b"FUNC",
        b"FILE",
        b"INLINE",
        b"PUBLIC",
        b"STACK CFI",
        b"STACK CFI INIT",
        b"()",
        b"(",
    ];

    /// `count` damaged copies of `lines[from..from + len]` under `module`: lines swapped,
    /// duplicated, dropped, and space-separated fields replaced by hostile tokens.
    /// Calls `f` with `count` damaged pieces of the records of `sym` that `keep` selects,
    /// each under `sym`'s `MODULE` line, and the generator (for more randomness).
    pub(crate) fn for_damaged_pieces(
        sym: &str,
        keep: impl Fn(&str) -> bool,
        seed: u64,
        count: usize,
        mut f: impl FnMut(&[u8], &mut Rng),
    ) {
        let lines: Vec<&str> = sym.lines().collect();
        let module = lines
            .first()
            .copied()
            .unwrap_or("MODULE Linux x86_64 00 libc.so.6");
        let body: Vec<&str> = lines.iter().skip(1).copied().filter(|l| keep(l)).collect();
        let mut rng = Rng::new(seed);
        for _ in 0..count {
            let len = 20 + rng.below(200);
            let piece = damaged(module, &body, &mut rng, len);
            f(&piece, &mut rng);
        }
    }

    pub(crate) fn damaged(module: &str, lines: &[&str], rng: &mut Rng, len: usize) -> Vec<u8> {
        let from = rng.below(lines.len().saturating_sub(len));
        let mut piece: Vec<Vec<u8>> = lines
            .iter()
            .skip(from)
            .take(len)
            .map(|l| l.as_bytes().to_vec())
            .collect();
        let edits = 1 + rng.below(12);
        for _ in 0..edits {
            if piece.is_empty() {
                break;
            }
            let i = rng.below(piece.len());
            match rng.below(6) {
                0 => {
                    let j = rng.below(piece.len());
                    piece.swap(i, j);
                }
                1 => {
                    let l = piece[i].clone();
                    let j = rng.below(piece.len());
                    piece.insert(j, l);
                }
                2 => {
                    piece.remove(i);
                }
                _ => {
                    let fields: Vec<&[u8]> = piece[i].split(|&b| b == b' ').collect();
                    let k = rng.below(fields.len());
                    let token = TOKENS[rng.below(TOKENS.len())];
                    let mut out = Vec::new();
                    for (n, f) in fields.iter().enumerate() {
                        if n > 0 {
                            out.push(b' ');
                        }
                        out.extend_from_slice(if n == k { token } else { f });
                    }
                    piece[i] = out;
                }
            }
        }
        let mut text = format!("{module}\n").into_bytes();
        for l in piece {
            text.extend_from_slice(&l);
            text.push(b'\n');
        }
        if rng.below(4) == 0 {
            let cut = rng.below(text.len());
            text.truncate(cut.max(module.len()));
        }
        text
    }
}
