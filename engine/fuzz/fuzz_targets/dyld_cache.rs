//! Fuzz target: arbitrary bytes as a dyld shared cache (its main file, then the same bytes
//! as its `.symbols` subcache too): indexing its images, reading an image's names (its
//! symbol table and the cache's local-symbols table) and building its unwind rules from
//! its `__unwind_info` and `__eh_frame` through the cache's mappings, written as
//! `STACK CFI` records and read back by the `.sym` builder.
//!
//! Property: never a panic, never a hang; what is written reads back.
#![no_main]

use engine::dyld_cache;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = dyld_cache::subcache_suffixes(data);
    for subs in [&[][..], &[data][..]] {
        let Ok((arch, images)) = dyld_cache::index(data, subs) else {
            continue;
        };
        for image in images.iter().take(4) {
            let names = dyld_cache::image_symbols(data, subs, image.index).unwrap_or_default();
            let cfi = engine::breakpad::write_cfi::dyld_image_stack_cfi(data, subs, image.index)
                .map(|c| c.text)
                .unwrap_or_default();
            let sym = dyld_cache::breakpad_sym(&image.path, &image.uuid, arch, &names, &cfi);
            let _ = engine::breakpad::unwind::build_from_breakpad(sym.as_bytes());
        }
    }
});
