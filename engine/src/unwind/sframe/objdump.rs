//! Prints a decoded SFrame section the way GNU `objdump --sframe` does.
//!
//! It exists so that tests can compare our decode with binutils' own, byte for byte,
//! on the ground-truth vectors in `fixtures/sframe`; nothing in the engine
//! depends on it. Output starts at objdump's `Contents of the SFrame section` line (the
//! lines before it name the input file and are not part of the decode). Where objdump
//! versions print the same bytes differently, [`Binutils`] selects the behaviour.

use std::fmt::Write;

use super::{
    Base, Fde, FdeType, FreRule, Loc, PcType, RegRule, Sframe, F_FDE_FUNC_START_PCREL,
    F_FDE_SORTED, F_FRAME_POINTER,
};

/// The objdump version whose output to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Binutils {
    pub major: u32,
    pub minor: u32,
}

impl Binutils {
    /// The newest version the fixtures were made with.
    pub const LATEST: Binutils = Binutils {
        major: 2,
        minor: 47,
    };

    /// Parses `"2.41"`.
    pub fn parse(s: &str) -> Option<Binutils> {
        let (a, b) = s.split_once('.')?;
        Some(Binutils {
            major: a.parse().ok()?,
            minor: b.split('.').next()?.parse().ok()?,
        })
    }

    /// objdump 2.41 neither prints the header's fixed RA offset nor marks rows that use
    /// it (`u` instead of `f`); 2.44 and later do. (No vectors from 2.42/2.43: the
    /// boundary is placed at the first version observed to print it.)
    fn prints_fixed_offsets(self) -> bool {
        self >= Binutils {
            major: 2,
            minor: 44,
        }
    }
}

/// `objdump --sframe` text for `section` named `name` (e.g. `.sframe`).
pub fn format(section: &Sframe, name: &str, binutils: Binutils) -> String {
    let mut out = String::new();
    let h = &section.header;
    // `write!` to a String cannot fail.
    let _ = writeln!(out, "Contents of the SFrame section {name}:");
    out.push_str("  Header :\n\n");
    let _ = writeln!(out, "    Version: SFRAME_VERSION_{}", h.version);
    let names: Vec<&str> = [
        (F_FDE_SORTED, "SFRAME_F_FDE_SORTED"),
        (F_FRAME_POINTER, "SFRAME_F_FRAME_POINTER"),
        (F_FDE_FUNC_START_PCREL, "SFRAME_F_FDE_FUNC_START_PCREL"),
    ]
    .iter()
    .filter(|(bit, _)| h.flags & bit != 0)
    .map(|(_, n)| *n)
    .collect();
    if names.is_empty() {
        out.push_str("    Flags: NONE\n");
    } else {
        let _ = writeln!(out, "    Flags: {}", names.join(",\n           "));
    }
    if binutils.prints_fixed_offsets() {
        if h.cfa_fixed_fp_offset != 0 {
            let _ = writeln!(out, "    CFA fixed FP offset: {}", h.cfa_fixed_fp_offset);
        }
        if h.cfa_fixed_ra_offset != 0 {
            let _ = writeln!(out, "    CFA fixed RA offset: {}", h.cfa_fixed_ra_offset);
        }
    }
    let _ = writeln!(out, "    Num FDEs: {}", h.num_fdes);
    let _ = writeln!(out, "    Num FREs: {}", h.num_fres);
    out.push_str("\n  Function Index :\n");
    for (i, fde) in section.fdes.iter().enumerate() {
        format_fde(&mut out, section, i, fde, binutils);
    }
    out
}

fn format_fde(out: &mut String, section: &Sframe, i: usize, fde: &Fde, binutils: Binutils) {
    let _ = write!(
        out,
        "\n    func idx [{i}]: pc = {:#x}, size = {} bytes",
        fde.func_start, fde.func_size
    );
    let mut attr = String::new();
    if fde.signal {
        attr.push('S');
    }
    if fde.fde_type == FdeType::Flex {
        attr.push('F');
    }
    if !attr.is_empty() {
        let _ = write!(out, ", attr = \"{attr}\"");
    }
    if fde.pauth_key_b {
        out.push_str(", pauth = B key");
    }
    out.push('\n');
    let startpc = match fde.pc_type {
        PcType::Inc => "STARTPC",
        PcType::Mask => "STARTPC[m]",
    };
    let _ = writeln!(
        out,
        "    {startpc:<16}{:<10}{:<10}{:<13}",
        "CFA", "FP", "RA"
    );
    let sp_fp = section.header.abi.sp_fp();
    for fre in &fde.fres {
        let pc = match fde.pc_type {
            PcType::Inc => fde.func_start.wrapping_add(u64::from(fre.start)),
            PcType::Mask => u64::from(fre.start),
        };
        match fre.rule(&section.header, fde.fde_type) {
            FreRule::RaUndefined => {
                let _ = writeln!(out, "    {pc:016x}  RA undefined");
            }
            FreRule::Rule {
                cfa,
                fp,
                ra,
                mangled_ra,
            } => {
                let cfa = cfa.map_or_else(|| "?".to_string(), |l| loc(l, sp_fp));
                let fp = reg_rule(fp, sp_fp, binutils);
                let mut ra = reg_rule(ra, sp_fp, binutils);
                if mangled_ra {
                    ra.push_str("[s]");
                }
                let _ = writeln!(out, "    {pc:016x}  {cfa:<10}{fp:<10}{ra:<13}");
            }
        }
    }
}

fn loc(l: Loc, _sp_fp: (u16, u16)) -> String {
    let base = match l.base {
        Base::Sp => "sp".to_string(),
        Base::Fp => "fp".to_string(),
        Base::Reg(r) => format!("r{r}"),
        // objdump prints CFA-based rules without parentheses, dereferenced or not
        Base::Cfa => return format!("c{:+}", l.offset),
    };
    if l.deref {
        format!("({base}{:+})", l.offset)
    } else {
        format!("{base}{:+}", l.offset)
    }
}

fn reg_rule(r: RegRule, sp_fp: (u16, u16), binutils: Binutils) -> String {
    match r {
        RegRule::NotSaved => "u".into(),
        RegRule::Fixed(_) if binutils.prints_fixed_offsets() => "f".into(),
        RegRule::Fixed(_) => "u".into(),
        RegRule::Padding => "U".into(),
        RegRule::At(l) => loc(l, sp_fp),
    }
}
