//! A report's crashed thread against winedbg's backtrace of the same Windows minidump:
//! the report's physical frames (inlined calls folded into the frame they sit in), the
//! comparison pc by pc and name by name, and both stacks side by side for a failure's
//! message. Shared by the server's Windows x64 and x86 comparisons
//! (`server/tests/windows_minidump.rs`, `windows_x86_minidump.rs`), which differ in how
//! the programs are built and run, not in what "the same stack" means.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::windows::{self, DumpSummary, WineFrame};

/// A physical frame of the report: the entries of inlined calls at its pc, innermost
/// first, then the frame itself.
pub struct Physical<'a> {
    /// Frame 0: the crash's pc; any other: the return address.
    pub pc: u64,
    /// The report's entries: inlined calls at `pc`, innermost first, then the frame.
    pub entries: Vec<&'a Value>,
}

impl Physical<'_> {
    pub fn names(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| e["function"].as_str().unwrap_or("??").to_owned())
            .collect()
    }
}

pub fn hex(v: &Value) -> u64 {
    v.as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .and_then(|s| u64::from_str_radix(s, 16).ok())
        .unwrap_or_else(|| panic!("not a hex string: {v}"))
}

pub fn physical_frames(thread: &Value) -> Vec<Physical<'_>> {
    let mut frames = Vec::new();
    let mut pending = Vec::new();
    for entry in thread["frames"].as_array().expect("frames") {
        pending.push(entry);
        if entry["inlined"] != true {
            frames.push(Physical {
                pc: hex(&entry["pc"]),
                entries: std::mem::take(&mut pending),
            });
        }
    }
    assert!(
        pending.is_empty(),
        "inlined entries after the outermost frame"
    );
    frames
}

/// `want` appear in `names` in this order, the first at frame 0.
pub fn expect_stack(names: &[Option<Vec<String>>], want: &[&str], shown: &str) {
    let functions: Vec<&str> = names
        .iter()
        .map(|n| {
            n.as_ref()
                .and_then(|n| n.last())
                .map_or("(not the program)", String::as_str)
        })
        .collect();
    assert_eq!(
        functions.first().copied(),
        want.first().copied(),
        "the reference does not crash where the program does; winedbg's stack:\n{shown}"
    );
    let mut rest = functions.iter();
    for name in want {
        assert!(
            rest.any(|n| n == name),
            "the reference lacks {name}: {functions:?}; winedbg's stack:\n{shown}"
        );
    }
}

/// addr2line's name `name` without its parameter list (`ns::f(int) const` → `ns::f`), as
/// the report writes names (a bare `operator()`, a lambda's, which gcc's DWARF names so
/// without a linkage name, has none and stays).
pub fn without_parameters(name: &str) -> String {
    engine::symbols::strip_parameters(name).to_owned()
}

/// Whether our names of a frame (inlined calls first) are addr2line's (`reference`, from
/// [`Case::program_names`]). `scopes`: where addr2line's name is unqualified — gcc writes
/// no `DW_AT_linkage_name` for a function whose type involves a lambda, so addr2line has
/// only its `DW_AT_name` (`__unguarded_partition<…>`) — ours may be that name in one of
/// these scopes (`std::__unguarded_partition<…>`), which the DWARF's enclosing namespace
/// or class gives, as gdb names it.
pub fn same_names(ours: &[String], reference: &[String], scopes: &[&str]) -> bool {
    ours.len() == reference.len()
        && ours.iter().zip(reference).all(|(o, r)| {
            o == r
                || (!qualified(r)
                    && scopes
                        .iter()
                        .any(|s| o.strip_prefix(s).is_some_and(|rest| rest == r)))
        })
}

/// Whether `name` has a `::` outside its template arguments and parentheses.
fn qualified(name: &str) -> bool {
    let mut depth = 0i32;
    let mut colon = false;
    for c in name.chars() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ':' if depth == 0 && colon => return true,
            _ => {}
        }
        colon = c == ':' && depth == 0;
    }
    false
}

/// Both stacks, physical frame by physical frame: winedbg's (with its inlined calls and,
/// for the program's frames, addr2line's names) and ours, `<<` on each row that differs.
pub fn side_by_side(
    winedbg: &[WineFrame],
    names: &[Option<Vec<String>>],
    ours: &[Physical<'_>],
    scopes: &[&str],
) -> String {
    // winedbg's physical frames with their inlined calls before them.
    let mut left = Vec::new();
    let mut inlined: Vec<&str> = Vec::new();
    for f in winedbg {
        let name = f.function.as_deref().unwrap_or("?");
        if f.inlined {
            inlined.push(name);
            continue;
        }
        let mut text = format!("{:#x}", f.pc);
        for i in inlined.drain(..) {
            let _ = write!(text, " {i} [inlined] <");
        }
        match (&f.function, &f.module) {
            (Some(function), Some(module)) => {
                let _ = write!(text, " {function} in {module}");
            }
            (None, Some(module)) => {
                let _ = write!(text, " in {module}");
            }
            _ => text.push_str(" ??"),
        }
        left.push((f.pc, text));
    }
    let right: Vec<String> = ours
        .iter()
        .map(|o| {
            let last = o.entries.last().unwrap();
            format!(
                "{:#x} {} [{}] {}",
                o.pc,
                o.entries
                    .iter()
                    .map(|e| {
                        let name = e["function"].as_str().unwrap_or("??");
                        if e["inlined"] == true {
                            format!("{name} [inlined] <")
                        } else {
                            name.to_owned()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
                last["trust"].as_str().unwrap_or("?"),
                last["module"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    let width = left
        .iter()
        .map(|(_, t)| t.len())
        .chain([20])
        .max()
        .unwrap_or(20)
        .min(70);
    let mut out = format!("  #   {:<width$} | {:<30} | ours\n", "winedbg", "addr2line");
    for i in 0..left.len().max(right.len()) {
        let l = left.get(i).map_or("-", |(_, t)| t.as_str());
        let a = names
            .get(i)
            .and_then(Option::as_ref)
            .map_or(String::new(), |n| n.join(" < "));
        let r = right.get(i).map_or("-", String::as_str);
        let same = match (left.get(i), ours.get(i)) {
            (Some((pc, _)), Some(o)) => {
                *pc == o.pc
                    && names
                        .get(i)
                        .and_then(Option::as_ref)
                        .is_none_or(|n| n == &["??"] || same_names(&o.names(), n, scopes))
            }
            _ => false,
        };
        let mark = if same { "" } else { "  <<" };
        let _ = writeln!(out, "  {i:<3} {l:<width$} | {a:<30} | {r}{mark}");
    }
    out
}

/// Whether the report's physical frames `ours` differ from winedbg's (`winedbg`, its
/// inlined calls left out): a pc that differs, a frame missing or one past winedbg's
/// outermost; and in the program's frames (`names`, addr2line's, from
/// [`expect_stack`]'s caller) a name that differs ([`same_names`], `scopes`). A `stripped`
/// program's frames must stay unnamed (`??`); code addr2line cannot name (assembly) is
/// not compared by name. Returns that, and both stacks side by side ([`side_by_side`]).
pub fn differs_from_winedbg(
    winedbg: &[WineFrame],
    names: &[Option<Vec<String>>],
    ours: &[Physical<'_>],
    stripped: bool,
    scopes: &[&str],
) -> (bool, String) {
    let reference: Vec<&WineFrame> = winedbg.iter().filter(|f| !f.inlined).collect();
    let mut differs = ours.len() != reference.len();
    for (i, w) in reference.iter().enumerate() {
        let Some(o) = ours.get(i) else { break };
        differs |= o.pc != w.pc;
        match &names[i] {
            Some(_) if stripped => differs |= o.names().iter().any(|n| n != "??"),
            // code without DWARF (assembly): addr2line has no name to compare
            Some(expected) if expected == &["??"] => {}
            Some(expected) => differs |= !same_names(&o.names(), expected, scopes),
            None => {}
        }
    }
    (differs, side_by_side(winedbg, names, ours, scopes))
}

/// addr2line's names ([`windows::addr2line`], from the image's DWARF) of the physical frames
/// `pcs` (frame 0 first) that lie in one of `images` (the program first, then DLLs whose
/// frames are named so too), None for the others: the return address minus one in a
/// caller's frame, and each address moved by the image's distance from its preferred base
/// (addr2line's addresses are the image's own). C++ names without their parameter list, as
/// the report writes them (`docs/report-format.md`: `ns::Widget::paint`, from addr2line's
/// `ns::Widget::paint(int) const`). Panics if `dump` lists no module of the first image (a
/// DLL the program did not load is passed over).
pub fn names_by_addr2line(
    dump: &DumpSummary,
    images: &[&Path],
    pcs: &[u64],
) -> Vec<Option<Vec<String>>> {
    let mut names = vec![None; pcs.len()];
    for (n, image) in images.iter().enumerate() {
        let name = image.file_name().unwrap().to_str().unwrap();
        let Some(module) = dump.module(name) else {
            assert!(n > 0, "the dump lists no {name}: {:?}", dump.modules);
            continue;
        };
        let moved = windows::image_base(image).wrapping_sub(module.base);
        let lookups: Vec<(usize, u64)> = pcs
            .iter()
            .enumerate()
            .filter(|&(_, &pc)| module.contains(pc))
            .map(|(i, &pc)| (i, if i == 0 { pc } else { pc - 1 }.wrapping_add(moved)))
            .collect();
        let addresses: Vec<u64> = lookups.iter().map(|&(_, a)| a).collect();
        for ((i, _), found) in lookups.iter().zip(windows::addr2line(image, &addresses)) {
            names[*i] = Some(found.iter().map(|n| without_parameters(n)).collect());
        }
    }
    names
}
