//! The stack walker: from a thread's registers to its frames, innermost first.
//!
//! One loop for every architecture ([`walk_thread`]): given frame N's registers, find frame
//! N+1 by the first strategy that yields a valid caller — the unwind table rule (`cfi`), the
//! frame-pointer chain (`fp`), then a stack scan (`scan`). A caller is valid when its stack
//! pointer moves toward the stack base, its pc lies in executable code of a mapped module
//! (or is the outermost 0), and it does not repeat a frame. What differs per architecture
//! (registers, frame records, call-site decoding, pointer authentication) lives behind
//! [`arch::ArchWalker`]. The walker reads memory only through the dump's bounds-checked
//! [`MemoryMap`] and never allocates per lookup beyond the frames it returns.

pub mod aarch64;
pub mod arch;
pub mod arm;
mod arm_prologue;
mod cfi;
pub mod eval;
mod scan;
mod stack_win;
pub mod x86;
pub mod x86_64;

#[cfg(test)]
mod scan_tests;
#[cfg(test)]
mod tests;

use crate::breakpad::index::BreakpadIndex;
use crate::dump::{FrameRegisters, MemoryMap, Module, RegisterSet};
use crate::unwind::{OnDemandUnwind, Rule, UnwindSource, UnwindTable};

pub use arch::ArchWalker;

/// How a frame was found (the report's `trust`, spelled as [`Trust::as_str`] says).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum Trust {
    /// Registers from the dump (frame 0).
    Context,
    /// An unwind table rule.
    Cfi,
    /// The frame-pointer chain.
    Fp,
    /// A return-address candidate found by scanning the stack.
    Scan,
    /// A frame the crash report lists: its writer walked the stack (Apple's crash
    /// reporter, on the device); minidump-stackwalk's `prewalked`.
    Prewalked,
}

crate::names::serde_by_name!(Trust);

impl Trust {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Why a walk stopped (the report's `end`, spelled as [`EndReason::as_str`] says).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum EndReason {
    /// The unwind rules say so (return address undefined).
    Outermost,
    PcZero,
    /// The next frame would leave the stack.
    StackEnd,
    FrameLimit,
    /// A caller repeated a frame.
    Loop,
    /// No strategy found a valid caller.
    NoCaller,
    /// The dump lacks the bytes needed.
    MemoryMissing,
    UnwindError,
}

crate::names::serde_by_name!(EndReason);

impl EndReason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One physical frame found by the walker.
#[derive(Debug, Clone)]
pub struct WalkFrame {
    /// Frame 0 / signal-interrupted frame: the instruction pointer; otherwise the return
    /// address (pointer-authentication bits stripped).
    pub pc: u64,
    /// The frame's stack pointer.
    pub sp: Option<u64>,
    pub trust: Trust,
    pub unwind_source: Option<UnwindSource>,
    /// Index into the dump's modules.
    pub module: Option<usize>,
    /// True when `pc` is an exact instruction address (frame 0, a frame interrupted by a
    /// signal, a signal trampoline): symbols and rules are looked up at `pc`, not `pc - 1`.
    pub exact_pc: bool,
    /// The registers recovered for this frame (kept compact: a deep thread keeps
    /// thousands of frames).
    pub registers: FrameRegisters,
}

impl WalkFrame {
    /// The address whose rule and symbol describe this frame: the call instruction for a
    /// return address (`pc - 1` on x86_64, `pc - 4` on aarch64), `pc` itself when exact.
    /// (A noreturn call can be a function's last instruction, so its return address may
    /// already belong to the next function: only `pc - 1` is inside the caller.)
    pub fn address_for_lookup(&self, back: u64) -> u64 {
        if self.exact_pc {
            self.pc
        } else {
            self.pc.saturating_sub(back)
        }
    }
}

/// The result of walking one thread.
#[derive(Debug, Clone)]
pub struct WalkResult {
    pub frames: Vec<WalkFrame>,
    pub end: EndReason,
    pub end_detail: Option<String>,
}

/// Walker options (heuristics are runtime options, not cargo features).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WalkOptions {
    /// Most frames returned per thread.
    pub max_frames: usize,
    /// Words scanned above the stack pointer when looking for a return address.
    pub scan_words: usize,
    /// Words scanned for frame 0's caller (a leaf may keep much on its stack).
    pub scan_words_first: usize,
    pub enable_fp: bool,
    pub enable_scan: bool,
    /// Whether the frame-pointer chain is followed out of a function in a module that has
    /// no unwind table. False for Windows x64 dumps: code there keeps no frame-pointer
    /// chain (`rbp` is an ordinary register, or points into the middle of a frame), so a
    /// caller read through it is wrong where a stack scan finds the right one. Code
    /// outside every module (generated code) still follows the chain.
    pub fp_without_unwind_table: bool,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            max_frames: 8192,
            scan_words: 64,
            scan_words_first: 256,
            enable_fp: true,
            enable_scan: true,
            fp_without_unwind_table: true,
        }
    }
}

/// Reads code bytes of a module at a run-time address (from the binary file or the dump).
pub trait CodeReader {
    /// Up to `len` bytes ending right before `addr` (for call-site checks), or `None` when
    /// the code is not available.
    fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>>;

    /// Whether `addr` lies in the executable's entry-point function (`_start`). Like gdb
    /// (`backtrace past-entry off`), the walk ends there when no unwind rule says more:
    /// `_start` usually marks its return address undefined, but a binary whose unwind
    /// information lacks crt1's code (an `.sframe`-only build) would otherwise scan past
    /// it into garbage.
    fn is_entry_function(&self, addr: u64) -> bool {
        let _ = addr;
        false
    }

    /// Whether `addr` is where the program's `main` (`main_addr`, a lookup address in the
    /// callee) returns into Apple's dynamic loader, `/usr/lib/dyld`: its `start` (macOS
    /// 13 and later; `libdyld`'s before), the main thread's outermost frame. The walk ends
    /// there when no unwind rule says more, as at `_start`: past it lie only the
    /// process's arguments and environment, where a scan finds stale words.
    fn is_loader_start(&self, addr: u64, main_addr: u64) -> bool {
        let _ = (addr, main_addr);
        false
    }

    /// Whether `addr` lies in executable code, as the module's file (its executable
    /// sections) or the dump's list of memory regions and their permissions tells;
    /// `None` where neither says. The dump's own mappings of a module are already in
    /// [`Module::mappings`].
    fn is_executable(&self, addr: u64) -> Option<bool> {
        let _ = addr;
        None
    }

    /// Whether a symbol file names a function (a `FUNC` or `PUBLIC` record, a symbol)
    /// covering `addr`, a lookup address; `None` where no symbol file describes the
    /// module holding it. A scanned candidate whose code is not at hand must pass this
    /// (Breakpad's rule).
    fn names_function(&self, addr: u64) -> Option<bool> {
        let _ = addr;
        None
    }

    /// The run-time address of the start of the function covering `addr` (a lookup
    /// address), as the module's symbols give it; `None` where no symbol covers it. arm's
    /// prologue analysis reads from there.
    fn function_start(&self, addr: u64) -> Option<u64> {
        let _ = addr;
        None
    }
}

/// Where the walker finds one module's unwind rules.
#[derive(Debug, Clone, Copy)]
pub enum ModuleUnwind<'a> {
    /// A built table.
    Table(UnwindTable<'a>),
    /// A Breakpad file whose rules are built block by block as the walk reaches them
    /// (`postmortem walk`; see [`crate::breakpad::index`]).
    Breakpad(&'a BreakpadIndex),
    /// A binary whose `.eh_frame` rules are built FDE by FDE as the walk reaches them
    /// (`postmortem walk`; see [`crate::unwind::on_demand`]).
    OnDemand(&'a OnDemandUnwind),
}

impl<'a> ModuleUnwind<'a> {
    /// The rule for table offset `rel`.
    pub fn find(&self, rel: u64) -> Option<Rule<'a>> {
        match self {
            ModuleUnwind::Table(t) => t.find(rel),
            ModuleUnwind::Breakpad(index) => index.find_rule(rel),
            ModuleUnwind::OnDemand(od) => od.find_rule(rel),
        }
    }

    /// The unwind sources the rules come from.
    pub fn sources(&self) -> Vec<UnwindSource> {
        match self {
            ModuleUnwind::Table(t) => t.sources(),
            ModuleUnwind::Breakpad(_) => vec![UnwindSource::Breakpad],
            ModuleUnwind::OnDemand(od) => od.sources(),
        }
    }
}

/// Everything the walker needs besides the registers.
pub struct WalkContext<'a, 'd> {
    pub memory: &'a MemoryMap<'d>,
    pub modules: &'a [Module],
    /// Unwind table of each module (same index as `modules`).
    pub tables: &'a [Option<ModuleUnwind<'a>>],
    pub code: &'a dyn CodeReader,
    pub options: &'a WalkOptions,
    /// aarch64 pointer-authentication mask for return addresses (0 when none).
    pub pac_mask: u64,
    /// Set when a return address carried pointer-authentication bits: an address into
    /// code that stripping changed. Where the dump records no mask, only then is the
    /// inferred one worth a warning (`pac-mask-inferred`); `None` when nobody asks.
    pub pac_signed_seen: Option<&'a std::cell::Cell<bool>>,
}

impl WalkContext<'_, '_> {
    /// The module containing `addr`.
    pub fn module_for(&self, addr: u64) -> Option<usize> {
        crate::dump::module_containing(self.modules, addr)
    }
    /// Whether `addr` is in executable code of a mapped module: one of its executable
    /// mappings (where the dump lists them), and not where its file or the dump's memory
    /// regions say the code is not executable (a module's data, `.bss`, its header).
    pub fn is_code(&self, addr: u64) -> bool {
        self.module_for(addr)
            .is_some_and(|i| self.modules[i].contains_code(addr))
            && self.code.is_executable(addr) != Some(false)
    }
    /// Whether return address `ra` follows code: its call's last byte (`ra - 1`) is code,
    /// or `ra` itself is. After a call that never returns (`abort`) as a function's last
    /// instruction, `ra` is one past the function, and past the end of `.text` where that
    /// function is the section's last: what every strategy looks up at the call.
    pub fn is_return_code(&self, ra: u64) -> bool {
        self.is_code(ra) || ra.checked_sub(1).is_some_and(|p| self.is_code(p))
    }
}

/// A caller candidate proposed by one strategy.
pub struct Caller {
    pub regs: RegisterSet,
    pub trust: Trust,
    pub source: Option<UnwindSource>,
    /// The caller's pc is exact (the callee was a signal trampoline).
    pub exact_pc: bool,
}

/// What the CFI step concluded.
pub enum CfiOutcome {
    Caller(Box<Caller>),
    /// The rule says this is the outermost frame.
    Outermost,
    /// A rule exists but the dump lacks the memory it needs.
    MemoryMissing,
    /// No rule for this pc (or the rule could not be applied): try other strategies.
    NoRule,
}

/// Walks one thread from its context registers.
pub fn walk_thread(
    arch: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    registers: &RegisterSet,
) -> WalkResult {
    let Some(pc0) = registers.pc() else {
        return WalkResult {
            frames: Vec::new(),
            end: EndReason::UnwindError,
            end_detail: Some("the thread's context has no instruction pointer".into()),
        };
    };
    let mut walk = Walk {
        arch,
        ctx,
        frames: vec![WalkFrame {
            pc: pc0,
            sp: registers.sp(),
            trust: Trust::Context,
            unwind_source: None,
            module: ctx.module_for(pc0),
            exact_pc: true,
            registers: registers.into(),
        }],
        stack_range: registers.sp().and_then(|sp| ctx.memory.range_of(sp)),
        sp_went_down: false,
    };
    let (end, end_detail) = loop {
        if let Err(stop) = walk.step() {
            break stop;
        }
    };
    WalkResult {
        frames: walk.frames,
        end,
        end_detail,
    }
}

/// Why a walk ends, with the report's detail.
type Stop = (EndReason, Option<String>);

/// One thread's walk in progress: the frames so far, innermost first.
struct Walk<'w, 'a, 'd> {
    arch: &'w dyn ArchWalker,
    ctx: &'w WalkContext<'a, 'd>,
    frames: Vec<WalkFrame>,
    /// The stack the walk stays on (the range holding the current frames' sp).
    stack_range: Option<(u64, u64)>,
    /// A signal frame moved the stack pointer down (see [`Walk::push_caller`]).
    sp_went_down: bool,
}

/// What the strategies that found no valid caller learned, for the end reason.
#[derive(Default)]
struct Misses {
    /// A rule needed stack memory the dump lacks.
    memory_missing: bool,
    /// The rules name the callee itself as its caller.
    repeated: bool,
    /// What the stack scan read and rejected, when it ran.
    scan: Option<scan::Rejected>,
}

impl Walk<'_, '_, '_> {
    /// Adds the caller of the innermost frame, or says why the walk ends.
    fn step(&mut self) -> Result<(), Stop> {
        if self.frames.len() >= self.ctx.options.max_frames {
            let n = self.frames.len();
            return Err((
                EndReason::FrameLimit,
                Some(format!("stopped after {n} frames (the frame limit)")),
            ));
        }
        let Some(callee) = self.frames.last() else {
            return Err((EndReason::UnwindError, None));
        };
        let caller = self.find_caller(callee)?;
        self.push_caller(caller)
    }

    /// The first valid caller of `callee` the strategies find, in order: the signal
    /// frame, the unwind rule (`cfi`), the frame-pointer chain (`fp`), a stack scan.
    fn find_caller(&self, callee: &WalkFrame) -> Result<Caller, Stop> {
        let (arch, ctx) = (self.arch, self.ctx);
        let first = self.frames.len() == 1;
        let mut misses = Misses::default();
        // 0. a sigreturn trampoline whose signal frame the architecture reads itself
        // (aarch64: its vDSO's CFI would skip the interrupted frame, QEMU's has none)
        let mut caller = arch
            .caller_from_signal_frame(ctx, callee)
            .filter(|c| self.is_valid(callee, c));
        // 1. CFI
        if caller.is_none() {
            caller = self.caller_by_cfi(callee, &mut misses)?;
        }
        // 2. frame pointer
        if caller.is_none() && ctx.options.enable_fp && self.fp_applies(callee) {
            let by_fp = arch.caller_by_fp(ctx, callee, first);
            if by_fp
                .as_ref()
                .is_some_and(|c| self.ends_fp_chain(callee, c))
            {
                return Err((
                    EndReason::PcZero,
                    Some(
                        "the frame-pointer chain ends (a frame record of zeros, or a saved \
                         frame pointer of 0 and a return address in no module)"
                            .into(),
                    ),
                ));
            }
            caller = by_fp.filter(|c| self.is_valid(callee, c));
        }
        // 3. scan
        if caller.is_none() && ctx.options.enable_scan {
            let words = if first {
                ctx.options.scan_words_first
            } else {
                ctx.options.scan_words
            };
            let accept = |c: &Caller| self.is_valid(callee, c);
            match scan::caller_by_scan(arch, ctx, callee, words, self.stack_range, &accept) {
                Ok(c) => caller = Some(c),
                Err(rejected) => misses.scan = Some(rejected),
            }
        }
        caller.ok_or_else(|| self.no_caller(callee, &misses))
    }

    /// Whether the frame-pointer caller `c` is the chain's terminator: a frame record
    /// whose saved frame pointer and return address are both 0, as a thread's outermost
    /// frame leaves it (Windows x86's `RtlUserThreadStart`). Breakpad and rust-minidump
    /// end the walk at the zero return address; scanning on past it takes stale words
    /// (a thread's start address, which a symbol file's function seems to cover). Not
    /// from frame 0: where the crashed function keeps no frame pointer, `ebp` may be the
    /// outermost frame's and a scan still finds the callers in between.
    fn ends_fp_chain(&self, callee: &WalkFrame, c: &Caller) -> bool {
        if callee.trust == Trust::Context {
            return false;
        }
        let word = self.arch.pointer_size();
        let saved_fp = c.regs.sp().and_then(|sp| sp.checked_sub(2 * word));
        let read = |at: u64| match word {
            4 => self.ctx.memory.read_u32(at).map(u64::from),
            _ => self.ctx.memory.read_u64(at),
        };
        if c.trust != Trust::Fp || saved_fp.and_then(read) != Some(0) {
            return false;
        }
        // The record's saved frame pointer is 0: the chain's last record (AAPCS64 ends
        // the chain so). Its return address is 0, or on aarch64 one outside every module
        // and every executable mapping (Android's `_start_main`, entered from the linker
        // the dump lists no module for: Breakpad's arm64 microdump): nothing to walk to.
        let pc = c.regs.pc();
        pc == Some(0)
            || (self.arch.arch() == crate::dump::Arch::Aarch64
                && pc.is_some_and(|pc| {
                    self.ctx.module_for(pc).is_none()
                        && self.ctx.code.is_executable(pc) != Some(true)
                }))
    }

    /// Whether the frame-pointer chain may be followed out of `callee`: not out of a
    /// module without an unwind table where [`WalkOptions::fp_without_unwind_table`] says
    /// the platform's code keeps no chain.
    fn fp_applies(&self, callee: &WalkFrame) -> bool {
        if self.ctx.options.fp_without_unwind_table {
            return true;
        }
        match callee.module {
            Some(i) => matches!(self.ctx.tables.get(i), Some(Some(_))),
            None => true,
        }
    }

    /// The unwind rule's caller, if valid; the walk ends where the rule says the frame
    /// is the outermost or its return address is 0, and at the entry function when no
    /// rule covers it.
    fn caller_by_cfi(
        &self,
        callee: &WalkFrame,
        misses: &mut Misses,
    ) -> Result<Option<Caller>, Stop> {
        let (arch, ctx) = (self.arch, self.ctx);
        // the callee's own callee: Windows frame data needs the size of its parameters
        let inner = self
            .frames
            .len()
            .checked_sub(2)
            .and_then(|i| self.frames.get(i));
        match cfi::caller_by_cfi(arch, ctx, callee, inner) {
            CfiOutcome::Caller(c) => {
                let c = *c;
                if c.regs.pc() == Some(0) {
                    return Err((EndReason::PcZero, Some("the return address is 0".into())));
                }
                if self.is_valid(callee, &c) {
                    return Ok(Some(c));
                }
                if c.regs.pc() == Some(callee.pc) && c.regs.sp() == callee.sp {
                    misses.repeated = true;
                }
            }
            CfiOutcome::Outermost => return Err((EndReason::Outermost, None)),
            CfiOutcome::MemoryMissing => misses.memory_missing = true,
            CfiOutcome::NoRule => {
                let lookup = callee.address_for_lookup(arch.lookup_back());
                let from_main = inner.is_some_and(|f| {
                    ctx.code
                        .is_loader_start(lookup, f.address_for_lookup(arch.lookup_back()))
                });
                if ctx.code.is_entry_function(lookup) || from_main {
                    return Err((EndReason::Outermost, None));
                }
            }
        }
        Ok(None)
    }

    /// Why no strategy found a caller of `callee`.
    fn no_caller(&self, callee: &WalkFrame, misses: &Misses) -> Stop {
        if misses.memory_missing {
            return (
                EndReason::MemoryMissing,
                Some(format!(
                    "the dump lacks the stack memory needed to unwind the frame at {:#x}",
                    callee.pc
                )),
            );
        }
        if misses.repeated {
            return (
                EndReason::Loop,
                Some(format!(
                    "the unwind rule of the frame at {:#x} names that frame as its own caller",
                    callee.pc
                )),
            );
        }
        let at_stack_end = self.stack_range.is_some_and(|(_, hi)| {
            callee
                .sp
                .is_some_and(|sp| sp.saturating_add(self.arch.pointer_size()) >= hi)
        });
        if at_stack_end {
            (
                EndReason::StackEnd,
                Some("the next frame would leave the stack".to_string()),
            )
        } else {
            let mut detail = format!(
                "no strategy found a valid caller of the frame at {:#x}",
                callee.pc
            );
            if let Some(scan) = &misses.scan {
                detail.push_str(": ");
                detail.push_str(&scan.describe());
            }
            (EndReason::NoCaller, Some(detail))
        }
    }

    /// Appends the caller `c` as the new innermost frame, unless it repeats an earlier one.
    fn push_caller(&mut self, c: Caller) -> Result<(), Stop> {
        let pc = c.regs.pc().unwrap_or(0);
        let sp = c.regs.sp();
        let callee_sp = self.frames.last().and_then(|f| f.sp);
        if c.exact_pc && sp < callee_sp {
            self.sp_went_down = true;
        }
        // Stack pointers only grow, so frames cannot repeat, until a signal frame moves
        // the stack pointer down (an alternate signal stack, or a forged ucontext): from
        // then on a frame seen before means the walk would go round forever.
        if self.sp_went_down && self.frames.iter().any(|f| f.pc == pc && f.sp == sp) {
            return Err((
                EndReason::Loop,
                Some(format!(
                    "the caller at {pc:#x} repeats an earlier frame (the stack loops)"
                )),
            ));
        }
        if c.exact_pc {
            // The callee is a signal trampoline: its pc is where the handler returns to,
            // the trampoline's first instruction, so it is symbolized exactly too.
            if let Some(callee) = self.frames.last_mut() {
                callee.exact_pc = true;
            }
            // A handler on an alternate signal stack returns to the interrupted frame on
            // the thread's own stack: from here on, that stack bounds the walk.
            if let Some(range) = sp.and_then(|sp| self.ctx.memory.range_of(sp)) {
                self.stack_range = Some(range);
            }
        }
        self.frames.push(WalkFrame {
            pc,
            sp,
            trust: c.trust,
            unwind_source: c.source,
            module: self.ctx.module_for(pc),
            exact_pc: c.exact_pc,
            registers: (&c.regs).into(),
        });
        Ok(())
    }

    fn is_valid(&self, callee: &WalkFrame, caller: &Caller) -> bool {
        is_valid_caller(self.arch, self.ctx, callee, caller, self.stack_range)
    }
}

/// The validity checks every caller passes, whatever strategy proposed it.
fn is_valid_caller(
    arch: &dyn ArchWalker,
    ctx: &WalkContext<'_, '_>,
    callee: &WalkFrame,
    caller: &Caller,
    stack_range: Option<(u64, u64)>,
) -> bool {
    let (Some(pc), Some(sp)) = (caller.regs.pc(), caller.regs.sp()) else {
        return false;
    };
    // an exact pc (the frame a signal interrupted) is itself code; a return address
    // follows its call
    let code = if caller.exact_pc {
        ctx.is_code(pc)
    } else {
        ctx.is_return_code(pc)
    };
    if !code
        && !arch.is_signal_trampoline(ctx, pc)
        && !is_generated_code_caller(ctx, caller, stack_range)
    {
        return false;
    }
    let callee_sp = callee.sp.unwrap_or(0);
    // The stack grows down: a caller's sp is above its callee's. A signal handler may
    // run on an alternate stack, so the frame a signal interrupted is exempt.
    if caller.exact_pc {
        if sp == callee_sp && pc == callee.pc {
            return false;
        }
    } else if sp <= callee_sp && !(sp == callee_sp && arch.allows_same_sp(callee)) {
        return false;
    }
    if !caller.exact_pc {
        if let Some((lo, hi)) = stack_range {
            if sp < lo || sp > hi {
                return false;
            }
        }
    }
    // no repeated frame
    if sp == callee_sp && pc == callee.pc {
        return false;
    }
    true
}

/// Lowest address generated code can run at: below it a pc is a null (or near-null)
/// pointer's.
const MIN_CODE_ADDRESS: u64 = 0x1000;
/// Highest user-space address on the walked architectures (48-bit virtual addresses;
/// aarch64's pointer-authentication bits are stripped before this is asked).
const MAX_USER_ADDRESS: u64 = (1 << 48) - 1;

/// Whether a frame-pointer caller runs generated code (a JIT's, V8's in an Electron app):
/// its pc lies outside every module, where the dump does not say the memory is not
/// executable, and the chain goes on coherently — the caller's own frame pointer lies on
/// the stack, at or above its stack pointer. minidump-stackwalk follows the chain
/// through such frames too; rejecting them would switch to scanning there, and the
/// scan finds stale return addresses instead of the real callers.
fn is_generated_code_caller(
    ctx: &WalkContext<'_, '_>,
    caller: &Caller,
    stack_range: Option<(u64, u64)>,
) -> bool {
    if caller.trust != Trust::Fp {
        return false;
    }
    let (Some(pc), Some(sp)) = (caller.regs.pc(), caller.regs.sp()) else {
        return false;
    };
    if !(MIN_CODE_ADDRESS..=MAX_USER_ADDRESS).contains(&pc)
        || ctx.module_for(pc).is_some()
        || ctx.code.is_executable(pc) == Some(false)
    {
        return false;
    }
    let fp = caller.regs.get(caller.regs.arch().fp_reg());
    match (fp, stack_range) {
        (Some(fp), Some((lo, hi))) => fp >= sp && fp >= lo && fp < hi,
        _ => false,
    }
}
