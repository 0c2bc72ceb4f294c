//! Fuzz target: arbitrary bytes as a Windows ARM64 image's `.pdata`/`.xdata`.
//!
//! The input is the image itself (RVA = offset); its first 64 8-byte chunks are taken as
//! `.pdata` entries, so packed unwind data of every shape and `.xdata` records (headers,
//! extension words, epilogue scopes, every unwind code) are reached without a valid PE
//! around them. Then the same bytes as a whole file, through the builder every binary
//! goes through. Property: no panic, no hang, bounded tables that open and answer.
#![no_main]

use engine::dump::Arch;
use engine::unwind::builders::pe_arm64::add_function;
use engine::unwind::{build_from_elf, TableWriter, UnwindTable};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let read = |rva: u32, len: usize| -> Option<&[u8]> {
        data.get(rva as usize..(rva as usize).checked_add(len)?)
    };
    let mut w = TableWriter::new(Arch::Aarch64);
    for entry in data.chunks_exact(8).take(64) {
        let word =
            |i: usize| u32::from_le_bytes([entry[i], entry[i + 1], entry[i + 2], entry[i + 3]]);
        let _ = add_function(&mut w, &read, word(0), word(4));
    }
    let built = w.finish();
    if let Ok(t) = UnwindTable::open(&built.bytes) {
        for addr in [0u64, 0x10, 0x1000, 0xffff_ffff] {
            let _ = t.find(addr);
        }
    }
    if let Ok(built) = build_from_elf(data, &[]) {
        let _ = UnwindTable::open(&built.bytes);
    }
});
