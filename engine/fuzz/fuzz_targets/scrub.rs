//! The scrubber on arbitrary bytes (as a minidump, an ELF core or text, by their magic):
//! it must not panic, must keep the file's size and its magic, and must finish in time
//! linear in the file whatever its lists repeat (libFuzzer's timeout catches the rest).
#![no_main]

use engine::scrub::{scrub, Options, Rules};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rules = Rules::new();
    let _ = rules.add("builtin:all");
    let _ = rules.add(r"regex:sess-[0-9a-f]{8}");
    for drop_core_heap in [false, true] {
        let mut bytes = data.to_vec();
        let _ = scrub(&mut bytes, &rules, Options { drop_core_heap });
        assert_eq!(bytes.len(), data.len());
        if data.starts_with(b"MDMP") || data.starts_with(b"\x7fELF") {
            assert_eq!(bytes[..4], data[..4]);
        }
    }
});
