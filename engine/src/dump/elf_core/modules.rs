//! The modules of a core: from NT_FILE where present, else from the dynamic linker's
//! `link_map` list in the core's memory (as gdb does), plus the vdso.
//!
//! The dynamic linker's structures (`r_debug`, `link_map`, the dynamic section) are read
//! in the process's word size: 8 bytes in a 64-bit process, 4 in an i386 or arm one, whose
//! fields sit at the same word indices.
//!
//! A module's identity comes from its own ELF header, program headers and PT_NOTE as found
//! in the core's memory (the kernel dumps the first page of every ELF mapping by default), so
//! build-ids are read without the binary files. Nothing here opens files: paths are only
//! recorded. Every walk over memory is bounded (header counts, note sizes, chain length).

use std::collections::{HashMap, HashSet};

use super::notes::{auxv_get, FileMapping, AT_BASE, AT_ENTRY, AT_PHDR, AT_PHNUM, AT_SYSINFO_EHDR};
use super::parse::{
    c_str, u16_at, u32_at, u64_at, NoteIter, Phdr, EHDR32_SIZE, EHDR_SIZE, PF_X, PHDR32_SIZE,
    PHDR_SIZE, PT_DYNAMIC, PT_INTERP, PT_LOAD, PT_NOTE, PT_PHDR,
};
use crate::dump::{Arch, Identity, Mapping, MemoryMap, Module, Warning};

/// Page granularity of link bases, as `binary::link_base` computes them.
const PAGE_MASK: u64 = !0xfff;
/// At most this many program headers are read from a module's image in memory.
const MAX_IMAGE_PHDRS: usize = 256;
/// At most this many bytes of a PT_NOTE segment are scanned for the build-id.
const MAX_NOTE_BYTES: usize = 64 * 1024;
/// Build-ids are 16–20 bytes in practice; longer descriptors are not believed.
const MAX_BUILD_ID: usize = 64;
/// At most this many `link_map` entries are followed.
const MAX_LINK_MAP: usize = 4096;
/// At most this many dynamic entries are scanned for DT_DEBUG.
const MAX_DYN_ENTRIES: usize = 4096;
/// Longest path read from process memory.
const MAX_PATH: usize = 4096;
const DT_NULL: u64 = 0;
const DT_DEBUG: u64 = 21;
/// Name glibc gives the vdso in `link_map` and in backtraces.
pub(super) const VDSO_NAME: &str = "linux-vdso.so.1";

/// What a module's ELF image in memory says about itself.
#[derive(Debug, Clone)]
pub(super) struct Image {
    /// Lowest PT_LOAD vaddr, page-aligned: the link-time address of the first page.
    pub link_base: u64,
    /// One past the highest PT_LOAD byte, relative to `link_base`, page-rounded.
    pub extent: u64,
    pub build_id: Option<Vec<u8>>,
    pub phdrs: Vec<Phdr>,
}

/// Reads the program headers at `addr` (count bounded by [`MAX_IMAGE_PHDRS`]).
fn phdrs_at(mem: &MemoryMap<'_>, addr: u64, count: usize) -> Option<Vec<Phdr>> {
    if count == 0 || count > MAX_IMAGE_PHDRS {
        return None;
    }
    let bytes = mem.read_bytes(addr, count.checked_mul(PHDR_SIZE)?)?;
    bytes.chunks_exact(PHDR_SIZE).map(Phdr::parse).collect()
}

/// Reads the program headers at `addr` in the layout of a process whose words are
/// `word` bytes (ELF32 for 4).
fn phdrs_for_word(mem: &MemoryMap<'_>, addr: u64, count: usize, word: u64) -> Option<Vec<Phdr>> {
    if word == 4 {
        phdrs32_at(mem, addr, count)
    } else {
        phdrs_at(mem, addr, count)
    }
}

/// The `word`-byte (4 or 8) little-endian word at `addr`.
fn read_word(mem: &MemoryMap<'_>, addr: u64, word: u64) -> Option<u64> {
    if word == 4 {
        mem.read_u32(addr).map(u64::from)
    } else {
        mem.read_u64(addr)
    }
}

/// Reads the program headers of an ELF32 image at `addr` (an i386 or arm process's modules).
fn phdrs32_at(mem: &MemoryMap<'_>, addr: u64, count: usize) -> Option<Vec<Phdr>> {
    if count == 0 || count > MAX_IMAGE_PHDRS {
        return None;
    }
    let bytes = mem.read_bytes(addr, count.checked_mul(PHDR32_SIZE)?)?;
    bytes.chunks_exact(PHDR32_SIZE).map(Phdr::parse32).collect()
}

/// Reads the ELF image whose header is at `ehdr_addr` in the process (ELF64, or ELF32 as
/// an i386 or arm process maps them).
pub(super) fn image_at(mem: &MemoryMap<'_>, ehdr_addr: u64) -> Option<Image> {
    let ident = mem.read_bytes(ehdr_addr, 6)?;
    if !ident.starts_with(b"\x7fELF") || ident.get(5) != Some(&1) {
        return None;
    }
    if ident.get(4) == Some(&1) {
        let eh = mem.read_bytes(ehdr_addr, EHDR32_SIZE)?;
        let phoff = u64::from(u32_at(eh, 28)?);
        if usize::from(u16_at(eh, 42)?) != PHDR32_SIZE {
            return None;
        }
        let phnum = usize::from(u16_at(eh, 44)?);
        let phdrs = phdrs32_at(mem, ehdr_addr.checked_add(phoff)?, phnum)?;
        return image_from_phdrs(phdrs);
    }
    let eh = mem.read_bytes(ehdr_addr, EHDR_SIZE)?;
    if eh.get(4) != Some(&2) {
        return None;
    }
    let phoff = u64_at(eh, 32)?;
    if usize::from(u16_at(eh, 54)?) != PHDR_SIZE {
        return None;
    }
    let phnum = usize::from(u16_at(eh, 56)?);
    let phdrs = phdrs_at(mem, ehdr_addr.checked_add(phoff)?, phnum)?;
    image_from_phdrs(phdrs)
}

/// Completes an [`Image`] from its program headers (the build-id is read later, once the
/// load base is known).
fn image_from_phdrs(phdrs: Vec<Phdr>) -> Option<Image> {
    let loads = || phdrs.iter().filter(|p| p.p_type == PT_LOAD);
    let link_base = loads().map(|p| p.vaddr).min()? & PAGE_MASK;
    let top = loads().filter_map(|p| p.vaddr.checked_add(p.memsz)).max()?;
    let extent = top.checked_sub(link_base)?.checked_add(0xfff)? & PAGE_MASK;
    Some(Image {
        link_base,
        extent,
        build_id: None,
        phdrs,
    })
}

impl Image {
    /// The run-time address of link-time address `svma`, for an image whose first page is at
    /// `load_base`.
    fn runtime(&self, load_base: u64, svma: u64) -> Option<u64> {
        svma.checked_sub(self.link_base)?.checked_add(load_base)
    }

    /// Fills `build_id` from the image's PT_NOTE segments in memory.
    fn read_build_id(&mut self, mem: &MemoryMap<'_>, load_base: u64) {
        for p in self.phdrs.iter().filter(|p| p.p_type == PT_NOTE) {
            let Some(addr) = self.runtime(load_base, p.vaddr) else {
                continue;
            };
            let Some(avail) = mem.read_to_range_end(addr) else {
                continue;
            };
            let want = usize::try_from(p.filesz)
                .unwrap_or(usize::MAX)
                .min(MAX_NOTE_BYTES);
            let seg = &avail[..want.min(avail.len())];
            for note in NoteIter::new(seg, p.align) {
                if note.n_type == 3 && note.name == b"GNU" && !note.desc.is_empty() {
                    if note.desc.len() <= MAX_BUILD_ID {
                        self.build_id = Some(note.desc.to_vec());
                    }
                    return;
                }
            }
        }
    }

    /// Whether the PT_LOAD holding file offset `offset` is executable.
    fn executable_at_offset(&self, offset: u64) -> Option<bool> {
        self.phdrs
            .iter()
            .filter(|p| p.p_type == PT_LOAD)
            .find(|p| {
                let start = p.offset & PAGE_MASK;
                offset >= start && p.offset.checked_add(p.filesz).is_some_and(|e| offset < e)
            })
            .map(|p| p.flags & PF_X != 0)
    }

    /// The image's mappings at `load_base`, from its own PT_LOAD headers.
    fn mappings(&self, load_base: u64) -> Vec<Mapping> {
        self.phdrs
            .iter()
            .filter(|p| p.p_type == PT_LOAD && p.memsz > 0)
            .filter_map(|p| {
                let start = self.runtime(load_base, p.vaddr & PAGE_MASK)?;
                let end = self
                    .runtime(load_base, p.vaddr.checked_add(p.memsz)?.checked_add(0xfff)?)?
                    & PAGE_MASK;
                Some(Mapping {
                    start,
                    end,
                    file_offset: p.offset & PAGE_MASK,
                    executable: Some(p.flags & PF_X != 0),
                })
            })
            .collect()
    }
}

/// A core PT_LOAD: the address range and whether it was executable.
#[derive(Debug, Clone, Copy)]
pub(super) struct CoreLoad {
    pub start: u64,
    pub end: u64,
    pub executable: bool,
}

/// The core's PT_LOAD ranges merged into sorted, disjoint intervals (all of them, and the
/// executable ones), so each "is this range executable" question is two binary searches
/// however many segments and mappings a hostile core declares.
pub(super) struct LoadIndex {
    all: Vec<(u64, u64)>,
    exec: Vec<(u64, u64)>,
}

impl LoadIndex {
    pub fn new(loads: &[CoreLoad]) -> Self {
        let merge = |mut v: Vec<(u64, u64)>| {
            v.sort_unstable();
            let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
            for (s, e) in v {
                match out.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => out.push((s, e)),
                }
            }
            out
        };
        let ranges = |exec_only: bool| {
            loads
                .iter()
                .filter(|l| l.start < l.end && (!exec_only || l.executable))
                .map(|l| (l.start, l.end))
                .collect::<Vec<_>>()
        };
        LoadIndex {
            all: merge(ranges(false)),
            exec: merge(ranges(true)),
        }
    }

    /// Whether `[start, end)` overlaps one of the disjoint sorted intervals.
    fn overlaps(intervals: &[(u64, u64)], start: u64, end: u64) -> bool {
        // The first interval ending after `start` is the only candidate.
        let i = intervals.partition_point(|&(_, e)| e <= start);
        intervals.get(i).is_some_and(|&(s, _)| s < end)
    }

    /// Whether the core's PT_LOADs mark `[start, end)` executable (`None`: not covered).
    fn executable(&self, start: u64, end: u64) -> Option<bool> {
        if Self::overlaps(&self.exec, start, end) {
            Some(true)
        } else if Self::overlaps(&self.all, start, end) {
            Some(false)
        } else {
            None
        }
    }
}

/// The last component of a path.
fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

/// A module from an image found in memory.
fn module_from_image(
    name: String,
    path: Option<String>,
    load_base: u64,
    mut image: Image,
    mem: &MemoryMap<'_>,
) -> Option<Module> {
    image.read_build_id(mem, load_base);
    let end = load_base.checked_add(image.extent)?;
    let identity = if image.build_id.is_some() {
        Identity::BuildId
    } else if path.is_some() {
        Identity::Path
    } else {
        Identity::None
    };
    Some(Module {
        name,
        path,
        base: load_base,
        end,
        load_base,
        mappings: image.mappings(load_base),
        build_id: image.build_id,
        debug_id: None,
        debug_file: None,
        code_id: None,
        version: None,
        identity,
        main: false,
    })
}

/// The suffix the kernel gives the path of a mapped file that was deleted (or replaced by
/// a rename) after it was mapped.
const DELETED: &str = " (deleted)";

/// One load of a file: the mappings that one `mmap` of its header (file offset 0) and
/// the segments after it made. A file mapped twice (a library loaded in two namespaces,
/// or a program that also maps its own binary as data) is two instances.
struct Instance<'f> {
    maps: Vec<&'f FileMapping>,
    /// The ELF image at the header mapping, when the core holds it.
    image: Option<Image>,
}

impl Instance<'_> {
    /// Whether `m`, a mapping of file offset 0, is one of this load's own segments rather
    /// than a new load: the image says a PT_LOAD segment other than its first maps the
    /// file's first page at `m`'s place. lld packs segments without page-aligning their
    /// file offsets, so a small program's code, data and read-only segments all map page 0
    /// (each at its own address), and every mapping of it in NT_FILE has offset 0.
    fn segment_of_page_zero(&self, m: &FileMapping) -> bool {
        let (Some(first), Some(image)) = (self.maps.first(), &self.image) else {
            return false;
        };
        if first.file_offset != 0 {
            return false;
        }
        let Some(at) = m.start.checked_sub(first.start).filter(|&at| at > 0) else {
            return false;
        };
        image.phdrs.iter().any(|p| {
            p.p_type == PT_LOAD
                && p.offset & PAGE_MASK == 0
                && (p.vaddr & PAGE_MASK).checked_sub(image.link_base) == Some(at)
        })
    }

    /// Whether `m` continues this load: inside the image's extent from its header, or
    /// (no image in memory) right after the previous mapping — the dynamic linker reserves
    /// a module's whole extent at once, so its segments follow its header without gaps.
    fn continued_by(&self, m: &FileMapping) -> bool {
        let (Some(first), Some(last)) = (self.maps.first(), self.maps.last()) else {
            return false;
        };
        match &self.image {
            Some(image) if first.file_offset == 0 => first
                .start
                .checked_add(image.extent)
                .is_some_and(|end| m.start < end),
            _ => m.start == last.end,
        }
    }
}

/// Splits one file's mappings (sorted by address) into instances: each mapping of file
/// offset 0 starts one (but for a segment of the load below that maps the file's first
/// page again, [`Instance::segment_of_page_zero`]), and the others continue the one below them when they lie where
/// its load put its segments ([`Instance::continued_by`]); any other mapping (the file
/// mapped as data at an offset) is an instance of its own.
fn instances<'f>(maps: &[&'f FileMapping], mem: &MemoryMap<'_>) -> Vec<Instance<'f>> {
    let mut out: Vec<Instance<'f>> = Vec::new();
    for &m in maps {
        match out.last_mut() {
            Some(last)
                if (m.file_offset != 0 || last.segment_of_page_zero(m)) && last.continued_by(m) =>
            {
                last.maps.push(m)
            }
            _ => out.push(Instance {
                maps: vec![m],
                image: (m.file_offset == 0)
                    .then(|| image_at(mem, m.start))
                    .flatten(),
            }),
        }
    }
    out
}

/// Modules from NT_FILE: each load of a file ([`instances`]) that is mapped executable is
/// a module, as gdb lists modules from the dynamic linker and the executable mappings.
/// Files mapped as data (a separate debug file read by a symbolizer, fonts, databases, a
/// program's own binary read as data) are not modules, even when they are ELF files with
/// a module's build-id.
pub(super) fn from_nt_file(
    files: &[FileMapping],
    loads: &LoadIndex,
    mem: &MemoryMap<'_>,
) -> Vec<Module> {
    let mut groups: Vec<(&str, Vec<&FileMapping>)> = Vec::new();
    let mut by_path: HashMap<&str, usize> = HashMap::new();
    for f in files {
        match by_path.get(f.path.as_str()) {
            Some(&i) => {
                if let Some(group) = groups.get_mut(i) {
                    group.1.push(f);
                }
            }
            None => {
                by_path.insert(&f.path, groups.len());
                groups.push((&f.path, vec![f]));
            }
        }
    }
    let mut out = Vec::new();
    for (path, mut maps) in groups {
        if path.starts_with("/dev/") {
            continue;
        }
        maps.sort_by_key(|m| m.start);
        let path = path.strip_suffix(DELETED).unwrap_or(path);
        for instance in instances(&maps, mem) {
            if let Some(m) = module_from_instance(path, instance, loads, mem) {
                out.push(m);
            }
        }
    }
    out
}

/// The module one load of a file makes, or `None` when nothing of it is mapped executable
/// (a file mapped as data).
fn module_from_instance(
    path: &str,
    instance: Instance<'_>,
    loads: &LoadIndex,
    mem: &MemoryMap<'_>,
) -> Option<Module> {
    let Instance { maps, mut image } = instance;
    if image.is_none() && path.starts_with("/memfd:") {
        // Code a JIT wrote into a memfd: no module (gdb lists none), no file to find.
        return None;
    }
    let header = maps.first().filter(|m| m.file_offset == 0).map(|m| m.start);
    let mappings: Vec<Mapping> = maps
        .iter()
        .map(|m| Mapping {
            start: m.start,
            end: m.end,
            file_offset: m.file_offset,
            // gcore leaves out unwritten file-backed text entirely, so the core may not
            // cover a mapping; the image's own segment flags then say.
            executable: loads
                .executable(m.start, m.end)
                .or_else(|| image.as_ref()?.executable_at_offset(m.file_offset)),
        })
        .collect();
    if !mappings.iter().any(|m| m.executable == Some(true)) {
        return None;
    }
    let base = maps.iter().map(|m| m.start).min()?;
    let mut end = maps.iter().map(|m| m.end).max()?;
    let load_base = header.unwrap_or(base);
    if let Some(img) = image.as_mut() {
        img.read_build_id(mem, load_base);
        if let Some(img_end) = load_base.checked_add(img.extent) {
            end = end.max(img_end);
        }
    }
    let build_id = image.and_then(|i| i.build_id);
    Some(Module {
        name: file_name(path),
        path: Some(path.to_string()),
        base: base.min(load_base),
        end,
        load_base,
        identity: if build_id.is_some() {
            Identity::BuildId
        } else {
            Identity::Path
        },
        build_id,
        mappings,
        ..Module::default()
    })
}

/// The vdso, whose whole image is in the core's memory.
///
/// The module spans the whole mapping the core holds at the vdso's address where that is
/// larger than its load segments: the vdso of 3.x kernels is two pages whose second holds
/// the section headers (and the symbol table they locate), while its one PT_LOAD covers
/// the first page only; read by the load segment alone, the image has no readable
/// sections, and its symbols look corrupt.
pub(super) fn vdso(
    auxv: &[u8],
    loads: &LoadIndex,
    core_loads: &[CoreLoad],
    mem: &MemoryMap<'_>,
) -> Option<Module> {
    let addr = auxv_get(auxv, AT_SYSINFO_EHDR).filter(|&a| a != 0)?;
    let image = image_at(mem, addr)?;
    let mut m = module_from_image(VDSO_NAME.to_string(), None, addr, image, mem)?;
    let mapping_end = core_loads
        .iter()
        .filter(|l| l.start == addr && l.end > m.end)
        .map(|l| l.end)
        .max();
    if let Some(end) = mapping_end {
        m.end = end;
    }
    // The vdso's own headers may mark text executable; the core's PT_LOAD is the truth.
    for map in &mut m.mappings {
        if let Some(x) = loads.executable(map.start, map.end) {
            map.executable = Some(x);
        }
    }
    Some(m)
}

/// A NUL-terminated string from process memory, at most [`MAX_PATH`] bytes.
pub(super) fn read_c_string(mem: &MemoryMap<'_>, addr: u64) -> Option<String> {
    let avail = mem.read_to_range_end(addr)?;
    let b = &avail[..avail.len().min(MAX_PATH)];
    let s = c_str(b);
    (s.len() < b.len() || s.len() == avail.len()).then(|| String::from_utf8_lossy(s).into_owned())
}

/// Modules from the dynamic linker's list, for cores without NT_FILE: the executable (found
/// by AT_PHDR), every `link_map` entry reachable from its DT_DEBUG `r_debug`, and the
/// interpreter at AT_BASE. The vdso is added by the caller.
pub(super) fn from_link_map(
    auxv: &[u8],
    exe_path: Option<String>,
    mem: &MemoryMap<'_>,
    core_loads: &[CoreLoad],
    arch: Arch,
    warnings: &mut Vec<Warning>,
) -> Vec<Module> {
    let mut found = Found::default();
    let at_base = auxv_get(auxv, AT_BASE).filter(|&b| b != 0);
    let start = Start {
        auxv,
        mem,
        core_loads,
        at_base,
        word: arch.pointer_size(),
    };
    let (interp_path, r_debug) = main_module(&start, exe_path, arch, &mut found, warnings);
    let vdso_addr = auxv_get(auxv, AT_SYSINFO_EHDR).unwrap_or(0);
    follow_link_map(
        &start,
        r_debug,
        vdso_addr,
        interp_path.as_deref(),
        &mut found,
        warnings,
    );
    // The interpreter, when the chain did not list it (static-pie, or no DT_DEBUG).
    if let Some(base) = at_base.filter(|b| !found.seen_bases.contains(b)) {
        if let Some(image) = image_at(mem, base) {
            let name = interp_path
                .as_deref()
                .map(file_name)
                .unwrap_or_else(|| "ld.so".into());
            if let Some(m) = module_from_image(name, interp_path.clone(), base, image, mem) {
                found.out.push(m);
            }
        }
    }
    found.out
}

/// What the module list is read from.
struct Start<'a, 'm> {
    auxv: &'a [u8],
    mem: &'a MemoryMap<'m>,
    core_loads: &'a [CoreLoad],
    /// The dynamic linker's base (AT_BASE), if any.
    at_base: Option<u64>,
    /// The process's word size in bytes (4 or 8).
    word: u64,
}

/// The modules found so far, and their bases.
#[derive(Default)]
struct Found {
    out: Vec<Module>,
    seen_bases: HashSet<u64>,
}

impl Found {
    fn push(&mut self, m: Module) {
        self.seen_bases.insert(m.base);
        self.out.push(m);
    }
}

/// The executable, from its program headers at AT_PHDR: its load base and image, and the
/// interpreter path (PT_INTERP) and `r_debug` (PT_DYNAMIC's DT_DEBUG) they lead to.
fn executable_from_phdrs(
    auxv: &[u8],
    mem: &MemoryMap<'_>,
    word: u64,
) -> Option<(u64, Image, Option<String>, Option<u64>)> {
    let phdr_addr = auxv_get(auxv, AT_PHDR)?;
    let phnum = usize::try_from(auxv_get(auxv, AT_PHNUM)?).ok()?;
    let phdrs = phdrs_for_word(mem, phdr_addr, phnum, word)?;
    let ehdr_size = if word == 4 { EHDR32_SIZE } else { EHDR_SIZE };
    let image = image_from_phdrs(phdrs)?;
    // Load bias from PT_PHDR when present, else assume the headers follow the ELF
    // header at the start of the first page (what every linker does).
    let bias = match image.phdrs.iter().find(|p| p.p_type == PT_PHDR) {
        Some(p) => phdr_addr.checked_sub(p.vaddr)?,
        None => phdr_addr
            .checked_sub(ehdr_size as u64)?
            .checked_sub(image.link_base)?,
    };
    let load_base = bias.checked_add(image.link_base)?;
    let (mut interp_path, mut r_debug) = (None, None);
    for p in &image.phdrs {
        let Some(addr) = p.vaddr.checked_add(bias) else {
            continue;
        };
        if p.p_type == PT_INTERP {
            interp_path = read_c_string(mem, addr);
        }
        if p.p_type == PT_DYNAMIC {
            r_debug = find_r_debug(mem, addr, p.memsz, word);
        }
    }
    Some((load_base, image, interp_path, r_debug))
}

/// The executable's module, and the interpreter path and `r_debug` address that lead to
/// the others.
fn main_module(
    start: &Start<'_, '_>,
    exe_path: Option<String>,
    arch: Arch,
    found: &mut Found,
    warnings: &mut Vec<Warning>,
) -> (Option<String>, Option<u64>) {
    let mem = start.mem;
    if let Some((load_base, image, interp_path, r_debug)) =
        executable_from_phdrs(start.auxv, mem, start.word)
    {
        let name = exe_path.as_deref().map(file_name).unwrap_or_default();
        if let Some(m) = module_from_image(name, exe_path, load_base, image, mem) {
            found.push(m);
        }
        return (interp_path, r_debug);
    }
    let core_loads = start.core_loads;
    if let Some(m) = auxv_get(start.auxv, AT_PHDR)
        .and_then(|phdr| core_loads.iter().find(|l| l.start <= phdr && phdr < l.end))
        .and_then(|l| module_from_core_loads(exe_path, l.start, core_loads, &[]))
    {
        // QEMU's user-mode cores leave out every read-only file mapping, headers included:
        // the executable is the core mapping holding AT_PHDR, and `r_debug` is found
        // in the dynamic linker's data by its signature.
        let r_debug = start.at_base.and_then(|b| scan_r_debug(mem, b, start.word));
        // The dynamic linker's `l_name` points at the executable's PT_INTERP string, which
        // is not in the core either: glibc's standard interpreter path stands in for it
        // (the module stays identified by path only, so the report marks it unverified).
        let interp_path = arch.info().glibc_interpreter;
        found.push(m);
        return (Some(interp_path.to_string()), r_debug);
    }
    warnings.push(Warning::new(
        "modules-incomplete",
        "the core has no NT_FILE note and the executable's program headers \
                  (AT_PHDR) are not in its memory, so modules are missing",
    ));
    (None, None)
}

/// The dynamic linker's `link_map` chain from `r_debug`: each library once, by its
/// headers in memory, else (QEMU cores) by the core's own mappings from its base.
fn follow_link_map(
    start: &Start<'_, '_>,
    r_debug: Option<u64>,
    vdso_addr: u64,
    interp_path: Option<&str>,
    found: &mut Found,
    warnings: &mut Vec<Warning>,
) {
    let (mem, w) = (start.mem, start.word);
    let mut seen = HashSet::new();
    // r_debug: r_version, r_map, …; link_map: l_addr, l_name, l_ld, l_next, … (words)
    let mut lm = r_debug
        .and_then(|r| read_word(mem, r.checked_add(w)?, w))
        .unwrap_or(0);
    while lm != 0 {
        if seen.len() >= MAX_LINK_MAP || !seen.insert(lm) {
            warnings.push(Warning::new(
                "link-map-loop",
                "the dynamic linker's module list loops or is too long; \
                          the modules after the loop are not listed",
            ));
            break;
        }
        let (Some(l_addr), Some(l_name), Some(next)) = (
            read_word(mem, lm, w),
            read_word(mem, lm.wrapping_add(w), w),
            read_word(mem, lm.wrapping_add(3 * w), w),
        ) else {
            break;
        };
        lm = next;
        let name = read_c_string(mem, l_name)
            .filter(|n| !n.is_empty())
            .or_else(|| {
                interp_path
                    .filter(|_| Some(l_addr) == start.at_base)
                    .map(str::to_string)
            })
            .unwrap_or_default();
        if name.is_empty() || name == VDSO_NAME || l_addr == vdso_addr {
            continue;
        }
        // For shared objects the link base is 0, so the header is at the load bias.
        let Some(image) = image_at(mem, l_addr) else {
            // Headers not in the core (QEMU): the core's own mappings from l_addr.
            if found.seen_bases.contains(&l_addr) {
                continue;
            }
            let stops: Vec<u64> = found
                .seen_bases
                .iter()
                .copied()
                .chain([vdso_addr])
                .collect();
            if let Some(m) = module_from_core_loads(Some(name), l_addr, start.core_loads, &stops) {
                found.push(m);
            }
            continue;
        };
        let Some(load_base) = l_addr.checked_add(image.link_base) else {
            continue;
        };
        if !found.seen_bases.insert(load_base) {
            continue;
        }
        if let Some(m) = module_from_image(file_name(&name), Some(name), load_base, image, mem) {
            found.out.push(m);
        }
    }
}

/// At most this many bytes above the dynamic linker's base are scanned for `r_debug`.
const MAX_R_DEBUG_SCAN: u64 = 64 << 20;

/// Finds glibc's `_r_debug` in the dynamic linker's data by its shape: `r_version` 1,
/// a non-null `r_map`, `r_state` RT_CONSISTENT (0) and `r_ldbase` equal to AT_BASE
/// (words of `w` bytes).
fn scan_r_debug(mem: &MemoryMap<'_>, ld_base: u64, w: u64) -> Option<u64> {
    let limit = ld_base.saturating_add(MAX_R_DEBUG_SCAN);
    let size = usize::try_from(w).ok()?;
    for (start, bytes) in mem.ranges() {
        let end = start.saturating_add(bytes.len() as u64);
        if end <= ld_base || start >= limit {
            continue;
        }
        for (i, chunk) in bytes.chunks_exact(size).enumerate() {
            if chunk.first() != Some(&1) || chunk.iter().skip(1).any(|&b| b != 0) {
                continue;
            }
            let at = start.checked_add(u64::try_from(i).ok()?.checked_mul(w)?)?;
            let word = |k: u64| read_word(mem, at.checked_add(k * w)?, w);
            if word(4) == Some(ld_base) && word(3) == Some(0) && word(1).is_some_and(|m| m != 0) {
                return Some(at);
            }
        }
    }
    None
}

/// A module whose headers the core lacks, from the core's own mappings: the contiguous
/// PT_LOADs from `base` — text, then data — up to a gap, the next text after data, or
/// another module's base (`stops`). Identified by path only.
fn module_from_core_loads(
    path: Option<String>,
    base: u64,
    core_loads: &[CoreLoad],
    stops: &[u64],
) -> Option<Module> {
    let mut loads: Vec<&CoreLoad> = core_loads.iter().filter(|l| l.start >= base).collect();
    loads.sort_by_key(|l| l.start);
    let first = loads.first().filter(|l| l.start == base)?;
    let mut end = first.end;
    let mut mappings = vec![Mapping {
        start: first.start,
        end: first.end,
        file_offset: 0,
        executable: Some(first.executable),
    }];
    let mut seen_data = !first.executable;
    for l in loads.iter().skip(1) {
        if l.start != end || stops.contains(&l.start) || (seen_data && l.executable) {
            break;
        }
        seen_data |= !l.executable;
        end = l.end;
        mappings.push(Mapping {
            start: l.start,
            end: l.end,
            file_offset: l.start - base,
            executable: Some(l.executable),
        });
    }
    let name = path.as_deref().map(file_name).unwrap_or_default();
    Some(Module {
        name,
        identity: if path.is_some() {
            Identity::Path
        } else {
            Identity::None
        },
        path,
        base,
        end,
        load_base: base,
        build_id: None,
        debug_id: None,
        debug_file: None,
        code_id: None,
        version: None,
        main: false,
        mappings,
    })
}

/// The `r_debug` address from the executable's dynamic section (DT_DEBUG), if set: its
/// entries are two words of `w` bytes (tag, value).
fn find_r_debug(mem: &MemoryMap<'_>, dynamic: u64, size: u64, w: u64) -> Option<u64> {
    let entries = usize::try_from(size / (2 * w)).ok()?.min(MAX_DYN_ENTRIES);
    for i in 0..entries {
        let at = dynamic.checked_add(u64::try_from(i).ok()?.checked_mul(2 * w)?)?;
        let tag = read_word(mem, at, w)?;
        if tag == DT_NULL {
            return None;
        }
        if tag == DT_DEBUG {
            return read_word(mem, at.checked_add(w)?, w).filter(|&r| r != 0);
        }
    }
    None
}

/// Marks the main executable: the module containing AT_PHDR or AT_ENTRY.
pub(super) fn mark_main(modules: &mut [Module], auxv: &[u8]) {
    let keys = [auxv_get(auxv, AT_PHDR), auxv_get(auxv, AT_ENTRY)];
    for key in keys.into_iter().flatten() {
        if let Some(m) = modules.iter_mut().find(|m| key >= m.base && key < m.end) {
            m.main = true;
            return;
        }
    }
}

#[cfg(test)]
mod qemu_tests {
    //! The fallbacks for cores without module headers in memory (QEMU user mode).

    use super::*;

    fn load(start: u64, end: u64, executable: bool) -> CoreLoad {
        CoreLoad {
            start,
            end,
            executable,
        }
    }

    #[test]
    fn module_spans_text_then_data_and_stops_at_the_next_text() {
        let loads = [
            load(0x5000, 0x6000, true),  // libfoo text
            load(0x6000, 0x8000, false), // guard
            load(0x8000, 0x9000, false), // data
            load(0x9000, 0xa000, true),  // someone else's text
            load(0x20000, 0x21000, true),
        ];
        let m = module_from_core_loads(Some("/lib/libfoo.so".into()), 0x5000, &loads, &[])
            .expect("module");
        assert_eq!((m.base, m.end, m.load_base), (0x5000, 0x9000, 0x5000));
        assert_eq!(m.name, "libfoo.so");
        assert_eq!(m.identity, Identity::Path);
        assert_eq!(m.mappings.len(), 3);
        assert!(m.contains_code(0x5800));
        assert!(!m.contains_code(0x8800));
        // another module's base stops it; no load at the base: no module
        let m = module_from_core_loads(None, 0x5000, &loads, &[0x8000]).expect("module");
        assert_eq!(m.end, 0x8000);
        assert!(module_from_core_loads(None, 0x5800, &loads, &[]).is_none());
    }

    #[test]
    fn r_debug_is_found_by_its_shape() {
        let ld_base = 0x10_0000u64;
        let mut words = vec![7u64, 1, 0, 0, 0, 0x999];
        // r_debug at index 6: version 1, r_map, r_brk, RT_CONSISTENT, r_ldbase
        words.extend_from_slice(&[1, 0x10_2000, 0x10_0500, 0, ld_base]);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mem = MemoryMap::new(vec![(ld_base + 0x1000, &bytes[..])]);
        assert_eq!(scan_r_debug(&mem, ld_base, 8), Some(ld_base + 0x1000 + 48));
        assert_eq!(scan_r_debug(&mem, ld_base + 0x1000_0000, 8), None);
        assert_eq!(scan_r_debug(&MemoryMap::default(), ld_base, 8), None);
    }

    #[test]
    fn r_debug_and_link_map_of_a_32_bit_process() {
        // an arm process (QEMU core): 4-byte words. r_debug at 0x10_1010 after three
        // words that only look like it; two link_map entries after it.
        let ld_base = 0x10_0000u64;
        let at = ld_base + 0x1000;
        let name_a = at + 0x100;
        let name_b = at + 0x120;
        let (lm_a, lm_b) = (at + 0x40, at + 0x60);
        let mut words = vec![0u32; 0x50];
        words[1] = 1; // r_version 1 but r_ldbase wrong below: not it
        words[4..9].copy_from_slice(&[1, lm_a as u32, 0x10_0500, 0, ld_base as u32]);
        // link_map a: l_addr, l_name, l_ld, l_next
        words[0x10..0x14].copy_from_slice(&[0x20_0000, name_a as u32, 0, lm_b as u32]);
        words[0x18..0x1c].copy_from_slice(&[0x30_0000, name_b as u32, 0, 0]);
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        bytes[0x100..0x10a].copy_from_slice(b"/lib/a.so\0");
        bytes[0x120..0x12a].copy_from_slice(b"/lib/b.so\0");
        let mem = MemoryMap::new(vec![(at, &bytes[..])]);
        assert_eq!(scan_r_debug(&mem, ld_base, 4), Some(at + 16));
        // the 64-bit reading of the same bytes finds no r_debug
        assert_eq!(scan_r_debug(&mem, ld_base, 8), None);
        let loads = [
            load(0x20_0000, 0x20_1000, true),
            load(0x30_0000, 0x30_1000, true),
        ];
        let start = Start {
            auxv: &[],
            mem: &mem,
            core_loads: &loads,
            at_base: Some(ld_base),
            word: 4,
        };
        let mut found = Found::default();
        let mut warnings = Vec::new();
        follow_link_map(&start, Some(at + 16), 0, None, &mut found, &mut warnings);
        let names: Vec<(&str, u64)> = found
            .out
            .iter()
            .map(|m| (m.name.as_str(), m.base))
            .collect();
        assert_eq!(names, vec![("a.so", 0x20_0000), ("b.so", 0x30_0000)]);
        assert!(warnings.is_empty());
    }
}
