//! Breakpad `STACK CFI` records → unwind table rows.
//!
//! A `.sym` file's `STACK CFI INIT addr size rules` opens a function's rules; each later
//! `STACK CFI addr rules` changes some of them from `addr` on (the rules accumulate until
//! the next `INIT`). Rules are postfix expressions; the ones compilers' CFI produces are
//! translated into [`RuleRecord`]s once, here — never kept as text:
//! - `.cfa: $reg N +` (or `-`) → CFA = reg + N;
//! - `.ra: .cfa N + ^` and `$reg: .cfa N + ^` → saved at CFA + N;
//! - `$reg: .cfa N +` → the value CFA + N; `$reg: $other` → in another register;
//!   `$reg: $reg` → unchanged;
//! - no `.ra` rule at all → the return address is undefined: the outermost frame
//!   (dump_syms omits registers DWARF marks `DW_CFA_undefined`, as for `_start`).
//!
//! A range whose rules use anything else (deref'd CFAs, arithmetic on several registers)
//! gets no row, so the walker falls back to frame pointers and scanning there; it is
//! counted as a skipped entry. Addresses in a
//! `.sym` file are offsets from the module's load address, which for ELF is the lowest
//! `PT_LOAD` address — our link base — so they are used as they are. Breakpad rows are
//! pushed at [`BREAKPAD_PRIORITY`], below any table read from the binary itself.
//!
//! A Windows x64 module's `.sym` file (`MODULE windows x86_64`) has one `STACK CFI INIT`
//! per `.pdata` entry (dump_syms translates each), and the x64 ABI gives every function
//! that calls or moves the stack pointer such an entry: code no record covers is a leaf,
//! its return address at `[rsp]`. As Windows' unwinders (and the `.pdata` builder, whose
//! rule this is) treat such a pc, the table gets `CFA = rsp + 8`, the return address at
//! `CFA - 8` over the whole image (RVAs are 32-bit) at [`LEAF_PRIORITY`], under every
//! record ([`windows_leaf_rule`]).
//!
//! An x86 file's `STACK WIN` records (types 4 and 0, [`super::stack_win`]) become rows
//! whose CFA slot holds the whole record ([`Slot::win_frame`]); the walker evaluates it as
//! Breakpad's x86 walker does. As in Breakpad's resolver, a `FrameData` record wins over
//! an `FPO` record and both over `STACK CFI` ([`FRAME_DATA_PRIORITY`],
//! [`FPO_PRIORITY`]), and where records of one type nest (a prologue's record inside its
//! function's) the innermost describes the address; a record that overlaps another
//! without nesting in it, or repeats its range, is skipped ([`win_rows`]). Other types
//! (trap, TSS, standard) are skipped.

use super::stack_win::{self, WinRecord};
use super::text::{for_each_line, parse_i64};
use super::tokenize::{self, classify, module_arch_word, Record};
use crate::arch::{aarch64, arm, x86, x86_64, Arch};
use crate::unwind::rule::{RuleRecord, Slot, UnwindSource};
use crate::unwind::win_frame::push_win_records;
pub use crate::unwind::win_frame::{FPO_PRIORITY, FRAME_DATA_PRIORITY};
use crate::unwind::{BuiltTable, TableWriter, UnwindError};

/// Priority of Breakpad rows: every binary-derived source wins over them.
pub const BREAKPAD_PRIORITY: u8 = 10;

/// Priority of a Windows x64 `.sym` file's leaf rule: under every record.
pub const LEAF_PRIORITY: u8 = crate::unwind::builders::pe_x64::LEAF_PRIORITY;

/// The end of a PE image's address space (RVAs are 32-bit): where the leaf rule ends.
const PE_IMAGE_END: u64 = 1 << 32;

/// The leaf rule of a Windows x64 module's `.sym` file (`MODULE windows x86_64`):
/// `CFA = rsp + 8`, the return address at `CFA - 8`; `None` for any other module.
pub fn windows_leaf_rule(text: &[u8]) -> Option<RuleRecord> {
    let module = tokenize::parse_module_line(text)?;
    let windows_x64 = module.os.eq_ignore_ascii_case("windows")
        && breakpad_arch(&module.arch) == Some(Arch::X86_64);
    // the stack pointer's DWARF number (7) fits a slot's register byte
    let rsp = u8::try_from(x86_64::Reg::Rsp.dwarf()).ok()?;
    windows_x64.then(|| {
        RuleRecord::new(
            UnwindSource::Breakpad,
            Slot::offset(rsp, 8),
            Slot::offset(0, -8),
        )
    })
}

/// Bound on tokens in one rule set (a real one has under 20).
const MAX_TOKENS: usize = 256;

/// The architecture named on a `.sym` file's `MODULE` line.
pub fn breakpad_arch(name: &str) -> Option<Arch> {
    Some(match name {
        "x86_64" | "amd64" => Arch::X86_64,
        "arm64" | "aarch64" | "arm64e" => Arch::Aarch64,
        "x86" | "i386" | "i686" => Arch::X86,
        "arm" | "armv7" => Arch::Arm,
        _ => return None,
    })
}

/// The DWARF number of a Breakpad register name (`$rsp`, `x29`, …).
fn dwarf_reg(arch: Arch, name: &str) -> Option<u16> {
    let n = name.strip_prefix('$').unwrap_or(name);
    let num = |prefix: &str, max: u16| {
        n.strip_prefix(prefix)
            .and_then(|d| d.parse::<u16>().ok())
            .filter(|&d| d <= max)
    };
    // Breakpad's own spelling of each architecture's registers (`r8`–`r15`, `x0`–`x30`
    // and `r0`–`r15` are numbered as DWARF numbers them).
    match arch {
        Arch::X86_64 => {
            use x86_64::Reg::*;
            Some(
                match n {
                    "rax" => Rax,
                    "rdx" => Rdx,
                    "rcx" => Rcx,
                    "rbx" => Rbx,
                    "rsi" => Rsi,
                    "rdi" => Rdi,
                    "rbp" => Rbp,
                    "rsp" => Rsp,
                    "rip" => Rip,
                    _ => return num("r", R15.dwarf()).filter(|&d| d >= R8.dwarf()),
                }
                .dwarf(),
            )
        }
        Arch::Aarch64 => match n {
            "sp" => Some(aarch64::Reg::Sp.dwarf()),
            "fp" => Some(aarch64::FP.dwarf()),
            "lr" => Some(aarch64::LR.dwarf()),
            "pc" => Some(aarch64::Reg::Pc.dwarf()),
            _ => num("x", aarch64::Reg::X30.dwarf()),
        },
        Arch::X86 => {
            use x86::Reg::*;
            Some(
                match n {
                    "eax" => Eax,
                    "ecx" => Ecx,
                    "edx" => Edx,
                    "ebx" => Ebx,
                    "esp" => Esp,
                    "ebp" => Ebp,
                    "esi" => Esi,
                    "edi" => Edi,
                    "eip" => Eip,
                    _ => return None,
                }
                .dwarf(),
            )
        }
        Arch::Arm => match n {
            "sp" => Some(arm::SP.dwarf()),
            "lr" => Some(arm::LR.dwarf()),
            "pc" => Some(arm::PC.dwarf()),
            "fp" => Some(arm::FP.dwarf()),
            _ => num("r", arm::Reg::R15.dwarf()),
        },
    }
}

/// One translated rule of a rule set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Cfa,
    Ra,
    Reg(u16),
}

/// The rules in force, as slots; `None` for a rule that could not be translated.
#[derive(Debug, Clone)]
struct State {
    cfa: Option<Slot>,
    /// `None` until a `.ra` rule is given: a rule set without one (dump_syms writes
    /// `_start`'s as `.cfa: $rsp 8 +`) comes from DWARF's `DW_CFA_undefined` for the
    /// return address, so the frame is the outermost one.
    ra: Option<Option<Slot>>,
    /// (DWARF register, slot or None when untranslatable)
    regs: Vec<(u16, Option<Slot>)>,
}

impl State {
    fn new() -> Self {
        State {
            cfa: None,
            ra: None,
            regs: Vec::new(),
        }
    }

    fn set(&mut self, target: Target, slot: Option<Slot>) {
        match target {
            Target::Cfa => self.cfa = slot,
            Target::Ra => self.ra = Some(slot),
            Target::Reg(r) => match self.regs.iter_mut().find(|(reg, _)| *reg == r) {
                Some(e) => e.1 = slot,
                None => self.regs.push((r, slot)),
            },
        }
    }

    /// The record of this state, if every rule it holds is representable and the CFA and
    /// return address are known.
    fn record(&self, arch: Arch) -> Option<RuleRecord> {
        let ra = self.ra.unwrap_or(Some(Slot::UNDEFINED))?;
        let mut r = RuleRecord::new(UnwindSource::Breakpad, self.cfa?, ra);
        let sp = arch.sp_reg();
        for &(reg, slot) in &self.regs {
            let slot = slot?;
            if reg == sp {
                // the caller's stack pointer is the CFA by definition
                continue;
            }
            // registers the record does not track are simply not recovered
            r.set_reg(arch, reg, slot);
        }
        Some(r)
    }
}

/// Parses a signed integer token (decimal; Breakpad writes no other base in CFI).
fn int(tok: &str) -> Option<i64> {
    parse_i64(tok.as_bytes())
}

/// Translates one postfix expression.
fn translate(arch: Arch, target: Target, expr: &[&str]) -> Option<Slot> {
    let off32 = |n: i64, op: &str| -> Option<i32> {
        let n = match op {
            "+" => n,
            "-" => n.checked_neg()?,
            _ => return None,
        };
        i32::try_from(n).ok()
    };
    match (target, expr) {
        (Target::Cfa, [reg, n, op]) => {
            let reg = u8::try_from(dwarf_reg(arch, reg)?).ok()?;
            Some(Slot::offset(reg, off32(int(n)?, op)?))
        }
        (Target::Cfa, [reg]) => {
            let reg = u8::try_from(dwarf_reg(arch, reg)?).ok()?;
            Some(Slot::offset(reg, 0))
        }
        (_, [".cfa", n, op, "^"]) => Some(Slot::offset(0, off32(int(n)?, op)?)),
        (_, [".cfa", "^"]) => Some(Slot::offset(0, 0)),
        (Target::Reg(_), [".cfa", n, op]) => Some(Slot::val_offset(off32(int(n)?, op)?)),
        (Target::Reg(_), [".cfa"]) => Some(Slot::val_offset(0)),
        (Target::Reg(r), [other]) => {
            let other = dwarf_reg(arch, other)?;
            if other == r {
                Some(Slot::UNCHANGED)
            } else {
                Some(Slot::register(u8::try_from(other).ok()?))
            }
        }
        (Target::Ra, [other]) => Some(Slot::register(u8::try_from(dwarf_reg(arch, other)?).ok()?)),
        _ => None,
    }
}

/// Applies a rule set (`.cfa: $rsp 16 + $rbp: .cfa -16 + ^`) to `state`. Returns false
/// when the text is malformed (then nothing after the error is applied). `tokens` is
/// scratch space, reused from record to record.
fn apply<'a>(arch: Arch, rules: &'a str, state: &mut State, tokens: &mut Vec<&'a str>) -> bool {
    tokens.clear();
    tokens.extend(rules.split_ascii_whitespace().take(MAX_TOKENS + 1));
    if tokens.len() > MAX_TOKENS {
        return false;
    }
    let mut i = 0;
    while i < tokens.len() {
        let Some(name) = tokens[i].strip_suffix(':') else {
            return false;
        };
        let target = match name {
            ".cfa" => Target::Cfa,
            ".ra" => Target::Ra,
            reg => match dwarf_reg(arch, reg) {
                Some(r) => Target::Reg(r),
                None => {
                    // an unknown register (a vector register, say): skip its expression
                    i += 1;
                    while i < tokens.len() && !tokens[i].ends_with(':') {
                        i += 1;
                    }
                    continue;
                }
            },
        };
        let start = i + 1;
        let mut end = start;
        while end < tokens.len() && !tokens[end].ends_with(':') {
            end += 1;
        }
        let Some(expr) = tokens.get(start..end) else {
            return false;
        };
        if expr.is_empty() {
            return false;
        }
        let slot = translate(arch, target, expr);
        state.set(target, slot);
        i = end;
    }
    true
}

/// The open `STACK CFI INIT` block: its range and the rule state so far.
struct Open {
    end: u64,
    row_start: u64,
    state: State,
    ok: bool,
}

/// The state of one pass over a `.sym` file's `STACK CFI` records.
struct Reader<'a> {
    arch: Arch,
    w: TableWriter,
    open: Option<Open>,
    /// Scratch space for [`apply`], reused from record to record.
    tokens: Vec<&'a str>,
    /// The `STACK WIN` records of an x86 file, in file order.
    win: Vec<WinRecord<'a>>,
}

impl<'a> Reader<'a> {
    /// Pushes the row of `o`'s rules from its start until `until` (or the block's end).
    fn close(&mut self, o: &Open, until: u64) {
        if !o.ok {
            return;
        }
        match o.state.record(self.arch) {
            Some(rule) => self
                .w
                .push(o.row_start, until.min(o.end), &rule, BREAKPAD_PRIORITY),
            None => self.w.stats.skip(|| {
                format!(
                    "STACK CFI at {:#x}: rules that cannot be represented",
                    o.row_start
                )
            }),
        }
    }

    fn close_open(&mut self) {
        if let Some(o) = self.open.take() {
            self.close(&o, o.end);
        }
    }

    fn record(&mut self, record: Record<'a>) {
        match record {
            Record::NotUtf8 { stack: true } => {
                self.w.stats.skip(|| "a STACK record is not UTF-8".into());
            }
            Record::CfiInit(rest) => self.init(rest),
            Record::Cfi(rest) => self.delta(rest),
            // trap, TSS and standard frames (types 1-3): real records of system PDBs that
            // no unwinder uses, passed over as the PDB reader passes them over (not counted
            // as skipped, which would call a system library's table corrupt)
            Record::OtherStack(rest)
                if self.arch == Arch::X86
                    && matches!(rest.split_ascii_whitespace().nth(1), Some("1" | "2" | "3"))
                    && rest.starts_with("WIN ") => {}
            Record::OtherStack(rest) if self.arch == Arch::X86 && rest.starts_with("WIN ") => {
                match stack_win::parse(rest) {
                    Some(r) => {
                        self.w.stats.entries += 1;
                        self.win.push(r);
                    }
                    None => self
                        .w
                        .stats
                        .skip(|| "a STACK WIN record is malformed".into()),
                }
            }
            // STACK WIN of other architectures and anything else: not used
            _ => {}
        }
    }

    /// `STACK CFI INIT`: ends the open block and opens one.
    fn init(&mut self, rest: &'a str) {
        self.close_open();
        let Some(init) = tokenize::cfi_init(rest) else {
            self.w
                .stats
                .skip(|| "a STACK CFI INIT record is malformed".into());
            return;
        };
        let (addr, Some(end)) = (init.range.addr, init.range.end()) else {
            self.w
                .stats
                .skip(|| "a STACK CFI INIT range overflows".into());
            return;
        };
        let mut state = State::new();
        let ok = apply(self.arch, init.rules, &mut state, &mut self.tokens);
        if ok {
            self.w.stats.entries += 1;
        } else {
            self.w
                .stats
                .skip(|| format!("STACK CFI INIT at {addr:#x}: malformed rules"));
        }
        self.open = Some(Open {
            end,
            row_start: addr,
            state,
            ok,
        });
    }

    /// `STACK CFI`: the rules of the open block change from its address on.
    fn delta(&mut self, rest: &'a str) {
        let Some((addr, rules)) = tokenize::cfi(rest) else {
            self.w
                .stats
                .skip(|| "a STACK CFI record is malformed".into());
            return;
        };
        let Some(mut o) = self.open.take() else {
            self.w
                .stats
                .skip(|| "a STACK CFI record outside any INIT".into());
            return;
        };
        if addr < o.row_start || addr >= o.end {
            o.ok = false;
            self.w
                .stats
                .skip(|| format!("STACK CFI at {addr:#x} lies outside its INIT range"));
        } else {
            self.close(&o, addr);
            o.row_start = addr;
            if !apply(self.arch, rules, &mut o.state, &mut self.tokens) {
                o.ok = false;
                self.w
                    .stats
                    .skip(|| format!("STACK CFI at {addr:#x}: malformed rules"));
            }
        }
        self.open = Some(o);
    }
}

/// The architecture of the `MODULE` line.
fn module_arch(text: &[u8]) -> Result<Arch, UnwindError> {
    let arch_name = module_arch_word(text)
        .ok_or_else(|| UnwindError::Object("not a Breakpad .sym file (no MODULE line)".into()))?;
    breakpad_arch(&arch_name)
        .ok_or_else(|| UnwindError::UnsupportedArch(arch_name.chars().take(32).collect()))
}

/// Builds an unwind table from the `STACK CFI` records of a Breakpad `.sym` file.
/// Errors only when the text has no usable `MODULE` line; bad records are skipped and
/// counted in the stats.
pub fn build_from_breakpad(text: &[u8]) -> Result<BuiltTable, UnwindError> {
    let arch = module_arch(text)?;
    let mut w = TableWriter::new(arch);
    w.note_source(UnwindSource::Breakpad);
    w.stats.source_bytes = text.len();
    let mut reader = Reader {
        arch,
        w,
        open: None,
        tokens: Vec::with_capacity(32),
        win: Vec::new(),
    };
    // the records after the MODULE line
    let rest_of_text = memchr::memchr(b'\n', text)
        .and_then(|i| text.get(i + 1..))
        .unwrap_or(&[]);
    for_each_line(rest_of_text, |line| reader.record(classify(line)));
    reader.close_open();
    push_win_records(&mut reader.w, &reader.win, UnwindSource::Breakpad);
    if let Some(leaf) = windows_leaf_rule(text) {
        reader.w.push(0, PE_IMAGE_END, &leaf, LEAF_PRIORITY);
    }
    Ok(reader.w.finish())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::unwind::lookup::UnwindTable;
    use crate::unwind::rule::SlotKind;

    #[test]
    fn stack_win_records_nest_and_win_over_stack_cfi() {
        use crate::breakpad::stack_win::{WinFrame, WinKind};
        let sym = "MODULE windows x86 0123456789ABCDEF0123456789ABCDEF1 t.pdb\n\
STACK CFI INIT 1000 100 .cfa: $esp 4 + .ra: .cfa 4 - ^\n\
STACK WIN 4 1000 40 0 0 8 4 0 0 1 $T0 $ebp = $eip $T0 4 + ^ = $ebp $T0 ^ = $esp $T0 8 + =\n\
STACK WIN 4 1010 8 0 0 0 0 0 0 1 $eip $esp ^ = $esp $esp 4 + =\n\
STACK WIN 4 1030 20 0 0 0 0 0 0 1 $eip 0 =\n\
STACK WIN 0 1000 80 0 0 c 0 10 0 0 1\n\
STACK WIN 1 2000 10 0 0 0 0 0 0 0 0\n";
        let built = build_from_breakpad(sym.as_bytes()).unwrap();
        // the one overlapping its neighbour without nesting (the type 1 record is passed
        // over: no unwinder uses trap frames)
        assert_eq!(
            built.stats.entries_skipped, 1,
            "{:?}",
            built.stats.first_error
        );
        let t = UnwindTable::open(&built.bytes).unwrap();
        let at = |a: u64| {
            let r = t.find(a)?;
            if r.record.cfa.kind() != Some(SlotKind::WinFrame) {
                return Some((None, None));
            }
            let f = WinFrame::decode(r.expression(r.record.cfa)?)?;
            Some((Some(f.kind), f.program.map(str::to_string)))
        };
        let outer = Some("$T0 $ebp = $eip $T0 4 + ^ = $ebp $T0 ^ = $esp $T0 8 + =".into());
        let inner = Some("$eip $esp ^ = $esp $esp 4 + =".into());
        assert_eq!(at(0x1000), Some((Some(WinKind::FrameData), outer.clone())));
        assert_eq!(at(0x1010), Some((Some(WinKind::FrameData), inner.clone())));
        assert_eq!(at(0x1017), Some((Some(WinKind::FrameData), inner)));
        assert_eq!(at(0x1018), Some((Some(WinKind::FrameData), outer.clone())));
        assert_eq!(at(0x103f), Some((Some(WinKind::FrameData), outer)));
        assert_eq!(at(0x1040), Some((Some(WinKind::Fpo), None)));
        assert_eq!(at(0x107f), Some((Some(WinKind::Fpo), None)));
        // STACK CFI where no STACK WIN record is
        assert_eq!(at(0x1080), Some((None, None)));
        assert_eq!(t.find(0x1080).unwrap().record.cfa, Slot::offset(4, 4));
        assert!(t.find(0x2000).is_none());
    }

    const SYM: &str = "MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 crash\n\
FILE 0 crash.c\n\
STACK CFI INIT 1000 20 .cfa: $rsp 8 + .ra: .cfa -8 + ^\n\
STACK CFI 1001 .cfa: $rsp 16 + $rbp: .cfa -16 + ^\n\
STACK CFI 1004 .cfa: $rbp 16 +\n\
STACK CFI INIT 2000 10 .cfa: $rsp 8 + .ra: .cfa 8 - ^ $rbx: $rbx\n\
STACK CFI 2004 .cfa: $rsp 8 + ^ .ra: .cfa -8 + ^\n\
STACK CFI INIT 3000 10 .cfa: $rsp 8 +\n\
STACK WIN 4 1000 10 0 0 0 0 0 0 1 $eip 4 + ^ =\n";

    #[test]
    fn a_windows_x64_module_has_a_leaf_rule_under_its_records() {
        let windows = SYM.replace(
            "MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 crash",
            "MODULE windows x86_64 0123456789ABCDEF0123456789ABCDEF1 crash.pdb",
        );
        let built = build_from_breakpad(windows.as_bytes()).expect("build");
        let t = UnwindTable::open(&built.bytes).expect("open");
        let at = |a: u64| t.find(a).map(|r| r.record);
        // the records' rules where they are
        assert_eq!(at(0x1002).expect("a record's row").cfa, Slot::offset(7, 16));
        // a leaf elsewhere: return address at [rsp]
        for a in [0, 0x1020, 0x2fff, 0xffff_ffff] {
            let r = at(a).unwrap_or_else(|| panic!("no rule at {a:#x}"));
            assert_eq!(
                (r.cfa, r.ra),
                (Slot::offset(7, 8), Slot::offset(0, -8)),
                "{a:#x}"
            );
            assert_eq!(r.source(), Some(UnwindSource::Breakpad));
        }
        assert!(at(1 << 32).is_none(), "past a PE image");
        // not for other modules
        let t = build_from_breakpad(SYM.as_bytes()).expect("build");
        assert!(UnwindTable::open(&t.bytes)
            .expect("open")
            .find(0x1020)
            .is_none());
        let arm = windows.replace("x86_64", "arm64");
        let t = build_from_breakpad(arm.as_bytes()).expect("build");
        assert!(UnwindTable::open(&t.bytes)
            .expect("open")
            .find(0x1020)
            .is_none());
    }

    #[test]
    fn cfi_records_become_rows() {
        let built = build_from_breakpad(SYM.as_bytes()).expect("build");
        let t = UnwindTable::open(&built.bytes).expect("open");
        let at = |a: u64| t.find(a).map(|r| r.record);
        let r = at(0x1000).expect("row at INIT");
        assert_eq!(r.cfa, Slot::offset(7, 8));
        assert_eq!(r.ra, Slot::offset(0, -8));
        assert_eq!(r.source(), Some(UnwindSource::Breakpad));
        let r = at(0x1002).expect("row after the first delta");
        assert_eq!(r.cfa, Slot::offset(7, 16));
        assert_eq!(r.reg(Arch::X86_64, 6), Some(Slot::offset(0, -16)));
        let r = at(0x101f).expect("row after the second delta");
        assert_eq!(r.cfa, Slot::offset(6, 16));
        assert_eq!(r.ra, Slot::offset(0, -8), "rules accumulate");
        assert_eq!(r.reg(Arch::X86_64, 6), Some(Slot::offset(0, -16)));
        assert!(at(0x1020).is_none(), "the INIT range ends at 0x1020");
        let r = at(0x3000).expect("_start's row");
        assert_eq!(r.ra.kind(), Some(SlotKind::Undefined), "no .ra: outermost");
        let r = at(0x2000).expect("row");
        assert_eq!(r.ra, Slot::offset(0, -8));
        assert_eq!(
            r.reg(Arch::X86_64, 3).and_then(|s| s.kind()),
            Some(SlotKind::Unchanged)
        );
        // a deref'd CFA cannot be represented: no row, the walker falls back
        assert!(at(0x2004).is_none());
        assert_eq!(built.stats.entries, 3);
        assert_eq!(built.stats.entries_skipped, 1);
        assert_eq!(t.sources(), vec![UnwindSource::Breakpad]);
    }

    #[test]
    fn hostile_text_never_panics() {
        assert!(build_from_breakpad(b"").is_err());
        assert!(build_from_breakpad(b"MODULE Linux sparc 00 x\n").is_err());
        let base = SYM.as_bytes();
        for cut in 0..base.len() {
            let _ = build_from_breakpad(&base[..cut]);
        }
        let hostile = "MODULE Linux x86_64 00 x\n\
STACK CFI 10 .cfa: $rsp 8 +\n\
STACK CFI INIT ffffffffffffffff 10 .cfa: $rsp 8 +\n\
STACK CFI INIT 10 ffffffffffffff00 .cfa: $rsp 99999999999999999999 + .ra: .cfa -8 + ^\n\
STACK CFI 5 .ra:\n\
STACK CFI INIT 100 10 .cfa: .ra: : :: $rsp\n\
STACK CFI INIT 200 10 .cfa: $rsp 8 + .ra: .cfa -8 + ^ $xmm0: $rsp\n\
STACK CFI 208 .cfa: $rsp 8 -\n";
        let built = build_from_breakpad(hostile.as_bytes()).expect("module line is fine");
        let t = UnwindTable::open(&built.bytes).expect("open");
        assert!(t.find(0x200).is_some());
        assert_eq!(
            t.find(0x208).map(|r| r.record.cfa),
            Some(Slot::offset(7, -8))
        );
    }

    #[test]
    fn each_malformed_record_is_skipped_with_its_reason() {
        let cases: &[(&[u8], &str)] = &[
            (b"STACK CFI INIT zz 10 .cfa: $rsp 8 +", "a STACK CFI INIT record is malformed"),
            (b"STACK CFI INIT 10", "a STACK CFI INIT record is malformed"),
            (
                b"STACK CFI INIT ffffffffffffffff 10 .cfa: $rsp 8 +",
                "a STACK CFI INIT range overflows",
            ),
            (b"STACK CFI INIT 10 10 .cfa $rsp", "STACK CFI INIT at 0x10: malformed rules"),
            (b"STACK CFI INIT 10 10 .cfa:", "STACK CFI INIT at 0x10: malformed rules"),
            (b"STACK CFI zz .cfa: $rsp 8 +", "a STACK CFI record is malformed"),
            (b"STACK CFI 10 .cfa: $rsp 8 +", "a STACK CFI record outside any INIT"),
            (
                b"STACK CFI INIT 10 10 .cfa: $rsp 8 + .ra: .cfa -8 + ^\nSTACK CFI 20 .cfa: $rsp 16 +",
                "STACK CFI at 0x20 lies outside its INIT range",
            ),
            (
                b"STACK CFI INIT 10 10 .cfa: $rsp 8 + .ra: .cfa -8 + ^\nSTACK CFI 14 .ra",
                "STACK CFI at 0x14: malformed rules",
            ),
            (b"STACK CFI \xff", "a STACK record is not UTF-8"),
            (
                b"STACK CFI INIT 10 10 .cfa: $rsp 8 + ^ .ra: .cfa -8 + ^",
                "STACK CFI at 0x10: rules that cannot be represented",
            ),
        ];
        for (case, why) in cases {
            let mut text = b"MODULE Linux x86_64 00 x\n".to_vec();
            text.extend_from_slice(case);
            text.extend_from_slice(b"\nSTACK CFI INIT 100 10 .cfa: $rsp 8 + .ra: .cfa -8 + ^\n");
            let built = build_from_breakpad(&text).expect("build");
            let what = String::from_utf8_lossy(case);
            assert_eq!(built.stats.entries_skipped, 1, "{what:?}");
            assert_eq!(built.stats.first_error.as_deref(), Some(*why), "{what:?}");
            let t = UnwindTable::open(&built.bytes).expect("open");
            assert!(t.find(0x100).is_some(), "{what:?}: the good block is read");
        }
        // records the unwind builder does not read are not counted
        for quiet in [
            &b"\xff\xfe"[..],
            b"FUNC zz",
            b"STACK WIN 4 zz",
            b"STACK",
            b"",
        ] {
            let mut text = b"MODULE Linux x86_64 00 x\n".to_vec();
            text.extend_from_slice(quiet);
            let built = build_from_breakpad(&text).expect("build");
            assert_eq!(built.stats.entries_skipped, 0);
        }
    }
}
