//! Fuzz target: arbitrary bytes as a serialized unwind table.
//!
//! Property: `open` fails cleanly or every lookup (and every expression a found rule
//! names) returns without panicking, in bounded time.
#![no_main]

use engine::unwind::UnwindTable;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(t) = UnwindTable::open(data) else {
        return;
    };
    let _ = (t.arch(), t.row_count(), t.palette_len(), t.sources());
    let probe = |addr: u64| {
        if let Some(rule) = t.find(addr) {
            let _ = rule.expression(rule.record.cfa);
            let _ = rule.expression(rule.record.ra);
            for slot in rule.record.regs {
                let _ = rule.expression(slot);
            }
            let _ = rule.source();
        }
    };
    for addr in [
        0u64,
        1,
        0xffff,
        0x1_0000,
        0x1234_5678,
        0xffff_ffff,
        u64::MAX,
    ] {
        probe(addr);
    }
    for (start, _) in t.rows().take(256) {
        probe(start);
        probe(start.wrapping_sub(1));
    }
});
