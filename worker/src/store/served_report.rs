//! A crash's report as it is served: the stored report with the upload's form fields
//! (Crashpad `prod`, `ver`, `guid`, …) added back to its `annotations`.
//!
//! The fields are stored once, in the crash's row (`crashes.annotations`, bounded at
//! upload). Kept in the stored report as well, they were stored twice (issue 34, finding
//! 9), so the worker stores the report without them and every way a report is served (the
//! API, the dashboard's page, the raw report) adds them here. The served report is the
//! one the worker stored before: the same merge ([`engine::report::budget::add_annotations`],
//! the dump's own annotations win a clash, the report's budget holds), the same
//! `annotations-cut` and `annotations-truncated` warnings at the end of `warnings`.
//!
//! The report is never parsed into a tree (it may be tens of MiB): only its `annotations`
//! object is read, and the new text is the stored text with that object replaced and the
//! warnings appended ([`edits`]); a route may send it as [`pieces`] of the stored text
//! and the new text instead of copying it. Text that is not a report is served as it is.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

use engine::report::Warning;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The two top-level parts of a stored report the fields touch, borrowed from its text.
#[derive(Deserialize)]
struct Parts<'a> {
    #[serde(borrow)]
    annotations: &'a RawValue,
    #[serde(borrow)]
    warnings: &'a RawValue,
}

/// `stored` (a report's JSON text, as the worker stored it: without the upload's fields)
/// with `fields` (the row's JSON object of the upload's fields) added within `max_bytes`,
/// and `cut` (what bounding them at upload left out) as an `annotations-truncated` warning.
pub fn with_upload_fields<'a>(
    stored: &'a str,
    fields: &str,
    cut: Option<&str>,
    max_bytes: usize,
) -> Cow<'a, str> {
    let Some(edits) = edits(stored, fields, cut, max_bytes) else {
        return Cow::Borrowed(stored);
    };
    let added: usize = edits.iter().map(|(_, text)| text.len()).sum();
    let mut out = String::with_capacity(stored.len().saturating_add(added));
    for piece in pieces(stored.len(), &edits) {
        match piece {
            Piece::Stored(range) => out.push_str(&stored[range]),
            Piece::New(i) => out.push_str(&edits[i].1),
        }
    }
    Cow::Owned(out)
}

/// One piece of a served report: a range of the stored text, or the text of edit `i`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Stored(Range<usize>),
    New(usize),
}

/// The served report as pieces of the stored text (`stored_len` bytes) and of `edits`
/// (sorted, as [`edits`] gives them), in order: for a server that sends a large report
/// without copying it whole.
pub fn pieces(stored_len: usize, edits: &[(Range<usize>, String)]) -> Vec<Piece> {
    let mut out = Vec::with_capacity(edits.len() * 2 + 1);
    let mut at = 0;
    for (i, (range, _)) in edits.iter().enumerate() {
        out.push(Piece::Stored(at..range.start));
        out.push(Piece::New(i));
        at = range.end;
    }
    out.push(Piece::Stored(at..stored_len));
    out
}

/// What serving `stored` with the upload's fields changes: ranges of `stored` replaced by
/// new text, in order; `None` when it is served as it is (no fields, nothing cut, or text
/// that is not a report).
pub fn edits(
    stored: &str,
    fields: &str,
    cut: Option<&str>,
    max_bytes: usize,
) -> Option<Vec<(Range<usize>, String)>> {
    let uploaded: BTreeMap<String, String> = serde_json::from_str(fields).unwrap_or_default();
    if uploaded.is_empty() && cut.is_none() {
        return None;
    }
    let parts = serde_json::from_str::<Parts>(stored).ok()?;
    let mut annotations =
        serde_json::from_str::<BTreeMap<String, String>>(parts.annotations.get()).ok()?;
    let ann = span(stored, parts.annotations.get())?;
    let warn =
        span(stored, parts.warnings.get()).filter(|_| parts.warnings.get().starts_with('['))?;
    let mut added: Vec<Warning> = Vec::new();
    added.extend(engine::report::budget::add_annotations(
        &mut annotations,
        stored.len(),
        uploaded,
        max_bytes,
    ));
    if let Some(cut) = cut {
        added.push(Warning::new("annotations-truncated", cut.to_string()));
    }
    let ann_text = serde_json::to_string(&annotations).ok()?;
    let warn_text = serde_json::to_string(&added).ok()?;
    // the new warnings go inside the array, before its closing bracket
    let old_warnings = &stored[warn.start + 1..warn.end - 1];
    let sep = if old_warnings.trim().is_empty() || added.is_empty() {
        ""
    } else {
        ","
    };
    let inserted = format!("{sep}{}", &warn_text[1..warn_text.len() - 1]);
    let close = warn.end - 1..warn.end - 1;
    let mut edits = vec![(ann, ann_text), (close, inserted)];
    edits.sort_by_key(|(r, _)| r.start);
    Some(edits)
}

/// Where `part` (a slice of `whole`, as a borrowed [`RawValue`] is) lies in `whole`.
fn span(whole: &str, part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (whole.get(start..end)? == part && part.len() >= 2).then_some(start..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report as the worker stores it: the dump's own annotations only.
    const STORED: &str = r#"{"schema":"postmortem.report/1","threads":[{"frames":[{"annotations":{"x":"nested"}}]}],"annotations":{"prod":"from-the-dump"},"signature":null,"warnings":[{"code":"modules-cut","message":"m","thread":null,"module":null}]}"#;

    fn served(fields: &str, cut: Option<&str>, max: usize) -> serde_json::Value {
        let text = with_upload_fields(STORED, fields, cut, max);
        serde_json::from_str(&text).unwrap_or_default()
    }

    /// docs/report-format.md: a report's `annotations` carry the upload's form fields, the
    /// dump's own winning a clash; what the upload bound cut is an `annotations-truncated`
    /// warning after the report's own.
    #[test]
    fn the_upload_s_fields_are_served_in_the_report() {
        let v = served(
            r#"{"prod":"from-the-form","ver":"1.2.3"}"#,
            Some("the upload's fields were bounded"),
            1 << 20,
        );
        assert_eq!(v["annotations"]["prod"], "from-the-dump");
        assert_eq!(v["annotations"]["ver"], "1.2.3");
        assert_eq!(v["threads"][0]["frames"][0]["annotations"]["x"], "nested");
        let codes: Vec<&str> = v["warnings"]
            .as_array()
            .map(|w| w.iter().filter_map(|w| w["code"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(codes, ["modules-cut", "annotations-truncated"]);
    }

    /// A field that would take the report past its budget is left out and said.
    #[test]
    fn the_fields_stay_within_the_report_s_budget() {
        let huge = "x".repeat(4096);
        let v = served(
            &format!(r#"{{"ver":"1","huge":"{huge}"}}"#),
            None,
            STORED.len() + 1024,
        );
        assert_eq!(v["annotations"]["ver"], "1");
        assert!(v["annotations"].get("huge").is_none());
        assert_eq!(v["warnings"][1]["code"], "annotations-cut");
    }

    /// Without fields, or with text that is no report, the stored text is served as it is.
    #[test]
    fn nothing_to_add_serves_the_stored_text() {
        assert!(matches!(
            with_upload_fields(STORED, "{}", None, 1 << 20),
            Cow::Borrowed(_)
        ));
        let other = r#"{"schema":"x"}"#;
        assert_eq!(
            with_upload_fields(other, r#"{"a":"b"}"#, None, 1 << 20),
            other
        );
        assert_eq!(
            with_upload_fields("[1,", r#"{"a":"b"}"#, None, 1 << 20),
            "[1,"
        );
    }

    /// The pieces a route sends join into the served text.
    #[test]
    fn the_pieces_make_the_served_text() {
        let fields = r#"{"ver":"1"}"#;
        let edits = edits(STORED, fields, Some("cut"), 1 << 20).unwrap_or_default();
        assert_eq!(edits.len(), 2);
        let joined: String = pieces(STORED.len(), &edits)
            .into_iter()
            .map(|p| match p {
                Piece::Stored(r) => STORED[r].to_string(),
                Piece::New(i) => edits[i].1.clone(),
            })
            .collect();
        assert_eq!(
            joined,
            with_upload_fields(STORED, fields, Some("cut"), 1 << 20)
        );
        let v: serde_json::Value = serde_json::from_str(&joined).unwrap_or_default();
        assert_eq!(v["annotations"]["ver"], "1");
    }
}
