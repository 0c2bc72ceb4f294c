//! Which of a Mac or iOS process's own images had no dSYM: each one the dump names by
//! UUID whose symbols came without DWARF or a `.sym` file (none at all, or only the
//! binary's symbol table) gets a `no-dsym` warning naming it and its UUID, and saying how
//! to give its dSYM — frames in it have no file, line or inlined function without one.
//!
//! Apple's own images (`/usr/lib/`, `/System/`, dyld) are left out: Apple ships no dSYM
//! for them (their names come from a dyld shared cache or the binaries themselves).

use crate::dump::{Dump, Os};
use crate::report;
use crate::symbols::SymbolSource;

/// Most images named one by one; the rest are counted in one more warning.
const MAX_NAMED: usize = 32;

/// Path prefixes of Apple's own images.
const SYSTEM_PREFIXES: &[&str] = &[
    "/usr/lib/",
    "/System/",
    "/usr/libexec/",
    "/Library/Apple/",
    "/private/preboot/",
];

/// Whether the image at `path` (else named `name`) is one of Apple's own, which Apple
/// ships no dSYM for.
pub(super) fn is_apples_own(path: Option<&str>, name: &str) -> bool {
    let path = path.unwrap_or(name);
    SYSTEM_PREFIXES.iter().any(|p| path.starts_with(p)) || name == "dyld"
}

/// The warnings of the images of `dump` (its report's `modules`) that had no dSYM.
pub(super) fn warnings(dump: &Dump<'_>, modules: &[report::Module]) -> Vec<report::Warning> {
    if !matches!(dump.os, Os::Macos | Os::Ios) {
        return Vec::new();
    }
    let lacking: Vec<&report::Module> = modules.iter().filter(|m| lacks_dsym(m)).collect();
    let mut out: Vec<report::Warning> = lacking
        .iter()
        .take(MAX_NAMED)
        .map(|m| {
            let uuid = m
                .debug_id
                .as_deref()
                .map(crate::ids::uuid_text)
                .unwrap_or_default();
            report::Warning::new(
                "no-dsym",
                format!(
                    "{} (UUID {uuid}) had no dSYM: its frames have no file, line or inlined \
                     function; upload {}.dSYM zipped (zip -r {0}.dSYM.zip {0}.dSYM) to \
                     /api/v1/binaries, or give it under --symbols",
                    m.name, m.name
                ),
            )
            .of_module(m.index)
        })
        .collect();
    if lacking.len() > MAX_NAMED {
        out.push(report::Warning::new(
            "no-dsym",
            format!("{} more images had no dSYM", lacking.len() - MAX_NAMED),
        ));
    }
    out
}

/// Whether module `m` is an image of the app's own (a Mach-O UUID, not Apple's path)
/// without DWARF or a `.sym` file.
fn lacks_dsym(m: &report::Module) -> bool {
    let is_uuid = m.debug_id.as_deref().is_some_and(|d| {
        d.len() == 33 && d.ends_with('0') && d.bytes().all(|b| b.is_ascii_hexdigit())
    });
    let system = is_apples_own(m.path.as_deref(), &m.name);
    let described = m
        .symbols
        .iter()
        .any(|s| matches!(s, SymbolSource::Dwarf | SymbolSource::Breakpad));
    is_uuid && !system && !described && m.build_id.is_none()
}
