//! Fuzz target: arbitrary bytes as a Breakpad `.sym` file indexed for one walk — the index
//! must decline cleanly or answer every lookup exactly as the whole-file tables do
//! (differential: the whole-file builders are the oracle). Symbols are compared for files
//! whose line and INLINE records lie inside their FUNC, as the index documents (a record
//! spilling past its function can answer for another function's addresses).
#![no_main]

use std::sync::Arc;

use engine::breakpad::index::BreakpadIndex;
use engine::breakpad::symbols::build_symbol_table_breakpad;
use engine::breakpad::unwind::build_from_breakpad;
use engine::symbols::SymbolTable;
use engine::unwind::UnwindTable;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(index) = BreakpadIndex::new(Arc::new(data.to_vec())) else {
        return;
    };
    let probes = [
        0u64,
        1,
        0x10,
        0x18,
        0x20,
        0x1000,
        0x1008,
        0x1234,
        0xffff_ffff,
        u64::MAX,
    ];
    let whole = build_from_breakpad(data).expect("an indexed file has a MODULE line");
    let whole = UnwindTable::open(&whole.bytes).expect("a built table opens");
    for a in probes {
        assert_eq!(
            whole.find(a).map(|r| r.record),
            index.find_rule(a).map(|r| r.record),
            "unwind rule at {a:#x}"
        );
    }
    if !records_within_functions(data) {
        // outside the index's documented domain: line records spilling out of their FUNC
        return;
    }
    let whole = build_symbol_table_breakpad(data).expect("an indexed file has a MODULE line");
    let whole = SymbolTable::open(&whole.bytes).expect("a built table opens");
    let mut rels = probes.to_vec();
    rels.sort_unstable();
    let built = index.symbols_for(&rels).expect("builds");
    let table = SymbolTable::open(&built.bytes).expect("a built table opens");
    for a in rels {
        let (mut x, mut y) = (Vec::new(), Vec::new());
        whole.lookup(a, &mut x);
        table.lookup(a, &mut y);
        assert_eq!(x, y, "symbols at {a:#x}");
    }
});

fn hex(tok: Option<&str>) -> Option<u64> {
    u64::from_str_radix(tok?, 16).ok()
}

/// Whether every line and INLINE record that parses lies inside the FUNC it follows
/// (judged loosely: any doubt counts as outside).
fn records_within_functions(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let mut func: Option<(u64, u64)> = None;
    let inside = |f: Option<(u64, u64)>, a: Option<u64>, n: Option<u64>| match (f, a, n) {
        (Some((s, e)), Some(a), Some(n)) => a >= s && a.checked_add(n).is_some_and(|x| x <= e),
        (None, _, _) | (_, None, _) | (_, _, None) => true,
    };
    for line in text.lines() {
        let line = line.trim_end();
        let Some(first) = line.bytes().next() else {
            continue;
        };
        if first.is_ascii_hexdigit() && !line.starts_with("FUNC ") && !line.starts_with("FILE ") {
            let mut it = line.split(' ');
            if !inside(func, hex(it.next()), hex(it.next())) {
                return false;
            }
            continue;
        }
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "FUNC" => {
                let mut it = rest.strip_prefix("m ").unwrap_or(rest).split(' ');
                func = match (hex(it.next()), hex(it.next())) {
                    (Some(a), Some(n)) => a.checked_add(n).map(|e| (a, e)),
                    _ => None,
                };
            }
            "INLINE" => {
                let tokens: Vec<&str> = rest.split(' ').skip(4).collect();
                for pair in tokens.chunks(2) {
                    if !inside(func, hex(pair.first().copied()), hex(pair.get(1).copied())) {
                        return false;
                    }
                }
            }
            _ => func = None,
        }
    }
    true
}
