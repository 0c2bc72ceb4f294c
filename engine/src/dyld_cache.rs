//! Apple's system libraries from a dyld shared cache (`dyld_shared_cache_arm64e` and its
//! subcaches, as extracted from a device or a restore image): every image the cache
//! holds, by its `LC_UUID` (what a crash names it by), with the names its code has — the
//! image's own symbol table (exported names, in the cache's shared `__LINKEDIT`) and its
//! local symbols, which the cache keeps apart (in the main file for old caches, in the
//! `.symbols` subcache since macOS 12 / iOS 15).
//!
//! The cache is read with `object`'s `DyldCache` (header, mappings, subcaches, images,
//! each image's Mach-O through the mappings); the local-symbols table, which `object`
//! does not read, is read here (`dyld_cache_local_symbols_info` and its entries, as
//! `dyld_cache_format.h` lays them out), every count and offset checked against the file.
//!
//! A caller indexes a cache cheaply ([`index`]: each image's path and UUID) and takes the
//! names of only the images a crash names ([`image_symbols`]) and their unwind rules
//! (the image's `__TEXT,__unwind_info` and `__TEXT,__eh_frame`, read through the cache's
//! mappings by [`image_object`] and built by the same builders as a standalone Mach-O's:
//! `breakpad::write_cfi::dyld_image_stack_cfi`, a layer above), written as one Breakpad `.sym` file ([`breakpad_sym`]: `FUNC`/`PUBLIC`
//! records and `STACK CFI` records, as dump_syms writes a Mach-O's) so the tables are
//! built by the `.sym` builders. The `.sym` file is the one thing of an image the service
//! keeps (the cache itself is not stored), and what the command-line walk writes on first
//! use: one form for both, which any Breakpad tool also reads.

use object::read::macho::DyldCache;
use object::{Endianness, Object, ObjectSection, ObjectSymbol, SymbolKind};

use crate::dump::Arch;

/// Most images read from one cache (a macOS 14 cache holds about 3,500).
pub const MAX_IMAGES: usize = 20_000;
/// Most names taken for one image.
pub const MAX_SYMBOLS: usize = 4_000_000;

/// Why a cache cannot be read.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DyldCacheError {
    #[error("the dyld shared cache cannot be read: {0}")]
    Malformed(String),
    #[error("the dyld shared cache holds {0} images (at most {MAX_IMAGES} are read)")]
    TooManyImages(usize),
    #[error("the dyld shared cache's local symbols cannot be read: {0}")]
    LocalSymbols(String),
    #[error("the dyld shared cache has no image {0}")]
    NoImage(usize),
}

/// Whether `head` (a file's first bytes) starts a dyld shared cache (or one of its
/// subcaches).
pub fn is_dyld_cache(head: &[u8]) -> bool {
    head.starts_with(b"dyld_v1 ")
}

/// The suffixes of the subcache files of the cache whose main file is `main`
/// (`.01`, `.02`, …, `.symbols`), in the order [`index`] takes them.
pub fn subcache_suffixes(main: &[u8]) -> Result<Vec<String>, DyldCacheError> {
    DyldCache::<Endianness>::subcache_suffixes(main).map_err(malformed)
}

fn malformed(e: object::Error) -> DyldCacheError {
    DyldCacheError::Malformed(e.to_string())
}

/// One image of a cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedImage {
    /// Its index among the cache's images.
    pub index: usize,
    /// Its install path (`/usr/lib/system/libsystem_kernel.dylib`).
    pub path: String,
    pub uuid: [u8; 16],
}

/// The images of the cache `main` (with its subcaches, in [`subcache_suffixes`]' order),
/// and the cache's architecture: headers and load commands only.
pub fn index(
    main: &[u8],
    subcaches: &[&[u8]],
) -> Result<(Option<Arch>, Vec<CachedImage>), DyldCacheError> {
    let cache = DyldCache::<Endianness>::parse(main, subcaches).map_err(malformed)?;
    let arch = match cache.architecture() {
        object::Architecture::Aarch64 => Some(Arch::Aarch64),
        object::Architecture::X86_64 => Some(Arch::X86_64),
        _ => None,
    };
    let mut out = Vec::new();
    for (i, image) in cache.images().enumerate() {
        if i >= MAX_IMAGES {
            return Err(DyldCacheError::TooManyImages(i + 1));
        }
        let Ok(path) = image.path() else { continue };
        let Ok(file) = image.parse_object() else {
            continue;
        };
        if let Ok(Some(uuid)) = file.mach_uuid() {
            out.push(CachedImage {
                index: i,
                path: path.to_string(),
                uuid,
            });
        }
    }
    Ok((arch, out))
}

/// The names of an image and where its code ends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageSymbols {
    /// (offset from the image's Mach header, name), sorted by offset, one name per
    /// offset (an exported name over a local one).
    pub names: Vec<(u64, String)>,
    /// The end of its `__text` section, as an offset from its Mach header: where its
    /// last function ends.
    pub text_end: Option<u64>,
}

/// The names of image `index` of the cache.
pub fn image_symbols(
    main: &[u8],
    subcaches: &[&[u8]],
    index: usize,
) -> Result<ImageSymbols, DyldCacheError> {
    let cache = DyldCache::<Endianness>::parse(main, subcaches).map_err(malformed)?;
    let image = cache
        .images()
        .nth(index)
        .ok_or(DyldCacheError::NoImage(index))?;
    let base = image.info().address.get(cache.endianness());
    let file = image.parse_object().map_err(malformed)?;
    let text_end = file
        .section_by_name("__text")
        .and_then(|t| t.address().checked_add(t.size())?.checked_sub(base));
    let mut names: Vec<(u64, String)> = Vec::new();
    for s in file.symbols() {
        if names.len() >= MAX_SYMBOLS {
            break;
        }
        if !s.is_definition() || s.kind() != SymbolKind::Text {
            continue;
        }
        if let (Some(off), Ok(name)) = (s.address().checked_sub(base), s.name()) {
            names.push((off, symbol_name(name)));
        }
    }
    let exported = names.len();
    // the local symbols: in the `.symbols` subcache (the last one given), else the main
    // file
    let files: Vec<&[u8]> = subcaches
        .last()
        .copied()
        .into_iter()
        .chain([main])
        .collect();
    let (data, offset) = image.image_data_and_offset().map_err(malformed)?;
    let file_offset = if std::ptr::eq(data.as_ptr(), main.as_ptr()) {
        Some(offset)
    } else {
        None
    };
    let start = shared_region_start(main);
    for f in files {
        if let Some(locals) = local_symbols(f, base.wrapping_sub(start), file_offset)? {
            for (addr, name) in locals
                .into_iter()
                .take(MAX_SYMBOLS.saturating_sub(names.len()))
            {
                if let Some(off) = addr.checked_sub(base) {
                    names.push((off, symbol_name(&name)));
                }
            }
            break;
        }
    }
    // exported names first, so the stable sort keeps one of them at a shared offset
    let mut merged: Vec<(u64, String)> = Vec::with_capacity(names.len());
    let (ex, local) = names.split_at_mut(exported);
    ex.sort_by_key(|n| n.0);
    local.sort_by_key(|n| n.0);
    let (mut a, mut b) = (ex.iter().peekable(), local.iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if y.0 < x.0 => b.next(),
            (Some(_), _) => a.next(),
            (None, Some(_)) => b.next(),
            (None, None) => break,
        };
        if let Some(n) = next {
            if merged.last().is_none_or(|l| l.0 != n.0) {
                merged.push(n.clone());
            }
        }
    }
    Ok(ImageSymbols {
        names: merged,
        text_end,
    })
}

/// Image `index` of the cache as a Mach-O file whose sections `object` reads through the
/// cache's mappings (each segment from the subcache that holds it): what its unwind
/// tables are built from ([`crate::breakpad::write_cfi::dyld_image_stack_cfi`]).
pub fn image_object<'d>(
    main: &'d [u8],
    subcaches: &[&'d [u8]],
    index: usize,
) -> Result<object::File<'d>, DyldCacheError> {
    let cache = DyldCache::<Endianness>::parse(main, subcaches).map_err(malformed)?;
    let image = cache
        .images()
        .nth(index)
        .ok_or(DyldCacheError::NoImage(index))?;
    image.parse_object().map_err(malformed)
}

/// A Mach-O symbol's name as a frame shows it: C's leading underscore dropped.
fn symbol_name(name: &str) -> String {
    name.strip_prefix('_').unwrap_or(name).to_string()
}

/// The header's `shared_region_start` (0 when the header is too short to hold it).
fn shared_region_start(main: &[u8]) -> u64 {
    let Ok(h) = object::macho::DyldCacheHeader::<Endianness>::parse(main) else {
        return 0;
    };
    let endian = h.parse_magic().map_or(Endianness::Little, |(_, e)| e);
    h.shared_region_start.get(endian)
}

/// Offsets in a dyld cache header of the local-symbols fields and of the mapping table
/// (whose offset is also the header's size, which says which fields exist).
const LOCAL_SYMBOLS_OFFSET: usize = 0x48;
const MAPPING_OFFSET: usize = 0x10;
/// Headers this long or longer (those with `symbolFileUUID`) give 64-bit local-symbol
/// entries keyed by the image's VM offset from the shared region; shorter ones 32-bit
/// entries keyed by the image's file offset.
const HEADER_WITH_SYMBOL_FILE: u32 = 0x1c8;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The local symbols (address, name) of the image at VM offset `vm_offset` (64-bit
/// entries) or file offset `file_offset` (32-bit entries) in the local-symbols table of
/// cache file `f`; `None` when `f` has no such table. Little-endian caches only (every
/// cache Apple ships since the PowerPC).
fn local_symbols(
    f: &[u8],
    vm_offset: u64,
    file_offset: Option<u64>,
) -> Result<Option<Vec<(u64, String)>>, DyldCacheError> {
    let bad = |what: &str| DyldCacheError::LocalSymbols(what.to_string());
    let (Some(offset), Some(size), Some(header_size)) = (
        u64_at(f, LOCAL_SYMBOLS_OFFSET),
        u64_at(f, LOCAL_SYMBOLS_OFFSET + 8),
        u32_at(f, MAPPING_OFFSET),
    ) else {
        return Ok(None);
    };
    if offset == 0 || size == 0 {
        return Ok(None);
    }
    let start = usize::try_from(offset).map_err(|_| bad("offset"))?;
    let len = usize::try_from(size).map_err(|_| bad("size"))?;
    let info = f
        .get(start..start.checked_add(len).ok_or_else(|| bad("size"))?)
        .ok_or_else(|| bad("the table lies outside the file"))?;
    let field = |i: usize| {
        u32_at(info, i * 4)
            .map(|v| v as usize)
            .ok_or_else(|| bad("header"))
    };
    let (nlist_off, nlist_count, strings_off, strings_size, entries_off, entries_count) = (
        field(0)?,
        field(1)?,
        field(2)?,
        field(3)?,
        field(4)?,
        field(5)?,
    );
    let wide = header_size >= HEADER_WITH_SYMBOL_FILE;
    let entry_size = if wide { 16 } else { 12 };
    let mut found = None;
    for i in 0..entries_count {
        let at = entries_off
            .checked_add(i.checked_mul(entry_size).ok_or_else(|| bad("entries"))?)
            .ok_or_else(|| bad("entries"))?;
        let (key, first, count) = if wide {
            (
                u64_at(info, at),
                u32_at(info, at + 8),
                u32_at(info, at + 12),
            )
        } else {
            (
                u32_at(info, at).map(u64::from),
                u32_at(info, at + 4),
                u32_at(info, at + 8),
            )
        };
        let (Some(key), Some(first), Some(count)) = (key, first, count) else {
            return Err(bad("an entry lies outside the table"));
        };
        let wanted = if wide { Some(vm_offset) } else { file_offset };
        if Some(key) == wanted {
            found = Some((first as usize, count as usize));
            break;
        }
    }
    let Some((first, count)) = found else {
        return Ok(Some(Vec::new()));
    };
    if first.checked_add(count).is_none_or(|end| end > nlist_count) {
        return Err(bad("an image's symbols lie past the table's"));
    }
    let strings = info
        .get(strings_off..strings_off.saturating_add(strings_size))
        .ok_or_else(|| bad("the strings lie outside the table"))?;
    let mut out = Vec::with_capacity(count.min(MAX_SYMBOLS));
    for k in first..first + count.min(MAX_SYMBOLS) {
        let at = nlist_off
            .checked_add(k.checked_mul(16).ok_or_else(|| bad("symbols"))?)
            .ok_or_else(|| bad("symbols"))?;
        let (Some(strx), Some(kind), Some(value)) =
            (u32_at(info, at), info.get(at + 4), u64_at(info, at + 8))
        else {
            return Err(bad("a symbol lies outside the table"));
        };
        // N_SECT symbols only (not debugging entries, N_STAB)
        if kind & 0xe0 != 0 || kind & 0x0e != 0x0e {
            continue;
        }
        let Some(name) = strings.get(strx as usize..).and_then(|s| {
            let end = memchr::memchr(0, s)?;
            std::str::from_utf8(s.get(..end)?).ok()
        }) else {
            continue;
        };
        if !name.is_empty() {
            out.push((value, name.to_string()));
        }
    }
    Ok(Some(out))
}

/// Image `path` with `uuid`, `symbols` (from [`image_symbols`]) and `stack_cfi` (from
/// `breakpad::write_cfi::dyld_image_stack_cfi`, its `STACK CFI` records; empty for
/// names only) as a Breakpad
/// `.sym` file: a `FUNC` record per name, up to the next name (the last one to the end
/// of `__text`), as dump_syms sizes functions from a symbol table, then the unwind rules.
pub fn breakpad_sym(
    path: &str,
    uuid: &[u8; 16],
    arch: Option<Arch>,
    symbols: &ImageSymbols,
    stack_cfi: &str,
) -> String {
    use std::fmt::Write;
    let name = path.rsplit('/').next().unwrap_or(path);
    let id = crate::ids::hex(uuid).to_ascii_uppercase();
    let arch = match arch {
        Some(Arch::Aarch64) => "arm64",
        Some(Arch::X86_64) => "x86_64",
        _ => "unknown",
    };
    let mut out = format!("MODULE mac {arch} {id}0 {name}\nINFO CODE_ID {id}\n");
    let names = &symbols.names;
    for (i, (off, sym)) in names.iter().enumerate() {
        // a name is one field to the end of the line
        let sym = sym.replace(['\n', '\r'], " ");
        let end = names.get(i + 1).map(|n| n.0).or(symbols.text_end);
        match end
            .and_then(|e| e.checked_sub(*off))
            .filter(|&size| size > 0)
        {
            Some(size) => {
                let _ = writeln!(out, "FUNC {off:x} {size:x} 0 {sym}");
            }
            None => {
                let _ = writeln!(out, "PUBLIC {off:x} 0 {sym}");
            }
        }
    }
    out.push_str(stack_cfi);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sym_text_names_the_image_by_its_uuid() {
        let text = breakpad_sym(
            "/usr/lib/system/libsystem_kernel.dylib",
            &[0xab; 16],
            Some(Arch::Aarch64),
            &ImageSymbols {
                names: vec![(0x10, "__pthread_kill".into())],
                text_end: Some(0x18),
            },
            "STACK CFI INIT 10 8 .cfa: sp 0 + .ra: x30\n",
        );
        assert!(text.starts_with(
            "MODULE mac arm64 ABABABABABABABABABABABABABABABAB0 libsystem_kernel.dylib\n"
        ));
        assert!(text
            .ends_with("FUNC 10 8 0 __pthread_kill\nSTACK CFI INIT 10 8 .cfa: sp 0 + .ra: x30\n"));
    }

    #[test]
    fn garbage_is_refused() {
        assert!(index(b"dyld_v1   arm64\0 and nothing more", &[]).is_err());
        assert!(local_symbols(&[0u8; 8], 0, None).unwrap().is_none());
    }
}
