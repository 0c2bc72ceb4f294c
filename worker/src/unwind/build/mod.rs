//! Builders of unwind tables, one per source format, and the [`TableWriter`] they share.
//!
//! A builder turns its format's rules into `(start, end, RuleRecord)` ranges, addresses as
//! offsets from the binary's link base, and pushes them with a priority (lower wins where
//! two sources describe the same address: `.eh_frame` before `.debug_frame`, the binary's
//! own tables before Breakpad's). The writer does everything else once, for all formats.

pub mod dwarf;
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
    palette_index: HashMap<RuleRecord, u32, FxBuildHasher>,
    expressions: Vec<u8>,
    expression_index: HashMap<Vec<u8>, u32, FxBuildHasher>,
    ranges: Vec<Range>,
    sources: u32,
    pub stats: BuildStats,
}

impl TableWriter {
    pub fn new(arch: Arch) -> Self {
        let mut palette_index = HashMap::with_hasher(FxBuildHasher);
        palette_index.insert(RuleRecord::NONE, 0);
        TableWriter {
            arch,
            palette: vec![RuleRecord::NONE],
            palette_index,
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
        if let Some(&i) = self.palette_index.get(rule) {
            return i;
        }
        let i = self.palette.len() as u32;
        self.palette.push(*rule);
        self.palette_index.insert(*rule, i);
        i
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
        let rule = self.intern(rule);
        self.ranges.push(Range {
            start,
            end: end.min(MAX_ADDRESS),
            rule,
            priority,
        });
    }

    /// Marks a source as used even if it produced no range (e.g. an empty section).
    pub fn note_source(&mut self, source: UnwindSource) {
        self.sources |= source.bit();
    }

    /// Resolves overlaps, inserts no-rule rows at gaps, merges equal neighbours and writes.
    pub fn finish(mut self) -> BuiltTable {
        let mut ranges = std::mem::take(&mut self.ranges);
        ranges.sort_unstable_by_key(|r| (r.priority, r.start, r.end));
        // accepted: disjoint, sorted by start
        let mut accepted: Vec<Range> = Vec::with_capacity(ranges.len());
        let mut i = 0;
        while i < ranges.len() {
            let prio = ranges[i].priority;
            let group_end = i + ranges[i..].partition_point(|r| r.priority == prio);
            let mut pieces: Vec<Range> = Vec::new();
            let mut covered_until = 0u64; // within this group
            for r in &ranges[i..group_end] {
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
            if accepted.is_empty() {
                accepted = pieces;
            } else if !pieces.is_empty() {
                accepted.extend(pieces);
                accepted.sort_unstable_by_key(|r| r.start);
            }
            i = group_end;
        }
        // rows
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
        for r in &accepted {
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
        }
    }
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
