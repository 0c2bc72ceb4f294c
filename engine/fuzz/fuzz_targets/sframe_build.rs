//! Fuzz target: arbitrary bytes as an SFrame section, for both architectures.
//!
//! Property: decoding, the layout check, the objdump-style formatter and building table
//! rows never panic, never hang, and the table stays bounded; the table then opens and
//! answers lookups.
#![no_main]

use engine::dump::Arch;
use engine::unwind::builders::sframe::add_sframe_section;
use engine::unwind::sframe::{objdump, Sframe};
use engine::unwind::{TableWriter, UnwindTable};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = Sframe::parse(data, 0x1000) {
        let _ = s.check_layout();
        let _ = objdump::format(&s, ".sframe", objdump::Binutils::LATEST);
    }
    for arch in [Arch::X86_64, Arch::Aarch64] {
        let mut w = TableWriter::new(arch);
        let _ = add_sframe_section(&mut w, data, 0x1000, 0);
        let built = w.finish();
        if let Ok(t) = UnwindTable::open(&built.bytes) {
            for addr in [0u64, 0x1000, 0x1010, 0xffff_ffff] {
                let _ = t.find(addr);
            }
        }
    }
});
