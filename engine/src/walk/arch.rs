//! What differs per architecture in the walk, behind one trait.

use super::{Caller, Trust, WalkContext, WalkFrame};
use crate::dump::{Arch, FrameRegisters, RegisterSet};

/// One architecture's part of the walk: registers, frame records, call-site decoding.
pub trait ArchWalker {
    fn arch(&self) -> Arch;
    fn pointer_size(&self) -> u64 {
        self.arch().pointer_size()
    }
    /// DWARF number of the column holding the return address in unwind rules.
    fn return_address_register(&self) -> u16 {
        self.arch().ra_reg()
    }
    /// How far before a return address the call instruction's last byte lies (1 on
    /// x86_64 and x86, 4 on aarch64, 2 on arm): the lookup address of a caller frame is
    /// `pc - back`.
    fn lookup_back(&self) -> u64 {
        self.arch().call_back()
    }
    /// The caller's stack pointer when the rules give a CFA: on both x86_64 and aarch64
    /// the caller's sp is the CFA.
    fn sp_from_cfa(&self, cfa: u64) -> u64 {
        cfa
    }
    /// Removes pointer-authentication bits (aarch64), or the Thumb bit (arm), from a
    /// recovered return address.
    fn strip_pac(&self, ctx: &WalkContext<'_, '_>, addr: u64) -> u64 {
        let _ = ctx;
        addr
    }
    /// Records in a caller's registers what its return address `raw` (as found, before
    /// [`Self::strip_pac`]) says besides the address: arm's instruction set, from its low
    /// bit, which a later step needs to read the caller's own code.
    fn note_return_address(&self, raw: u64, caller: &mut RegisterSet) {
        let _ = (raw, caller);
    }
    /// The frame-pointer strategy.
    fn caller_by_fp(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
        first: bool,
    ) -> Option<Caller>;
    /// Whether the bytes just before a return address decode as a call instruction.
    fn is_call_before(&self, code: &[u8]) -> bool;
    /// [`Self::is_call_before`] for the return address `raw` as it was found (before
    /// [`Self::strip_pac`]): arm reads the caller's instruction set from its low bit.
    fn is_call_before_return(&self, raw: u64, code: &[u8]) -> bool {
        let _ = raw;
        self.is_call_before(code)
    }
    /// How many code bytes [`Self::is_call_before`] wants.
    fn call_check_len(&self) -> usize;
    /// The alignment every instruction address has (a scanned return address that lacks
    /// it is not one): 1 on x86_64, whose instructions have any length; 4 on aarch64.
    fn instruction_alignment(&self) -> u64 {
        1
    }
    /// Whether a caller may keep the callee's sp (aarch64 leaf frames may).
    fn allows_same_sp(&self, callee: &WalkFrame) -> bool {
        let _ = callee;
        false
    }
    /// Whether `pc` is the first instruction of a sigreturn trampoline (a signal handler
    /// returns there). Such a pc is a valid caller even outside every module: QEMU's
    /// user-mode emulator keeps its trampoline in an anonymous page.
    fn is_signal_trampoline(&self, ctx: &WalkContext<'_, '_>, pc: u64) -> bool {
        let _ = (ctx, pc);
        false
    }
    /// The frame a signal interrupted, when `callee` is a sigreturn trampoline whose
    /// signal frame the architecture knows how to read, or (x86) the frame an exception
    /// interrupted, when `callee` is Windows' exception dispatcher (tried before the
    /// unwind rules).
    fn caller_from_signal_frame(
        &self,
        ctx: &WalkContext<'_, '_>,
        callee: &WalkFrame,
    ) -> Option<Caller> {
        let _ = (ctx, callee);
        None
    }
    /// Adjusts a caller a stack scan found, with what the architecture can tell from
    /// the stack around the return address (x86: the caller's `ebp` pushed below it).
    fn after_scan(&self, ctx: &WalkContext<'_, '_>, caller: &mut Caller) {
        let _ = (ctx, caller);
    }
    /// Registers a caller inherits unchanged when no rule mentions them (callee-saved).
    fn callee_saved(&self) -> &'static [u16] {
        self.arch().callee_saved()
    }
}

/// The walker for an architecture, if we walk it.
pub fn walker_for(arch: Arch) -> Option<&'static dyn ArchWalker> {
    match arch {
        Arch::X86_64 => Some(&super::x86_64::X86_64),
        Arch::Aarch64 => Some(&super::aarch64::Aarch64),
        Arch::X86 => Some(&super::x86::X86),
        Arch::Arm => Some(&super::arm::Arm),
    }
}

/// The registers a frame-record step sets on one architecture: the caller's pc, sp and
/// frame pointer, and the callee-saved registers it inherits unchanged.
pub(crate) struct RecordRegisters {
    pub pc: u16,
    pub sp: u16,
    pub fp: u16,
    pub inherited: &'static [u16],
}

/// The caller from the frame record at `fp`, two words (the caller's frame pointer, then
/// the return address): `(sp, fp, pc) = (fp + 2w, *fp, *(fp + w))`, the return address
/// stripped of pointer-authentication bits. None when `fp` lies below the callee's sp or
/// is misaligned, or the record is not in the dump.
pub(crate) fn caller_from_record(
    walker: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    callee: &WalkFrame,
    fp: u64,
    names: &RecordRegisters,
) -> Option<Caller> {
    let word = walker.pointer_size();
    let sp = callee.sp?;
    if fp < sp || !fp.is_multiple_of(word) {
        return None;
    }
    let read = |addr: u64| match word {
        4 => ctx.memory.read_u32(addr).map(u64::from),
        _ => ctx.memory.read_u64(addr),
    };
    let caller_fp = read(fp)?;
    let ra = read(fp.checked_add(word)?)?;
    let mut regs = RegisterSet::new(walker.arch());
    regs.set(names.pc, walker.strip_pac(ctx, ra));
    regs.set(names.sp, fp.checked_add(2 * word)?);
    regs.set(names.fp, caller_fp);
    inherit(&callee.registers, &mut regs, names.inherited);
    Some(Caller {
        regs,
        trust: Trust::Fp,
        source: None,
        exact_pc: false,
    })
}

/// Copies the `registers` the callee knows into the caller (callee-saved registers no
/// rule mentions).
pub(crate) fn inherit(callee: &FrameRegisters, caller: &mut RegisterSet, registers: &[u16]) {
    for &r in registers {
        if let Some(v) = callee.get(r) {
            caller.set(r, v);
        }
    }
}

/// Frame 0 of a call into nowhere (a null or stale function pointer) on x86 and x86_64:
/// the crashing pc is in no module's code, the callee never ran a prologue, and the
/// return address the call pushed is on top of the stack. The frame pointer still belongs
/// to the caller, so following it would skip the caller; the top of the stack is taken
/// when it is a return address after a call.
pub(crate) fn caller_of_call_into_nowhere(
    walker: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    callee: &WalkFrame,
    first: bool,
) -> Option<Caller> {
    if first && callee.trust == Trust::Context && !ctx.is_code(callee.pc) {
        return super::scan::caller_by_scan(walker, ctx, callee, 1, None, &|_| true).ok();
    }
    None
}
