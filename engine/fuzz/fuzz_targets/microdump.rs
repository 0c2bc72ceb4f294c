//! Fuzz target: arbitrary bytes read as a Breakpad microdump — as they are, and as the
//! records of one (each line behind logcat's `brief` or `threadtime` prefix of Breakpad's
//! tag, between the begin and end markers) — are read or refused with a typed error,
//! never a panic, within the reader's bounds; a microdump read has one thread, modules
//! sorted and not overlapping, and no more stack than the bound.
#![no_main]

use engine::dump::microdump;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check(data);
    let text = String::from_utf8_lossy(data);
    let mut log = String::from("W/google-breakpad( 3745): -----BEGIN BREAKPAD MICRODUMP-----\n");
    for (k, line) in text.lines().enumerate() {
        if k % 2 == 0 {
            log.push_str(&format!("W/google-breakpad( 3745): {line}\n"));
        } else {
            log.push_str(&format!(
                "02-23 15:49:14.700  1740  1739 F google-breakpad: {line}\n"
            ));
        }
    }
    log.push_str("W/google-breakpad( 3745): -----END BREAKPAD MICRODUMP-----\n");
    check(log.as_bytes());
    let _ = engine::dump::read_dump(log.as_bytes());
});

fn check(bytes: &[u8]) {
    let _ = microdump::sniff(bytes);
    let Ok(d) = microdump::read(bytes) else {
        return;
    };
    assert_eq!(d.threads.len(), 1);
    assert!(d.modules.len() <= microdump::MAX_MODULES);
    assert!(d.modules.windows(2).all(|w| w[0].end <= w[1].base));
    let stack: usize = d.memory.ranges().map(|(_, b)| b.len()).sum();
    assert!(stack <= microdump::MAX_STACK_BYTES);
}
