//! The first `.sym` symbol builder, kept unchanged as the test oracle of the fast one in
//! [`super::breakpad`]: both must write byte-identical tables from any text.

use rustc_hash::FxHashMap;

use super::breakpad::{parse_module_line, strip_parameters, MAX_INLINE_DEPTH};
use super::{finish, BuiltSymbols, Collector, Finished, RawFunction};
use crate::symbols::format::{self, InlineRecord, LineRecord};
use crate::symbols::{SymbolSource, SymbolsError};

fn hex(tok: Option<&str>) -> Option<u64> {
    u64::from_str_radix(tok?, 16).ok()
}

fn dec(tok: Option<&str>) -> Option<u64> {
    tok?.parse::<u64>().ok()
}

/// Splits off an optional `m` (multiple) marker.
fn skip_m(rest: &str) -> &str {
    rest.strip_prefix("m ").unwrap_or(rest)
}

/// The line-by-line builder this module replaced, kept as the oracle of the tests.
pub(crate) fn build_symbol_table_breakpad_reference(
    text: &[u8],
) -> Result<BuiltSymbols, SymbolsError> {
    if parse_module_line(text).is_none() {
        return Err(SymbolsError::Object(
            "not a Breakpad .sym file (no MODULE line)".into(),
        ));
    }
    let mut c = Collector::new(0);
    let mut files: FxHashMap<u64, String> = FxHashMap::default();
    let mut origins: FxHashMap<u64, String> = FxHashMap::default();
    let mut publics: Vec<(u32, u32)> = Vec::new(); // (start, name)
    let mut in_func = false;
    let mut skipped = 0usize;
    let file_index = |c: &mut Collector, files: &FxHashMap<u64, String>, n: u64| {
        files.get(&n).map(|p| c.file(p))
    };
    for raw in text.split(|&b| b == b'\n') {
        let Ok(line) = std::str::from_utf8(raw) else {
            skipped += 1;
            continue;
        };
        let line = line.trim_end();
        let Some(first) = line.bytes().next() else {
            continue;
        };
        if first.is_ascii_hexdigit() && !line.starts_with("FUNC ") && !line.starts_with("FILE ") {
            // a line record of the current FUNC: address size line file
            if !in_func {
                continue;
            }
            let mut it = line.split(' ');
            let (Some(addr), Some(size), Some(no), Some(f)) = (
                hex(it.next()),
                hex(it.next()),
                dec(it.next()),
                dec(it.next()),
            ) else {
                skipped += 1;
                continue;
            };
            let (Some((start, end)), Some(file)) = (
                addr.checked_add(size).and_then(|e| c.range(addr, e)),
                file_index(&mut c, &files, f),
            ) else {
                skipped += 1;
                continue;
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
            continue;
        }
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "FILE" => {
                in_func = false;
                let (n, path) = rest.split_once(' ').unwrap_or((rest, ""));
                match n.parse::<u64>() {
                    Ok(n) if !path.is_empty() => {
                        files.insert(n, path.to_owned());
                    }
                    _ => skipped += 1,
                }
            }
            "INLINE_ORIGIN" => {
                in_func = false;
                let (n, name) = rest.split_once(' ').unwrap_or((rest, ""));
                match n.parse::<u64>() {
                    Ok(n) => {
                        origins.insert(n, strip_parameters(name).to_owned());
                    }
                    _ => skipped += 1,
                }
            }
            "FUNC" => {
                in_func = false;
                let mut it = skip_m(rest).splitn(4, ' ');
                let (Some(addr), Some(size), Some(_params), name) =
                    (hex(it.next()), hex(it.next()), it.next(), it.next())
                else {
                    skipped += 1;
                    continue;
                };
                let Some((start, end)) = addr.checked_add(size).and_then(|e| c.range(addr, e))
                else {
                    skipped += 1;
                    continue;
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
                let mut it = rest.split(' ');
                let (Some(depth), Some(call_line), Some(call_file), Some(origin)) = (
                    dec(it.next()),
                    dec(it.next()),
                    dec(it.next()),
                    dec(it.next()),
                ) else {
                    skipped += 1;
                    continue;
                };
                let Ok(depth) = u32::try_from(depth) else {
                    skipped += 1;
                    continue;
                };
                if depth >= MAX_INLINE_DEPTH || !in_func {
                    skipped += 1;
                    continue;
                }
                let name = match origins.get(&origin) {
                    Some(n) => c.string(&n.clone()),
                    None => format::NONE,
                };
                let call_file = file_index(&mut c, &files, call_file).unwrap_or(format::NONE);
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
                    continue;
                };
                let Some(start) = c.offset(addr) else {
                    skipped += 1;
                    continue;
                };
                let name = c.string(strip_parameters(name.unwrap_or("")));
                publics.push((start, name));
            }
            _ => in_func = false,
        }
    }
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
