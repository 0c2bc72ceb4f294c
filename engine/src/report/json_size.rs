//! The length of a value's compact JSON text (`serde_json::to_writer`), without writing
//! it: exactly ([`exact`], serde_json writing into a counter) or as an upper bound
//! ([`at_most`], a serializer that adds up lengths).
//!
//! The report budget ([`super::budget::fit`]) must know whether a report's JSON passes
//! its bound before it is written. Counting it exactly costs what writing it costs
//! (every string byte looked up in serde_json's escape table, every address spelled);
//! for a deep report that was a third of a one-shot walk. A report far under its bound
//! does not need the exact figure: [`at_most`] counts a string's bytes with a scan the
//! compiler vectorizes, takes every number at its widest spelling, and never formats
//! anything, so when it is under the bound the exact count is too.

use std::fmt;
use std::io;

use serde::ser::{self, Serialize};

/// The length of `v`'s compact JSON text, counted by writing it into a counter.
pub(crate) fn exact<T: Serialize + ?Sized>(v: &T) -> usize {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing to a counter cannot fail, and the model serializes infallibly.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// At least the length of `v`'s compact JSON text ([`exact`]'s figure), counted without
/// writing or formatting anything; `usize::MAX` if `v` fails to serialize.
pub(crate) fn at_most<T: Serialize + ?Sized>(v: &T) -> usize {
    bound(v, true)
}

/// At least [`at_most`]'s figure, counted without reading any string: each taken at six
/// bytes a byte (`\u001f`), its widest escaping. Looser, and cheaper by the scans of tens
/// of thousands of short strings and keys: for a report far under its budget (the
/// default budget is many times a deep report's length) this is all the budget needs.
pub(crate) fn at_most_unread<T: Serialize + ?Sized>(v: &T) -> usize {
    bound(v, false)
}

fn bound<T: Serialize + ?Sized>(v: &T, read: bool) -> usize {
    let mut bound = Bound { n: 0, read };
    match v.serialize(&mut bound) {
        Ok(()) => bound.n,
        Err(Unbounded) => usize::MAX,
    }
}

/// The widest spelling of an integer of up to 64 bits (`-9223372036854775808`,
/// `18446744073709551615`), and of 128 bits.
const INT: usize = 20;
const INT128: usize = 40;
/// The widest float serde_json writes (ryu's shortest form, or `null`).
const FLOAT: usize = 32;
/// `null`.
const NULL: usize = 4;
/// The widest report address, quoted: `"0xffffffffffffffff"`.
const ADDR: usize = 2 + 2 + 16;

/// The running bound, and whether strings are read for escapes or taken at their widest.
struct Bound {
    n: usize,
    read: bool,
}

/// A value that does not serialize (never, for the report's model).
#[derive(Debug)]
struct Unbounded;

impl fmt::Display for Unbounded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the value does not serialize")
    }
}

impl std::error::Error for Unbounded {}

impl ser::Error for Unbounded {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Unbounded
    }
}

/// A string's JSON length at most, quotes included: serde_json writes a control
/// character, `"` or `\\` as at most six bytes (`\\u001f`), every other byte as itself.
fn string(s: &str) -> usize {
    s.len() + 5 * super::json_text::escapes_at_most(s.as_bytes()) + 2
}

impl Bound {
    fn add(&mut self, n: usize) -> Result<(), Unbounded> {
        self.n = self.n.saturating_add(n);
        Ok(())
    }

    /// A string's JSON length at most, quotes included.
    fn string(&self, s: &str) -> usize {
        if self.read {
            string(s)
        } else {
            s.len().saturating_mul(6).saturating_add(2)
        }
    }
}

/// `Ok(())` after adding `n`, for the scalar methods.
macro_rules! scalar {
    ($($method:ident($t:ty) => $n:expr;)*) => {
        $(fn $method(self, _v: $t) -> Result<(), Unbounded> {
            self.add($n)
        })*
    };
}

impl ser::Serializer for &mut Bound {
    type Ok = ();
    type Error = Unbounded;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    scalar! {
        serialize_bool(bool) => 5;
        serialize_i8(i8) => INT;
        serialize_i16(i16) => INT;
        serialize_i32(i32) => INT;
        serialize_i64(i64) => INT;
        serialize_i128(i128) => INT128;
        serialize_u8(u8) => INT;
        serialize_u16(u16) => INT;
        serialize_u32(u32) => INT;
        serialize_u64(u64) => INT;
        serialize_u128(u128) => INT128;
        serialize_f32(f32) => FLOAT;
        serialize_f64(f64) => FLOAT;
        serialize_char(char) => 8;
        serialize_unit_struct(&'static str) => NULL;
    }

    fn serialize_str(self, v: &str) -> Result<(), Unbounded> {
        self.add(self.string(v))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Unbounded> {
        // an array of numbers: `255,` each
        self.add(2 + 4 * v.len())
    }
    fn serialize_none(self) -> Result<(), Unbounded> {
        self.add(NULL)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Unbounded> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Unbounded> {
        self.add(NULL)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Unbounded> {
        self.add(self.string(variant))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        v: &T,
    ) -> Result<(), Unbounded> {
        if name == super::addr::ADDR_NEWTYPE {
            // a report address: at widest `"0x` and 16 digits`"`, not spelled to count
            return self.add(ADDR);
        }
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), Unbounded> {
        // `{"variant":v}`
        self.add(self.string(variant) + 3)?;
        v.serialize(self)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self, Unbounded> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self, Unbounded> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Self, Unbounded> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self, Unbounded> {
        // `{"variant":[…]}`
        self.add(self.string(variant) + 5)?;
        Ok(self)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self, Unbounded> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self, Unbounded> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self, Unbounded> {
        // `{"variant":{…}}`
        self.add(self.string(variant) + 5)?;
        Ok(self)
    }
    fn collect_str<T: fmt::Display + ?Sized>(self, v: &T) -> Result<(), Unbounded> {
        // counted as it is formatted, without the string serde's default would build
        struct Count(usize);
        impl fmt::Write for Count {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                self.0 = self.0.saturating_add(string(s));
                Ok(())
            }
        }
        let mut c = Count(0);
        fmt::write(&mut c, format_args!("{v}")).map_err(|_| Unbounded)?;
        self.add(c.0)
    }
}

/// The sequence traits: each element's value and a comma.
macro_rules! elements {
    ($($name:ident :: $method:ident;)*) => {$(
        impl ser::$name for &mut Bound {
            type Ok = ();
            type Error = Unbounded;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Unbounded> {
                self.add(1)?;
                v.serialize(&mut **self)
            }
            fn end(self) -> Result<(), Unbounded> {
                Ok(())
            }
        }
    )*};
}

elements! {
    SerializeSeq::serialize_element;
    SerializeTuple::serialize_element;
    SerializeTupleStruct::serialize_field;
    SerializeTupleVariant::serialize_field;
}

impl ser::SerializeMap for &mut Bound {
    type Ok = ();
    type Error = Unbounded;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), Unbounded> {
        // `,` and `:`, and two quotes for a key serde_json quotes (a number, a bool)
        self.add(4)?;
        k.serialize(&mut **self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Unbounded> {
        v.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Unbounded> {
        Ok(())
    }
}

/// The struct traits: each field's `,"key":` and value.
macro_rules! fields {
    ($($name:ident;)*) => {$(
        impl ser::$name for &mut Bound {
            type Ok = ();
            type Error = Unbounded;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                v: &T,
            ) -> Result<(), Unbounded> {
                self.add(self.string(key) + 2)?;
                v.serialize(&mut **self)
            }
            fn end(self) -> Result<(), Unbounded> {
                Ok(())
            }
        }
    )*};
}

fields! {
    SerializeStruct;
    SerializeStructVariant;
}

#[cfg(test)]
mod tests {
    use super::{at_most, at_most_unread, exact};

    use crate::report::json_text::tests::sample;

    #[test]
    fn the_bound_is_never_under_the_exact_length() {
        for text in [
            "",
            "plain ascii",
            "\"quotes\" and \\backslashes\\",
            "\u{0}\u{1}\u{1f}\n\t\r control",
            "ünïcödé ✓ 𝄞",
            &"\u{7}".repeat(1000),
            &"x".repeat(1000),
        ] {
            let v = sample(text);
            let (bound, len) = (at_most(&v), exact(&v));
            assert!(bound >= len, "{text:?}: bound {bound} < exact {len}");
            let unread = at_most_unread(&v);
            assert!(unread >= bound, "{text:?}: unread {unread} < bound {bound}");
            // and a bound, not a guess: within the widest spellings of what it holds
            // (its numbers; a word with an escape counted as eight, in each of the
            // text's seven places)
            assert!(
                bound <= len + 1000 + 7 * 40 * text.len(),
                "{text:?}: {bound} vs {len}"
            );
        }
    }

    #[test]
    fn every_ascii_byte_at_every_place_of_a_word_is_bounded() {
        for b in 0..128u8 {
            for at in 0..17 {
                let mut s = vec![b'a'; 17];
                s[at] = b;
                let s = String::from_utf8(s).unwrap_or_default();
                assert!(super::string(&s) >= exact(&s), "{b:#x} at {at}");
            }
        }
        // no escape, no slack
        assert_eq!(
            super::string("abcdefgh-ijklmnop"),
            exact("abcdefgh-ijklmnop")
        );
    }

    #[test]
    fn an_address_is_bounded_by_its_widest_spelling_without_being_spelled() {
        use crate::report::Addr;
        // the widest is exact (as serde_json writes it), the others under it
        assert_eq!(at_most(&Addr(u64::MAX)), exact(&Addr(u64::MAX)));
        for v in [0, 1, 0x7f3a1c, u64::MAX >> 4] {
            assert_eq!(at_most(&Addr(v)), 20);
            assert!(exact(&Addr(v)) <= 20);
        }
        // as a map value and a key too (the map's own slack: a comma counted with its
        // first entry, and quotes for a key that might be a number)
        let m: std::collections::BTreeMap<Addr, Addr> = [(Addr(u64::MAX), Addr(u64::MAX))].into();
        let (bound, len) = (at_most(&m), exact(&m));
        assert!(bound >= len && bound <= len + 3, "{bound} vs {len}");
    }

    #[test]
    fn a_report_is_bounded_close_to_its_length() {
        let v: Vec<String> = (0..1000)
            .map(|i| format!("frame {i} of a deep thread"))
            .collect();
        let (bound, len) = (at_most(&v), exact(&v));
        // the one over: a comma counted with the first element
        assert!(bound >= len && bound <= len + 1, "{bound} vs {len}");
    }
}
