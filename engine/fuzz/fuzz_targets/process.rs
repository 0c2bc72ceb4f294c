//! Fuzz target: the whole pipeline on arbitrary dump bytes (a core file or a minidump)
//! with no files for its modules: reading, the vdso's tables built from the dump's own
//! memory, every thread's walk (scan and frame pointers over the dump's stack bytes), the
//! crash signature and the report. Property: no panic, no hang, no unbounded allocation,
//! and a report that serializes.
#![no_main]

use engine::process::{process_dump, NoTables, ProcessOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let options = ProcessOptions::default();
    if let Ok(report) = process_dump(data, &NoTables, &options) {
        let _ = serde_json::to_vec(&report);
    }
});
