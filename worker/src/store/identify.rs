//! What an uploaded binary is: build-id, architecture, kind, and which unwind and debug
//! sections it carries. Only headers are read; tables are built later, by the jobs.

use object::{Object, ObjectKind, ObjectSection};

/// Facts about one uploaded binary file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryInfo {
    /// GNU build-id, lower-case hex.
    pub build_id: String,
    /// `x86_64`, `aarch64`, `x86`, `arm`, or `None` for another architecture.
    pub arch: Option<&'static str>,
    /// `executable`, `shared-object`, `debug` (a separate debug file) or `relocatable`.
    pub kind: &'static str,
    /// The unwind/debug/symbol sections present, by their report names
    /// (`eh_frame`, `debug_frame`, `sframe`, `debug_info`, `debug_line`, `symtab`, `dynsym`, …).
    pub sections: Vec<&'static str>,
}

/// Why an upload is not a binary we can index.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentifyError {
    #[error("not an ELF file (Breakpad .sym and Mach-O uploads are not supported yet)")]
    NotElf,
    #[error("the ELF file could not be read: {0}")]
    Malformed(String),
    #[error("this is a core dump, not a binary: upload it to /api/v1/crashes")]
    CoreDump,
    #[error("the file has no GNU build-id note, so no crash can be matched to it (link with -Wl,--build-id)")]
    NoBuildId,
}

impl IdentifyError {
    /// A stable kebab-case name.
    pub fn code(&self) -> &'static str {
        match self {
            IdentifyError::NotElf => "not-a-binary",
            IdentifyError::Malformed(_) => "malformed-binary",
            IdentifyError::CoreDump => "core-dump-as-binary",
            IdentifyError::NoBuildId => "no-build-id",
        }
    }
}

const SECTIONS: &[(&str, &str)] = &[
    (".eh_frame", "eh_frame"),
    (".eh_frame_hdr", "eh_frame_hdr"),
    (".debug_frame", "debug_frame"),
    (".sframe", "sframe"),
    (".debug_info", "debug_info"),
    (".debug_line", "debug_line"),
    (".zdebug_info", "debug_info"),
    (".symtab", "symtab"),
    (".dynsym", "dynsym"),
    (".gnu_debugdata", "gnu_debugdata"),
    (".gnu_debuglink", "gnu_debuglink"),
];

/// Identifies an uploaded binary from its headers.
pub fn identify(bytes: &[u8]) -> Result<BinaryInfo, IdentifyError> {
    if !bytes.starts_with(b"\x7fELF") {
        return Err(IdentifyError::NotElf);
    }
    let file = object::File::parse(bytes).map_err(|e| IdentifyError::Malformed(e.to_string()))?;
    describe(&file)
}

/// How much of a file that is not ELF is read to tell whether it is a format at all.
const SNIFF_BYTES: usize = 64 << 10;

/// Identifies an uploaded binary stored in `file`. An ELF file is read through a cache of
/// the ranges the parser asks for (headers, section table, notes), never whole, so
/// memory stays small whatever the file's size. Another file is first judged from its
/// start, and read whole only when that start is a format [`identify`] knows.
pub fn identify_file(file: &std::fs::File) -> Result<BinaryInfo, IdentifyError> {
    use object::ReadRef;
    use std::io::{Read, Seek};

    let cache = object::ReadCache::new(file);
    let data = &cache;
    if data.read_bytes_at(0, 4).ok() == Some(b"\x7fELF".as_slice()) {
        let parsed =
            object::File::parse(data).map_err(|e| IdentifyError::Malformed(e.to_string()))?;
        return describe(&parsed);
    }
    let io = |e: std::io::Error| IdentifyError::Malformed(format!("reading the upload: {e}"));
    let mut reader = cache.into_inner();
    reader.rewind().map_err(io)?;
    let mut start = Vec::with_capacity(SNIFF_BYTES);
    reader
        .by_ref()
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut start)
        .map_err(io)?;
    let judged = identify(&start);
    if matches!(judged, Err(IdentifyError::NotElf)) || start.len() < SNIFF_BYTES {
        return judged;
    }
    reader.read_to_end(&mut start).map_err(io)?;
    identify(&start)
}

/// The facts `identify` reports, from a parsed object file.
fn describe<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Result<BinaryInfo, IdentifyError> {
    if file.kind() == ObjectKind::Core {
        return Err(IdentifyError::CoreDump);
    }
    let build_id = crate::binary::build_id(file).ok_or(IdentifyError::NoBuildId)?;
    let arch = crate::binary::arch_of(file).map(|a| a.as_str());

    let mut sections: Vec<&'static str> = Vec::new();
    for section in file.sections() {
        let Ok(name) = section.name() else { continue };
        if let Some((_, short)) = SECTIONS.iter().find(|(n, _)| *n == name) {
            // A debug file keeps the headers of stripped sections as SHT_NOBITS: only
            // sections with bytes count.
            if section.file_range().is_some() && !sections.contains(short) {
                sections.push(short);
            }
        }
    }
    let text_has_bytes = file
        .section_by_name(".text")
        .is_some_and(|s| s.file_range().is_some());
    let kind = match file.kind() {
        ObjectKind::Relocatable => "relocatable",
        _ if !text_has_bytes && sections.contains(&"debug_info") => "debug",
        ObjectKind::Executable => "executable",
        // A PIE executable is ET_DYN too; it has an entry point and an interpreter.
        ObjectKind::Dynamic if file.section_by_name(".interp").is_some() => "executable",
        _ => "shared-object",
    };
    Ok(BinaryInfo {
        build_id: crate::dump::hex(&build_id),
        arch,
        kind,
        sections,
    })
}
