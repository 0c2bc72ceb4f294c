//! Which redirects of a symbol source are followed. A source is configured by the
//! operator, but what it answers is not theirs: a compromised or hostile source could
//! redirect the service's workers to loopback services, the private network or the
//! cloud metadata address (169.254.169.254, whose answers are credentials) and have the
//! answer quoted in a report. Real sources do redirect — Microsoft's symbol server to a
//! CDN on another host, debuginfod federations to their members — so the rule is:
//!
//! - `http://` and `https://` only: any other scheme (`file://`, `ftp://`) is refused,
//!   saying so;
//! - to the same origin (scheme, host and port), or from `http` to `https` on the same
//!   host: followed;
//! - to another host: followed only over `https`, to a host that is not `localhost`
//!   and whose every address is public — not loopback, private (RFC 1918, IPv6 unique
//!   local), link-local (which holds the metadata address), carrier-grade NAT,
//!   unspecified, multicast, broadcast, documentation or reserved. The addresses are
//!   those the connection itself uses ([`PublicOnly`] resolves for it), so a name that
//!   resolves to a private address is refused too;
//! - at most [`MAX_REDIRECTS`] in a row.
//!
//! A refused redirect is an `error` lookup naming the target (its display form,
//! [`crate::redact`]), never a miss.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;
use url::Url;

use crate::redact::redact_url;

/// Redirects followed in a row before the fetch is an error (curl's and ureq's
/// defaults are 50 and 10; symbol servers use one or two).
pub const MAX_REDIRECTS: usize = 5;

/// Whether a redirect may be followed, and how its target is connected to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// Same origin (or the same host upgraded to https): as the source itself.
    SameOrigin,
    /// Another host, over https: only to public addresses ([`PublicOnly`]).
    OtherHost,
}

/// Why a redirect is not followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("a redirect with no Location is refused")]
    NoLocation,
    #[error("a redirect to {0:?}, not a URL, is refused")]
    BadLocation(String),
    #[error("a redirect to a {scheme}: URL ({to}) is refused: only http and https are followed")]
    Scheme { scheme: String, to: String },
    #[error("a redirect to another host over plain http ({to}) is refused: only https is followed off the source's host")]
    PlainHttp { to: String },
    #[error("a redirect to {to} is refused: {why}")]
    NotPublic { to: String, why: String },
    #[error("more than {MAX_REDIRECTS} redirects in a row")]
    TooMany,
}

/// The target of a redirect from `from` whose `Location` is `location` (relative to
/// `from`), and how it may be followed; an error when it may not.
pub fn follow(from: &str, location: Option<&str>) -> Result<(String, Hop), Refusal> {
    let location = location.ok_or(Refusal::NoLocation)?;
    let base = Url::parse(from).map_err(|_| Refusal::BadLocation(redact_url(from)))?;
    let to = base
        .join(location.trim())
        .map_err(|_| Refusal::BadLocation(redact_url(location)))?;
    let shown = redact_url(to.as_str());
    if !matches!(to.scheme(), "http" | "https") {
        return Err(Refusal::Scheme {
            scheme: to.scheme().to_string(),
            to: shown,
        });
    }
    let same_host =
        base.host_str().map(str::to_ascii_lowercase) == to.host_str().map(str::to_ascii_lowercase);
    let same_origin = same_host
        && base.scheme() == to.scheme()
        && base.port_or_known_default() == to.port_or_known_default();
    let upgraded = same_host
        && to.scheme() == "https"
        && to.port_or_known_default() == Some(443)
        && base.scheme() == "http";
    if same_origin || upgraded {
        return Ok((to.into(), Hop::SameOrigin));
    }
    if to.scheme() != "https" {
        return Err(Refusal::PlainHttp { to: shown });
    }
    match to.host() {
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            if d == "localhost" || d.ends_with(".localhost") {
                return Err(Refusal::NotPublic {
                    to: shown,
                    why: "localhost".into(),
                });
            }
        }
        Some(url::Host::Ipv4(ip)) => not_public(IpAddr::V4(ip), &shown)?,
        Some(url::Host::Ipv6(ip)) => not_public(IpAddr::V6(ip), &shown)?,
        None => return Err(Refusal::BadLocation(shown)),
    }
    Ok((to.into(), Hop::OtherHost))
}

fn not_public(ip: IpAddr, shown: &str) -> Result<(), Refusal> {
    match non_public_reason(ip) {
        Some(why) => Err(Refusal::NotPublic {
            to: shown.to_string(),
            why: format!("{ip} is {why}"),
        }),
        None => Ok(()),
    }
}

/// Why `ip` is not a public address, if it is not.
pub fn non_public_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4_reason(v4),
            None => v6_reason(v6),
        },
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_link_local() {
        Some("a link-local address (the cloud metadata service's)")
    } else if ip.is_private() {
        Some("a private address")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a carrier-grade NAT address")
    } else if ip.is_unspecified() || a == 0 {
        Some("an unspecified address")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("a multicast, broadcast or reserved address")
    } else if ip.is_documentation() || (a == 192 && b == 0) || (a == 198 && (18..20).contains(&b)) {
        Some("a documentation, protocol or benchmarking address")
    } else {
        None
    }
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments().first().copied().unwrap_or(0);
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("an unspecified address")
    } else if first & 0xffc0 == 0xfe80 {
        Some("a link-local address")
    } else if first & 0xfe00 == 0xfc00 {
        Some("a unique local (private) address, as AWS's IPv6 metadata address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if first == 0x2001 && ip.segments().get(1) == Some(&0x0db8) {
        Some("a documentation address")
    } else {
        None
    }
}

/// The resolver of redirects to other hosts: the system's, with every address that is
/// not public dropped, and an error when none is left — so the address connected to is
/// the one checked (no second lookup between the check and the connection).
/// Behind an HTTP proxy the proxy resolves the target, so only [`follow`]'s checks of
/// the target's name and literal address apply; the proxy's own address is not
/// filtered.
pub struct PublicOnly(DefaultResolver);

impl PublicOnly {
    pub fn new() -> PublicOnly {
        PublicOnly(DefaultResolver::default())
    }
}

impl Default for PublicOnly {
    fn default() -> PublicOnly {
        PublicOnly::new()
    }
}

impl fmt::Debug for PublicOnly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PublicOnly")
    }
}

/// The error [`PublicOnly`] gives when a name has no public address.
#[derive(Debug, thiserror::Error)]
#[error("a redirect to {host} is refused: it resolves to {ip}, {why}")]
pub struct PrivateTarget {
    pub host: String,
    pub ip: IpAddr,
    pub why: &'static str,
}

impl Resolver for PublicOnly {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let all = self.0.resolve(uri, config, timeout)?;
        // the operator's proxy (HTTPS_PROXY …), which then resolves the target itself:
        // it may well be on the private network
        let proxy = config.proxy().is_some_and(|p| uri.host() == Some(p.host()));
        if proxy {
            return Ok(all);
        }
        let mut public = self.0.empty();
        let mut refused = None;
        for addr in all.iter() {
            match non_public_reason(addr.ip()) {
                None => public.push(*addr),
                Some(why) => refused = Some((addr.ip(), why)),
            }
        }
        match (public.is_empty(), refused) {
            (true, Some((ip, why))) => Err(ureq::Error::Other(Box::new(PrivateTarget {
                host: uri.host().unwrap_or("?").to_string(),
                ip,
                why,
            }))),
            (true, None) => Err(ureq::Error::HostNotFound),
            (false, _) => Ok(public),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(from: &str, to: &str) -> Result<Hop, Refusal> {
        follow(from, Some(to)).map(|(_, h)| h)
    }

    #[test]
    fn real_symbol_servers_redirects_are_followed() {
        // Microsoft's symbol server answers with a 302 to its CDN
        assert_eq!(
            hop(
                "https://msdl.microsoft.com/download/symbols/ntdll.pdb/X/ntdll.pdb",
                "https://vsblobprodscussu5shard20.blob.core.windows.net/b-4712/X?sv=1&sig=2"
            ),
            Ok(Hop::OtherHost)
        );
        assert_eq!(
            hop("http://127.0.0.1:8002/buildid/ab/debuginfo", "/other/path"),
            Ok(Hop::SameOrigin)
        );
        assert_eq!(
            hop(
                "http://debuginfod.example/x",
                "https://debuginfod.example/x"
            ),
            Ok(Hop::SameOrigin)
        );
    }

    #[test]
    fn redirects_to_private_places_are_refused() {
        let from = "https://symbols.example.com/a";
        for (to, says) in [
            ("file:///etc/passwd", "file: URL"),
            ("ftp://example.com/x", "ftp: URL"),
            ("http://cdn.example.com/x", "plain http"),
            ("https://169.254.169.254/latest/meta-data/", "link-local"),
            ("https://127.0.0.1:8080/", "loopback"),
            ("https://10.1.2.3/", "private"),
            ("https://192.168.0.1/", "private"),
            ("https://[::1]/", "loopback"),
            ("https://[fd00:ec2::254]/", "unique local"),
            ("https://[::ffff:169.254.169.254]/", "link-local"),
            ("https://localhost/", "localhost"),
            ("https://a.localhost./", "localhost"),
            ("https://0.0.0.0/", "unspecified"),
            ("https://100.64.0.1/", "carrier-grade"),
        ] {
            let e = hop(from, to).expect_err(to).to_string();
            assert!(e.contains(says), "{to}: {e}");
        }
        // the same host on another port is another origin
        assert!(hop("http://127.0.0.1:8002/a", "http://127.0.0.1:9000/").is_err());
        assert_eq!(follow(from, None), Err(Refusal::NoLocation));
    }

    #[test]
    fn a_refusal_shows_no_credentials() {
        let e = hop("https://h/a", "http://u:pw@other/x?token=t")
            .expect_err("plain http")
            .to_string();
        assert!(!e.contains("pw") && !e.contains("=t"), "{e}");
    }
}
