//! [`Warning`]: something met on the way from dump bytes to a report that does not stop
//! the report — a dump cut short, a module whose file is another build, a table that does
//! not parse — with a stable code, a message for people, and the thread or module it is
//! about.
//!
//! One type for every layer: the dump readers, the table builders (whose warnings a cache
//! keeps with the tables), the resolvers and the report all say a problem the same way, so
//! a warning reaches the report's `warnings` as it was made, with no shape to convert.

use serde::{Deserialize, Serialize};

/// A problem the report tells, as the report's `warnings[]` writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Stable kebab-case code (`truncated-dump`, `memory-missing`, …).
    pub code: String,
    /// What happened and what it costs the report, for people.
    pub message: String,
    /// The report's index of the thread it is about, if one.
    pub thread: Option<usize>,
    /// The report's index of the module it is about, if one.
    pub module: Option<usize>,
}

impl Warning {
    /// A warning about the dump or the report as a whole.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Warning {
        Warning {
            code: code.into(),
            message: message.into(),
            thread: None,
            module: None,
        }
    }

    /// This warning, about the report's thread `index`.
    #[must_use]
    pub fn of_thread(self, index: usize) -> Warning {
        Warning {
            thread: Some(index),
            ..self
        }
    }

    /// This warning, about the report's module `index`.
    #[must_use]
    pub fn of_module(self, index: usize) -> Warning {
        Warning {
            module: Some(index),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Warning;

    /// The report's form: every field present, `null` when it is about no thread or module.
    #[test]
    fn serializes_as_the_report_writes_warnings() {
        let w = Warning::new("frame-limit", "m").of_thread(2);
        assert_eq!(
            serde_json::to_string(&w).ok().as_deref(),
            Some(r#"{"code":"frame-limit","message":"m","thread":2,"module":null}"#)
        );
        let back: Option<Warning> = serde_json::from_str(
            r#"{"code":"module-mismatch","message":"m","thread":null,"module":3}"#,
        )
        .ok();
        assert_eq!(
            back,
            Some(Warning::new("module-mismatch", "m").of_module(3))
        );
    }
}
