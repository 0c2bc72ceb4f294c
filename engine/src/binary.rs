//! Facts about a binary file that every table builder needs: architecture, build-id and
//! link base — and the one place where addresses are converted between a binary's file
//! addresses (SVMA, as linked) and offsets from its link base.
//!
//! Tables (unwind and symbol) are keyed by *offset from the link base* so that one table
//! serves every load address: `offset = svma - link_base` and, in a process,
//! `offset = pc - module.load_base`.

use object::{Object, ObjectSegment};

use crate::dump::Arch;

/// A file's bytes, shared: a memory-mapped file or an `Arc<Vec<u8>>` is handed over
/// without copying.
pub type FileBytes = std::sync::Arc<dyn AsRef<[u8]> + Send + Sync>;

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

/// Converts a file address to an offset from the link base.
#[inline]
pub fn svma_to_offset(svma: u64, link_base: u64) -> Option<u64> {
    svma.checked_sub(link_base)
}
