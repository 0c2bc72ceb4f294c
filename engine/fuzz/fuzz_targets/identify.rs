//! Fuzz target: arbitrary bytes as an upload to `POST /api/v1/binaries` — identifying
//! them (ELF, Mach-O, a Windows PE image or Breakpad `.sym`) must fail with a typed error
//! or describe them with an identifier a dump can name them by, never panic; read from a
//! file too (`identify_file`: Mach-O load commands through a read cache, a `.sym` file
//! named by its first 64 KiB and streamed past).
#![no_main]

use engine::identify::{identify, identify_file};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for got in [identify(data), identify_file(std::io::Cursor::new(data))] {
        if let Ok(info) = got {
            assert!(info.build_id.is_some() || info.debug_id.is_some() || info.code_id.is_some());
        }
    }
});
