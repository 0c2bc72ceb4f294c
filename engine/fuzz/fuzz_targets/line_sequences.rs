//! Fuzz target: arbitrary bytes as a `.debug_line` section, read by the on-demand index's
//! row-less reader and by gimli.
//!
//! The first byte picks the byte order (bit 0) and the address size of headers before
//! DWARF 5 (bit 1: 4, else 8); the rest is the section. Property: the reader never panics
//! or hangs, and wherever gimli reads a program the reader gives the same sequences, or
//! fails where gimli fails (`engine::symbols::line_sequences_differences_from_gimli`).
//! Seed it with real sections: `objcopy -O binary --only-section=.debug_line PROG OUT`
//! (after `--decompress-debug-sections`), prefixed with one byte.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, section)) = data.split_first() else {
        return;
    };
    let big_endian = flags & 1 != 0;
    let address_size = if flags & 2 != 0 { 4 } else { 8 };
    let differences =
        engine::symbols::line_sequences_differences_from_gimli(section, big_endian, address_size);
    assert!(differences.is_empty(), "{differences:#?}");
});
