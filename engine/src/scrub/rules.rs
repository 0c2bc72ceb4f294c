//! The scrubbing rules (issue 41): the built-in detectors of secrets and personal data,
//! and an operator's own regular expressions, over raw bytes (`regex::bytes`).
//!
//! Built-ins (`builtin:NAME`):
//! - `bearer`: `Bearer <token>` (an HTTP `Authorization` value; 8 or more token bytes);
//! - `keys`: AWS access key ids (`AKIA…`/`ASIA…`, 20 characters), PEM private keys
//!   (`-----BEGIN … PRIVATE KEY-----` to its `END` line, or to the first NUL byte or the
//!   end of the region when that comes first), and the values of `api_key=`, `apikey:`,
//!   `access_token=`, `token=`, `secret=`, `password=`, `passwd=`, `pwd=` (4 or more
//!   bytes up to a space, quote, `&`, `,` or `;`);
//! - `email`: e-mail addresses;
//! - `card`: card numbers, 13 to 19 digits (single spaces or dashes between groups
//!   allowed) passing the Luhn check, not inside a longer run of digits or letters.
//!
//! A user rule (`regex:PATTERN`) is compiled once, at start, with bounded compiled size:
//! a pattern that does not compile, or compiles too large, is refused with the regex
//! crate's message. Matching is linear in the bytes scanned (the crate's guarantee).

use std::ops::Range;

use regex::bytes::{Regex, RegexBuilder};

/// Longest user pattern, bytes.
pub const MAX_PATTERN_BYTES: usize = 4096;
/// Largest compiled program of one rule (`RegexBuilder::size_limit`).
const SIZE_LIMIT: usize = 1 << 20;
/// Largest lazy DFA cache of one rule (`RegexBuilder::dfa_size_limit`).
const DFA_SIZE_LIMIT: usize = 2 << 20;

/// A built-in rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Bearer,
    Keys,
    Email,
    Card,
}

impl Builtin {
    /// Every built-in, in the order `builtin:all` applies them.
    pub const ALL: [Builtin; 4] = [
        Builtin::Bearer,
        Builtin::Keys,
        Builtin::Email,
        Builtin::Card,
    ];

    /// From its name (`bearer`, `keys`, `email`, `card`).
    pub fn parse(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The rule's name.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Bearer => "bearer",
            Builtin::Keys => "keys",
            Builtin::Email => "email",
            Builtin::Card => "card",
        }
    }

    fn pattern(self) -> &'static str {
        match self {
            Builtin::Bearer => r"(?i-u)\bbearer[ \t]+[A-Za-z0-9\-._~+/]{8,}=*",
            Builtin::Keys => concat!(
                r"(?-u)\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
                r"|-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----",
                r"[\x00-\xff]*?(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|\x00|\z)",
                r#"|(?i)\b(?:api[_-]?key|access[_-]?token|token|secret|password|passwd|pwd)[ \t]*[=:][ \t]*["']?[^\s"'&,;\x00]{4,}"#,
            ),
            Builtin::Email => {
                r"(?-u)[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63})*\.[A-Za-z]{2,24}\b"
            }
            Builtin::Card => r"(?-u)\b[0-9](?:[ \-]?[0-9]){12,18}\b",
        }
    }
}

/// Why a rule was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuleError {
    #[error("a scrubbing rule is builtin:NAME (bearer, keys, email, card, all) or regex:PATTERN, not {0:?}")]
    Syntax(String),
    #[error("no built-in scrubbing rule {0:?} (bearer, keys, email, card, all)")]
    UnknownBuiltin(String),
    #[error("the scrubbing pattern is {len} bytes long, more than {max}")]
    TooLong { len: usize, max: usize },
    #[error("the scrubbing pattern {pattern:?} does not compile: {message}")]
    BadRegex { pattern: String, message: String },
}

/// One compiled rule.
#[derive(Debug, Clone)]
struct Rule {
    /// `builtin:email`, `regex:…`: for messages.
    name: String,
    regex: Regex,
    /// Only matches passing it count (the Luhn check of card numbers).
    check: Option<fn(&[u8]) -> bool>,
}

impl Rule {
    /// The rule's matches in `hay`: non-empty, passing the check.
    fn found(&self, hay: &[u8]) -> Vec<Range<usize>> {
        self.regex
            .find_iter(hay)
            .filter(|m| !m.is_empty())
            .filter(|m| self.check.is_none_or(|check| check(m.as_bytes())))
            .map(|m| m.range())
            .collect()
    }
}

/// A project's rules, applied in order.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    rules: Vec<Rule>,
}

fn compile(pattern: &str) -> Result<Regex, RuleError> {
    RegexBuilder::new(pattern)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(DFA_SIZE_LIMIT)
        .build()
        .map_err(|e| RuleError::BadRegex {
            pattern: pattern.to_string(),
            message: e.to_string(),
        })
}

impl Rules {
    /// No rules.
    pub fn new() -> Rules {
        Rules::default()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.name.as_str())
    }

    /// Adds a rule written `builtin:NAME` (`all`: every built-in) or `regex:PATTERN`.
    pub fn add(&mut self, spec: &str) -> Result<(), RuleError> {
        match spec.split_once(':') {
            Some(("builtin", "all")) => {
                Builtin::ALL.into_iter().for_each(|b| self.add_builtin(b));
                Ok(())
            }
            Some(("builtin", name)) => {
                let b = Builtin::parse(name)
                    .ok_or_else(|| RuleError::UnknownBuiltin(name.to_string()))?;
                self.add_builtin(b);
                Ok(())
            }
            Some(("regex", pattern)) => self.add_regex(pattern),
            _ => Err(RuleError::Syntax(spec.to_string())),
        }
    }

    /// Adds a built-in rule.
    pub fn add_builtin(&mut self, b: Builtin) {
        if self
            .rules
            .iter()
            .any(|r| r.name == format!("builtin:{}", b.name()))
        {
            return;
        }
        // The built-in patterns are constants this module's tests compile.
        let Ok(regex) = compile(b.pattern()) else {
            return;
        };
        self.rules.push(Rule {
            name: format!("builtin:{}", b.name()),
            regex,
            check: (b == Builtin::Card).then_some(luhn as fn(&[u8]) -> bool),
        });
    }

    /// Adds a user's regular expression (bounded in length and compiled size).
    pub fn add_regex(&mut self, pattern: &str) -> Result<(), RuleError> {
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(RuleError::TooLong {
                len: pattern.len(),
                max: MAX_PATTERN_BYTES,
            });
        }
        if pattern.is_empty() {
            return Err(RuleError::Syntax("regex:".into()));
        }
        let regex = compile(pattern)?;
        self.rules.push(Rule {
            name: format!("regex:{pattern}"),
            regex,
            check: None,
        });
        Ok(())
    }

    /// The matches of every rule in `hay` (empty matches left out), in rule order.
    pub fn matches(&self, hay: &[u8]) -> Vec<Range<usize>> {
        self.rules.iter().flat_map(|r| r.found(hay)).collect()
    }

    /// Overwrites every match in `buf` with `fill`, rule after rule (a later rule sees
    /// what the earlier ones left); returns the number of matches.
    pub fn fill(&self, buf: &mut [u8], fill: u8) -> u64 {
        let mut n = 0;
        for rule in &self.rules {
            for r in rule.found(buf) {
                n += 1;
                if let Some(bytes) = buf.get_mut(r) {
                    bytes.fill(fill);
                }
            }
        }
        n
    }

    /// `text` with every match replaced by `with` (for an upload's text fields, which
    /// are stored as text: no length to keep); returns the text and the matches.
    pub fn replace(&self, text: &[u8], with: &[u8]) -> (Vec<u8>, u64) {
        let mut out = text.to_vec();
        let mut n = 0;
        for rule in &self.rules {
            let mut next = Vec::with_capacity(out.len());
            let mut last = 0;
            for m in rule.found(&out) {
                next.extend_from_slice(out.get(last..m.start).unwrap_or_default());
                next.extend_from_slice(with);
                last = m.end;
                n += 1;
            }
            next.extend_from_slice(out.get(last..).unwrap_or_default());
            out = next;
        }
        (out, n)
    }
}

/// Whether the digits of `number` (other bytes ignored) are 13 to 19 and pass the Luhn
/// check.
pub fn luhn(number: &[u8]) -> bool {
    let digits: Vec<u32> = number
        .iter()
        .filter(|b| b.is_ascii_digit())
        .map(|b| u32::from(b - b'0'))
        .collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| match (i % 2 == 1, d * 2) {
            (true, x) if x > 9 => x - 9,
            (true, x) => x,
            (false, _) => d,
        })
        .sum();
    sum.is_multiple_of(10)
}
