#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn rules(specs: &[&str]) -> Rules {
    let mut r = Rules::new();
    for s in specs {
        r.add(s).unwrap();
    }
    r
}

fn found(spec: &str, hay: &str) -> Vec<String> {
    rules(&[spec])
        .matches(hay.as_bytes())
        .into_iter()
        .map(|m| hay[m].to_string())
        .collect()
}

#[test]
fn luhn_cases() {
    // Test numbers of the card networks.
    for good in [
        "4111111111111111",
        "5500005555555559",
        "378282246310005",
        "6011111111111117",
    ] {
        assert!(luhn(good.as_bytes()), "{good}");
    }
    assert!(luhn(b"4111 1111 1111 1111"), "separators are ignored");
    for bad in [
        "4111111111111112",
        "1234567812345678",
        "411111111111",
        "41111111111111111111",
    ] {
        assert!(!luhn(bad.as_bytes()), "{bad}");
    }
}

#[test]
fn card_numbers() {
    assert_eq!(
        found("builtin:card", "pay 4111-1111-1111-1111 now"),
        ["4111-1111-1111-1111"]
    );
    assert_eq!(
        found("builtin:card", "n=5500005555555559;"),
        ["5500005555555559"]
    );
    assert!(
        found("builtin:card", "pay 4111111111111112 now").is_empty(),
        "Luhn fails"
    );
    assert!(
        found("builtin:card", "id 123456789012345678901234").is_empty(),
        "too long a run"
    );
    assert!(
        found("builtin:card", "x4111111111111111").is_empty(),
        "inside a word"
    );
}

#[test]
fn bearer_tokens() {
    assert_eq!(
        found(
            "builtin:bearer",
            "Authorization: Bearer eyJhbGciOi.J9x_y-z~+/== next"
        ),
        ["Bearer eyJhbGciOi.J9x_y-z~+/=="]
    );
    assert_eq!(
        found("builtin:bearer", "bearer\tabcdefgh1"),
        ["bearer\tabcdefgh1"]
    );
    assert!(found("builtin:bearer", "Bearer short").is_empty());
    assert!(found("builtin:bearer", "the bearers of news").is_empty());
}

#[test]
fn keys() {
    assert_eq!(
        found("builtin:keys", "k=AKIAIOSFODNN7EXAMPLE."),
        ["AKIAIOSFODNN7EXAMPLE"]
    );
    assert_eq!(
        found("builtin:keys", "id AKIAIOSFODNN7EXAMPLE."),
        ["AKIAIOSFODNN7EXAMPLE"]
    );
    assert!(found("builtin:keys", "AKIAshort").is_empty());
    let pem =
        "x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK==\n-----END RSA PRIVATE KEY-----\ny";
    assert_eq!(
        found("builtin:keys", pem),
        ["-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK==\n-----END RSA PRIVATE KEY-----"]
    );
    let cut = "-----BEGIN PRIVATE KEY-----\nMIIEow\0\0\0";
    assert_eq!(
        found("builtin:keys", cut),
        ["-----BEGIN PRIVATE KEY-----\nMIIEow\0"]
    );
    assert_eq!(
        found(
            "builtin:keys",
            "GET /?api_key=s3cr3tv4l&x=1 password: \"hunter22\" Token=abcd"
        ),
        ["api_key=s3cr3tv4l", "password: \"hunter22", "Token=abcd"]
    );
    assert!(
        found("builtin:keys", "token=ab").is_empty(),
        "too short a value"
    );
    assert!(found("builtin:keys", "a public key").is_empty());
}

#[test]
fn emails() {
    assert_eq!(
        found(
            "builtin:email",
            "to: Jane.Doe+crash@mail.example.co.uk, bob@x.io"
        ),
        ["Jane.Doe+crash@mail.example.co.uk", "bob@x.io"]
    );
    assert!(found("builtin:email", "user@localhost and a@b").is_empty());
}

#[test]
fn bad_rules_are_refused_with_a_message() {
    let mut r = Rules::new();
    let e = r.add("regex:(unclosed").unwrap_err();
    assert!(matches!(e, RuleError::BadRegex { .. }), "{e}");
    assert!(e.to_string().contains("(unclosed"), "{e}");
    assert_eq!(
        r.add("builtin:ssn"),
        Err(RuleError::UnknownBuiltin("ssn".into()))
    );
    assert!(matches!(r.add("email"), Err(RuleError::Syntax(_))));
    assert!(matches!(r.add("regex:"), Err(RuleError::Syntax(_))));
    let long = format!("regex:{}", "a".repeat(MAX_PATTERN_BYTES + 1));
    assert!(matches!(r.add(&long), Err(RuleError::TooLong { .. })));
    // compiles, but past the size limit
    let e = r.add(r"regex:(?:\w{100}){100}").unwrap_err();
    assert!(matches!(e, RuleError::BadRegex { .. }), "{e}");
    assert!(r.is_empty());
    r.add("builtin:all").unwrap();
    assert_eq!(r.names().count(), 4);
}

#[test]
fn fill_and_replace() {
    let r = rules(&["builtin:email", r"regex:sess-[0-9a-f]{8}"]);
    let mut buf = b"a jo@ex.com b sess-deadbeef c".to_vec();
    assert_eq!(r.fill(&mut buf, 0), 2);
    assert_eq!(buf, b"a \0\0\0\0\0\0\0\0\0 b \0\0\0\0\0\0\0\0\0\0\0\0\0 c");
    let (text, n) = r.replace(b"jo@ex.com sess-deadbeef", b"[scrubbed]");
    assert_eq!((text.as_slice(), n), (&b"[scrubbed] [scrubbed]"[..], 2));
}

/// A minidump of one memory range, one thread stack and a Crashpad info stream with a
/// simple annotation, built by hand.
fn little_minidump(secret: &[u8]) -> (Vec<u8>, Vec<Range<usize>>) {
    let mut b = vec![0u8; 0x400];
    let put32 =
        |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    b[..4].copy_from_slice(b"MDMP");
    put32(&mut b, 8, 3);
    put32(&mut b, 12, 0x20);
    // directory: memory list at 0x80, thread list at 0xa0, crashpad info at 0x100
    for (i, (kind, size, rva)) in [
        (5u32, 20u32, 0x80u32),
        (3, 52, 0xa0),
        (0x4350_0001, 52, 0x100),
    ]
    .into_iter()
    .enumerate()
    {
        put32(&mut b, 0x20 + i * 12, kind);
        put32(&mut b, 0x24 + i * 12, size);
        put32(&mut b, 0x28 + i * 12, rva);
    }
    put32(&mut b, 0x80, 1);
    put32(&mut b, 0x84 + 8, 0x40);
    put32(&mut b, 0x84 + 12, 0x200);
    put32(&mut b, 0xa0, 1);
    put32(&mut b, 0xa4 + 32, 0x40);
    put32(&mut b, 0xa4 + 36, 0x240);
    put32(&mut b, 0x100 + 40, 0x180);
    put32(&mut b, 0x180, 1);
    put32(&mut b, 0x184, 0x1a0);
    put32(&mut b, 0x188, 0x1c0);
    put32(&mut b, 0x1a0, 4);
    b[0x1a4..0x1a8].copy_from_slice(b"user");
    put32(&mut b, 0x1c0, 0x30);
    let spans = vec![0x200..0x240, 0x240..0x280, 0x1c4..0x1f4];
    for s in &spans {
        b[s.start + 2..s.start + 2 + secret.len()].copy_from_slice(secret);
    }
    // the same bytes in a structure (the directory's slack) are never touched
    b[0x300..0x300 + secret.len()].copy_from_slice(secret);
    (b, spans)
}

#[test]
fn minidump_memory_and_annotations_only() {
    let secret = b"me@corp.example";
    let (mut b, spans) = little_minidump(secret);
    let before = b.clone();
    let done = scrub(&mut b, &rules(&["builtin:email"]), Options::default());
    assert_eq!(done.matches, 3);
    assert!(!done.whole_file);
    for s in &spans {
        assert!(!b[s.clone()].windows(secret.len()).any(|w| w == secret));
    }
    assert_eq!(
        &b[0x300..0x300 + secret.len()],
        secret,
        "structures untouched"
    );
    let changed: Vec<usize> = (0..b.len()).filter(|&i| b[i] != before[i]).collect();
    assert_eq!(changed.len(), 3 * secret.len());
    assert!(changed.iter().all(|&i| b[i] == FILL));
}

#[test]
fn hostile_minidump_counts_are_bounded() {
    let mut b = vec![0u8; 64];
    b[..4].copy_from_slice(b"MDMP");
    b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    b[12..16].copy_from_slice(&16u32.to_le_bytes());
    b[16..20].copy_from_slice(&9u32.to_le_bytes());
    b[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    let done = scrub(&mut b, &rules(&["builtin:all"]), Options::default());
    assert_eq!(done.matches, 0);
}

#[test]
fn text_reports_are_scrubbed_whole_with_stars() {
    let mut b = br#"{"user":"jo@ex.com","x":1}"#.to_vec();
    let done = scrub(&mut b, &rules(&["builtin:email"]), Options::default());
    assert!(done.whole_file);
    assert_eq!(b, br#"{"user":"*********","x":1}"#);
}

#[test]
fn minidump_memory64_ranges_follow_one_another() {
    let secret = b"Bearer abcdefghijkl";
    let mut b = vec![0u8; 0x200];
    let put32 =
        |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let put64 =
        |b: &mut Vec<u8>, at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    b[..4].copy_from_slice(b"MDMP");
    put32(&mut b, 8, 1);
    put32(&mut b, 12, 0x20);
    put32(&mut b, 0x20, 9);
    put32(&mut b, 0x24, 48);
    put32(&mut b, 0x28, 0x40);
    // two ranges, 0x20 then 0x40 bytes, from 0x100
    put64(&mut b, 0x40, 2);
    put64(&mut b, 0x48, 0x100);
    put64(&mut b, 0x50 + 8, 0x20);
    put64(&mut b, 0x60 + 8, 0x40);
    // in the second range, and just past its end (not memory)
    b[0x128..0x128 + secret.len()].copy_from_slice(secret);
    b[0x160..0x160 + secret.len()].copy_from_slice(secret);
    let done = scrub(&mut b, &rules(&["builtin:bearer"]), Options::default());
    assert_eq!(done.matches, 1);
    assert!(b[0x128..0x128 + secret.len()].iter().all(|&x| x == FILL));
    assert_eq!(&b[0x160..0x160 + secret.len()], secret);
}
