//! Fuzz target: arbitrary bytes as an Apple upload to `POST /api/v1/binaries` — a zipped
//! dSYM (`dsym_zip::each_dwarf_file`: every DWARF file streamed out under small bounds,
//! or a typed refusal) and a universal Mach-O (`macho_fat::slices`: every slice inside
//! the file, or a typed refusal); never a panic, never more bytes out than the bounds.
#![no_main]

use engine::dsym_zip::{each_dwarf_file, ZipLimits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut limits = ZipLimits::default();
    limits.max_entries = 64;
    limits.max_files = 8;
    limits.max_total_bytes = 1 << 20;
    limits.max_ratio = 100;
    let mut out = 0u64;
    let _ = each_dwarf_file(std::io::Cursor::new(data), limits, |_, r| {
        let mut sink = Vec::new();
        let n = r.read_to_end(&mut sink).map_err(|_| ())?;
        out += n as u64;
        Ok::<(), ()>(())
    });
    assert!(out <= limits.max_total_bytes);
    if let Ok(slices) = engine::macho_fat::slices(data) {
        for s in slices {
            assert!(s.offset + s.size <= data.len() as u64);
        }
    }
});
