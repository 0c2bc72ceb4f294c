//! Fuzz target: the minidump reader on arbitrary bytes. The property is "no panic, no hang,
//! no unbounded allocation"; a successful read is also exercised through the memory map.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(dump) = engine::dump::minidump::read(data) {
        for t in &dump.threads {
            if let Some(sp) = t.registers.sp() {
                let _ = dump.memory.read_u64(sp);
            }
        }
        for m in &dump.modules {
            let _ = dump.memory.read_bytes(m.base, 64);
            let _ = m.build_id_hex();
        }
    }
});
