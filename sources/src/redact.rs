//! A source URL as it may be shown: the one display form of a configured source in
//! reports (`modules[].lookups`, `files[].source`), `/metrics`, logs, error messages and
//! what is stored of it (the disk cache's `.source` files, remembered misses). A URL
//! may carry credentials — `https://user:password@host/…`, `…?token=SECRET` — and
//! reports and metrics are read by people who must not get them, so the userinfo and
//! every query value are replaced by `***` (`https://***@host/path?token=***`); the
//! fragment, never sent, is replaced too. The scheme, host, port and path stay, so the
//! source is still recognisable. Only the request itself uses the URL as configured.

/// What replaces a secret.
const HIDDEN: &str = "***";

/// `url` with its userinfo, query values and fragment replaced by `***`; the rest as
/// written (no normalisation, so `http://host:8080` stays as configured).
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let (rest, fragment) = match rest.split_once('#') {
        Some((rest, _)) => (rest, Some(HIDDEN)),
        None => (rest, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(redact_query(query))),
        None => (rest, None),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host = match authority.rsplit_once('@') {
        Some((_, host)) => format!("{HIDDEN}@{host}"),
        None => authority.to_string(),
    };
    let mut out = String::with_capacity(url.len());
    if let Some(scheme) = scheme {
        out.push_str(scheme);
        out.push_str("://");
    }
    out.push_str(&host);
    out.push_str(path);
    if let Some(query) = query {
        out.push('?');
        out.push_str(&query);
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// `k=v&flag` → `k=***&***`: each value hidden, each name kept (a bare word may be a
/// secret itself).
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) => format!("{name}={HIDDEN}"),
            None if pair.is_empty() => String::new(),
            None => HIDDEN.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Every configured source URL found in `text` replaced by its display form: for
/// messages whose text comes from elsewhere (a transport error quoting the URL it was
/// asked). `urls` are the raw URLs a request may have used.
pub fn redact_in(text: &str, urls: &[&str]) -> String {
    let mut out = text.to_string();
    for url in urls.iter().filter(|u| !u.is_empty()) {
        if out.contains(url) {
            out = out.replace(url, &redact_url(url));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_hidden_and_the_rest_kept() {
        let cases = [
            (
                "https://alice:s3cret@symbols.example.com/store?token=abc&x=1#frag",
                "https://***@symbols.example.com/store?token=***&x=***#***",
            ),
            ("https://alice@host:8443", "https://***@host:8443"),
            ("http://127.0.0.1:8002", "http://127.0.0.1:8002"),
            ("https://host/a/b/", "https://host/a/b/"),
            ("https://host/p?SECRET", "https://host/p?***"),
            ("https://host/p?a=1&&b", "https://host/p?a=***&&***"),
            // an @ in the path is not userinfo
            ("https://host/user@x/y", "https://host/user@x/y"),
            ("s3://bucket/prefix", "s3://bucket/prefix"),
            ("host:pw@x?k=v", "***@x?k=***"),
            ("", ""),
        ];
        for (raw, shown) in cases {
            assert_eq!(redact_url(raw), shown, "{raw}");
            // shown again, the same: what is hidden once stays hidden
            assert_eq!(redact_url(shown), shown, "{shown}");
        }
    }

    #[test]
    fn urls_inside_messages_are_hidden() {
        let raw = "https://u:p@h/s/buildid/ab/debuginfo?token=t";
        let text = format!("GET {raw}: refused");
        assert_eq!(
            redact_in(&text, &[raw, ""]),
            "GET https://***@h/s/buildid/ab/debuginfo?token=***: refused"
        );
    }
}
