//! Builds unwind-table rows from a Windows ARM64 PE image's exception directory: the
//! 8-byte `.pdata` entries, with packed unwind data or a pointer to an `.xdata` record,
//! as Microsoft's "ARM64 exception handling" describes them.
//!
//! Both forms come down to one list of operations, each one 4-byte prologue instruction,
//! stored as unwind codes are: the last instruction first. `.xdata` unwind codes decode
//! into it directly; packed data (`Flag` 1 and 2) is expanded into the canonical prologue
//! its `FrameSize`, `RegI`, `RegF`, `H` and `CR` fields describe (the spec's steps 0–5).
//! The operations are replayed in execution order, tracking how far `sp` moved since entry
//! and where each register was stored, so the rule at every point is
//! - `CFA = sp + moved` (the caller's `sp`), or once `set_fp`/`add_fp` ran,
//!   `CFA = x29 + k`;
//! - x19–x29 and lr at `CFA + offset` where stored (lr is the return address; until it is
//!   stored the return address is the live lr); `d8`–`d15` are not tracked;
//! - after `pac_sign_lr` (`pacibsp`), the return address signed with key B;
//! - after the custom stack codes of an interrupted frame — `MSFT_OP_MACHINE_FRAME`
//!   (the caller's `sp` and pc in two words at the CFA) and `MSFT_OP_CONTEXT` (an
//!   `ARM64_NT_CONTEXT` at the CFA: ntdll's `KiUserExceptionDispatcher` and the other
//!   dispatchers) — a flag on the rule that tells the walker to read them, the caller's
//!   pc then exact. Such a code is first in its prologue and is no instruction (Windows'
//!   and Wine's unwinders do not count it among the prologue's instructions): it holds
//!   from the function's first instruction on.
//!
//! At `n` instructions into a prologue only its first `n` operations have run; at `k`
//! instructions into an epilogue (an `.xdata` epilogue scope, the single epilogue the `E`
//! bit packs at the function's end, or packed data's epilogue at its end) the epilogue's
//! codes from the `k`-th on are still to undo, so its rows replay them. Codes after
//! `end_c` are the phantom prologue of the fragment's parent: run in full first. A
//! function with a code this builder cannot express (`save_any_reg`, the kernel's trap
//! frames, ARM64EC's contexts) gets no rows, so the walker falls back to the
//! frame-pointer chain and stack scanning, as for a skipped entry.
//!
//! Code of an executable section no entry covers is a leaf (the ABI omits `.pdata` for
//! functions that neither move `sp` nor save a register): `CFA = sp`, the return address
//! in lr, at a lower priority. Every read is bounded by the image; an entry whose data
//! cannot be read or makes no sense is skipped and counted.

use std::collections::BTreeMap;
use std::rc::Rc;

use object::read::pe::ImageNtHeaders;
use object::{pe, LittleEndian as LE};

use super::pe_x64::{add_leaf_rows, image_reader, PDATA_PRIORITY};
use super::TableWriter;
use crate::dump::Arch;
use crate::unwind::rule::{
    RuleRecord, Slot, UnwindSource, FLAG_MACHINE_FRAME, FLAG_NT_CONTEXT, FLAG_RA_KEY_B,
    FLAG_RA_SIGNED,
};

/// DWARF numbers of the registers rules name.
const X29: u8 = 29;
const LR: u8 = 30;
const SP: u8 = 31;

/// The largest function an `.xdata` header describes (18 bits of 4-byte words).
pub const MAX_FUNCTION_BYTES: u32 = (1 << 18) * 4;

/// One prologue instruction, as its unwind code describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `sub sp, sp, #n`.
    Alloc(u32),
    /// Registers stored at `sp + at` (consecutive 8-byte slots), after `sp` moved down by
    /// `pre` (a pre-indexed store). Integer registers by number (19–30), or `fp` for
    /// `d8`–`d15` (numbered 8–15), which only move `sp`.
    Save {
        regs: [u8; 2],
        count: u8,
        at: u32,
        pre: u32,
        fp: bool,
    },
    /// `save_next`: the next register pair, 16 bytes above the previous store.
    SaveNext,
    /// `mov x29, sp` (`n` 0) or `add x29, sp, #n`.
    SetFp(u32),
    Nop,
    /// `pacibsp`: lr signed with key B.
    PacSignLr,
    /// `MSFT_OP_MACHINE_FRAME`: `sp` points at the interrupted frame's `sp` and pc.
    MachineFrame,
    /// `MSFT_OP_CONTEXT`: `sp` points at the interrupted frame's `ARM64_NT_CONTEXT`.
    Context,
}

impl Op {
    /// A custom stack code: no instruction of the prologue.
    fn is_custom(self) -> bool {
        matches!(self, Op::MachineFrame | Op::Context)
    }
}

/// A decoded unwind code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    Op(Op),
    End,
    EndC,
    /// A code this builder does not express (its first byte).
    Unknown(u8),
}

/// Why an entry could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arm64Error {
    /// The `.xdata` record lies outside the image or is cut short.
    Truncated(u32),
    UnknownVersion(u8),
    /// A code this builder cannot express (the walker falls back).
    Unsupported(u8),
    Reserved,
    /// The data says something no real function does.
    Inconsistent(&'static str),
}

impl std::fmt::Display for Arm64Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arm64Error::Truncated(rva) => write!(f, "xdata at {rva:#x} is cut short"),
            Arm64Error::UnknownVersion(v) => write!(f, "xdata version {v}"),
            Arm64Error::Unsupported(b) => write!(f, "unwind code {b:#04x} is not expressed"),
            Arm64Error::Reserved => f.write_str("reserved packed-data flag 3"),
            Arm64Error::Inconsistent(why) => f.write_str(why),
        }
    }
}

/// Decodes unwind-code bytes into (byte index, code), up to the first it cannot size.
fn decode_codes(bytes: &[u8]) -> Vec<(usize, Code)> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let at = |k: usize| u32::from(bytes.get(i + k).copied().unwrap_or(0));
        let two = (u32::from(b) << 8) | at(1);
        let save = |regs: [u8; 2], count: u8, at: u32, pre: u32, fp: bool| {
            Code::Op(Op::Save {
                regs,
                count,
                at,
                pre,
                fp,
            })
        };
        // register fields are at most 4 bits: 19 + 15 fits a u8
        let x4 = ((two >> 6) & 0xf) as u8;
        let z6 = two & 0x3f;
        let (code, len) = match b {
            0x00..=0x1f => (Code::Op(Op::Alloc(u32::from(b & 0x1f) * 16)), 1),
            0x20..=0x3f => (save([19, 20], 2, 0, u32::from(b & 0x1f) * 8, false), 1),
            0x40..=0x7f => (save([X29, LR], 2, u32::from(b & 0x3f) * 8, 0, false), 1),
            0x80..=0xbf => (
                save([X29, LR], 2, 0, (u32::from(b & 0x3f) + 1) * 8, false),
                1,
            ),
            0xc0..=0xc7 => (Code::Op(Op::Alloc((two & 0x7ff) * 16)), 2),
            0xc8..=0xcb => (save([19 + x4, 20 + x4], 2, z6 * 8, 0, false), 2),
            0xcc..=0xcf => (save([19 + x4, 20 + x4], 2, 0, (z6 + 1) * 8, false), 2),
            0xd0..=0xd3 => (save([19 + x4, 0], 1, z6 * 8, 0, false), 2),
            0xd4..=0xd5 => {
                let x = ((two >> 5) & 0xf) as u8;
                (save([19 + x, 0], 1, 0, ((two & 0x1f) + 1) * 8, false), 2)
            }
            0xd6..=0xd7 => {
                let x = ((two >> 6) & 0x7) as u8;
                (save([19 + 2 * x, LR], 2, z6 * 8, 0, false), 2)
            }
            0xd8..=0xd9 => (save([8 + (x4 & 7), 9 + (x4 & 7)], 2, z6 * 8, 0, true), 2),
            0xda..=0xdb => {
                let r = 8 + (x4 & 7);
                (save([r, r + 1], 2, 0, (z6 + 1) * 8, true), 2)
            }
            0xdc..=0xdd => (save([8 + (x4 & 7), 0], 1, z6 * 8, 0, true), 2),
            0xde => {
                let r = 8 + ((two >> 5) & 0x7) as u8;
                (save([r, 0], 1, 0, ((two & 0x1f) + 1) * 8, true), 2)
            }
            0xe0 => {
                let n = (at(1) << 16) | (at(2) << 8) | at(3);
                (Code::Op(Op::Alloc(n * 16)), 4)
            }
            0xe1 => (Code::Op(Op::SetFp(0)), 1),
            0xe2 => (Code::Op(Op::SetFp(at(1) * 8)), 2),
            0xe3 => (Code::Op(Op::Nop), 1),
            0xe4 => (Code::End, 1),
            0xe5 => (Code::EndC, 1),
            0xe6 => (Code::Op(Op::SaveNext), 1),
            0xe9 => (Code::Op(Op::MachineFrame), 1),
            0xea => (Code::Op(Op::Context), 1),
            0xfc => (Code::Op(Op::PacSignLr), 1),
            other => (Code::Unknown(other), 1),
        };
        if i + len > bytes.len() {
            break;
        }
        out.push((i, code));
        if matches!(code, Code::Unknown(_)) {
            break;
        }
        i += len;
    }
    out
}

/// A sequence of operations, stored order (last instruction first): the function's own,
/// and after `end_c` its parent's (phantom) prologue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sequence {
    pub own: Vec<Op>,
    pub parent: Vec<Op>,
}

/// The sequence starting at byte `index` of the decoded codes.
fn sequence(codes: &[(usize, Code)], index: usize) -> Result<Sequence, Arm64Error> {
    let mut seq = Sequence::default();
    let mut in_parent = false;
    let start = codes.partition_point(|(i, _)| *i < index);
    if codes.get(start).is_some_and(|(i, _)| *i != index) {
        return Err(Arm64Error::Inconsistent("an epilogue starts inside a code"));
    }
    for &(_, code) in codes.get(start..).unwrap_or_default() {
        match code {
            Code::Op(op) if in_parent => seq.parent.push(op),
            Code::Op(op) => seq.own.push(op),
            Code::End => break,
            Code::EndC if in_parent => break,
            Code::EndC => in_parent = true,
            Code::Unknown(b) => return Err(Arm64Error::Unsupported(b)),
        }
    }
    Ok(seq)
}

/// A function's unwind description: its length and its prologue and epilogues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub length: u32,
    pub prologue: Sequence,
    /// (offset of the first instruction from the function's start, sequence); scopes
    /// sharing a start index share their sequence.
    pub epilogues: Vec<(u32, Rc<Sequence>)>,
}

/// Parses the `.xdata` record at `rva` of an image read by `read(rva, len)`.
pub fn parse_xdata<'a>(
    read: &impl Fn(u32, usize) -> Option<&'a [u8]>,
    rva: u32,
) -> Result<Function, Arm64Error> {
    let word = |at: u32| -> Result<u32, Arm64Error> {
        let b = read(at, 4).ok_or(Arm64Error::Truncated(rva))?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let head = word(rva)?;
    let length = (head & 0x3ffff) * 4;
    let version = ((head >> 18) & 3) as u8;
    if version != 0 {
        return Err(Arm64Error::UnknownVersion(version));
    }
    let e_bit = head & (1 << 21) != 0;
    let (mut epilog_count, mut code_words) = ((head >> 22) & 0x1f, (head >> 27) & 0x1f);
    let mut at = rva.checked_add(4).ok_or(Arm64Error::Truncated(rva))?;
    if epilog_count == 0 && code_words == 0 {
        let ext = word(at)?;
        (epilog_count, code_words) = (ext & 0xffff, (ext >> 16) & 0xff);
        at = at.checked_add(4).ok_or(Arm64Error::Truncated(rva))?;
    }
    let scopes_len = if e_bit { 0 } else { epilog_count as usize * 4 };
    let scopes = read(at, scopes_len).ok_or(Arm64Error::Truncated(rva))?;
    let codes_at = at
        .checked_add(scopes_len as u32)
        .ok_or(Arm64Error::Truncated(rva))?;
    let code_bytes = read(codes_at, code_words as usize * 4).ok_or(Arm64Error::Truncated(rva))?;
    let codes = decode_codes(code_bytes);
    let prologue = sequence(&codes, 0)?;
    let mut epilogues = Vec::new();
    if e_bit {
        let seq = sequence(&codes, epilog_count as usize)?;
        let words = u32::try_from(seq.own.len() + 1).unwrap_or(u32::MAX);
        if let Some(start) = (length / 4).checked_sub(words) {
            epilogues.push((start * 4, Rc::new(seq)));
        }
    } else {
        // each distinct start index decoded once (at most the 1 020 code bytes), and no
        // more scopes than the function has instructions, whatever the count claims
        let mut decoded: BTreeMap<usize, Rc<Sequence>> = BTreeMap::new();
        for s in scopes.chunks_exact(4).take((length / 4) as usize) {
            let s = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
            let index = (s >> 22) as usize;
            let seq = match decoded.get(&index) {
                Some(seq) => Rc::clone(seq),
                None => {
                    let seq = Rc::new(sequence(&codes, index)?);
                    decoded.insert(index, Rc::clone(&seq));
                    seq
                }
            };
            epilogues.push(((s & 0x3ffff) * 4, seq));
        }
    }
    Ok(Function {
        length,
        prologue,
        epilogues,
    })
}

/// Expands packed unwind data (the `.pdata` entry's second word, `Flag` 1 or 2) into the
/// canonical prologue it stands for, and its epilogue at the function's end for `Flag` 1.
pub fn unpack(data: u32) -> Result<Function, Arm64Error> {
    let flag = data & 3;
    if flag == 3 {
        return Err(Arm64Error::Reserved);
    }
    let length = ((data >> 2) & 0x7ff) * 4;
    let exec = canonical_prologue(data)?;
    let prologue = Sequence {
        own: exec.iter().rev().map(|(op, _)| *op).collect(),
        parent: Vec::new(),
    };
    let mut epilogues = Vec::new();
    if flag == 1 {
        let own: Vec<Op> = exec.iter().rev().filter(|e| !e.1).map(|e| e.0).collect();
        let words = own.len() as u32 + 1;
        if let Some(start) = (length / 4).checked_sub(words) {
            epilogues.push((
                start * 4,
                Rc::new(Sequence {
                    own,
                    parent: Vec::new(),
                }),
            ));
        }
        return Ok(Function {
            length,
            prologue,
            epilogues,
        });
    }
    // flag 2: a fragment without prologue or epilogue; the body's state throughout
    Ok(Function {
        length,
        prologue: Sequence {
            own: Vec::new(),
            parent: prologue.own,
        },
        epilogues,
    })
}

/// The canonical prologue packed data describes, in execution order, each operation
/// with whether the epilogue lacks it (`set_fp` and the `H` stores).
fn canonical_prologue(data: u32) -> Result<Vec<(Op, bool)>, Arm64Error> {
    let reg_f = (data >> 13) & 7;
    let reg_i = (data >> 16) & 0xf;
    let h = (data >> 20) & 1;
    let cr = (data >> 21) & 3;
    let frame = ((data >> 23) & 0x1ff) * 16;
    if reg_i > 10 {
        return Err(Arm64Error::Inconsistent("RegI beyond x28"));
    }
    // step 0: the areas' sizes
    let int_size = reg_i * 8 + if cr == 1 { 8 } else { 0 };
    let fp_size = if reg_f > 0 { reg_f * 8 + 8 } else { 0 };
    let save_size = (int_size + fp_size + 64 * h + 15) & !15;
    let local = frame
        .checked_sub(save_size)
        .ok_or(Arm64Error::Inconsistent("FrameSize below the save area"))?;
    let save = |regs: [u8; 2], count: u8, at: u32, pre: u32, fp: bool| Op::Save {
        regs,
        count,
        at,
        pre,
        fp,
    };
    // execution order; `homing` marks the H nops, which the epilogue lacks
    let mut exec: Vec<(Op, bool)> = Vec::new();
    if cr == 2 {
        exec.push((Op::PacSignLr, false));
    }
    // step 1 (and 2: lr at the end of the integer area)
    let mut pre = save_size;
    for p in 0..reg_i / 2 {
        let r = 19 + 2 * p as u8;
        exec.push((save([r, r + 1], 2, 16 * p, pre, false), false));
        pre = 0;
    }
    let at_i = 8 * (reg_i & !1);
    if reg_i % 2 == 1 {
        let r = 18 + reg_i as u8;
        let (regs, count) = if cr == 1 { ([r, LR], 2) } else { ([r, 0], 1) };
        exec.push((save(regs, count, at_i, pre, false), false));
        pre = 0;
    } else if cr == 1 {
        exec.push((save([LR, 0], 1, at_i, pre, false), false));
        pre = 0;
    }
    // step 3: d8 onwards, RegF + 1 registers
    if reg_f > 0 {
        let n = reg_f + 1;
        for p in 0..n / 2 {
            let r = 8 + 2 * p as u8;
            exec.push((save([r, r + 1], 2, int_size + 16 * p, pre, true), false));
            pre = 0;
        }
        if n % 2 == 1 {
            let r = 8 + reg_f as u8;
            exec.push((save([r, 0], 1, int_size + fp_size - 8, pre, true), false));
            pre = 0;
        }
    }
    // step 4: x0–x7 homed (nothing to undo but the stack the first store may claim: the
    // epilogue has no homing stores, but it must give that stack back before its `ret`)
    for _ in 0..4 * h {
        exec.push((save([0, 0], 0, 0, pre, true), pre == 0));
        pre = 0;
    }
    if pre != 0 {
        // nothing saved: the save area is allocated with the locals
        return Err(Arm64Error::Inconsistent("a save area without saves"));
    }
    // step 5: the locals, and x29/lr for a chained function
    let alloc = |exec: &mut Vec<(Op, bool)>| {
        if local > 4080 {
            exec.push((Op::Alloc(4080), false));
            exec.push((Op::Alloc(local - 4080), false));
        } else if local > 0 {
            exec.push((Op::Alloc(local), false));
        }
    };
    if cr >= 2 {
        if local <= 512 {
            exec.push((save([X29, LR], 2, 0, local, false), false));
        } else {
            alloc(&mut exec);
            exec.push((save([X29, LR], 2, 0, 0, false), false));
        }
        exec.push((Op::SetFp(0), true));
    } else {
        alloc(&mut exec);
    }
    Ok(exec)
}

/// The stack state a replay of operations reaches.
#[derive(Debug, Clone, Default)]
struct State {
    /// Bytes `sp` moved down since entry.
    moved: u64,
    /// Once the frame pointer is set: `CFA = x29 + k`.
    fp: Option<i64>,
    /// Saved integer registers: (number, offset from the CFA).
    saved: Vec<(u8, i64)>,
    signed: bool,
    /// The last store, for `save_next`: (first register, offset from `sp`, floating point).
    last: Option<(u8, u32, bool)>,
    /// A custom stack code ([`Op::MachineFrame`], [`Op::Context`]) ran first.
    custom: Option<Op>,
}

impl State {
    /// Runs `ops` given in stored order (last instruction first), in execution order.
    fn run(&mut self, ops: &[Op]) -> Result<(), Arm64Error> {
        for op in ops.iter().rev() {
            self.apply(*op)?;
        }
        Ok(())
    }

    fn apply(&mut self, op: Op) -> Result<(), Arm64Error> {
        const TOO_FAR: Arm64Error = Arm64Error::Inconsistent("the stack moves beyond 4 GiB");
        match op {
            Op::Alloc(n) => self.moved = self.moved.checked_add(u64::from(n)).ok_or(TOO_FAR)?,
            Op::Save {
                regs,
                count,
                at,
                pre,
                fp,
            } => {
                self.moved = self.moved.checked_add(u64::from(pre)).ok_or(TOO_FAR)?;
                for (k, &r) in regs.iter().take(usize::from(count)).enumerate() {
                    self.store(r, at, k, fp);
                }
                if count > 0 {
                    self.last = Some((regs[0], at, fp));
                }
            }
            Op::SaveNext => {
                let (r, at, fp) = self
                    .last
                    .ok_or(Arm64Error::Inconsistent("save_next after no pair"))?;
                // after the last integer pair (x27, x28) the next pair is d8, d9
                let (r, fp) = match (r + 2, fp) {
                    (next, false) if next + 1 > 28 => (8, true),
                    (next, fp) => (next, fp),
                };
                let at = at + 16;
                self.store(r, at, 0, fp);
                self.store(r + 1, at, 1, fp);
                self.last = Some((r, at, fp));
            }
            Op::SetFp(n) => {
                self.fp = Some(self.moved as i64 - i64::from(n));
            }
            Op::Nop => {}
            Op::PacSignLr => self.signed = true,
            Op::MachineFrame | Op::Context => {
                if self.moved != 0 || !self.saved.is_empty() || self.custom.is_some() {
                    return Err(Arm64Error::Inconsistent(
                        "a machine frame or context after other prologue codes",
                    ));
                }
                self.custom = Some(op);
            }
        }
        if self.moved > u64::from(u32::MAX) {
            return Err(TOO_FAR);
        }
        Ok(())
    }

    fn store(&mut self, reg: u8, at: u32, k: usize, fp: bool) {
        if fp || !(19..=LR).contains(&reg) {
            return;
        }
        let off = i64::from(at) + 8 * k as i64 - self.moved as i64;
        self.saved.retain(|(r, _)| *r != reg);
        self.saved.push((reg, off));
    }

    /// The rule this state gives.
    fn rule(&self) -> Option<RuleRecord> {
        let cfa = match self.fp {
            Some(k) => Slot::offset(X29, i32::try_from(k).ok()?),
            None => Slot::offset(SP, i32::try_from(self.moved).ok()?),
        };
        match self.custom {
            // the CFA is where the machine frame or context is; the walker reads it
            Some(Op::Context) => {
                let mut rule = RuleRecord::new(UnwindSource::PeArm64, cfa, Slot::offset(0, 0x108));
                rule.flags |= FLAG_NT_CONTEXT;
                return Some(rule);
            }
            Some(_) => {
                let mut rule = self.rule_with(cfa, Slot::offset(0, 8))?;
                rule.flags |= FLAG_MACHINE_FRAME;
                return Some(rule);
            }
            None => {}
        }
        let ra = match self.saved.iter().find(|(r, _)| *r == LR) {
            Some(&(_, off)) => Slot::offset(0, i32::try_from(off).ok()?),
            None => Slot::UNCHANGED,
        };
        self.rule_with(cfa, ra)
    }

    /// The rule with `cfa` and `ra`, the saved registers and the signing flags.
    fn rule_with(&self, cfa: Slot, ra: Slot) -> Option<RuleRecord> {
        let mut rule = RuleRecord::new(UnwindSource::PeArm64, cfa, ra);
        if self.signed {
            rule.flags |= FLAG_RA_SIGNED | FLAG_RA_KEY_B;
        }
        for &(reg, off) in self.saved.iter().filter(|(r, _)| *r != LR) {
            rule.set_reg(
                Arch::Aarch64,
                u16::from(reg),
                Slot::offset(0, i32::try_from(off).ok()?),
            );
        }
        Some(rule)
    }
}

/// The state after the parent's prologue in full and the first `n` instructions of
/// `own` (the last `n` of its stored order), with its custom stack codes, which are no
/// instructions.
fn state_at(seq: &Sequence, n: usize) -> Result<State, Arm64Error> {
    let mut s = State::default();
    s.run(&seq.parent)?;
    let mut run = 0;
    for &op in seq.own.iter().rev() {
        if op.is_custom() {
            s.apply(op)?;
        } else if run < n {
            s.apply(op)?;
            run += 1;
        }
    }
    Ok(s)
}

/// The instructions of a sequence's own codes.
fn instructions(ops: &[Op]) -> usize {
    ops.iter().filter(|op| !op.is_custom()).count()
}

/// The rule at each instruction `k` of an epilogue (0 to the `ret`): its codes from the
/// `k`-th on still to undo, after the parent's prologue.
fn epilogue_rules(seq: &Sequence) -> Result<Vec<RuleRecord>, Arm64Error> {
    const BAD: Arm64Error = Arm64Error::Inconsistent("an offset beyond what a rule holds");
    let mut s = State::default();
    s.run(&seq.parent)?;
    // the ret first (nothing left), then each code back to the first, in execution order
    let mut rules = vec![s.rule().ok_or(BAD)?];
    for op in seq.own.iter().rev() {
        s.apply(*op)?;
        rules.push(s.rule().ok_or(BAD)?);
    }
    rules.reverse();
    Ok(rules)
}

/// The rows of one function starting at RVA `begin`: (start, end, rule), ascending and
/// disjoint, covering `[begin, begin + length)`.
pub fn function_rows(begin: u32, f: &Function) -> Result<Vec<(u32, u32, RuleRecord)>, Arm64Error> {
    const BAD: Arm64Error = Arm64Error::Inconsistent("an offset beyond what a rule holds");
    let end = begin
        .checked_add(f.length)
        .ok_or(Arm64Error::Inconsistent("the function wraps around"))?;
    let prologue = instructions(&f.prologue.own);
    let body = state_at(&f.prologue, prologue)?.rule().ok_or(BAD)?;
    // one row per prologue and epilogue instruction, no more than the function has
    let cap = (f.length / 4) as usize;
    let mut special: Vec<(u32, RuleRecord)> = Vec::new();
    for n in 0..prologue.min(cap) {
        let rule = state_at(&f.prologue, n)?.rule().ok_or(BAD)?;
        special.push((begin + 4 * n as u32, rule));
    }
    // scopes sharing a sequence share its rules: bounded work whatever the scope count
    let mut decoded: BTreeMap<usize, Vec<RuleRecord>> = BTreeMap::new();
    for (start, seq) in &f.epilogues {
        if special.len() > cap {
            break;
        }
        let key = Rc::as_ptr(seq) as usize;
        if let std::collections::btree_map::Entry::Vacant(e) = decoded.entry(key) {
            e.insert(epilogue_rules(seq)?);
        }
        for (k, rule) in decoded.get(&key).into_iter().flatten().enumerate() {
            let Some(at) = start.checked_add(4 * k as u32).filter(|a| *a < f.length) else {
                break;
            };
            special.push((begin + at, *rule));
        }
    }
    special.sort_by_key(|(a, _)| *a);
    let mut rows = Vec::with_capacity(special.len() * 2 + 1);
    let mut at = begin;
    for (start, rule) in special {
        if start < at {
            continue;
        }
        if start > at {
            rows.push((at, start, body));
        }
        rows.push((start, start + 4, rule));
        at = start + 4;
    }
    if at < end {
        rows.push((at, end, body));
    }
    Ok(rows)
}

/// The description of the function of one `.pdata` entry (its second word `data`).
pub fn function_of<'a>(
    read: &impl Fn(u32, usize) -> Option<&'a [u8]>,
    data: u32,
) -> Result<Function, Arm64Error> {
    if data & 3 == 0 {
        parse_xdata(read, data)
    } else {
        unpack(data)
    }
}

/// Pushes the rows of the function at `begin` whose `.pdata` second word is `data`;
/// returns its length.
pub fn add_function<'a>(
    w: &mut TableWriter,
    read: &impl Fn(u32, usize) -> Option<&'a [u8]>,
    begin: u32,
    data: u32,
) -> Result<u32, Arm64Error> {
    let f = function_of(read, data)?;
    for (start, end, rule) in function_rows(begin, &f)? {
        w.push(u64::from(start), u64::from(end), &rule, PDATA_PRIORITY);
    }
    Ok(f.length)
}

/// An ARM64 PE32+ image's exception directory: (RVA, size), when the image has one.
pub fn pdata_of(file: &object::File<'_>) -> Option<(u32, u32)> {
    let object::File::Pe64(pe_file) = file else {
        return None;
    };
    if pe_file.nt_headers().file_header().machine.get(LE) != pe::IMAGE_FILE_MACHINE_ARM64 {
        return None;
    }
    let dir = pe_file.data_directory(pe::IMAGE_DIRECTORY_ENTRY_EXCEPTION)?;
    let (rva, size) = (dir.virtual_address.get(LE), dir.size.get(LE));
    (size > 0).then_some((rva, size))
}

/// Adds the rows of an ARM64 image's exception directory, and the leaf rule over the rest
/// of its code. Addresses are RVAs.
pub fn add_pe_pdata(w: &mut TableWriter, file: &object::File<'_>) {
    let leaf = RuleRecord::new(UnwindSource::PeArm64, Slot::offset(SP, 0), Slot::UNCHANGED);
    let Some((rva, size)) = pdata_of(file) else {
        return;
    };
    let read = image_reader(file);
    let Some(pdata) = read(rva, size as usize) else {
        w.stats
            .skip(|| format!(".pdata at {rva:#x} ({size} bytes) is outside the image"));
        add_leaf_rows(w, file, &[], &leaf);
        return;
    };
    w.stats.source_bytes += pdata.len();
    w.note_source(UnwindSource::PeArm64);
    w.reserve(pdata.len() / 8 * 2);
    let entries: Vec<(u32, u32)> = pdata
        .chunks_exact(8)
        .map(|e| {
            (
                u32::from_le_bytes([e[0], e[1], e[2], e[3]]),
                u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            )
        })
        .filter(|&(begin, data)| begin != 0 || data != 0)
        .collect();
    let mut covered = Vec::with_capacity(entries.len());
    for (i, &(begin, data)) in entries.iter().enumerate() {
        let mark = w.mark();
        match add_function(w, &read, begin, data) {
            Ok(len) => {
                w.stats.entries += 1;
                covered.push((begin, begin.saturating_add(len)));
            }
            Err(e) => {
                w.rewind(mark);
                w.stats
                    .skip(|| format!(".pdata: function at {begin:#x}: {e}"));
                // its length unknown, it is no leaf up to the next entry
                let next = entries.get(i + 1).map_or(begin, |e| e.0);
                covered.push((begin, next.max(begin.saturating_add(4))));
            }
        }
    }
    add_leaf_rows(w, file, &covered, &leaf);
}

#[cfg(test)]
#[path = "pe_arm64_tests.rs"]
mod tests;
