//! Fuzz target: arbitrary bytes as a Breakpad `.sym` file indexed for one walk — the index
//! must decline cleanly or answer every lookup exactly as the whole-file tables do
//! (differential: the whole-file builders are the oracle).
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use worker::breakpad_index::BreakpadIndex;
use worker::symbols::{build_symbol_table_breakpad, SymbolTable};
use worker::unwind::{build_from_breakpad, UnwindTable};

fuzz_target!(|data: &[u8]| {
    let Ok(index) = BreakpadIndex::new(Arc::new(data.to_vec())) else {
        return;
    };
    let probes = [0u64, 1, 0x10, 0x18, 0x20, 0x1000, 0x1008, 0x1234, 0xffff_ffff, u64::MAX];
    let whole = build_from_breakpad(data).expect("an indexed file has a MODULE line");
    let whole = UnwindTable::open(&whole.bytes).expect("a built table opens");
    for a in probes {
        assert_eq!(
            whole.find(a).map(|r| r.record),
            index.find_rule(a).map(|r| r.record),
            "unwind rule at {a:#x}"
        );
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
