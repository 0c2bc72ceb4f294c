//! Fuzz target: arbitrary bytes as a symbol table — `open` must fail cleanly or every
//! lookup (and the list of source files) must return without panicking.
#![no_main]

use engine::symbols::SymbolTable;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(table) = SymbolTable::open(data) {
        let mut out = Vec::new();
        for addr in [0u64, 1, 0x1000, 0x1234, 0xffff_ffff, u64::MAX] {
            out.clear();
            table.lookup(addr, &mut out);
        }
        for (start, end, _, _) in table.functions().take(64) {
            out.clear();
            table.lookup(start, &mut out);
            out.clear();
            table.lookup(end.saturating_sub(1), &mut out);
        }
        let _ = table.sources();
        let _ = table.source_files();
    }
});
