//! Fuzz target: arbitrary bytes as an arm binary's `.ARM.exidx` and `.ARM.extab`.
//!
//! Property: reading the index, following its extab references, executing every entry's
//! opcodes and building table rows never panic, never hang, and the table stays bounded;
//! the table then opens and answers lookups.
#![no_main]

use engine::dump::Arch;
use engine::unwind::builders::ehabi::{self, Section};
use engine::unwind::{TableWriter, UnwindTable};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // the first byte says where the index ends and the extab begins
    let split = data
        .first()
        .map_or(0, |&b| usize::from(b) * 8)
        .min(data.len());
    let (exidx, extab) = data.split_at(split);
    let exidx = Section {
        bytes: exidx,
        address: 0x8000,
    };
    let extab = Section {
        bytes: extab,
        address: 0x8000 + split as u64,
    };
    for entry in ehabi::read_index(exidx, extab) {
        if let Ok(kind) = &entry.kind {
            let _ = ehabi::entry_rule(kind);
        }
    }
    let mut w = TableWriter::new(Arch::Arm);
    ehabi::add_index(&mut w, exidx, extab, 0, &[(0, 0x1_0000_0000)]);
    let built = w.finish();
    if let Ok(t) = UnwindTable::open(&built.bytes) {
        for addr in [0u64, 0x1000, 0x8000, 0xffff_ffff] {
            let _ = t.find(addr);
        }
    }
});
