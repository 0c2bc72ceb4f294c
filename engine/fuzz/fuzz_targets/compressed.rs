//! Fuzz target: the decompression of compressed dumps (zstd, xz, lz4, bzip2, gzip) on
//! arbitrary bytes after each format's magic, with a small output limit. The property: no
//! panic, no hang, never more output than the limit.
#![no_main]

use engine::dump::compressed::{decompress, Compression, Limit};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let magic: &[u8] = match pick % 5 {
        0 => &[0x28, 0xb5, 0x2f, 0xfd],
        1 => &[0xfd, b'7', b'z', b'X', b'Z', 0],
        2 => &[0x04, 0x22, 0x4d, 0x18],
        3 => b"BZh",
        _ => &[0x1f, 0x8b],
    };
    let mut input = magic.to_vec();
    input.extend_from_slice(rest);
    let Some(format) = Compression::of(&input) else {
        return;
    };
    let mut out = Vec::new();
    let limit = 1 << 20;
    let _ = decompress(format, &input[..], &mut out, Limit(limit));
    assert!(out.len() as u64 <= limit);
});
