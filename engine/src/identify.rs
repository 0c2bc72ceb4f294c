//! What an uploaded file is: an ELF binary or debug file, a Mach-O binary, or a Breakpad
//! `.sym` file — its identifiers (build-id, debug-id), architecture, kind, and which
//! unwind and debug sections (or `.sym` records) it carries. Only headers are read for
//! binaries and one line-prefix pass for `.sym` text; tables are built later, by the jobs.
//!
//! Identifiers, as the dumps name modules:
//! - ELF: the GNU build-id (lower-case hex).
//! - Mach-O: `LC_UUID` as the build-id (as `postmortem walk` indexes it) and as the
//!   Breakpad debug-id (the UUID upper-case followed by age `0`), which minidumps of macOS
//!   processes record.
//! - PE image: the code id (`TimeDateStamp` + `SizeOfImage`) and, from its CodeView record,
//!   the debug-id of its PDB.
//! - PDB: the debug-id (GUID + age), which the image's CodeView record and a minidump's
//!   module record give.
//! - `.sym`: the debug-id of its `MODULE` line; for a Linux module also the build-id that
//!   `dump_syms` writes as `INFO CODE_ID`, kept only when the debug-id derives from it.

use object::{Object, ObjectKind, ObjectSection};

use crate::breakpad::parse_module_line;
use crate::ids::breakpad_debug_id_from_build_id;

/// The `kind` of a Breakpad `.sym` upload.
pub const KIND_BREAKPAD: &str = "breakpad-sym";

/// Facts about one uploaded file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryInfo {
    /// `elf`, `macho`, `pe`, `pdb` or `breakpad`.
    pub format: &'static str,
    /// GNU build-id (ELF, Linux `.sym`) or LC_UUID (Mach-O), lower-case hex; `None` for a
    /// `.sym` of a module that has none (Windows, macOS).
    pub build_id: Option<String>,
    /// Breakpad debug-id, upper-case (GUID + age): `.sym`, ELF (from its build-id), Mach-O
    /// and PDB files, and PE images (their PDB's).
    pub debug_id: Option<String>,
    /// `x86_64`, `aarch64`, `x86`, `arm`, or `None` for another architecture.
    pub arch: Option<&'static str>,
    /// `executable`, `shared-object`, `debug` (a separate debug file), `relocatable` or
    /// `breakpad-sym`.
    pub kind: &'static str,
    /// A Windows image's code id (`TimeDateStamp` + `SizeOfImage`, upper-case), which a
    /// minidump names its module by, with the module's file name; for a Windows `.sym`
    /// file, that of the image it describes (its `INFO CODE_ID` record).
    pub code_id: Option<String>,
    /// For a Windows `.sym` file, the name of the image it describes, as its
    /// `INFO CODE_ID` record gives it (`app.exe`): with `code_id`, how a module the dump
    /// names without a debug id (no CodeView record) finds it.
    pub code_file: Option<String>,
    /// The unwind/debug/symbol sections present, by their report names (`eh_frame`,
    /// `debug_frame`, `sframe`, `compact_unwind`, `debug_info`, `debug_line`, `symtab`,
    /// `dynsym`, …); for a `.sym` file the records present (`stack_cfi`, `stack_win`,
    /// `func`, `line`, `inline`, `public`).
    pub sections: Vec<&'static str>,
}

impl BinaryInfo {
    /// The Windows image a minidump names this file's module by: its file name and code
    /// id. An image is named as it was sent (`sent_name`), a `.sym` file by the image its
    /// `INFO CODE_ID` record names.
    pub fn image<'a>(&'a self, sent_name: Option<&'a str>) -> Option<(&'a str, &'a str)> {
        let name = if self.kind == KIND_BREAKPAD {
            self.code_file.as_deref()
        } else {
            sent_name
        };
        name.zip(self.code_id.as_deref())
    }
}

/// Why an upload is not a file we can index.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentifyError {
    #[error("not an ELF file, a Mach-O file, a Windows PE image or PDB, or a Breakpad .sym file")]
    NotABinary,
    #[error("the PDB file could not be read: {0}")]
    MalformedPdb(String),
    #[error("the PE file could not be read: {0}")]
    MalformedPe(String),
    #[error("the ELF file could not be read: {0}")]
    Malformed(String),
    #[error("the Mach-O file could not be read: {0}")]
    MalformedMachO(String),
    #[error("a universal (fat) Mach-O holds several architectures: each slice is identified on its own (uploads and --symbols take it apart)")]
    FatMachO,
    #[error("this is a core dump, not a binary: upload it to /api/v1/crashes")]
    CoreDump,
    #[error("the file has no GNU build-id note, so no crash can be matched to it (link with -Wl,--build-id)")]
    NoBuildId,
    #[error("the Mach-O file has no LC_UUID, so no crash can be matched to it (do not link with -no_uuid)")]
    NoUuid,
    #[error("not a Breakpad .sym file: {0}")]
    MalformedSym(String),
}

impl IdentifyError {
    /// A stable kebab-case name.
    pub fn code(&self) -> &'static str {
        match self {
            IdentifyError::NotABinary => "not-a-binary",
            IdentifyError::Malformed(_)
            | IdentifyError::MalformedMachO(_)
            | IdentifyError::MalformedPe(_)
            | IdentifyError::MalformedPdb(_) => "malformed-binary",
            IdentifyError::FatMachO => "universal-macho",
            IdentifyError::CoreDump => "core-dump-as-binary",
            IdentifyError::NoBuildId | IdentifyError::NoUuid => "no-build-id",
            IdentifyError::MalformedSym(_) => "malformed-sym",
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

const MACHO_SECTIONS: &[(&str, &str)] = &[
    ("__eh_frame", "eh_frame"),
    ("__unwind_info", "compact_unwind"),
    ("__debug_frame", "debug_frame"),
    ("__debug_info", "debug_info"),
    ("__debug_line", "debug_line"),
];

/// Universal (fat) Mach-O magics.
const FAT_MAGICS: &[[u8; 4]] = &[[0xca, 0xfe, 0xba, 0xbe], [0xca, 0xfe, 0xba, 0xbf]];

/// Identifies an uploaded file from its headers (binaries) or its records (`.sym`).
pub fn identify(bytes: &[u8]) -> Result<BinaryInfo, IdentifyError> {
    let magic: Option<[u8; 4]> = bytes.get(..4).and_then(|m| m.try_into().ok());
    match magic {
        Some(m) if &m == b"\x7fELF" => identify_elf(bytes),
        Some(m) if crate::macho_fat::MACHO_MAGICS.contains(&m) => identify_macho(bytes),
        Some(m) if FAT_MAGICS.contains(&m) => Err(IdentifyError::FatMachO),
        Some(m) if m.starts_with(b"MZ") => identify_pe(bytes),
        _ if bytes.starts_with(b"MODULE ") => identify_sym(bytes),
        _ if crate::symbols::builders::pdb::is_pdb(bytes) => {
            identify_pdb(std::io::Cursor::new(bytes))
        }
        _ => Err(IdentifyError::NotABinary),
    }
}

/// A PDB's debug id and architecture, read from `source` (only the streams that hold them).
fn identify_pdb<R>(source: R) -> Result<BinaryInfo, IdentifyError>
where
    R: std::io::Read + std::io::Seek + std::fmt::Debug + Send,
{
    let id =
        crate::symbols::builders::pdb::identity(source).map_err(IdentifyError::MalformedPdb)?;
    Ok(BinaryInfo {
        format: "pdb",
        build_id: None,
        debug_id: Some(id.debug_id),
        arch: id.arch.map(|a| a.as_str()),
        kind: "debug",
        code_id: None,
        code_file: None,
        sections: vec!["pdb"],
    })
}

/// A reader with the `Debug` the PDB reader asks of its source.
struct Opaque<F>(F);

impl<F> std::fmt::Debug for Opaque<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("upload")
    }
}

impl<F: std::io::Read> std::io::Read for Opaque<F> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl<F: std::io::Seek> std::io::Seek for Opaque<F> {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        self.0.seek(pos)
    }
}

fn identify_elf(bytes: &[u8]) -> Result<BinaryInfo, IdentifyError> {
    let file = object::File::parse(bytes).map_err(|e| IdentifyError::Malformed(e.to_string()))?;
    describe(&file)
}

/// How much of a file that is not ELF is read to tell whether it is a format at all.
const SNIFF_BYTES: usize = 64 << 10;

/// Identifies an uploaded binary read from `file` (any seekable reader: the caller opens
/// it; the engine does no file I/O of its own). An ELF file or a PE image is read through a cache of
/// the ranges the parser asks for (headers, section table, notes), never whole, so
/// memory stays small whatever the file's size. Another file is first judged from its
/// start, and read whole only when that start is a format [`identify`] knows.
pub fn identify_file<F: std::io::Read + std::io::Seek + Send>(
    file: F,
) -> Result<BinaryInfo, IdentifyError> {
    use object::ReadRef;
    use std::io::Read;

    let cache = object::ReadCache::new(file);
    let data = &cache;
    if data.read_bytes_at(0, 4).ok() == Some(b"\x7fELF".as_slice()) {
        let parsed =
            object::File::parse(data).map_err(|e| IdentifyError::Malformed(e.to_string()))?;
        return describe(&parsed);
    }
    // a PE image too: only its headers, debug directory and export table are read
    if data.read_bytes_at(0, 2).ok() == Some(b"MZ".as_slice()) {
        let parsed =
            object::File::parse(data).map_err(|e| IdentifyError::MalformedPe(e.to_string()))?;
        return describe_pe(&parsed);
    }
    let io = |e: std::io::Error| IdentifyError::Malformed(format!("reading the upload: {e}"));
    let is_pdb = data
        .read_bytes_at(0, crate::symbols::builders::pdb::MAGIC.len() as u64)
        .is_ok_and(crate::symbols::builders::pdb::is_pdb);
    let mut reader = cache.into_inner();
    reader.rewind().map_err(io)?;
    // a PDB: only its directory and the streams that identify it are read
    if is_pdb {
        return identify_pdb(Opaque(reader));
    }
    let mut start = Vec::with_capacity(SNIFF_BYTES);
    reader
        .by_ref()
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut start)
        .map_err(io)?;
    let magic: Option<[u8; 4]> = start.get(..4).and_then(|m| m.try_into().ok());
    if magic.is_some_and(|m| crate::macho_fat::MACHO_MAGICS.contains(&m)) {
        // a Mach-O file: only its header and load commands are read
        return identify_macho(&object::ReadCache::new(&mut reader));
    }
    if !start.starts_with(b"MODULE ") || start.len() < SNIFF_BYTES {
        return identify(&start);
    }
    // a `.sym` file: named by its first lines, which the start holds; its records are
    // listed by streaming the rest through a buffer of one chunk
    let mut info = sym_header(&start)?;
    let mut kinds = RecordKinds::default();
    kinds.feed(&start);
    let mut chunk = start;
    loop {
        chunk.clear();
        let n = reader
            .by_ref()
            .take(SNIFF_BYTES as u64)
            .read_to_end(&mut chunk)
            .map_err(io)?;
        if n == 0 {
            break;
        }
        kinds.feed(&chunk);
    }
    info.sections = kinds.finish();
    Ok(info)
}

/// The facts `identify` reports, from a parsed object file.
fn describe<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Result<BinaryInfo, IdentifyError> {
    if file.kind() == ObjectKind::Core {
        return Err(IdentifyError::CoreDump);
    }
    let build_id = match file.build_id() {
        Ok(Some(id)) if !id.is_empty() => id.to_vec(),
        _ => return Err(IdentifyError::NoBuildId),
    };
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
        format: "elf",
        build_id: Some(crate::ids::hex(&build_id)),
        // Breakpad's id of the build (its build-id's first 16 bytes as a GUID), which
        // dumps naming a Linux module by debug id alone give (a microdump's module lines)
        debug_id: Some(breakpad_debug_id_from_build_id(&build_id)),
        arch,
        kind,
        code_id: None,
        code_file: None,
        sections,
    })
}

/// Largest Mach-O load command table read to identify a file: real ones are tens of KiB;
/// the header's `sizeofcmds` is a 32-bit count the file chooses.
const MAX_MACHO_COMMANDS: u32 = 16 << 20;

/// A Mach-O file from its header and load commands only (`LC_UUID`, the segments'
/// section headers, `LC_SYMTAB`'s count): its symbol table and sections are never read,
/// so identifying it reads at most [`MAX_MACHO_COMMANDS`] bytes past its header.
fn identify_macho<'data, R: object::ReadRef<'data>>(data: R) -> Result<BinaryInfo, IdentifyError> {
    use object::macho::{MachHeader32, MachHeader64};
    use object::Endianness;
    let magic = data
        .read_bytes_at(0, 4)
        .map_err(|()| IdentifyError::MalformedMachO("shorter than its magic".into()))?;
    if magic == [0xcf, 0xfa, 0xed, 0xfe] || magic == [0xfe, 0xed, 0xfa, 0xcf] {
        macho_facts::<MachHeader64<Endianness>, R>(data)
    } else {
        macho_facts::<MachHeader32<Endianness>, R>(data)
    }
}

/// What [`identify_macho`] learns from the load commands of a Mach-O file of header type
/// `Mach`.
fn macho_facts<'data, Mach, R>(data: R) -> Result<BinaryInfo, IdentifyError>
where
    Mach: object::read::macho::MachHeader,
    R: object::ReadRef<'data>,
{
    use object::macho;
    use object::read::macho::{Section as _, Segment as _};
    let bad = |e: object::Error| IdentifyError::MalformedMachO(e.to_string());
    let header = Mach::parse(data, 0).map_err(bad)?;
    let endian = header.endian().map_err(bad)?;
    let size = header.sizeofcmds(endian);
    if size > MAX_MACHO_COMMANDS {
        return Err(IdentifyError::MalformedMachO(format!(
            "{size} bytes of load commands (at most {MAX_MACHO_COMMANDS})"
        )));
    }
    let filetype = header.filetype(endian);
    if filetype == macho::MH_CORE {
        return Err(IdentifyError::CoreDump);
    }
    let mut commands = header.load_commands(endian, data, 0).map_err(bad)?;
    let (mut uuid, mut symtab, mut text_has_bytes) = (None, false, false);
    let mut sections: Vec<&'static str> = Vec::new();
    while let Some(command) = commands.next().map_err(bad)? {
        if let Some(u) = command.uuid().map_err(bad)? {
            uuid.get_or_insert(u.uuid);
        } else if let Some(st) = command.symtab().map_err(bad)? {
            symtab |= st.nsyms.get(endian) > 0;
        } else if let Some((segment, section_data)) =
            Mach::Segment::from_command(command).map_err(bad)?
        {
            for section in segment.sections(endian, section_data).map_err(bad)? {
                // zero-fill sections (and a dSYM's bss) have no bytes in the file, nor do
                // a dSYM's code sections: their headers are kept with offset 0
                let has_bytes = section.file_size(endian).is_some() && section.offset(endian) != 0;
                let name = section.name();
                text_has_bytes |= has_bytes && name == b"__text";
                let short = MACHO_SECTIONS.iter().find(|(n, _)| n.as_bytes() == name);
                if let (true, Some((_, short))) = (has_bytes, short) {
                    if !sections.contains(short) {
                        sections.push(short);
                    }
                }
            }
        }
    }
    let Some(uuid) = uuid else {
        return Err(IdentifyError::NoUuid);
    };
    if symtab {
        sections.push("symtab");
    }
    let arch = match header.cputype(endian) {
        macho::CPU_TYPE_X86_64 => Some(crate::dump::Arch::X86_64),
        macho::CPU_TYPE_ARM64 => Some(crate::dump::Arch::Aarch64),
        macho::CPU_TYPE_X86 => Some(crate::dump::Arch::X86),
        macho::CPU_TYPE_ARM => Some(crate::dump::Arch::Arm),
        _ => None,
    };
    let kind = match filetype {
        macho::MH_OBJECT => "relocatable",
        macho::MH_DSYM => "debug",
        // A dSYM's sections keep their headers without bytes, like an ELF debug file.
        _ if !text_has_bytes && sections.contains(&"debug_info") => "debug",
        macho::MH_EXECUTE => "executable",
        _ => "shared-object",
    };
    let mut debug_id = crate::ids::hex(&uuid).to_ascii_uppercase();
    debug_id.push('0');
    Ok(BinaryInfo {
        format: "macho",
        build_id: Some(crate::ids::hex(&uuid)),
        debug_id: Some(debug_id),
        arch: arch.map(|a| a.as_str()),
        kind,
        code_id: None,
        code_file: None,
        sections,
    })
}

/// PE sections by their report names (mingw-w64 keeps DWARF in sections of these names).
const PE_SECTIONS: &[(&str, &str)] = &[
    (".pdata", "pdata"),
    (".debug_frame", "debug_frame"),
    (".debug_info", "debug_info"),
    (".debug_line", "debug_line"),
];

/// A Windows image (`.exe`, `.dll`): named by its code id, and by the debug id of its
/// CodeView record (the PDB's GUID and age) where it has one.
fn identify_pe(bytes: &[u8]) -> Result<BinaryInfo, IdentifyError> {
    let file = object::File::parse(bytes).map_err(|e| IdentifyError::MalformedPe(e.to_string()))?;
    describe_pe(&file)
}

/// The facts `identify` reports of a parsed PE image.
fn describe_pe<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Result<BinaryInfo, IdentifyError> {
    let code_id = crate::binary::pe_code_id(file)
        .ok_or_else(|| IdentifyError::MalformedPe("not a PE image".into()))?;
    let debug_id = match file.pdb_info() {
        Ok(Some(cv)) => Some(crate::ids::pdb_debug_id(cv.guid(), cv.age())),
        _ => None,
    };
    let arch = crate::binary::arch_of(file).map(|a| a.as_str());
    let mut sections: Vec<&'static str> = Vec::new();
    for section in file.sections() {
        let Ok(name) = section.name() else { continue };
        if let Some((_, short)) = PE_SECTIONS.iter().find(|(n, _)| *n == name) {
            if !sections.contains(short) {
                sections.push(short);
            }
        }
    }
    if file.symbols().next().is_some() {
        sections.push("symtab");
    }
    if file.exports().is_ok_and(|mut e| e.next().is_some()) {
        sections.push("exports");
    }
    // object reads IMAGE_FILE_DLL as a dynamic object
    let dll = file.kind() == ObjectKind::Dynamic;
    Ok(BinaryInfo {
        format: "pe",
        build_id: None,
        debug_id,
        arch,
        kind: if dll { "shared-object" } else { "executable" },
        code_id: Some(code_id),
        code_file: None,
        sections,
    })
}

fn identify_sym(bytes: &[u8]) -> Result<BinaryInfo, IdentifyError> {
    let mut info = sym_header(bytes)?;
    let mut kinds = RecordKinds::default();
    kinds.feed(bytes);
    info.sections = kinds.finish();
    Ok(info)
}

/// A `.sym` file's identity from its first lines (`MODULE`, `INFO CODE_ID`), which
/// `bytes` (its start) holds; `sections` is left empty for [`RecordKinds`] to fill.
fn sym_header(bytes: &[u8]) -> Result<BinaryInfo, IdentifyError> {
    let module = parse_module_line(bytes).ok_or_else(|| {
        IdentifyError::MalformedSym(
            "the first line must be `MODULE <os> <arch> <debug-id> <name>`".into(),
        )
    })?;
    let arch = crate::breakpad::unwind::breakpad_arch(&module.arch).map(|a| a.as_str());
    let code_line = crate::breakpad::parse_code_id_line(bytes);
    let code_id = code_line.as_ref().map(|(id, _)| id.to_ascii_lowercase());
    // A Windows module's: the image's code id and name, as dump_syms writes them for an
    // `.exe` or `.dll` (both needed: a minidump names the module by the two)
    let (image_code_id, code_file) = match code_line {
        Some((id, Some(file))) if module.os.eq_ignore_ascii_case("windows") => {
            let file = file.rsplit(['/', '\\']).next().unwrap_or(&file).to_owned();
            (Some(crate::ids::normalize_code_id(&id)), Some(file))
        }
        _ => (None, None),
    };
    // A Linux module's code id is its full build-id; the debug-id is derived from its
    // first 16 bytes. Kept only when the two agree, so a `.sym` cannot claim a build-id
    // its debug-id does not come from.
    let build_id = code_id
        .filter(|_| module.os.eq_ignore_ascii_case("linux"))
        .and_then(|id| crate::ids::unhex(&id).map(|b| (id, b)))
        .filter(|(_, b)| breakpad_debug_id_from_build_id(b) == module.debug_id)
        .map(|(id, _)| id);
    Ok(BinaryInfo {
        format: "breakpad",
        build_id,
        debug_id: Some(module.debug_id),
        arch,
        kind: KIND_BREAKPAD,
        code_id: image_code_id,
        code_file,
        sections: Vec::new(),
    })
}

/// Longest record prefix a `.sym` line is classified by (`STACK CFI `).
const RECORD_HEAD: usize = 10;

/// The kinds of record a `.sym` file holds (`stack_cfi`, `func`, `line`, …), fed in
/// pieces of any size: only the first [`RECORD_HEAD`] bytes of the current line are kept,
/// so a file of any size, or a line of any length, is listed in constant memory.
#[derive(Debug, Default)]
struct RecordKinds {
    head: [u8; RECORD_HEAD],
    len: usize,
    found: Vec<&'static str>,
}

impl RecordKinds {
    /// The next bytes of the file.
    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let end = memchr::memchr(b'\n', bytes);
            let line = end.map_or(bytes, |e| &bytes[..e]);
            let take = line.len().min(RECORD_HEAD - self.len);
            self.head[self.len..self.len + take].copy_from_slice(&line[..take]);
            self.len += take;
            match end {
                Some(e) => {
                    self.end_line();
                    bytes = &bytes[e + 1..];
                }
                None => break,
            }
        }
    }

    /// Classifies the line whose start is held and starts the next one.
    fn end_line(&mut self) {
        let line = &self.head[..self.len];
        self.len = 0;
        let record = if line.starts_with(b"STACK CFI ") {
            "stack_cfi"
        } else if line.starts_with(b"STACK WIN ") {
            "stack_win"
        } else if line.starts_with(b"FUNC ") {
            "func"
        } else if line.starts_with(b"INLINE ") {
            "inline"
        } else if line.starts_with(b"PUBLIC ") {
            "public"
        } else if line.starts_with(b"FILE ") {
            return;
        } else if line.first().is_some_and(u8::is_ascii_hexdigit) {
            "line"
        } else {
            return;
        };
        if !self.found.contains(&record) {
            self.found.push(record);
        }
    }

    /// The kinds found, in the order first met (a last line without `\n` included).
    fn finish(mut self) -> Vec<&'static str> {
        if self.len > 0 {
            self.end_line();
        }
        self.found
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    const LINUX_SYM: &str = "MODULE Linux x86_64 0F41C0EF6A4C0BD9E5EB1AAD58B4B5AA0 prog\n\
INFO CODE_ID EFC0410F4C6AD90BE5EB1AAD58B4B5AA8C16F73C\n\
FILE 0 /src/prog.c\n\
FUNC 1130 20 0 main\n\
1130 10 3 0\n\
PUBLIC 1000 0 _init\n\
STACK CFI INIT 1130 20 .cfa: $rsp 8 + .ra: .cfa -8 + ^\n";

    #[test]
    fn linux_sym_has_debug_id_and_the_build_id_of_its_code_id() {
        let info = identify(LINUX_SYM.as_bytes()).unwrap();
        assert_eq!(info.format, "breakpad");
        assert_eq!(info.kind, KIND_BREAKPAD);
        assert_eq!(info.arch, Some("x86_64"));
        assert_eq!(
            info.debug_id.as_deref(),
            Some("0F41C0EF6A4C0BD9E5EB1AAD58B4B5AA0")
        );
        assert_eq!(
            info.build_id.as_deref(),
            Some("efc0410f4c6ad90be5eb1aad58b4b5aa8c16f73c")
        );
        assert_eq!(info.sections, ["func", "line", "public", "stack_cfi"]);
    }

    #[test]
    fn a_code_id_the_debug_id_does_not_derive_from_is_no_build_id() {
        let text = LINUX_SYM.replace("CODE_ID EF", "CODE_ID 00");
        let info = identify(text.as_bytes()).unwrap();
        assert_eq!(info.build_id, None);
        assert!(info.debug_id.is_some());
        // A Windows code id (timestamp + size) is no build-id either.
        let win = "MODULE windows x86_64 3A2B1C0D4E5F60718293A4B5C6D7E8F91 app.pdb\n\
                   INFO CODE_ID 5F3A2B1C1000 app.exe\n";
        let info = identify(win.as_bytes()).unwrap();
        assert_eq!(info.build_id, None);
        assert_eq!(
            info.debug_id.as_deref(),
            Some("3A2B1C0D4E5F60718293A4B5C6D7E8F91")
        );
        // it names the image it describes, as a minidump names the module
        assert_eq!(info.code_id.as_deref(), Some("5F3A2B1C1000"));
        assert_eq!(info.code_file.as_deref(), Some("app.exe"));
        let lower = win.replace("5F3A2B1C1000", "5f3a2b1c1000");
        assert_eq!(
            identify(lower.as_bytes()).unwrap().code_id.as_deref(),
            Some("5F3A2B1C1000")
        );
        // a Linux .sym's code id is its build-id, not an image's
        let info = identify(LINUX_SYM.as_bytes()).unwrap();
        assert_eq!((info.code_id, info.code_file), (None, None));
        // a Windows .sym without the image's name cannot be matched to a module
        let nameless = win.replace(" app.exe", "");
        let info = identify(nameless.as_bytes()).unwrap();
        assert_eq!((info.code_id, info.code_file), (None, None));
    }

    fn run(dir: &std::path::Path, tool: &str, args: &[&str]) -> String {
        let out = std::process::Command::new(tool)
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|e| panic!("run {tool} (see test.sh): {e}"));
        assert!(
            out.status.success(),
            "{tool} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A Mach-O executable linked at test time (clang + ld64.lld): its LC_UUID, as
    /// llvm-objdump prints it, is its build-id and (upper-case, age 0) its debug-id; the
    /// engine builds its unwind table from `__unwind_info` and `__eh_frame` and its symbol
    /// table from the symtab, where `helper` is at the address llvm-nm gives.
    #[test]
    fn macho_is_identified_by_its_uuid_and_indexed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(
            dir.join("m.c"),
            "__attribute__((noinline)) int helper(int x) { return x * 3; }\n\
             int main(void) { return helper(2); }\n",
        )
        .unwrap();
        run(
            dir,
            "clang",
            &[
                "--target=x86_64-apple-macos11",
                "-fuse-ld=lld",
                "-nostdlib",
                "-Wl,-e,_main",
                "m.c",
                "-o",
                "m.macho",
            ],
        );
        let bytes = std::fs::read(dir.join("m.macho")).unwrap();
        let headers = run(
            dir,
            "llvm-objdump",
            &["--macho", "--private-headers", "m.macho"],
        );
        let uuid: String = headers
            .lines()
            .find_map(|l| l.trim().strip_prefix("uuid "))
            .unwrap()
            .replace('-', "");
        let info = identify(&bytes).unwrap();
        assert_eq!(info.format, "macho");
        assert_eq!(info.arch, Some("x86_64"));
        assert_eq!(info.kind, "executable");
        assert_eq!(info.build_id, Some(uuid.to_ascii_lowercase()));
        assert_eq!(
            info.debug_id,
            Some(format!("{}0", uuid.to_ascii_uppercase()))
        );
        for s in ["compact_unwind", "eh_frame", "symtab"] {
            assert!(info.sections.contains(&s), "{s}: {:?}", info.sections);
        }

        let input = crate::process::TableInput {
            name: "m.macho",
            bytes: &bytes,
        };
        let t = crate::process::build_tables(Some(input), &[]);
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        let unwind = crate::unwind::UnwindTable::open(t.whole_unwind().unwrap()).unwrap();
        let sources: Vec<&str> = unwind.sources().iter().map(|s| s.as_str()).collect();
        assert!(sources.contains(&"compact_unwind"), "{sources:?}");
        let nm = run(dir, "llvm-nm", &["m.macho"]);
        let helper = nm
            .lines()
            .find(|l| l.ends_with(" _helper"))
            .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
            .unwrap();
        let symbols = crate::symbols::SymbolTable::open(t.whole_symbols().unwrap()).unwrap();
        let mut frames = Vec::new();
        // Tables are keyed by offset from `__TEXT`'s address.
        let text = headers
            .lines()
            .skip_while(|l| !l.contains("segname __TEXT"))
            .find_map(|l| l.trim().strip_prefix("vmaddr "))
            .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
            .unwrap();
        symbols.lookup(helper - text + 1, &mut frames);
        let name = frames.last().and_then(|f| f.function).unwrap();
        assert!(name.trim_start_matches('_') == "helper", "{name}");
        assert!(unwind.find(helper - text + 1).is_some());
    }

    /// A reader that counts the bytes read through it.
    struct Counting<R> {
        inner: R,
        read: u64,
    }

    impl<R: std::io::Read> std::io::Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n as u64;
            Ok(n)
        }
    }

    impl<R: std::io::Seek> std::io::Seek for Counting<R> {
        fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
            self.inner.seek(pos)
        }
    }

    /// Issue 34, finding 1: a `.sym` file far larger than the identification prefix is
    /// named from its first lines and its records listed as it streams past, with the
    /// records met only past the prefix (and a last line without a newline) counted, as
    /// reading it whole (`identify`) lists them.
    #[test]
    fn large_sym_is_identified_streaming() {
        let mut text = LINUX_SYM.as_bytes().to_vec();
        while text.len() < 5 * SNIFF_BYTES {
            text.extend_from_slice(b"1130 10 3 0\n");
        }
        text.extend_from_slice(b"STACK WIN 4 1130 20 0 0 0 0 0 0 1 $eip");
        let whole = identify(&text).unwrap();
        let streamed = identify_file(std::io::Cursor::new(&text)).unwrap();
        assert_eq!(streamed, whole);
        assert!(streamed.sections.contains(&"stack_win"), "{streamed:?}");
        // fed one byte at a time, the same kinds
        let mut kinds = RecordKinds::default();
        for b in text.chunks(1) {
            kinds.feed(b);
        }
        assert_eq!(kinds.finish(), whole.sections);
    }

    /// The smallest 64-bit little-endian Mach-O executable header with these load commands.
    fn macho(commands: &[Vec<u8>], sizeofcmds: Option<u32>) -> Vec<u8> {
        let body: Vec<u8> = commands.concat();
        let mut b = Vec::new();
        for v in [0xfeed_facf_u32, 0x0100_0007, 3, 2, commands.len() as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&sizeofcmds.unwrap_or(body.len() as u32).to_le_bytes());
        b.extend_from_slice(&[0; 8]); // flags, reserved
        b.extend_from_slice(&body);
        b
    }

    /// Issue 34, finding 1: a Mach-O file is identified from its load commands: a symbol
    /// table that claims the rest of a large file is counted, never read, and a load command
    /// table larger than any real one is refused before it is read.
    #[test]
    fn macho_is_identified_from_its_load_commands_only() {
        let mut uuid = Vec::new();
        for v in [0x1b_u32, 24] {
            uuid.extend_from_slice(&v.to_le_bytes());
        }
        uuid.extend_from_slice(&[0xab; 16]);
        let mut symtab = Vec::new();
        // LC_SYMTAB: symoff 4096, nsyms: 16-byte entries up to the end of 64 MiB
        for v in [0x2_u32, 24, 4096, (64 << 20) / 16 - 256, 4096, 16] {
            symtab.extend_from_slice(&v.to_le_bytes());
        }
        let mut file = macho(&[uuid.clone(), symtab], None);
        file.resize(64 << 20, 0);
        let mut reader = Counting {
            inner: std::io::Cursor::new(&file),
            read: 0,
        };
        let info = identify_file(&mut reader).unwrap();
        assert_eq!(info.format, "macho");
        assert_eq!(
            info.build_id.as_deref(),
            Some("abababababababababababababababab")
        );
        assert_eq!(info.arch, Some("x86_64"));
        assert_eq!(info.sections, ["symtab"]);
        assert!(
            reader.read <= 2 * SNIFF_BYTES as u64,
            "read {} bytes",
            reader.read
        );
        // `sizeofcmds` of 4 GiB - 1: refused, not read
        let huge = macho(&[uuid], Some(u32::MAX));
        let got = identify_file(std::io::Cursor::new(&huge)).map_err(|e| e.code());
        assert_eq!(got, Err("malformed-binary"));
    }

    #[test]
    fn bad_sym_and_other_bytes_are_typed_errors() {
        assert_eq!(
            identify(b"MODULE Linux x86_64 not-hex prog\n").map_err(|e| e.code()),
            Err("malformed-sym")
        );
        assert_eq!(
            identify(b"MODULE\n").map_err(|e| e.code()),
            Err("not-a-binary")
        );
        assert_eq!(identify(b"").map_err(|e| e.code()), Err("not-a-binary"));
        assert_eq!(
            identify(&[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2]).map_err(|e| e.code()),
            Err("universal-macho")
        );
        assert_eq!(
            identify(&[0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0]).map_err(|e| e.code()),
            Err("malformed-binary")
        );
        assert_eq!(
            identify(b"\x7fELF\x02\x01").map_err(|e| e.code()),
            Err("malformed-binary")
        );
    }
}
