//! Breakpad `.sym` files made by `dump_syms` from real binaries, against the binaries
//! themselves: every `STACK CFI` row we translate must equal the rule our `.eh_frame`
//! builder reads from the same address of the same binary, and the `.sym` symbol table
//! must name the program's functions as the DWARF-built one does.
//!
//! Needs `dump_syms` on the PATH (`cargo install --locked dump_syms`; `test.sh` does it)
//! and gcc.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use postmortem_engine::breakpad::symbols::build_symbol_table_breakpad;
use postmortem_engine::breakpad::unwind::build_from_breakpad;
use postmortem_engine::dump::Arch;
use postmortem_engine::symbols::{build_symbol_table, SymbolSource, SymbolTable};
use postmortem_engine::unwind::{build_from_elf, rule::callee_saved, Slot, SlotKind, UnwindTable};

fn dump_syms(binary: &Path) -> String {
    let out = Command::new("dump_syms")
        .arg(binary)
        .output()
        .expect("run dump_syms (cargo install --locked dump_syms; see test.sh)");
    assert!(out.status.success(), "dump_syms {}", binary.display());
    String::from_utf8(out.stdout).unwrap()
}

/// The libc this test process runs with, from /proc/self/maps.
fn own_libc() -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let path = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so"))
        .expect("libc mapped in this process");
    PathBuf::from(path)
}

/// Addresses where a `STACK CFI` record starts a row.
fn cfi_addresses(sym: &str) -> Vec<u64> {
    sym.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("STACK CFI ")?;
            let rest = rest.strip_prefix("INIT ").unwrap_or(rest);
            u64::from_str_radix(rest.split(' ').next()?, 16).ok()
        })
        .collect()
}

/// Compares the Breakpad and `.eh_frame` rules at every CFI row start of `binary`.
/// Returns (rows compared, rows without a Breakpad rule).
fn compare_cfi(binary: &Path) -> (usize, usize) {
    let sym = dump_syms(binary);
    let data = std::fs::read(binary).unwrap();
    let eh = build_from_elf(&data, &[]).unwrap();
    let eh = UnwindTable::open(&eh.bytes).unwrap();
    let bp = build_from_breakpad(sym.as_bytes()).unwrap();
    let bp = UnwindTable::open(&bp.bytes).unwrap();
    let (mut compared, mut untranslated) = (0, 0);
    for addr in cfi_addresses(&sym) {
        let Some(b) = bp.find(addr) else {
            untranslated += 1;
            continue;
        };
        let e = eh
            .find(addr)
            .unwrap_or_else(|| panic!("{}: no eh_frame rule at {addr:#x}", binary.display()));
        let (b, e) = (b.record, e.record);
        assert_eq!(b.cfa, e.cfa, "CFA at {addr:#x}");
        assert_eq!(b.ra, e.ra, "return address at {addr:#x}");
        for (i, reg) in callee_saved(Arch::X86_64).iter().enumerate() {
            // dump_syms writes no rule for DWARF's `DW_CFA_restore` after an epilogue's
            // pop, so the register stays "saved at CFA + n" in the .sym, where the slot
            // still holds the value the pop restored: the one known, harmless difference.
            // The same for a register kept in another one (`DW_CFA_register`) and restored:
            // seen for rsi (a slot since the Windows x64 ABI made it callee-saved), which a
            // libc function keeps in rbx up to its last instruction.
            let restore_omitted = e.regs[i] == Slot::UNCHANGED
                && matches!(
                    b.regs[i].kind(),
                    Some(SlotKind::Offset) | Some(SlotKind::Register)
                );
            assert!(
                b.regs[i] == e.regs[i] || restore_omitted,
                "register {reg} at {addr:#x}: {:?} vs {:?}",
                b.regs[i],
                e.regs[i]
            );
        }
        compared += 1;
    }
    (compared, untranslated)
}

#[test]
fn libc_breakpad_cfi_equals_its_eh_frame() {
    let libc = own_libc();
    let (compared, untranslated) = compare_cfi(&libc);
    eprintln!(
        "{}: {compared} rows equal, {untranslated} untranslated",
        libc.display()
    );
    // libc's few CFA expressions (PLT, signal trampoline) have no Breakpad translation
    assert!(
        compared > 1000 && untranslated * 100 < compared,
        "{}: {compared} rows equal, {untranslated} without a Breakpad rule",
        libc.display()
    );
}

#[test]
fn program_breakpad_symbols_equal_its_dwarf() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("basic");
    let source = postmortem_testsupport::workspace_root().join("server/tests/crashers/basic.c");
    let out = Command::new("gcc")
        .args(["-g", "-O2", "-fomit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&source)
        .output()
        .unwrap();
    assert!(out.status.success(), "gcc failed");
    let (compared, untranslated) = compare_cfi(&exe);
    assert!(
        compared >= 5 && untranslated == 0,
        "{compared} / {untranslated}"
    );

    let sym = dump_syms(&exe);
    let data = std::fs::read(&exe).unwrap();
    let dwarf = build_symbol_table(Some(&data), &[]).unwrap();
    let dwarf = SymbolTable::open(&dwarf.bytes).unwrap();
    let bp = build_symbol_table_breakpad(sym.as_bytes()).unwrap();
    let bp = SymbolTable::open(&bp.bytes).unwrap();
    let mut checked = 0;
    // DWARF's functions (dump_syms writes FUNC records for exactly those; `_init` and
    // `_fini` from `.symtab` have no PUBLIC record in its output)
    for (start, end, _, _) in dwarf
        .functions()
        .filter(|f| f.3 == Some(SymbolSource::Dwarf))
    {
        for addr in [start, (start + end) / 2, end - 1] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            dwarf.lookup(addr, &mut a);
            bp.lookup(addr, &mut b);
            let key = |v: &[postmortem_engine::symbols::SymbolFrame<'_>]| {
                v.iter()
                    .map(|f| (f.function.map(str::to_owned), f.line, f.inlined))
                    .collect::<Vec<_>>()
            };
            assert_eq!(key(&a), key(&b), "at {addr:#x}");
            checked += 1;
        }
    }
    assert!(
        checked >= 12,
        "main and three functions, three addresses each: {checked}"
    );
}
