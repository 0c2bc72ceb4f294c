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
        let flags = F::NAME_ONLY | F::MS_TYPENAMES;
        return msvc_demangler::demangle(name, flags).ok();
    }
    None
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

    #[test]
    fn c_names_are_unchanged() {
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Zbogus"), "_Zbogus");
    }
}
