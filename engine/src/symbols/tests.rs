//! Tests of the symbol table against independent references.
//!
//! Programs are compiled at test time (gcc, g++, clang, rustc — a missing compiler skips
//! its test with a printed reason) and every address of every DWARF function is looked up
//! both in our table and with the `addr2line` crate's `find_frames`; names of stripped
//! binaries are compared with `nm`. Hostile-bytes tests truncate and flip bytes of a real
//! table and require `open` to fail cleanly or lookups not to panic.

use std::path::{Path, PathBuf};
use std::process::Command;

use object::Object;

use super::*;

const C_SOURCE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include "helper.h"

static int __attribute__((noinline)) leaf(int x) { return x * 3 + (x >> 2); }

static inline int square_plus(int x) {
    int y = x * x;
    if (y > 1000) y = leaf(y);
    return y + 1;
}

static inline int twice(int x) {
    return square_plus(x) + square_plus(x + 1);
}

int __attribute__((noinline)) compute(int n) {
    int acc = 0;
    for (int i = 0; i < n; i++) {
        acc += twice(i) ^ helper_mix(acc, i);
    }
    return acc;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    printf("%d\n", compute(n));
    return 0;
}
"#;

const C_HEADER: &str = r#"
static inline int helper_mix(int a, int b) {
    int r = a * 31 + b;
    if (r & 1) r ^= 0x5555;
    return r;
}
"#;

const CPP_SOURCE: &str = r#"
#include <cstdio>
#include <vector>
#include <algorithm>
#include <string>

namespace shapes {
struct Shape {
    virtual ~Shape() {}
    virtual double area() const = 0;
};
struct Square : Shape {
    double side;
    explicit Square(double s) : side(s) {}
    double area() const override { return side * side; }
};
template <typename T> struct Box {
    T value;
    T get() const { return value; }
    Box operator+(const Box &o) const { return Box{value + o.value}; }
};
namespace {
int __attribute__((noinline)) hidden(int x) { return x * 7; }
}
}  // namespace shapes

template <typename T> T __attribute__((noinline)) sum(const std::vector<T> &v) {
    T total{};
    for (const T &x : v) total += x;
    return total;
}

int main(int argc, char **) {
    std::vector<int> v;
    for (int i = 0; i < argc * 10; i++) v.push_back(i);
    std::sort(v.begin(), v.end(), [](int a, int b) { return a > b; });
    shapes::Shape *s = new shapes::Square(argc);
    shapes::Box<int> a{argc}, b{2};
    std::string name = "x" + std::to_string(argc);
    std::printf("%d %f %d %d %s\n", sum(v), s->area(), (a + b).get(), shapes::hidden(argc),
                name.c_str());
    delete s;
    return v.at(0);
}
"#;

const RUST_SOURCE: &str = r#"
#[inline(always)]
fn inner(x: u64) -> u64 { x.wrapping_mul(2654435761) ^ (x >> 3) }
#[inline(never)]
fn outer(v: &[u64]) -> u64 { v.iter().map(|&x| inner(x)).sum() }
mod shapes {
    pub trait Area { fn area(&self) -> f64; }
    pub struct Sq(pub f64);
    impl Area for Sq { fn area(&self) -> f64 { self.0 * self.0 } }
}
fn main() {
    use shapes::Area;
    let n = std::env::args().count() as u64;
    let v: Vec<u64> = (0..n * 100).collect();
    let a: Box<dyn Area> = Box::new(shapes::Sq(n as f64));
    println!("{} {}", outer(&v), a.area());
    let o: Option<u8> = if n > 100 { None } else { Some(1) };
    println!("{}", o.unwrap());
}
"#;

fn tool_exists(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

/// Runs a command; `None` (with the reason printed) if the tool is missing or fails.
fn run(cmd: &mut Command) -> Option<()> {
    match cmd.output() {
        Ok(o) if o.status.success() => Some(()),
        Ok(o) => {
            eprintln!(
                "skipping: {cmd:?} failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            None
        }
        Err(e) => {
            eprintln!("skipping: {cmd:?} could not run: {e}");
            None
        }
    }
}

fn compile_c(dir: &Path, compiler: &str, flags: &[&str]) -> Option<PathBuf> {
    std::fs::write(dir.join("prog.c"), C_SOURCE).ok()?;
    std::fs::write(dir.join("helper.h"), C_HEADER).ok()?;
    let out = dir.join(format!("prog-{compiler}"));
    run(Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(dir.join("prog.c")))?;
    Some(out)
}

fn compile_cpp(dir: &Path, compiler: &str, flags: &[&str]) -> Option<PathBuf> {
    std::fs::write(dir.join("prog.cpp"), CPP_SOURCE).ok()?;
    let out = dir.join(format!("prog-cpp-{compiler}"));
    run(Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(dir.join("prog.cpp")))?;
    Some(out)
}

fn compile_rust(dir: &Path) -> Option<PathBuf> {
    std::fs::write(dir.join("prog.rs"), RUST_SOURCE).ok()?;
    let out = dir.join("prog-rs");
    run(Command::new("rustc")
        .args(["-g", "-C", "opt-level=2", "--edition", "2021", "-o"])
        .arg(&out)
        .arg(dir.join("prog.rs")))?;
    Some(out)
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn link_base_of(bytes: &[u8]) -> u64 {
    let file = object::File::parse(bytes).expect("test binary parses");
    crate::binary::link_base(&file)
}

/// One frame as compared: (function, file, line, column, inlined).
type Cmp = (
    Option<String>,
    Option<String>,
    Option<u32>,
    Option<u32>,
    bool,
);

/// Whether the reference's outermost frame was named from the symbol table (no DIE): then
/// any alias at that address is as good as ours.
type FromSymtab = bool;

fn ours(table: &SymbolTable<'_>, offset: u64) -> Vec<Cmp> {
    let mut out = Vec::new();
    table.lookup(offset, &mut out);
    out.iter()
        .map(|f| {
            (
                f.function.map(str::to_owned),
                f.file.map(str::to_owned),
                f.line,
                f.column,
                f.inlined,
            )
        })
        .collect()
}

fn reference(loader: &addr2line::Loader, svma: u64) -> (Vec<Cmp>, FromSymtab) {
    let mut frames = loader.find_frames(svma).expect("addr2line find_frames");
    let mut out: Vec<Cmp> = Vec::new();
    let mut from_symtab = false;
    while let Some(f) = frames.next().expect("addr2line frame") {
        from_symtab = f.dw_die_offset.is_none();
        let name = f
            .function
            .as_ref()
            .and_then(|n| n.raw_name().ok())
            .map(|n| demangle(&n).into_owned());
        let loc = f.location.as_ref();
        out.push((
            name,
            loc.and_then(|l| l.file).map(str::to_owned),
            loc.and_then(|l| l.line),
            loc.and_then(|l| l.column).filter(|&c| c != 0),
            true,
        ));
    }
    if let Some(last) = out.last_mut() {
        last.4 = false;
    }
    (out, from_symtab)
}

/// Whether our name matches the reference's: equal, or (for a DW_AT_name the reference
/// did not qualify) ours is it qualified by a scope. A reference name that is still
/// mangled (cpp_demangle cannot read it; we then use DW_AT_name) matches any of ours.
///
/// Rust: we name functions as gdb does, by their qualified DW_AT_name
/// (`std::rt::lang_start::{closure#0}<()>`, `alloc::vec::{impl#13}::drop<T>`), while
/// addr2line demangles the legacy linkage name (`std::rt::lang_start::{{closure}}`,
/// `<alloc::vec::Vec<T> as core::ops::Drop>::drop`, `call_once{{vtable.shim}}`). The two
/// schemes differ in the path, so here only the function's own name is compared (its last
/// segment, without generics or `{{…}}` suffixes); the full names are checked against
/// gdb itself in `server/tests/gdb_compare`.
fn same_name(ours: &Option<String>, theirs: &Option<String>, rust: bool) -> bool {
    match (ours, theirs) {
        (Some(a), Some(b)) if rust && rust_own_name(a) == rust_own_name(b) => true,
        // std's internal symbols get a linkage name outside their path
        // (`__rustc::rust_begin_unwind` for `std::panicking::panic_handler`); gdb and we
        // use the path.
        (Some(_), Some(b)) if rust && b.starts_with("__rustc::") => true,
        (Some(_), Some(b)) if b.starts_with("_Z") => true,
        (Some(a), Some(b)) => a == b || a.ends_with(&format!("::{b}")),
        (None, None) => true,
        _ => false,
    }
}

/// The last path segment of a Rust name, without generics or a `{{…}}` suffix:
/// `a::{impl#2}::drop<T>`, `<a::B as c::Drop>::drop` → `drop`; `{closure#0}` → `{closure}`.
fn rust_own_name(name: &str) -> String {
    let canonical = rust_canonical(name);
    // a v0 shim suffix (`call_once::{shim:vtable#0}`) names the shimmed function
    let last = canonical
        .rsplit("::")
        .find(|seg| !seg.starts_with("{shim"))
        .unwrap_or(&canonical);
    match last.find("{{") {
        Some(i) if i > 0 => last[..i].to_string(),
        _ => last.to_string(),
    }
}

/// `a::b::{closure#0}<T>::c<U>` and `a::b::{{closure}}::c` → `a::b::{closure}::c`.
fn rust_canonical(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    let mut prev = ' ';
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            // the `>` of a `fn(..) -> T` arrow closes nothing
            '>' if prev == '-' => {}
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        prev = c;
    }
    out.split("::")
        .filter(|s| !s.is_empty())
        .map(|seg| {
            let bare = seg.trim_matches(|c| c == '{' || c == '}');
            let kind = bare.split('#').next().unwrap_or(bare);
            if seg.starts_with('{') {
                format!("{{{kind}}}")
            } else {
                seg.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("::")
}

/// Compares every address (at most `budget` spread evenly) of every DWARF function.
/// Returns (addresses compared, mismatches), printing the first mismatches, and adds
/// every function name our lookups returned to `names`.
fn compare_with_addr2line(
    binary: &[u8],
    debug_path: &Path,
    table: &SymbolTable<'_>,
    budget: usize,
    names: &mut std::collections::BTreeSet<String>,
    rust: bool,
) -> (usize, usize) {
    let loader = addr2line::Loader::new(debug_path).expect("addr2line loads");
    let aliases = nm_text_symbols(debug_path).unwrap_or_default();
    let base = link_base_of(binary);
    let functions: Vec<(u64, u64)> = table
        .functions()
        .filter(|f| f.3 == Some(SymbolSource::Dwarf))
        .map(|f| (f.0, f.1))
        .collect();
    let total: u64 = functions.iter().map(|(s, e)| e - s).sum();
    let step = (total / budget.max(1) as u64).max(1);
    let (mut compared, mut mismatches) = (0usize, 0usize);
    let mut skip = 0u64;
    for (start, end) in functions {
        let mut addr = start + skip.min(end - start);
        while addr < end {
            let a = ours(table, addr);
            let (b, from_symtab) = reference(&loader, base + addr);
            compared += 1;
            names.extend(a.iter().filter_map(|f| f.0.clone()));
            // Several DWARF subprograms at one address (assembler aliases such as
            // `__sigsetjmp` / `__GI___sigsetjmp`): addr2line picks one arbitrarily, so any
            // symbol-table alias at our function's start is accepted.
            let alias = |ours: &Option<String>, theirs: &Option<String>| {
                let mut raw = Vec::new();
                table.lookup(addr, &mut raw);
                let start = raw.last().and_then(|f| f.function_start);
                let at = |n: &Option<String>| {
                    n.as_ref().is_some_and(|n| {
                        aliases
                            .iter()
                            .any(|(a, s)| Some(a.wrapping_sub(base)) == start && s == n)
                    })
                };
                // glibc's internal hidden aliases (`__GI_x` for `x`) are not all in .symtab.
                let gi = |a: &Option<String>, b: &Option<String>| matches!((a, b), (Some(a), Some(b)) if b.strip_prefix("__GI_") == Some(a.as_str()));
                (at(ours) && at(theirs)) || gi(ours, theirs)
            };
            let ok = a.len() == b.len()
                && a.iter().zip(&b).enumerate().all(|(i, (x, y))| {
                    (same_name(&x.0, &y.0, rust)
                        || (i + 1 == a.len() && (from_symtab || alias(&x.0, &y.0))))
                        && x.1 == y.1
                        && x.2 == y.2
                        && x.3 == y.3
                        && x.4 == y.4
                });
            if !ok {
                mismatches += 1;
                if mismatches <= 3 {
                    let mut raw = Vec::new();
                    table.lookup(addr, &mut raw);
                    eprintln!(
                        "mismatch at {addr:#x}:\n  ours: {a:?}\n  addr2line: {b:?} (symtab: {from_symtab})\n  raw: {:?}",
                        raw.last()
                    );
                }
            }
            addr += step;
        }
        skip = addr - end;
    }
    (compared, mismatches)
}

fn check_program(path: &Path, expect_inlines: bool) -> std::collections::BTreeSet<String> {
    check_program_lang(path, expect_inlines, false)
}

fn check_program_lang(
    path: &Path,
    expect_inlines: bool,
    rust: bool,
) -> std::collections::BTreeSet<String> {
    let bytes = read(path);
    let built = build_symbol_table(Some(&bytes), &[]).expect("table builds");
    assert!(built.functions > 0 && built.line_rows > 0);
    if expect_inlines {
        assert!(built.inline_records > 0, "expected inlined calls");
    }
    let table = SymbolTable::open(&built.bytes).expect("table opens");
    let mut names = std::collections::BTreeSet::new();
    let (compared, mismatches) =
        compare_with_addr2line(&bytes, path, &table, 200_000, &mut names, rust);
    eprintln!(
        "{}: {compared} addresses compared, {mismatches} mismatches; {} functions, {} rows, {} inlines, {} bytes",
        path.display(),
        built.functions,
        built.line_rows,
        built.inline_records,
        built.bytes.len()
    );
    assert!(compared > 100);
    assert_eq!(mismatches, 0);
    names.extend(table.functions().filter_map(|f| f.2.map(str::to_owned)));
    names
}

#[test]
fn gcc_c_matches_addr2line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(p) = compile_c(dir.path(), "gcc", &["-O2", "-g"]) else {
        return;
    };
    let names = check_program(&p, true);
    assert!(names.iter().any(|n| n == "compute"));
    assert!(names.iter().any(|n| n == "leaf"));
}

#[test]
fn gcc_c_dwarf4_and_compressed_sections_match_addr2line() {
    let dir = tempfile::tempdir().expect("tempdir");
    for flags in [
        &["-O2", "-gdwarf-4"][..],
        &["-O2", "-g", "-gz=zlib"][..],
        &["-O2", "-g", "-gz=zstd"][..],
    ] {
        let Some(p) = compile_c(dir.path(), "gcc", flags) else {
            continue;
        };
        eprintln!("flags {flags:?}");
        check_program(&p, true);
    }
}

#[test]
fn clang_c_matches_addr2line() {
    if !tool_exists("clang") {
        eprintln!("skipping: clang not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(p) = compile_c(dir.path(), "clang", &["-O2", "-g"]) else {
        return;
    };
    check_program(&p, true);
}

#[test]
fn cpp_matches_addr2line_with_sensible_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(p) = compile_cpp(dir.path(), "g++", &["-O2", "-g"]) else {
        return;
    };
    let names = check_program(&p, true);
    for expected in [
        "shapes::Square::area",
        "sum<int>",
        "shapes::(anonymous namespace)::hidden",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    // The sort comparator lambda is named after its closure type, whichever way the
    // compiler recorded it (mangled `{lambda(int, int)#1}` or DW_AT_name `<lambda(int, int)>`).
    assert!(
        names.iter().any(|n| n.contains("lambda(int, int)")),
        "{names:?}"
    );
    // No name is left mangled.
    assert!(names.iter().all(|n| !n.starts_with("_Z")), "{names:?}");
    // No name keeps a parameter list after its last template argument.
    for n in &names {
        assert!(!n.ends_with(')') || n.ends_with("operator()"), "{n}");
    }
}

#[test]
fn clang_cpp_matches_addr2line() {
    if !tool_exists("clang++") {
        eprintln!("skipping: clang++ not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(p) = compile_cpp(dir.path(), "clang++", &["-O2", "-g"]) else {
        return;
    };
    check_program(&p, true);
}

#[test]
fn rust_matches_addr2line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(p) = compile_rust(dir.path()) else {
        return;
    };
    let names = check_program_lang(&p, false, true);
    assert!(
        names.iter().any(|n| n == "prog::outer"),
        "prog::outer missing"
    );
    assert!(names
        .iter()
        .all(|n| !n.contains("::h") || !n.ends_with('E')));
}

/// Text symbols by address from `nm` (raw names, demangled by us for comparison).
/// The PLT stubs objdump names (`<puts@plt>:`) in `.plt` and `.plt.sec`, as (address,
/// name): binutils' synthetic symbols, the names gdb shows for a frame in a stub.
fn objdump_plt_stubs(objdump: &str, path: &Path) -> Vec<(u64, String)> {
    let out = Command::new(objdump)
        .args(["-d", "--section=.plt", "--section=.plt.sec"])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("{objdump}: {e}"));
    assert!(out.status.success(), "{objdump} -d {}", path.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (addr, rest) = l.split_once(" <")?;
            let name = rest.strip_suffix(">:")?;
            name.ends_with("@plt")
                .then(|| Some((u64::from_str_radix(addr.trim(), 16).ok()?, name.to_string())))?
        })
        .collect()
}

/// Every PLT stub objdump names is named the same in our table, for the x86_64 layouts
/// (`.plt` with its header; `.plt.sec` when the linker makes IBT stubs) and aarch64's.
#[test]
fn plt_stubs_are_named_as_objdump_names_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: [(&str, &[&str], &str); 3] = [
        ("gcc", &["-O2", "-g"], "objdump"),
        (
            "gcc",
            &["-O2", "-g", "-fcf-protection=full", "-Wl,-z,ibtplt"],
            "objdump",
        ),
        (
            "aarch64-linux-gnu-gcc",
            &["-O2", "-g"],
            "aarch64-linux-gnu-objdump",
        ),
    ];
    for (compiler, flags, objdump) in cases {
        assert!(
            tool_exists(compiler) && tool_exists(objdump),
            "{compiler}, {objdump} (test.sh installs them)"
        );
        let path = compile_c(dir.path(), compiler, flags).expect("compiles");
        let stubs = objdump_plt_stubs(objdump, &path);
        assert!(
            !stubs.is_empty(),
            "{compiler} {flags:?}: objdump names no PLT stub"
        );
        let bytes = read(&path);
        let base = link_base_of(&bytes);
        let built = build_symbol_table(Some(&bytes), &[]).expect("table builds");
        let table = SymbolTable::open(&built.bytes).expect("table opens");
        for (addr, name) in &stubs {
            for at in [*addr, addr + 15] {
                let frames = ours(&table, at - base);
                let got = frames.last().and_then(|f| f.0.clone());
                assert_eq!(
                    got.as_deref(),
                    Some(name.as_str()),
                    "{compiler} {flags:?} at {at:#x}"
                );
            }
        }
    }
}

fn nm_text_symbols(path: &Path) -> Option<Vec<(u64, String)>> {
    use object::ObjectSection;
    let bytes = read(path);
    let file = object::File::parse(&*bytes).ok()?;
    let in_text = |addr: u64| {
        // By name, not kind: a debug file's .text is NOBITS.
        file.sections().any(|s| {
            let code = s
                .name()
                .is_ok_and(|n| [".text", ".init", ".fini"].iter().any(|p| n.starts_with(p)));
            code && (s.address()..s.address() + s.size()).contains(&addr)
        })
    };
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(path)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    Some(
        text.lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let kind = it.next()?;
                let name = it.next()?;
                (matches!(kind, "T" | "t" | "W" | "i") && in_text(addr))
                    .then(|| (addr, demangle(name).into_owned()))
            })
            .collect(),
    )
}

#[test]
fn stripped_binaries_use_symtab_names_matching_nm() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (compile, name) in [
        (compile_c(dir.path(), "gcc", &["-O2", "-g"]), "c"),
        (compile_cpp(dir.path(), "g++", &["-O2", "-g"]), "c++"),
    ] {
        let Some(p) = compile else { continue };
        let stripped = dir.path().join(format!("stripped-{name}"));
        if run(Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(&stripped)
            .arg(&p))
        .is_none()
        {
            continue;
        }
        let bytes = read(&stripped);
        let built = build_symbol_table(Some(&bytes), &[]).expect("builds");
        assert_eq!(built.line_rows, 0);
        assert!(built.sources.contains(&SymbolSource::Symtab));
        let table = SymbolTable::open(&built.bytes).expect("opens");
        let Some(symbols) = nm_text_symbols(&stripped) else {
            eprintln!("skipping: nm failed");
            return;
        };
        let base = link_base_of(&bytes);
        let mut checked = 0;
        for (addr, _) in &symbols {
            let aliases: Vec<&String> = symbols
                .iter()
                .filter(|(a, _)| a == addr)
                .map(|(_, n)| n)
                .collect();
            let mut out = Vec::new();
            assert!(table.lookup(addr - base, &mut out), "{addr:#x} not found");
            let f = out.last().expect("a frame");
            assert_eq!(f.function_start, Some(addr - base));
            assert!(
                f.function.is_some_and(|n| aliases.iter().any(|a| *a == n)),
                "{addr:#x}: {:?} not among {aliases:?}",
                f.function
            );
            assert!(matches!(
                f.source,
                SymbolSource::Symtab | SymbolSource::Dynsym
            ));
            checked += 1;
        }
        assert!(checked > 5);
        // The same binary with its unstripped self as the debug file gets DWARF back.
        let debug = read(&p);
        let built = build_symbol_table(Some(&bytes), &[&debug]).expect("builds");
        assert!(built.line_rows > 0 && built.sources.contains(&SymbolSource::Dwarf));
    }
}

/// libc with its Debian debug file found by build-id; skipped without libc6-dbg.
#[test]
fn libc_with_debug_file_matches_addr2line() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let Ok(bytes) = std::fs::read(libc) else {
        eprintln!("skipping: no {}", libc.display());
        return;
    };
    let Some(id) = object::File::parse(&*bytes)
        .ok()
        .and_then(|f| f.build_id().ok().flatten().map(<[u8]>::to_vec))
    else {
        eprintln!("skipping: libc has no build-id");
        return;
    };
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let debug_path = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &hex[..2],
        &hex[2..]
    ));
    let Ok(debug) = std::fs::read(&debug_path) else {
        eprintln!(
            "skipping: libc6-dbg not installed ({} missing)",
            debug_path.display()
        );
        return;
    };
    let t = std::time::Instant::now();
    let built = build_symbol_table(Some(&bytes), &[&debug]).expect("libc table builds");
    eprintln!(
        "libc: built in {:?}: {} bytes, {} functions, {} rows, {} inlines, sources {:?}, {} warnings",
        t.elapsed(),
        built.bytes.len(),
        built.functions,
        built.line_rows,
        built.inline_records,
        built.sources,
        built.warnings.len()
    );
    let table = SymbolTable::open(&built.bytes).expect("opens");
    let mut names = std::collections::BTreeSet::new();
    let (compared, mismatches) =
        compare_with_addr2line(&bytes, &debug_path, &table, 20_000, &mut names, false);
    eprintln!("libc: {compared} compared, {mismatches} mismatches");
    assert!(compared > 10_000);
    // A handful of addresses where DWARF ranges overlap oddly is tolerated in libc.
    assert!(mismatches * 1000 <= compared, "{mismatches} of {compared}");
    // Exported functions resolve.
    let file = object::File::parse(&*bytes).expect("parses");
    let base = crate::binary::link_base(&file);
    for name in ["malloc", "abort", "printf"] {
        use object::ObjectSymbol;
        let sym = file
            .dynamic_symbols()
            .find(|s| s.name() == Ok(name))
            .expect("libc exports it");
        let mut out = Vec::new();
        assert!(table.lookup(sym.address() - base, &mut out));
        let outer = out.last().expect("frame");
        assert_eq!(outer.function_start, Some(sym.address() - base), "{name}");
    }
}

fn sample_table() -> Option<Vec<u8>> {
    let dir = tempfile::tempdir().ok()?;
    let p = compile_c(dir.path(), "gcc", &["-O2", "-g"])?;
    Some(build_symbol_table(Some(&read(&p)), &[]).ok()?.bytes)
}

fn exercise(bytes: &[u8]) {
    if let Ok(table) = SymbolTable::open(bytes) {
        let mut out = Vec::new();
        for addr in (0..0x3000u64).step_by(7).chain([u64::MAX, 1 << 32]) {
            out.clear();
            table.lookup(addr, &mut out);
        }
        let _ = table.functions().count();
        let _ = table.sources();
    }
}

#[test]
fn hostile_bytes_never_panic() {
    let Some(bytes) = sample_table() else { return };
    for len in 0..bytes.len() {
        let r = SymbolTable::open(&bytes[..len]);
        assert!(r.is_err(), "a truncated table must not open ({len})");
    }
    let mut copy = bytes.clone();
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            copy[i] ^= flip;
            exercise(&copy);
            copy[i] ^= flip;
        }
    }
    assert!(matches!(
        SymbolTable::open(b"PMSYMTAB"),
        Err(SymbolsError::TableTruncated)
    ));
    let mut wrong = bytes.clone();
    wrong[8] = 99;
    assert_eq!(
        SymbolTable::open(&wrong).map(|_| ()).map_err(|e| e.code()),
        Err("symbol-table-version")
    );
}

#[test]
fn garbage_input_is_an_error_not_a_panic() {
    assert_eq!(
        build_symbol_table(Some(b"not an elf"), &[])
            .map(|_| ())
            .map_err(|e| e.code()),
        Err("object-unreadable")
    );
    assert_eq!(
        build_symbol_table(None, &[])
            .map(|_| ())
            .map_err(|e| e.code()),
        Err("no-input")
    );
}

/// Measurements for the report (run in release: `cargo test --release -p postmortem-engine
/// --lib symbols::tests::measure_libc -- --ignored --nocapture`).
#[test]
#[ignore = "measurement, not a check"]
fn measure_libc() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let Ok(bytes) = std::fs::read(libc) else {
        return;
    };
    let Some(id) = object::File::parse(&*bytes)
        .ok()
        .and_then(|f| f.build_id().ok().flatten().map(<[u8]>::to_vec))
    else {
        return;
    };
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let path = format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..]);
    let Ok(debug) = std::fs::read(&path) else {
        return;
    };
    let t = std::time::Instant::now();
    let built = build_symbol_table(Some(&bytes), &[&debug]).expect("builds");
    let build_time = t.elapsed();
    let dbg = object::File::parse(&*debug).expect("parses");
    let dwarf_size: usize = [".debug_info", ".debug_line"]
        .iter()
        .filter_map(|n| {
            use object::ObjectSection;
            dbg.section_by_name(n)
                .and_then(|s| s.uncompressed_data().ok().map(|d| d.len()))
        })
        .sum();
    let table = SymbolTable::open(&built.bytes).expect("opens");
    let addrs: Vec<u64> = table
        .functions()
        .flat_map(|f| [f.0, (f.0 + f.1) / 2])
        .collect();
    let mut out = Vec::with_capacity(64);
    let t = std::time::Instant::now();
    let mut found = 0usize;
    for _ in 0..20 {
        for &a in &addrs {
            out.clear();
            found += usize::from(table.lookup(a, &mut out));
        }
    }
    let per = t.elapsed() / (20 * addrs.len() as u32);
    eprintln!(
        "libc: build {build_time:?}; table {} bytes vs .debug_info+.debug_line {dwarf_size} bytes \
         (uncompressed); {} functions, {} rows, {} inlines; lookup {per:?} per address \
         ({found} found)",
        built.bytes.len(),
        built.functions,
        built.line_rows,
        built.inline_records
    );
}

/// The source files a table lists are the files the compiler read, spelled as a frame
/// names them (the compilation directory joined): the program and the header it includes,
/// each once (`postmortem upload --include-sources` bundles them).
#[test]
fn source_files_are_the_compiled_files_each_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(p) = compile_c(dir.path(), "gcc", &["-O2", "-g"]) else {
        return;
    };
    let bytes = read(&p);
    let built = build_symbol_table(Some(&bytes), &[]).expect("table builds");
    let table = SymbolTable::open(&built.bytes).expect("table opens");
    let files = table.source_files();
    for name in ["prog.c", "helper.h"] {
        let path = dir.path().join(name);
        let path = path.to_str().expect("a UTF-8 path");
        assert_eq!(
            files.iter().filter(|f| **f == path).count(),
            1,
            "{path} in {files:?}"
        );
    }
}
