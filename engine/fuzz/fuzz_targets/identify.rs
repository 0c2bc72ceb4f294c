//! Fuzz target: arbitrary bytes as an upload to `POST /api/v1/binaries` — identifying
//! them (ELF, Mach-O, a Windows PE image or Breakpad `.sym`) must fail with a typed error
//! or describe them with an identifier a dump can name them by, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use engine::identify::identify;

fuzz_target!(|data: &[u8]| {
    if let Ok(info) = identify(data) {
        assert!(info.build_id.is_some() || info.debug_id.is_some() || info.code_id.is_some());
    }
});
