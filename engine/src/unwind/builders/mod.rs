//! Builders of unwind tables, one per source format, and the [`TableWriter`] they share.
//!
//! A builder turns its format's rules into `(start, end, RuleRecord)` ranges, addresses as
//! offsets from the binary's link base, and pushes them with a priority (lower wins where
//! two sources describe the same address: `.eh_frame` before `.debug_frame`, the binary's
//! own tables before Breakpad's). The writer does everything else once, for all formats.

mod aarch64_cfi;
pub mod compact_unwind;
pub mod dwarf;
pub mod ehabi;
pub mod pdb_fpo;
pub mod pdb_frame_data;
pub mod pe_arm64;
pub mod pe_x64;
pub mod sframe;

use std::collections::HashMap;

use rustc_hash::FxBuildHasher;

use super::format::{self, MAX_ADDRESS};
use super::rule::{RuleRecord, UnwindSource};
use crate::dump::Arch;

pub use dwarf::build_from_elf;

/// What a build saw, for warnings and benchmarks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Entries (FDEs, SFrame FDEs, compact-unwind entries…) read successfully.
    pub entries: usize,
    /// Entries skipped because they could not be read or evaluated.
    pub entries_skipped: usize,
    /// The first reason an entry was skipped, for the warning message.
    pub first_error: Option<String>,
    /// Ranges dropped: beyond 4 GiB from the link base, or overlapping an earlier range of
    /// the same priority.
    pub ranges_dropped: usize,
    /// Rows in the finished table.
    pub rows: usize,
    /// Distinct rules (palette entries, including the no-rule entry).
    pub palette: usize,
    /// Bytes of the source sections read (`.eh_frame` + `.debug_frame` + …).
    pub source_bytes: usize,
    /// Bytes of the finished table.
    pub table_bytes: usize,
}

impl BuildStats {
    /// Records a skipped entry.
    pub fn skip(&mut self, why: impl FnOnce() -> String) {
        self.entries_skipped += 1;
        if self.first_error.is_none() {
            self.first_error = Some(why());
        }
    }
}

/// A finished table and what its build saw.
#[derive(Debug, Clone)]
pub struct BuiltTable {
    pub bytes: Vec<u8>,
    pub stats: BuildStats,
    /// For [`build_from_elf`]: the input files whose sections gave rows, by index (0 the
    /// file itself, then its extra debug files in order). Empty for other builders.
    pub inputs: Vec<usize>,
}

/// Sorts ranges by (priority, start, end). Builders push each entry's rows as an
/// ascending, gap-free run, so sorting the runs (one per FDE) and concatenating them is an order of
/// magnitude cheaper than sorting every row; interleaved runs fall back to a full sort.
fn sort_ranges(ranges: &mut Vec<Range>) {
    let key = |r: &Range| (r.priority, r.start, r.end);
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut begin = 0;
    for i in 1..=ranges.len() {
        // a run is a gap-free block of rows: blocks never interleave unless they overlap
        if i == ranges.len()
            || ranges[i].start != ranges[i - 1].end
            || ranges[i].priority != ranges[i - 1].priority
        {
            runs.push((begin, i));
            begin = i;
        }
    }
    if runs.len() <= 1 {
        return;
    }
    runs.sort_unstable_by_key(|&(b, _)| key(&ranges[b]));
    let mut out = Vec::with_capacity(ranges.len());
    for (b, e) in runs {
        out.extend_from_slice(&ranges[b..e]);
    }
    if !out.windows(2).all(|w| key(&w[0]) <= key(&w[1])) {
        out.sort_unstable_by_key(key);
    }
    *ranges = out;
}

const RECENT_SLOTS: usize = 1024;

/// The front-cache slot of a record: mixes CFA, return address and the first registers.
fn recent_slot(r: &RuleRecord) -> usize {
    let mix = |s: &super::rule::Slot| -> u64 {
        u64::from(s.kind) | u64::from(s.reg) << 8 | (s.value as u32 as u64) << 16
    };
    let h = mix(&r.cfa)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(mix(&r.ra))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(mix(&r.regs[0]) ^ mix(&r.regs[1]).rotate_left(29) ^ u64::from(r.flags))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 54) as usize % RECENT_SLOTS
}

/// The palette key of a record: its 120 bytes as 15 words.
fn record_key(rule: &RuleRecord) -> [u64; 15] {
    bytemuck::pod_read_unaligned(bytemuck::bytes_of(rule))
}

/// A point in a [`TableWriter`]'s ranges to [`TableWriter::rewind`] to.
#[derive(Debug, Clone, Copy)]
pub struct RangeMark {
    len: usize,
    last_end: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct Range {
    start: u64,
    end: u64,
    rule: u32,
    priority: u8,
}

/// Collects ranges from any builder and writes the table bytes.
pub struct TableWriter {
    arch: Arch,
    palette: Vec<RuleRecord>,
    /// Keyed by the record's bytes as 15 words: hashing and comparing 15 u64s is several
    /// times faster than the derived field-by-field `Hash` of 30 small fields.
    palette_index: HashMap<[u64; 15], u32, FxBuildHasher>,
    /// Direct-mapped front cache of palette indices keyed by a cheap mix of the fields
    /// that usually differ (a real binary has a few hundred hot rules).
    recent: [u32; RECENT_SLOTS],
    expressions: Vec<u8>,
    expression_index: HashMap<Vec<u8>, u32, FxBuildHasher>,
    ranges: Vec<Range>,
    sources: u32,
    pub stats: BuildStats,
}

impl TableWriter {
    pub fn new(arch: Arch) -> Self {
        let mut palette_index = HashMap::with_hasher(FxBuildHasher);
        palette_index.insert(record_key(&RuleRecord::NONE), 0);
        TableWriter {
            arch,
            palette: vec![RuleRecord::NONE],
            palette_index,
            recent: [0; RECENT_SLOTS],
            expressions: Vec::new(),
            expression_index: HashMap::with_hasher(FxBuildHasher),
            ranges: Vec::new(),
            sources: 0,
            stats: BuildStats::default(),
        }
    }

    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Stores an expression once; returns its (offset, length) in the expression area, or
    /// `None` if it is longer than a slot can describe.
    pub fn add_expression(&mut self, bytes: &[u8]) -> Option<(u32, u16)> {
        let len = u16::try_from(bytes.len()).ok()?;
        if let Some(&off) = self.expression_index.get(bytes) {
            return Some((off, len));
        }
        let off = u32::try_from(self.expressions.len()).ok()?;
        // keep offsets representable as the slot's i32 value
        if off > i32::MAX as u32 - u32::from(len) {
            return None;
        }
        self.expressions.extend_from_slice(bytes);
        self.expression_index.insert(bytes.to_vec(), off);
        Some((off, len))
    }

    /// The palette index of `rule`, adding it if new.
    pub fn intern(&mut self, rule: &RuleRecord) -> u32 {
        let slot = recent_slot(rule);
        let cached = self.recent[slot];
        if cached != 0 && self.palette.get(cached as usize) == Some(rule) {
            return cached;
        }
        let i = self.intern_slow(rule);
        self.recent[slot] = i;
        i
    }

    fn intern_slow(&mut self, rule: &RuleRecord) -> u32 {
        let key = record_key(rule);
        if let Some(&i) = self.palette_index.get(&key) {
            return i;
        }
        let i = self.palette.len() as u32;
        self.palette.push(*rule);
        self.palette_index.insert(key, i);
        i
    }

    /// Reserves room for about `n` more ranges (builders estimate from section sizes, so
    /// the range vector does not grow by doubling through a large binary).
    pub fn reserve(&mut self, n: usize) {
        self.ranges.reserve(n);
    }

    /// Where the ranges stand now: a builder can [`Self::rewind`] back to it when an entry
    /// fails midway, so a half-evaluated entry leaves nothing behind.
    pub fn mark(&self) -> RangeMark {
        RangeMark {
            len: self.ranges.len(),
            last_end: self.ranges.last().map(|r| r.end),
        }
    }

    /// Drops what was pushed after `mark`, including the extension of the range that was
    /// last at the mark ([`Self::push`] extends it when the next range continues it with
    /// an equal rule, so dropping later ranges alone would keep part of a failed entry).
    pub fn rewind(&mut self, mark: RangeMark) {
        self.ranges.truncate(mark.len);
        if let (Some(last), Some(end)) = (self.ranges.last_mut(), mark.last_end) {
            last.end = end;
        }
    }

    /// Describes `[start, end)` (offsets from the link base) with `rule`. Lower `priority`
    /// wins where ranges of different priorities overlap; within one priority the range
    /// that starts first keeps the overlap.
    pub fn push(&mut self, start: u64, end: u64, rule: &RuleRecord, priority: u8) {
        if start >= end {
            return;
        }
        if start >= MAX_ADDRESS {
            self.stats.ranges_dropped += 1;
            return;
        }
        if let Some(src) = rule.source() {
            self.sources |= src.bit();
        }
        let end = end.min(MAX_ADDRESS);
        // Consecutive rows often repeat the previous rule (e.g. after a restore_state):
        // extend the previous range instead of interning and pushing again.
        if let Some(last) = self.ranges.last_mut() {
            if last.end == start
                && last.priority == priority
                && self.palette.get(last.rule as usize) == Some(rule)
            {
                last.end = end;
                return;
            }
        }
        let rule = self.intern(rule);
        self.ranges.push(Range {
            start,
            end,
            rule,
            priority,
        });
    }

    /// Ranges added so far (before overlaps are resolved): tells whether an input gave any.
    pub fn ranges_added(&self) -> usize {
        self.ranges.len()
    }

    /// Moves every range pushed so far down by `base` (ranges below it are dropped): a
    /// table of a few ranges far from the link base then needs no page index up to them.
    /// Lookups subtract `base` too. Ranges were clipped to [`MAX_ADDRESS`] before.
    pub(crate) fn rebase(&mut self, base: u64) {
        self.ranges.retain(|r| r.start >= base);
        for r in &mut self.ranges {
            r.start -= base;
            r.end -= base;
        }
    }

    /// The sources noted so far, as [`UnwindSource::bit`]s.
    pub(crate) fn sources_noted(&self) -> u32 {
        self.sources
    }

    /// Marks a source as used even if it produced no range (e.g. an empty section).
    pub fn note_source(&mut self, source: UnwindSource) {
        self.sources |= source.bit();
    }

    /// Resolves overlaps, inserts no-rule rows at gaps, merges equal neighbours and writes.
    pub fn finish(mut self) -> BuiltTable {
        let mut ranges = std::mem::take(&mut self.ranges);
        sort_ranges(&mut ranges);
        // The first (highest-priority) group is trimmed in place: within one priority the
        // range that starts first keeps an overlap.
        let first_end = match ranges.first() {
            Some(f) => {
                let p = f.priority;
                ranges.partition_point(|r| r.priority == p)
            }
            None => 0,
        };
        let rest = ranges.split_off(first_end);
        // accepted: disjoint, sorted by start
        let mut accepted = self.trim_first_group(ranges);
        let mut i = 0;
        while i < rest.len() {
            let prio = rest[i].priority;
            let group_end = i + rest[i..].partition_point(|r| r.priority == prio);
            let pieces = self.uncovered_pieces(&accepted, &rest[i..group_end]);
            if !pieces.is_empty() {
                accepted.extend(pieces);
                accepted.sort_unstable_by_key(|r| r.start);
            }
            i = group_end;
        }
        let rows = rows_of(&accepted);
        // drop palette entries no row uses? Keep all: unused entries are rare (overlaps).
        let bytes = format::write(
            self.arch,
            self.sources,
            &rows,
            &self.palette,
            &self.expressions,
        );
        self.stats.rows = rows.len();
        self.stats.palette = self.palette.len();
        self.stats.table_bytes = bytes.len();
        BuiltTable {
            bytes,
            stats: self.stats,
            inputs: Vec::new(),
        }
    }

    /// The highest-priority group, sorted by start, made disjoint: each range loses what
    /// the ranges before it cover (one left empty is dropped).
    fn trim_first_group(&mut self, mut group: Vec<Range>) -> Vec<Range> {
        let mut kept = 0usize;
        let mut covered_until = 0u64;
        for i in 0..group.len() {
            let mut r = group[i];
            r.start = r.start.max(covered_until);
            if r.start >= r.end {
                self.stats.ranges_dropped += 1;
                continue;
            }
            covered_until = r.end;
            group[kept] = r;
            kept += 1;
        }
        group.truncate(kept);
        group
    }

    /// The pieces of a lower-priority `group`'s ranges (sorted by start) that neither an
    /// earlier range of the group nor an `accepted` one (disjoint, sorted) covers.
    fn uncovered_pieces(&mut self, accepted: &[Range], group: &[Range]) -> Vec<Range> {
        let mut pieces: Vec<Range> = Vec::new();
        let mut covered_until = 0u64; // within this group
        for r in group {
            let mut start = r.start.max(covered_until);
            if start >= r.end {
                self.stats.ranges_dropped += 1;
                continue;
            }
            covered_until = r.end;
            // subtract what higher-priority groups already cover
            let mut k = accepted.partition_point(|a| a.end <= start);
            while start < r.end {
                match accepted.get(k) {
                    Some(a) if a.start < r.end => {
                        if a.start > start {
                            pieces.push(Range {
                                start,
                                end: a.start,
                                ..*r
                            });
                        }
                        start = start.max(a.end);
                        k += 1;
                    }
                    _ => {
                        pieces.push(Range { start, ..*r });
                        start = r.end;
                    }
                }
            }
        }
        pieces
    }
}

/// The table's rows for disjoint ranges sorted by start: `(start, rule)`, a no-rule row
/// (0) at each gap and after the last range, equal neighbours merged.
fn rows_of(accepted: &[Range]) -> Vec<(u32, u32)> {
    let mut rows: Vec<(u32, u32)> = Vec::with_capacity(accepted.len() + 1);
    let mut last_end: Option<u64> = None;
    let push_row = |rows: &mut Vec<(u32, u32)>, start: u64, rule: u32| {
        if let Some(&(_, prev)) = rows.last() {
            if prev == rule {
                return;
            }
        }
        // starts are < MAX_ADDRESS = 2^32 by construction
        rows.push((start as u32, rule));
    };
    for r in accepted {
        if let Some(end) = last_end {
            if end < r.start {
                push_row(&mut rows, end, 0);
            }
        }
        push_row(&mut rows, r.start, r.rule);
        last_end = Some(r.end);
    }
    if let Some(end) = last_end {
        if end < MAX_ADDRESS {
            push_row(&mut rows, end, 0);
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unwind::lookup::UnwindTable;
    use crate::unwind::rule::Slot;

    fn rule(off: i32, src: UnwindSource) -> RuleRecord {
        RuleRecord::new(src, Slot::offset(7, off), Slot::offset(0, -8))
    }

    #[test]
    fn gaps_overlaps_and_priorities() {
        let mut w = TableWriter::new(Arch::X86_64);
        let a = rule(8, UnwindSource::EhFrame);
        let b = rule(16, UnwindSource::EhFrame);
        let d = rule(24, UnwindSource::DebugFrame);
        w.push(0x1000, 0x1004, &a, 0);
        w.push(0x1004, 0x1010, &b, 0);
        w.push(0x2000, 0x2010, &a, 0);
        // debug_frame overlaps the first eh_frame range and fills 0x1010..0x1100
        w.push(0x0ff0, 0x1100, &d, 1);
        let built = w.finish();
        let t = UnwindTable::open(&built.bytes).expect("open");
        let cfa = |addr| t.find(addr).map(|r| r.record.cfa.value);
        assert_eq!(cfa(0x0fef), None);
        assert_eq!(cfa(0x0ff0), Some(24));
        assert_eq!(cfa(0x1000), Some(8));
        assert_eq!(cfa(0x1003), Some(8));
        assert_eq!(cfa(0x1004), Some(16));
        assert_eq!(cfa(0x100f), Some(16));
        assert_eq!(cfa(0x1010), Some(24));
        assert_eq!(cfa(0x10ff), Some(24));
        assert_eq!(cfa(0x1100), None);
        assert_eq!(cfa(0x1fff), None);
        assert_eq!(cfa(0x2000), Some(8));
        assert_eq!(cfa(0x2010), None);
        assert_eq!(cfa(0xffff_ffff_ffff), None);
        assert_eq!(
            t.sources(),
            vec![UnwindSource::EhFrame, UnwindSource::DebugFrame]
        );
    }

    #[test]
    fn rows_across_pages() {
        let mut w = TableWriter::new(Arch::X86_64);
        for i in 0..1000u64 {
            let start = i * 0x1234;
            w.push(
                start,
                start + 0x1000,
                &rule(i as i32 % 7 + 1, UnwindSource::EhFrame),
                0,
            );
        }
        let built = w.finish();
        let t = UnwindTable::open(&built.bytes).expect("open");
        // The same bytes at an odd address take the unaligned byte path: same answers.
        let mut shifted = vec![0u8; built.bytes.len() + 1];
        shifted[1..].copy_from_slice(&built.bytes);
        let odd = UnwindTable::open(&shifted[1..]).expect("open unaligned");
        for a in (0..1000u64 * 0x1234 + 0x2000).step_by(0x101) {
            assert_eq!(
                t.find(a).map(|r| r.record),
                odd.find(a).map(|r| r.record),
                "{a:#x}"
            );
        }
        for i in 0..1000u64 {
            let start = i * 0x1234;
            let want = Some(i as i32 % 7 + 1);
            assert_eq!(
                t.find(start).map(|r| r.record.cfa.value),
                want,
                "{start:#x}"
            );
            assert_eq!(t.find(start + 0xfff).map(|r| r.record.cfa.value), want);
            assert_eq!(t.find(start + 0x1000).map(|r| r.record.cfa.value), None);
        }
    }

    #[test]
    fn hostile_bytes_never_panic() {
        let mut w = TableWriter::new(Arch::X86_64);
        w.push(0x10, 0x20, &rule(8, UnwindSource::EhFrame), 0);
        let good = w.finish().bytes;
        for cut in 0..good.len() {
            let _ = UnwindTable::open(&good[..cut]).map(|t| t.find(0x15));
        }
        let mut bad = good.clone();
        for i in 64..bad.len() {
            bad[i] = 0xff;
            if let Ok(t) = UnwindTable::open(&bad) {
                for a in [0u64, 0x10, 0x15, 0x20, u64::MAX] {
                    let _ = t.find(a);
                }
            }
        }
    }
}
