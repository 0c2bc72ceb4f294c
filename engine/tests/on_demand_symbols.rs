//! `OnDemandSymbols` against the whole symbol table, on real files: this machine's libc
//! with its libc6-dbg debug file, libstdc++ (symbol tables only), and programs compiled
//! here (gcc and g++ `-O2 -g` with inlining and templates, clang `-gdwarf-5` when
//! present, and a program whose debug info is split off into a debug file).
//!
//! For each: at every function's start, start − 1, end − 1 and end in the whole table,
//! and at 5,000 seeded pseudo-random offsets across its text, the lookup (function, its
//! start, file, line, column, every inline frame, source) of a table built for that one
//! offset, and of tables built for batches of 50 offsets, must equal the whole table's;
//! `inputs()` and `sources()` must equal the whole build's. Files CI installs (libc6-dbg,
//! gcc, g++) are required: missing, the test fails.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use postmortem_engine::binary::FileBytes;
use postmortem_engine::symbols::{build_symbol_table, OnDemandSymbols, SymbolFrame, SymbolTable};

/// A small xorshift generator: random, but the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn shared(bytes: &[u8]) -> FileBytes {
    FileBytes::new(bytes.to_vec())
}

/// libc's path and its libc6-dbg debug file (by build-id).
fn libc() -> (PathBuf, PathBuf) {
    with_debug_file("/lib/x86_64-linux-gnu/libc.so.6")
}

/// A system library's path and its libc6-dbg debug file (by build-id).
fn with_debug_file(path: &str) -> (PathBuf, PathBuf) {
    use object::Object;
    let path = PathBuf::from(path);
    let bytes = read(&path);
    let file = object::File::parse(&*bytes).unwrap();
    let id = file
        .build_id()
        .unwrap()
        .unwrap_or_else(|| panic!("{} has no build-id", path.display()));
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let debug = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &hex[..2],
        &hex[2..]
    ));
    assert!(
        debug.exists(),
        "{} is missing: install libc6-dbg (test.sh does)",
        debug.display()
    );
    (path, debug)
}

/// The lookup at `rel` as owned values.
fn answer(table: &SymbolTable<'_>, rel: u64) -> Vec<String> {
    let mut frames: Vec<SymbolFrame<'_>> = Vec::new();
    table.lookup(rel, &mut frames);
    frames.iter().map(|f| format!("{f:?}")).collect()
}

/// The offsets worth asking about: every function's edges and `randoms` random ones.
fn probes(whole: &SymbolTable<'_>, randoms: usize, seed: u64) -> Vec<u64> {
    let mut rels = Vec::new();
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for (start, end, _, _) in whole.functions() {
        rels.extend([start, start.saturating_sub(1), end.saturating_sub(1), end]);
        lo = lo.min(start);
        hi = hi.max(end);
    }
    let mut rng = Rng(seed);
    let span = hi.saturating_sub(lo) + 128;
    for _ in 0..randoms {
        rels.push(lo.saturating_sub(64) + rng.below(span));
    }
    rels.sort_unstable();
    rels.dedup();
    rels
}

/// Compares on-demand tables with the whole one; `single_every`: one offset in this many
/// gets a table of its own (the others are checked in batches).
fn differential(name: &str, binary: Option<&Path>, debug: &[&Path], single_every: usize) {
    let binary_bytes = binary.map(read);
    let debug_bytes: Vec<Vec<u8>> = debug.iter().map(|p| read(p)).collect();
    let debug_refs: Vec<&[u8]> = debug_bytes.iter().map(Vec::as_slice).collect();
    let whole = build_symbol_table(binary_bytes.as_deref(), &debug_refs).unwrap();
    let table = SymbolTable::open(&whole.bytes).unwrap();
    let shared_debug: Vec<FileBytes> = debug_bytes.iter().map(|b| shared(b)).collect();
    let od = OnDemandSymbols::new(binary_bytes.as_deref().map(shared), &shared_debug)
        .unwrap_or_else(|d| panic!("{name}: declined: {d}"));
    assert_eq!(od.inputs(), whole.inputs, "{name}: inputs");
    assert_eq!(od.sources(), whole.sources, "{name}: sources");

    let rels = probes(&table, 5000, 0x5eed ^ name.len() as u64);
    let mut rng = Rng(0xfeed);
    let mut singles = 0usize;
    for &rel in &rels {
        if single_every > 1 && rng.below(single_every as u64) != 0 {
            continue;
        }
        singles += 1;
        let built = od.symbols_for(&[rel]).unwrap();
        let part = SymbolTable::open(&built.bytes).unwrap();
        assert_eq!(
            answer(&part, rel),
            answer(&table, rel),
            "{name}: lookup at {rel:#x}, table for that offset alone"
        );
    }
    // batches of 50 offsets spread over the text, as a walk asks
    let mut order = rels.clone();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for chunk in order.chunks(50) {
        let mut batch = chunk.to_vec();
        batch.sort_unstable();
        let built = od.symbols_for(&batch).unwrap();
        let part = SymbolTable::open(&built.bytes).unwrap();
        for &rel in &batch {
            assert_eq!(
                answer(&part, rel),
                answer(&table, rel),
                "{name}: lookup at {rel:#x}, table for a batch of {}",
                batch.len()
            );
        }
    }
    assert!(od.trusts_ranges(), "{name}: fell back to the whole table");
    eprintln!(
        "{name}: {} offsets ({singles} alone, all in batches), {} functions",
        rels.len(),
        whole.functions
    );
}

#[test]
fn libc_with_its_debug_file() {
    let (libc, debug) = libc();
    differential("libc", Some(&libc), &[&debug], 100);
}

/// Which files and sources the whole table has (the report's `files[].gave` and
/// `symbols`) is settled by probing a few addresses, not by building the whole table:
/// for libc and for the dynamic linker, whose one surviving symbol-table function
/// (`__restore_rt`) sits in a C unit's ranges where the unit has no line rows.
#[test]
fn inputs_and_sources_settle_without_the_whole_table() {
    for path in [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    ] {
        let (binary, debug) = with_debug_file(path);
        let (b, d) = (read(&binary), read(&debug));
        let whole = build_symbol_table(Some(&b), &[&d]).unwrap();
        let od = OnDemandSymbols::new(Some(shared(&b)), &[shared(&d)]).unwrap();
        assert_eq!(od.inputs(), whole.inputs, "{path}: inputs");
        assert_eq!(od.sources(), whole.sources, "{path}: sources");
        assert!(
            !od.built_whole(),
            "{path}: the whole table was built to settle them"
        );
    }
}

#[test]
fn libc_tables_for_one_address_read_few_units() {
    let (libc, debug) = libc();
    let whole = build_symbol_table(Some(&read(&libc)), &[&read(&debug)]).unwrap();
    let od = OnDemandSymbols::new(Some(shared(&read(&libc))), &[shared(&read(&debug))]).unwrap();
    let table = SymbolTable::open(&whole.bytes).unwrap();
    let count = table.functions().count();
    let (start, _, name, _) = table.functions().nth(count / 2).unwrap();
    let built = od.symbols_for(&[start + 4]).unwrap();
    assert!(
        built.line_rows * 20 < whole.line_rows,
        "{name:?}: {} line rows of {}: not on demand",
        built.line_rows,
        whole.line_rows
    );
}

#[test]
fn libstdcxx_symbol_tables_only() {
    let path = Path::new("/lib/x86_64-linux-gnu/libstdc++.so.6");
    assert!(path.exists(), "{} is missing", path.display());
    differential("libstdc++", Some(path), &[], 20);
}

/// A work folder for compiled programs.
fn work() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

const C_PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static inline int square(int x) { return x * x; }
static inline int sum_squares(const int *v, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += square(v[i]);
    return s;
}
static int cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }
__attribute__((noinline)) int work(int n) {
    int *v = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) v[i] = (i * 7919) % 101;
    qsort(v, (size_t)n, sizeof(int), cmp);
    int r = sum_squares(v, n);
    free(v);
    return r;
}
__attribute__((cold, noinline)) void fail(const char *why) { fprintf(stderr, "%s\n", why); abort(); }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    if (n < 0) fail("negative");
    char buf[64];
    strcpy(buf, argc > 2 ? argv[2] : "x");
    printf("%d %zu\n", work(n), strlen(buf));
    return 0;
}
"#;

const CXX_PROGRAM: &str = r#"
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>
namespace shapes {
template <typename T> struct Box {
    T value;
    T twice() const { return value + value; }
};
class Shape {
public:
    virtual ~Shape() {}
    virtual double area() const = 0;
};
class Square : public Shape {
    double side;
public:
    explicit Square(double s) : side(s) {}
    double area() const override { return side * side; }
};
}
template <typename K, typename V> V total(const std::map<K, V> &m) {
    V s{};
    for (const auto &kv : m) s += kv.second;
    return s;
}
int main(int argc, char **argv) {
    std::vector<int> v;
    for (int i = 0; i < argc * 100; i++) v.push_back((i * 31) % 17);
    std::sort(v.begin(), v.end(), [](int a, int b) { return a > b; });
    std::map<std::string, int> m;
    for (int x : v) m[std::to_string(x)] += x;
    shapes::Box<long> b{argc};
    shapes::Square sq(argc);
    const shapes::Shape &s = sq;
    std::printf("%d %ld %f %s\n", total(m), b.twice(), s.area(), argv[0]);
    return 0;
}
"#;

/// Compiles `source` (`ext`: "c" or "cpp") with `compiler` and `flags` into `dir`.
fn compile(dir: &Path, compiler: &str, ext: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join(format!("prog.{ext}"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(format!("prog-{compiler}-{ext}"));
    let status = Command::new(compiler)
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("{compiler}: {e}"));
    assert!(status.success(), "{compiler} failed");
    out
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

#[test]
fn gcc_c_with_inlining() {
    let dir = work();
    let prog = compile(dir.path(), "gcc", "c", C_PROGRAM, &["-O2", "-g"]);
    differential("gcc C", Some(&prog), &[], 10);
}

#[test]
fn gxx_cxx_with_templates() {
    let dir = work();
    let prog = compile(dir.path(), "g++", "cpp", CXX_PROGRAM, &["-O2", "-g"]);
    differential("g++ C++", Some(&prog), &[], 10);
}

/// gcc `-flto`: the abstract instances live in a unit of their own, the code's units name
/// their functions through references into it (names across units).
#[test]
fn gcc_lto_names_across_units() {
    let dir = work();
    let lib = dir.path().join("lib.c");
    std::fs::write(
        &lib,
        "static inline int step(int x) { return x * 3 + 1; }\n\
         int walk_steps(int n) { int s = 0; for (int i = 0; i < n; i++) s += step(i); return s; }\n",
    )
    .unwrap();
    let lib = lib.to_str().unwrap().to_string();
    let prog = compile(
        dir.path(),
        "gcc",
        "c",
        "int walk_steps(int);\nint main(int c, char **v) { (void)v; return walk_steps(c * 1000); }\n",
        &["-O2", "-g", "-flto", &lib],
    );
    differential("gcc LTO", Some(&prog), &[], 10);
}

/// A symbol without debug info whose size spans units with it (`fake`, sized over the
/// code after it, the only named symbol there: `.symtab` removed): where no DWARF function
/// is, whether DWARF functions start between `fake` and an address decides whether `fake`
/// covers it, so the units between count too.
#[test]
fn a_symbol_spanning_units() {
    let dir = work();
    let d = dir.path();
    let write = |name: &str, text: &str| {
        let p = d.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let fake_s = write(
        "fake.s",
        ".text\n.globl fake\n.type fake,@function\nfake:\n nop\n ret\n.size fake, 8192\n\
         .section .note.GNU-stack,\"\",@progbits\n",
    );
    // assembled without debug info: `fake` is known to the symbol tables only
    let fake = d.join("fake.o").to_str().unwrap().to_string();
    let ok = Command::new("gcc")
        .args(["-c", &fake_s, "-o", &fake])
        .status()
        .unwrap()
        .success();
    assert!(ok, "gcc -c fake.s");
    let a = write(
        "a.c",
        "static __attribute__((noinline)) int fa(int x) { return x * 3 + x / 7; }\n\
         int a_entry(int x) { return fa(x) + 1; }\n",
    );
    let b = write(
        "b.c",
        "static __attribute__((noinline)) int fb(int x) { return x * 5 - x / 3; }\n\
         int b_entry(int x) { return fb(x) + 2; }\n",
    );
    let main = "int a_entry(int); int b_entry(int); void fake(void);\n\
                int main(int c, char **v) { (void)v; fake(); return a_entry(c) + b_entry(c); }\n";
    let prog = compile(
        d,
        "gcc",
        "c",
        main,
        &[
            "-O2",
            "-g",
            &fake,
            &a,
            &b,
            "-Wl,--export-dynamic-symbol=fake",
        ],
    );
    let ok = Command::new("objcopy")
        .args(["--strip-all", "--keep-section=.debug_*"])
        .arg(&prog)
        .status()
        .unwrap()
        .success();
    assert!(ok, "objcopy");
    differential("symbol spanning units", Some(&prog), &[], 10);
}

/// Units of types alone, as a header's types are repeated in every unit that includes it:
/// no root ranges and no `.debug_aranges` entries. With more than 64 of them (and more
/// than a quarter of the units) the index declined the file, and the whole table read
/// every unit: a 2 GB debug file of them was read whole for a walk (issue 40). Their
/// abbreviations show they hold no function and no inlined call, so they are not read.
#[test]
fn many_units_of_types_alone() {
    let dir = work();
    let d = dir.path();
    let header: String = (0..40)
        .map(|i| format!("struct kept_{i} {{ int a_{i}; long b_{i}; struct kept_{i} *next; }};\n"))
        .collect();
    std::fs::write(d.join("types.h"), header).unwrap();
    std::fs::write(d.join("types.c"), "#include \"types.h\"\n").unwrap();
    let types = d.join("types.o");
    let ok = Command::new("gcc")
        .args(["-g", "-O2", "-fno-eliminate-unused-debug-types", "-c"])
        .arg(d.join("types.c"))
        .arg("-o")
        .arg(&types)
        .status()
        .unwrap()
        .success();
    assert!(ok, "gcc -c types.c");
    let types = types.to_str().unwrap().to_string();
    let mut flags = vec!["-O2", "-g"];
    flags.extend(std::iter::repeat_n(types.as_str(), 100));
    let prog = compile(d, "gcc", "c", C_PROGRAM, &flags);
    differential("units of types alone", Some(&prog), &[], 10);
}

#[test]
fn clang_dwarf5() {
    if !have("clang") {
        eprintln!("clang is not installed: skipped");
        return;
    }
    let dir = work();
    let c = compile(dir.path(), "clang", "c", C_PROGRAM, &["-O2", "-gdwarf-5"]);
    differential("clang C", Some(&c), &[], 10);
    let cxx = compile(
        dir.path(),
        "clang++",
        "cpp",
        CXX_PROGRAM,
        &["-O2", "-gdwarf-5"],
    );
    differential("clang++ C++", Some(&cxx), &[], 10);
}

#[test]
fn split_debug_file() {
    let dir = work();
    let prog = compile(dir.path(), "g++", "cpp", CXX_PROGRAM, &["-O2", "-g"]);
    let debug = dir.path().join("prog.debug");
    let ok = |c: &mut Command| c.status().unwrap().success();
    assert!(ok(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&prog)
        .arg(&debug)));
    assert!(ok(Command::new("strip").arg(&prog)));
    differential("split", Some(&prog), &[&debug], 10);
}

/// Not a check: the figures for the report (`--nocapture` shows them).
#[test]
fn libc_timing() {
    let (libc, debug) = libc();
    let (lb, db) = (read(&libc), read(&debug));
    let t = Instant::now();
    let whole = build_symbol_table(Some(&lb), &[&db]).unwrap();
    let whole_time = t.elapsed();
    let table = SymbolTable::open(&whole.bytes).unwrap();
    let (lo, hi) = table
        .functions()
        .fold((u64::MAX, 0), |(l, h), f| (l.min(f.0), h.max(f.1)));
    let rels: Vec<u64> = (0..30u64).map(|i| lo + (hi - lo) / 30 * i + 17).collect();
    let (lb, db): (FileBytes, FileBytes) = (FileBytes::new(lb), FileBytes::new(db));
    let t = Instant::now();
    let od = OnDemandSymbols::new(Some(lb), &[db]).unwrap();
    let new_time = t.elapsed();
    let built = od.symbols_for(&rels).unwrap();
    let total = t.elapsed();
    let t = Instant::now();
    od.symbols_for(&rels[..1]).unwrap();
    let again = t.elapsed();
    eprintln!(
        "libc: whole build {whole_time:?}; on demand: new {new_time:?}, + symbols_for(30) = \
         {total:?} ({} line rows of {}); a further symbols_for(1) {again:?}",
        built.line_rows, whole.line_rows
    );
}

/// The file range of a section (which must not be compressed).
fn section_range(bytes: &[u8], name: &str) -> std::ops::Range<usize> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(bytes).unwrap();
    let (at, len) = file.section_by_name(name).unwrap().file_range().unwrap();
    at as usize..(at + len) as usize
}

/// File offsets in a DWARF32, 64-bit-address `.debug_aranges`: per set, its
/// `debug_info_offset` field and each tuple's length field.
fn aranges_fields(bytes: &[u8]) -> Vec<(usize, Vec<usize>)> {
    let r = section_range(bytes, ".debug_aranges");
    let mut out = Vec::new();
    let mut at = r.start;
    while at + 16 <= r.end {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let end = at + 4 + len;
        let mut tuples = Vec::new();
        let mut t = at + 16;
        while t + 16 <= end {
            let addr = u64::from_le_bytes(bytes[t..t + 8].try_into().unwrap());
            let n = u64::from_le_bytes(bytes[t + 8..t + 16].try_into().unwrap());
            if addr == 0 && n == 0 {
                break;
            }
            tuples.push(t + 8);
            t += 16;
        }
        out.push((at + 6, tuples));
        at = end;
    }
    out
}

fn declined(binary: Vec<u8>) -> String {
    match OnDemandSymbols::new(Some(FileBytes::new(binary)), &[]) {
        Ok(_) => "accepted".into(),
        Err(d) => d.0.to_string(),
    }
}

#[test]
fn declines_what_it_cannot_answer_for() {
    assert_eq!(
        OnDemandSymbols::new(None, &[]).unwrap_err().0,
        "no binary and no debug file"
    );
    assert!(declined(b"not an object file".to_vec()).contains("not one the builder reads"));
    let dir = work();
    let split = compile(
        dir.path(),
        "gcc",
        "c",
        C_PROGRAM,
        &["-O2", "-g", "-gsplit-dwarf"],
    );
    assert!(
        declined(read(&split)).contains("split DWARF"),
        "split DWARF"
    );
    let types = compile(
        dir.path(),
        "g++",
        "cpp",
        CXX_PROGRAM,
        &["-O2", "-gdwarf-4", "-fdebug-types-section"],
    );
    assert!(
        declined(read(&types)).contains(".debug_types"),
        "type units"
    );

    let prog = read(&compile(dir.path(), "gcc", "c", C_PROGRAM, &["-O2", "-g"]));
    assert_eq!(declined(prog.clone()), "accepted");
    let fields = aranges_fields(&prog);
    assert!(!fields.is_empty(), "gcc writes .debug_aranges");
    let mut no_unit = prog.clone();
    no_unit[fields[0].0..fields[0].0 + 4].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    assert!(declined(no_unit).contains("names a unit that is not there"));
    let mut bad_version = prog.clone();
    let version = fields[0].0 - 2;
    bad_version[version..version + 2].copy_from_slice(&99u16.to_le_bytes());
    assert!(declined(bad_version).contains("unreadable .debug_aranges"));
}

/// `.debug_aranges` that leave out most of each unit's code: the index's ranges still
/// hold the records (line sequences widen them; failing that, a picked unit whose records
/// stray makes every table the whole one), so the answers stay the whole table's.
#[test]
fn aranges_that_miss_records_still_give_the_whole_tables_answers() {
    let dir = work();
    let mut prog = read(&compile(dir.path(), "gcc", "c", C_PROGRAM, &["-O2", "-g"]));
    let whole = build_symbol_table(Some(&prog), &[]).unwrap();
    let mut starts = Vec::new();
    for (_, tuples) in aranges_fields(&prog) {
        for t in tuples {
            let addr = u64::from_le_bytes(prog[t - 8..t].try_into().unwrap());
            starts.push(addr);
            prog[t..t + 8].copy_from_slice(&1u64.to_le_bytes());
        }
    }
    let od = OnDemandSymbols::new(Some(FileBytes::new(prog)), &[]).unwrap();
    let table = SymbolTable::open(&whole.bytes).unwrap();
    let built = od.symbols_for(&starts).unwrap();
    let part = SymbolTable::open(&built.bytes).unwrap();
    for &rel in &starts {
        assert_eq!(answer(&part, rel), answer(&table, rel), "at {rel:#x}");
    }
    for rel in probes(&table, 500, 7) {
        let built = od.symbols_for(&[rel]).unwrap();
        let part = SymbolTable::open(&built.bytes).unwrap();
        assert_eq!(answer(&part, rel), answer(&table, rel), "at {rel:#x}");
    }
}

/// Garbled and truncated DWARF: declined, or tables built, but never a panic.
#[test]
fn hostile_dwarf_sections() {
    let dir = work();
    let prog = read(&compile(
        dir.path(),
        "g++",
        "cpp",
        CXX_PROGRAM,
        &["-O2", "-g"],
    ));
    let mut rng = Rng(0xbad);
    for name in [
        ".debug_aranges",
        ".debug_info",
        ".debug_abbrev",
        ".debug_line",
        ".debug_rnglists",
    ] {
        let r = section_range(&prog, name);
        for round in 0..24 {
            let mut bytes = prog.clone();
            if round % 3 == 0 {
                // truncated: the rest of the section is garbage
                let cut = r.start + rng.below(r.len() as u64) as usize;
                bytes[cut..r.end].fill(0xff);
            } else {
                for _ in 0..1 + rng.below(8) {
                    let at = r.start + rng.below(r.len() as u64) as usize;
                    bytes[at] = rng.below(256) as u8;
                }
            }
            let Ok(od) = OnDemandSymbols::new(Some(FileBytes::new(bytes)), &[]) else {
                continue;
            };
            let rels: Vec<u64> = (0..20).map(|_| rng.below(0x4000)).collect();
            let mut sorted = rels.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if let Ok(built) = od.symbols_for(&sorted) {
                let t = SymbolTable::open(&built.bytes).unwrap();
                for rel in sorted {
                    answer(&t, rel);
                }
            }
            let _ = (od.inputs(), od.sources());
        }
    }
}
