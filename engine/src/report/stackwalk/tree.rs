//! The stackwalk JSON document as the writer made it before it was streamed: a
//! `serde_json::Value` tree built from the report, then serialized. Kept for the tests
//! only, as the reference the streamed document must equal byte for byte.

use serde_json::{json, Map, Value};

use super::*;
use crate::report::{Report, Thread};

/// The report as minidump-stackwalk's `--json` document.
pub(super) fn json(report: &Report) -> Value {
    let width = Width::of(report.dump.arch);
    let system = &report.dump.system;
    let crash = report.crash.as_ref();
    let threads: Vec<Value> = report
        .threads
        .iter()
        .map(|t| thread_json(t, report, width))
        .collect();
    let crashing_thread = crash.and_then(|c| {
        let mut thread = threads.get(c.thread)?.clone();
        let registers = registers_json(report.threads.get(c.thread)?, report.dump.arch, width);
        let obj = thread.as_object_mut()?;
        let first = obj
            .get_mut("frames")?
            .as_array_mut()?
            .first_mut()?
            .as_object_mut()?;
        first.insert("registers".into(), registers);
        obj.insert("threads_index".into(), json!(c.thread));
        Some(thread)
    });
    let mut doc = json!({
        "status": "OK",
        "system_info": {
            "os": os_name(report.dump.os),
            "os_ver": system.os_version,
            "cpu_arch": cpu_name(report.dump.arch),
            "cpu_info": system.cpu_info,
            "cpu_count": system.cpu_count,
            "cpu_microcode_version": system.cpu_microcode_version,
        },
        "crash_info": crash_info(report, width),
        "lsb_release": system.distribution.as_ref().map(|d| json!({
            "id": d.id,
            "release": d.release,
            "codename": d.codename,
            "description": d.description,
        })),
        "proc_limits": system.limits.as_ref().map(|limits| json!({
            "limits": limits.iter().map(|l| json!({
                "name": l.name,
                "soft": limit_value(&l.soft),
                "hard": limit_value(&l.hard),
                "unit": l.unit,
            })).collect::<Vec<_>>(),
        })),
        "soft_errors": system
            .writer_errors
            .as_deref()
            .and_then(|e| serde_json::from_str::<Value>(e).ok()),
        "mac_crash_info": Value::Null,
        "mac_boot_args": Value::Null,
        "linux_memory_map_count": system.memory_map_count,
        "main_module": main_first(report).first().map(|_| 0),
        "modules_contains_cert_info": false,
        "modules": main_first(report)
            .into_iter()
            .map(|m| module_json(m, report, width))
            .collect::<Vec<_>>(),
        "pid": report.dump.pid,
        "process_uptime": system.uptime_seconds,
        "thread_count": report.threads.len(),
        "threads": threads,
        "unloaded_modules": report.unloaded_modules.iter().map(|m| json!({
            "base_addr": width.addr(m.base),
            "end_addr": width.addr(m.end),
            "code_id": m.code_id.as_ref().or(m.build_id.as_ref()),
            "filename": m.path.as_ref().unwrap_or(&m.name),
            "cert_subject": Value::Null,
        })).collect::<Vec<_>>(),
        "handles": system.handles.as_ref().map(|handles| handles.iter().map(|h| json!({
            "handle": h.handle,
            "type_name": h.type_name,
            "object_name": h.object_name,
        })).collect::<Vec<_>>()),
    });
    if let (Some(t), Some(obj)) = (crashing_thread, doc.as_object_mut()) {
        obj.insert("crashing_thread".into(), t);
    }
    doc
}

fn thread_json(t: &Thread, report: &Report, width: Width) -> Value {
    let frames: Vec<Value> = real_frames(t)
        .into_iter()
        .enumerate()
        .map(|(i, real)| {
            let f = real.frame;
            let at = Address::of(f, i, report.dump.arch);
            let inlines = (!real.inlines.is_empty()).then(|| {
                real.inlines
                    .iter()
                    .map(|inline| {
                        json!({
                            "function": inline.function,
                            "file": inline.file,
                            "line": inline.line,
                        })
                    })
                    .collect::<Vec<_>>()
            });
            json!({
                "frame": i,
                "trust": trust_name(f.trust),
                "offset": width.hex(at.offset),
                "module": f.module,
                "module_offset": at.module_offset.map(|o| width.hex(o)),
                "unloaded_modules": Value::Null,
                "function": f.function,
                "function_offset": at.function_offset.map(|o| width.hex(o)),
                "file": f.file,
                "line": f.line,
                "missing_symbols": f.function.is_none(),
                "inlines": inlines,
            })
        })
        .collect();
    json!({
        "thread_name": t.name,
        "thread_id": t.tid,
        "last_error_value": Value::Null,
        "frame_count": frames.len(),
        "frames": frames,
    })
}

fn crash_info(report: &Report, width: Width) -> Value {
    let Some(c) = &report.crash else {
        return Value::Null;
    };
    let instruction = c.instruction.as_ref();
    let accesses = instruction.map(|i| {
        i.accesses
            .iter()
            .map(|a| {
                let mut access = json!({
                    "address": width.addr(a.address),
                    "size": a.size,
                });
                if let (Some(k), Some(obj)) = (a.access, access.as_object_mut()) {
                    obj.insert("access_type".into(), json!(access_type(k).to_lowercase()));
                }
                access
            })
            .collect::<Vec<_>>()
    });
    json!({
        "type": crash_type(report),
        "address": c.address.map(|a| width.addr(a)),
        "adjusted_address": adjusted(report).map(|a| match a {
            Adjusted::NullPointer(offset) => json!({
                "kind": "null-pointer",
                "offset": width.hex(offset),
            }),
            Adjusted::NonCanonical(address) => json!({
                "kind": "non-canonical",
                "address": width.hex(address),
            }),
        }),
        "instruction": instruction.map(|i| &i.text),
        "memory_accesses": accesses,
        "instruction_pointer_update": instruction
            .and_then(|i| i.jump)
            .map(|a| json!({ "address": width.addr(a) })),
        "possible_bit_flips": possible_bit_flips(report, width),
        "crash_inconsistencies": [],
        "crashing_thread": c.thread,
        "assertion": c.assertion,
    })
}

impl BitFlip {
    fn json(&self, width: Width) -> Value {
        json!({
            "address": width.hex(self.address),
            "details": {
                "was_non_canonical": false,
                "is_null": self.is_null,
                "was_low": self.was_low,
                "poison_registers": self.poison_registers,
                "nearby_registers": self.nearby_registers,
            },
            "confidence": self.confidence(),
            "source_register": Value::Null,
        })
    }
}

/// `crash_info.possible_bit_flips`: `null` when there are none, as minidump-stackwalk
/// writes it.
fn possible_bit_flips(report: &Report, width: Width) -> Value {
    let flips = bit_flips(report, width);
    if flips.is_empty() {
        return Value::Null;
    }
    Value::Array(flips.iter().map(|f| f.json(width)).collect())
}

fn registers_json(t: &Thread, arch: Arch, width: Width) -> Value {
    let map: Map<String, Value> = gprs(t, arch, width)
        .into_iter()
        .map(|(name, value)| (name.to_string(), Value::String(value)))
        .collect();
    Value::Object(map)
}

fn module_json(m: &crate::report::Module, report: &Report, width: Width) -> Value {
    let loaded = !m.symbols.is_empty();
    // minidump-stackwalk looks for a module's symbols when a frame is in it, and says
    // they are missing only then
    let looked_for = report
        .threads
        .iter()
        .flat_map(|t| &t.frames)
        .any(|f| f.module_index == Some(m.index));
    let symbol_url = m
        .lookups
        .iter()
        .find(|l| l.result == crate::report::LookupResult::Fetched)
        .map(|l| l.source.clone());
    json!({
        "base_addr": width.addr(m.base),
        "end_addr": width.addr(m.end),
        "debug_file": debug_file(m, report),
        "debug_id": m.debug_id.as_deref().unwrap_or(NIL_DEBUG_ID),
        "filename": m.name,
        "code_id": m.code_id.as_ref().or(m.build_id.as_ref()),
        "version": m.version,
        "cert_subject": Value::Null,
        "missing_symbols": looked_for && !loaded,
        // as `missing_symbols`: said of the modules a frame landed in
        "loaded_symbols": looked_for && loaded,
        "corrupt_symbols": m.status == crate::report::ModuleStatus::Corrupt,
        "symbol_url": symbol_url,
    })
}

/// A limit as minidump-stackwalk writes it: a number, or a word (`unlimited`).
fn limit_value(v: &str) -> Value {
    v.parse::<u64>().map_or_else(|_| json!(v), |n| json!(n))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    //! The streamed document against the tree rendering above, byte for byte, on every
    //! report the fixtures hold (cores and minidumps, x86_64 and aarch64, as `walk` and
    //! the service write them) and on each of them given every field the fixtures leave
    //! empty.

    use std::path::PathBuf;

    use serde_json::{json, Value};

    use super::super::{document, write_json};
    use crate::report::Report;

    fn fixtures() -> Vec<(PathBuf, Value)> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/reports/expected");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, serde_json::from_str(&text).unwrap()));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Every field the stackwalk document renders, filled: the system streams, the
    /// crashing instruction with a null base and a jump, bit flips, an assertion, an
    /// inlined frame, an unloaded module, a fetched symbol file.
    fn enriched(mut v: Value) -> Value {
        v["dump"]["system"] = json!({
            "os_version": "6.1.0 #1 SMP \"quoted\"",
            "cpu_info": "GenuineIntel family 6",
            "cpu_count": 2,
            "cpu_microcode_version": "0xf0",
            "distribution": {"id": "Debian", "release": "12", "codename": "bookworm",
                             "description": "Debian GNU/Linux 12 (bookworm)"},
            "memory_map_count": 123,
            "uptime_seconds": 42,
            "limits": [{"name": "Max open files", "soft": "1024", "hard": "unlimited", "unit": "files"}],
            "handles": [{"handle": 4, "type_name": "File", "object_name": null}],
            "writer_errors": "[{\"z\": 1, \"a\": [2, \"x\"]}]",
        });
        let crash = &mut v["crash"];
        crash["assertion"] = json!("x != 0");
        crash["address"] = json!("0x10");
        crash["instruction"] = json!({
            "text": "mov dword [rdi+0x10], eax",
            "accesses": [
                {"address": "0x10", "size": 4, "access": "write", "base_null": true},
                {"address": "0x7ffc0000", "size": null, "access": "read-write", "base_null": false},
                {"address": "0x7ffc0008", "size": 8, "access": null, "base_null": false},
            ],
            "jump": "0x401000",
        });
        crash["analysis"] = json!({
            "kind": "unmapped-access",
            "summary": "s",
            "evidence": {"bit_flip_of": "0x0 0x400000 0x7ffc0010 0xzz"},
        });
        let thread = crash["thread"].as_u64().unwrap() as usize;
        if let Some(frames) = v["threads"][thread]["frames"].as_array_mut() {
            if let Some(first) = frames.get(1).cloned() {
                let mut inline = first.clone();
                inline["inlined"] = json!(true);
                inline["function"] = json!("inlined_here");
                inline["file"] = json!("/src/a\\b.h");
                inline["line"] = json!(7);
                frames.insert(1, inline.clone());
                frames.insert(1, inline);
            }
        }
        v["unloaded_modules"] = json!([{"name": "gone.so", "path": "/lib/gone.so",
            "base": "0x1000", "end": "0x2000", "build_id": "ab", "debug_id": null}]);
        if let Some(m) = v["modules"].get_mut(0) {
            m["lookups"] = json!([{"source": "https://symbols.example/", "file": "sym",
                                   "result": "fetched"}]);
            m["status"] = json!("corrupt");
        }
        v
    }

    fn same(what: &str, report: &Report) {
        let tree = super::json(report);
        let compact = serde_json::to_string(&document(report)).unwrap();
        assert_eq!(compact, serde_json::to_string(&tree).unwrap(), "{what}");
        // `--json`'s writing: the frames by hand
        let mut written = Vec::new();
        write_json(report, &mut written, false).unwrap();
        assert_eq!(
            String::from_utf8(written).unwrap(),
            compact + "\n",
            "{what}"
        );
        let mut pretty = Vec::new();
        write_json(report, &mut pretty, true).unwrap();
        let want = serde_json::to_string_pretty(&tree).unwrap() + "\n";
        assert_eq!(String::from_utf8(pretty).unwrap(), want, "{what}");
    }

    #[test]
    fn streamed_document_is_the_tree_byte_for_byte() {
        let fixtures = fixtures();
        assert!(fixtures.len() >= 10, "{} fixture reports", fixtures.len());
        for (path, v) in fixtures {
            let what = path.display().to_string();
            let report: Report = serde_json::from_value(v.clone()).unwrap();
            same(&what, &report);
            // an address that is not one is refused where the report is read, not
            // passed through to the rendering
            let mut bad = enriched(v.clone());
            bad["unloaded_modules"][0]["end"] = json!("not-hex");
            assert!(serde_json::from_value::<Report>(bad).is_err(), "{what}");
            let rich: Report = serde_json::from_value(enriched(v)).unwrap();
            assert!(rich.crash.as_ref().unwrap().analysis.is_some());
            same(&format!("{what}, enriched"), &rich);
            // the crashed thread without frames: no `crashing_thread`
            let mut bare = rich.clone();
            let t = bare.crash.as_ref().unwrap().thread;
            bare.threads[t].frames.clear();
            same(&format!("{what}, no frames"), &bare);
            // no crash at all
            let mut quiet = rich;
            quiet.crash = None;
            same(&format!("{what}, no crash"), &quiet);
        }
    }
}
