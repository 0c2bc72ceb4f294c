//! Facts about a binary file that every table builder needs: architecture, build-id and
//! link base — and the one place where addresses are converted between a binary's file
//! addresses (SVMA, as linked) and offsets from its link base.
//!
//! Tables (unwind and symbol) are keyed by *offset from the link base* so that one table
//! serves every load address: `offset = svma - link_base` and, in a process,
//! `offset = pc - module.load_base`.

use object::{Object, ObjectSegment};

use crate::dump::Arch;

/// A file's bytes, shared and owned by whatever holds them: a read `Vec`, an `Arc<[u8]>`
/// from a cache, or a mapped file (the CLI maps its inputs; the engine cannot, as it has
/// no unsafe code) — handed to tables that keep reading the file after they are made,
/// without a copy. Cloning shares them.
///
/// A holder made with [`FileBytes::releasable`] can also give back the memory behind a
/// range the reader is done with ([`FileBytes::release`]): a mapped file drops those pages
/// from the process (a compressed debug section, once inflated, is not read again; a
/// later read faults them in again, from the file, unchanged).
#[derive(Clone)]
pub struct FileBytes(std::sync::Arc<dyn Held>);

/// What [`FileBytes`] holds: bytes, and a way to give back some of their memory.
trait Held: Send + Sync {
    fn bytes(&self) -> &[u8];
    fn release(&self, range: std::ops::Range<usize>);
}

/// Bytes that are only read.
struct Plain<T>(T);

impl<T: AsRef<[u8]> + Send + Sync> Held for Plain<T> {
    fn bytes(&self) -> &[u8] {
        self.0.as_ref()
    }
    fn release(&self, _: std::ops::Range<usize>) {}
}

/// Bytes with their holder's own release.
struct Releasable<T> {
    bytes: T,
    release: fn(&T, std::ops::Range<usize>),
}

impl<T: AsRef<[u8]> + Send + Sync> Held for Releasable<T> {
    fn bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }
    fn release(&self, range: std::ops::Range<usize>) {
        (self.release)(&self.bytes, range);
    }
}

impl FileBytes {
    pub fn new(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> FileBytes {
        FileBytes(std::sync::Arc::new(Plain(bytes)))
    }

    /// `bytes` whose memory behind a range `release` gives back (it must leave the bytes
    /// as they were: a read after it sees the same bytes).
    pub fn releasable<T: AsRef<[u8]> + Send + Sync + 'static>(
        bytes: T,
        release: fn(&T, std::ops::Range<usize>),
    ) -> FileBytes {
        FileBytes(std::sync::Arc::new(Releasable { bytes, release }))
    }

    /// Tells the holder that `range` will not be read again soon: a mapped file drops
    /// those pages from memory; other holders ignore it. The bytes stay readable.
    pub fn release(&self, range: std::ops::Range<usize>) {
        self.0.release(range);
    }
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.bytes()
    }
}

impl AsRef<[u8]> for FileBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileBytes({} bytes)", self.len())
    }
}

/// The architecture of a parsed binary, if it is one we handle.
pub fn arch_of<'data, R: object::ReadRef<'data>>(file: &object::File<'data, R>) -> Option<Arch> {
    match file.architecture() {
        object::Architecture::X86_64 => Some(Arch::X86_64),
        object::Architecture::Aarch64 => Some(Arch::Aarch64),
        object::Architecture::I386 => Some(Arch::X86),
        object::Architecture::Arm => Some(Arch::Arm),
        _ => None,
    }
}

/// The link base: the lowest loadable segment address, rounded down to 4 KiB (the
/// address the file's first page is mapped at, minus the load bias). Mach-O: `__TEXT`'s.
pub fn link_base(file: &object::File<'_>) -> u64 {
    // Mach-O executables start with `__PAGEZERO` (address 0, no file content, 4 GiB):
    // the image base every Mach-O address is relative to is `__TEXT`'s.
    // A PE image's addresses are relative to its image base (where its headers are).
    if file.format() == object::BinaryFormat::Pe {
        return file.relative_address_base();
    }
    if file.format() == object::BinaryFormat::MachO {
        if let Some(text) = file.segments().find(|s| s.name() == Ok(Some("__TEXT"))) {
            return text.address();
        }
    }
    file.segments()
        .filter(|s| s.size() > 0 || s.file_range().1 > 0)
        .map(|s| s.address())
        .min()
        .unwrap_or(0)
        & !0xfff
}

/// The GNU build-id note of an ELF file (or LC_UUID of Mach-O), if present.
pub fn build_id<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Option<Vec<u8>> {
    if let Ok(Some(id)) = file.build_id() {
        return Some(id.to_vec());
    }
    if let Ok(Some(uuid)) = file.mach_uuid() {
        return Some(uuid.to_vec());
    }
    None
}

/// A PE image's code id as minidumps and symbol servers name it: its COFF header's
/// `TimeDateStamp` as 8 hex digits then its `SizeOfImage`, upper-case (see
/// [`normalize_code_id`]). `None` for anything but a PE image.
pub fn pe_code_id<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Option<String> {
    use object::read::pe::{ImageNtHeaders, ImageOptionalHeader};
    use object::LittleEndian as LE;
    let (stamp, size) = match file {
        object::File::Pe64(f) => {
            let h = f.nt_headers();
            (
                h.file_header().time_date_stamp.get(LE),
                h.optional_header().size_of_image(),
            )
        }
        object::File::Pe32(f) => {
            let h = f.nt_headers();
            (
                h.file_header().time_date_stamp.get(LE),
                h.optional_header().size_of_image(),
            )
        }
        _ => return None,
    };
    Some(format!("{stamp:08X}{size:X}"))
}

/// The first bytes of an MSF 7.0 file (every PDB of the last twenty years).
pub const PDB_MAGIC: &[u8] = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0";

/// Whether `data` starts as a PDB (an MSF 7.0 file) does.
/// The `.eh_frame` section of `file`. In a PE image whose COFF string table is gone
/// (`strip`, mingw's `-s`), a section name is cut to the header's 8 bytes: `.eh_fram`,
/// the name an i686 mingw image's DWARF CFI then goes by (wine's dbghelp reads it so too).
pub fn eh_frame_section<'data, 'file>(
    file: &'file object::File<'data>,
) -> Option<object::Section<'data, 'file>> {
    file.section_by_name(".eh_frame").or_else(|| {
        (file.format() == object::BinaryFormat::Pe)
            .then(|| file.section_by_name(".eh_fram"))
            .flatten()
    })
}

pub fn is_pdb(data: &[u8]) -> bool {
    data.starts_with(PDB_MAGIC)
}

/// Runs a reader of a PDB (the `pdb` crate: symbols, FPO and FrameData streams), turning a
/// panic inside the crate into an error.
pub(crate) fn pdb_guarded<T>(read: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read))
        .unwrap_or_else(|_| Err("the PDB reader failed on this file".into()))
}

/// Converts a file address to an offset from the link base.
#[inline]
pub fn svma_to_offset(svma: u64, link_base: u64) -> Option<u64> {
    svma.checked_sub(link_base)
}
