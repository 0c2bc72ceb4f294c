//! Fuzz target: arbitrary bytes as a debug file indexed for on-demand symbol tables —
//! `OnDemandSymbols::new` must decline cleanly, or `symbols_for` must build a table that
//! opens (or fail cleanly) and `inputs`/`sources` must return, without panicking. Answers
//! are not compared with the whole table: on a hostile file the unit ranges the index
//! trusts may not hold the units' records (see the module documentation).
#![no_main]

use engine::binary::FileBytes;
use engine::symbols::{OnDemandSymbols, SymbolTable};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let file: FileBytes = FileBytes::new(data.to_vec());
    let Ok(index) = OnDemandSymbols::new(None, &[file]) else {
        return;
    };
    let probes = [0u64, 1, 0x10, 0x1000, 0x1234, 0xffff_ffff, u64::MAX];
    for rels in [&probes[..], &probes[3..4]] {
        if let Ok(built) = index.symbols_for(rels) {
            let table = SymbolTable::open(&built.bytes).expect("a built table opens");
            let mut out = Vec::new();
            for &a in rels {
                out.clear();
                table.lookup(a, &mut out);
            }
        }
    }
    let _ = (index.inputs(), index.sources());
});
