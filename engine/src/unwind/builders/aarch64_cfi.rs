//! Makes aarch64 CFI readable by gimli: a pass over the raw `.eh_frame`/`.debug_frame`
//! bytes before gimli sees them.
//!
//! gimli (0.34) knows `DW_CFA_AARCH64_negate_ra_state` (0x2d) but not its newer sibling
//! `DW_CFA_AARCH64_negate_ra_state_with_pc` (0x2c, FEAT_PAuth_LR), and it rejects the
//! CIE augmentation characters the AArch64 ABI adds: `B` (return addresses signed with
//! key B) and `G` (MTE-tagged stack). Either makes whole FDEs unreadable. So, on aarch64
//! only, this pass decodes each CIE and FDE (bounded, never panicking) and, in a copy of
//! the section made only when something needs it:
//! - rewrites every 0x2c opcode to 0x2d. Both toggle bit 0 of RA_SIGN_STATE (signed or
//!   not), which is all an unwinder that strips — rather than authenticates — needs;
//!   0x2c also toggles bit 1 (the pc was a diversifier), which only matters to
//!   authentication. Only opcodes are rewritten: operands are skipped by decoding every
//!   instruction, so a 0x2c byte inside a LEB128 or an expression stays as it is;
//! - replaces `B` and `G` in augmentation strings with `S`, the one augmentation letter
//!   without data, keeping every offset and length; the CIE's real meaning (key B, and
//!   whether it really was a signal trampoline) is returned in [`Prepared::cies`] keyed by
//!   the CIE's section offset, for the builder to apply.
//!
//! An entry this pass cannot decode is left untouched for gimli to judge.

use std::borrow::Cow;
use std::collections::HashMap;

/// Upper bound on entries examined (a hostile section cannot make this pass unbounded
/// beyond its own length anyway: every step advances).
const MAX_ENTRIES: usize = 1 << 22;

/// What the pass learned about one CIE whose augmentation it rewrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CieFlags {
    /// `B`: return addresses are signed with key B.
    pub key_b: bool,
    /// The augmentation had a real `S` (a signal trampoline).
    pub signal: bool,
}

/// The section as gimli should read it, plus the rewritten CIEs' real flags.
#[derive(Debug)]
pub struct Prepared<'a> {
    pub data: Cow<'a, [u8]>,
    /// Section offset of each CIE whose augmentation was rewritten → its real flags.
    pub cies: HashMap<usize, CieFlags>,
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
}

impl Reader<'_> {
    fn u8(&mut self) -> Option<u8> {
        if self.pos >= self.end {
            return None;
        }
        let b = *self.data.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }
    fn skip(&mut self, n: usize) -> Option<()> {
        let to = self.pos.checked_add(n)?;
        if to > self.end {
            return None;
        }
        self.pos = to;
        Some(())
    }
    fn uleb(&mut self) -> Option<u64> {
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            if shift < 64 {
                v |= u64::from(b & 0x7f) << shift;
            }
            shift = shift.saturating_add(7);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
    }
    fn leb_skip(&mut self) -> Option<()> {
        self.uleb().map(|_| ())
    }
    fn uint(&mut self, size: usize) -> Option<u64> {
        let bytes = self.data.get(self.pos..self.pos.checked_add(size)?)?;
        self.skip(size)?;
        let mut v = 0u64;
        for (i, b) in bytes.iter().enumerate().take(8) {
            v |= u64::from(*b) << (8 * i);
        }
        Some(v)
    }
}

/// Size in bytes of a pointer with DW_EH_PE encoding `enc` (`None` for LEB128 forms,
/// which the caller skips as LEB128, or an encoding we do not know).
fn encoded_size(enc: u8, address_size: usize) -> Result<Option<usize>, ()> {
    if enc == 0xff {
        return Ok(Some(0));
    }
    match enc & 0x0f {
        0x00 => Ok(Some(address_size)),
        0x01 | 0x09 => Ok(None),
        0x02 | 0x0a => Ok(Some(2)),
        0x03 | 0x0b => Ok(Some(4)),
        0x04 | 0x0c => Ok(Some(8)),
        _ => Err(()),
    }
}

fn skip_encoded(r: &mut Reader<'_>, enc: u8, address_size: usize) -> Option<()> {
    match encoded_size(enc, address_size).ok()? {
        Some(n) => r.skip(n),
        None => r.leb_skip(),
    }
}

#[derive(Debug, Clone)]
struct Cie {
    z: bool,
    fde_enc: u8,
    address_size: usize,
    /// Offsets of `B`/`G` letters in the augmentation string.
    letters: Vec<usize>,
    flags: CieFlags,
    instructions: (usize, usize),
}

fn parse_cie(data: &[u8], body: usize, end: usize, eh: bool, addr_size: usize) -> Option<Cie> {
    let mut r = Reader {
        data,
        pos: body,
        end,
    };
    let version = r.u8()?;
    let aug_start = r.pos;
    while r.u8()? != 0 {}
    let aug = data.get(aug_start..r.pos - 1)?;
    if aug.starts_with(b"eh") {
        return None;
    }
    let mut address_size = addr_size;
    if !eh && version >= 4 {
        address_size = usize::from(r.u8()?);
        r.u8()?;
    }
    r.leb_skip()?; // code alignment
    r.leb_skip()?; // data alignment (SLEB128: same length rules)
    if version == 1 {
        r.u8()?;
    } else {
        r.leb_skip()?;
    }
    let mut cie = Cie {
        z: aug.first() == Some(&b'z'),
        fde_enc: 0,
        address_size,
        letters: Vec::new(),
        flags: CieFlags::default(),
        instructions: (0, 0),
    };
    let mut data_reader = None;
    if cie.z {
        let len = usize::try_from(r.uleb()?).ok()?;
        let start = r.pos;
        r.skip(len)?;
        data_reader = Some(Reader {
            data,
            pos: start,
            end: r.pos,
        });
    }
    for (i, &c) in aug.iter().enumerate().skip(usize::from(cie.z)) {
        match c {
            b'L' => {
                data_reader.as_mut()?.u8()?;
            }
            b'P' => {
                let d = data_reader.as_mut()?;
                let enc = d.u8()?;
                skip_encoded(d, enc, address_size)?;
            }
            b'R' => cie.fde_enc = data_reader.as_mut()?.u8()?,
            b'S' => cie.flags.signal = true,
            b'B' => {
                cie.flags.key_b = true;
                cie.letters.push(aug_start + i);
            }
            b'G' => cie.letters.push(aug_start + i),
            _ => return None,
        }
    }
    cie.instructions = (r.pos, end);
    Some(cie)
}

/// Offsets of the 0x2c opcodes in one instruction stream (stops at anything unknown).
fn negate_with_pc_opcodes(data: &[u8], range: (usize, usize), cie: &Cie, eh: bool) -> Vec<usize> {
    let mut out = Vec::new();
    let mut r = Reader {
        data,
        pos: range.0,
        end: range.1,
    };
    let set_loc_enc = if eh { cie.fde_enc } else { 0 };
    while let Some(op) = r.u8() {
        let ok = match (op >> 6, op & 0x3f) {
            (1, _) | (3, _) => Some(()),
            (2, _) => r.leb_skip(),
            (_, 0x00 | 0x0a | 0x0b | 0x2d) => Some(()),
            (_, 0x2c) => {
                out.push(r.pos - 1);
                Some(())
            }
            (_, 0x01) => skip_encoded(&mut r, set_loc_enc, cie.address_size),
            (_, 0x02) => r.skip(1),
            (_, 0x03) => r.skip(2),
            (_, 0x04) => r.skip(4),
            (_, 0x05 | 0x09 | 0x0c | 0x14 | 0x2f | 0x11 | 0x12 | 0x15) => {
                r.leb_skip().and_then(|()| r.leb_skip())
            }
            (_, 0x06 | 0x07 | 0x08 | 0x0d | 0x0e | 0x13 | 0x2e) => r.leb_skip(),
            (_, 0x0f) => r
                .uleb()
                .and_then(|n| usize::try_from(n).ok())
                .and_then(|n| r.skip(n)),
            (_, 0x10 | 0x16) => r.leb_skip().and_then(|()| {
                r.uleb()
                    .and_then(|n| usize::try_from(n).ok())
                    .and_then(|n| r.skip(n))
            }),
            _ => None,
        };
        if ok.is_none() {
            break;
        }
    }
    out
}

/// Scans `data` (an `.eh_frame` when `eh`, else a `.debug_frame`) and returns it ready
/// for gimli; borrowed unchanged when nothing needs rewriting.
pub fn prepare(data: &[u8], eh: bool, address_size: u8) -> Prepared<'_> {
    let (cies, fdes) = entries(data, eh, usize::from(address_size));
    let mut opcodes = Vec::new();
    let mut letters = Vec::new();
    let mut flags = HashMap::new();
    for (&off, cie) in &cies {
        opcodes.extend(negate_with_pc_opcodes(data, cie.instructions, cie, eh));
        if !cie.letters.is_empty() {
            letters.extend_from_slice(&cie.letters);
            flags.insert(off, cie.flags);
        }
    }
    for &(start, end, cie_off) in &fdes {
        let Some(cie) = cies.get(&cie_off) else {
            continue;
        };
        if let Some(instructions) = fde_instructions(data, start, end, cie, eh) {
            opcodes.extend(negate_with_pc_opcodes(data, (instructions, end), cie, eh));
        }
    }
    if opcodes.is_empty() && letters.is_empty() {
        return Prepared {
            data: Cow::Borrowed(data),
            cies: flags,
        };
    }
    let mut copy = data.to_vec();
    for at in opcodes {
        if let Some(b) = copy.get_mut(at) {
            *b = 0x2d;
        }
    }
    for at in letters {
        if let Some(b) = copy.get_mut(at) {
            *b = b'S';
        }
    }
    Prepared {
        data: Cow::Owned(copy),
        cies: flags,
    }
}

/// An FDE as found: (start of its fields after the CIE pointer, end, its CIE's offset).
type FdeSpan = (usize, usize, usize);

/// The section's CIEs by offset and its FDEs, read by their length fields (at most
/// [`MAX_ENTRIES`]; a bad length ends the scan).
fn entries(data: &[u8], eh: bool, addr_size: usize) -> (HashMap<usize, Cie>, Vec<FdeSpan>) {
    let mut cies: HashMap<usize, Cie> = HashMap::new();
    let mut fdes: Vec<FdeSpan> = Vec::new();
    let mut off = 0usize;
    let mut r = Reader {
        data,
        pos: 0,
        end: data.len(),
    };
    for _ in 0..MAX_ENTRIES {
        r.pos = off;
        let Some(len32) = r.uint(4) else { break };
        let (len, id_size) = if len32 == 0xffff_ffff {
            match r.uint(8) {
                Some(l) => (l, 8usize),
                None => break,
            }
        } else {
            (len32, 4usize)
        };
        let body = r.pos;
        let Some(end) = usize::try_from(len)
            .ok()
            .and_then(|l| body.checked_add(l))
            .filter(|&e| e <= data.len())
        else {
            break;
        };
        if len == 0 {
            if eh {
                break;
            }
            off = end;
            continue;
        }
        let mut er = Reader {
            data,
            pos: body,
            end,
        };
        let Some(id) = er.uint(id_size) else { break };
        let is_cie = if eh {
            id == 0
        } else {
            id == 0xffff_ffff || id == u64::MAX
        };
        if is_cie {
            if let Some(cie) = parse_cie(data, er.pos, end, eh, addr_size) {
                cies.insert(off, cie);
            }
        } else {
            let cie_off = if eh {
                usize::try_from(id).ok().and_then(|id| body.checked_sub(id))
            } else {
                usize::try_from(id).ok()
            };
            if let Some(c) = cie_off {
                fdes.push((er.pos, end, c));
            }
        }
        off = end;
    }
    (cies, fdes)
}

/// Where an FDE's instructions start: after its address range (encoded as its CIE says)
/// and, for a `z` CIE, its augmentation data. `None` when the header does not fit.
fn fde_instructions(data: &[u8], start: usize, end: usize, cie: &Cie, eh: bool) -> Option<usize> {
    let mut r = Reader {
        data,
        pos: start,
        end,
    };
    let enc = if eh { cie.fde_enc } else { 0 };
    skip_encoded(&mut r, enc, cie.address_size)?;
    skip_encoded(&mut r, enc & 0x0f, cie.address_size)?;
    if cie.z {
        let n = usize::try_from(r.uleb()?).ok()?;
        r.skip(n)?;
    }
    Some(r.pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `.eh_frame` with one CIE (augmentation `aug`, 'R' data = pcrel|sdata4) and one
    /// FDE whose instructions are `insns`.
    fn eh_frame(aug: &[u8], insns: &[u8]) -> Vec<u8> {
        let mut cie = vec![0, 0, 0, 0, 1];
        cie.extend_from_slice(aug);
        cie.push(0);
        cie.extend_from_slice(&[4, 0x78, 30]); // code align 4, data align -8, ra x30
        cie.extend_from_slice(&[1, 0x1b]); // augmentation data: R = pcrel|sdata4
        cie.extend_from_slice(&[0x0c, 31, 0]); // def_cfa sp+0
        while !(cie.len() + 4).is_multiple_of(8) {
            cie.push(0);
        }
        let mut out = (cie.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&cie);
        let fde_start = out.len();
        let mut fde = ((fde_start + 4) as u32).to_le_bytes().to_vec(); // CIE pointer
        fde.extend_from_slice(&0x100i32.to_le_bytes()); // pc begin
        fde.extend_from_slice(&0x40u32.to_le_bytes()); // pc range
        fde.push(0); // augmentation data length
        fde.extend_from_slice(insns);
        while !(fde.len() + 4).is_multiple_of(8) {
            fde.push(0);
        }
        out.extend_from_slice(&(fde.len() as u32).to_le_bytes());
        out.extend_from_slice(&fde);
        out.extend_from_slice(&[0, 0, 0, 0]);
        out
    }

    #[test]
    fn untouched_when_nothing_to_do() {
        let data = eh_frame(b"zR", &[0x2d, 0x41, 0x0e, 0x10]);
        let p = prepare(&data, true, 8);
        assert!(matches!(p.data, Cow::Borrowed(_)));
        assert!(p.cies.is_empty());
    }

    #[test]
    fn negate_ra_state_with_pc_becomes_negate_ra_state() {
        // 0x2c; advance_loc 1; def_cfa_offset 0x2c (an operand, left alone); 0x2c
        let data = eh_frame(b"zR", &[0x2c, 0x41, 0x0e, 0x2c, 0x2c]);
        let p = prepare(&data, true, 8);
        let expect = eh_frame(b"zR", &[0x2d, 0x41, 0x0e, 0x2c, 0x2d]);
        assert_eq!(&*p.data, &expect[..]);
    }

    #[test]
    fn key_b_augmentation_is_recorded_and_hidden_from_gimli() {
        let data = eh_frame(b"zRB", &[0x2d]);
        let p = prepare(&data, true, 8);
        assert_eq!(&*p.data, &eh_frame(b"zRS", &[0x2d])[..]);
        assert_eq!(
            p.cies.get(&0),
            Some(&CieFlags {
                key_b: true,
                signal: false
            })
        );
    }

    #[test]
    fn garbage_never_panics() {
        for len in 0..64 {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let _ = prepare(&data, true, 8);
            let _ = prepare(&data, false, 8);
        }
        let _ = prepare(
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
            true,
            8,
        );
        let mut data = eh_frame(b"zRB", &[0x2c]);
        data.truncate(data.len() - 9);
        let _ = prepare(&data, true, 8);
    }
}
