//! Scrubbing a dump before it is stored (issue 41): a project's rules ([`Rules`]:
//! built-in detectors of tokens, keys, e-mail addresses and card numbers, and the
//! operator's regular expressions) overwrite their matches in the memory and strings a
//! dump carries, in place, so the dump keeps its size and structure, stays valid and
//! walks the same; and, for ELF cores, an option keeps no heap memory at all.
//!
//! Pure: a byte buffer in, the same buffer changed, counts out. What is overwritten:
//! - a minidump: the bytes of its memory ranges and thread stacks, its Linux command
//!   line and environment streams, and its Crashpad annotation values (`minidump`);
//! - an ELF core: the contents of its `PT_LOAD` segments (`elf_core`);
//! - a text report (Apple `.ips`/`.crash`, Android tombstones) or any other file: the
//!   whole file, matches overwritten with `*` ([`TEXT_FILL`]) so that text stays text.
//!
//! Matches in a minidump or core are overwritten with zero bytes ([`FILL`]). Each
//! memory range is scanned on its own: a secret split across two ranges is not seen.
//! A dump whose structure cannot be read is scrubbed as a whole, as text is.

mod elf_core;
mod minidump;
mod rules;

pub use rules::{luhn, Builtin, RuleError, Rules, MAX_PATTERN_BYTES};

use std::ops::Range;

/// The byte matches in a minidump's or a core's memory are overwritten with.
pub const FILL: u8 = 0;
/// The byte matches in a text report are overwritten with.
pub const TEXT_FILL: u8 = b'*';

/// What to scrub besides the rules' matches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// An ELF core keeps no heap: every `PT_LOAD` segment that is neither a thread's
    /// stack nor inside a module's mapped file is overwritten with [`FILL`] whole.
    pub drop_core_heap: bool,
}

/// What a scrub changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scrubbed {
    /// Rule matches overwritten.
    pub matches: u64,
    /// Core segments overwritten whole as heap ([`Options::drop_core_heap`]).
    pub heap_segments: u64,
    /// Their bytes.
    pub heap_bytes: u64,
    /// Whether the file was scrubbed whole as text (not a minidump or an ELF core the
    /// scrubber can read).
    pub whole_file: bool,
}

/// Scrubs `bytes` in place with `rules` and `options`.
pub fn scrub(bytes: &mut [u8], rules: &Rules, options: Options) -> Scrubbed {
    let mut out = Scrubbed::default();
    if let Some(spans) = minidump::spans(bytes) {
        out.matches = fill_spans(bytes, &spans, rules);
    } else if let Some(segments) = elf_core::segments(bytes) {
        if options.drop_core_heap {
            for span in elf_core::heap(bytes, &segments) {
                if let Some(b) = bytes.get_mut(span) {
                    out.heap_segments += 1;
                    out.heap_bytes += b.len() as u64;
                    b.fill(FILL);
                }
            }
        }
        let spans: Vec<Range<usize>> = segments.into_iter().map(|s| s.file).collect();
        out.matches = fill_spans(bytes, &spans, rules);
    } else if !rules.is_empty() {
        out.matches = rules.fill(bytes, TEXT_FILL);
        out.whole_file = true;
    }
    out
}

/// Applies `rules` to each span of `bytes` on its own, overlapping spans merged first
/// (each byte is scanned once, whatever a hostile dump's lists repeat).
fn fill_spans(bytes: &mut [u8], spans: &[Range<usize>], rules: &Rules) -> u64 {
    if rules.is_empty() {
        return 0;
    }
    let mut n = 0;
    for span in &merged(spans) {
        if let Some(b) = bytes.get_mut(span.clone()) {
            n += rules.fill(b, FILL);
        }
    }
    n
}

/// `spans` sorted, the overlapping ones merged, the empty ones left out.
fn merged(spans: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut sorted: Vec<Range<usize>> = spans.iter().filter(|s| !s.is_empty()).cloned().collect();
    sorted.sort_by_key(|s| s.start);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(sorted.len());
    for s in sorted {
        match out.last_mut() {
            Some(last) if s.start < last.end => last.end = last.end.max(s.end),
            _ => out.push(s),
        }
    }
    out
}

#[cfg(test)]
mod tests;
