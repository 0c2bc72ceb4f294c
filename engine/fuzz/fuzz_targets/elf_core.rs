//! Fuzz target: the ELF core reader on arbitrary bytes, then reads of what it returned.
//!
//! The property is "no panic, no hang, bounded memory": every error is fine, and the memory
//! reads exercise the borrowed ranges the reader built.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(dump) = engine::dump::elf_core::read(data) else {
        return;
    };
    for thread in &dump.threads {
        if let Some(sp) = thread.registers.sp() {
            let _ = dump.memory.read_u64(sp);
            let _ = dump.memory.read_bytes(sp, 256);
        }
        if let Some(pc) = thread.registers.pc() {
            let _ = dump.module_index_for(pc);
        }
    }
    for module in &dump.modules {
        let _ = dump.memory.read_to_range_end(module.base);
        let _ = module.contains_code(module.base);
        let _ = module.build_id_hex();
    }
    for (addr, bytes) in dump.memory.ranges() {
        let _ = dump
            .memory
            .read_u32(addr.wrapping_add(bytes.len() as u64).wrapping_sub(2));
    }
});
