//! Tests of the rules a scanned return address must pass (issue 35, item 4) and of the
//! frame-pointer rules around them (generated code, Windows x64), over literal stacks.
//!
//! Each stack holds the values real dumps showed the scan taking — a module's base
//! address from the auxiliary vector, a misaligned arm64 value, a pointer into a module's
//! data — below the real return address, and asserts the walk takes the real one or ends
//! saying why. The code reader is a table of facts ([`Facts`]): which addresses follow a
//! call (when the code is readable), which are executable, which a symbol file names.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use super::aarch64::Aarch64;
use super::tests::{module_at, stack_bytes};
use super::x86_64::X86_64;
use super::{
    walk_thread, ArchWalker, CodeReader, EndReason, Trust, WalkContext, WalkOptions, WalkResult,
};
use crate::dump::{Arch, Mapping, MemoryMap, Module, RegisterSet};

const MAIN: u64 = 0x40_0000;
const MAIN_END: u64 = 0x50_0000;
/// `ld.so`, mapped executable from its first byte (as ld-2.19 is).
const LD: u64 = 0x7f00_0000_0000;
const LD_END: u64 = LD + 0x2_0000;
/// The vdso.
const VDSO: u64 = 0x7fff_f7ff_0000;
const VDSO_END: u64 = VDSO + 0x2000;
const STACK: u64 = 0x7fff_0000_0000;
const RSP: u16 = 7;
const RBP: u16 = 6;
const RIP: u16 = 16;

/// What the code reader says, address range by address range.
#[derive(Default)]
struct Facts {
    /// `Some`: the code is readable, and only these addresses follow a call.
    calls: Option<Vec<u64>>,
    /// `is_executable`: `Some(true)` in these ranges...
    executable: Vec<(u64, u64)>,
    /// ...`Some(false)` in these, `None` elsewhere.
    not_executable: Vec<(u64, u64)>,
    /// `Some`: a symbol file describes every module, naming functions over these ranges.
    functions: Option<Vec<(u64, u64)>>,
}

fn within(ranges: &[(u64, u64)], addr: u64) -> bool {
    ranges.iter().any(|&(s, e)| (s..e).contains(&addr))
}

impl CodeReader for Facts {
    fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let calls = self.calls.as_ref()?;
        // x86_64 `call rel32` or aarch64 `bl`, else nops of either
        let mut b = vec![0x90; len];
        if calls.contains(&addr) {
            if len == 4 {
                b.copy_from_slice(&0x9400_0010u32.to_le_bytes());
            } else {
                b[len - 5..].copy_from_slice(&[0xe8, 0x10, 0x20, 0x00, 0x00]);
            }
        } else if len == 4 {
            b.copy_from_slice(&0xd503_201fu32.to_le_bytes());
        }
        Some(b)
    }

    fn is_executable(&self, addr: u64) -> Option<bool> {
        if within(&self.executable, addr) {
            Some(true)
        } else if within(&self.not_executable, addr) {
            Some(false)
        } else {
            None
        }
    }

    fn names_function(&self, addr: u64) -> Option<bool> {
        self.functions.as_ref().map(|f| within(f, addr))
    }
}

/// A symbol file that names a function everywhere.
fn everywhere() -> Option<Vec<(u64, u64)>> {
    Some(vec![(0, u64::MAX)])
}

/// The main executable, `ld.so` and the vdso, each one executable mapping from its base.
fn linux_modules() -> Vec<Module> {
    [(MAIN, MAIN_END), (LD, LD_END), (VDSO, VDSO_END)]
        .iter()
        .map(|&(base, end)| Module {
            mappings: vec![Mapping {
                start: base,
                end,
                file_offset: 0,
                executable: Some(true),
            }],
            ..module_at(base, end)
        })
        .collect()
}

fn walk_with(
    arch: &dyn ArchWalker,
    modules: &[Module],
    stack: &[u64],
    regs: &RegisterSet,
    code: &Facts,
    options: &WalkOptions,
) -> WalkResult {
    let bytes = stack_bytes(stack);
    let mem = MemoryMap::new(vec![(STACK, &bytes[..])]);
    let tables = vec![None; modules.len()];
    let ctx = WalkContext {
        memory: &mem,
        modules,
        tables: &tables,
        code,
        options,
        pac_mask: 0,
        pac_signed_seen: None,
    };
    walk_thread(arch, &ctx, regs)
}

fn scan_only() -> WalkOptions {
    WalkOptions {
        enable_fp: false,
        ..WalkOptions::default()
    }
}

fn x86_regs(pc: u64, sp: u64, rbp: Option<u64>) -> RegisterSet {
    let mut r = RegisterSet::new(Arch::X86_64);
    r.set(RIP, pc);
    r.set(RSP, sp);
    if let Some(rbp) = rbp {
        r.set(RBP, rbp);
    }
    r
}

fn pcs(r: &WalkResult) -> Vec<u64> {
    r.frames.iter().map(|f| f.pc).collect()
}

#[test]
fn module_base_addresses_from_the_auxiliary_vector_are_not_return_addresses() {
    // Near the top of a Linux stack the auxiliary vector holds AT_SYSINFO_EHDR (the
    // vdso's base) and AT_BASE (ld.so's): both in executable mappings, and a symbol file
    // would even name a function there. Neither is a return address; the real one is.
    let ra = MAIN + 0x1234;
    let stack = [33, VDSO, 7, LD, ra, 0];
    let code = Facts {
        functions: everywhere(),
        ..Facts::default()
    };
    let r = walk_with(
        &X86_64,
        &linux_modules(),
        &stack,
        &x86_regs(MAIN + 0x100, STACK, None),
        &code,
        &scan_only(),
    );
    assert_eq!(pcs(&r)[..2], [MAIN + 0x100, ra], "{:?}", r.end_detail);
    assert_eq!(r.frames[1].trust, Trust::Scan);

    // with only the bases past _start, the walk ends there and says why
    let r = walk_with(
        &X86_64,
        &linux_modules(),
        &stack[..4],
        &x86_regs(ra, STACK, None),
        &code,
        &scan_only(),
    );
    assert_eq!(pcs(&r), [ra]);
    let detail = r.end_detail.unwrap_or_default();
    assert!(
        detail.contains("2 a module's first byte"),
        "the end says why: {detail}"
    );
}

#[test]
fn a_word_just_after_a_modules_header_is_not_a_return_address() {
    // Breakpad's arm microdump (issue 39): past libc's outermost frame the stack holds
    // 0x35 above breakpad_unittests' base, and its symbol file has a bogus FUNC at 0xc
    // (folded code) that covers it. The call before it would lie in the ELF header: not a
    // return address, wherever a symbol file names a function.
    let ra = MAIN + 0x1234;
    let code = Facts {
        functions: everywhere(),
        ..Facts::default()
    };
    for header_word in [MAIN + 0x35, MAIN + 0x40] {
        let stack = [header_word, 7, ra, 0];
        let r = walk_with(
            &X86_64,
            &linux_modules(),
            &stack,
            &x86_regs(MAIN + 0x100, STACK, None),
            &code,
            &scan_only(),
        );
        assert_eq!(pcs(&r)[..2], [MAIN + 0x100, ra], "{:?}", r.end_detail);
        let r = walk_with(
            &X86_64,
            &linux_modules(),
            &[header_word, 7, 33, 0],
            &x86_regs(ra, STACK, None),
            &code,
            &scan_only(),
        );
        assert_eq!(pcs(&r), [ra]);
        let detail = r.end_detail.unwrap_or_default();
        assert!(
            detail.contains("in its header"),
            "the end says why: {detail}"
        );
    }
    // just past the header, a function the symbol file names is taken
    let r = walk_with(
        &X86_64,
        &linux_modules(),
        &[MAIN + 0x41, 7, 33, 0],
        &x86_regs(ra, STACK, None),
        &code,
        &scan_only(),
    );
    assert_eq!(pcs(&r)[..2], [ra, MAIN + 0x41], "{:?}", r.end_detail);
}

#[test]
fn misaligned_values_are_not_arm64_return_addresses() {
    // A64 instructions are 4-aligned: a value 2 bytes off is data, even where the bytes
    // before it happen to decode as a `bl` (here: everywhere is "after a call").
    let ra = MAIN + 0x1238;
    let stack = [MAIN + 0x1002, MAIN + 0x2001, ra, 0];
    let code = Facts {
        calls: Some(vec![MAIN + 0x1002, MAIN + 0x2001, ra]),
        ..Facts::default()
    };
    let mut regs = RegisterSet::new(Arch::Aarch64);
    regs.set(Arch::Aarch64.pc_reg(), MAIN + 0x100);
    regs.set(Arch::Aarch64.sp_reg(), STACK);
    let r = walk_with(
        &Aarch64,
        &[module_at(MAIN, MAIN_END)],
        &stack,
        &regs,
        &code,
        &scan_only(),
    );
    assert_eq!(pcs(&r)[..2], [MAIN + 0x100, ra], "{:?}", r.end_detail);
    // x86_64 instructions have any length, so any alignment
    assert_eq!(X86_64.instruction_alignment(), 1);
}

#[test]
fn an_arm64_chain_ends_at_a_record_with_no_saved_frame_pointer() {
    // Breakpad's arm64 microdump (issue 39): `_start_main`'s frame record holds a saved
    // frame pointer of 0 and a return address into the linker, which the dump lists no
    // module for. The chain ends there: the walk must not scan on past it (to AT_ENTRY in
    // the auxiliary vector, which a symbol file's function seems to cover).
    let record_b = STACK + 0x20;
    let stack = [
        record_b,
        MAIN + 0x100,
        7,
        33,
        0,
        0x1234_5000,
        7,
        MAIN + 0x200,
        0,
    ];
    let code = Facts {
        functions: everywhere(),
        ..Facts::default()
    };
    let mut regs = RegisterSet::new(Arch::Aarch64);
    regs.set(Arch::Aarch64.pc_reg(), MAIN + 0x50);
    regs.set(Arch::Aarch64.sp_reg(), STACK);
    regs.set(29u16, STACK);
    regs.set(30u16, MAIN + 0x100);
    let r = walk_with(
        &Aarch64,
        &linux_modules(),
        &stack,
        &regs,
        &code,
        &WalkOptions::default(),
    );
    assert_eq!(pcs(&r), [MAIN + 0x50, MAIN + 0x100], "{:?}", r.end_detail);
    assert_eq!(r.end, EndReason::PcZero, "{:?}", r.end_detail);
    // a return address in a module is still followed (a thread's start routine, whose
    // caller's record glibc's clone leaves with a frame pointer of 0)
    let mut stack = stack;
    stack[5] = MAIN + 0x300;
    let r = walk_with(
        &Aarch64,
        &linux_modules(),
        &stack,
        &regs,
        &code,
        &WalkOptions::default(),
    );
    assert_eq!(pcs(&r)[..3], [MAIN + 0x50, MAIN + 0x100, MAIN + 0x300]);
}

/// A module as a minidump without `/proc/self/maps` gives it: no mappings, so the dump
/// itself does not say which of its addresses are code.
fn unmapped_module() -> Vec<Module> {
    vec![module_at(MAIN, MAIN_END)]
}

const TEXT: (u64, u64) = (MAIN + 0x1000, MAIN + 0x8_0000);
const BSS: u64 = MAIN + 0x9_0040;

#[test]
fn a_pointer_into_a_modules_data_is_not_a_return_address() {
    let ra = MAIN + 0x1234;
    let stack = [BSS, 5, ra, 0];
    let regs = x86_regs(MAIN + 0x100, STACK, None);
    let run = |code: &Facts| {
        walk_with(
            &X86_64,
            &unmapped_module(),
            &stack,
            &regs,
            code,
            &scan_only(),
        )
    };
    // the module's file (its sections) or the dump's regions say the data is not code
    let r = run(&Facts {
        executable: vec![TEXT],
        not_executable: vec![(MAIN, TEXT.0), (TEXT.1, MAIN_END)],
        functions: everywhere(),
        ..Facts::default()
    });
    assert_eq!(pcs(&r)[..2], [MAIN + 0x100, ra], "{:?}", r.end_detail);
    // neither code nor file: the symbol file names no function in .bss (Breakpad's rule)
    let r = run(&Facts {
        functions: Some(vec![TEXT]),
        ..Facts::default()
    });
    assert_eq!(pcs(&r)[..2], [MAIN + 0x100, ra], "{:?}", r.end_detail);
    // nothing at all vouches for either: the walk ends at frame 0 and says why
    let r = run(&Facts::default());
    assert_eq!(pcs(&r), [MAIN + 0x100]);
    assert_eq!(r.end, EndReason::NoCaller);
    let detail = r.end_detail.unwrap_or_default();
    assert!(
        detail.contains("2 in a module with neither code, file nor symbol file"),
        "{detail}"
    );
}

#[test]
fn readable_code_must_end_in_a_call_even_where_symbols_name_a_function() {
    let decoy = MAIN + 0x2000;
    let ra = MAIN + 0x3005;
    let code = Facts {
        calls: Some(vec![ra]),
        functions: everywhere(),
        ..Facts::default()
    };
    let r = walk_with(
        &X86_64,
        &unmapped_module(),
        &[decoy, ra, 0],
        &x86_regs(MAIN + 0x100, STACK, None),
        &code,
        &scan_only(),
    );
    assert_eq!(pcs(&r)[..2], [MAIN + 0x100, ra]);
}

/// A frame-pointer chain: frame 0 in the main module (no unwind table), its caller in
/// generated code outside every module, whose caller is back in the module. Above the
/// records, a stale return address a scan would take instead.
fn jit_stack(jit_pc: u64, jit_rbp: u64) -> (Vec<u64>, u64) {
    let ra = MAIN + 0x4005;
    let stale = MAIN + 0x5005;
    let stack = vec![
        stale,        // STACK + 0x00: what a scan from frame 0 finds first
        STACK + 0x20, // STACK + 0x08: frame 0's record: [rbp] = the JIT frame's rbp
        jit_pc,       // STACK + 0x10: return address into generated code
        0,            // STACK + 0x18
        jit_rbp,      // STACK + 0x20: the JIT frame's record: [rbp] = caller's rbp
        ra,           // STACK + 0x28: return address into the module
        0,            // STACK + 0x30: the module frame's record: end of the chain
        0,
    ];
    (stack, ra)
}

#[test]
fn the_frame_pointer_chain_is_followed_through_generated_code() {
    let jit_pc = 0x3a_0000_1234u64;
    let (stack, ra) = jit_stack(jit_pc, STACK + 0x30);
    let code = Facts {
        calls: Some(vec![MAIN + 0x5005, ra]),
        ..Facts::default()
    };
    let regs = x86_regs(MAIN + 0x100, STACK, Some(STACK + 0x08));
    let r = walk_with(
        &X86_64,
        &unmapped_module(),
        &stack,
        &regs,
        &code,
        &WalkOptions::default(),
    );
    assert_eq!(
        pcs(&r)[..3],
        [MAIN + 0x100, jit_pc, ra],
        "{:?}",
        r.end_detail
    );
    assert_eq!(r.frames[1].trust, Trust::Fp);
    assert_eq!(r.frames[1].module, None);
    assert_eq!(r.frames[2].trust, Trust::Fp);

    // A chain that does not go on (the caller's rbp is 0, off the stack) is no evidence
    // of generated code: the pc outside every module is not taken.
    let (mut stack, _) = jit_stack(jit_pc, STACK + 0x30);
    stack[1] = 0;
    let r = walk_with(
        &X86_64,
        &unmapped_module(),
        &stack,
        &regs,
        &code,
        &WalkOptions::default(),
    );
    assert!(!pcs(&r).contains(&jit_pc), "{:?}", pcs(&r));

    // Nor where the dump's regions say the memory is not executable.
    let (stack, _) = jit_stack(jit_pc, STACK + 0x30);
    let code = Facts {
        calls: Some(vec![MAIN + 0x5005, ra]),
        not_executable: vec![(0x3a_0000_0000, 0x3a_0001_0000)],
        ..Facts::default()
    };
    let r = walk_with(
        &X86_64,
        &unmapped_module(),
        &stack,
        &regs,
        &code,
        &WalkOptions::default(),
    );
    assert!(!pcs(&r).contains(&jit_pc), "{:?}", pcs(&r));
}

#[test]
fn windows_x64_does_not_follow_rbp_out_of_a_module_without_unwind_info() {
    // A callback through a system DLL we have no file for: rbp is that DLL's ordinary
    // register, pointing at a "record" whose return address is a real call site, but
    // not the caller's. The caller's return address is the first word of the stack.
    let caller = MAIN + 0x6005;
    let wrong = MAIN + 0x7005;
    let stack = [caller, 0, STACK + 0x40, wrong, 0, 0, 0, 0, 0];
    let code = Facts {
        calls: Some(vec![caller, wrong]),
        ..Facts::default()
    };
    let regs = x86_regs(MAIN + 0x100, STACK, Some(STACK + 0x10));
    let windows = WalkOptions {
        fp_without_unwind_table: false,
        ..WalkOptions::default()
    };
    let r = walk_with(&X86_64, &unmapped_module(), &stack, &regs, &code, &windows);
    assert_eq!(pcs(&r)[..2], [MAIN + 0x100, caller], "{:?}", r.end_detail);
    assert_eq!(r.frames[1].trust, Trust::Scan);
    // elsewhere the chain is followed, as before
    let r = walk_with(
        &X86_64,
        &unmapped_module(),
        &stack,
        &regs,
        &code,
        &WalkOptions::default(),
    );
    assert_eq!(r.frames[1].pc, wrong);
    assert_eq!(r.frames[1].trust, Trust::Fp);
}
