//! Reader of SFrame sections (`.sframe`, `PT_GNU_SFRAME`): versions 2 and 3, both byte
//! orders.
//!
//! [`Sframe::parse`] decodes a whole section once, checking every offset and count against
//! the bytes before reading or allocating, so any input gives a value or an
//! [`SframeError`], never a panic and never more memory than the section's size
//! justifies. [`Fre::rule`] then interprets one row's data words for its ABI and FDE
//! type (DEFAULT or FLEX) as [`FreRule`]: the CFA, FP and RA recovery rules that
//! [`crate::unwind::builders::sframe`] turns into table rows and [`objdump`] prints.
//!
//! Where binutils and the specification text disagree, this follows binutils (the
//! `ground truth` vectors in `fixtures/sframe`): AArch64 FREs may carry two data
//! words (CFA + RA), and in FLEX FDEs the FP pair follows the RA padding word at data
//! words 3/4, or an RA pair at words 4/5.
//!
//! Not done here: SFrame v1 (obsolete; rejected with
//! [`SframeError::UnsupportedVersion`], never misread), applying relocations of
//! relocatable objects (their function starts read as stored).

mod error;
pub mod objdump;

pub use error::SframeError;

/// `sfp_magic`.
pub const SFRAME_MAGIC: u16 = 0xdee2;
/// Size of `sframe_header` without the auxiliary header.
pub const HEADER_SIZE: usize = 28;
/// `SFRAME_F_FDE_SORTED`.
pub const F_FDE_SORTED: u8 = 0x1;
/// `SFRAME_F_FRAME_POINTER` (v1–v2).
pub const F_FRAME_POINTER: u8 = 0x2;
/// `SFRAME_F_FDE_FUNC_START_PCREL`.
pub const F_FDE_FUNC_START_PCREL: u8 = 0x4;
/// Size of one FDE index entry in v2 (`sframe_func_desc_entry`).
const FDE_SIZE_V2: usize = 20;
/// Size of one FDE index entry in v3 (`sframe_func_desc_idx`).
const FDE_SIZE_V3: usize = 16;
/// Size of the v3 FDE attribute at the start of each function's FRE data.
const FDE_ATTR_SIZE_V3: usize = 5;
/// s390x: CFA offsets are stored as `(offset - 160) / 8`.
const S390X_CFA_OFFSET_ADJUSTMENT: i64 = 160;
const S390X_CFA_OFFSET_ALIGNMENT_FACTOR: i64 = 8;

/// Byte order of a section, found from its magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
}

/// `sfh_abi_arch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abi {
    Aarch64BigEndian = 1,
    Aarch64LittleEndian = 2,
    Amd64 = 3,
    S390x = 4,
}

impl Abi {
    fn from_u8(b: u8) -> Option<Abi> {
        Some(match b {
            1 => Abi::Aarch64BigEndian,
            2 => Abi::Aarch64LittleEndian,
            3 => Abi::Amd64,
            4 => Abi::S390x,
            _ => return None,
        })
    }
    /// DWARF numbers of the ABI's stack pointer and frame pointer.
    pub fn sp_fp(self) -> (u16, u16) {
        match self {
            Abi::Amd64 => {
                let a = crate::arch::Arch::X86_64;
                (a.sp_reg(), a.fp_reg())
            }
            Abi::Aarch64BigEndian | Abi::Aarch64LittleEndian => {
                let a = crate::arch::Arch::Aarch64;
                (a.sp_reg(), a.fp_reg())
            }
            // no arch module: z/Architecture's r15 and r11
            Abi::S390x => (15, 11),
        }
    }
    pub fn is_aarch64(self) -> bool {
        matches!(self, Abi::Aarch64BigEndian | Abi::Aarch64LittleEndian)
    }
}

/// The SFrame header, fields as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub endian: Endian,
    pub version: u8,
    pub flags: u8,
    pub abi: Abi,
    pub cfa_fixed_fp_offset: i8,
    pub cfa_fixed_ra_offset: i8,
    pub auxhdr_len: u8,
    pub num_fdes: u32,
    pub num_fres: u32,
    pub fre_len: u32,
    pub fdeoff: u32,
    pub freoff: u32,
}

/// How an FDE's FRE start offsets are matched against a pc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcType {
    /// `pc - func_start >= fre_start`.
    Inc,
    /// `(pc - func_start) % rep_size >= fre_start`: repeating blocks such as PLT entries.
    Mask,
}

/// How an FDE's FRE data words are interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdeType {
    /// ABI-specific stack offsets.
    Default,
    /// (control, offset) data-word pairs for CFA, RA, FP (v3).
    Flex,
}

/// One function descriptor with its decoded rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fde {
    /// Function start as a file address (section address + stored offset), wrapping.
    pub func_start: u64,
    pub func_size: u32,
    /// `sfde_func_start_fre_off` / `sfdi_func_start_fre_off`, relative to the FRE
    /// sub-section.
    pub fre_off: u32,
    pub pc_type: PcType,
    pub fde_type: FdeType,
    /// `SFRAME_FRE_TYPE_ADDR*`: 0, 1 or 2.
    pub fre_type: u8,
    pub rep_size: u8,
    /// Signal frame (v3 info bit 7).
    pub signal: bool,
    /// AArch64: return addresses signed with key B (else key A).
    pub pauth_key_b: bool,
    pub fres: Vec<Fre>,
}

/// One frame row entry: its start offset, info byte and up to 15 data words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fre {
    /// Offset from the function start (INC) or inside the repeated block (MASK).
    pub start: u32,
    pub info: u8,
    /// Data words as stored, zero-extended; [`Fre::signed`] sign-extends.
    words: [u32; 15],
}

impl Fre {
    /// `fre_dataword_count`.
    pub fn word_count(&self) -> usize {
        usize::from((self.info >> 1) & 0xf)
    }
    /// Bytes per data word: 1, 2 or 4 (validated at parse time).
    pub fn word_size(&self) -> usize {
        match (self.info >> 5) & 3 {
            0 => 1,
            1 => 2,
            _ => 4,
        }
    }
    /// CFA based on SP (else FP), DEFAULT FDEs only.
    pub fn cfa_base_is_sp(&self) -> bool {
        self.info & 1 != 0
    }
    /// The return address is mangled (AArch64: signed with pointer authentication).
    pub fn mangled_ra(&self) -> bool {
        self.info & 0x80 != 0
    }
    /// Data word `i` as an unsigned value, if present.
    pub fn unsigned(&self, i: usize) -> Option<u32> {
        if i < self.word_count() {
            self.words.get(i).copied()
        } else {
            None
        }
    }
    /// Data word `i` sign-extended from its stored width, if present.
    pub fn signed(&self, i: usize) -> Option<i64> {
        let v = self.unsigned(i)?;
        Some(match self.word_size() {
            1 => i64::from(v as u8 as i8),
            2 => i64::from(v as u16 as i16),
            _ => i64::from(v as i32),
        })
    }
}

/// What a rule's value is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// The ABI's stack pointer.
    Sp,
    /// The ABI's frame pointer.
    Fp,
    /// Another register, by DWARF number.
    Reg(u16),
    /// The CFA (for FP and RA only).
    Cfa,
}

/// `value = base + offset`, or `*(base + offset)` when `deref`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub base: Base,
    pub offset: i64,
    pub deref: bool,
}

/// How the FP or RA is recovered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegRule {
    /// Not saved by this function: unchanged (FP), or still in the link register (RA).
    NotSaved,
    /// RA at the header's fixed offset from the CFA (AMD64: no RA data words at all).
    Fixed(i64),
    /// RA padding word 0: the RA keeps its default location (AMD64: the fixed CFA
    /// offset; s390x and AArch64: still in the link register).
    Padding,
    /// Recovered by a location rule.
    At(Loc),
}

/// The interpretation of one FRE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreRule {
    /// Zero data words: the RA is undefined, this is the outermost frame.
    RaUndefined,
    /// An ordinary row. `cfa` is `None` when the data words do not describe one (a
    /// FLEX CFA based on the CFA itself, or missing words).
    Rule {
        cfa: Option<Loc>,
        fp: RegRule,
        ra: RegRule,
        mangled_ra: bool,
    },
}

/// What an FRE's rule falls back to where its words do not say: the header's fixed RA and
/// FP offsets, and the ABI's CFA offset scaling.
struct Fallback {
    abi: Abi,
    ra: RegRule,
    fp: RegRule,
}

impl Fallback {
    fn of(header: &Header) -> Self {
        let fixed = |off: i8| {
            if off != 0 {
                RegRule::Fixed(i64::from(off))
            } else {
                RegRule::NotSaved
            }
        };
        Fallback {
            abi: header.abi,
            ra: fixed(header.cfa_fixed_ra_offset),
            fp: fixed(header.cfa_fixed_fp_offset),
        }
    }

    fn scale_cfa(&self, v: i64) -> i64 {
        if self.abi == Abi::S390x {
            v * S390X_CFA_OFFSET_ALIGNMENT_FACTOR + S390X_CFA_OFFSET_ADJUSTMENT
        } else {
            v
        }
    }
}

/// A register saved at `off` from the CFA.
fn at_cfa(off: i64) -> RegRule {
    RegRule::At(Loc {
        base: Base::Cfa,
        offset: off,
        deref: true,
    })
}

impl Fre {
    /// Interprets this FRE's data words for `header`'s ABI and `fde_type`.
    pub fn rule(&self, header: &Header, fde_type: FdeType) -> FreRule {
        if self.word_count() == 0 {
            return FreRule::RaUndefined;
        }
        let fallback = Fallback::of(header);
        match fde_type {
            FdeType::Default => self.default_rule(&fallback),
            FdeType::Flex => self.flex_rule(&fallback),
        }
    }

    /// A default-type FRE: the CFA from SP or FP, then the ABI's RA and FP offsets.
    fn default_rule(&self, fallback: &Fallback) -> FreRule {
        let cfa = self.signed(0).map(|off| Loc {
            base: if self.cfa_base_is_sp() {
                Base::Sp
            } else {
                Base::Fp
            },
            offset: fallback.scale_cfa(off),
            deref: false,
        });
        let (ra, fp) = match fallback.abi {
            Abi::Amd64 => (fallback.ra, self.signed(1).map_or(fallback.fp, at_cfa)),
            Abi::Aarch64BigEndian | Abi::Aarch64LittleEndian => (
                self.signed(1).map_or(fallback.ra, at_cfa),
                self.signed(2).map_or(fallback.fp, at_cfa),
            ),
            Abi::S390x => (
                match self.signed(1) {
                    None => fallback.ra,
                    Some(0) => RegRule::Padding,
                    Some(off) => at_cfa(off),
                },
                self.signed(2).map_or(fallback.fp, at_cfa),
            ),
        };
        FreRule::Rule {
            cfa,
            fp,
            ra,
            mangled_ra: self.mangled_ra(),
        }
    }

    /// A flexible-type FRE: (control word, offset) pairs for the CFA, RA and FP.
    fn flex_rule(&self, fallback: &Fallback) -> FreRule {
        let (sp, fp) = fallback.abi.sp_fp();
        let pair = |ctl_i: usize| -> Option<Loc> {
            let ctl = self.unsigned(ctl_i)?;
            let off = self.signed(ctl_i + 1)?;
            let reg_p = ctl & 1 != 0;
            let deref = ctl & 2 != 0;
            let base = if reg_p {
                let r = u16::try_from(ctl >> 3).ok()?;
                if r == sp {
                    Base::Sp
                } else if r == fp {
                    Base::Fp
                } else {
                    Base::Reg(r)
                }
            } else {
                Base::Cfa
            };
            Some(Loc {
                base,
                offset: off,
                deref,
            })
        };
        let cfa = pair(0).filter(|l| l.base != Base::Cfa).map(|l| Loc {
            offset: fallback.scale_cfa(l.offset),
            ..l
        });
        let (ra, fp_index) = match self.unsigned(2) {
            None => (fallback.ra, None),
            Some(0) => (RegRule::Padding, Some(3)),
            Some(_) => (pair(2).map_or(RegRule::NotSaved, RegRule::At), Some(4)),
        };
        let fp_rule = match fp_index.and_then(pair) {
            Some(l) => RegRule::At(l),
            None => fallback.fp,
        };
        FreRule::Rule {
            cfa,
            fp: fp_rule,
            ra,
            mangled_ra: self.mangled_ra(),
        }
    }
}

/// A decoded SFrame section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sframe {
    pub header: Header,
    /// FDEs in index order.
    pub fdes: Vec<Fde>,
}

/// Bounds-checked reads in the section's byte order.
struct Reader<'a> {
    data: &'a [u8],
    endian: Endian,
}

impl<'a> Reader<'a> {
    fn bytes<const N: usize>(
        &self,
        offset: u64,
        what: &'static str,
    ) -> Result<[u8; N], SframeError> {
        let truncated = || SframeError::Truncated {
            what,
            offset,
            needed: N as u64,
            have: self.data.len() as u64,
        };
        let start = usize::try_from(offset).map_err(|_| truncated())?;
        let end = start.checked_add(N).ok_or_else(truncated)?;
        let b = self.data.get(start..end).ok_or_else(truncated)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }
    fn u8(&self, offset: u64, what: &'static str) -> Result<u8, SframeError> {
        Ok(self.bytes::<1>(offset, what)?[0])
    }
    fn u16(&self, offset: u64, what: &'static str) -> Result<u16, SframeError> {
        let b = self.bytes::<2>(offset, what)?;
        Ok(match self.endian {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        })
    }
    fn u32(&self, offset: u64, what: &'static str) -> Result<u32, SframeError> {
        let b = self.bytes::<4>(offset, what)?;
        Ok(match self.endian {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        })
    }
    fn u64(&self, offset: u64, what: &'static str) -> Result<u64, SframeError> {
        let b = self.bytes::<8>(offset, what)?;
        Ok(match self.endian {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        })
    }
    /// An unsigned value of `size` bytes (1, 2 or 4).
    fn uint(&self, offset: u64, size: usize, what: &'static str) -> Result<u32, SframeError> {
        Ok(match size {
            1 => u32::from(self.u8(offset, what)?),
            2 => u32::from(self.u16(offset, what)?),
            _ => self.u32(offset, what)?,
        })
    }
}

impl Sframe {
    /// Reads the header only: magic, version, ABI. Fails on v1 and unknown versions.
    pub fn parse_header(data: &[u8]) -> Result<Header, SframeError> {
        let magic = data.get(..2).ok_or(SframeError::Truncated {
            what: "preamble",
            offset: 0,
            needed: 2,
            have: data.len() as u64,
        })?;
        let endian = match [magic[0], magic[1]] {
            m if u16::from_le_bytes(m) == SFRAME_MAGIC => Endian::Little,
            m if u16::from_be_bytes(m) == SFRAME_MAGIC => Endian::Big,
            m => return Err(SframeError::BadMagic(u16::from_le_bytes(m))),
        };
        let r = Reader { data, endian };
        let version = r.u8(2, "preamble")?;
        if version != 2 && version != 3 {
            return Err(SframeError::UnsupportedVersion(version));
        }
        if data.len() < HEADER_SIZE {
            return Err(SframeError::Truncated {
                what: "header",
                offset: 0,
                needed: HEADER_SIZE as u64,
                have: data.len() as u64,
            });
        }
        let abi_raw = r.u8(4, "header")?;
        let abi = Abi::from_u8(abi_raw).ok_or(SframeError::UnknownAbi(abi_raw))?;
        Ok(Header {
            endian,
            version,
            flags: r.u8(3, "header")?,
            abi,
            cfa_fixed_fp_offset: r.u8(5, "header")? as i8,
            cfa_fixed_ra_offset: r.u8(6, "header")? as i8,
            auxhdr_len: r.u8(7, "header")?,
            num_fdes: r.u32(8, "header")?,
            num_fres: r.u32(12, "header")?,
            fre_len: r.u32(16, "header")?,
            fdeoff: r.u32(20, "header")?,
            freoff: r.u32(24, "header")?,
        })
    }

    /// Decodes a whole section. `section_addr` is the section's file address
    /// (`sh_addr` or the `PT_GNU_SFRAME` `p_vaddr`): function starts are relative to it.
    pub fn parse(data: &[u8], section_addr: u64) -> Result<Sframe, SframeError> {
        let header = Self::parse_header(data)?;
        let r = Reader {
            data,
            endian: header.endian,
        };
        let len = data.len() as u64;
        let hdr_end = HEADER_SIZE as u64 + u64::from(header.auxhdr_len);
        let fde_size = if header.version == 2 {
            FDE_SIZE_V2
        } else {
            FDE_SIZE_V3
        } as u64;
        // FDE index: fits in the section?
        let fde_start = hdr_end + u64::from(header.fdeoff);
        let fde_bytes = u64::from(header.num_fdes) * fde_size;
        if fde_start.checked_add(fde_bytes).is_none_or(|end| end > len) {
            return Err(SframeError::CountTooLarge {
                what: "FDE",
                count: u64::from(header.num_fdes),
                have: len.saturating_sub(fde_start),
            });
        }
        // FRE sub-section: [fre_start, fre_end) inside the section.
        let fre_start = hdr_end + u64::from(header.freoff);
        let fre_end = fre_start + u64::from(header.fre_len);
        if fre_end > len {
            return Err(SframeError::Truncated {
                what: "FRE sub-section",
                offset: fre_start,
                needed: u64::from(header.fre_len),
                have: len.saturating_sub(fre_start),
            });
        }
        let fre_sub = Reader {
            // in range: fre_end <= len, which fits in usize
            data: data.get(..fre_end as usize).unwrap_or_default(),
            endian: header.endian,
        };
        // num_fdes * fde_size <= len, so this allocation is bounded by the section size.
        let mut fdes = Vec::with_capacity(header.num_fdes as usize);
        for i in 0..header.num_fdes as usize {
            let at = fde_start + i as u64 * fde_size;
            let fde = if header.version == 2 {
                let start = r.u32(at, "FDE")? as i32;
                let size = r.u32(at + 4, "FDE")?;
                let fre_off = r.u32(at + 8, "FDE")?;
                let num_fres = r.u32(at + 12, "FDE")?;
                let info = r.u8(at + 16, "FDE")?;
                let rep_size = r.u8(at + 17, "FDE")?;
                let base = if header.flags & F_FDE_FUNC_START_PCREL != 0 {
                    section_addr.wrapping_add(at)
                } else {
                    section_addr
                };
                let func_start = base.wrapping_add(i64::from(start) as u64);
                let first = checked_fre_offset(i, fre_off, 0, fre_start, fre_end)?;
                decode_fres(
                    &fre_sub, i, first, num_fres, info, 0, rep_size, false, func_start, size,
                    fre_off,
                )?
            } else {
                let start = r.u64(at, "FDE")?;
                let size = r.u32(at + 8, "FDE")?;
                let fre_off = r.u32(at + 12, "FDE")?;
                let attr =
                    checked_fre_offset(i, fre_off, FDE_ATTR_SIZE_V3 as u64, fre_start, fre_end)?;
                let num_fres = fre_sub.u16(attr, "FDE attribute")?;
                let info = fre_sub.u8(attr + 2, "FDE attribute")?;
                let info2 = fre_sub.u8(attr + 3, "FDE attribute")?;
                let rep_size = fre_sub.u8(attr + 4, "FDE attribute")?;
                let base = if header.flags & F_FDE_FUNC_START_PCREL != 0 {
                    section_addr.wrapping_add(at)
                } else {
                    section_addr
                };
                let func_start = base.wrapping_add(start);
                decode_fres(
                    &fre_sub,
                    i,
                    attr + FDE_ATTR_SIZE_V3 as u64,
                    u32::from(num_fres),
                    info,
                    info2,
                    rep_size,
                    info & 0x80 != 0,
                    func_start,
                    size,
                    fre_off,
                )?
            };
            fdes.push(fde);
        }
        Ok(Sframe { header, fdes })
    }

    /// Checks what a lookup relies on: FDEs marked sorted are sorted, and no two FDEs
    /// cover the same address. A section that fails is not used for unwinding (a lookup
    /// could otherwise return the wrong function's rows).
    pub fn check_layout(&self) -> Result<(), SframeError> {
        if self.header.flags & F_FDE_SORTED != 0 {
            for (i, w) in self.fdes.windows(2).enumerate() {
                if w[1].func_start < w[0].func_start {
                    return Err(SframeError::FdesNotSorted { index: i + 1 });
                }
            }
        }
        let mut order: Vec<usize> = (0..self.fdes.len()).collect();
        order.sort_by_key(|&i| self.fdes[i].func_start);
        let mut prev: Option<(usize, u64)> = None; // (index, end)
        for &i in &order {
            let f = &self.fdes[i];
            if f.func_size == 0 {
                continue;
            }
            if let Some((p, end)) = prev {
                if f.func_start < end {
                    return Err(SframeError::FdesOverlap {
                        first: p,
                        second: i,
                    });
                }
            }
            prev = Some((i, f.func_start.saturating_add(u64::from(f.func_size))));
        }
        Ok(())
    }
}

/// The absolute offset of an FDE's FRE data, checked so that its first `need` bytes lie
/// inside the FRE sub-section.
fn checked_fre_offset(
    fde: usize,
    fre_off: u32,
    need: u64,
    fre_start: u64,
    fre_end: u64,
) -> Result<u64, SframeError> {
    let at = fre_start + u64::from(fre_off);
    if at + need > fre_end {
        return Err(SframeError::FreOffsetOutOfRange {
            fde,
            offset: u64::from(fre_off),
            len: fre_end - fre_start,
        });
    }
    Ok(at)
}

#[allow(clippy::too_many_arguments)]
fn decode_fres(
    r: &Reader<'_>,
    fde: usize,
    first: u64,
    num_fres: u32,
    info: u8,
    info2: u8,
    rep_size: u8,
    signal: bool,
    func_start: u64,
    func_size: u32,
    fre_off: u32,
) -> Result<Fde, SframeError> {
    let fre_type = info & 0xf;
    let addr_size: u64 = match fre_type {
        0 => 1,
        1 => 2,
        2 => 4,
        _ => return Err(SframeError::BadFreType { fde, fre_type }),
    };
    let fde_type = match info2 & 0x1f {
        0 => FdeType::Default,
        1 => FdeType::Flex,
        t => return Err(SframeError::UnknownFdeType { fde, fde_type: t }),
    };
    // each FRE takes at least addr_size + 1 bytes: bound the count before allocating
    let have = (r.data.len() as u64).saturating_sub(first);
    if u64::from(num_fres) * (addr_size + 1) > have {
        return Err(SframeError::CountTooLarge {
            what: "FRE",
            count: u64::from(num_fres),
            have,
        });
    }
    let mut fres = Vec::with_capacity(num_fres as usize);
    let mut at = first;
    for j in 0..num_fres as usize {
        let start = r.uint(at, addr_size as usize, "FRE")?;
        let fre_info = r.u8(at + addr_size, "FRE")?;
        at += addr_size + 1;
        let code = (fre_info >> 5) & 3;
        if code == 3 {
            return Err(SframeError::BadDatawordSize { fde, fre: j, code });
        }
        let size = 1usize << code;
        let count = usize::from((fre_info >> 1) & 0xf);
        let mut words = [0u32; 15];
        for (k, w) in words.iter_mut().take(count).enumerate() {
            *w = r.uint(at + (k * size) as u64, size, "FRE data word")?;
        }
        at += (count * size) as u64;
        fres.push(Fre {
            start,
            info: fre_info,
            words,
        });
    }
    Ok(Fde {
        func_start,
        func_size,
        fre_off,
        pc_type: if info & 0x10 != 0 {
            PcType::Mask
        } else {
            PcType::Inc
        },
        fde_type,
        fre_type,
        rep_size,
        signal,
        pauth_key_b: info & 0x20 != 0,
        fres,
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod build_tests;
