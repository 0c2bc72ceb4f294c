//! Finds the files that describe a dump's modules on this machine: `--symbols`
//! directories indexed by build-id, the paths the dump records, and the system's
//! `/usr/lib/debug/.build-id` tree — and builds each module's tables once.
//!
//! A file whose build-id differs from the dump's is never used. A module without a
//! build-id in the dump may be matched by path, and is then marked unverified. A Windows
//! module is matched to the `.exe`/`.dll` under `--symbols` of its name and code id
//! (`TimeDateStamp` + `SizeOfImage`): verified.
//!
//! Breakpad `.sym` files (in a `<debug_file>/<DEBUG_ID>/<name>.sym` layout or given
//! directly) are indexed by the debug id of their `MODULE` line and matched with the
//! module's debug id (the dump's, or for ELF the one Breakpad derives from the build-id).
//! They are used only for modules no binary or debug file describes: a binary's own
//! tables win. A `.sym` file in a directory named like a debug id is not opened while
//! indexing (a symbol store holds many, a walk needs a few): its `MODULE` line is read
//! when that id is looked up. Only when no file named after an id says it (a module
//! without a `.sym`, or one filed under another id's name) are all such files read,
//! once per run — what indexing did for every run before.
//!
//! A file compressed as symbol servers store files (a one-file CAB archive: `NAME.pd_`,
//! `NAME.dl_`, or one handed around under its plain name) is read as the file inside it:
//! taken out to a temporary directory when indexed (the CAB reader downloads use), and
//! indexed under the name the archive gives it. One that cannot be taken out is named in
//! [`FileProvider::symbol_file_problems`], never silently ignored.
//!
//! With remote sources configured (`--debuginfod`, `DEBUGINFOD_URLS`), a module with a
//! build-id whose binary or DWARF no local file gives has them fetched
//! ([`sources::Remote`]): the executable for unwind tables and code, the debug file for
//! names, lines and inlined frames; what each server answered is in the report.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use engine::binary::FileBytes;
use engine::breakpad::parse_module_line;
use engine::breakpad_index::BreakpadIndex;
use engine::dump::{Arch, Dump, Module};
use engine::ids::{breakpad_debug_id_from_build_id, hex, unhex};
use engine::process::{
    build_tables_from_breakpad, indexed_breakpad_tables, ModuleTables, TableProvider,
};
use engine::report::{Lookup, RemoteFile};
use engine::resolve::{
    build_from_files, code_image_of, locate, lookup_key, on_demand_from_files, on_hand, FileSource,
    Found, SourceFile, TableKey,
};
use object::Object;

use mapped::Mapped;

use crate::table_cache::TableCache;

/// Bound on files looked at while indexing directories.
const MAX_INDEXED_FILES: usize = 200_000;
/// Bound on directory depth while indexing.
const MAX_DEPTH: usize = 12;
/// Bytes read from a file to tell what it is (and a `.sym` file's `MODULE` line).
const SYM_HEAD: usize = 4096;
/// The most a compressed symbol file under `--symbols` may hold: what one download may
/// (`sources::config::DEFAULT_MAX_BYTES`).
const MAX_EXTRACTED_BYTES: u64 = sources::config::DEFAULT_MAX_BYTES;
/// A CAB archive's signature (`MSCF`).
const CAB_MAGIC: &[u8] = b"MSCF";

/// Files found under the `--symbols` paths.
#[derive(Default)]
struct Index {
    by_build_id: HashMap<Vec<u8>, Vec<PathBuf>>,
    /// `.sym` files by the debug id of their `MODULE` line.
    by_debug_id: HashMap<String, PathBuf>,
    /// `.sym` files not yet opened, by the debug id their directory is named after.
    by_dir_id: HashMap<String, Vec<PathBuf>>,
    /// PE images (`.exe`, `.dll`) by lower-case file name and code id.
    by_code_id: HashMap<(String, String), Vec<PathBuf>>,
    /// The PDB each PE image's CodeView record names: its debug id and file name.
    pe_pdb: HashMap<PathBuf, (String, String)>,
    /// PDB files by debug id.
    pdbs: HashMap<String, Vec<PathBuf>>,
    /// `.sym` files of Windows images by the image's lower-case name and code id (their
    /// `INFO CODE_ID` record).
    sym_by_code_id: HashMap<(String, String), PathBuf>,
    /// The directories compressed files were taken out to (removed when dropped).
    extracted: Vec<tempfile::TempDir>,
    /// Files that could not be read, each with why.
    problems: Vec<String>,
    /// Mach-O binaries and dSYM DWARF files (in `by_build_id`, by UUID).
    apple: crate::apple_files::AppleFiles,
    /// dyld shared caches, by their images' UUIDs.
    dyld: crate::apple_files::DyldCaches,
}

/// The first bytes of an open file (up to [`SYM_HEAD`]), read without moving its cursor.
fn head_of(f: &fs::File, head: &mut [u8; SYM_HEAD]) -> Option<usize> {
    use std::os::unix::fs::FileExt;
    let mut n = 0;
    while n < head.len() {
        match f.read_at(&mut head[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(n)
}

/// The debug id a directory of a Breakpad symbol store is named after (upper-case): hex
/// digits, at least a GUID's worth.
fn dir_debug_id(sym_path: &Path) -> Option<String> {
    let dir = sym_path.parent()?.file_name()?.to_str()?;
    (dir.len() >= 32 && dir.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| dir.to_ascii_uppercase())
}

/// The `.sym` file at `path`, opened, and the debug id its `MODULE` line says.
fn open_sym_file(path: &Path) -> Option<(fs::File, String)> {
    let f = fs::File::open(path).ok()?;
    let mut head = [0u8; SYM_HEAD];
    let n = head_of(&f, &mut head)?;
    let module = parse_module_line(head.get(..n)?)?;
    Some((f, module.debug_id))
}

impl Index {
    /// Indexes the file at `path` if it is an ELF file with a build-id, a Mach-O file with
    /// an LC_UUID (a dSYM's DWARF file too) or a `.sym` file
    /// with a `MODULE` line: opened once, its first bytes read with one call (a symbol
    /// store holds many files, and each system call counts in a one-shot walk) — or, for
    /// a `.sym` file in a directory named like a debug id, not opened at all.
    fn add(&mut self, path: &Path) {
        self.add_file(path, false);
    }

    /// [`Index::add`]; `extracted` for a file taken out of a compressed one (which is
    /// not taken apart again).
    fn add_file(&mut self, path: &Path, extracted: bool) {
        if path.extension().is_some_and(|e| e == "sym") {
            if let Some(id) = dir_debug_id(path) {
                self.by_dir_id
                    .entry(id)
                    .or_default()
                    .push(path.to_path_buf());
                return;
            }
        }
        let Ok(f) = fs::File::open(path) else {
            return;
        };
        let mut head = [0u8; SYM_HEAD];
        let Some(n) = head_of(&f, &mut head) else {
            return;
        };
        let head = &head[..n];
        if head.starts_with(b"\x7fELF") {
            if let Some(id) = build_id_of(f) {
                self.by_build_id
                    .entry(id)
                    .or_default()
                    .push(path.to_path_buf());
            }
        } else if head.starts_with(b"MZ") {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_ascii_lowercase);
            if let (Some(name), Some((id, pdb))) = (name, pe_ids_of(f)) {
                self.by_code_id
                    .entry((name, id))
                    .or_default()
                    .push(path.to_path_buf());
                if let Some(pdb) = pdb {
                    self.pe_pdb.insert(path.to_path_buf(), pdb);
                }
            }
        } else if engine::binary::is_pdb(head) {
            if let Ok(info) = engine::identify::identify_file(f) {
                if let Some(id) = info.debug_id {
                    self.pdbs.entry(id).or_default().push(path.to_path_buf());
                }
            }
        } else if engine::dyld_cache::is_dyld_cache(head) {
            drop(f);
            self.dyld.add(path, &mut self.problems);
        } else if crate::apple_files::is_macho(head) {
            // a Mach-O binary or a dSYM's DWARF file (`X.dSYM/Contents/Resources/DWARF/X`,
            // found by the directory walk) is indexed by its LC_UUID, and kept apart from
            // the ELF files so that it is never matched by its name alone
            drop(f);
            let (by_build_id, extracted, problems) = (
                &mut self.by_build_id,
                &mut self.extracted,
                &mut self.problems,
            );
            self.apple.add(path, head, by_build_id, extracted, problems);
        } else if head.starts_with(CAB_MAGIC) && !extracted {
            drop(f);
            self.add_compressed(path);
        } else if head.starts_with(b"MODU") {
            if let Some(m) = parse_module_line(head) {
                self.by_debug_id
                    .entry(m.debug_id)
                    .or_insert_with(|| path.to_path_buf());
                if let Some(key) = image_of_sym(head) {
                    self.sym_by_code_id
                        .entry(key)
                        .or_insert_with(|| path.to_path_buf());
                }
            }
        }
    }
}

impl Index {
    /// A symbol server's compressed file: its one file taken out to a new temporary
    /// directory under the name the archive gives it, and indexed as if given there; or
    /// why it could not be, in `problems`.
    fn add_compressed(&mut self, path: &Path) {
        match extract(path) {
            Ok((dir, file)) => {
                self.extracted.push(dir);
                self.add_file(&file, true);
            }
            Err(why) => self.problems.push(format!(
                "{}: a compressed symbol file (CAB) that cannot be read: {why}",
                path.display()
            )),
        }
    }
}

/// The one file of the CAB archive at `path`, in a new temporary directory (returned: the
/// file lasts as long as it) under the archive's name for it.
fn extract(path: &Path) -> Result<(tempfile::TempDir, PathBuf), String> {
    let archive = fs::File::open(path).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
    let (file, name) = sources::cabinet::extract_single(&archive, dir.path(), MAX_EXTRACTED_BYTES)
        .map_err(|e| e.to_string())?;
    if name.is_empty() || name == "." || name == ".." || name.contains('\0') {
        return Err(format!("the archive names its file {name:?}"));
    }
    let target = dir.path().join(&name);
    file.persist(&target).map_err(|e| e.error.to_string())?;
    Ok((dir, target))
}

/// The image a Windows module's `.sym` file describes, from its `INFO CODE_ID` record:
/// the image's name (lower-case) and code id (upper-case).
fn image_of_sym(head: &[u8]) -> Option<(String, String)> {
    let (id, image) = engine::breakpad::parse_code_id_line(head)?;
    Some((image?.to_ascii_lowercase(), id.to_ascii_uppercase()))
}

/// The code id of a PE image (`TimeDateStamp` + `SizeOfImage`), from its headers, and the
/// PDB its CodeView record names: its debug id and file name.
fn pe_ids_of(f: fs::File) -> Option<(String, Option<(String, String)>)> {
    let cache = object::read::ReadCache::new(f);
    let obj = object::File::parse(&cache).ok()?;
    let pdb = match obj.pdb_info() {
        Ok(Some(cv)) => {
            let path = String::from_utf8_lossy(cv.path());
            let name = path.rsplit(['/', '\\']).next().unwrap_or(&path).to_string();
            Some((engine::ids::pdb_debug_id(cv.guid(), cv.age()), name))
        }
        _ => None,
    };
    Some((engine::binary::pe_code_id(&obj)?, pdb))
}

/// The build-id of an ELF/Mach-O file, read lazily (no whole-file read).
pub fn file_build_id(path: &Path) -> Option<Vec<u8>> {
    build_id_of(fs::File::open(path).ok()?)
}

fn build_id_of(f: fs::File) -> Option<Vec<u8>> {
    let cache = object::read::ReadCache::new(f);
    let obj = object::File::parse(&cache).ok()?;
    if let Ok(Some(id)) = obj.build_id() {
        return Some(id.to_vec());
    }
    obj.mach_uuid().ok().flatten().map(|u| u.to_vec())
}

/// Whether the ELF file at `path` is for `arch` (a file matched by path or name only
/// may be the host's own library of the same name).
fn same_arch(path: &Path, arch: Arch) -> bool {
    let Ok(f) = fs::File::open(path) else {
        return false;
    };
    let cache = object::read::ReadCache::new(f);
    let Ok(obj) = object::File::parse(&cache) else {
        return false;
    };
    matches!(
        (obj.architecture(), arch),
        (object::Architecture::X86_64, Arch::X86_64)
            | (object::Architecture::Aarch64, Arch::Aarch64)
            | (object::Architecture::I386, Arch::X86)
            | (object::Architecture::Arm, Arch::Arm)
    )
}

/// Files on this machine, indexed by build-id.
pub struct FileProvider {
    by_build_id: HashMap<Vec<u8>, Vec<PathBuf>>,
    /// ELF files under the `--symbols` directories by file name, for modules the dump
    /// names without a build-id (QEMU cores): matched by name, never verified.
    by_name: HashMap<String, Vec<PathBuf>>,
    by_debug_id: HashMap<String, PathBuf>,
    by_dir_id: HashMap<String, Vec<PathBuf>>,
    /// PE images by lower-case file name and code id.
    by_code_id: HashMap<(String, String), Vec<PathBuf>>,
    /// The PDB each PE image's CodeView record names: its debug id and file name.
    pe_pdb: HashMap<PathBuf, (String, String)>,
    /// PDB files by debug id.
    pdbs: HashMap<String, Vec<PathBuf>>,
    /// `.sym` files of Windows images by image name (lower-case) and code id.
    sym_by_code_id: HashMap<(String, String), PathBuf>,
    /// The same for the `.sym` files of `by_dir_id`: read only when a module is looked up
    /// by code id and no other file has it.
    dir_syms_code_ids: OnceLock<HashMap<(String, String), PathBuf>>,
    /// The `.sym` files of `by_dir_id` by the debug id of their `MODULE` line: read only
    /// when a lookup by directory name finds no file that says the id.
    dir_syms_read: OnceLock<HashMap<String, PathBuf>>,
    debug_roots: Vec<PathBuf>,
    /// Whether a module's path recorded in the dump is tried on this machine.
    dump_paths: bool,
    /// Breakpad symbol stores: a module's `.sym` file is looked up at its layout path
    /// (`<debug_file>/<DEBUG_ID>/<name>.sym`), no directory listed.
    stores: Vec<PathBuf>,
    /// Whether tables are built only where the walk looks (one walk per run: `.sym` files
    /// indexed, `.eh_frame` rules FDE by FDE) rather than whole (tables kept for many
    /// walks).
    on_demand: bool,
    /// Tables built this run, by [`TableKey`].
    built: Mutex<HashMap<TableKey, Option<ModuleTables>>>,
    /// Where compressed files under `--symbols` were taken out to.
    extracted: Vec<tempfile::TempDir>,
    /// Files under `--symbols` that could not be read, each with why.
    index_problems: Vec<String>,
    /// The UUIDs of the Mach-O files in `by_build_id`.
    macho_uuids: std::collections::HashSet<Vec<u8>>,
    /// The dyld shared caches under `--symbols`.
    dyld: crate::apple_files::DyldCaches,
    /// Servers asked for the files no local file gives.
    remote: Option<sources::Remote>,
    /// What they answered, by [`lookup_key`].
    lookups: Mutex<HashMap<String, Vec<Lookup>>>,
    /// Whole tables kept between walks (`--table-cache`).
    table_cache: Option<TableCache>,
    /// Most records of a `.sym` file built whole (`--max-sym-records`).
    max_sym_records: usize,
}

impl FileProvider {
    /// Indexes every ELF file under `dirs` by build-id.
    pub fn new(dirs: &[PathBuf], system_debug: bool) -> Self {
        let mut index = Index::default();
        let mut seen = 0usize;
        for d in dirs {
            index_dir(d, 0, &mut seen, &mut index);
        }
        let Index {
            by_build_id,
            by_debug_id,
            by_dir_id,
            by_code_id,
            pe_pdb,
            pdbs,
            sym_by_code_id,
            extracted,
            problems,
            apple,
            dyld,
        } = index;
        let mut by_name: HashMap<String, Vec<PathBuf>> = HashMap::new();
        // Mach-O files are named by UUID only, never matched by file name
        let elf = by_build_id
            .iter()
            .filter(|(id, _)| !apple.uuids.contains(*id));
        for path in elf.flat_map(|(_, paths)| paths) {
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                by_name
                    .entry(name.to_string())
                    .or_default()
                    .push(path.clone());
            }
        }
        let mut debug_roots: Vec<PathBuf> = dirs.iter().map(|d| d.join(".build-id")).collect();
        if system_debug {
            debug_roots.push(PathBuf::from("/usr/lib/debug/.build-id"));
        }
        FileProvider {
            by_build_id,
            by_name,
            by_debug_id,
            by_dir_id,
            by_code_id,
            pe_pdb,
            pdbs,
            sym_by_code_id,
            dir_syms_code_ids: OnceLock::new(),
            dir_syms_read: OnceLock::new(),
            debug_roots,
            dump_paths: true,
            stores: Vec::new(),
            on_demand: false,
            built: Mutex::new(HashMap::new()),
            extracted,
            index_problems: problems,
            macho_uuids: apple.uuids,
            dyld,
            remote: None,
            lookups: Mutex::new(HashMap::new()),
            table_cache: None,
            max_sym_records: engine::report::budget::Budget::default().max_sym_records,
        }
    }

    /// Keeps whole tables in `cache` and reads them from it: a module whose files have an
    /// entry there is not built at all; one without is built whole (not on demand) and
    /// stored, for the next walk.
    pub fn with_table_cache(mut self, cache: Option<TableCache>) -> Self {
        self.table_cache = cache;
        self
    }

    /// What went wrong keeping tables in the table cache, for the caller to tell.
    pub fn table_cache_problems(&self) -> Vec<String> {
        self.table_cache
            .as_ref()
            .map(TableCache::problems)
            .unwrap_or_default()
    }

    /// Files under `--symbols` that could not be read (a compressed file that cannot be
    /// taken out), each with why, for the caller to tell.
    pub fn symbol_file_problems(&self) -> &[String] {
        &self.index_problems
    }

    /// Removes the files taken out of compressed ones (once no table refers to them).
    pub fn remove_extracted(&mut self) {
        self.extracted.clear();
    }

    /// Also asks these remote sources for what no local file gives.
    pub fn with_remote(mut self, remote: Option<sources::Remote>) -> Self {
        self.remote = remote;
        self
    }

    /// The files of build `build_id` the remote sources have that `local` (paths) lacks:
    /// its executable when no local file is its binary, its debug file when none carries
    /// DWARF. Named after the module (`NAME`, `NAME.debug`), as a local file would be.
    fn fetch_missing(
        &self,
        m: &Module,
        build_id: &str,
        local: &[PathBuf],
    ) -> Vec<SourceFile<LocalFile>> {
        let Some(remote) = &self.remote else {
            return Vec::new();
        };
        // mapped: a few headers of each file are read to tell what it gives
        let read: Vec<(String, FileBytes)> = local
            .iter()
            .filter_map(|p| Some((file_name(p), FileBytes::new(Mapped::open(p).ok()?))))
            .collect();
        let (binary, dwarf) = on_hand(&read);
        let mut out = Vec::new();
        let mut lookups = Vec::new();
        for (wanted, file) in [
            (!binary, RemoteFile::Executable),
            (!dwarf, RemoteFile::Debuginfo),
        ] {
            if !wanted {
                continue;
            }
            let fetched = remote.file(build_id, file, None);
            lookups.extend(fetched.lookups);
            if let Some((path, source)) = fetched.file {
                out.push(SourceFile {
                    name: sources::remote::report_name(&m.name, file),
                    handle: LocalFile {
                        path,
                        open: None,
                        source: Some(source),
                    },
                });
            }
        }
        self.record(m, lookups);
        out
    }

    /// Keeps what the remote sources answered for module `m`'s files, each answer once (a
    /// build mapped twice is two modules, looked up twice: the second time from the cache).
    fn record(&self, m: &Module, lookups: Vec<Lookup>) {
        let Some(key) = lookup_key(m) else { return };
        if let (Ok(mut l), false) = (self.lookups.lock(), lookups.is_empty()) {
            let kept = l.entry(key).or_default();
            for lookup in lookups {
                if !kept.contains(&lookup) {
                    kept.push(lookup);
                }
            }
        }
    }

    /// File `name` of id `id` (a Windows image's code id, or with `pdb` a PDB's debug id)
    /// of module `m`, from the symbol servers; their answers go into the report.
    fn fetch_symsrv(
        &self,
        m: &Module,
        name: &str,
        id: &str,
        pdb: bool,
    ) -> Option<SourceFile<LocalFile>> {
        let remote = self.remote.as_ref().filter(|r| r.has_symbol_servers())?;
        let fetched = if pdb {
            remote.pdb(name, id, None)
        } else {
            remote.pe_image(name, id, None)
        };
        self.record(m, fetched.lookups);
        let (path, source) = fetched.file?;
        Some(SourceFile {
            name: name.to_string(),
            handle: LocalFile {
                path,
                open: None,
                source: Some(source),
            },
        })
    }

    /// Module `m`'s `.sym` file (debug-id `debug_id`) from the Breakpad symbol stores.
    fn fetch_sym(&self, m: &Module, debug_id: &str) -> Option<SourceFile<LocalFile>> {
        let remote = self.remote.as_ref().filter(|r| r.has_symbol_stores())?;
        let fetched = remote.sym(&m.breakpad_sym_path()?, debug_id, None);
        self.record(m, fetched.lookups);
        let (path, source) = fetched.file?;
        Some(SourceFile {
            name: file_name(&path),
            handle: LocalFile {
                path,
                open: None,
                source: Some(source),
            },
        })
    }

    /// Never opens the paths the dump records for its modules, only files found by
    /// build-id or debug id under the given directories (and the system debug root):
    /// e.g. to walk with exactly the `.sym` files another tool is given.
    pub fn without_dump_paths(mut self) -> Self {
        self.dump_paths = false;
        self
    }

    /// Builds at most `max` records of a `.sym` file built whole into tables (see
    /// `engine::process::build_tables_from_breakpad`).
    pub fn with_max_sym_records(mut self, max: usize) -> Self {
        self.max_sym_records = max;
        self
    }

    /// Builds tables only where the walk looks: `.sym` files indexed (see
    /// `engine::breakpad_index`), binaries' unwind rules FDE by FDE (see
    /// `engine::process::on_demand_tables`). For a single walk, where building whole
    /// tables would cost more than the walk. The report is the same.
    pub fn building_on_demand(mut self) -> Self {
        self.on_demand = true;
        self
    }

    /// Also looks for `.sym` files in these Breakpad symbol stores (minidump-stackwalk's
    /// `--symbols-path`): each module's file at the path the layout gives it, checked
    /// against its `MODULE` line. A store is never listed, so its size costs nothing;
    /// files elsewhere in it are not found.
    pub fn with_breakpad_stores(mut self, stores: &[PathBuf]) -> Self {
        self.stores.extend_from_slice(stores);
        self
    }

    /// The `.sym` file for module `m` with debug id `id` (upper-case), opened, and its
    /// path: from the `--symbols` files, else from the stores.
    fn open_module_sym(&self, m: &Module, id: &str) -> Option<(fs::File, PathBuf)> {
        if let Some(found) = self.open_sym(id) {
            return Some(found);
        }
        let rel = m.breakpad_sym_path()?;
        self.stores.iter().find_map(|store| {
            let p = store.join(&rel);
            let (f, says) = open_sym_file(&p)?;
            (says == id).then_some((f, p))
        })
    }

    /// The `.sym` file with debug id `id` (upper-case) among the `--symbols` files (or
    /// written for an image of a dyld shared cache there), opened, and its path.
    fn open_sym(&self, id: &str) -> Option<(fs::File, PathBuf)> {
        let found = self.open_listed_sym(id);
        if found.is_some() {
            return found;
        }
        let p = self.dyld.sym_for(id)?;
        fs::File::open(&p).ok().map(|f| (f, p))
    }

    /// The `.sym` file with debug id `id` (upper-case) among the `--symbols` files,
    /// opened, and its path.
    fn open_listed_sym(&self, id: &str) -> Option<(fs::File, PathBuf)> {
        if let Some(p) = self.by_debug_id.get(id) {
            return fs::File::open(p).ok().map(|f| (f, p.clone()));
        }
        let mut named = self.by_dir_id.get(id).into_iter().flatten();
        let found = named.find_map(|p| {
            let (f, says) = open_sym_file(p)?;
            (says == id).then(|| (f, p.clone()))
        });
        if found.is_some() {
            return found;
        }
        // none named after the id says it (or none is): the file may be filed under
        // another id's name, so every such file is read, once per run
        let read = self.dir_syms_read.get_or_init(|| {
            let mut out = HashMap::new();
            for p in self.by_dir_id.values().flatten() {
                if let Some((_, says)) = open_sym_file(p) {
                    out.entry(says).or_insert_with(|| p.clone());
                }
            }
            out
        });
        let p = read.get(id)?;
        fs::File::open(p).ok().map(|f| (f, p.clone()))
    }

    /// Files with build-id `id` under `--symbols` (binaries and debug files), then its
    /// separate debug files `.build-id/xx/rest.debug` under the debug roots (each checked).
    fn files_with_build_id(&self, id: &[u8], dump_path: Option<PathBuf>) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.by_build_id.get(id).cloned().unwrap_or_default();
        out.extend(dump_path);
        let h = hex(id);
        if h.len() > 2 {
            for root in &self.debug_roots {
                let p = root.join(&h[..2]).join(format!("{}.debug", &h[2..]));
                if p.is_file() && file_build_id(&p).as_deref() == Some(id) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// `paths` as the source's files, each file once.
    fn source_files(paths: Vec<PathBuf>) -> Vec<SourceFile<LocalFile>> {
        let mut seen = std::collections::HashSet::new();
        paths
            .into_iter()
            .filter(|p| seen.insert(fs::canonicalize(p).unwrap_or_else(|_| p.clone())))
            .map(|path| SourceFile {
                name: file_name(&path),
                handle: LocalFile {
                    path,
                    open: None,
                    source: None,
                },
            })
            .collect()
    }

    /// The tables of a module's `.sym` file: indexed where the walk looks (one-shot walks)
    /// or built whole.
    fn sym_tables(&self, sym: SourceFile<LocalFile>) -> Option<ModuleTables> {
        let LocalFile { path, open, .. } = sym.handle;
        if self.on_demand {
            // a file the index declines is built whole below
            let file = match open {
                Some(f) => f,
                None => fs::File::open(&path).ok()?,
            };
            if let Ok(index) = BreakpadIndex::from_file(file) {
                return Some(indexed_breakpad_tables(&sym.name, index));
            }
        }
        fs::read(&path)
            .ok()
            .map(|text| build_tables_from_breakpad(&sym.name, &text, self.max_sym_records))
    }
}

/// A file on this machine as [`FileProvider`] found it: its path, and the file itself
/// when finding it meant opening it (a `.sym` file whose `MODULE` line was read).
pub struct LocalFile {
    path: PathBuf,
    open: Option<fs::File>,
    /// The remote source a fetched file came from (it is kept in the cache).
    source: Option<String>,
}

/// The files on this machine, by [`engine::resolve`]'s rule: `--symbols` files and the
/// system debug roots by build-id, the dump's recorded paths (checked), files by name for
/// modules without a build-id, `.sym` files by debug-id. Never fails: a file that cannot
/// be read is not found.
impl FileSource for FileProvider {
    type Handle = LocalFile;
    type Error = std::convert::Infallible;

    async fn with_build_id(
        &self,
        m: &Module,
        build_id: &str,
    ) -> Result<Vec<SourceFile<LocalFile>>, Self::Error> {
        let Some(id) = unhex(build_id) else {
            return Ok(Vec::new());
        };
        let at_path = m
            .path
            .as_ref()
            .filter(|_| self.dump_paths)
            .map(PathBuf::from)
            .filter(|p| p.is_file() && file_build_id(p).as_deref() == Some(id.as_slice()));
        let local = self.files_with_build_id(&id, at_path);
        let fetched = self.fetch_missing(m, build_id, &local);
        let mut files = Self::source_files(local);
        files.extend(fetched);
        Ok(files)
    }

    /// The PE image under `--symbols` with the module's name and code id, and the PDB the
    /// dump's CodeView record names (else the image's own record).
    async fn with_code_id(
        &self,
        m: &Module,
        name: &str,
        code_id: &str,
    ) -> Result<Vec<SourceFile<LocalFile>>, Self::Error> {
        let paths = self
            .by_code_id
            .get(&(name.to_string(), code_id.to_string()))
            .cloned()
            .unwrap_or_default();
        let mut files = Self::source_files(paths.clone());
        let mut image_pdb = paths.iter().find_map(|p| self.pe_pdb.get(p).cloned());
        if files.is_empty() {
            // from a symbol server, by the name the dump gives it
            let image = m.name.rsplit(['/', '\\']).next().unwrap_or(&m.name);
            let Some(fetched) = self.fetch_symsrv(m, image, code_id, false) else {
                return Ok(files);
            };
            image_pdb = fs::File::open(&fetched.handle.path)
                .ok()
                .and_then(pe_ids_of)
                .and_then(|(_, pdb)| pdb);
            files.push(fetched);
        }
        // the PDB the dump's CodeView record names, else the image's own record
        let pdb = match (m.breakpad_debug_id(), image_pdb) {
            (Some(id), image) => {
                let name = m
                    .debug_file
                    .clone()
                    .or_else(|| image.filter(|(i, _)| *i == id).map(|(_, n)| n));
                Some((id, name))
            }
            (None, Some((id, name))) => Some((id, Some(name))),
            (None, None) => None,
        };
        if let Some((id, name)) = pdb {
            let local = self.pdbs.get(&id).into_iter().flatten().take(1).cloned();
            let local = Self::source_files(local.collect());
            if !local.is_empty() {
                files.extend(local);
            } else if let Some(name) = name {
                files.extend(self.fetch_symsrv(m, &name, &id, true));
            }
        }
        Ok(files)
    }

    /// The `.sym` file under `--symbols` whose `INFO CODE_ID` names the image.
    async fn breakpad_by_code_id(
        &self,
        _m: &Module,
        name: &str,
        code_id: &str,
    ) -> Result<Option<SourceFile<LocalFile>>, Self::Error> {
        let key = (name.to_string(), code_id.to_string());
        let found = self.sym_by_code_id.get(&key).or_else(|| {
            // a symbol store's files (named by their directory's debug id) are read for
            // this once per run
            let read = self.dir_syms_code_ids.get_or_init(|| {
                let mut out = HashMap::new();
                for p in self.by_dir_id.values().flatten() {
                    let Ok(f) = fs::File::open(p) else { continue };
                    let mut head = [0u8; SYM_HEAD];
                    let Some(n) = head_of(&f, &mut head) else {
                        continue;
                    };
                    if let Some(key) = head.get(..n).and_then(image_of_sym) {
                        out.entry(key).or_insert_with(|| p.clone());
                    }
                }
                out
            });
            read.get(&key)
        });
        Ok(found.map(|path| SourceFile {
            name: file_name(path),
            handle: LocalFile {
                path: path.clone(),
                open: None,
                source: None,
            },
        }))
    }

    /// The PDB under `--symbols` with the module's debug id, else from a symbol server.
    async fn pdb(
        &self,
        m: &Module,
        debug_id: &str,
    ) -> Result<Vec<SourceFile<LocalFile>>, Self::Error> {
        let paths = self
            .pdbs
            .get(debug_id)
            .into_iter()
            .flatten()
            .take(1)
            .cloned();
        let local = Self::source_files(paths.collect());
        if !local.is_empty() {
            return Ok(local);
        }
        let name = m
            .debug_file
            .as_deref()
            .filter(|n| n.to_ascii_lowercase().ends_with(".pdb"));
        Ok(name
            .and_then(|name| self.fetch_symsrv(m, name, debug_id, true))
            .into_iter()
            .collect())
    }

    /// The file at the module's path (or one of its name under `--symbols`: the path is
    /// the crashed machine's, for QEMU the guest's) — and then, as gdb does, the separate
    /// debug files of *that file's* build-id.
    async fn by_path(
        &self,
        m: &Module,
        arch: Arch,
    ) -> Result<Vec<SourceFile<LocalFile>>, Self::Error> {
        let mut out: Vec<PathBuf> = Vec::new();
        if let Some(p) = m.path.as_ref().filter(|_| self.dump_paths) {
            let p = PathBuf::from(p);
            if p.is_file() && same_arch(&p, arch) {
                out.push(p);
            }
        }
        if out.is_empty() {
            if let Some(paths) = self.by_name.get(&m.name) {
                out.extend(paths.iter().filter(|p| same_arch(p, arch)).cloned());
                out.truncate(1);
            }
        }
        if let Some(id) = out.first().and_then(|p| file_build_id(p)) {
            out.extend(self.files_with_build_id(&id, None));
        }
        Ok(Self::source_files(out))
    }

    /// The UUID of the Mach-O files under `--symbols` (binary, dSYM DWARF file, slice of
    /// a universal one) that a minidump's debug id names; else the build-id of the ELF
    /// files whose Breakpad debug id it is (a microdump names its modules so).
    async fn build_id_of_debug_id(&self, debug_id: &str) -> Result<Option<String>, Self::Error> {
        if let Some(uuid) = crate::apple_files::uuid_of_debug_id(debug_id)
            .filter(|uuid| self.macho_uuids.contains(uuid))
        {
            return Ok(Some(hex(&uuid)));
        }
        let wanted = debug_id.to_ascii_uppercase();
        Ok(self
            .by_build_id
            .keys()
            .filter(|id| !self.macho_uuids.contains(*id))
            .filter(|id| breakpad_debug_id_from_build_id(id) == wanted)
            .min()
            .map(|id| hex(id)))
    }

    /// A local `.sym` file, else one from the Breakpad symbol stores.
    async fn breakpad(
        &self,
        m: &Module,
        debug_id: &str,
    ) -> Result<Option<SourceFile<LocalFile>>, Self::Error> {
        let local = self
            .open_module_sym(m, debug_id)
            .map(|(f, path)| SourceFile {
                name: file_name(&path),
                handle: LocalFile {
                    path,
                    open: Some(f),
                    source: None,
                },
            });
        Ok(local.or_else(|| self.fetch_sym(m, debug_id)))
    }
}

/// A file's name as the report gives it: its last path component (a service upload is
/// named the same way, so the two reports agree).
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn index_dir(dir: &Path, depth: usize, seen: &mut usize, out: &mut Index) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        if dir.is_file() {
            out.add(dir);
        }
        return;
    };
    for e in entries.flatten() {
        if *seen >= MAX_INDEXED_FILES {
            return;
        }
        let Ok(ft) = e.file_type() else { continue };
        let path = e.path();
        if ft.is_dir() {
            index_dir(&path, depth + 1, seen, out);
        } else if ft.is_file() || ft.is_symlink() {
            *seen += 1;
            out.add(&path);
        }
    }
}

impl TableProvider for FileProvider {
    /// A module whose recorded path now holds another build (the file was replaced since
    /// the crash): that file is never used, and the report says why.
    fn module_warnings(&self, _dump: &Dump<'_>, m: &Module) -> Vec<engine::report::Warning> {
        let (Some(id), Some(path)) = (&m.build_id, m.path.as_ref().filter(|_| self.dump_paths))
        else {
            return Vec::new();
        };
        let path = Path::new(path);
        match path.is_file().then(|| file_build_id(path)).flatten() {
            Some(found) if found != *id => vec![engine::report::Warning::new(
                "module-file-changed".to_string(),
                format!(
                    "{} on this machine has build-id {}, not the crashed build's {}: the file \
                     changed since the crash and is not used",
                    path.display(),
                    hex(&found),
                    hex(id)
                ),
            )],
            _ => Vec::new(),
        }
    }

    fn builds_tables(&self) -> bool {
        true
    }

    fn module_lookups(&self, _dump: &Dump<'_>, m: &Module) -> Vec<Lookup> {
        let Some(key) = lookup_key(m) else {
            return Vec::new();
        };
        self.lookups
            .lock()
            .ok()
            .and_then(|l| l.get(&key).cloned())
            .unwrap_or_default()
    }

    fn tables(&self, dump: &Dump<'_>, m: &Module) -> Option<ModuleTables> {
        // the local source never waits: its futures are ready when first polled
        let located = match pollster::block_on(locate(self, m, dump.arch)) {
            Ok(l) => l?,
            Err(never) => match never {},
        };
        if let Ok(cache) = self.built.lock() {
            if let Some(t) = cache.get(&located.key) {
                return t.clone();
            }
        }
        let result = match located.found {
            Found::Files(files) => {
                let fetched: HashMap<String, String> = files
                    .iter()
                    .filter_map(|f| Some((f.name.clone(), f.handle.source.clone()?)))
                    .collect();
                // (file name as the report gives it, bytes)
                // mapped: a table is built from a few sections of each file
                let mut read_paths: Vec<(String, PathBuf)> = Vec::new();
                let read: Vec<(String, FileBytes)> = files
                    .into_iter()
                    .filter_map(|f| {
                        let mapped = Mapped::open(&f.handle.path).ok()?;
                        read_paths.push((f.name.clone(), f.handle.path));
                        // its compressed debug sections' pages are given back once inflated
                        Some((f.name, FileBytes::releasable(mapped, Mapped::release)))
                    })
                    .collect();
                let cache = self.table_cache.as_ref().and_then(|c| {
                    let files: Vec<(&str, &Path)> = read_paths
                        .iter()
                        .map(|(n, p)| (n.as_str(), p.as_path()))
                        .collect();
                    Some((c, c.entry(&located.key, &files, located.verified)?))
                });
                (!read.is_empty()).then(|| {
                    let cached = cache
                        .as_ref()
                        .and_then(|(c, entry)| c.get(entry, located.verified));
                    let mut t = match cached {
                        Some(t) => t,
                        None if cache.is_some() || !self.on_demand => {
                            let t = build_from_files(&read, located.verified);
                            if let Some((c, entry)) = &cache {
                                c.put(entry, &t);
                            }
                            t
                        }
                        None => on_demand_from_files(&read, located.verified),
                    };
                    t.code = code_image_of(&read);
                    for f in &mut t.files {
                        f.source = fetched.get(&f.name).cloned();
                    }
                    t
                })
            }
            Found::Breakpad(sym) => {
                let source = sym.handle.source.clone();
                self.sym_tables(sym).map(|mut t| {
                    for f in &mut t.files {
                        f.source.clone_from(&source);
                    }
                    t
                })
            }
        };
        if let Ok(mut cache) = self.built.lock() {
            cache.insert(located.key, result.clone());
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID_A: &str = "0123456789ABCDEF0123456789ABCDEF0";
    const ID_B: &str = "FEDCBA9876543210FEDCBA98765432100";
    const ID_C: &str = "00112233445566778899AABBCCDDEEFF0";

    fn sym(dir: &Path, rel: &str, id: &str, name: &str) -> PathBuf {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        fs::write(
            &path,
            format!("MODULE Linux x86_64 {id} {name}\nPUBLIC 10 0 f\n"),
        )
        .expect("write");
        path
    }

    #[test]
    fn sym_files_are_found_by_the_id_their_module_line_says() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let d = dir.path();
        // in the store layout, under its own id
        let a = sym(d, &format!("a.so/{ID_A}/a.so.sym"), ID_A, "a.so");
        // in the store layout, under another id's name (copied by hand)
        let b = sym(d, &format!("b.so/{ID_C}/b.so.sym"), ID_B, "b.so");
        // outside the layout
        let c = sym(d, "loose/c.sym", ID_C, "c.so");
        let provider = FileProvider::new(&[d.to_path_buf()], false);
        let found = |id: &str| provider.open_sym(id).map(|(_, p)| p);
        assert_eq!(found(ID_A), Some(a));
        assert_eq!(found(ID_B), Some(b), "read when no file is named after it");
        assert_eq!(
            found(ID_C),
            Some(c),
            "the file that says the id, not the name"
        );
        assert_eq!(found("0000000000000000000000000000000A0"), None);
    }

    /// A PE image and its PDB, built by clang and lld-link from a two-function C file.
    fn image_and_pdb(dir: &Path) -> (PathBuf, PathBuf) {
        use std::process::Command;
        let src = dir.join("a.c");
        fs::write(
            &src,
            "int f(int x) { return x * 3; }\nint start(void) { return f(2); }\n",
        )
        .expect("write");
        let obj = dir.join("a.obj");
        let status = Command::new("clang")
            .args(["--target=x86_64-pc-windows-msvc", "-c", "-g", "-gcodeview"])
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .status()
            .expect("this test needs clang (test.sh installs it)");
        assert!(status.success(), "clang failed");
        let (exe, pdb) = (dir.join("a.exe"), dir.join("a.pdb"));
        let status = Command::new("lld-link")
            .args([
                "/debug",
                "/entry:start",
                "/nodefaultlib",
                "/subsystem:console",
            ])
            .arg(format!("/pdb:{}", pdb.display()))
            .arg(format!("/out:{}", exe.display()))
            .arg(&obj)
            .status()
            .expect("this test needs lld-link (test.sh installs it)");
        assert!(status.success(), "lld-link failed");
        (exe, pdb)
    }

    /// A one-file CAB archive of `bytes` stored as `name`, as `makecab` writes one.
    fn cab_of(name: &str, bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut builder = cab::CabinetBuilder::new();
        builder
            .add_folder(cab::CompressionType::MsZip)
            .add_file(name);
        let mut writer = builder
            .build(std::io::Cursor::new(Vec::new()))
            .expect("a CAB writer");
        while let Some(mut w) = writer.next_file().expect("next file") {
            w.write_all(bytes).expect("write");
        }
        writer.finish().expect("finish").into_inner()
    }

    #[test]
    fn a_cab_compressed_pdb_is_read_as_the_pdb_inside() {
        let build = tempfile::tempdir().expect("temporary directory");
        let (exe, pdb) = image_and_pdb(build.path());
        // the PDB's id as the linker recorded it in the image's CodeView record
        let (_, named) = pe_ids_of(fs::File::open(&exe).expect("the image")).expect("a PE");
        let (id, _) = named.expect("the image names its PDB");
        let pdb_bytes = fs::read(&pdb).expect("the PDB");
        let symbols = tempfile::tempdir().expect("temporary directory");
        let s = symbols.path();
        // as a symbol server stores it, and as some tools hand it around
        fs::create_dir_all(s.join("server")).expect("mkdir");
        fs::write(s.join("server/a.pd_"), cab_of("a.pdb", &pdb_bytes)).expect("write");
        let provider = FileProvider::new(&[s.join("server")], false);
        let found = provider.pdbs.get(&id).and_then(|p| p.first()).cloned();
        let found = found.unwrap_or_else(|| panic!("no PDB of id {id} found in a.pd_"));
        assert_eq!(fs::read(&found).expect("read"), pdb_bytes);
        assert!(provider.symbol_file_problems().is_empty());

        fs::create_dir_all(s.join("renamed")).expect("mkdir");
        fs::write(s.join("renamed/a.pdb"), cab_of("a.pdb", &pdb_bytes)).expect("write");
        let provider = FileProvider::new(&[s.join("renamed")], false);
        assert!(provider.pdbs.contains_key(&id), "a CAB under the .pdb name");

        // one that cannot be read is said, not ignored
        let mut cut = cab_of("a.pdb", &pdb_bytes);
        cut.truncate(cut.len() / 2);
        fs::create_dir_all(s.join("cut")).expect("mkdir");
        fs::write(s.join("cut/a.pd_"), cut).expect("write");
        let mut provider = FileProvider::new(&[s.join("cut")], false);
        assert!(provider.pdbs.is_empty());
        let problems = provider.symbol_file_problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("a.pd_"), "{problems:?}");
        provider.remove_extracted();
    }

    fn module(name: &str, debug_id: &str) -> Module {
        Module {
            name: name.into(),
            debug_id: Some(debug_id.into()),
            ..Module::default()
        }
    }

    #[test]
    fn a_build_looked_up_twice_keeps_each_answer_once() {
        let provider = FileProvider::new(&[], false);
        let m = Module {
            name: "libx.so".into(),
            build_id: Some(vec![0xab, 0xcd]),
            ..Module::default()
        };
        let fetched = |file| Lookup {
            source: "http://s".into(),
            file,
            result: engine::report::LookupResult::Fetched,
            message: None,
            until: None,
        };
        for _ in 0..2 {
            provider.record(&m, vec![fetched(RemoteFile::Executable)]);
        }
        provider.record(&m, vec![fetched(RemoteFile::Debuginfo)]);
        let kept = provider.lookups.lock().expect("not poisoned")["abcd"].clone();
        assert_eq!(
            kept,
            [
                fetched(RemoteFile::Executable),
                fetched(RemoteFile::Debuginfo)
            ]
        );
    }

    #[test]
    fn store_sym_files_are_read_at_their_layout_path() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let d = dir.path();
        let a = sym(d, &format!("a.so/{ID_A}/a.so.sym"), ID_A, "a.so");
        // filed under another id's name: the MODULE line is what counts
        sym(d, &format!("b.so/{ID_C}/b.so.sym"), ID_B, "b.so");
        // outside the layout: a store is not searched
        sym(d, "loose/c.sym", ID_C, "c.so");
        let provider = FileProvider::new(&[], false).with_breakpad_stores(&[d.to_path_buf()]);
        let found = |name: &str, id: &str| {
            provider
                .open_module_sym(&module(name, id), id)
                .map(|(_, p)| p)
        };
        assert_eq!(
            found("a.so", ID_A),
            Some(d.join(format!("a.so/{ID_A}/a.so.sym")))
        );
        assert_eq!(found("a.so", ID_A), Some(a));
        assert_eq!(found("b.so", ID_C), None, "the file says another id");
        assert_eq!(found("b.so", ID_B), None, "not at the path of its id");
        assert_eq!(found("c.so", ID_C), None, "not in the layout");
        // the same files given as --symbols are found by what they say
        let listed = FileProvider::new(&[d.to_path_buf()], false);
        let (_, p) = listed
            .open_module_sym(&module("c.so", ID_C), ID_C)
            .expect("found by its MODULE line");
        assert_eq!(p, d.join("loose/c.sym"));
    }
}
