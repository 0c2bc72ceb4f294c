//! Heap memory errors an Android tombstone diagnoses: GWP-ASan's and MTE's
//! (`engine/src/dump/android/heap.rs`). The allocator saw the bug itself — a freed or
//! guarded object touched — so its word names the kind (`use-after-free`, …) where the
//! signal it raised (a SIGSEGV at some address) would only say "unmapped access". The
//! object's deallocation and allocation backtraces become the analysis's `stacks`
//! (`process/mod.rs` moves them there once symbolized).

use std::collections::BTreeMap;

use crate::dump::android::MEMORY_ERROR_ANNOTATION;
use crate::dump::Dump;
use crate::report::{Analysis, AnalysisKind};

/// The analysis of the dump's heap memory error, if it reports one of a known kind.
pub(super) fn analyse(dump: &Dump<'_>, mut evidence: BTreeMap<String, String>) -> Option<Analysis> {
    let named = dump.annotations.get(MEMORY_ERROR_ANNOTATION)?;
    let kind = [
        AnalysisKind::UseAfterFree,
        AnalysisKind::DoubleFree,
        AnalysisKind::InvalidFree,
        AnalysisKind::BufferOverflow,
        AnalysisKind::BufferUnderflow,
    ]
    .into_iter()
    .find(|k| k.as_str() == named)?;
    let fact = |k: &str| {
        dump.annotations
            .get(&format!("{MEMORY_ERROR_ANNOTATION}.{k}"))
    };
    let tool = fact("tool").map_or("the allocator", String::as_str);
    let what = match kind {
        AnalysisKind::UseAfterFree => "use of a heap object after it was freed",
        AnalysisKind::DoubleFree => "a heap object freed twice",
        AnalysisKind::InvalidFree => "free of a pointer the allocator never returned",
        AnalysisKind::BufferOverflow => "an access past the end of a heap object",
        _ => "an access before the start of a heap object",
    };
    // `[GWP-ASan]: Use After Free, 0 bytes into a 32-byte allocation at 0x…`: its detail
    let detail = fact("cause")
        .and_then(|c| c.split_once(", "))
        .map(|(_, d)| format!(": {d}"))
        .unwrap_or_default();
    evidence.insert("tool".to_string(), tool.to_string());
    for (key, name) in [("address", "allocation"), ("size", "allocation_size")] {
        if let Some(v) = fact(key) {
            evidence.insert(name.to_string(), v.clone());
        }
    }
    Some(Analysis {
        kind,
        summary: format!("{what}, caught by {tool}{detail}"),
        evidence,
        stacks: Vec::new(),
    })
}
