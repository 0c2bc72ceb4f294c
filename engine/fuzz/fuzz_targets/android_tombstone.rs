//! Fuzz target: arbitrary bytes behind a tombstone's `*** *** ***` header, read as
//! Android's text tombstone — every input is read or refused with a typed error, never a
//! panic, within the reader's bounds, and a tombstone read becomes a `Dump` (modules
//! sorted, every frame's thread within the frame bound).
#![no_main]

use engine::dump::android;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // as it is, and behind a header (so that the body's lines are reached)
    check(data);
    let mut framed = b"*** *** *** *** *** *** *** *** *** *** *** *** *** *** *** ***\n".to_vec();
    framed.extend_from_slice(data);
    check(&framed);
    let _ = engine::dump::read_dump(data);
});

fn check(bytes: &[u8]) {
    let Ok(t) = android::text::parse(bytes) else {
        return;
    };
    assert!(t.threads.len() <= android::MAX_THREADS);
    assert!(t.mappings.len() <= android::MAX_MAPPINGS);
    let dump = t.into_dump();
    assert!(dump.modules.windows(2).all(|w| w[0].base <= w[1].base));
    for t in &dump.threads {
        assert!(t.prewalked.as_ref().map_or(0, Vec::len) <= android::MAX_FRAMES);
    }
}
