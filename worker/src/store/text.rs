//! Text from input made storable, the same on both databases.
//!
//! PostgreSQL's `TEXT` cannot hold a NUL character (SQLite's can): a NUL in a `.sym`
//! function name, a module name or an upload's field made every statement that bound it
//! fail on PostgreSQL only — a crash's `done` never stored (its job retried until it
//! "expired"), its search terms missing, a filter with `%00` answered 500. Every piece of
//! input text a store function binds goes through [`clean`] first, on both databases, so
//! that what is stored, what is searched for and what is shown agree: each NUL becomes
//! U+FFFD (the replacement character), visible and never mistaken for the end of a name.
//! Report documents are JSON, where a NUL is already the escape `\u0000`.

use std::borrow::Cow;

/// What a NUL in input text is stored as.
pub const NUL_REPLACEMENT: char = '\u{FFFD}';

/// `s` with every NUL replaced by [`NUL_REPLACEMENT`] (borrowed when it has none).
pub fn clean(s: &str) -> Cow<'_, str> {
    if s.contains('\0') {
        Cow::Owned(s.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(s)
    }
}

/// [`clean`] for an owned string.
pub fn clean_owned(s: String) -> String {
    match clean(&s) {
        Cow::Borrowed(_) => s,
        Cow::Owned(c) => c,
    }
}

/// [`clean`] for an optional string (a filter).
pub fn clean_opt(s: Option<&str>) -> Option<String> {
    s.map(|s| clean(s).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_becomes_the_replacement_character() {
        assert_eq!(clean("a\0b\0"), "a\u{FFFD}b\u{FFFD}");
        assert!(matches!(clean("plain"), Cow::Borrowed("plain")));
        assert_eq!(clean_owned("x\0".into()), "x\u{FFFD}");
        assert_eq!(clean_opt(Some("\0")).as_deref(), Some("\u{FFFD}"));
    }
}
