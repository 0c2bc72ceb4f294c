//! Fuzz target: a symbol source's redirect — the `Location` a hostile source answers
//! (after the first newline; before it, the URL it was asked at) is judged by
//! `sources::redirect::follow` and shown by `sources::redact`. Neither may panic; a
//! redirect followed is to http or https only, and a URL's display form is stable (shown
//! again, it is the same), so a secret hidden once stays hidden.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sources::redact::redact_url;
use sources::redirect::follow;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (from, location) = text
        .split_once('\n')
        .unwrap_or(("https://symbols.example/store/a.pdb", &text));
    let shown = redact_url(location);
    assert_eq!(redact_url(&shown), shown);
    if let Ok((to, _)) = follow(from, Some(location)) {
        assert!(
            to.starts_with("http://") || to.starts_with("https://"),
            "{to}"
        );
    }
});
