//! The memory budget of one dump's report: how many threads are walked, how many frames
//! all walks together may return, and how many bytes the report may take.
//!
//! A dump may claim any number of threads, each with a stack as deep as the per-thread
//! frame limit; without a budget the report (and every copy of it the service makes)
//! grows with threads × frames. What the budget cuts is said in the report's warnings
//! (`threads-cut`, `frames-cut`, `report-cut`), so a cut report is never mistaken for a
//! whole one.

use std::collections::BTreeMap;

use super::json_size::{self, exact as json_len};
use super::{Report, Warning};
use crate::walk::{EndReason, WalkOptions, WalkResult};

/// Limits on one report: `Budget::default()`, then set the limits that differ (the
/// struct is `#[non_exhaustive]`, so new limits do not break callers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Budget {
    /// Most threads walked (the crashed thread first); the others are left out.
    pub max_threads: usize,
    /// Most frames returned by the walks of all threads together; once it is spent,
    /// each further thread (at most `max_threads`) shows only its own context frame.
    pub max_total_frames: usize,
    /// Most bytes of the report's JSON text.
    pub max_report_bytes: usize,
    /// Most modules of one dump looked up, walked and reported (see
    /// [`crate::dump::Dump::cut_modules`]).
    pub max_modules: usize,
    /// Most records (lines after `MODULE`) of one Breakpad `.sym` file built into tables;
    /// the rest are left out with a `sym-records-cut` warning.
    pub max_sym_records: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_threads: 2_000,
            max_total_frames: 100_000,
            max_report_bytes: 64 << 20,
            max_modules: 4096,
            max_sym_records: 5_000_000,
        }
    }
}

impl Budget {
    /// Keeps the first `max_threads` of `order` (the walk order, crashed thread first);
    /// the warning says how many were left out.
    pub fn cut_threads(&self, order: &mut Vec<usize>) -> Option<Warning> {
        let keep = self.max_threads.max(1);
        let left_out = order.len().checked_sub(keep).filter(|&n| n > 0)?;
        order.truncate(keep);
        Some(warning(
            "threads-cut",
            format!(
                "the dump lists {} threads; only the first {keep} (the crashed thread first) \
                 were walked (thread budget)",
                keep + left_out
            ),
        ))
    }

    /// The frames left for the walks of the remaining threads.
    pub fn frames(&self) -> FrameBudget {
        FrameBudget {
            left: self.max_total_frames,
            total: self.max_total_frames,
            cut: 0,
        }
    }
}

/// The frames left while the threads of one dump are walked in turn.
#[derive(Debug)]
pub struct FrameBudget {
    left: usize,
    total: usize,
    /// Threads whose walk the budget (not the per-thread limit) stopped.
    cut: usize,
}

impl FrameBudget {
    /// The walk options of the next thread: its frame limit is at most what is left (at
    /// least one frame, the thread's own context).
    pub fn walk_options(&self, walk: &WalkOptions) -> WalkOptions {
        let mut o = walk.clone();
        o.max_frames = o.max_frames.min(self.left.max(1));
        o
    }

    /// Accounts for one thread's walk made with [`Self::walk_options`]. True when the
    /// budget, not the per-thread limit, stopped it.
    pub fn spent(&mut self, walk: &WalkOptions, result: &WalkResult) -> bool {
        let by_budget = result.end == EndReason::FrameLimit && self.left < walk.max_frames;
        self.left = self.left.saturating_sub(result.frames.len());
        if by_budget {
            self.cut += 1;
        }
        by_budget
    }

    /// The warning for the threads the budget cut short, if any.
    pub fn warning(&self) -> Option<Warning> {
        (self.cut > 0).then(|| {
            warning(
                "frames-cut",
                format!(
                    "the walks of {} threads were stopped early: all threads together may \
                     return at most {} frames (frame budget)",
                    self.cut, self.total
                ),
            )
        })
    }
}

/// Room kept for the `report-cut` warning itself.
const WARNING_ROOM: usize = 512;

/// Cuts `report` until its JSON text is at most `max_bytes`: first the outermost frames
/// of the last threads (the crashed thread, first, loses frames last), then whole threads
/// after the first, then warnings. Adds a `report-cut` warning saying what went.
pub fn fit(report: &mut Report, max_bytes: usize) {
    // the exact count costs what writing the report costs; a report whose bound is
    // within the budget is too (the bound without reading strings first: it is nearly
    // always enough, and costs less again)
    if json_size::at_most_unread(report) <= max_bytes || json_size::at_most(report) <= max_bytes {
        return;
    }
    let total = json_len(report);
    if total <= max_bytes {
        return;
    }
    let mut excess = total - max_bytes.saturating_sub(WARNING_ROOM).min(max_bytes);
    let (mut frames, mut threads, mut warnings) = (0usize, 0usize, 0usize);
    for t in report.threads.iter_mut().rev() {
        while excess > 0 {
            let Some(f) = t.frames.pop() else { break };
            excess = excess.saturating_sub(json_len(&f) + 1);
            frames += 1;
        }
        if excess == 0 {
            break;
        }
    }
    while excess > 0 && report.threads.len() > 1 {
        if let Some(t) = report.threads.pop() {
            excess = excess.saturating_sub(json_len(&t) + 1);
            threads += 1;
        }
    }
    while excess > 0 {
        let Some(w) = report.warnings.pop() else {
            break;
        };
        excess = excess.saturating_sub(json_len(&w) + 1);
        warnings += 1;
    }
    report.warnings.push(warning(
        "report-cut",
        format!(
            "the report was {total} bytes, over its budget of {max_bytes}: {frames} outermost \
             frames, {threads} threads and {warnings} warnings were left out"
        ),
    ));
}

/// Adds an upload's annotations (a crash reporter's form fields: `prod`, `ver`, …) to a
/// report's `annotations` — the dump's own win on a clash — while the report, whose JSON
/// text is `report_len` bytes without them, stays within `max_bytes`: a field that would
/// pass the budget is left out, and the `annotations-cut` warning returned says how many
/// were. The service keeps the fields in the crash's row and adds them when the report is
/// served, so it works on the two parts the fields touch, not on a whole report.
pub fn add_annotations(
    annotations: &mut BTreeMap<String, String>,
    report_len: usize,
    extra: impl IntoIterator<Item = (String, String)>,
    max_bytes: usize,
) -> Option<Warning> {
    let mut size = report_len;
    let mut cut = 0usize;
    for (k, v) in extra {
        if annotations.contains_key(&k) {
            continue;
        }
        // `"key":"value",`
        let cost = json_len(&k) + json_len(&v) + 2;
        if size.saturating_add(cost).saturating_add(WARNING_ROOM) > max_bytes {
            cut += 1;
            continue;
        }
        size += cost;
        annotations.insert(k, v);
    }
    (cut > 0).then(|| {
        warning(
            "annotations-cut",
            format!(
                "{cut} of the upload's annotations were left out: with them the report would \
                 pass its budget of {max_bytes} bytes"
            ),
        )
    })
}

fn warning(code: &str, message: String) -> Warning {
    Warning::new(code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(i: usize) -> super::super::Frame {
        super::super::Frame {
            index: i,
            pc: super::super::Addr(0x1000 + i as u64),
            sp: None,
            trust: crate::walk::Trust::Fp,
            unwind_source: None,
            module: Some("app".into()),
            module_index: Some(0),
            module_offset: None,
            function: Some("f".repeat(100)),
            function_offset: None,
            file: None,
            line: None,
            column: None,
            inlined: false,
            symbol_source: None,
            pre_context: Default::default(),
            context_line: None,
            post_context: Default::default(),
            source_url: None,
        }
    }

    fn report(threads: usize, frames: usize) -> Report {
        let mut r = Report {
            schema: super::super::SCHEMA.into(),
            processor: super::super::Processor {
                name: "postmortem".into(),
                version: "0".into(),
                unwind_table_version: 1,
                symbol_table_version: 1,
            },
            dump: super::super::DumpInfo {
                format: crate::dump::DumpFormat::ElfCore,
                sha256: Some("0".repeat(64)),
                size: 1,
                os: crate::dump::Os::Linux,
                arch: crate::dump::Arch::X86_64,
                writer: None,
                pid: None,
                executable: None,
                command_line: None,
                created: None,
                system: Default::default(),
            },
            crash: None,
            threads: Vec::new(),
            modules: Vec::new(),
            unloaded_modules: Vec::new(),
            annotations: Default::default(),
            signature: None,
            warnings: Vec::new(),
        };
        r.threads = (0..threads)
            .map(|index| super::super::Thread {
                index,
                tid: index as u32,
                name: None,
                crashed: index == 0,
                registers: Default::default(),
                frames: (0..frames).map(frame).collect(),
                end: crate::walk::EndReason::FrameLimit,
                end_detail: None,
            })
            .collect();
        r
    }

    #[test]
    fn a_report_within_its_budget_is_untouched() {
        let mut r = report(3, 10);
        let before = r.clone();
        fit(&mut r, 1 << 20);
        assert_eq!(r, before);
    }

    #[test]
    fn an_oversized_report_is_cut_to_its_budget_innermost_frames_first_kept() {
        let mut r = report(50, 200);
        let max = 200_000;
        assert!(json_len(&r) > max);
        fit(&mut r, max);
        let text = serde_json::to_string(&r).unwrap_or_default();
        assert!(text.len() <= max, "{} > {max}", text.len());
        assert_eq!(
            r.warnings.last().map(|w| w.code.as_str()),
            Some("report-cut")
        );
        // the crashed thread keeps its frames; the last threads lost theirs
        assert_eq!(r.threads[0].frames.len(), 200);
        assert_eq!(r.threads[0].frames[0].index, 0);
        assert!(r.threads.last().is_some_and(|t| t.frames.is_empty()));
    }

    #[test]
    fn threads_over_the_budget_are_left_out_with_a_warning() {
        let b = Budget {
            max_threads: 2,
            ..Budget::default()
        };
        let mut order = vec![3, 0, 1, 2];
        let w = b.cut_threads(&mut order).map(|w| w.code);
        assert_eq!((order, w.as_deref()), (vec![3, 0], Some("threads-cut")));
        let mut order = vec![0, 1];
        assert!(b.cut_threads(&mut order).is_none());
    }

    /// An upload's form fields join the report while it stays within its budget; the dump's
    /// own annotation wins a clash; what does not fit is left out and said.
    #[test]
    fn upload_annotations_stay_within_the_report_budget() {
        let mut r = report(3, 10);
        r.annotations.insert("prod".into(), "from-the-dump".into());
        let max = json_len(&r) + 4096;
        let fields = vec![
            ("prod".to_string(), "from-the-form".to_string()),
            ("ver".to_string(), "1.2.3".to_string()),
            ("huge".to_string(), "x".repeat(8192)),
            ("guid".to_string(), "abc".to_string()),
        ];
        let len = json_len(&r);
        r.warnings
            .extend(add_annotations(&mut r.annotations, len, fields, max));
        let text = serde_json::to_string(&r).unwrap_or_default();
        assert!(text.len() <= max, "{} > {max}", text.len());
        assert_eq!(r.annotations["prod"], "from-the-dump");
        assert_eq!(r.annotations["ver"], "1.2.3");
        assert_eq!(r.annotations["guid"], "abc");
        assert!(!r.annotations.contains_key("huge"));
        let cut: Vec<&str> = r.warnings.iter().map(|w| w.code.as_str()).collect();
        assert_eq!(cut, ["annotations-cut"]);
        assert!(
            r.warnings[0].message.starts_with("1 of"),
            "{}",
            r.warnings[0].message
        );

        // within the budget, every field is added and nothing is said
        let mut r = report(1, 1);
        let len = json_len(&r);
        let said = add_annotations(
            &mut r.annotations,
            len,
            [("ver".into(), "1".into())],
            1 << 20,
        );
        assert!(said.is_none());
        assert_eq!(r.annotations["ver"], "1");
        assert!(r.warnings.is_empty());
    }
}
