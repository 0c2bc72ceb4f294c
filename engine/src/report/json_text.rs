//! JSON text written as `serde_json::to_writer` and `to_writer_pretty` write it, byte
//! for byte, but faster on what reports are made of: many short strings and keys.
//!
//! serde_json reads every byte of every string and key through its escape table and
//! hands each piece to the writer separately; a deep thread's report is tens of
//! thousands of short strings, and that was half of writing it. Here a string is
//! checked a word (8 bytes) at a time for the bytes JSON escapes, and written in one
//! piece when it has none (nearly always); everything else is written as serde_json
//! writes it (its escapes, its integer spellings, its floats — delegated to it —, its
//! pretty layout: two spaces, `": "`, `[]` and `{}` for empty ones). The tests compare
//! the two on the fixture reports and on values of every shape serde has. A value may
//! also be JSON text written by hand ([`Raw`]), written as it is.

use std::fmt;
use std::io::{self, Write};

use serde::ser::{self, Serialize};

/// Writes `v` as `serde_json::to_writer` (compact) or `to_writer_pretty` would.
pub fn write<W: Write, T: Serialize + ?Sized>(out: W, v: &T, pretty: bool) -> io::Result<()> {
    let mut s = Json {
        out,
        pretty,
        indent: 0,
        has_value: false,
        raw: false,
    };
    v.serialize(&mut s).map_err(|Error(e)| e)
}

/// The writer and serde_json's pretty formatter's state.
struct Json<W> {
    out: W,
    pretty: bool,
    indent: usize,
    has_value: bool,
    /// The next bytes are a [`Raw`] piece of JSON text: written as they are.
    raw: bool,
}

/// JSON text made elsewhere (a value written by hand, compact), written by [`write`] as it
/// is where a value is expected: for the few hot objects of a report whose fields cost
/// more through serde's per-field calls than the rest of the writing. Only for this
/// writer's compact output: it is not re-indented, and any other serializer writes it as
/// a byte array.
pub(crate) struct Raw<'a>(pub(crate) &'a [u8]);

/// The newtype name [`Raw`] is marked with (as serde_json's `RawValue` is).
const RAW: &str = "$postmortem::json_text::Raw";

impl Serialize for Raw<'_> {
    fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Bytes<'a>(&'a [u8]);
        impl Serialize for Bytes<'_> {
            fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(self.0)
            }
        }
        s.serialize_newtype_struct(RAW, &Bytes(self.0))
    }
}

/// `s` as a JSON string, quoted and escaped as serde_json escapes it.
pub(crate) fn write_string<W: Write>(out: &mut W, s: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    write_fragment(out, s)?;
    out.write_all(b"\"")
}

/// The contents of a string, escaped (no quotes).
fn write_fragment<W: Write>(out: &mut W, s: &str) -> io::Result<()> {
    let bytes = s.as_bytes();
    if escapes_at_most(bytes) == 0 {
        return out.write_all(bytes);
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if let Some(e) = escape(b) {
            out.write_all(bytes.get(start..i).unwrap_or_default())?;
            out.write_all(e)?;
            start = i + 1;
        }
    }
    out.write_all(bytes.get(start..).unwrap_or_default())
}

/// `v` in decimal, as serde_json spells it.
pub(crate) fn write_u64<W: Write>(out: &mut W, v: u64) -> io::Result<()> {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut rest = v;
    loop {
        i -= 1;
        if let Some(d) = buf.get_mut(i) {
            *d = b'0' + (rest % 10) as u8;
        }
        rest /= 10;
        if rest == 0 || i == 0 {
            break;
        }
    }
    out.write_all(buf.get(i..).unwrap_or_default())
}

/// An I/O error, or a value serde_json would refuse (a map key that is no string).
#[derive(Debug)]
pub struct Error(io::Error);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(io::Error::other(msg.to_string()))
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error(e)
    }
}

type R = Result<(), Error>;

/// At least the number of `bytes` JSON escapes (control characters, `"`, `\\`), and 0
/// exactly when there is none: read a word (8 bytes) at a time, a word holding any of
/// them counts as eight, which costs a few operations a word; the last word overlaps
/// the one before it, and a string under 8 bytes is read as one word.
pub(crate) fn escapes_at_most(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // the high bit of each byte of `w` below `n` (n <= 128), and maybe of the bytes
    // after such a byte (a borrow): nonzero exactly when some byte is below `n`
    let below = |w: u64, n: u64| w.wrapping_sub(ONES * n) & !w & HIGH;
    // 8 for a word holding an escaped byte, else 0: one mask, no branch (the three tests
    // as `||` were a branch each, and most of the time spent on a report's strings)
    let flagged = |w: u64| {
        let any = below(w, 0x20)
            | below(w ^ (ONES * u64::from(b'"')), 1)
            | below(w ^ (ONES * u64::from(b'\\')), 1);
        usize::from(any != 0) * 8
    };
    let load = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    let n = bytes.len();
    if n < 8 {
        return flagged(short_word(bytes));
    }
    let mut words = bytes.chunks_exact(8);
    let mut escaped = 0usize;
    for word in &mut words {
        escaped += flagged(load(word));
    }
    if !words.remainder().is_empty() {
        escaped += flagged(load(&bytes[n - 8..]));
    }
    escaped
}

/// Fewer than 8 bytes as one word: the bytes (some read twice) and `A`s, which JSON
/// does not escape, for the rest.
fn short_word(b: &[u8]) -> u64 {
    const FILL: u64 = 0x4141_4141_4141_4141;
    let n = b.len();
    match n {
        0 => FILL,
        1..=3 => {
            let (first, middle, last) = (b[0], b[n / 2], b[n - 1]);
            (FILL & !0xff_ffff)
                | u64::from(first)
                | (u64::from(middle) << 8)
                | (u64::from(last) << 16)
        }
        _ => {
            let half = |b: &[u8]| u64::from(u32::from_le_bytes(b.try_into().unwrap_or_default()));
            half(&b[..4]) | (half(&b[n - 4..]) << 32)
        }
    }
}

/// A byte's escape as serde_json writes it, if it has one.
fn escape(b: u8) -> Option<&'static [u8]> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    static CONTROL: [[u8; 6]; 32] = {
        let mut t = [[0u8; 6]; 32];
        let mut i = 0;
        while i < 32 {
            t[i] = [b'\\', b'u', b'0', b'0', HEX[i >> 4], HEX[i & 0xf]];
            i += 1;
        }
        t
    };
    Some(match b {
        b'"' => b"\\\"",
        b'\\' => b"\\\\",
        0x08 => b"\\b",
        0x0c => b"\\f",
        b'\n' => b"\\n",
        b'\r' => b"\\r",
        b'\t' => b"\\t",
        0..=0x1f => CONTROL.get(usize::from(b))?,
        _ => return None,
    })
}

impl<W: Write> Json<W> {
    /// The contents of a string, escaped (no quotes).
    fn fragment(&mut self, s: &str) -> io::Result<()> {
        write_fragment(&mut self.out, s)
    }

    fn string(&mut self, s: &str) -> R {
        write_string(&mut self.out, s)?;
        Ok(())
    }

    fn newline_indent(&mut self) -> io::Result<()> {
        self.out.write_all(b"\n")?;
        for _ in 0..self.indent {
            self.out.write_all(b"  ")?;
        }
        Ok(())
    }

    /// `[` or `{`.
    fn open(&mut self, bracket: &[u8]) -> R {
        self.indent += 1;
        self.has_value = false;
        self.out.write_all(bracket)?;
        Ok(())
    }

    /// `]` or `}`.
    fn close(&mut self, bracket: &[u8]) -> R {
        self.indent = self.indent.saturating_sub(1);
        if self.pretty && self.has_value {
            self.newline_indent()?;
        }
        self.out.write_all(bracket)?;
        Ok(())
    }

    /// Before an element or a key: the comma and, pretty, the line.
    fn item(&mut self, first: bool) -> R {
        if !first {
            self.out.write_all(b",")?;
        }
        if self.pretty {
            self.newline_indent()?;
        }
        Ok(())
    }

    /// Between a key and its value.
    fn colon(&mut self) -> R {
        self.out.write_all(if self.pretty { b": " } else { b":" })?;
        Ok(())
    }

    /// A number (or a float's `null`) as serde_json spells it.
    fn delegated<T: Serialize>(&mut self, v: T) -> R {
        serde_json::to_writer(&mut self.out, &v).map_err(|e| Error(io::Error::other(e)))
    }

    /// `{"variant":` before a variant's value.
    fn variant(&mut self, variant: &str) -> R {
        self.open(b"{")?;
        self.item(true)?;
        self.string(variant)?;
        self.colon()
    }

    /// The `}` after a variant's value.
    fn end_variant(&mut self) -> R {
        self.has_value = true;
        self.close(b"}")
    }
}

/// A sequence or map being written: whether its next item is its first.
pub struct Compound<'a, W> {
    json: &'a mut Json<W>,
    first: bool,
    /// Closing a variant's object after the compound's own bracket.
    variant: bool,
}

impl<'a, W: Write> Compound<'a, W> {
    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        self.json.item(self.first)?;
        self.first = false;
        v.serialize(&mut *self.json)?;
        self.json.has_value = true;
        Ok(())
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, v: &T) -> R {
        self.json.item(self.first)?;
        self.first = false;
        self.json.string(key)?;
        self.json.colon()?;
        v.serialize(&mut *self.json)?;
        self.json.has_value = true;
        Ok(())
    }

    fn end(self, bracket: &[u8]) -> R {
        self.json.close(bracket)?;
        if self.variant {
            self.json.end_variant()?;
        }
        Ok(())
    }
}

impl<'a, W: Write> ser::Serializer for &'a mut Json<W> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, W>;
    type SerializeTuple = Compound<'a, W>;
    type SerializeTupleStruct = Compound<'a, W>;
    type SerializeTupleVariant = Compound<'a, W>;
    type SerializeMap = Compound<'a, W>;
    type SerializeStruct = Compound<'a, W>;
    type SerializeStructVariant = Compound<'a, W>;

    fn serialize_bool(self, v: bool) -> R {
        self.out.write_all(if v { b"true" } else { b"false" })?;
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> R {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> R {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> R {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> R {
        if v < 0 {
            self.out.write_all(b"-")?;
        }
        self.serialize_u64(v.unsigned_abs())
    }
    fn serialize_i128(self, v: i128) -> R {
        self.delegated(v)
    }
    fn serialize_u8(self, v: u8) -> R {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> R {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> R {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> R {
        write_u64(&mut self.out, v)?;
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> R {
        self.delegated(v)
    }
    fn serialize_f32(self, v: f32) -> R {
        self.delegated(v)
    }
    fn serialize_f64(self, v: f64) -> R {
        self.delegated(v)
    }
    fn serialize_char(self, v: char) -> R {
        self.string(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_str(self, v: &str) -> R {
        self.string(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> R {
        use ser::SerializeSeq;
        if std::mem::take(&mut self.raw) {
            self.out.write_all(v)?;
            return Ok(());
        }
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(b)?;
        }
        SerializeSeq::end(seq)
    }
    fn serialize_none(self) -> R {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> R {
        v.serialize(self)
    }
    fn serialize_unit(self) -> R {
        self.out.write_all(b"null")?;
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> R {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _name: &'static str, _i: u32, variant: &'static str) -> R {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, v: &T) -> R {
        // a `Raw`'s text is its bytes, written as they are
        self.raw = name == RAW;
        let written = v.serialize(&mut *self);
        self.raw = false;
        written
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _i: u32,
        variant: &'static str,
        v: &T,
    ) -> R {
        self.variant(variant)?;
        v.serialize(&mut *self)?;
        self.end_variant()
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a, W>, Error> {
        self.open(b"[")?;
        Ok(Compound {
            json: self,
            first: true,
            variant: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, W>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, W>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _i: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, W>, Error> {
        self.variant(variant)?;
        let mut c = self.serialize_seq(Some(len))?;
        c.variant = true;
        Ok(c)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a, W>, Error> {
        self.open(b"{")?;
        Ok(Compound {
            json: self,
            first: true,
            variant: false,
        })
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Compound<'a, W>, Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _i: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, W>, Error> {
        self.variant(variant)?;
        let mut c = self.serialize_map(Some(len))?;
        c.variant = true;
        Ok(c)
    }
    fn collect_str<T: fmt::Display + ?Sized>(self, v: &T) -> R {
        struct Escaped<'j, W> {
            json: &'j mut Json<W>,
            error: Option<io::Error>,
        }
        impl<W: Write> fmt::Write for Escaped<'_, W> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                self.json.fragment(s).map_err(|e| {
                    self.error = Some(e);
                    fmt::Error
                })
            }
        }
        self.out.write_all(b"\"")?;
        let mut e = Escaped {
            json: &mut *self,
            error: None,
        };
        if fmt::write(&mut e, format_args!("{v}")).is_err() {
            return Err(Error(
                e.error.unwrap_or_else(|| io::Error::other(fmt::Error)),
            ));
        }
        self.out.write_all(b"\"")?;
        Ok(())
    }
}

/// The sequence traits: each element after a comma, then the closing bracket.
macro_rules! elements {
    ($($name:ident :: $method:ident;)*) => {$(
        impl<W: Write> ser::$name for Compound<'_, W> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
                self.element(v)
            }
            fn end(self) -> R {
                Compound::end(self, b"]")
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

impl<W: Write> ser::SerializeMap for Compound<'_, W> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> R {
        self.json.item(self.first)?;
        self.first = false;
        k.serialize(MapKey(&mut *self.json))?;
        self.json.colon()
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        v.serialize(&mut *self.json)?;
        self.json.has_value = true;
        Ok(())
    }
    fn end(self) -> R {
        Compound::end(self, b"}")
    }
}

/// The struct traits: each field's key and value.
macro_rules! fields {
    ($($name:ident;)*) => {$(
        impl<W: Write> ser::$name for Compound<'_, W> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> R {
                self.field(key, v)
            }
            fn end(self) -> R {
                Compound::end(self, b"}")
            }
        }
    )*};
}

fields! {
    SerializeStruct;
    SerializeStructVariant;
}

/// A map's key: a string, or a number or bool written as one (serde_json's rule);
/// anything else is refused as serde_json refuses it.
struct MapKey<'a, W>(&'a mut Json<W>);

fn key_must_be_a_string() -> Error {
    Error(io::Error::other("key must be a string"))
}

impl<W: Write> MapKey<'_, W> {
    fn quoted(self, digits: impl FnOnce(&mut Json<W>) -> R) -> R {
        self.0.out.write_all(b"\"")?;
        digits(&mut *self.0)?;
        self.0.out.write_all(b"\"")?;
        Ok(())
    }
}

impl<W: Write> ser::Serializer for MapKey<'_, W> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = ser::Impossible<(), Error>;
    type SerializeTuple = ser::Impossible<(), Error>;
    type SerializeTupleStruct = ser::Impossible<(), Error>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = ser::Impossible<(), Error>;
    type SerializeStruct = ser::Impossible<(), Error>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> R {
        self.0.string(v)
    }
    fn serialize_char(self, v: char) -> R {
        self.0.string(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_unit_variant(self, _n: &'static str, _i: u32, variant: &'static str) -> R {
        self.0.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _n: &'static str, v: &T) -> R {
        v.serialize(self)
    }
    fn collect_str<T: fmt::Display + ?Sized>(self, v: &T) -> R {
        ser::Serializer::collect_str(self.0, v)
    }
    fn serialize_i8(self, v: i8) -> R {
        self.quoted(|j| ser::Serializer::serialize_i64(j, i64::from(v)))
    }
    fn serialize_i16(self, v: i16) -> R {
        self.quoted(|j| ser::Serializer::serialize_i64(j, i64::from(v)))
    }
    fn serialize_i32(self, v: i32) -> R {
        self.quoted(|j| ser::Serializer::serialize_i64(j, i64::from(v)))
    }
    fn serialize_i64(self, v: i64) -> R {
        self.quoted(|j| ser::Serializer::serialize_i64(j, v))
    }
    fn serialize_u8(self, v: u8) -> R {
        self.quoted(|j| ser::Serializer::serialize_u64(j, u64::from(v)))
    }
    fn serialize_u16(self, v: u16) -> R {
        self.quoted(|j| ser::Serializer::serialize_u64(j, u64::from(v)))
    }
    fn serialize_u32(self, v: u32) -> R {
        self.quoted(|j| ser::Serializer::serialize_u64(j, u64::from(v)))
    }
    fn serialize_u64(self, v: u64) -> R {
        self.quoted(|j| ser::Serializer::serialize_u64(j, v))
    }
    fn serialize_i128(self, v: i128) -> R {
        self.quoted(|j| j.delegated(v))
    }
    fn serialize_u128(self, v: u128) -> R {
        self.quoted(|j| j.delegated(v))
    }
    fn serialize_bool(self, v: bool) -> R {
        self.quoted(|j| ser::Serializer::serialize_bool(j, v))
    }
    fn serialize_f32(self, v: f32) -> R {
        if !v.is_finite() {
            return Err(Error(io::Error::other("float key must be finite")));
        }
        self.quoted(|j| j.delegated(v))
    }
    fn serialize_f64(self, v: f64) -> R {
        if !v.is_finite() {
            return Err(Error(io::Error::other("float key must be finite")));
        }
        self.quoted(|j| j.delegated(v))
    }
    fn serialize_bytes(self, _v: &[u8]) -> R {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> R {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _v: &T) -> R {
        Err(key_must_be_a_string())
    }
    fn serialize_unit(self) -> R {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _n: &'static str) -> R {
        Err(key_must_be_a_string())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _n: &'static str,
        _i: u32,
        _variant: &'static str,
        _v: &T,
    ) -> R {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(
        self,
        _n: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _n: &'static str,
        _i: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(
        self,
        _n: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _n: &'static str,
        _i: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use serde::Serialize;

    #[derive(Serialize)]
    enum Kind {
        Unit,
        Newtype(u64),
        Tuple(i8, f64),
        Struct { a: Option<String>, b: char },
        EmptyTuple(),
        EmptyStruct {},
    }

    #[derive(Serialize)]
    struct Unit;

    #[derive(Serialize)]
    struct Wrapper(String);

    /// A value of every shape serde has (`json_size`'s tests bound it too).
    #[derive(Serialize)]
    pub(crate) struct Sample {
        text: String,
        numbers: Vec<i64>,
        small: (i8, i16, i32, u8, u16, u32),
        floats: (f32, f64, f64, f64, f32),
        map: BTreeMap<u32, String>,
        signed_keys: BTreeMap<i64, bool>,
        bool_keys: BTreeMap<bool, u8>,
        wide_keys: BTreeMap<u128, u8>,
        flags: BTreeMap<String, bool>,
        kinds: Vec<Kind>,
        empty_seq: Vec<u8>,
        empty_map: BTreeMap<String, u8>,
        nested_empty: Vec<Vec<Vec<u8>>>,
        bytes: &'static [u8],
        unit: (),
        unit_struct: Unit,
        wrapper: Wrapper,
        nothing: Option<u8>,
        wide: (u128, i128),
        address: crate::report::Addr,
        value: serde_json::Value,
        #[serde(flatten)]
        rest: BTreeMap<String, crate::report::Addr>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
    }

    pub(crate) fn sample(text: &str) -> Sample {
        Sample {
            text: text.to_owned(),
            numbers: vec![0, -1, i64::MIN, i64::MAX, 7, 10, 99, 100],
            small: (i8::MIN, -300, i32::MIN, u8::MAX, 1000, u32::MAX),
            floats: (f32::MIN_POSITIVE, -1.0e300, f64::NAN, 0.1, f32::INFINITY),
            map: [(u32::MAX, text.to_owned()), (0, String::new())].into(),
            signed_keys: [(-5, true), (i64::MAX, false)].into(),
            bool_keys: [(true, 1), (false, 0)].into(),
            wide_keys: [(u128::MAX, 1)].into(),
            flags: [(text.to_owned(), true), ("b".into(), false)].into(),
            kinds: vec![
                Kind::Unit,
                Kind::Newtype(u64::MAX),
                Kind::Tuple(-128, 0.1),
                Kind::Struct {
                    a: Some(text.to_owned()),
                    b: '\u{1}',
                },
                Kind::Struct { a: None, b: '"' },
                Kind::EmptyTuple(),
                Kind::EmptyStruct {},
            ],
            empty_seq: Vec::new(),
            empty_map: BTreeMap::new(),
            nested_empty: vec![vec![], vec![vec![]], vec![vec![1]]],
            bytes: &[0, 255, 17],
            unit: (),
            unit_struct: Unit,
            wrapper: Wrapper(text.to_owned()),
            nothing: None,
            wide: (u128::MAX, i128::MIN),
            address: crate::report::Addr(0xdead_beef),
            value: serde_json::json!({"a": [1, -2, 3.5, null, {"b": text}], "c": {}, "d": []}),
            rest: [(text.to_owned(), crate::report::Addr(u64::MAX))].into(),
            skipped: None,
        }
    }

    fn texts() -> Vec<String> {
        let mut t: Vec<String> = [
            "",
            "plain ascii",
            "\"quotes\" and \\backslashes\\",
            "\u{0}\u{1}\u{1f}\n\t\r\u{8}\u{c}\u{7f} control",
            "ünïcödé ✓ 𝄞",
            "exactly8",
            "sixteen-bytes-ok",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        t.extend((0..128u8).map(|b| format!("abcdefg{}hij", b as char)));
        t.push("\u{7}".repeat(100));
        t.push("x".repeat(1000));
        t
    }

    fn ours(v: &impl Serialize, pretty: bool) -> String {
        let mut out = Vec::new();
        super::write(&mut out, v, pretty).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn writes_what_serde_json_writes() {
        for text in texts() {
            let v = sample(&text);
            assert_eq!(
                ours(&v, false),
                serde_json::to_string(&v).unwrap(),
                "{text:?}"
            );
            assert_eq!(
                ours(&v, true),
                serde_json::to_string_pretty(&v).unwrap(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_string_has_no_escape_only_when_none_is_counted() {
        for len in 0..20 {
            let clean = "a".repeat(len);
            assert_eq!(super::escapes_at_most(clean.as_bytes()), 0, "{len}");
            for at in 0..len {
                for b in (0..0x20u8).chain([b'"', b'\\']) {
                    let mut s = clean.clone().into_bytes();
                    s[at] = b;
                    assert!(super::escapes_at_most(&s) >= 1, "{len} {at} {b:#x}");
                }
            }
        }
    }

    #[test]
    fn refuses_the_keys_serde_json_refuses() {
        let v: BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into();
        assert!(serde_json::to_string(&v).is_err());
        assert!(super::write(&mut Vec::new(), &v, false).is_err());
    }

    #[test]
    fn a_writer_error_is_returned() {
        struct Full;
        impl std::io::Write for Full {
            fn write(&mut self, _buf: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let err = super::write(Full, &sample("x"), true).unwrap_err();
        assert_eq!(err.to_string(), "disk full");
    }
}
