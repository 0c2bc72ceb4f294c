//! Fuzz target: arbitrary bytes as an `__unwind_info` section, for both architectures.
//!
//! Property: parsing, the objdump-style formatter and building table rows never panic,
//! never hang, and the table stays bounded; the table then opens and answers lookups.
#![no_main]

use engine::dump::Arch;
use engine::unwind::builders::compact_unwind::{add_unwind_info, Context};
use engine::unwind::compact::{objdump, UnwindInfo};
use engine::unwind::{TableWriter, UnwindTable};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(info) = UnwindInfo::parse(data) {
        let _ = objdump::format(&info);
    }
    // the "code" answers every read, so indirect stack sizes are exercised too
    let read = |addr: u64| Some(addr as u32);
    for arch in [Arch::X86_64, Arch::Aarch64] {
        let mut w = TableWriter::new(arch);
        let ctx = Context {
            image_base: 0x1_0000_0000,
            link_base: 0x1_0000_0000,
            eh_frame: None,
            read_u32: &read,
        };
        let _ = add_unwind_info(&mut w, data, &ctx);
        let built = w.finish();
        if let Ok(t) = UnwindTable::open(&built.bytes) {
            for addr in [0u64, 0x1000, 0x1010, 0xffff_ffff] {
                let _ = t.find(addr);
            }
        }
    }
});
