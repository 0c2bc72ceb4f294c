//! Fuzz target: arbitrary bytes read as Apple's legacy `.crash` text report — every input
//! is read or refused with a typed error, never a panic, within the reader's bounds; a
//! report read becomes a `Dump`.
#![no_main]

use engine::dump::apple;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(report) = apple::crash_text::parse(data) else {
        return;
    };
    assert!(report.threads.len() <= apple::MAX_THREADS);
    assert!(report.images.len() <= apple::MAX_IMAGES);
    for t in &report.threads {
        assert!(t.frames.len() <= apple::MAX_FRAMES);
    }
    let _ = report.into_dump();
});
