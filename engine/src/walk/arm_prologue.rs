//! Prologue analysis for 32-bit arm functions that have no unwind rule: what the
//! instructions from a function's start to the pc did to the stack.
//!
//! Why: some code has neither DWARF CFI nor an EHABI entry (glibc's `abort` on armhf),
//! and gdb reads such a function's prologue to find its caller. This does the same for
//! the prologue instructions compilers emit, in Thumb-2 and ARM code: pushes
//! (`push`, `stmdb sp!`, `str rN, [sp, #-4]!`), stack allocation (`sub sp`, `subw`), and
//! VFP pushes (`vpush`), skipping every other instruction, as they are interleaved with
//! the prologue after scheduling. It stops at the first branch, call, return or stack
//! release: what follows is no longer the prologue. Nothing is executed and no register
//! but sp is tracked, so a function that moves sp by a register (`alloca`) or only
//! through a frame pointer is not described (the caller is then rejected by its call
//! check or the walk's validity checks, and the scan goes on).

/// At most this many bytes of a function are read from its start.
pub(crate) const MAX_PROLOGUE_BYTES: u64 = 256;

/// What a prologue did before the pc.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Prologue {
    /// Bytes sp moved down: the CFA (the caller's sp) is sp + this.
    pub frame_size: u64,
    /// Where each core register was saved: bytes below the CFA.
    pub saved: [Option<u64>; 16],
}

impl Prologue {
    /// Pushes the core registers of `mask` (lowest register at the lowest address).
    fn push(&mut self, mask: u16) {
        let n = u64::from(mask.count_ones());
        self.frame_size = self.frame_size.saturating_add(4 * n);
        let mut below = self.frame_size;
        for r in 0..16 {
            if mask & (1 << r) != 0 {
                self.saved[r] = Some(below);
                below = below.saturating_sub(4);
            }
        }
    }

    fn allocate(&mut self, bytes: u64) {
        self.frame_size = self.frame_size.saturating_add(bytes);
    }
}

/// Whether an instruction ends the prologue.
enum Step {
    Go,
    Stop,
}

/// Analyses the Thumb (`thumb`) or ARM `code` from a function's start up to the pc.
pub(crate) fn analyze(code: &[u8], thumb: bool) -> Prologue {
    let mut p = Prologue::default();
    let mut at = 0usize;
    while at < code.len() {
        let (step, len) = if thumb {
            thumb_step(&code[at..], &mut p)
        } else {
            arm_step(&code[at..], &mut p)
        };
        if matches!(step, Step::Stop) || len == 0 {
            break;
        }
        at += len;
    }
    p
}

/// Thumb-2's modified immediate (`ThumbExpandImm`) of `i:imm3:imm8`.
fn thumb_expand_imm(imm12: u32) -> u32 {
    let imm8 = imm12 & 0xff;
    if imm12 >> 10 == 0 {
        match (imm12 >> 8) & 3 {
            0 => imm8,
            1 => imm8 | imm8 << 16,
            2 => (imm8 << 8) | (imm8 << 24),
            _ => imm8 * 0x0101_0101,
        }
    } else {
        (0x80 | (imm12 & 0x7f)).rotate_right(imm12 >> 7)
    }
}

/// One Thumb instruction at the start of `code`: its effect and length (0: too short).
fn thumb_step(code: &[u8], p: &mut Prologue) -> (Step, usize) {
    let half = |i: usize| code.get(i..i + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let Some(h1) = half(0) else {
        return (Step::Stop, 0);
    };
    if !matches!(h1 >> 11, 0b11101..=0b11111) {
        // 16-bit
        let step = match h1 {
            // push {rlist[, lr]}
            _ if h1 & 0xfe00 == 0xb400 => {
                p.push((h1 & 0xff) | (h1 & 0x100) << 6);
                Step::Go
            }
            // sub sp, #imm7 * 4
            _ if h1 & 0xff80 == 0xb080 => {
                p.allocate(u64::from(h1 & 0x7f) * 4);
                Step::Go
            }
            // add sp, #imm; pop; bx/blx; b<cond>; b; cbz/cbnz
            _ if h1 & 0xff80 == 0xb000
                || h1 & 0xfe00 == 0xbc00
                || h1 & 0xff00 == 0x4700
                || (0xd000..0xe800).contains(&h1)
                || h1 & 0xf500 == 0xb100 =>
            {
                Step::Stop
            }
            _ => Step::Go,
        };
        return (step, 2);
    }
    let Some(h2) = half(2) else {
        return (Step::Stop, 0);
    };
    let step = if h1 == 0xe92d {
        // push.w / stmdb sp!, {rlist}
        p.push(h2 & !(1 << 13));
        Step::Go
    } else if h1 == 0xf84d && h2 & 0x0fff == 0x0d04 {
        // str.w rN, [sp, #-4]!
        p.push(1 << (h2 >> 12));
        Step::Go
    } else if h1 & 0xfbef == 0xf1ad && h2 & 0x8f00 == 0x0d00 {
        // sub.w sp, sp, #modified immediate
        let imm12 = u32::from((h1 >> 10) & 1) << 11 | u32::from((h2 >> 12) & 7) << 8;
        p.allocate(u64::from(thumb_expand_imm(imm12 | u32::from(h2 & 0xff))));
        Step::Go
    } else if h1 & 0xfbff == 0xf2ad && h2 & 0x8f00 == 0x0d00 {
        // subw sp, sp, #imm12
        let imm =
            u32::from((h1 >> 10) & 1) << 11 | u32::from((h2 >> 12) & 7) << 8 | u32::from(h2 & 0xff);
        p.allocate(u64::from(imm));
        Step::Go
    } else if h1 & 0xffbf == 0xed2d && h2 & 0x0e00 == 0x0a00 {
        // vpush {s…}/{d…}: imm8 words
        p.allocate(u64::from(h2 & 0xff) * 4);
        Step::Go
    } else if h1 >> 11 == 0b11110 && h2 & 0x8000 != 0 {
        // b.w, b<cond>.w, bl, blx
        Step::Stop
    } else if h1 == 0xe8bd || (h1 == 0xf85d && h2 & 0x0fff == 0x0b04) {
        // pop.w, ldr.w rN, [sp], #4
        Step::Stop
    } else {
        Step::Go
    };
    (step, 4)
}

/// One ARM instruction at the start of `code`: its effect and length (0: too short).
fn arm_step(code: &[u8], p: &mut Prologue) -> (Step, usize) {
    let Some(b) = code.get(..4) else {
        return (Step::Stop, 0);
    };
    let insn = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let step = if insn & 0xffff_0000 == 0xe92d_0000 {
        // push / stmdb sp!, {rlist}
        p.push((insn & 0xdfff) as u16);
        Step::Go
    } else if insn & 0xffff_0fff == 0xe52d_0004 {
        // str rN, [sp, #-4]!
        p.push(1 << ((insn >> 12) & 0xf));
        Step::Go
    } else if insn & 0xffff_f000 == 0xe24d_d000 {
        // sub sp, sp, #imm8 ror (2 * rot)
        let imm = (insn & 0xff).rotate_right(2 * ((insn >> 8) & 0xf));
        p.allocate(u64::from(imm));
        Step::Go
    } else if insn & 0xffbf_0e00 == 0xed2d_0a00 {
        // vpush
        p.allocate(u64::from(insn & 0xff) * 4);
        Step::Go
    } else if insn & 0x0e00_0000 == 0x0a00_0000 // b, bl, blx imm
        || insn & 0x0fff_ffd0 == 0x012f_ff10 // bx, blx rN
        || insn & 0x0fff_0000 == 0x08bd_0000 // pop / ldm sp!
        || insn & 0x0fff_f000 == 0x028d_d000
    // add sp, sp, #imm
    {
        Step::Stop
    } else {
        Step::Go
    };
    (step, 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thumb(halves: &[u16]) -> Vec<u8> {
        halves.iter().flat_map(|h| h.to_le_bytes()).collect()
    }

    fn arm(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn glibc_abort_s_interleaved_thumb_prologue() {
        // glibc 2.36 armhf abort(): ldr, sub.w r4, add, ldr, push {r7, lr}, add,
        // ldr, sub sp, #144, ldr, str, then a branch (objdump's listing)
        let code = thumb(&[
            0x4b4e, 0xf5a4, 0x64a0, 0x447a, 0x484d, 0xb580, 0x4478, 0x58d3, 0xb0a4, 0x681b, 0x9323,
            0xd010, 0xb0ff,
        ]);
        let p = analyze(&code, true);
        assert_eq!(p.frame_size, 8 + 144);
        assert_eq!(p.saved[14], Some(4));
        assert_eq!(p.saved[7], Some(8));
        assert_eq!(p.saved[4], None);
    }

    #[test]
    fn thumb2_wide_forms() {
        // push.w {r4-r11, lr}; vpush {d8-d9}; sub.w sp, sp, #256; subw sp, sp, #0x104;
        // str.w r3, [sp, #-4]!; bl …: stop
        let code = thumb(&[
            0xe92d, 0x4ff0, 0xed2d, 0x8b04, 0xf5ad, 0x7d80, 0xf2ad, 0x1d04, 0xf84d, 0x3d04, 0xf000,
            0xf800, 0xb082,
        ]);
        let p = analyze(&code, true);
        assert_eq!(p.frame_size, 36 + 16 + 256 + 0x104 + 4);
        // below the CFA: the first push's registers, lowest at the lowest address
        assert_eq!(p.saved[14], Some(4));
        assert_eq!(p.saved[11], Some(8));
        assert_eq!(p.saved[4], Some(36));
        assert_eq!(p.saved[3], Some(p.frame_size));
        assert_eq!(thumb_expand_imm(0x3ff), 0xffff_ffff);
        assert_eq!(thumb_expand_imm(0x1ff), 0x00ff_00ff);
        assert_eq!(thumb_expand_imm(0x2ff), 0xff00_ff00);
        assert_eq!(thumb_expand_imm(0x400), 0x8000_0000);
    }

    #[test]
    fn arm_prologue_and_its_end() {
        // push {r4, r11, lr}; add r11, sp, #4; sub sp, sp, #0x100; vpush {d8};
        // str r0, [sp, #-4]!; bl; sub sp, sp, #8 (after the call: not counted)
        let code = arm(&[
            0xe92d_4810,
            0xe28d_b004,
            0xe24d_dc01,
            0xed2d_8b02,
            0xe52d_0004,
            0xebff_fff0,
            0xe24d_d008,
        ]);
        let p = analyze(&code, false);
        assert_eq!(p.frame_size, 12 + 0x100 + 8 + 4);
        assert_eq!(p.saved[14], Some(4));
        assert_eq!(p.saved[11], Some(8));
        assert_eq!(p.saved[4], Some(12));
        assert_eq!(p.saved[0], Some(p.frame_size));
    }

    #[test]
    fn short_and_odd_code_never_panics() {
        for n in 0..9 {
            let _ = analyze(&[0xff; 8][..n], true);
            let _ = analyze(&[0xff; 8][..n], false);
        }
        let p = analyze(&thumb(&[0xe92d]), true);
        assert_eq!(p, Prologue::default());
    }
}
