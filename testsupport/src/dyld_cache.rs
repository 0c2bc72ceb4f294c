//! A minimal dyld shared cache writer, for tests without a Mac: small dylibs of our own
//! (built with clang for `arm64-apple-macos11` or `x86_64-apple-macos11`, ld64.lld) laid out as the parts of
//! `dyld_cache_format.h` that readers use, the way Apple's cache builder lays them out:
//!
//! - the main file: a `dyld_cache_header` (magic `dyld_v1   arm64` or `dyld_v1  x86_64`, as the dylibs' `cputype` says, a header long enough
//!   to carry `symbolFileUUID`, the subcache array (empty) and the image array), one
//!   `dyld_cache_mapping_and_slide_info` mapping the whole file at `shared_region_start`
//!   (no slide info), a `dyld_cache_image_info` and install path per image, then each
//!   dylib at a 16 KiB-aligned offset, its load commands rebased as the cache builder
//!   rebases them: segments' and sections' addresses moved to where the image is mapped,
//!   their file offsets, `LC_SYMTAB`'s and the `nlist` values made relative to the cache
//!   file;
//! - its `.symbols` subcache (`<main>.symbols`, named by the main header's
//!   `symbolFileUUID`): a header whose `localSymbolsOffset`/`Size` point at a
//!   `dyld_cache_local_symbols_info`, with one `dyld_cache_local_symbols_entry_64` per
//!   image (its VM offset from the shared region, its first `nlist` and count), the
//!   `nlist_64` records and their strings. As in Apple's caches, an image's local
//!   symbols (a `static` function) are moved there out of its own symbol table, which
//!   keeps the exported ones.
//!
//! Only what `object`'s `DyldCache` and postmortem read is written: no slide info, code
//! signature, closures, ObjC or Swift tables.

use std::path::Path;

use object::macho::{self, DyldCacheHeader, DyldCacheImageInfo, DyldCacheMappingAndSlideInfo};
use object::pod::{bytes_of, from_bytes_mut};
use object::LittleEndian as LE;

/// Where the cache is mapped (`shared_region_start`), as on arm64 macOS.
pub const SHARED_REGION_START: u64 = 0x1_8000_0000;
/// Image alignment in the file (and the VM).
const PAGE: usize = 0x4000;

/// One dylib for the cache: its install path and its bytes (a thin 64-bit Mach-O).
pub struct Dylib {
    pub install_path: String,
    pub bytes: Vec<u8>,
}

/// Where [`write`] put an image: its Mach header's address in the cache.
#[derive(Debug, Clone, Copy)]
pub struct Placed {
    pub address: u64,
}

fn header_size() -> usize {
    std::mem::size_of::<DyldCacheHeader<LE>>().next_multiple_of(8)
}

fn new_header(magic: &[u8; 16], uuid: [u8; 16]) -> Vec<u8> {
    let mut b = vec![0u8; header_size()];
    let (h, _) = from_bytes_mut::<DyldCacheHeader<LE>>(&mut b).unwrap();
    h.magic = *magic;
    h.uuid = uuid;
    let size = header_size() as u32;
    h.mapping_offset.set(LE, size);
    h.mapping_with_slide_offset.set(LE, size);
    h.sub_cache_array_offset.set(LE, size);
    h.images_offset.set(LE, size);
    h.shared_region_start.set(LE, SHARED_REGION_START);
    b
}

fn header_mut(b: &mut [u8]) -> &mut DyldCacheHeader<LE> {
    from_bytes_mut::<DyldCacheHeader<LE>>(b).unwrap().0
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// A dylib's local symbols taken out: (nlist bytes with values rebased, names).
struct Locals {
    nlists: Vec<[u8; 16]>,
    names: Vec<String>,
}

/// Rebases the dylib `b` placed at file offset `off` and address `addr` of the cache
/// (see the module doc); returns its local symbols, taken out of its symbol table.
fn rebase(b: &mut [u8], off: u64, addr: u64) -> Locals {
    assert_eq!(u32_at(b, 0), macho::MH_MAGIC_64, "a thin 64-bit Mach-O");
    let ncmds = u32_at(b, 16) as usize;
    let mut at = 32;
    let mut text_vmaddr = None;
    // first pass: the __TEXT address every address is moved from
    for _ in 0..ncmds {
        let (cmd, size) = (
            macho::LoadCommandType(u32_at(b, at)),
            u32_at(b, at + 4) as usize,
        );
        if cmd == macho::LC_SEGMENT_64 && &b[at + 8..at + 14] == b"__TEXT" {
            text_vmaddr = Some(u64_at(b, at + 24));
        }
        at += size;
    }
    let delta = addr - text_vmaddr.expect("a __TEXT segment");
    let (mut symtab, mut dysymtab) = (None, None);
    at = 32;
    for _ in 0..ncmds {
        let (cmd, size) = (
            macho::LoadCommandType(u32_at(b, at)),
            u32_at(b, at + 4) as usize,
        );
        match cmd {
            macho::LC_SEGMENT_64 => {
                put64(b, at + 24, u64_at(b, at + 24) + delta);
                put64(b, at + 40, u64_at(b, at + 40) + off);
                let nsects = u32_at(b, at + 64) as usize;
                for s in 0..nsects {
                    let sec = at + 72 + s * 80;
                    put64(b, sec + 32, u64_at(b, sec + 32) + delta);
                    let o = u32_at(b, sec + 48);
                    if o != 0 {
                        put32(b, sec + 48, o + off as u32);
                    }
                }
            }
            macho::LC_SYMTAB => symtab = Some(at),
            macho::LC_DYSYMTAB => dysymtab = Some(at),
            _ => {}
        }
        at += size;
    }
    let st = symtab.expect("LC_SYMTAB");
    let (symoff, nsyms, stroff) = (
        u32_at(b, st + 8) as usize,
        u32_at(b, st + 12) as usize,
        u32_at(b, st + 16) as usize,
    );
    for i in 0..nsyms {
        let n = symoff + i * 16;
        let kind = b[n + 4];
        if kind & 0xe0 == 0 && kind & 0x0e == 0x0e {
            put64(b, n + 8, u64_at(b, n + 8) + delta);
        }
    }
    // the local symbols (ld64.lld writes them first, as LC_DYSYMTAB says) move out
    let (ilocal, nlocal) = match dysymtab {
        Some(d) => (u32_at(b, d + 8) as usize, u32_at(b, d + 12) as usize),
        None => (0, 0),
    };
    assert_eq!(ilocal, 0, "local symbols first");
    let mut locals = Locals {
        nlists: Vec::new(),
        names: Vec::new(),
    };
    for i in 0..nlocal {
        let n = symoff + i * 16;
        let strx = u32_at(b, n) as usize;
        let name_start = stroff + strx;
        let end = b[name_start..].iter().position(|&c| c == 0).unwrap();
        locals
            .names
            .push(String::from_utf8(b[name_start..name_start + end].to_vec()).unwrap());
        locals.nlists.push(b[n..n + 16].try_into().unwrap());
    }
    put32(b, st + 8, (symoff + nlocal * 16) as u32 + off as u32);
    put32(b, st + 12, (nsyms - nlocal) as u32);
    put32(b, st + 16, stroff as u32 + off as u32);
    if let Some(d) = dysymtab {
        put32(b, d + 12, 0);
        put32(b, d + 16, u32_at(b, d + 16).saturating_sub(nlocal as u32));
        put32(b, d + 24, u32_at(b, d + 24).saturating_sub(nlocal as u32));
    }
    locals
}

/// Writes the cache of `dylibs` to `main` and `<main>.symbols`; returns where each image
/// was placed.
pub fn write(dylibs: &[Dylib], main: &Path) -> Vec<Placed> {
    // the cache's architecture is its dylibs' (the first one's `cputype`)
    let magic = match dylibs.first().map(|d| u32_at(&d.bytes, 4)) {
        Some(t) if t == macho::CPU_TYPE_X86_64.0 => b"dyld_v1  x86_64\0",
        _ => b"dyld_v1   arm64\0",
    };
    let symbols_uuid = [0x5a; 16];
    let mut head = new_header(magic, [0xa5; 16]);
    let hs = header_size();
    // tables after the header: the mapping, the images, then the paths
    let mapping_size = std::mem::size_of::<DyldCacheMappingAndSlideInfo<LE>>();
    let images_at = hs + mapping_size;
    let paths_at = images_at + dylibs.len() * std::mem::size_of::<DyldCacheImageInfo<LE>>();
    let mut paths = Vec::new();
    let mut path_offsets = Vec::new();
    for d in dylibs {
        path_offsets.push(paths_at + paths.len());
        paths.extend_from_slice(d.install_path.as_bytes());
        paths.push(0);
    }
    let mut offsets = Vec::new();
    let mut at = (paths_at + paths.len()).next_multiple_of(PAGE);
    for d in dylibs {
        offsets.push(at);
        at = (at + d.bytes.len()).next_multiple_of(PAGE);
    }
    let total = at;

    let mut file = vec![0u8; total];
    let mut locals_of = Vec::new();
    let mut placed = Vec::new();
    for (d, &off) in dylibs.iter().zip(&offsets) {
        let mut bytes = d.bytes.clone();
        let addr = SHARED_REGION_START + off as u64;
        locals_of.push(rebase(&mut bytes, off as u64, addr));
        file[off..off + bytes.len()].copy_from_slice(&bytes);
        placed.push(Placed { address: addr });
    }
    {
        let h = header_mut(&mut head);
        h.mapping_with_slide_count.set(LE, 1);
        h.mapping_count.set(LE, 1);
        h.images_offset.set(LE, images_at as u32);
        h.images_count.set(LE, dylibs.len() as u32);
        h.symbol_file_uuid = symbols_uuid;
        h.shared_region_size.set(LE, total as u64);
    }
    file[..hs].copy_from_slice(&head);
    let mut mapping = [0u8; 64];
    let (m, _) = from_bytes_mut::<DyldCacheMappingAndSlideInfo<LE>>(&mut mapping).unwrap();
    m.address.set(LE, SHARED_REGION_START);
    m.size.set(LE, total as u64);
    m.file_offset.set(LE, 0);
    m.max_prot
        .set(LE, macho::VM_PROT_READ | macho::VM_PROT_EXECUTE);
    m.init_prot
        .set(LE, macho::VM_PROT_READ | macho::VM_PROT_EXECUTE);
    file[hs..hs + mapping_size].copy_from_slice(&mapping[..mapping_size]);
    for (i, (&p, place)) in path_offsets.iter().zip(&placed).enumerate() {
        let mut info = [0u8; 32];
        let (inf, _) = from_bytes_mut::<DyldCacheImageInfo<LE>>(&mut info).unwrap();
        inf.address.set(LE, place.address);
        inf.path_file_offset.set(LE, p as u32);
        let at = images_at + i * 32;
        file[at..at + 32].copy_from_slice(bytes_of(inf));
    }
    file[paths_at..paths_at + paths.len()].copy_from_slice(&paths);
    std::fs::write(main, &file).unwrap();

    write_symbols_subcache(main, magic, symbols_uuid, &locals_of, &offsets);
    placed
}

/// Writes `<main>.symbols`, the subcache holding each image's local symbols (nlist
/// entries and their strings) found by the image's offset in the shared region.
fn write_symbols_subcache(
    main: &Path,
    magic: &[u8; 16],
    symbols_uuid: [u8; 16],
    locals_of: &[Locals],
    offsets: &[usize],
) {
    let mut sym = new_header(magic, symbols_uuid);
    let info_at = sym.len();
    let n = locals_of.len();
    let entries_off = 24usize;
    let nlist_off = entries_off + n * 16;
    let total_nlists: usize = locals_of.iter().map(|l| l.nlists.len()).sum();
    let strings_off = nlist_off + total_nlists * 16;
    let mut strings = vec![0u8];
    let mut table = vec![0u8; strings_off];
    let mut first = 0usize;
    let mut k = 0usize;
    for (i, (l, &off)) in locals_of.iter().zip(offsets).enumerate() {
        let e = entries_off + i * 16;
        put64(&mut table, e, off as u64); // VM offset from the shared region
        put32(&mut table, e + 8, first as u32);
        put32(&mut table, e + 12, l.nlists.len() as u32);
        for (nl, name) in l.nlists.iter().zip(&l.names) {
            let at = nlist_off + k * 16;
            table[at..at + 16].copy_from_slice(nl);
            put32(&mut table, at, strings.len() as u32);
            strings.extend_from_slice(name.as_bytes());
            strings.push(0);
            k += 1;
        }
        first += l.nlists.len();
    }
    for (i, v) in [
        nlist_off,
        total_nlists,
        strings_off,
        strings.len(),
        entries_off,
        n,
    ]
    .into_iter()
    .enumerate()
    {
        put32(&mut table, i * 4, v as u32);
    }
    table.extend_from_slice(&strings);
    {
        let h = header_mut(&mut sym);
        h.local_symbols_offset.set(LE, info_at as u64);
        h.local_symbols_size.set(LE, table.len() as u64);
    }
    sym.extend_from_slice(&table);
    let mut name = main.as_os_str().to_os_string();
    name.push(".symbols");
    std::fs::write(name, sym).unwrap();
}
