//! Tests of the SFrame reader against the ground-truth vectors made by GNU binutils
//! (`fixtures/sframe`, see its README): every decode must print exactly what
//! `objdump --sframe` printed, and every corrupted vector must be rejected with the
//! typed error the README asks for.

use super::objdump::{self, Binutils};
use super::{Abi, FdeType, FreRule, PcType, Sframe, SframeError};

/// `fixtures/sframe`, found from the running test's package (`CARGO_MANIFEST_DIR` as
/// `cargo test` sets it), not a compiled-in path, which may be another clone's when builds
/// are shared.
fn fixtures() -> String {
    let package = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    format!("{package}/../fixtures/sframe")
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/{name}", fixtures());
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn manifest() -> Vec<serde_json::Value> {
    let m: serde_json::Value =
        serde_json::from_slice(&fixture("manifest.json")).expect("manifest.json parses");
    m["vectors"].as_array().expect("vectors[]").clone()
}

fn vma(v: &serde_json::Value) -> u64 {
    let s = v["section"]["vma"].as_str().expect("section.vma");
    u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex vma")
}

/// The one normalisation of objdump's text: drop the lines before `Contents of the
/// SFrame section` (a blank line and `FILE:     file format …`, which name the input
/// file and are not part of the decode). Nothing after that line is touched.
fn objdump_decode_part(text: &str) -> Option<&str> {
    let at = text.find("Contents of the SFrame section")?;
    Some(&text[at..])
}

/// binutils 2.47's objdump applies `.rela.sframe` before printing a relocatable
/// object; this applies the `R_X86_64_PC64` entries of `NAME.relocs.txt` (`readelf -r`
/// text) the same way: the field becomes `S + A - P` with `.text` at 0 and P the
/// field's offset (the section's address is 0 in a `.o`).
fn apply_pc64_relocs(bytes: &mut [u8], relocs_txt: &str) {
    for line in relocs_txt.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 7 || f[2] != "R_X86_64_PC64" {
            continue;
        }
        let offset = usize::from_str_radix(f[0], 16).expect("reloc offset");
        let sym = i64::from_str_radix(f[3], 16).expect("symbol value");
        let addend = i64::from_str_radix(f[6], 16).expect("addend");
        let value = sym + addend - offset as i64;
        bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
    }
}

#[test]
fn every_ok_vector_decodes_exactly_as_objdump_prints_it() {
    let mut checked = 0;
    for v in manifest() {
        if v["expect"] != "ok" {
            continue;
        }
        let name = v["name"].as_str().expect("name");
        let files = &v["files"];
        let mut bytes = fixture(files["sframe"].as_str().expect("sframe file"));
        let binutils = Binutils::parse(v["binutils"].as_str().expect("binutils")).expect("version");
        if let Some(relocs) = files["relocs"].as_str() {
            // 2.41/2.44 objdump print the stored (unrelocated) start fields.
            if binutils >= Binutils::LATEST {
                let txt = String::from_utf8(fixture(relocs)).expect("utf-8");
                apply_pc64_relocs(&mut bytes, &txt);
            }
        }
        let expected_text =
            String::from_utf8(fixture(files["objdump"].as_str().expect("objdump"))).expect("utf8");
        let expected = objdump_decode_part(&expected_text)
            .unwrap_or_else(|| panic!("{name}: objdump printed no decode"));
        let section = Sframe::parse(&bytes, vma(&v)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ours = objdump::format(&section, ".sframe", binutils);
        if ours != expected {
            let diff: Vec<String> = ours
                .lines()
                .zip(expected.lines())
                .enumerate()
                .filter(|(_, (a, b))| a != b)
                .take(5)
                .map(|(i, (a, b))| format!("line {i}:\n  ours:    {a:?}\n  objdump: {b:?}"))
                .collect();
            panic!(
                "{name}: decode differs from objdump ({} vs {} lines)\n{}",
                ours.lines().count(),
                expected.lines().count(),
                diff.join("\n")
            );
        }
        // header fields as the manifest records them
        let h = &v["header"];
        assert_eq!(
            u64::from(section.header.num_fdes),
            h["num_fdes"].as_u64().expect("n")
        );
        assert_eq!(
            u64::from(section.header.fre_len),
            h["fre_len"].as_u64().expect("n")
        );
        assert_eq!(
            section.header.abi as u64,
            h["abi_arch"].as_u64().expect("n")
        );
        checked += 1;
    }
    assert_eq!(checked, 28, "ok vectors compared");
}

#[test]
fn facts_of_the_manifest_hold() {
    for v in manifest() {
        if v["expect"] != "ok" {
            continue;
        }
        let name = v["name"].as_str().expect("name");
        let bytes = fixture(v["files"]["sframe"].as_str().expect("sframe"));
        let s = Sframe::parse(&bytes, vma(&v)).expect("parses");
        let facts = &v["facts"];
        let count = |f: &dyn Fn(&super::Fde) -> bool| s.fdes.iter().filter(|d| f(d)).count() as u64;
        assert_eq!(
            count(&|d| d.signal),
            facts["signal_fdes"].as_u64().expect("n"),
            "{name}"
        );
        assert_eq!(
            count(&|d| d.pauth_key_b),
            facts["pauth_b_fdes"].as_u64().expect("n"),
            "{name}"
        );
        assert_eq!(
            count(&|d| d.fde_type == FdeType::Flex),
            facts["flex_fdes"].as_u64().expect("n"),
            "{name}"
        );
        let fres = || s.fdes.iter().flat_map(|d| d.fres.iter());
        assert_eq!(
            fres().filter(|f| f.word_count() == 0).count() as u64,
            facts["ra_undefined_fres"].as_u64().expect("n"),
            "{name}"
        );
        assert_eq!(
            fres().filter(|f| f.mangled_ra()).count() as u64,
            facts["mangled_ra_fres"].as_u64().expect("n"),
            "{name}"
        );
        let mut sizes: Vec<u64> = fres()
            .filter(|f| f.word_count() > 0)
            .map(|f| f.word_size() as u64)
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        let want: Vec<u64> = facts["dataword_sizes"]
            .as_array()
            .expect("sizes")
            .iter()
            .filter_map(|x| x.as_u64())
            .collect();
        assert_eq!(sizes, want, "{name}: data word sizes");
        let mut reps: Vec<u64> = s
            .fdes
            .iter()
            .filter(|d| d.pc_type == PcType::Mask)
            .map(|d| u64::from(d.rep_size))
            .collect();
        reps.sort_unstable();
        reps.dedup();
        let want: Vec<u64> = facts["rep_sizes"]
            .as_array()
            .expect("reps")
            .iter()
            .filter_map(|x| x.as_u64())
            .collect();
        assert_eq!(reps, want, "{name}: rep sizes");
    }
}

#[test]
fn version_1_is_a_typed_unsupported_error() {
    for name in ["v1-x86_64-shapes.sframe", "v1-aarch64-cfi.sframe"] {
        let err = Sframe::parse(&fixture(name), 0).expect_err(name);
        assert_eq!(err, SframeError::UnsupportedVersion(1), "{name}");
        assert_eq!(err.code(), "sframe-unsupported-version");
    }
}

#[test]
fn corrupt_vectors_are_rejected_with_typed_errors() {
    let parse = |name: &str| Sframe::parse(&fixture(&format!("{name}.sframe")), 0x2220);
    // section cut inside the last FRE: the FRE sub-section no longer fits
    assert!(matches!(
        parse("corrupt-v3-truncated-fres"),
        Err(SframeError::Truncated {
            what: "FRE sub-section",
            ..
        })
    ));
    assert!(matches!(
        parse("corrupt-v3-truncated-header"),
        Err(SframeError::Truncated {
            what: "header",
            offset: 0,
            needed: 28,
            have: 20
        })
    ));
    for name in ["corrupt-v3-fde-count", "corrupt-v2-fde-count"] {
        assert!(
            matches!(
                parse(name),
                Err(SframeError::CountTooLarge { what: "FDE", .. })
            ),
            "{name}: {:?}",
            parse(name)
        );
    }
    assert!(matches!(
        parse("corrupt-v3-fre-offset"),
        Err(SframeError::FreOffsetOutOfRange {
            fde: 1,
            offset: 0xffff_ff00,
            ..
        })
    ));
    assert!(matches!(
        parse("corrupt-v2-fre-offset"),
        Err(SframeError::FreOffsetOutOfRange { fde: 2, .. })
    ));
    // unsorted despite SFRAME_F_FDE_SORTED: structurally readable, refused for lookup
    for (name, index) in [("corrupt-v3-unsorted", 1), ("corrupt-v2-unsorted", 1)] {
        let s = parse(name).expect("readable");
        assert_eq!(
            s.check_layout(),
            Err(SframeError::FdesNotSorted { index }),
            "{name}"
        );
    }
}

#[test]
fn linked_vectors_pass_the_layout_check() {
    for v in manifest() {
        if v["expect"] != "ok" || v["elf_type"] == "ET_REL" {
            continue;
        }
        let bytes = fixture(v["files"]["sframe"].as_str().expect("sframe"));
        let s = Sframe::parse(&bytes, vma(&v)).expect("parses");
        assert_eq!(s.check_layout(), Ok(()), "{}", v["name"]);
    }
}

#[test]
fn big_endian_is_found_from_the_magic() {
    let bytes = fixture("v3-s390x-shapes.sframe");
    assert_eq!(&bytes[..2], &[0xde, 0xe2]);
    let s = Sframe::parse(&bytes, 0xef0).expect("parses");
    assert_eq!(s.header.endian, super::Endian::Big);
    assert_eq!(s.header.abi, Abi::S390x);
    // the first row of the first function: CFA = SP + 160 (stored as 0)
    let fde = &s.fdes[0];
    assert_eq!(fde.func_start, 0x620);
    match fde.fres[0].rule(&s.header, fde.fde_type) {
        FreRule::Rule { cfa: Some(cfa), .. } => assert_eq!(cfa.offset, 160),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_prefix_and_bit_flip_is_an_error_or_a_value() {
    for name in [
        "v3-x86_64-cfi.sframe",
        "v2-244-aarch64-cfi.sframe",
        "v3-s390x-shapes.sframe",
    ] {
        let good = fixture(name);
        for cut in 0..good.len() {
            let _ = Sframe::parse(&good[..cut], 0x1000).map(|s| s.check_layout());
        }
        for i in 0..good.len() {
            for bit in [0x01u8, 0x10, 0x80] {
                let mut bad = good.clone();
                bad[i] ^= bit;
                if let Ok(s) = Sframe::parse(&bad, u64::MAX - 8) {
                    let _ = s.check_layout();
                    for fde in &s.fdes {
                        for fre in &fde.fres {
                            let _ = fre.rule(&s.header, fde.fde_type);
                        }
                    }
                    let _ = objdump::format(&s, ".sframe", Binutils::LATEST);
                }
            }
        }
    }
}
