//! The signature rules file: its format, and the parsed lists the signature is made with.
//!
//! Rules are data, not code, so that an operator can see, extend or replace them
//! (`--signature-rules FILE`) and preview a change on stored crashes before applying it.
//! The built-in file is `signature.txt`; `docs/grouping.md` is its manual. This module only
//! reads the file; [`super`] applies it to a thread.

use crate::dump::Os;
use crate::report::AnalysisKind;

use super::glob_match;

/// The built-in rules file.
pub const DEFAULT_RULES: &str = include_str!("../signature.txt");

/// Significant frames in a signature unless the rules say otherwise.
const DEFAULT_FRAMES: usize = 1;
/// Most prefix frames kept before the significant ones.
const DEFAULT_MAX_PREFIX: usize = 4;
/// Longest rules file read, and most globs in one list: a rules file is an operator's,
/// but a mistake (a file of names pasted twice) must not slow every crash.
const MAX_RULES_BYTES: usize = 1 << 20;
const MAX_GLOBS: usize = 10_000;

/// The platforms a rule can be limited to (`platform NAME`).
const PLATFORMS: [&str; 4] = ["all", "linux", "windows", "macos"];

/// One glob of a list, with where it came from (for `--explain`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pub pattern: String,
    /// `all`, `linux`, `windows` or `macos`.
    pub platform: &'static str,
    /// 1-based line in its file, and whether the file is the built-in one.
    pub line: usize,
    pub builtin: bool,
}

impl Glob {
    /// Whether this glob applies to a dump of `os` and matches `text`.
    pub(super) fn matches(&self, os: Os, text: &str) -> bool {
        on_platform(self.platform, os) && glob_match(&self.pattern, text)
    }

    /// `irrelevant raise (built-in line 40)`: how `--explain` names the rule.
    pub(super) fn cite(&self, directive: &str) -> String {
        let from = if self.builtin {
            "built-in"
        } else {
            "rules file"
        };
        let platform = if self.platform == "all" {
            String::new()
        } else {
            format!(", {}", self.platform)
        };
        format!(
            "{directive} {} ({from} line {}{platform})",
            self.pattern, self.line
        )
    }
}

/// Whether rules of `platform` apply to a dump of `os`.
fn on_platform(platform: &str, os: Os) -> bool {
    match platform {
        "linux" => matches!(os, Os::Linux | Os::Android),
        "windows" => os == Os::Windows,
        "macos" => matches!(os, Os::Macos | Os::Ios),
        _ => true,
    }
}

/// Parsed signature rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureRules {
    /// The `version` the file declares (the built-in file's is the rules' version: a
    /// change of it is a change of every signature).
    pub version: u32,
    /// Frames whose normalized function name matches are never the bug: set aside.
    pub irrelevant: Vec<Glob>,
    /// Frames that are not the bug alone: kept, with the frames below up to the first
    /// significant one.
    pub prefix: Vec<Glob>,
    /// Frames that start the signature when present: every frame above the first one is
    /// set aside.
    pub sentinel: Vec<Glob>,
    /// Modules of the system (matched on the module's name): their frames never enter a
    /// signature by function name, so that it does not change when the system's files
    /// arrive.
    pub system_module: Vec<Glob>,
    /// Analysis kinds whose crashes have every system frame set aside (an abort's system
    /// frames are the abort machinery).
    pub aside_system_kind: Vec<Glob>,
    /// Analysis kinds put first in the signature.
    pub prefix_kind: Vec<Glob>,
    /// Significant frames in the signature.
    pub frames: usize,
    /// Most prefix frames before them.
    pub max_prefix: usize,
}

/// A line of a rules file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("signature rules line {line}: {message}")]
pub struct RulesError {
    /// 1-based line number (0: the file as a whole).
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl Default for SignatureRules {
    /// The built-in rules (`signature.txt`); a unit test proves the file parses.
    fn default() -> Self {
        SignatureRules::parse_with(DEFAULT_RULES, true, SignatureRules::empty())
            .unwrap_or_else(|_| SignatureRules::empty())
    }
}

impl SignatureRules {
    fn empty() -> SignatureRules {
        SignatureRules {
            version: 0,
            irrelevant: Vec::new(),
            prefix: Vec::new(),
            sentinel: Vec::new(),
            system_module: Vec::new(),
            aside_system_kind: Vec::new(),
            prefix_kind: Vec::new(),
            frames: DEFAULT_FRAMES,
            max_prefix: DEFAULT_MAX_PREFIX,
        }
    }

    /// Parses an operator's rules file. It replaces the built-in rules, unless its first
    /// rule is `extends builtin`: then its rules are added to the built-in ones (and its
    /// `frames`, `max-prefix` replace theirs).
    pub fn parse(text: &str) -> Result<SignatureRules, RulesError> {
        let extends = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or("").trim())
            .find(|l| !l.is_empty())
            .is_some_and(|l| l.split_whitespace().eq(["extends", "builtin"]));
        let base = if extends {
            SignatureRules::default()
        } else {
            SignatureRules::empty()
        };
        SignatureRules::parse_with(text, false, base)
    }

    fn parse_with(
        text: &str,
        builtin: bool,
        mut rules: SignatureRules,
    ) -> Result<SignatureRules, RulesError> {
        if text.len() > MAX_RULES_BYTES {
            return Err(RulesError {
                line: 0,
                message: format!("the file is over {MAX_RULES_BYTES} bytes"),
            });
        }
        let mut platform = "all";
        let mut first = true;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let is_first = std::mem::replace(&mut first, false);
            let err = |message: String| RulesError {
                line: i + 1,
                message,
            };
            let (word, arg) = match line.split_once(char::is_whitespace) {
                Some((w, a)) => (w, a.trim()),
                None => (line, ""),
            };
            if arg.is_empty() {
                return Err(err(format!("`{word}` needs an argument")));
            }
            let glob = Glob {
                pattern: arg.to_string(),
                platform,
                line: i + 1,
                builtin,
            };
            let list = match word {
                "irrelevant" | "skip" => Some(&mut rules.irrelevant),
                "prefix" => Some(&mut rules.prefix),
                "sentinel" => Some(&mut rules.sentinel),
                "system-module" | "skip-module" => Some(&mut rules.system_module),
                "aside-system-kind" | "prefix-kind" => {
                    known_kind(arg).map_err(err)?;
                    Some(if word == "prefix-kind" {
                        &mut rules.prefix_kind
                    } else {
                        &mut rules.aside_system_kind
                    })
                }
                _ => None,
            };
            if let Some(list) = list {
                if list.len() >= MAX_GLOBS {
                    return Err(err(format!("more than {MAX_GLOBS} `{word}` rules")));
                }
                list.push(glob);
                continue;
            }
            match word {
                "platform" => {
                    platform = PLATFORMS.iter().find(|p| **p == arg).ok_or_else(|| {
                        err(format!("platform {arg:?} is not one of {PLATFORMS:?}"))
                    })?;
                }
                "frames" => rules.frames = number(arg, 1, 32).map_err(err)?,
                "max-prefix" => rules.max_prefix = number(arg, 0, 32).map_err(err)?,
                "version" => rules.version = number(arg, 0, 1 << 20).map_err(err)? as u32,
                "extends" if arg == "builtin" && !builtin && is_first => {}
                other => {
                    return Err(err(format!(
                        "unknown rule {other:?} (irrelevant, prefix, sentinel, \
                         system-module, aside-system-kind, prefix-kind, frames, max-prefix, \
                         platform, version; `extends builtin` as the first rule)"
                    )))
                }
            }
        }
        Ok(rules)
    }
}

/// `arg` as a number from `low` to `high`.
fn number(arg: &str, low: usize, high: usize) -> Result<usize, String> {
    arg.parse::<usize>()
        .ok()
        .filter(|n| (low..=high).contains(n))
        .ok_or_else(|| format!("wants {low} to {high}, not {arg:?}"))
}

/// A kind glob that matches no analysis kind is a typo said at once.
fn known_kind(arg: &str) -> Result<(), String> {
    if AnalysisKind::all()
        .iter()
        .any(|k| glob_match(arg, k.as_str()))
    {
        return Ok(());
    }
    Err(format!(
        "kind {arg:?} matches no analysis kind ({})",
        AnalysisKind::all()
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}
