//! S3-compatible buckets of symbol files (`s3://BUCKET[/PREFIX]`), laid out as any of the
//! HTTP sources are (a debuginfod server's `PREFIX/buildid/ID/executable`, a Breakpad
//! store's `PREFIX/NAME/DEBUG_ID/NAME.sym`, a symbol server's `PREFIX/NAME/ID/NAME` and its
//! compressed `NAME.pd_`): where teams keep what their build pipelines produce.
//!
//! Nothing here does I/O. Each object is asked with a presigned `GET` URL (AWS Signature
//! Version 4 in the query string, signed with the sans-IO `rusty-s3` crate; unsigned when
//! no keys are set, for a public bucket), which [`crate::http::Server`] fetches as it
//! fetches any URL: the walk programs stay free of an async runtime and of an S3 SDK, and a
//! bucket gets the same size cap, timeouts, streaming to disk, checks, misses and report
//! lookups as a debuginfod server. What a bucket says when it has no file is read here
//! ([`BucketAnswer`]): `404 NoSuchKey` is a miss; anything else (`403 AccessDenied`,
//! `InvalidAccessKeyId`, `SignatureDoesNotMatch`, `NoSuchBucket`, …) is an error whose
//! reason is S3's own code and message.
//!
//! Configured from the `AWS_*` environment variables the service's blob store reads
//! (`object_store`'s `AmazonS3Builder::from_env`), with its defaults:
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` (or `AWS_TOKEN`),
//! `AWS_REGION` (else `AWS_DEFAULT_REGION`, else `us-east-1`), `AWS_ENDPOINT_URL` (or
//! `AWS_ENDPOINT`; else `https://s3.REGION.amazonaws.com`), `AWS_ALLOW_HTTP` (a plain-HTTP
//! endpoint is refused without it), path-style requests unless
//! `AWS_VIRTUAL_HOSTED_STYLE_REQUEST` is true, and `AWS_SKIP_SIGNATURE` for unsigned
//! requests. Keys given in the environment sign. Keys that expire (a role's, from a
//! container, web-identity or instance endpoint) come from a [`KeySource`] the caller
//! gives: the service's is its object store client's own credential provider, so its
//! symbol buckets sign as its blob store does; the walk programs have none.

use std::sync::Arc;
use std::time::Duration;

use rusty_s3::actions::{GetObject, S3Action};
use rusty_s3::{Credentials, UrlStyle};
use serde::Deserialize;

/// How an S3 bucket's keys are laid out: as one of the HTTP kinds' paths (a sources
/// file's `layout = "…"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    Debuginfod,
    Breakpad,
    SymbolServer,
}

/// How long a presigned URL is valid: it is used at once, but a machine's clock may be a
/// few minutes off the bucket's.
const URL_VALID_FOR: Duration = Duration::from_secs(15 * 60);
/// Most bytes of an error answer read for its code and message.
pub const MAX_ERROR_BODY: u64 = 16 << 10;

/// Why a bucket cannot be used, or an object not asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum S3Error {
    #[error("{url}: not an s3://BUCKET[/PREFIX] URL ({reason})")]
    NotS3 { url: String, reason: String },
    #[error("the S3 endpoint {endpoint:?}: {reason}")]
    Endpoint { endpoint: String, reason: String },
    #[error("{set} is set without {missing}")]
    HalfKeys {
        set: &'static str,
        missing: &'static str,
    },
    #[error("{name}={value:?} is not a boolean")]
    NotBoolean { name: &'static str, value: String },
    #[error("{0:?} cannot be an object key")]
    Key(String),
    #[error("cannot get the keys to sign with: {0}")]
    Keys(String),
}

/// Keys to sign with that are fetched when a request is made, because they expire: a
/// role's. Called on a thread that may block.
pub trait KeySource: Send + Sync {
    /// The access key id, the secret key and the session token to sign with now, or why
    /// they cannot be had.
    fn keys(&self) -> Result<(String, String, Option<String>), String>;
}

/// A [`KeySource`] held by a bucket (two are the same only if they are one).
#[derive(Clone)]
struct RoleKeys(Arc<dyn KeySource>);

impl std::fmt::Debug for RoleKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RoleKeys")
    }
}

impl PartialEq for RoleKeys {
    fn eq(&self, other: &RoleKeys) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for RoleKeys {}

/// One bucket and key prefix, and how to ask it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// The URL as configured (no trailing `/`): how reports name the source.
    url: String,
    bucket: rusty_s3::Bucket,
    /// The key prefix, without a leading or trailing `/` (may be empty).
    prefix: String,
    /// Keys from the environment; `None` (and no `role_keys`): requests are not signed.
    credentials: Option<Credentials>,
    /// Keys fetched for each request, when the environment gives none.
    role_keys: Option<RoleKeys>,
    /// `AWS_SKIP_SIGNATURE`: never signed, whatever keys there are.
    skip_signature: bool,
    /// The one layout its keys follow, when a sources file says (else any is asked).
    layout: Option<Layout>,
}

impl Bucket {
    /// The bucket at `url` (`s3://BUCKET[/PREFIX]`, or `s3a://`), configured from the
    /// process's `AWS_*` environment.
    pub fn from_env(url: &str) -> Result<Bucket, S3Error> {
        Bucket::from_vars(url, |name| std::env::var(name).ok())
    }

    /// [`Bucket::from_env`] with the variables read by `var` (unset and blank are alike).
    pub fn from_vars(url: &str, var: impl Fn(&str) -> Option<String>) -> Result<Bucket, S3Error> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let flag = |name: &'static str| -> Result<bool, S3Error> {
            match var(name) {
                None => Ok(false),
                Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                    "1" | "true" | "on" | "yes" | "y" => Ok(true),
                    "0" | "false" | "off" | "no" | "n" => Ok(false),
                    _ => Err(S3Error::NotBoolean { name, value: v }),
                },
            }
        };
        let not_s3 = |reason: &str| S3Error::NotS3 {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let parsed = url::Url::parse(url).map_err(|e| not_s3(&e.to_string()))?;
        if !matches!(parsed.scheme(), "s3" | "s3a") {
            return Err(not_s3("another scheme"));
        }
        let name = parsed
            .host_str()
            .filter(|b| !b.is_empty())
            .ok_or_else(|| not_s3("no bucket"))?
            .to_string();
        let prefix = parsed.path().trim_matches('/').to_string();

        let region = var("AWS_REGION")
            .or_else(|| var("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| "us-east-1".to_string());
        let endpoint = var("AWS_ENDPOINT_URL")
            .or_else(|| var("AWS_ENDPOINT"))
            .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
        let bad_endpoint = |reason: String| S3Error::Endpoint {
            endpoint: endpoint.clone(),
            reason,
        };
        let endpoint_url = url::Url::parse(&endpoint).map_err(|e| bad_endpoint(e.to_string()))?;
        let allow_http = flag("AWS_ALLOW_HTTP")?;
        if endpoint_url.scheme() == "http" && !allow_http {
            return Err(bad_endpoint(
                "plain HTTP, and AWS_ALLOW_HTTP is not true".to_string(),
            ));
        }
        let style = if flag("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")? {
            UrlStyle::VirtualHost
        } else {
            UrlStyle::Path
        };
        let bucket = rusty_s3::Bucket::new(endpoint_url, style, name, region)
            .map_err(|e| bad_endpoint(format!("{e:?}")))?;

        let key = var("AWS_ACCESS_KEY_ID");
        let secret = var("AWS_SECRET_ACCESS_KEY");
        let token = var("AWS_SESSION_TOKEN").or_else(|| var("AWS_TOKEN"));
        let skip_signature = flag("AWS_SKIP_SIGNATURE")?;
        let credentials = match (key, secret) {
            _ if skip_signature => None,
            (Some(key), Some(secret)) => Some(match token {
                Some(token) => Credentials::new_with_token(key, secret, token),
                None => Credentials::new(key, secret),
            }),
            (Some(_), None) => {
                return Err(S3Error::HalfKeys {
                    set: "AWS_ACCESS_KEY_ID",
                    missing: "AWS_SECRET_ACCESS_KEY",
                })
            }
            (None, Some(_)) => {
                return Err(S3Error::HalfKeys {
                    set: "AWS_SECRET_ACCESS_KEY",
                    missing: "AWS_ACCESS_KEY_ID",
                })
            }
            (None, None) => None,
        };
        Ok(Bucket {
            url: url.trim_end_matches('/').to_string(),
            bucket,
            prefix,
            credentials,
            role_keys: None,
            skip_signature,
            layout: None,
        })
    }

    /// The same bucket, asked only for files of `layout` when it is given.
    pub fn with_layout(mut self, layout: Option<Layout>) -> Bucket {
        self.layout = layout;
        self
    }

    /// The one layout its keys follow, if one was given.
    pub fn layout(&self) -> Option<Layout> {
        self.layout
    }

    /// The bucket's URL as configured: the source's name in reports.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether requests are signed (keys were given, or a source of keys).
    pub fn signed(&self) -> bool {
        self.credentials.is_some() || self.role_keys.is_some()
    }

    /// The bucket's name (without the prefix).
    pub fn name(&self) -> &str {
        self.bucket.name()
    }

    /// The same bucket, its requests signed with keys from `source` when the environment
    /// gives none (unless it says `AWS_SKIP_SIGNATURE`).
    pub fn with_key_source(mut self, source: Arc<dyn KeySource>) -> Bucket {
        if !self.skip_signature {
            self.role_keys = Some(RoleKeys(source));
        }
        self
    }

    /// A URL that gets the object at `path` below the prefix (`path` escaped as a URL
    /// path is, as every source's path is given), presigned when there are keys.
    pub fn get_url(&self, path: &str) -> Result<String, S3Error> {
        let rel = unescape(path).ok_or_else(|| S3Error::Key(path.to_string()))?;
        // keys the URL would change (`a/../b`) or that name nothing are not asked for
        let plain = rel
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..");
        if !plain {
            return Err(S3Error::Key(rel));
        }
        let key = if self.prefix.is_empty() {
            rel
        } else {
            format!("{}/{rel}", self.prefix)
        };
        let fetched;
        let credentials = match (&self.credentials, &self.role_keys) {
            (Some(c), _) => Some(c),
            (None, Some(RoleKeys(source))) => {
                let (key, secret, token) = source.keys().map_err(S3Error::Keys)?;
                fetched = match token {
                    Some(token) => Credentials::new_with_token(key, secret, token),
                    None => Credentials::new(key, secret),
                };
                Some(&fetched)
            }
            (None, None) => None,
        };
        let get = GetObject::new(&self.bucket, credentials, &key);
        Ok(get.sign(URL_VALID_FOR).to_string())
    }
}

/// What a bucket's answer other than `200` says: a miss, or an error with S3's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BucketAnswer {
    /// `404 NoSuchKey` (or a 404 without an S3 error code): the bucket has not the file.
    Missing,
    /// Anything else: the status, and S3's code and message when the body gives them.
    Error(String),
}

/// Reads a non-`200` answer of status `status` whose body starts with `body` (at most
/// [`MAX_ERROR_BODY`] bytes of it, S3's `<Error><Code>…</Code><Message>…</Message>`).
pub fn answer(status: u16, body: &[u8]) -> BucketAnswer {
    let text = String::from_utf8_lossy(body);
    let code = xml_field(&text, "Code");
    if status == 404 && code.as_deref().is_none_or(|c| c == "NoSuchKey") {
        return BucketAnswer::Missing;
    }
    let mut reason = format!("HTTP status {status}");
    if let Some(code) = code {
        reason.push_str(": ");
        reason.push_str(&code);
    }
    if let Some(message) = xml_field(&text, "Message") {
        reason.push_str(": ");
        reason.push_str(&message);
    }
    BucketAnswer::Error(reason)
}

/// The text of the first `<tag>…</tag>` in `xml`, unescaped, trimmed and bounded.
fn xml_field(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml.get(start..)?.find(&format!("</{tag}>"))?;
    let raw = xml.get(start..end)?.trim();
    let text = raw
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&");
    let text: String = text.chars().filter(|c| !c.is_control()).take(300).collect();
    (!text.is_empty()).then_some(text)
}

/// `path` with its `%XX` escapes decoded; `None` if one is broken or the result is not
/// UTF-8.
fn unescape(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn a_bucket_is_read_from_the_environment_as_object_store_reads_it() {
        let b = Bucket::from_vars("s3://symbols/team/linux/", env(&[])).unwrap();
        assert_eq!(b.url(), "s3://symbols/team/linux");
        assert!(!b.signed());
        assert_eq!(
            b.get_url("buildid/ab12/executable").unwrap(),
            "https://s3.us-east-1.amazonaws.com/symbols/team/linux/buildid/ab12/executable"
        );
        let vars = [
            ("AWS_DEFAULT_REGION", "eu-west-3"),
            ("AWS_ENDPOINT", "http://127.0.0.1:9000"),
            ("AWS_ALLOW_HTTP", "TRUE"),
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_SESSION_TOKEN", "t"),
        ];
        let b = Bucket::from_vars("s3://symbols", env(&vars)).unwrap();
        assert!(b.signed());
        let u = b.get_url("My%20App.pdb/AB/My%20App.pd_").unwrap();
        assert!(
            u.starts_with("http://127.0.0.1:9000/symbols/My%20App.pdb/AB/My%20App.pd_?"),
            "{u}"
        );
        for part in [
            "X-Amz-Credential=k%2F",
            "%2Feu-west-3%2Fs3%2Faws4_request",
            "X-Amz-Security-Token=t",
            "X-Amz-Signature=",
        ] {
            assert!(u.contains(part), "{part} in {u}");
        }
        let skip = [
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_SKIP_SIGNATURE", "true"),
            ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "yes"),
        ];
        let b = Bucket::from_vars("s3://symbols", env(&skip)).unwrap();
        assert!(!b.signed());
        assert_eq!(
            b.get_url("a/b").unwrap(),
            "https://symbols.s3.us-east-1.amazonaws.com/a/b"
        );
    }

    #[test]
    fn bad_configurations_are_typed_errors() {
        let refused = |url: &str, vars: &[(&str, &str)]| Bucket::from_vars(url, env(vars));
        assert!(matches!(
            refused("https://symbols/x", &[]),
            Err(S3Error::NotS3 { .. })
        ));
        assert!(matches!(
            refused("s3:///x", &[]),
            Err(S3Error::NotS3 { .. })
        ));
        assert!(matches!(
            refused("s3://b", &[("AWS_ENDPOINT_URL", "http://127.0.0.1:1")]),
            Err(S3Error::Endpoint { .. })
        ));
        assert!(matches!(
            refused("s3://b", &[("AWS_ENDPOINT_URL", "ftp://x")]),
            Err(S3Error::Endpoint { .. })
        ));
        assert!(matches!(
            refused("s3://b", &[("AWS_ACCESS_KEY_ID", "k")]),
            Err(S3Error::HalfKeys { .. })
        ));
        assert!(matches!(
            refused("s3://b", &[("AWS_ALLOW_HTTP", "maybe")]),
            Err(S3Error::NotBoolean { .. })
        ));
        let b = refused("s3://b/p", &[]).unwrap();
        for key in ["a/../b", "a//b", "./a", "a%2", "%FF"] {
            assert!(b.get_url(key).is_err(), "{key}");
        }
    }

    struct Fixed(Result<(String, String, Option<String>), String>);

    impl KeySource for Fixed {
        fn keys(&self) -> Result<(String, String, Option<String>), String> {
            self.0.clone()
        }
    }

    #[test]
    fn keys_from_a_key_source_sign_when_the_environment_has_none() {
        let vars = [("AWS_REGION", "eu-west-1")];
        let plain = Bucket::from_vars("s3://b", env(&vars)).unwrap();
        assert!(!plain.signed());
        let role = plain.clone().with_key_source(Arc::new(Fixed(Ok((
            "ROLEKEY".into(),
            "secret".into(),
            Some("session".into()),
        )))));
        assert!(role.signed());
        let url = role.get_url("a/b").unwrap();
        assert!(url.contains("X-Amz-Credential=ROLEKEY%2F"), "{url}");
        assert!(url.contains("X-Amz-Security-Token=session"), "{url}");
        // keys in the environment come first
        let keyed = [
            ("AWS_ACCESS_KEY_ID", "ENVKEY"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
        ];
        let both = Bucket::from_vars("s3://b", env(&keyed))
            .unwrap()
            .with_key_source(Arc::new(Fixed(Err("never asked".into()))));
        assert!(both
            .get_url("a/b")
            .unwrap()
            .contains("X-Amz-Credential=ENVKEY%2F"));
        // AWS_SKIP_SIGNATURE: never signed
        let skip = [("AWS_SKIP_SIGNATURE", "true")];
        let unsigned = Bucket::from_vars("s3://b", env(&skip))
            .unwrap()
            .with_key_source(Arc::new(Fixed(Err("never asked".into()))));
        assert!(!unsigned.signed());
        assert!(!unsigned
            .get_url("a/b")
            .unwrap()
            .contains("X-Amz-Credential"));
        // a source that cannot give keys: the object is not asked, and the reason is said
        let failing = plain.with_key_source(Arc::new(Fixed(Err("endpoint down".into()))));
        assert_eq!(
            failing.get_url("a/b"),
            Err(S3Error::Keys("endpoint down".into()))
        );
    }

    #[test]
    fn a_missing_key_is_a_miss_and_the_rest_errors_with_s3s_reason() {
        let body = |code: &str, message: &str| {
            format!(
                "<?xml version=\"1.0\"?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
            )
        };
        assert_eq!(
            answer(404, body("NoSuchKey", "gone").as_bytes()),
            BucketAnswer::Missing
        );
        assert_eq!(answer(404, b""), BucketAnswer::Missing);
        assert_eq!(
            answer(404, body("NoSuchBucket", "no &amp; such").as_bytes()),
            BucketAnswer::Error("HTTP status 404: NoSuchBucket: no & such".into())
        );
        assert_eq!(
            answer(403, body("InvalidAccessKeyId", "unknown key").as_bytes()),
            BucketAnswer::Error("HTTP status 403: InvalidAccessKeyId: unknown key".into())
        );
        assert_eq!(
            answer(500, b"<Error><Code>\x01\xff"),
            BucketAnswer::Error("HTTP status 500".into())
        );
    }
}
