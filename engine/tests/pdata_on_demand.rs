//! The `.pdata` path of `OnDemandUnwind` against the whole table, on wine's Windows x64
//! DLLs (Debian's `wine64`, which `test.sh` installs; missing is a failure) and a
//! mingw-w64 program compiled here: `find_rule` must give what
//! `UnwindTable::open(&build_from_elf(..).bytes).find` gives — the same record, and for a
//! slot referring to an expression the same expression bytes — at every address of every
//! eighth function and one byte around it, at every function's first and last byte and
//! the bytes just outside, and at seeded pseudo-random RVAs across the image (leaf code,
//! padding, data); `sources()` and `inputs()` must equal the whole build's too.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use engine::binary::FileBytes;
use engine::unwind::{build_from_elf, OnDemandUnwind, Rule, Slot, SlotKind, UnwindTable};

const WINE_DLLS: &str = "/usr/lib/x86_64-linux-gnu/wine/x86_64-windows";

/// A rule with each expression slot's offset replaced by its bytes.
fn normalized(rule: Option<Rule<'_>>) -> Option<(engine::unwind::RuleRecord, Vec<Vec<u8>>)> {
    let rule = rule?;
    let mut rec = rule.record;
    let mut exprs = Vec::new();
    let mut fix = |s: &mut Slot| {
        if matches!(
            s.kind(),
            Some(SlotKind::Expression | SlotKind::ValExpression)
        ) {
            exprs.push(rule.expression(*s).unwrap().to_vec());
            s.value = 0;
        }
    };
    fix(&mut rec.cfa);
    fix(&mut rec.ra);
    for r in &mut rec.regs {
        fix(r);
    }
    Some((rec, exprs))
}

/// The image's `.pdata` entries (begin, end) and its size.
fn layout(data: &[u8]) -> (Vec<(u64, u64)>, u64) {
    use object::read::pe::{ImageNtHeaders, ImageOptionalHeader, PeFile64};
    use object::LittleEndian as LE;
    let pe = PeFile64::parse(data).unwrap();
    let size = u64::from(pe.nt_headers().optional_header().size_of_image());
    let dir = pe
        .data_directory(object::pe::IMAGE_DIRECTORY_ENTRY_EXCEPTION)
        .unwrap();
    let pdata = pe
        .section_table()
        .pe_data_at(data, dir.virtual_address.get(LE))
        .unwrap();
    let n = dir.size.get(LE) as usize / 12;
    let entries = pdata
        .chunks_exact(12)
        .take(n)
        .map(|b| {
            let w = |k: usize| u64::from(u32::from_le_bytes(b[k..k + 4].try_into().unwrap()));
            (w(0), w(4))
        })
        .collect();
    (entries, size)
}

fn check_equal(name: &str, data: Vec<u8>) -> usize {
    let whole = build_from_elf(&data, &[]).unwrap();
    let table = UnwindTable::open(&whole.bytes).unwrap();
    let (entries, size) = layout(&data);
    assert!(entries.len() > 10, "{name}: .pdata has entries");
    let on = OnDemandUnwind::new(FileBytes::new(data), &[]).unwrap();
    assert!(on.per_fde(), "{name}: answered function by function");
    let mut addresses: Vec<u64> = Vec::new();
    for (i, &(b, e)) in entries.iter().enumerate() {
        addresses.extend([b.saturating_sub(1), b, e.saturating_sub(1), e]);
        if i % 8 == 0 {
            addresses.extend(b.saturating_sub(1)..=e);
        }
    }
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        addresses.push(x.wrapping_mul(0x2545_f491_4f6c_dd1d) % size);
    }
    for &rel in &addresses {
        assert_eq!(
            normalized(on.find_rule(rel)),
            normalized(table.find(rel)),
            "{name}: rule at {rel:#x}"
        );
    }
    assert_eq!(on.sources(), table.sources(), "{name}: sources");
    assert_eq!(on.inputs(), whole.inputs, "{name}: inputs");
    addresses.len()
}

#[test]
fn wine_dlls_equal_the_whole_table() {
    for dll in ["ntdll.dll", "kernelbase.dll", "msvcrt.dll", "ucrtbase.dll"] {
        let path = Path::new(WINE_DLLS).join(dll);
        let data = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{} must exist (test.sh installs wine64): {e}",
                path.display()
            )
        });
        let n = check_equal(dll, data);
        eprintln!("{dll}: {n} addresses equal");
    }
}

#[test]
fn a_mingw_program_equals_the_whole_table() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("p.c");
    std::fs::write(
        &src,
        "#include <malloc.h>\n#include <stdlib.h>\n\
         static int cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }\n\
         __attribute__((noinline)) double f(double x, int n) { char *p = alloca(n); p[0] = 1;\n\
           int v[] = {3, 1, n}; qsort(v, 3, sizeof v[0], cmp); return x * v[0] + p[0]; }\n\
         int main(int argc, char **argv) { return (int)f(argc, argc + 8); }\n",
    )
    .unwrap();
    let exe = dir.path().join("p.exe");
    let status = std::process::Command::new("x86_64-w64-mingw32-gcc")
        .args(["-O2", "-g"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("x86_64-w64-mingw32-gcc (test.sh installs gcc-mingw-w64-x86-64)");
    assert!(status.success());
    check_equal("p.exe", std::fs::read(&exe).unwrap());
}

/// Entries out of order: the whole table answers (and still equals itself).
#[test]
fn unsorted_entries_fall_back_to_the_whole_table() {
    let path = Path::new(WINE_DLLS).join("kernelbase.dll");
    let mut data = std::fs::read(&path).unwrap();
    let (entries, _) = layout(&data);
    // swap the first two entries in the file's .pdata bytes
    let first = entries[0];
    let needle: Vec<u8> = [first.0 as u32, first.1 as u32]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let at = data
        .windows(8)
        .position(|w| w == needle.as_slice())
        .unwrap();
    let (a, b) = data[at..at + 24].split_at_mut(12);
    a.swap_with_slice(b);
    let whole = build_from_elf(&data, &[]).unwrap();
    let table = UnwindTable::open(&whole.bytes).unwrap();
    let on = OnDemandUnwind::new(FileBytes::new(data), &[]).unwrap();
    assert!(!on.per_fde());
    for rel in [entries[0].0, entries[1].0, entries[5].0 + 3] {
        assert_eq!(normalized(on.find_rule(rel)), normalized(table.find(rel)));
    }
}
