//! Demangling symbol names the way debuggers print them in a backtrace.
//!
//! C++ (`_Z…`) through cpp_demangle without parameter list or return type
//! (`Widget::paint`, `std::vector<int, std::allocator<int> >::at`); Rust (legacy `_ZN…h…E`
//! and v0 `_R…`) through rustc-demangle in its alternate form, which drops the hash
//! (`core::option::unwrap_failed`); MSVC (`?…`, a PDB's public symbols) through
//! msvc-demangler, the name alone (`ns::Widget::paint`, `ns::Grid<__int64,3>::at`), as
//! Microsoft's undecorator spells it. Anything else — C names, already demangled names — is
//! returned unchanged. Never fails: a name that does not demangle stays as it is.

use std::borrow::Cow;

/// MSVC's compilers cut decorated names at 4096 bytes: a longer one is not a name they
/// wrote, and is left as it is.
const MSVC_MAX_LEN: usize = 4096;
/// Names at most this long, with at most this many `?` (each opens a template or a nested
/// name), are undecorated on the caller's stack; longer ones on a stack of their own.
const MSVC_INLINE_LEN: usize = 256;
const MSVC_INLINE_NESTING: usize = 32;
/// That stack: msvc-demangler recurses once per nested type, pointer or template, and a
/// hostile name of 4096 bytes needs up to 16 MiB of it in a debug build (measured on
/// pointers, templates, function pointers and arrays nested as deep as the length lets
/// them; a release build needs far less). Only the pages touched are ever allocated.
const MSVC_STACK: usize = 64 << 20;

thread_local! {
    /// Whether this thread runs inside [`with_deep_stack`]: long names are then undecorated
    /// where they are, on the stack that call made.
    static ON_DEEP_STACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` on a stack deep enough for every name [`undecorate_msvc`] undecorates, so that
/// a loop over many names (a PDB's public symbols: a large C++ program has hundreds of
/// thousands, most over the inline bound) makes one stack, not one per name (a stack
/// costs about 20 µs to make).
pub fn with_deep_stack<R>(f: impl FnOnce() -> R) -> R {
    if ON_DEEP_STACK.get() {
        return f();
    }
    /// Clears the flag when `f` returns or unwinds, before the stack is given back.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            ON_DEEP_STACK.set(false);
        }
    }
    stacker::grow(MSVC_STACK, || {
        ON_DEEP_STACK.set(true);
        let _reset = Reset;
        f()
    })
}

/// `name` undecorated by msvc-demangler with `flags`, bounded so that no name — a PDB's,
/// a COFF symbol table's or an exception's type, all read from untrusted files — can
/// exhaust the thread's stack; `None` if it does not undecorate or is too long.
pub fn undecorate_msvc(name: &str, flags: msvc_demangler::DemangleFlags) -> Option<String> {
    if name.len() > MSVC_MAX_LEN {
        return None;
    }
    let run = || msvc_demangler::demangle(name, flags).ok();
    if name.len() <= MSVC_INLINE_LEN
        && name.bytes().filter(|&b| b == b'?').count() <= MSVC_INLINE_NESTING
    {
        run()
    } else {
        with_deep_stack(run)
    }
}

/// The backtrace form of a (possibly mangled) symbol name.
pub fn demangle(name: &str) -> Cow<'_, str> {
    match try_demangle(name) {
        Some(d) => Cow::Owned(d),
        None => Cow::Borrowed(name),
    }
}

/// The backtrace form of a mangled name; `None` if it is not one we can demangle.
pub fn try_demangle(name: &str) -> Option<String> {
    // Rust first: legacy Rust symbols are valid Itanium names too, but only
    // rustc-demangle knows to drop the hash.
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return Some(format!("{d:#}"));
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            let options = cpp_demangle::DemangleOptions::new()
                .no_params()
                .no_return_type();
            if let Ok(mut d) = sym.demangle_with_options(&options) {
                // A method's qualifiers belong to its (dropped) parameter list.
                while let Some(stripped) = [" const", " volatile", " &&", " &"]
                    .iter()
                    .find_map(|q| d.strip_suffix(q))
                {
                    d.truncate(stripped.len());
                }
                return Some(d);
            }
        }
    }
    if name.starts_with('?') {
        // MSVC's decoration (a PDB's public symbols): the name alone, as Windows debuggers
        // show a frame, spelled as Microsoft's undecorator and compiler spell it (a PDB's
        // procedure names): `__int64`, not `int64_t`; `Grid<unsigned char,3>`
        use msvc_demangler::DemangleFlags as F;
        return undecorate_msvc(name, F::NAME_ONLY | F::MS_TYPENAMES);
    }
    None
}

/// `ns::f(int, char const*) const` → `ns::f`; a name without a trailing parameter list is
/// kept (`operator()` stays).
pub fn strip_parameters(name: &str) -> &str {
    let mut s = name.trim_end();
    for suffix in [" const", " volatile", " &&", " &", " noexcept"] {
        if let Some(t) = s.strip_suffix(suffix) {
            s = t.trim_end();
        }
    }
    if !s.ends_with(')') {
        return name.trim_end();
    }
    let mut depth = 0usize;
    for (i, c) in s.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    let head = &s[..i];
                    // `(anonymous namespace)` or a bare `(...)`: nothing to strip; and the
                    // `()` of a bare `operator()` is its name, not a parameter list
                    let call_operator = head.ends_with("operator") && &s[i..] == "()";
                    return if head.is_empty() || call_operator {
                        name.trim_end()
                    } else {
                        head
                    };
                }
            }
            _ => {}
        }
    }
    name.trim_end()
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn cpp_names_lose_parameters_and_return_type() {
        // Names produced by g++ for: ns::Widget::paint(int) const, a template member,
        // an operator and a lambda's call operator.
        assert_eq!(demangle("_ZNK2ns6Widget5paintEi"), "ns::Widget::paint");
        assert_eq!(
            demangle("_ZNSt6vectorIiSaIiEE2atEm"),
            "std::vector<int, std::allocator<int> >::at"
        );
        assert_eq!(demangle("_ZN2nsplERKNS_1VES2_"), "ns::operator+");
        assert_eq!(
            demangle("_ZZ4mainENKUliE_clEi"),
            "main::{lambda(int)#1}::operator()"
        );
    }

    #[test]
    fn rust_names_lose_the_hash() {
        assert_eq!(
            demangle("_ZN4core6option13unwrap_failed17h0123456789abcdefE"),
            "core::option::unwrap_failed"
        );
    }

    #[test]
    fn msvc_names_are_undecorated_to_the_name() {
        // `int __cdecl ns::Widget::paint(int) const` and `void __cdecl crash(void)`
        assert_eq!(demangle("?paint@Widget@ns@@QEBAHH@Z"), "ns::Widget::paint");
        assert_eq!(demangle("?crash@@YAXXZ"), "crash");
        assert_eq!(demangle("?bogus"), "?bogus");
    }

    /// clang's MSVC-ABI names (`clang++ --target=x86_64-pc-windows-msvc`), each expected as
    /// `llvm-undname` prints it (the `__cdecl` and parameter list dropped): templates,
    /// constructors, destructors and operators. Where template arguments are listed,
    /// llvm-undname writes `a, b` and closes nested ones with `>>`; these are written as
    /// Microsoft's undecorator and a PDB's procedure names write them, `a,b` and `> >`.
    #[test]
    fn msvc_names_read_as_llvm_undname_prints_them() {
        for (mangled, name) in [
            (
                "??$measure@USquare@geometry@@@geometry@@YAHAEBUSquare@0@PEAH@Z",
                "geometry::measure<struct geometry::Square>",
            ),
            ("??0Widget@geometry@@QEAA@XZ", "geometry::Widget::Widget"),
            ("??1Widget@geometry@@QEAA@XZ", "geometry::Widget::~Widget"),
            (
                "??RWidget@geometry@@QEBAHH@Z",
                "geometry::Widget::operator()",
            ),
            (
                "??YWidget@geometry@@QEAAAEAU01@AEBU01@@Z",
                "geometry::Widget::operator+=",
            ),
            (
                "?cell@?$Grid@E$02@geometry@@QEBA_KPEAE@Z",
                "geometry::Grid<unsigned char,3>::cell",
            ),
            (
                "??$scaled@_J@geometry@@YA_JAEBUShape@0@_JPEAH@Z",
                "geometry::scaled<__int64>",
            ),
            (
                "?at@?$V@HU?$A@U?$A@H@ns@@@ns@@@ns@@QEBAH_K@Z",
                "ns::V<int,struct ns::A<struct ns::A<int> > >::at",
            ),
        ] {
            assert_eq!(demangle(mangled), name, "{mangled}");
        }
    }

    /// Names nested as deep as MSVC's 4096-byte limit lets them, by msvc-demangler's
    /// costliest recursions (templates of classes, pointers, function pointers, arrays):
    /// undecorated or not, never a stack overflow (which would abort the whole process);
    /// longer ones are left as they are. Run on a thread with a 2 MiB stack, as a tokio or
    /// std worker has; the same names overflow it without the bound (checked).
    #[test]
    fn hostile_msvc_names_do_not_exhaust_the_stack() {
        let run = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                for unit in [
                    "?$", "V?$y@", "PEA", "PEAV?$y@", "P6APEAX", "?$y@$0", "$$A6",
                ] {
                    for prefix in ["?x@@3", "?f@", "??$g@"] {
                        let n = (super::MSVC_MAX_LEN - prefix.len()) / unit.len();
                        let name = format!("{prefix}{}", unit.repeat(n));
                        let _ = demangle(&name);
                        let longer = format!("{name}{unit}{unit}");
                        assert_eq!(demangle(&longer), longer);
                    }
                }
            })
            .expect("a thread");
        assert!(run.join().is_ok());
    }

    /// The same names in one loop inside [`super::with_deep_stack`], as the PDB reader
    /// undecorates its publics: undecorated where they are, on that one stack; and a
    /// panic inside leaves the thread's next long name on a stack of its own again.
    #[test]
    fn hostile_msvc_names_in_one_deep_stack() {
        let run = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                let names: Vec<String> = ["?$", "PEA", "PEAV?$y@", "P6APEAX"]
                    .iter()
                    .map(|unit| format!("?x@@3{}", unit.repeat(4000 / unit.len())))
                    .collect();
                super::with_deep_stack(|| {
                    for name in &names {
                        let _ = demangle(name);
                    }
                });
                let caught = std::panic::catch_unwind(|| {
                    super::with_deep_stack(|| panic!("a builder's panic"));
                });
                assert!(caught.is_err());
                for name in &names {
                    let _ = demangle(name);
                }
            })
            .expect("a thread");
        assert!(run.join().is_ok());
    }

    #[test]
    fn c_names_are_unchanged() {
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Zbogus"), "_Zbogus");
    }
}
