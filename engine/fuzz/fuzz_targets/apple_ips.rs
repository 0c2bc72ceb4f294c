//! Fuzz target: arbitrary bytes behind an `.ips` header line, read as Apple's `.ips`
//! crash report — every input is read or refused with a typed error, never a panic, and
//! a report read becomes a `Dump` whose frames all lie in the address space.
#![no_main]

use engine::dump::apple;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // as it is (header and body from the input), and behind a valid header
    check(data);
    let mut framed = b"{\"bug_type\":\"309\"}\n".to_vec();
    framed.extend_from_slice(data);
    check(&framed);
});

fn check(bytes: &[u8]) {
    let Ok(report) = apple::ips::parse(bytes) else {
        return;
    };
    assert!(report.threads.len() <= apple::MAX_THREADS);
    assert!(report.images.len() <= apple::MAX_IMAGES);
    let dump = report.into_dump();
    for t in &dump.threads {
        assert!(t.prewalked.as_ref().map_or(0, Vec::len) <= apple::MAX_FRAMES);
    }
}
