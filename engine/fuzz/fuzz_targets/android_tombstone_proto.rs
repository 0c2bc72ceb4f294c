//! Fuzz target: arbitrary bytes read as Android's `tombstone.proto` — every input is
//! decoded or refused with a typed error, never a panic, within the reader's bounds (the
//! census before decoding), and a tombstone read becomes a `Dump`.
#![no_main]

use engine::dump::android;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // as it is, and behind an `arch = ARM64` field as debuggerd starts one
    check(data);
    let mut framed = vec![0x08, 0x01];
    framed.extend_from_slice(data);
    check(&framed);
});

fn check(bytes: &[u8]) {
    let _ = android::proto::fingerprinted(bytes);
    let Ok(t) = android::proto::parse(bytes) else {
        return;
    };
    assert!(t.threads.len() <= android::MAX_THREADS);
    assert!(t.mappings.len() <= android::MAX_MAPPINGS);
    let frames: usize = t.threads.iter().map(|t| t.frames.len()).sum();
    assert!(frames <= android::MAX_TOTAL_FRAMES);
    let dumped: usize = t.memory.ranges.iter().map(|(_, b)| b.len()).sum();
    assert!(dumped <= android::memory::MAX_MEMORY_BYTES);
    // a GWP-ASan/MTE error's backtraces are bounded as a thread's
    if let Some(e) = &t.memory_error {
        assert!(e
            .stacks
            .iter()
            .all(|s| s.frames.len() <= android::MAX_FRAMES));
    }
    let dump = t.into_dump();
    for t in &dump.threads {
        assert!(t.prewalked.as_ref().map_or(0, Vec::len) <= android::MAX_FRAMES);
    }
}
