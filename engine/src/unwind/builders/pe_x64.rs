//! Builds unwind-table rows from a Windows x64 PE image's exception directory: the
//! `RUNTIME_FUNCTION` entries of `.pdata` and the `UNWIND_INFO` records in `.xdata` they
//! point to, as `RtlVirtualUnwind` reads them.
//!
//! Each function becomes one row per prologue step: the unwind codes are listed last
//! instruction first, each with the offset just past the instruction it describes, so at
//! an offset `o` into the function only the codes whose offset is `<= o` have run. The
//! codes are replayed in execution order, tracking how far the stack pointer has moved
//! since entry and where each non-volatile register was saved; the rule at every step is
//! - `CFA = rsp + moved + 8` (the caller's stack pointer, just above the return address),
//!   or after `UWOP_SET_FPREG`, `CFA = frame_reg - 16 * FrameOffset + moved_then + 8`;
//! - the return address at `CFA - 8`;
//! - a `PUSH_NONVOL` register at `CFA - 8 - moved_after_push`; a `SAVE_NONVOL(_FAR)`
//!   register at the establisher frame (the frame register's base once set, else the
//!   stack pointer) plus its offset;
//! - `PUSH_MACHFRAME` (an interrupt or exception frame the processor pushed): the return
//!   address at `[rsp]` and the caller's stack pointer at `[rsp + 24]`, each 8 further up
//!   with an error code.
//!
//! Chained unwind info (`UNW_FLAG_CHAININFO`: a function split in parts, the later parts
//! naming the first) replays the parent's codes in full before the part's own. An entry
//! whose `UnwindInfoAddress` has its low bit set points at another `RUNTIME_FUNCTION`
//! whose unwind info it shares. XMM saves move nothing the walk tracks and are skipped.
//!
//! Code of an executable section that no entry covers is a leaf function (the x64 ABI
//! requires unwind info for every function that calls or moves the stack pointer): it
//! gets `CFA = rsp + 8` at a lower priority, as Windows unwinders treat such a pc. Rows
//! are pushed at [`PDATA_PRIORITY`]; an image with `.pdata` is built from it alone
//! (`build_from_elf`), so DWARF CFI a mingw-w64 image also carries never competes: `.pdata`
//! is what the system's own unwinder uses.
//!
//! Epilogues are found the way Windows unwinders recognise one at a pc, but once, at
//! build time: the function's code is decoded from its first byte, and every `ret` with
//! the `pop`s of non-volatile registers before it, and before those an `add rsp, N` or
//! `lea rsp, [frame_reg + N]`, is an epilogue when those undo exactly the stack the
//! prologue moved (else the body's rule stays). Inside it, after the `add`/`lea`:
//! `CFA = rsp + 8 + 8 * pops_left`, the registers not yet popped still at their slots,
//! and those restored by `mov` before the epilogue (saved with `SAVE_NONVOL`) unchanged.
//! A tail call ends an epilogue as a `ret` does, in the forms `RtlVirtualUnwind` takes
//! for one: a direct `jmp` out of the function's range (or to its first byte), `jmp
//! [rip + N]` (`FF 25`, an import thunk's), or an indirect `jmp` with a `REX.W` prefix
//! (which compilers add to say the jump leaves the function). A `jmp` inside the
//! function (a branch to a shared epilogue, a switch) ends none.
//!
//! Every read is bounded by the image; a malformed entry is skipped and counted, a chain
//! longer than [`MAX_CHAIN`] is cut.

use object::read::pe::ImageNtHeaders;
use object::{pe, LittleEndian as LE, Object, ObjectSection, SectionKind};

use super::TableWriter;
use crate::arch::x86_64::Reg;
use crate::unwind::rule::{RuleRecord, Slot, UnwindSource};

/// Priority of `.pdata` rows (the only rows of their table but the leaf rule's).
pub const PDATA_PRIORITY: u8 = 0;
/// Priority of the leaf rule over code no entry covers: after every table.
pub const LEAF_PRIORITY: u8 = 20;
/// Chained unwind infos followed at most.
pub const MAX_CHAIN: usize = 32;

const RSP: u8 = Reg::Rsp.dwarf() as u8;

const UNW_FLAG_CHAININFO: u8 = 4;

/// The DWARF number of an x64 register as unwind codes number them (RAX, RCX, RDX, RBX,
/// RSP, RBP, RSI, RDI, R8–R15).
fn dwarf_reg(windows: u8) -> u16 {
    const MAP: [Reg; 16] = [
        Reg::Rax,
        Reg::Rcx,
        Reg::Rdx,
        Reg::Rbx,
        Reg::Rsp,
        Reg::Rbp,
        Reg::Rsi,
        Reg::Rdi,
        Reg::R8,
        Reg::R9,
        Reg::R10,
        Reg::R11,
        Reg::R12,
        Reg::R13,
        Reg::R14,
        Reg::R15,
    ];
    MAP[usize::from(windows & 15)].dwarf()
}

/// One decoded unwind operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    PushNonvol(u8),
    Alloc(u32),
    SetFpreg,
    SaveNonvol {
        reg: u8,
        offset: u32,
    },
    /// An XMM register saved: moves nothing.
    SaveXmm,
    PushMachframe {
        error_code: bool,
    },
    /// Version 2's epilogue descriptions: not a prologue step.
    Epilog,
}

/// A code: the offset just past the prologue instruction it describes, and what it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    pub offset: u8,
    pub op: Op,
}

/// An `UNWIND_INFO` record, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnwindInfo {
    pub flags: u8,
    pub prolog_size: u8,
    /// The frame register (unwind-code numbering) and its scaled offset, when set.
    pub frame_register: u8,
    pub frame_offset: u8,
    /// As stored: the last prologue instruction first.
    pub codes: Vec<Code>,
    /// With `UNW_FLAG_CHAININFO`: the parent's (begin, end, unwind info) RVAs.
    pub chained: Option<(u32, u32, u32)>,
}

/// Why an entry could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PdataError {
    /// The unwind info lies outside the image or is cut short.
    Truncated(u32),
    UnknownVersion(u8),
    UnknownOp(u8),
    ChainTooLong,
    /// The codes say something no real prologue does (a frame register of `rsp`, a frame
    /// offset past the stack moved so far, or a stack move beyond 4 GiB).
    Inconsistent(&'static str),
}

impl std::fmt::Display for PdataError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PdataError::Truncated(rva) => write!(f, "unwind info at {rva:#x} is cut short"),
            PdataError::UnknownVersion(v) => write!(f, "unwind info version {v}"),
            PdataError::UnknownOp(op) => write!(f, "unknown unwind code {op}"),
            PdataError::ChainTooLong => write!(f, "chained unwind info deeper than {MAX_CHAIN}"),
            PdataError::Inconsistent(why) => f.write_str(why),
        }
    }
}

/// Parses the `UNWIND_INFO` at `rva` of an image read by `read(rva, len)`.
pub fn parse_unwind_info<'a>(
    read: &impl Fn(u32, usize) -> Option<&'a [u8]>,
    rva: u32,
) -> Result<UnwindInfo, PdataError> {
    let head = read(rva, 4).ok_or(PdataError::Truncated(rva))?;
    let (version, flags) = (head[0] & 7, head[0] >> 3);
    if !(1..=2).contains(&version) {
        return Err(PdataError::UnknownVersion(version));
    }
    let count = usize::from(head[2]);
    let body_rva = rva.checked_add(4).ok_or(PdataError::Truncated(rva))?;
    let slots = read(body_rva, count * 2).ok_or(PdataError::Truncated(rva))?;
    let slot = |i: usize| -> Option<u16> {
        let b = slots.get(i * 2..i * 2 + 2)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    };
    let mut codes = Vec::with_capacity(count);
    let mut i = 0;
    while i < count {
        let [offset, packed] = slot(i).ok_or(PdataError::Truncated(rva))?.to_le_bytes();
        let (op, info) = (packed & 15, packed >> 4);
        let next = |k: usize| slot(i + k).ok_or(PdataError::Truncated(rva));
        let (op, used) = match op {
            0 => (Op::PushNonvol(info), 1),
            1 if info == 0 => (Op::Alloc(u32::from(next(1)?) * 8), 2),
            1 => {
                let size = u32::from(next(1)?) | (u32::from(next(2)?) << 16);
                (Op::Alloc(size), 3)
            }
            2 => (Op::Alloc(u32::from(info) * 8 + 8), 1),
            3 => (Op::SetFpreg, 1),
            4 => (
                Op::SaveNonvol {
                    reg: info,
                    offset: u32::from(next(1)?) * 8,
                },
                2,
            ),
            5 => {
                let offset = u32::from(next(1)?) | (u32::from(next(2)?) << 16);
                (Op::SaveNonvol { reg: info, offset }, 3)
            }
            // version 1: SAVE_XMM (2 slots); version 2: EPILOG (2 slots, as Wine reads it)
            6 if version == 1 => (Op::SaveXmm, 2),
            6 => (Op::Epilog, 2),
            // version 1: SAVE_XMM_FAR (3 slots); version 2: spare (1 slot)
            7 if version == 1 => (Op::SaveXmm, 3),
            7 => (Op::Epilog, 1),
            8 => (Op::SaveXmm, 2),
            9 => (Op::SaveXmm, 3),
            10 => (
                Op::PushMachframe {
                    error_code: info != 0,
                },
                1,
            ),
            other => return Err(PdataError::UnknownOp(other)),
        };
        codes.push(Code { offset, op });
        i += used;
    }
    let chained = if flags & UNW_FLAG_CHAININFO != 0 {
        // the parent RUNTIME_FUNCTION follows the codes, padded to an even count
        let at = body_rva
            .checked_add(u32::try_from(count.next_multiple_of(2) * 2).unwrap_or(u32::MAX))
            .ok_or(PdataError::Truncated(rva))?;
        let f = read(at, 12).ok_or(PdataError::Truncated(rva))?;
        Some(runtime_function(f))
    } else {
        None
    };
    Ok(UnwindInfo {
        flags,
        prolog_size: head[1],
        frame_register: head[3] & 15,
        frame_offset: head[3] >> 4,
        codes,
        chained,
    })
}

/// A 12-byte `RUNTIME_FUNCTION`: (begin, end, unwind info) RVAs.
fn runtime_function(b: &[u8]) -> (u32, u32, u32) {
    let word = |i: usize| {
        b.get(i * 4..i * 4 + 4)
            .map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
    };
    (word(0), word(1), word(2))
}

/// The stack state a replay of the codes reaches.
#[derive(Debug, Clone, Default)]
struct State {
    /// Bytes the stack pointer moved down since entry.
    moved: u64,
    /// After `SET_FPREG`: (frame register, `moved` at that point, scaled offset).
    frame: Option<(u8, u64, u64)>,
    /// Saved registers: (DWARF number, offset from the CFA).
    saved: Vec<(u16, i64)>,
    /// The registers of `saved` that were pushed (an epilogue pops them).
    pushed: Vec<u16>,
    /// `SAVE_NONVOL`s of the unwind info being replayed: (DWARF number, offset from the
    /// establisher frame), which is only known at the pc ([`State::settle`]).
    pending: Vec<(u16, u32)>,
    /// After `PUSH_MACHFRAME`: where (from `rsp` at that point) the return address and the
    /// caller's stack pointer are; `moved` resets there.
    machframe: Option<(u64, u64)>,
}

impl State {
    fn apply(&mut self, info: &UnwindInfo, op: Op) -> Result<(), PdataError> {
        const TOO_FAR: PdataError = PdataError::Inconsistent("the stack moves beyond 4 GiB");
        match op {
            Op::PushNonvol(r) => {
                self.moved = self.moved.checked_add(8).ok_or(TOO_FAR)?;
                self.save(dwarf_reg(r), -8 - self.moved as i64);
                self.pushed.push(dwarf_reg(r));
            }
            Op::Alloc(n) => {
                self.moved = self.moved.checked_add(u64::from(n)).ok_or(TOO_FAR)?;
            }
            Op::SetFpreg => {
                if info.frame_register == 0 || info.frame_register == 4 {
                    return Err(PdataError::Inconsistent(
                        "SET_FPREG without a frame register",
                    ));
                }
                let scaled = u64::from(info.frame_offset) * 16;
                if scaled > self.moved {
                    return Err(PdataError::Inconsistent(
                        "frame offset above the return address",
                    ));
                }
                self.frame = Some((info.frame_register, self.moved, scaled));
            }
            Op::SaveNonvol { reg, offset } => {
                let reg = dwarf_reg(reg);
                self.saved.retain(|(r, _)| *r != reg);
                self.pending.retain(|(r, _)| *r != reg);
                self.pending.push((reg, offset));
            }
            Op::SaveXmm | Op::Epilog => {}
            Op::PushMachframe { error_code } => {
                let skip = if error_code { 8 } else { 0 };
                self.machframe = Some((skip, skip + 24));
                self.moved = 0;
            }
        }
        if self.moved > u64::from(u32::MAX) {
            return Err(TOO_FAR);
        }
        Ok(())
    }

    fn save(&mut self, reg: u16, at: i64) {
        self.saved.retain(|(r, _)| *r != reg);
        self.pending.retain(|(r, _)| *r != reg);
        self.saved.push((reg, at));
    }

    /// Places the pending `SAVE_NONVOL`s as `RtlVirtualUnwind` does: from the establisher
    /// frame — the frame register's base once `SET_FPREG` ran, else the stack pointer as
    /// it is now (for a parent of a chain: at the end of its prologue).
    fn settle(&mut self) {
        let base = self.frame.map_or(self.moved, |(_, moved, _)| moved) as i64;
        for (reg, offset) in std::mem::take(&mut self.pending) {
            self.saved.push((reg, -8 - base + i64::from(offset)));
        }
    }

    /// The rule this state gives at its pc.
    fn rule(mut self, w: &mut TableWriter) -> Option<RuleRecord> {
        self.settle();
        if let Some((ra_at, sp_at)) = self.machframe {
            // CFA = [rsp + moved + sp_at], the return address read at rsp + moved + ra_at
            let base = i64::try_from(self.moved).ok()?;
            let cfa = Slot::deref_offset(RSP, i32::try_from(base + sp_at as i64).ok()?);
            // DW_OP_drop (the CFA), DW_OP_breg7 (rsp) + offset
            let mut expr = vec![0x13, 0x77];
            leb128_signed(&mut expr, base + ra_at as i64);
            let (off, len) = w.add_expression(&expr)?;
            return Some(RuleRecord::new(
                UnwindSource::Pdata,
                cfa,
                Slot::expression(false, off, len),
            ));
        }
        let cfa = match self.frame {
            Some((reg, moved, scaled)) => {
                let off = i64::try_from(moved).ok()? - i64::try_from(scaled).ok()? + 8;
                Slot::offset(dwarf_reg(reg) as u8, i32::try_from(off).ok()?)
            }
            None => Slot::offset(RSP, i32::try_from(self.moved + 8).ok()?),
        };
        let mut rule = RuleRecord::new(UnwindSource::Pdata, cfa, Slot::offset(0, -8));
        for &(reg, at) in &self.saved {
            let Ok(at) = i32::try_from(at) else { continue };
            // a volatile register pushed as padding (`push rcx`): nothing to restore
            rule.set_reg(crate::dump::Arch::X86_64, reg, Slot::offset(0, at));
        }
        Some(rule)
    }
}

fn leb128_signed(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        let done = (v == 0 && byte & 0x40 == 0) || (v == -1 && byte & 0x40 != 0);
        out.push(if done { byte } else { byte | 0x80 });
        if done {
            break;
        }
    }
}

/// The unwind infos of a function, its own first, then each parent of the chain.
fn chain<'a>(
    read: &impl Fn(u32, usize) -> Option<&'a [u8]>,
    info_rva: u32,
) -> Result<Vec<UnwindInfo>, PdataError> {
    let mut out = Vec::new();
    let mut rva = info_rva;
    loop {
        if out.len() >= MAX_CHAIN {
            return Err(PdataError::ChainTooLong);
        }
        let info = parse_unwind_info(read, rva)?;
        let next = info.chained.map(|(_, _, parent)| parent);
        out.push(info);
        match next {
            Some(parent) => rva = resolve_indirect(read, parent)?,
            None => return Ok(out),
        }
    }
}

/// An unwind-info RVA with its low bit set names another `RUNTIME_FUNCTION` instead.
fn resolve_indirect<'a>(
    read: &impl Fn(u32, usize) -> Option<&'a [u8]>,
    rva: u32,
) -> Result<u32, PdataError> {
    if rva & 1 == 0 {
        return Ok(rva);
    }
    let f = read(rva & !1, 12).ok_or(PdataError::Truncated(rva))?;
    Ok(runtime_function(f).2 & !1)
}

/// Pushes the rows of one function `[begin, end)` (RVAs) whose unwind info is at
/// `info_rva`.
pub fn add_function<'a>(
    w: &mut TableWriter,
    read: &impl Fn(u32, usize) -> Option<&'a [u8]>,
    begin: u32,
    end: u32,
    info_rva: u32,
) -> Result<(), PdataError> {
    if end <= begin {
        return Err(PdataError::Inconsistent("function ends before it begins"));
    }
    let infos = chain(read, resolve_indirect(read, info_rva)?)?;
    let (own, parents) = infos.split_first().ok_or(PdataError::Truncated(info_rva))?;
    // the parents' prologues ran in full before this part: outermost parent first
    let mut state = State::default();
    for parent in parents.iter().rev() {
        for code in parent.codes.iter().rev() {
            state.apply(parent, code.op)?;
        }
        state.settle();
    }
    // then this part's own, step by step
    let mut at = begin;
    let mut steps: Vec<(u32, State)> = Vec::with_capacity(own.codes.len() + 1);
    for code in own.codes.iter().rev() {
        let offset = begin.saturating_add(u32::from(code.offset)).min(end);
        if offset > at {
            steps.push((at, state.clone()));
            at = offset;
        }
        state.apply(own, code.op)?;
    }
    let mut body = state.clone();
    body.settle();
    steps.push((at, state));
    let epilogues = read(begin, (end - begin) as usize)
        .filter(|_| end - begin <= MAX_DECODED)
        .map(|code| epilogues(code, begin, at, &body))
        .unwrap_or_default();
    let mark = w.mark();
    let failed = |w: &mut TableWriter| {
        w.rewind(mark);
        Err(PdataError::Inconsistent(
            "an offset beyond what a rule holds",
        ))
    };
    for (i, (start, state)) in steps.iter().enumerate() {
        let until = steps.get(i + 1).map_or(end, |(s, _)| *s);
        let Some(rule) = state.clone().rule(w) else {
            return failed(w);
        };
        // the body's rule around the epilogues, which have their own rows
        let mut from = *start;
        for (e_start, e_end, _) in epilogues.iter().filter(|e| e.0 >= *start && e.1 <= until) {
            w.push(u64::from(from), u64::from(*e_start), &rule, PDATA_PRIORITY);
            from = *e_end;
        }
        w.push(u64::from(from), u64::from(until), &rule, PDATA_PRIORITY);
        for (e_start, e_end, e_rule) in epilogues.iter().filter(|e| e.0 >= *start && e.1 <= until) {
            let Some(e_rule) = e_rule.to_record() else {
                return failed(w);
            };
            w.push(
                u64::from(*e_start),
                u64::from(*e_end),
                &e_rule,
                PDATA_PRIORITY,
            );
        }
    }
    Ok(())
}

/// Functions longer than this are not decoded for epilogues.
pub const MAX_DECODED: u32 = 1 << 20;

/// The instructions an epilogue is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EpilogueInst {
    AddRsp(u64),
    /// `lea rsp, [base + disp]` (base in unwind-code numbering).
    LeaRsp {
        base: u8,
        disp: i64,
    },
    Pop(u8),
    Ret,
    /// A `jmp` that leaves the function: a tail call.
    TailJmp,
    Other,
}

/// One row of an epilogue: `CFA = rsp + cfa`, the pushed registers still on the stack
/// at their CFA offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EpilogueRule {
    cfa: u64,
    saved: Vec<(u16, i64)>,
}

impl EpilogueRule {
    fn to_record(&self) -> Option<RuleRecord> {
        let cfa = Slot::offset(RSP, i32::try_from(self.cfa).ok()?);
        let mut rule = RuleRecord::new(UnwindSource::Pdata, cfa, Slot::offset(0, -8));
        for &(reg, at) in &self.saved {
            rule.set_reg(
                crate::dump::Arch::X86_64,
                reg,
                Slot::offset(0, i32::try_from(at).ok()?),
            );
        }
        Some(rule)
    }
}

/// Decodes a function's code (`code` starts at RVA `begin`) into (RVA, length, kind),
/// up to the first byte that does not decode.
fn decode(code: &[u8], begin: u32) -> Vec<(u32, u32, EpilogueInst)> {
    use yaxpeax_arch::{Decoder, LengthedInstruction, U8Reader};
    use yaxpeax_x86::amd64::{register_class, InstDecoder, Opcode, Operand};
    let decoder = InstDecoder::default();
    let mut reader = U8Reader::new(code);
    let mut out = Vec::new();
    let mut at = 0u32;
    let q = |r: yaxpeax_x86::amd64::RegSpec| (r.class() == register_class::Q).then(|| r.num());
    while (at as usize) < code.len() {
        let Ok(inst) = decoder.decode(&mut reader) else {
            break;
        };
        let len = inst.len().to_const() as u32;
        let rsp_first = matches!(inst.operand(0), Operand::Register { reg } if q(reg) == Some(4));
        let kind = match inst.opcode() {
            Opcode::RETURN => EpilogueInst::Ret,
            Opcode::JMP => {
                let bytes = code.get(at as usize..(at + len) as usize).unwrap_or(&[]);
                if leaves(bytes, at, code.len()) {
                    EpilogueInst::TailJmp
                } else {
                    EpilogueInst::Other
                }
            }
            Opcode::POP => match inst.operand(0) {
                Operand::Register { reg } => q(reg).map_or(EpilogueInst::Other, EpilogueInst::Pop),
                _ => EpilogueInst::Other,
            },
            Opcode::ADD if rsp_first => match inst.operand(1) {
                Operand::ImmediateI8 { imm } => EpilogueInst::AddRsp(imm as i64 as u64),
                Operand::ImmediateI32 { imm } => EpilogueInst::AddRsp(imm as i64 as u64),
                _ => EpilogueInst::Other,
            },
            Opcode::LEA if rsp_first => match inst.operand(1) {
                Operand::Disp { base, disp } => {
                    q(base).map_or(EpilogueInst::Other, |base| EpilogueInst::LeaRsp {
                        base,
                        disp: i64::from(disp),
                    })
                }
                Operand::MemDeref { base } => q(base).map_or(EpilogueInst::Other, |base| {
                    EpilogueInst::LeaRsp { base, disp: 0 }
                }),
                _ => EpilogueInst::Other,
            },
            _ => EpilogueInst::Other,
        };
        out.push((begin + at, len, kind));
        at += len;
    }
    out
}

/// Whether the `jmp` instruction `bytes`, at offset `at` of a function `size` bytes long,
/// leaves it as `RtlVirtualUnwind` tells a tail call: `EB rel8` or `E9 rel32` to a target
/// outside the function or at its first byte, `FF 25` (`jmp [rip + disp32]`), or
/// `REX.W FF /4` (an indirect `jmp` the compiler marked as leaving).
fn leaves(bytes: &[u8], at: u32, size: usize) -> bool {
    let next = i64::from(at) + bytes.len() as i64;
    // the first byte counts: a jump there is a recursive tail call
    let outside = |target: i64| target <= 0 || target >= size as i64;
    match bytes {
        [0xeb, rel] => outside(next + i64::from(*rel as i8)),
        [0xe9, a, b, c, d] => outside(next + i64::from(i32::from_le_bytes([*a, *b, *c, *d]))),
        [0xff, 0x25, ..] => true,
        [rex, 0xff, modrm, ..] => rex & 0xf8 == 0x48 && modrm & 0x38 == 0x20,
        _ => false,
    }
}

/// The epilogues of a function whose prologue ends at `body_start` and whose body state
/// is `body`: (start, end, rule) rows, ascending.
fn epilogues(
    code: &[u8],
    begin: u32,
    body_start: u32,
    body: &State,
) -> Vec<(u32, u32, EpilogueRule)> {
    if body.machframe.is_some() {
        return Vec::new();
    }
    let insts = decode(code, begin);
    let mut out = Vec::new();
    for (i, &(ret_at, ret_len, kind)) in insts.iter().enumerate() {
        if kind != EpilogueInst::Ret && kind != EpilogueInst::TailJmp {
            continue;
        }
        let mut first_pop = i;
        while first_pop > 0 && matches!(insts[first_pop - 1].2, EpilogueInst::Pop(_)) {
            first_pop -= 1;
        }
        let pops: Vec<u16> = insts[first_pop..i]
            .iter()
            .filter_map(|x| match x.2 {
                EpilogueInst::Pop(r) => Some(dwarf_reg(r)),
                _ => None,
            })
            .collect();
        // the pops undo every push, last first
        if !pops.iter().rev().eq(body.pushed.iter()) {
            continue;
        }
        let popped_bytes = 8 * pops.len() as u64;
        let release = first_pop.checked_sub(1).map(|k| insts[k]);
        let (start, fits) = match release {
            Some((at, len, EpilogueInst::AddRsp(n))) => {
                (at + len, n.checked_add(popped_bytes) == Some(body.moved))
            }
            Some((at, len, EpilogueInst::LeaRsp { base, disp })) => {
                let fits = body.frame.is_some_and(|(reg, moved, scaled)| {
                    // CFA - rsp after the lea = (moved - scaled + 8) - disp
                    reg == base
                        && (moved as i64 - scaled as i64 + 8 - disp) == 8 + popped_bytes as i64
                });
                (at + len, fits)
            }
            _ => (insts[first_pop].0, body.moved == popped_bytes),
        };
        if !fits || start < body_start {
            continue;
        }
        // rows: before each pop, then at the ret (or tail-call jmp)
        for (k, row_start) in insts[first_pop..=i].iter().map(|x| x.0).enumerate() {
            let row_start = if k == 0 { start } else { row_start };
            let row_end = if first_pop + k == i {
                ret_at + ret_len
            } else {
                insts[first_pop + k + 1].0
            };
            let left = &pops[k..];
            let saved = body
                .saved
                .iter()
                .filter(|(r, _)| left.contains(r))
                .copied()
                .collect();
            out.push((
                row_start,
                row_end,
                EpilogueRule {
                    cfa: 8 + 8 * left.len() as u64,
                    saved,
                },
            ));
        }
    }
    out
}

/// A PE32+ x64 image's exception directory: (RVA, size), when the image has one.
pub fn pdata_of(file: &object::File<'_>) -> Option<(u32, u32)> {
    let object::File::Pe64(pe_file) = file else {
        return None;
    };
    if pe_file.nt_headers().file_header().machine.get(LE) != pe::IMAGE_FILE_MACHINE_AMD64 {
        return None;
    }
    let dir = pe_file.data_directory(pe::IMAGE_DIRECTORY_ENTRY_EXCEPTION)?;
    let (rva, size) = (dir.virtual_address.get(LE), dir.size.get(LE));
    (size > 0).then_some((rva, size))
}

/// Reads `len` bytes at an RVA of a PE image (none when they are not all in the file;
/// an empty read always succeeds: an unwind info without codes may end where its
/// section's bytes do).
pub fn image_reader<'a>(file: &'a object::File<'a>) -> impl Fn(u32, usize) -> Option<&'a [u8]> {
    let pe = match file {
        object::File::Pe64(f) => Some((f.data(), f.section_table())),
        _ => None,
    };
    move |rva: u32, len: usize| -> Option<&'a [u8]> {
        if len == 0 {
            return Some(&[]);
        }
        let (data, sections) = pe?;
        sections.pe_data_at(data, rva)?.get(..len)
    }
}

/// Adds the rows of a PE32+ x64 image's exception directory, and the leaf rule over the
/// rest of its code. Addresses are RVAs: the table's link base is the image base.
pub fn add_pe_pdata(w: &mut TableWriter, file: &object::File<'_>) {
    let Some((rva, size)) = pdata_of(file) else {
        return;
    };
    let read = image_reader(file);
    let Some(pdata) = read(rva, size as usize) else {
        w.stats
            .skip(|| format!(".pdata at {rva:#x} ({size} bytes) is outside the image"));
        add_leaf_rule(w, file, &[]);
        return;
    };
    w.stats.source_bytes += pdata.len();
    w.note_source(UnwindSource::Pdata);
    w.reserve(pdata.len() / 12 * 2);
    let mut covered = Vec::with_capacity(pdata.len() / 12);
    for entry in pdata.chunks_exact(12) {
        let (begin, end, info) = runtime_function(entry);
        if begin == 0 && end == 0 {
            continue;
        }
        // an entry that cannot be used still says its code is no leaf: it gets no rule
        covered.push((begin, end));
        match add_function(w, &read, begin, end, info) {
            Ok(()) => w.stats.entries += 1,
            Err(e) => w
                .stats
                .skip(|| format!(".pdata: function at {begin:#x}: {e}")),
        }
    }
    add_leaf_rule(w, file, &covered);
}

/// `CFA = rsp + 8` over the executable sections' bytes outside `covered` (RVA ranges).
fn add_leaf_rule(w: &mut TableWriter, file: &object::File<'_>, covered: &[(u32, u32)]) {
    let leaf = RuleRecord::new(
        UnwindSource::Pdata,
        Slot::offset(RSP, 8),
        Slot::offset(0, -8),
    );
    add_leaf_rows(w, file, covered, &leaf);
}

/// `leaf` at [`LEAF_PRIORITY`] over the executable sections' bytes outside `covered` (RVA
/// ranges): the rule of a leaf function, which an image's exception directory omits.
pub(crate) fn add_leaf_rows(
    w: &mut TableWriter,
    file: &object::File<'_>,
    covered: &[(u32, u32)],
    leaf: &RuleRecord,
) {
    let base = file.relative_address_base();
    let text: Vec<(u64, u64)> = file
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .filter_map(|s| {
            let start = s.address().checked_sub(base)?;
            Some((start, start.saturating_add(s.size())))
        })
        .collect();
    let covered: Vec<(u64, u64)> = covered
        .iter()
        .map(|&(b, e)| (u64::from(b), u64::from(e)))
        .collect();
    // one sweep over both, merged: linear whatever a hostile image claims
    let (text, covered) = (crate::ranges::merged(text), crate::ranges::merged(covered));
    let mut rest = covered.iter().peekable();
    for (start, end) in text {
        let mut at = start;
        while let Some(&&(b, e)) = rest.peek() {
            if e <= at {
                rest.next();
                continue;
            }
            if b >= end {
                break;
            }
            if b > at {
                w.push(at, b, leaf, LEAF_PRIORITY);
            }
            at = e;
            if e > end {
                break;
            }
            rest.next();
        }
        if at < end {
            w.push(at, end, leaf, LEAF_PRIORITY);
        }
    }
}

#[cfg(test)]
#[path = "pe_x64_tests.rs"]
mod tests;
