//! Fuzz target: arbitrary text as a signature rules file, and as the function and module
//! names of a crashed thread's frames (names come from the dump's modules, which anyone
//! can upload). Before the first NUL: the rules; after it, one frame per line
//! (`module\tfunction`). Parsing must decline cleanly or give rules whose signature of
//! any frames is made without a panic, from the frames it indexes, with no more parts
//! than the rules allow.
#![no_main]

use engine::dump::Os;
use engine::report::signature::SignatureRules;
use engine::report::{Addr, Frame, Thread};
use engine::walk::{EndReason, Trust};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (rules, frames) = text.split_once('\0').unwrap_or((text, ""));
    let Ok(rules) = SignatureRules::parse(rules) else {
        return;
    };
    let frames: Vec<Frame> = frames
        .lines()
        .take(256)
        .enumerate()
        .map(|(i, l)| {
            let (module, function) = l.split_once('\t').unwrap_or((l, ""));
            Frame {
                index: i,
                pc: Addr(0x1000 + i as u64),
                sp: None,
                trust: if i % 5 == 3 { Trust::Scan } else { Trust::Cfi },
                unwind_source: None,
                module: (!module.is_empty()).then(|| module.to_string()),
                module_index: None,
                module_offset: Some(Addr(i as u64)),
                function: (!function.is_empty()).then(|| function.to_string()),
                function_offset: None,
                file: None,
                line: None,
                column: None,
                inlined: false,
                symbol_source: None,
                pre_context: Default::default(),
                context_line: None,
                post_context: Default::default(),
                source_url: None,
            }
        })
        .collect();
    let n = frames.len();
    let thread = Thread {
        index: 0,
        tid: 1,
        name: None,
        crashed: true,
        registers: Default::default(),
        frames,
        end: EndReason::Outermost,
        end_detail: None,
    };
    for os in [Os::Linux, Os::Windows, Os::Macos] {
        let e = rules.explain(os, &thread, None);
        assert_eq!(e.frames.len(), n);
        if let Some(s) = e.signature {
            assert!(s.frames.iter().all(|&i| i < n));
            assert!(s.frames.len() <= rules.frames + rules.max_prefix + 1);
        }
    }
});
