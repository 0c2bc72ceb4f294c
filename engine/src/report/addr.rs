//! [`Addr`]: a machine word of the report (an address, an offset, a register's value),
//! held as a number and written as the report spells it, lower-case hex with `0x` and no
//! padding (`0x7f3a1c`, `0x0`).
//!
//! The report's addresses were strings, which every reader of a report (the text view,
//! the minidump-stackwalk rendering, the crash analysis) parsed back, each in its own way
//! and some with a silent `0` for what did not parse. Holding the number makes the
//! spelling one `Display` and the reading one `Deserialize`, where a malformed address in
//! a stored report is an error rather than a zero.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A 64-bit word of the report, serialized as lower-case hex with `0x` and no padding
/// (the schema's `hex`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Addr(pub u64);

impl Addr {
    /// The number.
    pub fn get(self) -> u64 {
        self.0
    }

    /// Reads the report's spelling: `0x` and 1 to 16 hex digits (upper-case digits and
    /// leading zeros are read too, as `u64::from_str_radix` reads them, but never
    /// written). `None` for anything else, a sign included.
    pub fn parse(s: &str) -> Option<Addr> {
        let digits = s.strip_prefix("0x")?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u64::from_str_radix(digits, 16).ok().map(Addr)
    }
}

impl From<u64> for Addr {
    fn from(v: u64) -> Addr {
        Addr(v)
    }
}

impl From<Addr> for u64 {
    fn from(a: Addr) -> u64 {
        a.0
    }
}

impl fmt::Display for Addr {
    /// `0x` and lower-case hex digits, no padding; width and alignment are honoured (the
    /// text report's columns).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.width().is_some() {
            f.pad(&format!("{:#x}", self.0))
        } else {
            write!(f, "{:#x}", self.0)
        }
    }
}

impl fmt::LowerHex for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// The newtype name an [`Addr`] is serialized under. Serializers pass a newtype through
/// to its content, the spelling, so the text is the same; `json_size`'s bound, which
/// only needs the widest spelling (`"0x` and 16 digits`"`), takes it from the name
/// without spelling the address (a deep report has tens of thousands).
pub(crate) const ADDR_NEWTYPE: &str = "$postmortem::report::Addr";

impl Serialize for Addr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// The spelling, made only when a serializer asks for it.
        struct Spelled(u64);
        impl Serialize for Spelled {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(Hex::new(self.0, 1).as_str())
            }
        }
        s.serialize_newtype_struct(ADDR_NEWTYPE, &Spelled(self.0))
    }
}

/// A word spelled `0x` and lower-case hex digits, at least `min_digits` of them (padded
/// with zeros), in a buffer on the stack: what the report's and minidump-stackwalk's
/// addresses are serialized from. A report has a word per frame and register, and
/// spelling each through `core::fmt` was a fifth of a deep report's serialization.
#[derive(Clone, Copy)]
pub(crate) struct Hex {
    buf: [u8; 2 + 16],
    start: usize,
}

impl Hex {
    /// `v`'s spelling; `min_digits` above 16 is taken as 16 (a word has 16 digits).
    pub(crate) fn new(v: u64, min_digits: usize) -> Hex {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let needed = (64 - v.leading_zeros() as usize).div_ceil(4).max(1);
        let n = needed.max(min_digits).min(16);
        // all sixteen digits (a loop of fixed count, unrolled), then `0x` over the
        // leading zeros not shown
        let mut buf = [b'0'; 18];
        for (i, b) in buf[2..].iter_mut().enumerate() {
            *b = DIGITS[((v >> (60 - 4 * i)) & 0xf) as usize];
        }
        let start = 16 - n;
        buf[start + 1] = b'x';
        buf[start] = b'0';
        Hex { buf, start }
    }

    /// The spelling's bytes (ASCII).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.buf.get(self.start..).unwrap_or_default()
    }

    /// The spelling.
    pub(crate) fn as_str(&self) -> &str {
        // only ASCII digits and `x` are ever written
        std::str::from_utf8(self.buf.get(self.start..).unwrap_or_default()).unwrap_or_default()
    }
}

impl<'de> Deserialize<'de> for Addr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Addr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an address as `0x` and hex digits")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Addr, E> {
                Addr::parse(v).ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(v), &self))
            }
        }
        d.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::Addr;

    #[test]
    fn writes_and_reads_the_schema_spelling() {
        for (v, s) in [(0, "0x0"), (0x1a, "0x1a"), (u64::MAX, "0xffffffffffffffff")] {
            assert_eq!(
                serde_json::to_string(&Addr(v)).ok(),
                Some(format!("\"{s}\""))
            );
            assert_eq!(Addr(v).to_string(), s);
            assert_eq!(
                serde_json::from_str::<Addr>(&format!("\"{s}\"")).ok(),
                Some(Addr(v))
            );
        }
        assert_eq!(format!("[{:>6}]", Addr(0x1a)), "[  0x1a]");
    }

    #[test]
    fn hex_spells_as_core_fmt() {
        let mut values = vec![
            0,
            1,
            0xf,
            0x10,
            0xff,
            0x1000,
            u64::MAX,
            u64::MAX >> 4,
            1 << 63,
        ];
        values.extend((0..64).map(|s| 1u64 << s));
        values.extend((0..64).map(|s| (1u64 << s) - 1));
        values.extend((0..200u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        for v in values {
            for w in [0, 1, 8, 16, 17, 40] {
                let expected = format!("0x{v:0w$x}", w = w.min(16));
                assert_eq!(super::Hex::new(v, w).as_str(), expected, "{v:#x} width {w}");
            }
            assert_eq!(super::Hex::new(v, 1).as_str(), format!("{v:#x}"));
        }
    }

    #[test]
    fn refuses_what_is_not_an_address() {
        for bad in [
            "",
            "0x",
            "1a",
            "0x+1",
            "0x-1",
            "0xg",
            " 0x1",
            "0x10000000000000000",
        ] {
            assert_eq!(Addr::parse(bad), None, "{bad:?}");
            assert!(
                serde_json::from_str::<Addr>(&format!("{bad:?}")).is_err(),
                "{bad:?}"
            );
        }
        assert!(serde_json::from_str::<Addr>("26").is_err());
        assert_eq!(Addr::parse("0x00Ab"), Some(Addr(0xab)));
    }
}
