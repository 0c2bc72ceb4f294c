//! The type an MSVC C++ exception threw, read from its `ThrowInfo`: what a person wants
//! to know of "an unhandled C++ exception (0xE06D7363)" is which exception.
//!
//! MSVC's `throw` calls `_CxxThrowException`, which raises 0xE06D7363 with four
//! parameters on x64: a magic number (`0x19930520`, or `…21`/`…22` for newer
//! compilers), the thrown object, its `ThrowInfo` and the throwing module's image base.
//! The `ThrowInfo` (in that module's read-only data) points, by offsets relative to the
//! image base (RVAs), to a `CatchableTypeArray` listing every type a handler could catch
//! the object as, the thrown type first; each `CatchableType` points to a
//! `TypeDescriptor`, the `type_info` whose name is the type's decoration
//! (`.?AVruntime_error@std@@`). The layouts are those of the MSVC runtime's `ehdata.h`.
//!
//! Every read goes through a caller's reader (the dump's memory, else the module's file),
//! bounded; bytes that do not describe a throw are a [`ThrowError`], never a panic.

use std::fmt;

/// The magic numbers of `_CxxThrowException` (`EH_MAGIC_NUMBER1`, and those of compilers
/// since Visual C++ 2005 and of `noexcept` functions).
const MAGIC: [u64; 3] = [0x1993_0520, 0x1993_0521, 0x1993_0522];
/// Most catchable types read: a class and its bases (real hierarchies have a handful).
const MAX_CATCHABLE: i32 = 64;
/// Longest decorated type name read.
const MAX_NAME: usize = 1024;
/// Offset of `pCatchableTypeArray` in `ThrowInfo` (after `attributes`, `pmfnUnwind`,
/// `pForwardCompat`).
const CATCHABLE_ARRAY_FIELD: u64 = 12;
/// Offset of `pType` in `CatchableType` (after `properties`).
const TYPE_FIELD: u64 = 4;
/// Offset of `name` in `TypeDescriptor` (after `pVFTable` and `spare`, 8 bytes each on
/// x64).
const NAME_FIELD: u64 = 16;

/// What an MSVC C++ exception's parameters say of the throw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Throw {
    /// The thrown object's address.
    pub object: u64,
    /// The decorated names of the types a handler could catch it as, the thrown type
    /// first (`.?AVruntime_error@std@@`, `.?AVexception@std@@`).
    pub catchable: Vec<String>,
}

/// Why the thrown type could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ThrowError {
    /// Fewer than the four parameters of an x64 throw.
    Parameters(usize),
    /// The first parameter is not `_CxxThrowException`'s magic number.
    Magic(u64),
    /// No `ThrowInfo` (a rethrow with no exception in flight raises it null).
    NoThrowInfo,
    /// What the named structure's address points to is in neither the dump's memory nor
    /// a module file at hand.
    Unreadable { what: &'static str, address: u64 },
    /// The catchable type array's count is not a count.
    Count(i32),
    /// The type descriptor's name is not a decorated type name.
    Name { address: u64 },
}

impl fmt::Display for ThrowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThrowError::Parameters(n) => {
                write!(f, "the exception has {n} parameters, not an x64 throw's 4")
            }
            ThrowError::Magic(m) => write!(f, "its magic number {m:#x} is not MSVC's"),
            ThrowError::NoThrowInfo => write!(f, "it has no ThrowInfo"),
            ThrowError::Unreadable { what, address } => write!(
                f,
                "its {what} at {address:#x} is neither in the dump nor in a module file at \
                 hand"
            ),
            ThrowError::Count(n) => write!(f, "its CatchableTypeArray counts {n} types"),
            ThrowError::Name { address } => {
                write!(f, "the type name at {address:#x} is not a decorated name")
            }
        }
    }
}

/// The throw the exception's `parameters` describe; `read(addr, len)` gives up to `len`
/// bytes at `addr` of the process's image (fewer at the end of what is known).
pub(super) fn read_throw<'a>(
    parameters: &[u64],
    read: impl Fn(u64, usize) -> Option<&'a [u8]>,
) -> Result<Throw, ThrowError> {
    let &[magic, object, throw_info, image_base, ..] = parameters else {
        return Err(ThrowError::Parameters(parameters.len()));
    };
    if !MAGIC.contains(&magic) {
        return Err(ThrowError::Magic(magic));
    }
    if throw_info == 0 {
        return Err(ThrowError::NoThrowInfo);
    }
    let u32_at = |what: &'static str, address: u64| {
        read(address, 4)
            .and_then(|b| b.get(..4)?.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or(ThrowError::Unreadable { what, address })
    };
    // an RVA field at `address`: the address it points to
    let rva_at = |what: &'static str, address: u64| {
        let rva = u32_at(what, address)?;
        image_base
            .checked_add(u64::from(rva))
            .ok_or(ThrowError::Unreadable { what, address })
    };
    let field = |base: u64, offset: u64, what: &'static str| {
        base.checked_add(offset).ok_or(ThrowError::Unreadable {
            what,
            address: base,
        })
    };
    let array = rva_at(
        "ThrowInfo",
        field(throw_info, CATCHABLE_ARRAY_FIELD, "ThrowInfo")?,
    )?;
    let count = i32::from_le_bytes(u32_at("CatchableTypeArray", array)?.to_le_bytes());
    if !(1..=MAX_CATCHABLE).contains(&count) {
        return Err(ThrowError::Count(count));
    }
    let mut catchable = Vec::new();
    for i in 0..u64::from(count.unsigned_abs()) {
        let entry = field(array, 4 + 4 * i, "CatchableTypeArray")?;
        let catchable_type = rva_at("CatchableTypeArray", entry)?;
        let descriptor = rva_at(
            "CatchableType",
            field(catchable_type, TYPE_FIELD, "CatchableType")?,
        )?;
        let name_at = field(descriptor, NAME_FIELD, "TypeDescriptor")?;
        let bytes = read(name_at, MAX_NAME).ok_or(ThrowError::Unreadable {
            what: "TypeDescriptor",
            address: descriptor,
        })?;
        let name = bytes
            .iter()
            .position(|&b| b == 0)
            .and_then(|end| bytes.get(..end))
            .and_then(|n| std::str::from_utf8(n).ok())
            .filter(|n| {
                n.starts_with('.') && n.len() > 1 && n.bytes().all(|b| b.is_ascii_graphic())
            })
            .ok_or(ThrowError::Name { address: name_at })?;
        catchable.push(name.to_string());
    }
    Ok(Throw { object, catchable })
}

/// The C++ type a `type_info`'s decorated name (`.?AVruntime_error@std@@`,
/// `.?AUpoint@@`, `.H`, `.PEBD`) names, as MSVC's `type_info::name` would print it
/// without the `class`/`struct`/`union`/`enum` keywords (`std::runtime_error`, `point`,
/// `int`, `char const *`); None if it does not undecorate.
pub(super) fn undecorate_type(decorated: &str) -> Option<String> {
    let encoded = decorated.strip_prefix('.')?;
    // a class, struct, union or enum is `?A` and its tag (`V`, `U`, `T`, `W4`) and name
    let encoded = encoded.strip_prefix("?A").unwrap_or(encoded);
    // undecorated as the type of a variable `x`
    // bounded: a hostile name nested deep must not exhaust the stack
    let variable = crate::symbols::demangle::undecorate_msvc(
        &format!("?x@@3{encoded}A"),
        msvc_demangler::DemangleFlags::NO_CLASS_TYPE
            | msvc_demangler::DemangleFlags::NO_MS_KEYWORDS,
    )?;
    let ty = variable.strip_suffix('x')?.trim_end();
    (!ty.is_empty()).then(|| ty.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    /// An image with a `ThrowInfo` at `BASE + 0x100`: its catchable type array at 0x200,
    /// the catchable types at 0x300 and 0x340, their descriptors at 0x400 and 0x480.
    const BASE: u64 = 0x1_4000_0000;

    fn image(names: &[&str]) -> Vec<u8> {
        let mut m = vec![0u8; 0x600];
        let put = |m: &mut Vec<u8>, at: usize, v: u32| {
            m[at..at + 4].copy_from_slice(&v.to_le_bytes());
        };
        put(&mut m, 0x100 + 12, 0x200);
        put(&mut m, 0x200, u32::try_from(names.len()).unwrap());
        for (i, name) in names.iter().enumerate() {
            let ct = 0x300 + 0x40 * i;
            let td = 0x400 + 0x80 * i;
            put(&mut m, 0x204 + 4 * i, u32::try_from(ct).unwrap());
            put(&mut m, ct + 4, u32::try_from(td).unwrap());
            m[td + 16..td + 16 + name.len()].copy_from_slice(name.as_bytes());
        }
        m
    }

    fn reader<'a>(m: &'a [u8]) -> impl Fn(u64, usize) -> Option<&'a [u8]> + 'a {
        move |addr, len| {
            let at = usize::try_from(addr.checked_sub(BASE)?).ok()?;
            let rest = m.get(at..)?;
            rest.get(..len.min(rest.len()))
        }
    }

    fn params(throw_info: u64) -> [u64; 4] {
        [0x1993_0520, 0x7ff0_0000, throw_info, BASE]
    }

    #[test]
    fn a_throw_lists_its_catchable_types_thrown_type_first() {
        let m = image(&[".?AVruntime_error@std@@", ".?AVexception@std@@"]);
        let t = read_throw(&params(BASE + 0x100), reader(&m)).unwrap();
        assert_eq!(t.object, 0x7ff0_0000);
        assert_eq!(
            t.catchable,
            [".?AVruntime_error@std@@", ".?AVexception@std@@"]
        );
    }

    /// Garbage where the structures should be: typed errors, no panic.
    #[test]
    fn garbage_throw_info_is_an_error() {
        let m = image(&[".?AVruntime_error@std@@"]);
        assert_eq!(
            read_throw(&params(BASE + 0x100)[..3], reader(&m)),
            Err(ThrowError::Parameters(3))
        );
        let mut bad_magic = params(BASE + 0x100);
        bad_magic[0] = 0xdead;
        assert_eq!(
            read_throw(&bad_magic, reader(&m)),
            Err(ThrowError::Magic(0xdead))
        );
        assert_eq!(
            read_throw(&params(0), reader(&m)),
            Err(ThrowError::NoThrowInfo)
        );
        // outside the image, and at its very end
        assert!(matches!(
            read_throw(&params(0x10), reader(&m)),
            Err(ThrowError::Unreadable { .. })
        ));
        assert!(matches!(
            read_throw(&params(BASE + 0x5fe - 12), reader(&m)),
            Err(ThrowError::Unreadable { .. })
        ));
        // counts: none, negative, huge
        for count in [0u32, 0xffff_ffff, 0x7fff_ffff] {
            let mut c = m.clone();
            c[0x200..0x204].copy_from_slice(&count.to_le_bytes());
            assert!(matches!(
                read_throw(&params(BASE + 0x100), reader(&c)),
                Err(ThrowError::Count(_))
            ));
        }
        // RVAs past the image, and wrapping past the end of the address space
        let mut c = m.clone();
        c[0x204..0x208].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        assert!(matches!(
            read_throw(&params(BASE + 0x100), reader(&c)),
            Err(ThrowError::Unreadable { .. })
        ));
        let mut wrap = params(BASE + 0x100);
        wrap[3] = u64::MAX - 4;
        assert!(read_throw(&wrap, reader(&m)).is_err());
        assert!(read_throw(&[0x1993_0520, 0, u64::MAX, u64::MAX], reader(&m)).is_err());
        // a name that is not one: unterminated, not text, not decorated
        for name in [&[b'x'; 1100][..], b".?AV\xff\xfe@@", b"runtime_error"] {
            let mut c = m.clone();
            c.resize(0x1000, b'x');
            c[0x410..0x410 + name.len()].copy_from_slice(name);
            if name.len() < 1000 {
                c[0x410 + name.len()] = 0;
            }
            assert!(
                matches!(
                    read_throw(&params(BASE + 0x100), reader(&c)),
                    Err(ThrowError::Name { .. })
                ),
                "{name:?}"
            );
        }
    }

    /// Decorated type names, undecorated as llvm-undname does (its output for each,
    /// `.?AVruntime_error@std@@` → "class std::runtime_error `RTTI Type Descriptor
    /// Name'", without the tag keywords).
    #[test]
    fn type_names_undecorate() {
        for (decorated, want) in [
            (".?AVruntime_error@std@@", "std::runtime_error"),
            (".?AUmy_struct@@", "my_struct"),
            (".?AVError@Inner@Outer@@", "Outer::Inner::Error"),
            (".?AW4Color@@", "Color"),
            (".H", "int"),
        ] {
            assert_eq!(
                undecorate_type(decorated).as_deref(),
                Some(want),
                "{decorated}"
            );
        }
        let s =
            undecorate_type(".?AV?$basic_string@DU?$char_traits@D@std@@V?$allocator@D@2@@std@@")
                .unwrap();
        assert_eq!(
            s.replace(' ', ""),
            "std::basic_string<char,std::char_traits<char>,std::allocator<char>>"
        );
        for garbage in ["", ".", "?AVx@@", ".?AV", ".?AV@@@@@", ".\u{7f}"] {
            assert_eq!(undecorate_type(garbage), None, "{garbage:?}");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod hostile {
    use super::*;
    use crate::breakpad::text::test_texts::Rng;

    /// Random images, and random bytes planted into a valid one: an error or a throw,
    /// never a panic; and random and deeply nested names do not bring the undecorator
    /// down.
    #[test]
    fn random_bytes_never_panic() {
        const BASE: u64 = 0x1_4000_0000;
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        for round in 0..2000 {
            let len = 0x40 + rng.below(0x400);
            let image: Vec<u8> = (0..len)
                .map(|_| match rng.below(4) {
                    // small offsets, so that RVAs often land inside the image
                    0 => rng.below(0x40) as u8,
                    1 => b'.',
                    _ => rng.below(256) as u8,
                })
                .collect();
            let read = |addr: u64, n: usize| {
                let at = usize::try_from(addr.checked_sub(BASE)?).ok()?;
                let rest = image.get(at..)?;
                rest.get(..n.min(rest.len()))
            };
            let throw_info = BASE + rng.below(len + 8) as u64;
            let params = [
                MAGIC[round % 3],
                rng.below(usize::MAX) as u64,
                throw_info,
                BASE,
            ];
            if let Ok(t) = read_throw(&params, read) {
                for name in &t.catchable {
                    let _ = undecorate_type(name);
                }
            }
        }
        for _ in 0..2000 {
            let len = rng.below(64);
            let name: String = (0..len)
                .map(|_| {
                    let set = b"?$@AVUW4DHPEB0123456789_abcx";
                    char::from(set[rng.below(set.len())])
                })
                .collect();
            let _ = undecorate_type(&format!(".?AV{name}"));
        }
        // nesting as deep as a name's length lets it, by the undecorator's costliest
        // recursions (templates of classes, pointers, function pointers): undecorated or
        // not, never a stack overflow (the bound itself is tested with the demangler)
        for unit in [
            "?$", "V?$y@", "PEA", "PEAV?$y@", "P6APEAX", "?$y@$0", "$$A6",
        ] {
            for prefix in [".?AV", ".", ".?AV?$x@"] {
                let _ = undecorate_type(&format!("{prefix}{}", unit.repeat(MAX_NAME / unit.len())));
            }
        }
    }
}
