//! Fuzz target: arbitrary bytes opened as a source bundle — refused with a typed error or
//! opened, never a panic; every file its manifest lists is then read within the bounds
//! (refused, or at most `max_file_bytes`).
#![no_main]

use engine::source_bundle::{BundleLimits, SourceBundle};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut limits = BundleLimits::default();
    limits.max_entries = 64;
    limits.max_file_bytes = 1 << 16;
    let Ok(bundle) = SourceBundle::open(data.to_vec(), limits) else {
        return;
    };
    for path in bundle.manifest().files.clone() {
        if let Ok(Some(bytes)) = bundle.read(&path) {
            assert!(bytes.len() as u64 <= limits.max_file_bytes);
        }
    }
});
