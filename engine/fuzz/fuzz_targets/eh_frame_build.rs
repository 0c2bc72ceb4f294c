//! Fuzz target: arbitrary bytes as the contents of an `.eh_frame` section.
//!
//! Property: reading every CIE and FDE, evaluating every CFI program and writing the table
//! never panic, never hang, and the table always opens and answers lookups (the builder
//! only ever writes well-formed tables, whatever the section holds).
#![no_main]

use engine::dump::Arch;
use engine::unwind::builders::dwarf::add_eh_frame_section;
use engine::unwind::{TableWriter, UnwindTable};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for arch in [Arch::X86_64, Arch::Aarch64] {
        let mut w = TableWriter::new(arch);
        add_eh_frame_section(&mut w, data, 0x1000, 0);
        let built = w.finish();
        let Ok(t) = UnwindTable::open(&built.bytes) else {
            panic!("a table the builder wrote does not open");
        };
        for addr in [0u64, 0x1000, 0x1010, 0xffff_ffff, u64::MAX] {
            let _ = t.find(addr);
        }
        for (start, rule) in t.rows().take(64) {
            let found = t.find(start);
            assert_eq!(
                found.map(|r| r.record),
                rule,
                "lookup at a row start disagrees with the row"
            );
            if let Some(r) = found {
                let _ = r.expression(r.record.cfa);
                let _ = r.expression(r.record.ra);
            }
        }
    }
});
