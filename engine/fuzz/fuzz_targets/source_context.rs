//! Fuzz target: arbitrary bytes read as a source file and a line number asked of it (the
//! first four bytes) — the lines around it or nothing, never a panic, and never more than
//! five lines either side or a line longer than the limit (plus its `…`).
#![no_main]

use engine::report::source_context::{lines_around, SourceLimits, CONTEXT_LINES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, file)) = data.split_first_chunk::<4>() else {
        return;
    };
    let mut limits = SourceLimits::default();
    limits.max_file_bytes = 1 << 16;
    limits.max_line_bytes = 64;
    let Some(c) = lines_around(file, u32::from_le_bytes(*head), &limits) else {
        return;
    };
    assert!(c.pre.len() <= CONTEXT_LINES && c.post.len() <= CONTEXT_LINES);
    for l in c.pre.iter().chain(&c.post).chain(std::iter::once(&c.line)) {
        assert!(l.len() <= limits.max_line_bytes + '…'.len_utf8());
        assert!(!l.contains('\n'));
    }
});
