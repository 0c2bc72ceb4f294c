//! The report's module list: each module's identity, the sources and the files its
//! tables came from, and its status — with the warnings that explain a status (missing,
//! unverified) and those the provider and the table builds met.

use crate::dump::{Dump, Module, Os};
use crate::report::{self, Addr, ModuleStatus};
use crate::symbols;
use crate::unwind::UnwindSource;

use crate::tables::{Loaded, ModuleTables, Opened, TableProvider};

/// A warning about module `i`.
fn warning(code: impl Into<String>, message: String, i: usize) -> report::Warning {
    report::Warning::new(code, message).of_module(i)
}

/// The report of every module of `dump`, in dump order; their warnings go to `warnings`.
pub(super) fn reports(
    dump: &Dump<'_>,
    provider: &dyn TableProvider,
    loaded: &[Loaded],
    opened: &Opened<'_>,
    warnings: &mut Vec<report::Warning>,
) -> Vec<report::Module> {
    let mut modules = Vec::with_capacity(dump.modules.len());
    let mut told = std::collections::HashSet::new();
    for (i, (m, l)) in dump.modules.iter().zip(loaded).enumerate() {
        for w in provider.module_warnings(dump, m) {
            warnings.push(w.of_module(i));
        }
        if let Some(t) = &l.tables {
            for w in &t.warnings {
                let message = format!("{}: {}", m.name, w.message);
                warnings.push(warning(w.code.clone(), message, i));
            }
        }
        let mut module = report_of(i, m, l, opened, dump.os, warnings);
        module.lookups = provider.module_lookups(dump, m);
        for l in module
            .lookups
            .iter()
            .filter(|l| l.result == report::LookupResult::Error)
        {
            // each failure once: a source that is down fails every module alike, and the
            // modules' lookups say which it failed
            let why = l.message.as_deref().unwrap_or("no answer");
            if told.insert((l.source.clone(), why.to_string())) {
                let message = format!(
                    "{} failed: {why} (asked for the {} of {}; each module's lookups say which \
                     files it could not give)",
                    l.source, l.file, m.name
                );
                warnings.push(warning("symbol-source-error", message, i));
            }
        }
        modules.push(module);
    }
    warnings.extend(super::dsym_warnings::warnings(dump, &modules));
    modules
}

/// One module's report.
fn report_of(
    i: usize,
    m: &Module,
    l: &Loaded,
    opened: &Opened<'_>,
    os: Os,
    warnings: &mut Vec<report::Warning>,
) -> report::Module {
    let (unwind_sources, symbol_sources) = sources(i, l, opened);
    let status = status(i, m, l, opened, os, warnings);
    report::Module {
        index: i,
        name: m.name.clone(),
        path: m.path.clone(),
        base: Addr(m.base),
        end: Addr(m.end),
        build_id: m.build_id_hex(),
        debug_id: m.debug_id.clone(),
        code_id: m.code_id.clone(),
        debug_file: m.debug_file.clone(),
        version: m.version.clone(),
        identity: m.identity,
        verified: l.tables.as_ref().is_some_and(|t| t.verified),
        main: m.main,
        status,
        files: module_files(
            l.tables.as_ref(),
            opened.unwind[i].is_some(),
            opened.symbols[i].is_some() || indexed_symbols(i, opened),
            &unwind_sources,
            &symbol_sources,
        ),
        unwind: unwind_sources,
        symbols: symbol_sources,
        lookups: Vec::new(),
    }
}

/// Whether module `i`'s symbols are an index that can name something.
fn indexed_symbols(i: usize, opened: &Opened<'_>) -> bool {
    opened.indexed[i].is_some_and(|x| x.has_symbols())
}

/// The unwind and symbol sources module `i`'s tables came from.
fn sources(
    i: usize,
    l: &Loaded,
    opened: &Opened<'_>,
) -> (Vec<report::ModuleUnwind>, Vec<symbols::SymbolSource>) {
    let mut unwind: Vec<report::ModuleUnwind> = opened.unwind[i]
        .map(|t| {
            t.sources()
                .iter()
                .map(|&s| report::ModuleUnwind::Rules(s))
                .collect()
        })
        .unwrap_or_default();
    if l.from_memory && opened.unwind[i].is_some() {
        unwind = vec![report::ModuleUnwind::DumpMemory];
    }
    let mut symbol_sources: Vec<symbols::SymbolSource> = opened.symbols[i]
        .as_ref()
        .map(|t| t.sources())
        .unwrap_or_default();
    if let Some(index) = opened.indexed[i].filter(|x| x.has_symbols()) {
        symbol_sources = index.sources();
    }
    (unwind, symbol_sources)
}

/// Module `i`'s status, with the warning that
/// explains a missing or unverified one.
fn status(
    i: usize,
    m: &Module,
    l: &Loaded,
    opened: &Opened<'_>,
    os: Os,
    warnings: &mut Vec<report::Warning>,
) -> ModuleStatus {
    let has_tables =
        opened.unwind[i].is_some() || opened.symbols[i].is_some() || indexed_symbols(i, opened);
    match &l.tables {
        None => {
            warnings.push(warning("module-missing", missing_message(m, os), i));
            ModuleStatus::Missing
        }
        Some(_) if !has_tables => ModuleStatus::Corrupt,
        Some(t) if !t.verified => {
            let message = format!(
                "{} was matched by path only; its symbols may not be the crashed build",
                m.name
            );
            warnings.push(warning("module-unverified", message, i));
            ModuleStatus::Unverified
        }
        Some(_) => ModuleStatus::Ok,
    }
}

/// What a `module-missing` warning says: the module's identifier under the name its
/// platform gives it (a Mach-O image's UUID, a Windows module's PDB and debug id, an ELF
/// file's build-id) and what to upload, or that the dump gives none (then only a file at
/// the module's path can be used).
fn missing_message(m: &Module, os: Os) -> String {
    let apple = matches!(os, Os::Macos | Os::Ios);
    if apple {
        let uuid = m
            .build_id_hex()
            .or_else(|| m.debug_id.clone())
            .or_else(|| m.code_id.clone());
        if let Some(uuid) = uuid {
            let what = if super::dsym_warnings::is_apples_own(m.path.as_deref(), &m.name) {
                "the dyld shared cache of that OS version (or the binary)"
            } else {
                "its dSYM or binary"
            };
            return format!(
                "no file for {} (UUID {}): upload {what} to symbolize its frames",
                m.name,
                crate::ids::uuid_text(&uuid)
            );
        }
    } else if let Some(id) = m.build_id_hex() {
        return format!(
            "no file for {} (build-id {id}): upload it to symbolize its frames",
            m.name
        );
    } else if let Some(id) = m.breakpad_debug_id() {
        let debug_file = m.debug_file.as_deref().unwrap_or(&m.name);
        return format!(
            "no file for {} ({debug_file}, debug id {id}): upload its debug file or a .sym \
             file to symbolize its frames",
            m.name
        );
    }
    format!(
        "no file for {}: the dump gives no build-id, UUID or debug id for it, so only a file \
         at its path could be used",
        m.name
    )
}

/// The files a module's report lists: those that gave a table the walk could open. A
/// `.sym` file gave what the module's sources say Breakpad gave (built whole or indexed,
/// the same answer).
pub(super) fn module_files(
    tables: Option<&ModuleTables>,
    unwind_opened: bool,
    symbols_opened: bool,
    unwind_sources: &[report::ModuleUnwind],
    symbol_sources: &[symbols::SymbolSource],
) -> Vec<report::ModuleFile> {
    let Some(t) = tables else {
        return Vec::new();
    };
    let from_breakpad = [
        unwind_sources.contains(&report::ModuleUnwind::Rules(UnwindSource::Breakpad)),
        symbol_sources.contains(&symbols::SymbolSource::Breakpad),
    ];
    // on-demand symbols: `files` is every input, in order (see `ModuleTables`)
    let symbol_inputs = t.symbols_on_demand().map(|od| od.inputs());
    let gave_symbols = |i: usize| symbol_inputs.as_ref().is_none_or(|ins| ins.contains(&i));
    t.files
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let gave: Vec<report::FileGave> = match f.kind {
                report::FileKind::Breakpad => [report::FileGave::Unwind, report::FileGave::Symbols]
                    .into_iter()
                    .zip(from_breakpad)
                    .filter_map(|(g, yes)| yes.then_some(g))
                    .collect(),
                _ => f
                    .gave
                    .iter()
                    .copied()
                    .filter(|g| match g {
                        report::FileGave::Unwind => unwind_opened,
                        report::FileGave::Symbols => symbols_opened && gave_symbols(i),
                    })
                    .collect(),
            };
            (!gave.is_empty()).then(|| report::ModuleFile { gave, ..f.clone() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(name: &str) -> Module {
        Module {
            name: name.into(),
            ..Module::default()
        }
    }

    #[test]
    fn a_missing_module_is_named_by_its_platforms_identifier() {
        // a Mac image in a minidump: no build-id, its UUID as the debug id (age 0)
        let mac = Module {
            debug_id: Some("4C4C44375555314AA14FACE88C39A0D20".into()),
            code_id: Some("4c4c44375555314aa14face88c39a0d2".into()),
            ..module("libfoo.dylib")
        };
        let text = missing_message(&mac, Os::Macos);
        let system = Module {
            path: Some("/usr/lib/system/libsystem_kernel.dylib".into()),
            ..mac.clone()
        };
        let system = missing_message(&system, Os::Macos);
        assert!(system.contains("dyld shared cache"), "{system}");
        assert!(
            text.contains("UUID 4C4C4437-5555-314A-A14F-ACE88C39A0D2") && text.contains("dSYM"),
            "{text}"
        );
        assert!(!text.contains("build-id"), "{text}");
        // an image of an Apple crash report: its UUID is read as the build-id bytes
        let ips = Module {
            build_id: Some(vec![0xab; 16]),
            ..module("App")
        };
        let text = missing_message(&ips, Os::Ios);
        assert!(text.contains("UUID ABABABAB-ABAB-"), "{text}");
        // a Windows module: its PDB and debug id
        let win = Module {
            debug_id: Some("3F3A4B2C1D0E4F5A8B9C0D1E2F3A4B5C1".into()),
            debug_file: Some("app.pdb".into()),
            code_id: Some("5F3A4B2C12000".into()),
            ..module("app.exe")
        };
        let text = missing_message(&win, Os::Windows);
        assert!(
            text.contains("app.pdb, debug id 3F3A4B2C1D0E4F5A8B9C0D1E2F3A4B5C1"),
            "{text}"
        );
        // an ELF file: its build-id
        let elf = Module {
            build_id: Some(vec![0x12, 0x34]),
            ..module("libc.so.6")
        };
        assert!(missing_message(&elf, Os::Linux).contains("(build-id 1234)"));
        // nothing identifies it
        let none = missing_message(&module("a.out"), Os::Linux);
        assert!(none.contains("no build-id, UUID or debug id"), "{none}");
    }
}
