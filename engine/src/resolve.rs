//! Which files describe a module, decided once for every caller: `postmortem walk`,
//! `postmortem-walk` and the service's workers each implement [`FileSource`] for where
//! their files are (directories and the paths a dump records; uploaded files; later
//! remote symbol sources), and [`locate`] applies the one rule of which files win and
//! the one key their tables are cached under ([`TableKey`]).
//!
//! The rule, in order:
//! 1. A module the dump gives a build-id takes the files with that build-id (a binary and
//!    its separate debug files): verified.
//! 2. A module without one: a Windows module takes the PE image of its name and code id
//!    (`TimeDateStamp` + `SizeOfImage`) and the PDB of the debug id that the dump's
//!    CodeView record names (else the image's own record), verified; else a file matched by its path or
//!    name, if the source matches that way (a QEMU core names modules without
//!    build-ids): unverified.
//!    A Windows module with no debug id then takes the `.sym` file whose `INFO CODE_ID`
//!    names its image and code id (its key the image's: a `.sym` file of an image without
//!    a PDB has an all-zero debug id, shared by every such file).
//! 3. Else, by the module's Breakpad debug-id: the files of the binary whose debug-id it
//!    is (a Mach-O named by a minidump), else the PDB of that id (a Windows module whose
//!    image is not on hand), else the `.sym` file of that id. A binary's own tables win
//!    over any `.sym` file.
//!
//! The kernel's vdso is never looked up: its image is in the dump, and its tables come
//! from there (`process::tables`).
//!
//! The trait's methods return futures (a database or the network may answer them), but
//! the engine runs none: a synchronous caller drives them with any executor.

use std::fmt;
use std::future::Future;

use object::{Object, ObjectSection, SectionKind};

use crate::binary::FileBytes;
use crate::dump::{Arch, Module};
use crate::tables::{build_tables, on_demand_tables, CodeImage, ModuleTables, TableInput};
use crate::warning::Warning;

/// The key a module's built tables are cached and stored under, the same in every cache
/// (the CLI's per-run memo, the service's memory cache and database rows).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TableKey {
    /// The files of a GNU build-id (or Mach-O UUID), lower-case hex: stored as the hex.
    BuildId(String),
    /// The Breakpad `.sym` file of a debug-id (upper-case): stored as `breakpad:ID`, never
    /// equal to a build-id.
    Breakpad(String),
    /// A Windows module's PE file, by its name (lower-case) and code id (upper-case):
    /// `pe:NAME/CODE_ID`, the symbol-server layout's key.
    CodeId(String),
    /// A Windows module's PDB alone (its image is not on hand), by debug id (upper-case):
    /// `pdb:ID`.
    Pdb(String),
    /// A file matched by path or name for a module the dump gives no build-id: `path:P`.
    /// Never stored by the service (its modules are matched by id only).
    Path(String),
}

impl TableKey {
    /// The key of the Windows image named `name` (any case) with code id `code_id`.
    pub fn for_pe(name: &str, code_id: &str) -> TableKey {
        let name = name.rsplit(['/', '\\']).next().unwrap_or(name);
        TableKey::CodeId(format!(
            "{}/{}",
            name.to_ascii_lowercase(),
            crate::ids::normalize_code_id(code_id)
        ))
    }
}

/// The key a module's lookups and fetched tables are kept under, the one rule the CLI's
/// walk and the service's jobs share: its build-id (lower-case hex), else its debug-id
/// (upper-case, so never equal to a build-id), else a Windows module's image key
/// (`pe:NAME/CODE_ID`); `None` for a module with no id at all.
pub fn lookup_key(m: &Module) -> Option<String> {
    m.build_id_hex()
        .or_else(|| m.breakpad_debug_id())
        .or_else(|| Some(TableKey::for_pe(&m.name, &m.pe_code_id()?).to_string()))
}

impl fmt::Display for TableKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableKey::BuildId(id) => f.write_str(id),
            TableKey::Breakpad(id) => write!(f, "breakpad:{id}"),
            TableKey::CodeId(id) => write!(f, "pe:{id}"),
            TableKey::Pdb(id) => write!(f, "pdb:{id}"),
            TableKey::Path(p) => write!(f, "path:{p}"),
        }
    }
}

/// One file a source holds: the name the report gives it (its last path component, or
/// the name it was uploaded under) and how the source reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile<H> {
    pub name: String,
    pub handle: H,
}

/// The files [`locate`] chose for a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found<H> {
    /// Binaries and debug files of one build, in the source's order; which one is the
    /// binary is told from their bytes ([`build_from_files`]).
    Files(Vec<SourceFile<H>>),
    /// A Breakpad `.sym` file.
    Breakpad(SourceFile<H>),
}

/// A module's files and the key their tables go under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located<H> {
    pub key: TableKey,
    /// Whether the files are the dump's build (false for a match by path or name).
    pub verified: bool,
    pub found: Found<H>,
}

/// Where a caller's files are. Each method answers one question of [`locate`]'s rule;
/// the ones a source cannot answer keep their defaults (nothing found).
pub trait FileSource: Sync {
    /// How this source reads a file it found (a path, a blob's id, …).
    type Handle: Send;
    /// Why a lookup failed (not "not found", which is an empty answer).
    type Error: Send;

    /// The binaries and debug files with build-id `build_id` (lower-case hex); `module`
    /// is the dump's module being looked up (its recorded path may hold one).
    fn with_build_id(
        &self,
        module: &Module,
        build_id: &str,
    ) -> impl Future<Output = Result<Vec<SourceFile<Self::Handle>>, Self::Error>> + Send;

    /// A Windows module's PE files: the image named `name` whose code id
    /// ([`crate::binary::pe_code_id`]) is `code_id` (upper-case), and with it the PDB
    /// whose debug id the module's CodeView record names (else the image's own), if the
    /// source has both.
    fn with_code_id(
        &self,
        _module: &Module,
        _name: &str,
        _code_id: &str,
    ) -> impl Future<Output = Result<Vec<SourceFile<Self::Handle>>, Self::Error>> + Send {
        async { Ok(Vec::new()) }
    }

    /// The Breakpad `.sym` file of a Windows module the dump names without a debug id:
    /// the one whose `INFO CODE_ID` record gives the image named `name` (lower-case) and
    /// code id `code_id` (upper-case), as dump_syms writes for an `.exe` or `.dll`.
    fn breakpad_by_code_id(
        &self,
        _module: &Module,
        _name: &str,
        _code_id: &str,
    ) -> impl Future<Output = Result<Option<SourceFile<Self::Handle>>, Self::Error>> + Send {
        async { Ok(None) }
    }

    /// The PDB whose debug id (GUID + age, upper-case) is `debug_id`.
    fn pdb(
        &self,
        _module: &Module,
        _debug_id: &str,
    ) -> impl Future<Output = Result<Vec<SourceFile<Self::Handle>>, Self::Error>> + Send {
        async { Ok(Vec::new()) }
    }

    /// For a module the dump names without a build-id: a file matched by its path or
    /// name (for `arch`), then the debug files of that file's build-id.
    fn by_path(
        &self,
        _module: &Module,
        _arch: Arch,
    ) -> impl Future<Output = Result<Vec<SourceFile<Self::Handle>>, Self::Error>> + Send {
        async { Ok(Vec::new()) }
    }

    /// The build-id (lower-case hex) of a binary whose Breakpad debug-id is `debug_id`
    /// (upper-case): a Mach-O file, which a minidump names by debug-id only.
    fn build_id_of_debug_id(
        &self,
        _debug_id: &str,
    ) -> impl Future<Output = Result<Option<String>, Self::Error>> + Send {
        async { Ok(None) }
    }

    /// The Breakpad `.sym` file of `module` whose `MODULE` line says `debug_id`
    /// (upper-case).
    fn breakpad(
        &self,
        module: &Module,
        debug_id: &str,
    ) -> impl Future<Output = Result<Option<SourceFile<Self::Handle>>, Self::Error>> + Send;
}

/// The files of `source` that describe `module` of a dump for `arch`, by the rule in the
/// module documentation; `None` when it has none (the report marks the module missing).
pub async fn locate<S: FileSource>(
    source: &S,
    module: &Module,
    arch: Arch,
) -> Result<Option<Located<S::Handle>>, S::Error> {
    if module.is_vdso() {
        return Ok(None);
    }
    let files = |key: TableKey, verified: bool, files: Vec<SourceFile<S::Handle>>| {
        (!files.is_empty()).then_some(Located {
            key,
            verified,
            found: Found::Files(files),
        })
    };
    match module.build_id_hex() {
        Some(id) => {
            let found = source.with_build_id(module, &id).await?;
            if let Some(l) = files(TableKey::BuildId(id), true, found) {
                return Ok(Some(l));
            }
        }
        None => {
            if let Some(code_id) = module.pe_code_id() {
                let name = module.name.to_ascii_lowercase();
                let found = source.with_code_id(module, &name, &code_id).await?;
                let key = TableKey::for_pe(&name, &code_id);
                if let Some(l) = files(key, true, found) {
                    return Ok(Some(l));
                }
            }
            // a build the debug id names (a microdump's ELF modules, by the debug id of
            // their build-id) is verified: before a file matched by path alone
            if let Some(debug_id) = module.breakpad_debug_id() {
                if let Some(id) = source.build_id_of_debug_id(&debug_id).await? {
                    let found = source.with_build_id(module, &id).await?;
                    if let Some(l) = files(TableKey::BuildId(id), true, found) {
                        return Ok(Some(l));
                    }
                }
            }
            let found = source.by_path(module, arch).await?;
            let path = module.path.as_deref().unwrap_or(&module.name);
            if let Some(l) = files(TableKey::Path(path.to_string()), false, found) {
                return Ok(Some(l));
            }
            // a Windows module without a CodeView record has no debug id to find its
            // .sym file by: the file's INFO CODE_ID names the image instead
            if let (Some(code_id), None) = (module.pe_code_id(), module.breakpad_debug_id()) {
                let name = module.name.to_ascii_lowercase();
                if let Some(sym) = source.breakpad_by_code_id(module, &name, &code_id).await? {
                    return Ok(Some(Located {
                        key: TableKey::for_pe(&name, &code_id),
                        verified: true,
                        found: Found::Breakpad(sym),
                    }));
                }
            }
        }
    }
    let Some(debug_id) = module.breakpad_debug_id() else {
        return Ok(None);
    };
    // (a module without a build-id was looked up by its debug id's build above)
    if module.build_id_hex().is_some() {
        if let Some(id) = source.build_id_of_debug_id(&debug_id).await? {
            let found = source.with_build_id(module, &id).await?;
            if let Some(l) = files(TableKey::BuildId(id), true, found) {
                return Ok(Some(l));
            }
        }
    }
    let pdb = source.pdb(module, &debug_id).await?;
    if let Some(l) = files(TableKey::Pdb(debug_id.clone()), true, pdb) {
        return Ok(Some(l));
    }
    Ok(source
        .breakpad(module, &debug_id)
        .await?
        .map(|sym| Located {
            key: TableKey::Breakpad(debug_id),
            verified: true,
            found: Found::Breakpad(sym),
        }))
}

/// Which of a build's files is its binary: the first whose code sections hold bytes (a
/// PDB never is).
pub fn binary_of<B: AsRef<[u8]>>(files: &[(String, B)]) -> Option<usize> {
    files
        .iter()
        .position(|(_, b)| !is_debug_only(b.as_ref()) && !is_pdb(b.as_ref()))
}

/// Whether a file is a PDB (a Windows image's debug file).
fn is_pdb(data: &[u8]) -> bool {
    crate::binary::is_pdb(data)
}

/// What a build's files (name, bytes) on hand give: a binary (code, unwind sections),
/// and DWARF or a PDB (names, lines, inlined frames). A source of last resort is asked for the
/// rest: a debuginfod server's `executable` and `debuginfo`.
pub fn on_hand<B: AsRef<[u8]>>(files: &[(String, B)]) -> (bool, bool) {
    let binary = binary_of(files).is_some();
    let dwarf = files
        .iter()
        .any(|(_, b)| has_dwarf(b.as_ref()) || is_pdb(b.as_ref()));
    (binary, dwarf)
}

/// Which of a build's files read (name, bytes), in the source's order, go into its tables:
/// the binary ([`binary_of`]), and the others that are debug files, carry DWARF or are PDBs.
fn roles<B: AsRef<[u8]>>(files: &[(String, B)]) -> (Option<usize>, Vec<usize>) {
    let binary = binary_of(files);
    let debug = files
        .iter()
        .enumerate()
        .filter(|&(i, (_, b))| {
            Some(i) != binary
                && (is_debug_only(b.as_ref()) || has_dwarf(b.as_ref()) || is_pdb(b.as_ref()))
        })
        .map(|(i, _)| i)
        .collect();
    (binary, debug)
}

/// Builds the tables of a build's files as read (name, bytes), in the source's order: the
/// binary ([`binary_of`]) gives unwind tables and symbols, the others that are debug
/// files or carry DWARF add theirs. The code image is left to the caller
/// ([`code_image_of`]), which may hold it already.
pub fn build_from_files<B: AsRef<[u8]>>(files: &[(String, B)], verified: bool) -> ModuleTables {
    let (binary, debug) = roles(files);
    let debug: Vec<TableInput<'_>> = debug
        .iter()
        .filter_map(|&i| files.get(i))
        .map(input)
        .collect();
    let main = binary.and_then(|i| files.get(i));
    let mut t = build_tables(main.map(input), &debug);
    t.verified = verified;
    t.warnings.extend(disagreements(files, binary));
    t
}

/// The tables of the same files for one walk ([`on_demand_tables`]): what a one-shot walk
/// uses instead of [`build_from_files`], with the same report.
pub fn on_demand_from_files(files: &[(String, FileBytes)], verified: bool) -> ModuleTables {
    let (binary, debug) = roles(files);
    let debug: Vec<(&str, &FileBytes)> = debug
        .iter()
        .filter_map(|&i| files.get(i))
        .map(named)
        .collect();
    let main = binary.and_then(|i| files.get(i)).map(named);
    let mut t = on_demand_tables(main, &debug);
    t.verified = verified;
    t.warnings.extend(disagreements(files, binary));
    t
}

/// The warning code of [`disagreements`].
pub const FILES_DISAGREE: &str = "module-files-disagree";

/// Where a build's ELF files disagree with its binary (`binary`, an index of `files`): a
/// file whose build-id is another, or whose loaded sections (address and size, which a
/// debug file's section headers keep where the bytes were stripped) are not the
/// binary's. Files of one build always agree; files that do not are of another build
/// under the same id (a rebuild that is not reproducible, or a doctored upload), and the
/// names and lines they give may not be the module's. One `module-files-disagree`
/// warning (code, message) per such file, naming both files and the first section that
/// differs.
pub fn disagreements<B: AsRef<[u8]>>(files: &[(String, B)], binary: Option<usize>) -> Vec<Warning> {
    let Some((bname, bbytes)) = binary.and_then(|i| files.get(i)) else {
        return Vec::new();
    };
    let Ok(bin) = object::File::parse(bbytes.as_ref()) else {
        return Vec::new();
    };
    if bin.format() != object::BinaryFormat::Elf {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, (name, bytes)) in files.iter().enumerate() {
        if Some(i) == binary {
            continue;
        }
        let Ok(other) = object::File::parse(bytes.as_ref()) else {
            continue;
        };
        if other.format() != object::BinaryFormat::Elf {
            continue;
        }
        if let Some((theirs, ours)) = disagreement(&bin, &other) {
            out.push(Warning::new(
                FILES_DISAGREE,
                format!(
                    "the module's files disagree: {name} has {theirs} where the binary {bname} \
                     has {ours}; they are not of one build, and what {name} gives may not \
                     describe the module"
                ),
            ));
        }
    }
    out
}

/// How `other` differs from `bin` (what `other` has, what `bin` has): its build-id, else
/// the first loaded section both name whose address or size is not the same.
fn disagreement(bin: &object::File<'_>, other: &object::File<'_>) -> Option<(String, String)> {
    let hex = |id: &[u8]| format!("build-id {}", crate::ids::hex(id));
    if let (Ok(Some(a)), Ok(Some(b))) = (bin.build_id(), other.build_id()) {
        if a != b {
            return Some((hex(b), hex(a)));
        }
    }
    for section in bin.sections() {
        let Ok(name) = section.name() else { continue };
        if section.address() == 0 || name.is_empty() {
            continue;
        }
        let Some(theirs) = other.section_by_name(name) else {
            continue;
        };
        let at = |address: u64, size: u64| format!("{name} at {address:#x}, {size:#x} bytes");
        let (ours, theirs) = (
            at(section.address(), section.size()),
            at(theirs.address(), theirs.size()),
        );
        if ours != theirs {
            return Some((theirs, ours));
        }
    }
    None
}

fn named((name, bytes): &(String, FileBytes)) -> (&str, &FileBytes) {
    (name.as_str(), bytes)
}

/// The code bytes of a build's binary ([`binary_of`]), for the stack scan's call-site
/// check.
pub fn code_image_of(files: &[(String, FileBytes)]) -> Option<CodeImage> {
    let (_, bytes) = files.get(binary_of(files)?)?;
    CodeImage::new(bytes.clone())
}

/// One read file as a build input.
fn input<B: AsRef<[u8]>>((name, bytes): &(String, B)) -> TableInput<'_> {
    TableInput {
        name: name.as_str(),
        bytes: bytes.as_ref(),
    }
}

/// Whether a file is a separate debug file (its code sections hold no bytes).
fn is_debug_only(data: &[u8]) -> bool {
    let Ok(obj) = object::File::parse(data) else {
        return false;
    };
    match obj.section_by_name(".text") {
        Some(s) => s.kind() == SectionKind::UninitializedData || s.file_range().is_none(),
        None => obj.section_by_name(".debug_info").is_some(),
    }
}

/// Whether a file carries DWARF.
fn has_dwarf(data: &[u8]) -> bool {
    object::File::parse(data)
        .ok()
        .and_then(|o| o.section_by_name(".debug_info").map(|s| s.size() > 0))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::task::{Context, Poll, Waker};

    /// Drives a future that never waits (the test source answers at once).
    fn now<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the test source never waits"),
        }
    }

    /// Files by build-id, Mach-O build-ids by debug-id, `.sym` files by debug-id, and
    /// files by module name (for modules without a build-id).
    #[derive(Default)]
    struct Mem {
        by_build_id: HashMap<String, Vec<&'static str>>,
        macho: HashMap<String, String>,
        sym: HashMap<String, &'static str>,
        by_name: HashMap<String, &'static str>,
    }

    fn named(name: &str) -> SourceFile<()> {
        SourceFile {
            name: name.to_string(),
            handle: (),
        }
    }

    impl FileSource for Mem {
        type Handle = ();
        type Error = ();
        async fn with_build_id(&self, _: &Module, id: &str) -> Result<Vec<SourceFile<()>>, ()> {
            Ok(self
                .by_build_id
                .get(id)
                .into_iter()
                .flatten()
                .map(|n| named(n))
                .collect())
        }
        async fn by_path(&self, m: &Module, _: Arch) -> Result<Vec<SourceFile<()>>, ()> {
            Ok(self
                .by_name
                .get(&m.name)
                .map(|n| named(n))
                .into_iter()
                .collect())
        }
        async fn build_id_of_debug_id(&self, id: &str) -> Result<Option<String>, ()> {
            Ok(self.macho.get(id).cloned())
        }
        async fn breakpad(&self, _: &Module, id: &str) -> Result<Option<SourceFile<()>>, ()> {
            Ok(self.sym.get(id).map(|n| named(n)))
        }
    }

    fn module(name: &str, build_id: Option<&[u8]>, debug_id: Option<&str>) -> Module {
        Module {
            name: name.into(),
            path: Some(format!("/lib/{name}")),
            build_id: build_id.map(<[u8]>::to_vec),
            debug_id: debug_id.map(str::to_string),
            ..Module::default()
        }
    }

    fn found(m: &Module, source: &Mem) -> Option<(String, bool, Vec<String>)> {
        let l = now(locate(source, m, Arch::X86_64)).ok()??;
        let names = match l.found {
            Found::Files(f) => f.into_iter().map(|f| f.name).collect(),
            Found::Breakpad(f) => vec![format!("sym {}", f.name)],
        };
        Some((l.key.to_string(), l.verified, names))
    }

    #[test]
    fn a_build_ids_files_win_over_a_sym_file_of_its_debug_id() {
        let m = module("a.so", Some(&[0xab, 0xcd]), None);
        let debug_id = m.breakpad_debug_id().expect("derived from the build-id");
        let mut s = Mem::default();
        s.sym.insert(debug_id.clone(), "a.so.sym");
        assert_eq!(
            found(&m, &s),
            Some((
                format!("breakpad:{debug_id}"),
                true,
                vec!["sym a.so.sym".into()]
            ))
        );
        s.by_build_id
            .insert("abcd".into(), vec!["a.so", "a.so.debug"]);
        assert_eq!(
            found(&m, &s),
            Some((
                "abcd".into(),
                true,
                vec!["a.so".into(), "a.so.debug".into()]
            ))
        );
    }

    #[test]
    fn a_module_without_a_build_id_is_matched_by_path_unverified() {
        let m = module("b.so", None, None);
        let mut s = Mem::default();
        assert_eq!(found(&m, &s), None);
        s.by_name.insert("b.so".into(), "b.so");
        assert_eq!(
            found(&m, &s),
            Some(("path:/lib/b.so".into(), false, vec!["b.so".into()]))
        );
    }

    #[test]
    fn a_debug_id_finds_the_binary_it_names_before_a_sym_file() {
        let m = module("App", None, Some("00112233445566778899aabbccddeeff0"));
        let id = "00112233445566778899AABBCCDDEEFF0";
        let mut s = Mem::default();
        s.sym.insert(id.into(), "App.sym");
        s.macho.insert(id.into(), "0011".into());
        // the binary is named, but not held: the .sym file
        assert_eq!(
            found(&m, &s),
            Some((format!("breakpad:{id}"), true, vec!["sym App.sym".into()]))
        );
        s.by_build_id.insert("0011".into(), vec!["App"]);
        assert_eq!(
            found(&m, &s),
            Some(("0011".into(), true, vec!["App".into()]))
        );
    }

    #[test]
    fn the_vdso_is_never_looked_up() {
        let mut m = module("linux-vdso.so.1", Some(&[1, 2]), None);
        m.path = None;
        let mut s = Mem::default();
        s.by_build_id.insert("0102".into(), vec!["vdso.so"]);
        assert_eq!(found(&m, &s), None);
        // as a minidump names it, with a path
        m.name = "linux-gate.so".into();
        m.path = Some("linux-gate.so".into());
        assert_eq!(found(&m, &s), None);
        // a library whose name merely holds the word is looked up
        m.name = "libvdso.so".into();
        assert!(found(&m, &s).is_some());
    }
}
