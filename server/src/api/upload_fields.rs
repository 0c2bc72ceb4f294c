//! Bounds the text fields of a crash upload (Crashpad's and Breakpad's form fields:
//! `prod`, `ver`, `guid`, …) before they are stored, as Crashpad bounds its own
//! annotations.
//!
//! A crash stores its upload's fields in its row, and the worker adds them to the report:
//! unbounded, a 12 KB gzip upload of repetitive fields stored 1.86 MB. Crashpad itself
//! never sends more than a name of 256 bytes (`Annotation::kNameMaxLength`) and a value
//! of 20 KiB (`Annotation::kValueMaxSize`, 5 × 4096); the defaults here are those, plus a
//! bound on the number of fields and on their total size. Nothing is refused: a longer
//! name or value is truncated (at a character boundary), fields past the count or the
//! total are left out, and one sentence says what was cut (the report's
//! `annotations-truncated` warning). NULs become U+FFFD, as all stored input text does
//! (`worker::store::text`).

use std::collections::BTreeMap;

use worker::store::text::clean_owned;

/// How much of an upload's fields is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLimits {
    /// Most fields kept.
    pub max_fields: usize,
    /// Longest field name, bytes.
    pub max_name_bytes: usize,
    /// Longest field value, bytes.
    pub max_value_bytes: usize,
    /// Most bytes of names and values together.
    pub max_total_bytes: usize,
}

impl Default for FieldLimits {
    fn default() -> Self {
        FieldLimits {
            max_fields: 256,
            max_name_bytes: 256,
            max_value_bytes: 20 << 10,
            max_total_bytes: 64 << 10,
        }
    }
}

/// The fields as stored, and what was cut (none: nothing).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Bounded {
    pub fields: BTreeMap<String, String>,
    pub cut: Option<String>,
}

/// Bounds `fields` (name, raw value, in upload order; a later field of the same name
/// replaces an earlier one, as before) by `limits`.
pub fn bound(fields: Vec<(String, Vec<u8>)>, limits: FieldLimits) -> Bounded {
    let mut out = BTreeMap::new();
    let (mut truncated, mut left_out, mut total) = (0usize, 0usize, 0usize);
    for (name, value) in fields {
        let value = String::from_utf8_lossy(&value).into_owned();
        let (name, short_name) = truncate(clean_owned(name), limits.max_name_bytes);
        let (value, short_value) = truncate(clean_owned(value), limits.max_value_bytes);
        let cost = name.len().saturating_add(value.len());
        let replaces = out
            .get(&name)
            .map(|old: &String| name.len().saturating_add(old.len()));
        let after = total
            .saturating_sub(replaces.unwrap_or(0))
            .saturating_add(cost);
        let room = replaces.is_some() || out.len() < limits.max_fields;
        if !room || after > limits.max_total_bytes {
            left_out += 1;
            continue;
        }
        truncated += usize::from(short_name || short_value);
        total = after;
        out.insert(name, value);
    }
    let cut =
        (truncated > 0 || left_out > 0).then(|| {
            format!(
            "the upload's fields were bounded: {truncated} truncated (names to {} bytes, values \
             to {} bytes), {left_out} left out (past {} fields or {} bytes in all)",
            limits.max_name_bytes, limits.max_value_bytes, limits.max_fields, limits.max_total_bytes
        )
        });
    Bounded { fields: out, cut }
}

/// `s` cut to at most `max` bytes at a character boundary, and whether it was cut.
fn truncate(mut s: String, max: usize) -> (String, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    (s, true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn field(name: &str, value: &[u8]) -> (String, Vec<u8>) {
        (name.to_string(), value.to_vec())
    }

    #[test]
    fn crashpad_sized_fields_are_kept_whole() {
        let name = "n".repeat(256);
        let value = vec![b'v'; 20 << 10];
        let b = bound(
            vec![field(&name, &value), field("ver", b"1.2")],
            FieldLimits::default(),
        );
        assert_eq!(b.cut, None);
        assert_eq!(b.fields[&name].len(), 20 << 10);
        assert_eq!(b.fields["ver"], "1.2");
    }

    #[test]
    fn long_values_are_truncated_at_a_character_boundary() {
        let limits = FieldLimits {
            max_value_bytes: 5,
            ..FieldLimits::default()
        };
        // "é" is two bytes: five bytes end inside the third
        let b = bound(vec![field("k", "ééé".as_bytes())], limits);
        assert_eq!(b.fields["k"], "éé");
        assert!(b.cut.unwrap().contains("1 truncated"));
    }

    #[test]
    fn fields_past_the_count_or_the_total_are_left_out() {
        let limits = FieldLimits {
            max_fields: 2,
            max_total_bytes: 10,
            ..FieldLimits::default()
        };
        let b = bound(
            vec![field("a", b"1"), field("b", b"2"), field("c", b"3")],
            limits,
        );
        assert_eq!(b.fields.len(), 2);
        assert!(b.cut.unwrap().contains("1 left out"));
        let b = bound(vec![field("a", b"123456789"), field("b", b"2")], limits);
        assert_eq!(b.fields.keys().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn nul_is_replaced() {
        let b = bound(vec![field("p\0", b"x\0y")], FieldLimits::default());
        assert_eq!(b.fields["p\u{FFFD}"], "x\u{FFFD}y");
    }
}
