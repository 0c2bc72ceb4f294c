//! Errors of the SFrame reader: why a `.sframe` section (or `PT_GNU_SFRAME` segment)
//! could not be decoded.
//!
//! Every variant carries the offsets or values that make it reproducible, is `Clone` and
//! `PartialEq` so tests can `assert_eq!` on it, and has a stable kebab-case [`code`].
//!
//! [`code`]: SframeError::code

/// Why an SFrame section was rejected. A rejected section yields no rows at all: a
/// structural problem means nothing in it can be trusted.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SframeError {
    /// The bytes end before a structure does.
    #[error("sframe: {what} at offset {offset:#x} needs {needed} bytes, the section has {have}")]
    Truncated {
        what: &'static str,
        offset: u64,
        needed: u64,
        have: u64,
    },
    /// The first two bytes are not the SFrame magic in either byte order.
    #[error("sframe: bad magic {0:#06x}")]
    BadMagic(u16),
    /// Version 1 (obsolete) or a version this reader does not know.
    #[error("sframe: version {0} is not supported (only 2 and 3)")]
    UnsupportedVersion(u8),
    /// An ABI/arch identifier the format does not define.
    #[error("sframe: unknown ABI/arch identifier {0}")]
    UnknownAbi(u8),
    /// A count from the header or an FDE cannot fit in the bytes that should hold it.
    #[error("sframe: {what} count {count} cannot fit in {have} bytes")]
    CountTooLarge {
        what: &'static str,
        count: u64,
        have: u64,
    },
    /// FDE `fde` refers to FRE data outside the FRE sub-section.
    #[error(
        "sframe: FDE {fde}: FRE data at {offset:#x} lies outside the FRE sub-section ({len} bytes)"
    )]
    FreOffsetOutOfRange { fde: usize, offset: u64, len: u64 },
    /// An FDE's FRE type is not ADDR1/ADDR2/ADDR4.
    #[error("sframe: FDE {fde}: unknown FRE type {fre_type}")]
    BadFreType { fde: usize, fre_type: u8 },
    /// An FRE's data word size code is not 1/2/4 bytes.
    #[error("sframe: FDE {fde}: FRE {fre}: unknown data word size code {code}")]
    BadDatawordSize { fde: usize, fre: usize, code: u8 },
    /// A v3 FDE type other than DEFAULT and FLEX.
    #[error("sframe: FDE {fde}: unknown FDE type {fde_type}")]
    UnknownFdeType { fde: usize, fde_type: u8 },
    /// `SFRAME_F_FDE_SORTED` is set but FDE `index` starts before FDE `index - 1`.
    #[error("sframe: FDEs marked sorted are not: FDE {index} starts before its predecessor")]
    FdesNotSorted { index: usize },
    /// The section's ABI is not the binary's architecture (or one we unwind).
    #[error("sframe: ABI/arch {abi} does not match the binary's architecture")]
    AbiMismatch { abi: u8 },
    /// Two FDEs describe overlapping address ranges.
    #[error("sframe: FDE {second} overlaps FDE {first}")]
    FdesOverlap { first: usize, second: usize },
}

impl SframeError {
    /// A stable kebab-case name for logs and warnings.
    pub fn code(&self) -> &'static str {
        match self {
            SframeError::Truncated { .. } => "sframe-truncated",
            SframeError::BadMagic(_) => "sframe-bad-magic",
            SframeError::UnsupportedVersion(_) => "sframe-unsupported-version",
            SframeError::UnknownAbi(_) => "sframe-unknown-abi",
            SframeError::CountTooLarge { .. } => "sframe-count-too-large",
            SframeError::FreOffsetOutOfRange { .. } => "sframe-fre-offset-out-of-range",
            SframeError::BadFreType { .. } => "sframe-bad-fre-type",
            SframeError::BadDatawordSize { .. } => "sframe-bad-dataword-size",
            SframeError::UnknownFdeType { .. } => "sframe-unknown-fde-type",
            SframeError::FdesNotSorted { .. } => "sframe-fdes-not-sorted",
            SframeError::FdesOverlap { .. } => "sframe-fdes-overlap",
            SframeError::AbiMismatch { .. } => "sframe-abi-mismatch",
        }
    }
}
