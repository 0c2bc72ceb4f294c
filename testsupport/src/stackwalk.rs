//! `postmortem-walk` as a drop-in for `minidump-stackwalk` (issue 21, part 1): the same
//! command line (`--json DUMP STORE`, `--human`) over the same Breakpad symbol store gives
//! a document that agrees with minidump-stackwalk's field by field. Used by the Linux
//! minidump tests (`minidump_gdb`, gdb's frames on the core of the same crash as the
//! reference) and the Windows ones (`windows_minidump`, winedbg's frames of the crashed
//! thread as the reference).
//!
//! Every field path minidump-stackwalk writes must be in ours. Each field is then
//! compared, and where ours differs it must be for one of the reasons listed here (and in
//! docs/stackwalk-drop-in.md):
//! - **frames**: position by position, every field equal while both walks are at the same
//!   address (`trust` may be better in ours: `cfi` where theirs is `scan`). From the first
//!   frame where they part, ours must be the reference's (gdb's, on the kernel core of
//!   the same crash; winedbg's): more frames the reference confirms, or fewer where
//!   theirs runs on past the reference's outermost frame with scanned garbage;
//! - **function names** are without their parameter lists (`area`, not
//!   `area() const`), as the report names functions from any source (gdb's names);
//! - **threads order**: ours puts the crashed thread first; threads are matched by id
//!   and `crash_info.crashing_thread` / `crashing_thread.threads_index` must name the same
//!   thread in each document;
//! - **modules order**: ours lists the main module first, then by address; theirs in the
//!   dump's order. Modules are matched by base address, and `main_module` must name the
//!   same one;
//! - **`modules[].missing_symbols` and `loaded_symbols`**: minidump-stackwalk looks for a
//!   module's symbols when a frame of its walk lands in it, so both follow each walk's
//!   frames;
//! - **`proc_limits.limits`**: theirs come out of a hash map in any order; compared as sets;
//! - **`crash_info.possible_bit_flips`**: each of ours is one of theirs, equal in every
//!   field (the same address, heuristics and confidence); theirs may list more. Ours are
//!   the report's (`crash.analysis`'s `bit_flip_of` evidence): flips of the faulting
//!   address only (theirs also flips the registers the crashing instruction read, with
//!   `source_register` set), and only into memory the dump holds (theirs: into any
//!   mapping its memory-info list has, and a minidump holds no heap), so on a minidump
//!   ours is often `null` where theirs lists the heap block a flipped pointer meant;
//! - **`--human`**: the frame lines lack theirs' offset from the source line's first
//!   instruction (`[file : line + 0x4]`), callers show only the stack and instruction
//!   pointers, "Found by" may be better as `trust` may, ours adds a `Crash analysis:`
//!   line, and the bit-flip lines follow the JSON's rule above (see
//!   [`assert_human_agrees`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::compare::parse_hex;
use crate::gdb::GdbCore;

/// rust-minidump's bit-flip candidates, where ours may list fewer (see the module
/// documentation).
const BIT_FLIPS: &str = "crash_info.possible_bit_flips";

/// Runs a stackwalk-style command line and returns its standard output.
pub fn run(program: &Path, args: &[&std::ffi::OsStr]) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every field path of a document, array positions left out (`threads[].frames[].line`).
fn paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                paths(v, &p, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn at<'v>(v: &'v Value, path: &str) -> &'v Value {
    path.split('.').fold(v, |v, k| &v[k])
}

/// C++ function names without their parameter lists (`area() const` → `area`), in a
/// frame's `function` or each of its `inlines`: the report names functions as gdb's
/// backtrace does, whatever the symbol source; Breakpad's `.sym` names carry the lists.
fn bare_names(v: &mut Value) {
    match v {
        Value::String(name) => {
            if let Some(i) = name.find('(').filter(|&i| i > 0) {
                name.truncate(i);
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|i| bare_names(&mut i["function"])),
        _ => {}
    }
}

fn rank(trust: &Value) -> usize {
    ["scan", "frame_pointer", "cfi", "context"]
        .iter()
        .position(|t| trust == t)
        .unwrap_or(0)
}

/// One thread's reference stack: the pc of each physical frame, innermost first (a
/// caller's pc is its return address), whether it reaches the thread's outermost frame,
/// and why it stopped (shown on failure).
#[derive(Debug, Clone)]
pub struct Reference {
    pub pcs: Vec<u64>,
    pub complete: bool,
    pub stop: String,
    /// Where the reference names frames independently of both `.sym` readings: the
    /// function (without parameters), file and line of the frame at each of `pcs` (or
    /// `None`); may be empty. See [`Differences::better_names`].
    pub names: Vec<Option<Named>>,
}

/// How a reference names a frame: function (without parameters), file, line.
pub type Named = (String, Option<String>, Option<u64>);

/// gdb's stack of thread `tid` in `gdb` (inlined and tail-call frames left out), as a
/// [`Reference`].
pub fn gdb_reference(gdb: &GdbCore, tid: u64) -> Option<Reference> {
    let g = gdb.thread(tid)?;
    Some(Reference {
        pcs: g
            .frames
            .iter()
            .filter(|f| f.kind != "INLINE" && f.kind != "TAILCALL")
            .map(|f| f.pc)
            .collect(),
        complete: g.complete,
        stop: g.stop.clone(),
        names: Vec::new(),
    })
}

/// What the comparison of one case found where the documents differ on purpose.
#[derive(Default, Debug)]
pub struct Differences {
    /// Frames equal in every field, in both.
    pub same_frames: usize,
    /// Frames ours has that the reference confirms and theirs lacks or has elsewhere.
    pub ours_gdb_confirms: usize,
    /// Frames of theirs past the point where it parts from the reference.
    pub theirs_past_gdb: usize,
    /// Frames at the same address where our trust is better.
    pub better_trust: usize,
    /// Frames at the same address named differently, ours as the reference names them,
    /// theirs from a record that starts before ours: a `.sym` file with overlapping
    /// `FUNC` records (dump_syms on wine's DLLs writes one for a function's hot-patch
    /// area, from `.pdata`, around the one its DWARF gives), where rust-minidump takes the
    /// outer record and postmortem the innermost.
    pub better_names: usize,
}

impl std::ops::AddAssign<&Differences> for Differences {
    /// Adds one case's counts to a run's totals.
    fn add_assign(&mut self, d: &Differences) {
        self.same_frames += d.same_frames;
        self.ours_gdb_confirms += d.ours_gdb_confirms;
        self.theirs_past_gdb += d.theirs_past_gdb;
        self.better_trust += d.better_trust;
        self.better_names += d.better_names;
    }
}

/// The fields that name a frame's code.
const NAMING: [&str; 5] = ["function", "function_offset", "file", "line", "inlines"];

/// Asserts that `ours` (postmortem-walk --json) agrees with `theirs` (minidump-stackwalk
/// --json) field by field, differences allowed only as the module documentation lists;
/// `reference` gives a thread's reference stack by thread id.
pub fn assert_agree(
    case: &str,
    theirs: &Value,
    ours: &Value,
    reference: &dyn Fn(u64) -> Option<Reference>,
) -> Differences {
    process_fields_agree(case, theirs, ours);
    let d = threads_agree(case, theirs, ours, reference);
    modules_agree(case, theirs, ours);
    d
}

/// Every field they write, we write; the process-wide fields, bit flips and limits equal.
fn process_fields_agree(case: &str, theirs: &Value, ours: &Value) {
    // every field they write, we write
    let (mut tp, mut op) = (BTreeSet::new(), BTreeSet::new());
    paths(theirs, "", &mut tp);
    paths(ours, "", &mut op);
    // theirs' bit-flip fields are missing from ours only where ours lists none
    let missing: Vec<&String> = tp
        .difference(&op)
        .filter(|p| !(p.starts_with(BIT_FLIPS) && at(ours, BIT_FLIPS).is_null()))
        .collect();
    assert!(
        missing.is_empty(),
        "{case}: fields missing from ours: {missing:?}"
    );

    for p in [
        "status",
        "system_info",
        "lsb_release",
        "linux_memory_map_count",
        "pid",
        "process_uptime",
        "thread_count",
        "main_module",
        "unloaded_modules",
        "handles",
        "soft_errors",
        "mac_crash_info",
        "mac_boot_args",
        "modules_contains_cert_info",
        "crash_info.type",
        "crash_info.address",
        "crash_info.assertion",
        "crash_info.adjusted_address",
        "crash_info.instruction",
        "crash_info.memory_accesses",
        "crash_info.instruction_pointer_update",
        "crash_info.crash_inconsistencies",
    ] {
        assert_eq!(at(ours, p), at(theirs, p), "{case}: {p}");
    }
    let flips = |v: &Value| at(v, BIT_FLIPS).as_array().cloned().unwrap_or_default();
    assert!(
        at(ours, BIT_FLIPS).is_null() || !flips(ours).is_empty(),
        "{case}: none is null, as theirs"
    );
    for f in flips(ours) {
        assert!(
            flips(theirs).contains(&f),
            "{case}: our bit flip {f} is not theirs: {}",
            at(theirs, BIT_FLIPS)
        );
    }
    let limits = |v: &Value| -> BTreeSet<String> {
        v["proc_limits"]["limits"]
            .as_array()
            .map(|a| a.iter().map(Value::to_string).collect())
            .unwrap_or_default()
    };
    assert_eq!(limits(ours), limits(theirs), "{case}: proc_limits");
}

/// The same threads by id, the same crashed thread, and each thread's frames agreeing.
fn threads_agree(
    case: &str,
    theirs: &Value,
    ours: &Value,
    reference: &dyn Fn(u64) -> Option<Reference>,
) -> Differences {
    let by_id = |v: &Value| -> BTreeMap<u64, Value> {
        v["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["thread_id"].as_u64().unwrap(), t.clone()))
            .collect()
    };
    let (their_threads, our_threads) = (by_id(theirs), by_id(ours));
    assert_eq!(
        their_threads.keys().collect::<Vec<_>>(),
        our_threads.keys().collect::<Vec<_>>(),
        "{case}: thread ids"
    );
    let crashed_tid = |v: &Value| {
        let i = v["crash_info"]["crashing_thread"].as_u64().unwrap() as usize;
        assert_eq!(v["crashing_thread"]["threads_index"], i, "{case}");
        v["threads"][i]["thread_id"].as_u64().unwrap()
    };
    assert_eq!(
        crashed_tid(ours),
        crashed_tid(theirs),
        "{case}: crashed thread"
    );
    assert_eq!(
        ours["crashing_thread"]["frames"][0]["registers"],
        theirs["crashing_thread"]["frames"][0]["registers"],
        "{case}: crashed thread's registers"
    );
    for doc in [ours, theirs] {
        let mut copy = doc["crashing_thread"].clone();
        let obj = copy.as_object_mut().unwrap();
        obj.remove("threads_index");
        obj["frames"][0]
            .as_object_mut()
            .unwrap()
            .remove("registers");
        assert_eq!(
            copy,
            by_id(doc)[&crashed_tid(doc)],
            "{case}: crashing_thread"
        );
    }

    // a caller's `offset` is its return address minus one instruction step
    let step = if theirs["system_info"]["cpu_arch"] == "arm64" {
        4
    } else {
        1
    };
    let mut d = Differences::default();
    for (tid, theirs_t) in &their_threads {
        let ours_t = &our_threads[tid];
        for f in ["thread_name", "last_error_value"] {
            assert_eq!(ours_t[f], theirs_t[f], "{case}: thread {tid} {f}");
        }
        for t in [ours_t, theirs_t] {
            assert_eq!(t["frame_count"], t["frames"].as_array().unwrap().len());
        }
        frames_agree(case, *tid, step, ours_t, theirs_t, reference, &mut d);
    }
    d
}

/// The same modules by address, each field equal, symbol flags following the frames.
fn modules_agree(case: &str, theirs: &Value, ours: &Value) {
    let modules = |v: &Value| -> BTreeMap<String, Value> {
        v["modules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["base_addr"].as_str().unwrap().to_string(), m.clone()))
            .collect()
    };
    let (their_modules, our_modules) = (modules(theirs), modules(ours));
    assert_eq!(
        their_modules.keys().collect::<Vec<_>>(),
        our_modules.keys().collect::<Vec<_>>(),
        "{case}: modules"
    );
    let main =
        |v: &Value| v["modules"][v["main_module"].as_u64().unwrap() as usize]["base_addr"].clone();
    assert_eq!(main(ours), main(theirs), "{case}: main module");
    for (base, tm) in &their_modules {
        let om = &our_modules[base];
        for (k, v) in tm.as_object().unwrap() {
            if k != "missing_symbols" && k != "loaded_symbols" {
                assert_eq!(&om[k], v, "{case}: module {base} {k}");
            }
        }
        let mut landed_in_both = true;
        for (doc, m) in [(ours, om), (theirs, tm)] {
            let name = m["filename"].as_str().unwrap();
            let landed = doc["threads"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|t| t["frames"].as_array().unwrap())
                .any(|f| f["module"] == name);
            landed_in_both &= landed;
            assert!(
                landed || m["loaded_symbols"] == false,
                "{case}: {name} loaded_symbols follows the walk's frames"
            );
            assert_eq!(
                m["missing_symbols"],
                landed && m["loaded_symbols"] == false,
                "{case}: {name} missing_symbols follows the walk's frames"
            );
        }
        if landed_in_both {
            assert_eq!(
                om["loaded_symbols"], tm["loaded_symbols"],
                "{case}: module {base} loaded_symbols"
            );
        }
    }
}

/// Frame `i` of thread `tid`, named differently in `ours` and `theirs`: ours must be
/// named as the reference names it, and theirs by a record that starts before ours (see
/// [`Differences::better_names`]).
fn better_named(
    case: &str,
    tid: u64,
    step: u64,
    i: usize,
    ours: &Value,
    theirs: &Value,
    reference: &dyn Fn(u64) -> Option<Reference>,
) {
    let context = format!("{case}: thread {tid} frame {i}\n ours   {ours}\n theirs {theirs}");
    let r = reference(tid).unwrap_or_else(|| panic!("no reference: {context}"));
    let offset = parse_hex(ours["offset"].as_str().unwrap()).unwrap();
    let pc = if i == 0 { offset } else { offset + step };
    let at = r.pcs.iter().position(|&p| p == pc);
    let Some(Some((function, file, line))) = at.and_then(|n| r.names.get(n)) else {
        panic!("named differently, and the reference names no frame at {pc:#x}: {context}");
    };
    let mut name = ours["function"].clone();
    bare_names(&mut name);
    // dump_syms writes a path's separators as the DWARF of a Windows build mixes them
    let path = |p: Option<&str>| p.map(|p| p.replace('\\', "/"));
    assert_eq!(
        (
            name.as_str(),
            path(ours["file"].as_str()),
            ours["line"].as_u64()
        ),
        (Some(function.as_str()), path(file.as_deref()), *line),
        "ours is not named as the reference names it: {context}"
    );
    let function_offset = |f: &Value| parse_hex(f["function_offset"].as_str().unwrap_or("0x0"));
    assert!(
        function_offset(theirs) > function_offset(ours),
        "theirs is not named by a record around ours: {context}"
    );
}

/// One thread's frames: equal while both walks agree; where they part, ours is the
/// reference's.
fn frames_agree(
    case: &str,
    tid: u64,
    step: u64,
    ours: &Value,
    theirs: &Value,
    reference: &dyn Fn(u64) -> Option<Reference>,
    d: &mut Differences,
) {
    let of = ours["frames"].as_array().unwrap();
    let tf = theirs["frames"].as_array().unwrap();
    let mut i = 0;
    while let (Some(a), Some(b)) = (of.get(i), tf.get(i)) {
        if a["offset"] != b["offset"] {
            break;
        }
        let differently_named = NAMING.iter().any(|k| {
            let (mut x, mut y) = (a[*k].clone(), b[*k].clone());
            bare_names(&mut x);
            bare_names(&mut y);
            *k != "function_offset" && x != y
        });
        if differently_named {
            better_named(case, tid, step, i, a, b, reference);
            d.better_names += 1;
        }
        for (k, v) in b.as_object().unwrap() {
            if k == "trust" && rank(&a[k]) > rank(v) {
                d.better_trust += 1;
                continue;
            }
            if differently_named && NAMING.contains(&k.as_str()) {
                continue;
            }
            let (mut ours_v, mut theirs_v) = (a[k].clone(), v.clone());
            if k == "function" || k == "inlines" {
                bare_names(&mut ours_v);
                bare_names(&mut theirs_v);
            }
            assert_eq!(ours_v, theirs_v, "{case}: thread {tid} frame {i} {k}");
        }
        d.same_frames += 1;
        i += 1;
    }
    if i == of.len() && i == tf.len() {
        return;
    }
    // they part at frame i: ours from there on must be the reference's
    let g = reference(tid).unwrap_or_else(|| panic!("{case}: no reference for thread {tid}"));
    let gdb_pcs = &g.pcs;
    let pc = |f: &Value, n: usize| {
        let o = parse_hex(f["offset"].as_str().unwrap()).unwrap();
        if n == 0 {
            o
        } else {
            o + step
        }
    };
    let describe = |fs: &[Value]| -> Vec<String> {
        fs.iter()
            .enumerate()
            .map(|(n, f)| format!("{} {:#x} {}", f["trust"], pc(f, n), f["function"]))
            .collect()
    };
    let context = format!(
        "{case}: thread {tid} parts at frame {i}\n ours   {:?}\n theirs {:?}\n reference {:x?} ({})",
        describe(of),
        describe(tf),
        gdb_pcs,
        g.stop
    );
    for (n, f) in of.iter().enumerate().skip(i) {
        match gdb_pcs.get(n) {
            Some(&want) => assert_eq!(pc(f, n), want, "{context}"),
            None => assert!(
                !g.complete,
                "ours runs past the reference's outermost frame: {context}"
            ),
        }
        d.ours_gdb_confirms += 1;
    }
    if of.len() < tf.len() {
        assert!(
            g.complete && of.len() >= gdb_pcs.len(),
            "theirs has frames where ours stops short of the reference: {context}"
        );
        d.theirs_past_gdb += tf.len() - of.len();
    }
    eprintln!("{context}");
}

/// `assert_human_agrees` on minidump-stackwalk's `--human` text of `dump` over `store`
/// and ours (`program ARGS…`), for the crashed thread's frames the JSON documents `ours`
/// and `theirs` agree on, as the text counts them (each inlined function a line of its
/// own).
pub fn assert_human_text_agrees(
    case: &str,
    (dump, store): (&std::ffi::OsStr, &std::ffi::OsStr),
    (program, args): (&Path, &[&std::ffi::OsStr]),
    ours: &Value,
    theirs: &Value,
) {
    let crashed = |v: &Value| {
        v["crashing_thread"]["frames"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let agreeing: usize = crashed(ours)
        .iter()
        .zip(crashed(theirs).iter())
        .take_while(|(a, b)| a["offset"] == b["offset"])
        .map(|(a, _)| 1 + a["inlines"].as_array().map_or(0, Vec::len))
        .sum();
    let their_text = run(Path::new("minidump-stackwalk"), &[dump, store]);
    let our_text = run(program, args);
    assert_human_agrees(case, &their_text, &our_text, agreeing);
}

/// The human-readable texts read the same way: the same summary (with the crashing
/// instruction and its memory accesses; our analysis line and the bit-flip lines, which
/// follow the JSON's `possible_bit_flips`, left out), the same loaded modules, and for the
/// frames
/// the JSON documents agree on, the same frame lines and "Found by" lines (theirs' offset
/// from the source line's first instruction, `[file : line + 0x4]`, left out: the report
/// has no line start).
pub fn assert_human_agrees(case: &str, theirs: &str, ours: &str, agreeing_frames: usize) {
    let strip = |l: &str| -> String {
        let l = match (l.rfind(" + 0x"), l.ends_with(']')) {
            (Some(i), true) if l[..i].contains(" : ") => format!("{}]", &l[..i]),
            _ => l.to_string(),
        };
        // a C++ name's parameter list, as in the JSON (`bare_names`)
        let Some(bang) = l.find('!') else { return l };
        let Some(open) = l[bang..].find('(').map(|i| bang + i) else {
            return l;
        };
        let end = [" [", " + 0x"]
            .iter()
            .filter_map(|m| l[open..].find(m).map(|i| open + i))
            .min()
            .unwrap_or(l.len());
        format!("{}{}", &l[..open], &l[end..])
    };
    let summary = |text: &str| -> Vec<String> {
        text.lines()
            .take_while(|l| !l.starts_with("Thread "))
            .filter(|l| {
                !(l.starts_with("Crash analysis:")
                    || l.starts_with("Crashing address may be the result of a flipped bit")
                    || l.split_once(". Valid address: ")
                        .is_some_and(|(n, _)| n.trim_start().parse::<usize>().is_ok()))
            })
            .map(str::to_string)
            .collect()
    };
    assert_eq!(summary(ours), summary(theirs), "{case}: summary");
    let modules = |text: &str| -> BTreeSet<String> {
        text.lines()
            .skip_while(|l| *l != "Loaded modules:")
            .take_while(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    assert_eq!(modules(ours), modules(theirs), "{case}: loaded modules");
    let crashed = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("Thread "))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .filter(|l| !l.starts_with("     ") || l.starts_with("    Found by"))
            .map(strip)
            .take(2 * agreeing_frames)
            .collect()
    };
    let (o, t) = (crashed(ours), crashed(theirs));
    assert!(!t.is_empty(), "{case}: no frames in their text");
    // "Found by" may be better in ours, as `trust` in the JSON
    let found_by = |l: &str| {
        let how = l.strip_prefix("    Found by: ")?;
        [
            "stack scanning",
            "previous frame's frame pointer",
            "call frame info",
            "given as instruction pointer in context",
        ]
        .iter()
        .position(|h| *h == how)
    };
    assert_eq!(
        o.len(),
        t.len(),
        "{case}: the crashed thread's frames\n{o:#?}\n{t:#?}"
    );
    for (a, b) in o.iter().zip(&t) {
        if matches!((found_by(a), found_by(b)), (Some(x), Some(y)) if x > y) {
            continue;
        }
        assert_eq!(a, b, "{case}: the crashed thread's frames\n{o:#?}\n{t:#?}");
    }
    let heading = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("Thread "))
            .map(str::to_string)
    };
    assert_eq!(
        heading(ours),
        heading(theirs),
        "{case}: crashed thread heading"
    );
}

/// A core's document has the fields a minidump's has: the same top-level fields, the same
/// fields in every frame and module (values a core does not record, such as the OS
/// version, are `null`).
pub fn assert_same_shape(case: &str, minidump: &Value, core: &Value) {
    let keys = |v: &Value| -> BTreeSet<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(keys(core), keys(minidump), "{case}: top-level fields");
    for p in ["system_info", "crash_info"] {
        assert_eq!(keys(at(core, p)), keys(at(minidump, p)), "{case}: {p}");
    }
    let first = |v: &Value, list: &str| v[list][0].clone();
    assert_eq!(
        keys(&first(&core["crashing_thread"], "frames")),
        keys(&first(&minidump["crashing_thread"], "frames")),
        "{case}: frame fields"
    );
    assert_eq!(
        keys(&first(core, "modules")),
        keys(&first(minidump, "modules")),
        "{case}: module fields"
    );
    assert_eq!(
        core["crashing_thread"]["thread_id"],
        minidump["crashing_thread"]["thread_id"]
    );
}
