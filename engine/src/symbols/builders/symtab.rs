//! `.symtab` and `.dynsym` → function ranges, for the addresses DWARF does not cover.
//!
//! Text symbols of every given file are read, `.symtab` first (it is the more complete
//! table; a debug file's `.symtab` counts too), then `.dynsym` for addresses no `.symtab`
//! symbol starts at. Of several symbols at one address the choice is gdb's, so that a
//! frame named from the symbol table reads as in gdb: a sized symbol over a zero-size
//! one, a global over a local, then the greatest (mangled) name in byte order (`malloc`
//! over `__libc_malloc`, `__libc_start_main_impl` over `__libc_start_main`: gdb sorts
//! the aliases of an address by name and takes the last). A zero-size symbol extends to
//! the next symbol's start, bounded by the end of its section. Names are demangled.
//!
//! A PE image's export table names its exported functions (`exports`, after any symbol
//! table): what a Windows DLL shipped without symbols still tells — as a Windows
//! debugger names `kernel32!BaseThreadInitThunk` from exports alone. Forwarders and
//! exports outside executable sections are not functions of the image.
//!
//! PLT stubs have no symbol: as gdb (BFD's synthetic symbols) and objdump do, each stub
//! of `.plt` (or `.plt.sec`) is named `<function>@plt` after its `JUMP_SLOT` relocation,
//! on x86_64 and aarch64, when the section's size is exactly the standard layout for the
//! relocations found (else the stubs stay unnamed rather than misnamed).

use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SymbolKind};

use super::{Collector, RawFunction};
use crate::symbols::demangle::demangle;
use crate::symbols::SymbolSource;

struct Candidate<'d> {
    start: u32,
    /// 0 = unknown (zero size)
    end: u32,
    section_end: u32,
    name: &'d str,
    global: bool,
    source: SymbolSource,
    input: u16,
    /// A PLT stub: its name is the function's, with `@plt` after the demangled name.
    plt: bool,
}

/// Reads the text symbols of `files`; the result may overlap and is made disjoint by the
/// caller.
pub(crate) fn collect(files: &[&object::File<'_>], c: &mut Collector) -> Vec<RawFunction> {
    collect_unnamed(files, c)
        .into_iter()
        .map(|n| RawFunction {
            name: c.string(&n.name()),
            ..n.function
        })
        .collect()
}

/// A function of [`collect_unnamed`]: its name as the file spells it, demangled only when
/// asked ([`Unnamed::name`]). A one-shot walk names a few dozen of libstdc++'s 5,000
/// functions; demangling them all was a sixth of a cold walk of a C++ program's core.
#[derive(Debug, Clone)]
pub(crate) struct Unnamed {
    /// Its range, source and input (`name` is 0).
    pub function: RawFunction,
    raw: Box<str>,
    plt: bool,
}

impl Unnamed {
    /// The name [`collect`] gives it.
    pub(crate) fn name(&self) -> std::borrow::Cow<'_, str> {
        let mut name = demangle(&self.raw);
        if self.plt {
            name.to_mut().push_str("@plt");
        }
        name
    }
}

/// What [`collect`] returns, in the same order, with names not yet demangled or interned.
pub(crate) fn collect_unnamed(files: &[&object::File<'_>], c: &mut Collector) -> Vec<Unnamed> {
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    add_symbol_candidates(files, c, &mut candidates);
    add_pe_exports(files, c, &mut candidates);
    add_plt_candidates(files, c, &mut candidates);
    best_per_address(candidates)
}

/// The defined text symbols of every file's `.symtab` and `.dynsym` (or the Mach-O and
/// PE symbol tables), as candidates sized by their symbol or, failing that, their section.
fn add_symbol_candidates<'d>(
    files: &[&object::File<'d>],
    c: &mut Collector,
    candidates: &mut Vec<Candidate<'d>>,
) {
    for (source, dynamic) in [(SymbolSource::Symtab, false), (SymbolSource::Dynsym, true)] {
        for (input, file) in files.iter().enumerate() {
            let input = u16::try_from(input).unwrap_or(u16::MAX);
            let symbols = if dynamic {
                file.dynamic_symbols()
            } else {
                file.symbols()
            };
            // an arm symbol's low bit says Thumb code; the function starts at the even
            // address (as gdb, objdump and addr2line take it)
            let arm = file.architecture() == object::Architecture::Arm;
            for sym in symbols {
                let address = if arm {
                    sym.address() & !1
                } else {
                    sym.address()
                };
                if sym.kind() != SymbolKind::Text || !sym.is_definition() || address == 0 {
                    continue;
                }
                let Ok(name) = sym.name() else { continue };
                // a Mach-O symbol carries the C prefix `_`, which Apple's tools (atos,
                // llvm-symbolizer) drop: `_main` is `main`, `__Z3foov` is `_Z3foov`; a
                // 32-bit Windows image's COFF symbol is decorated too ([`undecorated_i386`])
                let name = match file.format() {
                    object::BinaryFormat::MachO => name.strip_prefix('_').unwrap_or(name),
                    object::BinaryFormat::Pe
                        if file.architecture() == object::Architecture::I386 =>
                    {
                        undecorated_i386(name)
                    }
                    _ => name,
                };
                if name.is_empty() {
                    continue;
                }
                let Some(start) = c.offset(address) else {
                    continue;
                };
                let section_end = sym
                    .section_index()
                    .and_then(|i| file.section_by_index(i).ok())
                    .and_then(|s| c.range(s.address(), s.address().saturating_add(s.size())))
                    .map_or(start.saturating_add(1), |(_, e)| e);
                let end = if sym.size() == 0 {
                    0
                } else {
                    c.range(address, address.saturating_add(sym.size()))
                        .map_or(0, |(_, e)| e)
                };
                candidates.push(Candidate {
                    start,
                    end,
                    section_end,
                    name,
                    global: sym.is_global(),
                    source,
                    input,
                    plt: false,
                });
            }
        }
    }
}

/// One candidate per address (see the order below), each ending where its symbol says or
/// at the next one.
fn best_per_address(mut candidates: Vec<Candidate<'_>>) -> Vec<Unnamed> {
    // Per address: .symtab before .dynsym, sized before zero-size, global before local,
    // then the greatest name first.
    candidates.sort_by(|a, b| {
        (a.start, a.source, a.end == 0, !a.global)
            .cmp(&(b.start, b.source, b.end == 0, !b.global))
            .then_with(|| b.name.cmp(a.name))
    });
    // A sized symbol's end is kept even if an alias at the same address has none.
    let mut best: Vec<Candidate<'_>> = Vec::with_capacity(candidates.len());
    for cand in candidates {
        match best.last_mut() {
            Some(last) if last.start == cand.start => {
                if last.end == 0 {
                    last.end = cand.end;
                }
            }
            _ => best.push(cand),
        }
    }
    let mut out = Vec::with_capacity(best.len());
    for i in 0..best.len() {
        let b = &best[i];
        let next = best.get(i + 1).map_or(u32::MAX, |n| n.start);
        let end = if b.end == 0 {
            next.min(b.section_end)
        } else {
            b.end
        };
        if end <= b.start {
            continue;
        }
        out.push(Unnamed {
            function: RawFunction {
                start: b.start,
                end,
                name: 0,
                source: b.source,
                input: b.input,
            },
            raw: b.name.into(),
            plt: b.plt,
        });
    }
    out
}

/// The PLT stubs of every file (see [`plt_stubs`]), as sized candidates.
/// Exports read from one image at most.
const MAX_EXPORTS: usize = 1 << 20;

/// The exported functions of PE images, by name.
fn add_pe_exports<'d>(
    files: &[&'d object::File<'_>],
    c: &mut Collector,
    candidates: &mut Vec<Candidate<'d>>,
) {
    use object::read::{ExportTarget, NameOrOrdinal};
    use object::SectionKind;
    for (input, file) in files.iter().enumerate() {
        if file.format() != object::BinaryFormat::Pe {
            continue;
        }
        let input = u16::try_from(input).unwrap_or(u16::MAX);
        // the executable sections' [start, end), sorted: each export is placed by a binary
        // search (a hostile image may claim thousands of sections and of exports)
        let mut text: Vec<(u64, u64)> = file
            .sections()
            .filter(|s| s.kind() == SectionKind::Text)
            .map(|s| (s.address(), s.address().saturating_add(s.size())))
            .collect();
        text.sort_unstable();
        let Ok(exports) = file.exports() else {
            continue;
        };
        for export in exports.flatten().take(MAX_EXPORTS) {
            let ExportTarget::Address { address } = export.target() else {
                continue;
            };
            let i = text.partition_point(|&(start, _)| start <= address);
            let Some(&(section_start, section_end)) = i.checked_sub(1).and_then(|i| text.get(i))
            else {
                continue;
            };
            if address >= section_end {
                continue;
            }
            let NameOrOrdinal::Name(std::borrow::Cow::Borrowed(bytes)) = export.into_name() else {
                continue;
            };
            let (Ok(name), Some(start)) = (std::str::from_utf8(bytes), c.offset(address)) else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            let section_end = c
                .range(section_start, section_end)
                .map_or(start.saturating_add(1), |(_, e)| e);
            candidates.push(Candidate {
                start,
                end: 0,
                section_end,
                name,
                global: true,
                source: SymbolSource::Exports,
                input,
                plt: false,
            });
        }
    }
}

fn add_plt_candidates<'d>(
    files: &[&object::File<'d>],
    c: &Collector,
    candidates: &mut Vec<Candidate<'d>>,
) {
    for (input, file) in files.iter().enumerate() {
        let input = u16::try_from(input).unwrap_or(u16::MAX);
        for (address, name) in plt_stubs(file) {
            let Some((start, end)) = c.range(address, address.saturating_add(PLT_ENTRY)) else {
                continue;
            };
            candidates.push(Candidate {
                start,
                end,
                section_end: end,
                name,
                global: true,
                source: SymbolSource::Dynsym,
                input,
                plt: true,
            });
        }
    }
}

/// Bytes of one PLT stub (x86_64 and aarch64 alike).
const PLT_ENTRY: u64 = 16;

/// The PLT stubs of `file` as (address, function name): the `JUMP_SLOT` relocations of
/// `.rela.plt`, in order, one stub each after the PLT header — x86_64: 16-byte header in
/// `.plt`, or none in `.plt.sec` (IBT); aarch64: 32-byte header. Empty when the layout is
/// not the standard one for that many relocations.
fn plt_stubs<'d>(file: &object::File<'d>) -> Vec<(u64, &'d str)> {
    const R_X86_64_JUMP_SLOT: u32 = 7;
    const R_AARCH64_JUMP_SLOT: u32 = 1026;
    let (jump_slot, header) = match file.architecture() {
        object::Architecture::X86_64 => (R_X86_64_JUMP_SLOT, 16),
        object::Architecture::Aarch64 => (R_AARCH64_JUMP_SLOT, 32),
        _ => return Vec::new(),
    };
    let (Some(relocations), Some(dynsym)) =
        (file.dynamic_relocations(), file.dynamic_symbol_table())
    else {
        return Vec::new();
    };
    let mut names: Vec<&'d str> = Vec::new();
    for (_, r) in relocations {
        let object::RelocationFlags::Elf { r_type } = r.flags() else {
            continue;
        };
        if r_type.0 != jump_slot {
            continue;
        }
        let object::RelocationTarget::Symbol(index) = r.target() else {
            return Vec::new();
        };
        let Some(name) = dynsym
            .symbol_by_index(index)
            .ok()
            .and_then(|s| s.name().ok())
        else {
            return Vec::new();
        };
        names.push(name);
    }
    let (section, header) = match file.section_by_name(".plt.sec") {
        Some(sec) if file.architecture() == object::Architecture::X86_64 => (sec, 0),
        _ => match file.section_by_name(".plt") {
            Some(sec) => (sec, header),
            None => return Vec::new(),
        },
    };
    let stubs = names.len() as u64;
    if names.is_empty() || section.size() != header + stubs * PLT_ENTRY {
        return Vec::new();
    }
    let first = section.address().saturating_add(header);
    names
        .into_iter()
        .enumerate()
        .map(|(i, name)| (first.saturating_add(i as u64 * PLT_ENTRY), name))
        .collect()
}

/// A 32-bit Windows image's COFF symbol as Microsoft's tools and winedbg name it: without
/// the C prefix `_` (`___cxa_throw` is `__cxa_throw`, `__ZSt9terminatev` `_ZSt9terminatev`,
/// as mingw's binutils drop it too), and without a stdcall name's argument bytes
/// (`_BaseThreadInitThunk@12` is `BaseThreadInitThunk`) or a fastcall name's `@`s (`@f@8`
/// is `f`). A Microsoft C++ name (`?f@@YAXXZ`) keeps its `@`s.
fn undecorated_i386(name: &str) -> &str {
    if let Some(fastcall) = name.strip_prefix('@') {
        return without_argument_bytes(fastcall);
    }
    let name = name.strip_prefix('_').unwrap_or(name);
    if name.starts_with('?') {
        return name;
    }
    without_argument_bytes(name)
}

/// `name` without a trailing `@N` (N decimal), unless nothing would be left.
fn without_argument_bytes(name: &str) -> &str {
    match name.rsplit_once('@') {
        Some((base, n))
            if !base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i386_coff_names_lose_their_decorations_as_winedbg_shows_them() {
        for (raw, name) in [
            ("_main", "main"),
            ("___cxa_throw", "__cxa_throw"),
            ("__ZSt9terminatev", "_ZSt9terminatev"),
            ("_BaseThreadInitThunk@12", "BaseThreadInitThunk"),
            ("@fast@8", "fast"),
            ("?f@@YAXXZ", "?f@@YAXXZ"),
            ("_at@", "at@"),
            ("_@4", "@4"),
        ] {
            assert_eq!(undecorated_i386(raw), name, "{raw}");
        }
    }
}
