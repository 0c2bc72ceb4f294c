//! The engine's modules form layers (their order is in `src/lib.rs`, one `// N.` comment
//! per layer): a module may name modules of its own layer or below, never above. This
//! test reads the sources and fails on an upward reference, so a helper a low layer
//! needs is moved down to the layer that owns it instead of reached for.
//!
//! What counts: `crate::module` paths and `use crate::{module, …}` lists in code. Not
//! counted: comments (doc links may point anywhere) and tests — a file's code after its
//! first `#[cfg(test)]` at the start of a line (the house puts test modules last), and
//! test files included by `#[path]` (named `tests.rs` or `*_tests.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each module of `lib.rs` with its layer number.
fn layers(lib: &str) -> BTreeMap<String, u32> {
    let mut layer = None;
    let mut out = BTreeMap::new();
    for line in lib.lines().map(str::trim) {
        if let Some(n) = line
            .strip_prefix("// ")
            .and_then(|rest| rest.split_once(". "))
            .and_then(|(n, _)| n.parse::<u32>().ok())
        {
            layer = Some(n);
            continue;
        }
        let module = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
            .and_then(|m| m.strip_suffix(';'));
        if let Some(m) = module {
            let n = layer.unwrap_or_else(|| {
                panic!("lib.rs: module `{m}` is above every `// N.` layer comment")
            });
            out.insert(m.to_string(), n);
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules `line` (code, not a comment) names through `crate::`.
fn named(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(list) = after.strip_prefix('{') {
            let end = list.find('}').unwrap_or(list.len());
            for item in list[..end].split(',') {
                let head = item.trim().split("::").next().unwrap_or("").trim();
                if !head.is_empty() {
                    out.push(head.to_string());
                }
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            out.push(after[..end].to_string());
        }
        rest = after;
    }
    out
}

/// Upward references of the source tree under `src`, as `file:line: text` strings.
fn upward_references(src: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let layers = layers(&lib);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "tests.rs" || name.ends_with("_tests.rs") || name == "lib.rs" {
            continue;
        }
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(|c| c.trim_end_matches(".rs").to_string())
            .expect("a path under src");
        let own = *layers.get(&top).unwrap_or_else(|| {
            panic!(
                "{}: module `{top}` is not in lib.rs's layers",
                rel.display()
            )
        });
        let text = std::fs::read_to_string(&file).expect("read");
        for (i, line) in text.lines().enumerate() {
            if line.starts_with("#[cfg(test)]") {
                break;
            }
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for module in named(code) {
                if let Some(&theirs) = layers.get(&module) {
                    if theirs > own {
                        found.push(format!(
                            "{}:{}: `{top}` (layer {own}) names `{module}` (layer {theirs}): {}",
                            rel.display(),
                            i + 1,
                            code.trim()
                        ));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn no_module_of_the_engine_names_a_module_of_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = upward_references(&src);
    assert!(
        found.is_empty(),
        "upward references in the engine (move the helper down to the layer that owns it):\n{}",
        found.join("\n")
    );
}

/// The check itself finds what it is for: a low module naming a high one, in a path or a
/// `use` list, and passes over comments and tests.
#[test]
fn the_check_finds_an_upward_reference_and_ignores_comments_and_tests() {
    let dir = std::env::temp_dir().join(format!("pm-layers-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("low")).expect("mkdir");
    std::fs::write(
        src.join("lib.rs"),
        "// 0. Low.\npub mod low;\n// 1. High.\npub mod high;\n",
    )
    .expect("write");
    std::fs::write(src.join("high.rs"), "use crate::low::thing;\n").expect("write");
    std::fs::write(
        src.join("low/mod.rs"),
        "//! see [`crate::high`]\nuse crate::{high, low};\nfn f() { crate::high::g() }\n#[cfg(test)]\nmod tests { use crate::high; }\n",
    )
    .expect("write");
    std::fs::write(src.join("low/tests.rs"), "use crate::high;\n").expect("write");
    let found = upward_references(&src);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("low/mod.rs:2:"), "{found:#?}");
    assert!(found[1].starts_with("low/mod.rs:3:"), "{found:#?}");
}
