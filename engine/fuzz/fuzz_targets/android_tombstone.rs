//! Fuzz target: arbitrary bytes behind a tombstone's `*** *** ***` header, read as
//! Android's text tombstone, and the same lines as logcat prints them (each behind a
//! `threadtime` or `brief` prefix of debuggerd's tag, other tags' lines between) — every
//! input is read or refused with a typed error, never a panic, within the reader's
//! bounds, and a tombstone read becomes a `Dump` (modules sorted, every frame's thread
//! within the frame bound).
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
    // as logcat prints it: threadtime, brief, and the bytes' own lines as log lines
    let text = String::from_utf8_lossy(&framed);
    let mut log = String::from("--------- beginning of crash\n");
    for (k, line) in text.lines().enumerate() {
        match k % 3 {
            0 => log.push_str(&format!(
                "11-29 14:35:46.123  4321  4321 F DEBUG   : {line}\n"
            )),
            1 => log.push_str(&format!("F/DEBUG   ( 4321): {line}\n")),
            _ => log.push_str(&format!("{line}\n")),
        }
    }
    check(log.as_bytes());
});

fn check(bytes: &[u8]) {
    let Ok(t) = android::parse(bytes) else {
        return;
    };
    assert!(t.threads.len() <= android::MAX_THREADS);
    assert!(t.mappings.len() <= android::MAX_MAPPINGS);
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
    assert!(dump.modules.windows(2).all(|w| w[0].base <= w[1].base));
    for t in &dump.threads {
        assert!(t.prewalked.as_ref().map_or(0, Vec::len) <= android::MAX_FRAMES);
    }
}
