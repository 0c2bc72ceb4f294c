//! The first `.sym` unwind builder, kept unchanged as the test oracle of the fast one in
//! [`super::breakpad`]: both must write byte-identical tables from any text.

use super::breakpad::{
    breakpad_arch, dwarf_reg, translate, State, Target, BREAKPAD_PRIORITY, MAX_TOKENS,
};
use super::{BuiltTable, TableWriter};
use crate::dump::Arch;
use crate::unwind::rule::UnwindSource;
use crate::unwind::UnwindError;

/// Applies a rule set (`.cfa: $rsp 16 + $rbp: .cfa -16 + ^`) to `state`. Returns false
/// when the text is malformed (then nothing after the error is applied).
fn apply(arch: Arch, rules: &str, state: &mut State) -> bool {
    let tokens: Vec<&str> = rules
        .split_ascii_whitespace()
        .take(MAX_TOKENS + 1)
        .collect();
    if tokens.len() > MAX_TOKENS {
        return false;
    }
    let mut i = 0;
    while i < tokens.len() {
        let Some(name) = tokens[i].strip_suffix(':') else {
            return false;
        };
        let target = match name {
            ".cfa" => Target::Cfa,
            ".ra" => Target::Ra,
            reg => match dwarf_reg(arch, reg) {
                Some(r) => Target::Reg(r),
                None => {
                    // an unknown register (a vector register, say): skip its expression
                    i += 1;
                    while i < tokens.len() && !tokens[i].ends_with(':') {
                        i += 1;
                    }
                    continue;
                }
            },
        };
        let start = i + 1;
        let mut end = start;
        while end < tokens.len() && !tokens[end].ends_with(':') {
            end += 1;
        }
        let Some(expr) = tokens.get(start..end) else {
            return false;
        };
        if expr.is_empty() {
            return false;
        }
        let slot = translate(arch, target, expr);
        state.set(target, slot);
        i = end;
    }
    true
}

fn hex(tok: Option<&str>) -> Option<u64> {
    u64::from_str_radix(tok?, 16).ok()
}

/// The open `STACK CFI INIT` block: its range and the rule state so far.
struct Open {
    end: u64,
    row_start: u64,
    state: State,
    ok: bool,
}

/// The line-by-line builder the fast one replaced, kept as the oracle of the tests.
pub(crate) fn build_from_breakpad_reference(text: &[u8]) -> Result<BuiltTable, UnwindError> {
    let mut lines = text.split(|&b| b == b'\n');
    let first = lines
        .next()
        .map(|l| String::from_utf8_lossy(l).into_owned());
    let arch_name = first
        .as_deref()
        .and_then(|l| l.trim_end().strip_prefix("MODULE "))
        .and_then(|rest| rest.split_ascii_whitespace().nth(1))
        .ok_or_else(|| UnwindError::Object("not a Breakpad .sym file (no MODULE line)".into()))?;
    let arch = breakpad_arch(arch_name)
        .ok_or_else(|| UnwindError::UnsupportedArch(arch_name.chars().take(32).collect()))?;
    let mut w = TableWriter::new(arch);
    w.note_source(UnwindSource::Breakpad);
    w.stats.source_bytes = text.len();
    let mut open: Option<Open> = None;
    let close = |w: &mut TableWriter, o: &Open, until: u64| {
        if !o.ok {
            return;
        }
        match o.state.record(arch) {
            Some(rule) => w.push(o.row_start, until.min(o.end), &rule, BREAKPAD_PRIORITY),
            None => w.stats.skip(|| {
                format!(
                    "STACK CFI at {:#x}: rules that cannot be represented",
                    o.row_start
                )
            }),
        }
    };
    for raw in lines {
        let Some(rest) = raw.strip_prefix(b"STACK ") else {
            continue;
        };
        let Ok(rest) = std::str::from_utf8(rest) else {
            w.stats.skip(|| "a STACK record is not UTF-8".into());
            continue;
        };
        let rest = rest.trim_end();
        if let Some(init) = rest.strip_prefix("CFI INIT ") {
            if let Some(o) = open.take() {
                close(&mut w, &o, o.end);
            }
            let mut it = init.splitn(3, ' ');
            let (Some(addr), Some(size), rules) = (hex(it.next()), hex(it.next()), it.next())
            else {
                w.stats
                    .skip(|| "a STACK CFI INIT record is malformed".into());
                continue;
            };
            let Some(end) = addr.checked_add(size) else {
                w.stats.skip(|| "a STACK CFI INIT range overflows".into());
                continue;
            };
            let mut state = State::new();
            let ok = apply(arch, rules.unwrap_or(""), &mut state);
            if ok {
                w.stats.entries += 1;
            } else {
                w.stats
                    .skip(|| format!("STACK CFI INIT at {addr:#x}: malformed rules"));
            }
            open = Some(Open {
                end,
                row_start: addr,
                state,
                ok,
            });
        } else if let Some(delta) = rest.strip_prefix("CFI ") {
            let mut it = delta.splitn(2, ' ');
            let (Some(addr), rules) = (hex(it.next()), it.next()) else {
                w.stats.skip(|| "a STACK CFI record is malformed".into());
                continue;
            };
            let Some(o) = open.as_mut() else {
                w.stats
                    .skip(|| "a STACK CFI record outside any INIT".into());
                continue;
            };
            if addr < o.row_start || addr >= o.end {
                o.ok = false;
                w.stats
                    .skip(|| format!("STACK CFI at {addr:#x} lies outside its INIT range"));
                continue;
            }
            let snapshot = Open {
                end: o.end,
                row_start: o.row_start,
                state: o.state.clone(),
                ok: o.ok,
            };
            close(&mut w, &snapshot, addr);
            o.row_start = addr;
            if !apply(arch, rules.unwrap_or(""), &mut o.state) {
                o.ok = false;
                w.stats
                    .skip(|| format!("STACK CFI at {addr:#x}: malformed rules"));
            }
        }
        // STACK WIN and anything else: not used on the platforms we walk
    }
    if let Some(o) = open.take() {
        close(&mut w, &o, o.end);
    }
    Ok(w.finish())
}
