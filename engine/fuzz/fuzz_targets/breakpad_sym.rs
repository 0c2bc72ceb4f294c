//! Fuzz target: arbitrary bytes as a Breakpad `.sym` file — the unwind and symbol
//! builders must fail cleanly or build tables that open and answer lookups.
#![no_main]

use engine::breakpad::symbols::build_symbol_table_breakpad;
use engine::breakpad::unwind::build_from_breakpad;
use engine::symbols::SymbolTable;
use engine::unwind::UnwindTable;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let probes = [0u64, 1, 0x10, 0x1000, 0x1234, 0xffff_ffff, u64::MAX];
    if let Ok(built) = build_from_breakpad(data) {
        let table = UnwindTable::open(&built.bytes).expect("a built table opens");
        for a in probes {
            let _ = table.find(a);
        }
    }
    if let Ok(built) = build_symbol_table_breakpad(data) {
        let table = SymbolTable::open(&built.bytes).expect("a built table opens");
        let mut out = Vec::new();
        for a in probes {
            out.clear();
            table.lookup(a, &mut out);
        }
    }
});
