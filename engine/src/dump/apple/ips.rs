//! Reader of Apple's `.ips` crash reports (macOS 12+, iOS 15+): a one-line JSON header
//! object (`bug_type`, `os_version`, …), then the JSON body: `usedImages` (uuid, base,
//! size, name, path, arch), `threads` (id, name, queue, `triggered`, `threadState`
//! registers, `frames` by `imageIndex` + `imageOffset`, with `symbol` +
//! `symbolLocation` where the device knew the name), `exception`, `termination`, `asi`,
//! `lastExceptionBacktrace` and `faultingThread`. A header with a text body (bug type
//! 109, the legacy crash report wrapped in an `.ips`) is read by [`super::crash_text`].
//!
//! The body is read through `serde_json::Value` leniently: a field of an unexpected type
//! is as good as absent, so one odd field of a future OS does not lose the report, while
//! the bounds of [`super`] hold whatever the counts claim.

use serde_json::{Map, Value};

use super::{
    arch_of, cut, uuid_of, AppleError, AppleException, AppleFormat, AppleReport, Frame, Image,
    ReportThread, MAX_FRAMES, MAX_IMAGES, MAX_THREADS,
};
use crate::dump::Os;

/// Reads an `.ips` report (header line, then body).
pub fn parse(bytes: &[u8]) -> Result<AppleReport, AppleError> {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let bytes = &bytes[start..];
    let newline = bytes
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(bytes.len());
    let header: Value =
        serde_json::from_slice(&bytes[..newline]).map_err(|e| AppleError::Header(e.to_string()))?;
    let header = header
        .as_object()
        .ok_or_else(|| AppleError::Header("not an object".into()))?;
    let body = bytes.get(newline + 1..).unwrap_or_default();
    let body_start = body.iter().position(|b| !b.is_ascii_whitespace());
    if body_start.is_some_and(|i| body[i] != b'{' && body[i] != b'[') {
        // bug type 109: the legacy text report under an .ips header
        let mut report = super::crash_text::parse(&body[body_start.unwrap_or(0)..])?;
        report.format = AppleFormat::Ips;
        return Ok(report);
    }
    let body: Value = serde_json::from_slice(body).map_err(|e| AppleError::Body(e.to_string()))?;
    let body = body
        .as_object()
        .ok_or_else(|| AppleError::Body("not an object".into()))?;
    if !body.contains_key("threads") {
        let bug = text(header.get("bug_type")).unwrap_or_else(|| "(none)".into());
        return Err(AppleError::NotACrash(bug));
    }
    report_of(header, body)
}

/// The report of a header and a crash body.
fn report_of(
    header: &Map<String, Value>,
    body: &Map<String, Value>,
) -> Result<AppleReport, AppleError> {
    let cpu = text(body.get("cpuType"))
        .or_else(|| first_image_arch(body))
        .unwrap_or_default();
    let arch = arch_of(&cpu)?;
    let images = images_of(body.get("usedImages"))?;
    let mut threads = Vec::new();
    let list = body.get("threads").and_then(Value::as_array);
    let list = list.map(Vec::as_slice).unwrap_or_default();
    bounded("threads", list.len(), MAX_THREADS)?;
    let mut triggered = None;
    for (i, t) in list.iter().enumerate() {
        if t.get("triggered").and_then(Value::as_bool) == Some(true) {
            triggered.get_or_insert(i);
        }
        threads.push(thread_of(i, t, &images)?);
    }
    let crashed = body
        .get("faultingThread")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| i < threads.len())
        .or(triggered);
    let leb = match body.get("lastExceptionBacktrace") {
        Some(v) => frames_of(threads.len(), v, &images)?,
        None => Vec::new(),
    };
    let os_version = text(header.get("os_version")).or_else(|| {
        let v = body.get("osVersion")?;
        Some(format!(
            "{} ({})",
            text(v.get("train"))?,
            text(v.get("build"))?
        ))
    });
    Ok(AppleReport {
        format: AppleFormat::Ips,
        arch,
        os: os_of(
            os_version.as_deref(),
            header.get("platform").and_then(Value::as_u64),
        ),
        process: text(body.get("procName")).or_else(|| text(header.get("name"))),
        pid: body
            .get("pid")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok()),
        path: text(body.get("procPath")),
        os_version,
        time: text(body.get("captureTime")).or_else(|| text(header.get("timestamp"))),
        hardware: text(body.get("modelCode")),
        images,
        threads,
        crashed,
        exception: body.get("exception").map(exception_of),
        termination: body.get("termination").map(termination_of),
        asi: asi_of(body.get("asi")),
        last_exception_backtrace: leb,
    })
}

/// A string field, cut to the text bound; a number is written out.
fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(cut(s)),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn bounded(what: &'static str, count: usize, max: usize) -> Result<(), AppleError> {
    if count > max {
        return Err(AppleError::TooMany { what, count, max });
    }
    Ok(())
}

/// The architecture of the first image that names one (a report without `cpuType`).
fn first_image_arch(body: &Map<String, Value>) -> Option<String> {
    let images = body.get("usedImages")?.as_array()?;
    images.iter().find_map(|i| text(i.get("arch")))
}

/// The OS from the report's version line (`macOS 12.4 (21F79)`, `iPhone OS 15.5 (19F77)`),
/// else the header's platform number (1 macOS, 2 iOS, 6 Mac Catalyst).
fn os_of(version: Option<&str>, platform: Option<u64>) -> Os {
    let v = version.unwrap_or_default();
    if v.starts_with("macOS") || v.starts_with("Mac OS") {
        return Os::Macos;
    }
    if ["iPhone OS", "iOS", "iPadOS"]
        .iter()
        .any(|p| v.starts_with(p))
    {
        return Os::Ios;
    }
    match platform {
        Some(1 | 6) => Os::Macos,
        Some(2) => Os::Ios,
        _ => Os::Unknown,
    }
}

fn images_of(v: Option<&Value>) -> Result<Vec<Image>, AppleError> {
    let list = v
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    bounded("images", list.len(), MAX_IMAGES)?;
    Ok(list
        .iter()
        .map(|im| {
            let path = text(im.get("path"));
            let name = text(im.get("name"))
                .or_else(|| path.as_deref().and_then(|p| p.rsplit('/').next()).map(cut))
                .unwrap_or_else(|| "???".into());
            Image {
                uuid: im.get("uuid").and_then(Value::as_str).and_then(uuid_of),
                base: im.get("base").and_then(Value::as_u64).unwrap_or(0),
                size: im.get("size").and_then(Value::as_u64).filter(|&s| s > 0),
                name,
                path,
                arch: text(im.get("arch")),
                version: text(im.get("CFBundleShortVersionString")),
            }
        })
        .collect())
}

fn thread_of(index: usize, t: &Value, images: &[Image]) -> Result<ReportThread, AppleError> {
    let frames = match t.get("frames") {
        Some(v) => frames_of(index, v, images)?,
        None => Vec::new(),
    };
    Ok(ReportThread {
        id: t.get("id").and_then(Value::as_u64),
        name: text(t.get("name")),
        queue: text(t.get("queue")),
        frames,
        registers: t.get("threadState").map(registers_of).unwrap_or_default(),
    })
}

/// The frames of a thread (or of the last exception backtrace, numbered `thread`).
fn frames_of(thread: usize, v: &Value, images: &[Image]) -> Result<Vec<Frame>, AppleError> {
    let list = v.as_array().map(Vec::as_slice).unwrap_or_default();
    bounded("frames in one thread", list.len(), super::MAX_FRAMES)?;
    let mut frames = Vec::with_capacity(list.len().min(MAX_FRAMES));
    for (k, f) in list.iter().enumerate() {
        let offset = f.get("imageOffset").and_then(Value::as_u64).unwrap_or(0);
        let index = f
            .get("imageIndex")
            .and_then(Value::as_u64)
            .map(|i| usize::try_from(i).unwrap_or(usize::MAX));
        let address = match index {
            Some(i) => {
                let image = images.get(i).ok_or(AppleError::NoSuchImage {
                    thread,
                    frame: k,
                    image: i,
                })?;
                image
                    .base
                    .checked_add(offset)
                    .ok_or(AppleError::AddressOverflow { thread, frame: k })?
            }
            None => offset,
        };
        let source = text(f.get("sourceFile")).zip(
            f.get("sourceLine")
                .and_then(Value::as_u64)
                .and_then(|l| u32::try_from(l).ok()),
        );
        frames.push(Frame {
            image: index,
            address,
            symbol: text(f.get("symbol")),
            symbol_offset: f.get("symbolLocation").and_then(Value::as_u64),
            source,
        });
    }
    Ok(frames)
}

/// A `threadState`: `{"rip": {"value": …}, …}` on x86_64; on arm64 also `"x": [{"value":
/// …}, …]` for x0–x28.
fn registers_of(state: &Value) -> Vec<(String, u64)> {
    let Some(state) = state.as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, v) in state.iter().take(super::MAX_FRAMES) {
        if name == "x" {
            let xs = v.as_array().map(Vec::as_slice).unwrap_or_default();
            for (i, x) in xs.iter().enumerate().take(29) {
                if let Some(value) = x.get("value").and_then(Value::as_u64) {
                    out.push((format!("x{i}"), value));
                }
            }
        } else if let Some(value) = v.get("value").and_then(Value::as_u64) {
            out.push((cut(name), value));
        }
    }
    out
}

fn exception_of(e: &Value) -> AppleException {
    let raw: Vec<u64> = e
        .get("rawCodes")
        .and_then(Value::as_array)
        .map(|c| c.iter().take(16).filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let codes = if raw.is_empty() {
        text(e.get("codes"))
            .map(|c| super::crash_text::hex_codes(&c))
            .unwrap_or_default()
    } else {
        raw
    };
    AppleException {
        type_name: text(e.get("type")).unwrap_or_else(|| "EXC_UNKNOWN".into()),
        signal: text(e.get("signal")),
        codes,
        subtype: text(e.get("subtype")),
    }
}

/// A termination as the `.crash` text writes it: `Namespace SIGNAL, Code 11 Segmentation
/// fault: 11`.
fn termination_of(t: &Value) -> String {
    let namespace = text(t.get("namespace")).unwrap_or_else(|| "?".into());
    let mut s = format!("Namespace {namespace}");
    if let Some(code) = t.get("code").and_then(Value::as_u64) {
        s.push_str(&format!(", Code {code}"));
    }
    if let Some(ind) = text(t.get("indicator")) {
        s.push(' ');
        s.push_str(&ind);
    }
    cut(&s)
}

/// `asi`: `{"libsystem_c.dylib": ["abort() called"]}`.
fn asi_of(v: Option<&Value>) -> Vec<(String, String)> {
    let Some(map) = v.and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (image, lines) in map.iter().take(64) {
        let lines = match lines {
            Value::Array(a) => a.iter().take(64).filter_map(|l| text(Some(l))).collect(),
            other => text(Some(other)).into_iter().collect::<Vec<_>>(),
        };
        for l in lines {
            out.push((cut(image), l));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const IPS: &str = r#"{"app_name":"t","bug_type":"309","os_version":"iPhone OS 15.5 (19F77)"}
{"cpuType":"ARM-64","procName":"t","pid":7,"faultingThread":0,
 "usedImages":[{"uuid":"82d13d98-219e-3040-b62a-07a297007a7c","base":4096,"size":8192,"name":"t","arch":"arm64"}],
 "exception":{"type":"EXC_BREAKPOINT","signal":"SIGTRAP","rawCodes":[1,4200]},
 "asi":{"libswiftCore.dylib":["Fatal error"]},
 "threads":[{"triggered":true,"id":3,"queue":"com.apple.main-thread",
   "threadState":{"x":[{"value":1},{"value":2}],"fp":{"value":16},"lr":{"value":4200},"pc":{"value":4104},"sp":{"value":32},"flavor":"ARM_THREAD_STATE64"},
   "frames":[{"imageIndex":0,"imageOffset":8},{"imageIndex":0,"imageOffset":104,"symbol":"main","symbolLocation":4}]}]}"#;

    #[test]
    fn an_ips_report_is_read_with_its_images_frames_and_exception() {
        let r = parse(IPS.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.arch, r.os), (crate::dump::Arch::Aarch64, Os::Ios));
        assert_eq!(r.images.len(), 1);
        assert_eq!(r.images[0].size, Some(8192));
        let t = &r.threads[0];
        assert_eq!(t.frames[0].address, 4096 + 8);
        assert_eq!(t.frames[1].symbol.as_deref(), Some("main"));
        assert_eq!(t.frames[1].symbol_offset, Some(4));
        assert!(t.registers.contains(&("x1".into(), 2)));
        assert!(t.registers.contains(&("fp".into(), 16)));
        assert_eq!(r.crashed, Some(0));
        assert_eq!(
            r.asi,
            vec![("libswiftCore.dylib".into(), "Fatal error".into())]
        );
        let e = r.exception.unwrap_or_default();
        assert_eq!(
            (e.type_name.as_str(), e.codes),
            ("EXC_BREAKPOINT", vec![1, 4200])
        );
    }

    #[test]
    fn hostile_reports_are_refused_with_the_reason() {
        let bad_image = IPS.replace(
            "\"imageIndex\":0,\"imageOffset\":8",
            "\"imageIndex\":9,\"imageOffset\":8",
        );
        assert!(matches!(
            parse(bad_image.as_bytes()),
            Err(AppleError::NoSuchImage { image: 9, .. })
        ));
        let overflow = IPS.replace("\"imageOffset\":8", "\"imageOffset\":18446744073709551615");
        assert!(matches!(
            parse(overflow.as_bytes()),
            Err(AppleError::AddressOverflow { .. })
        ));
        assert!(matches!(
            parse(b"{\"bug_type\":\"309\"}\n[1,2"),
            Err(AppleError::Body(_))
        ));
        assert!(matches!(parse(b"{oops\n{}"), Err(AppleError::Header(_))));
        assert!(matches!(
            parse(b"{\"bug_type\":\"288\"}\n{\"a\":1}"),
            Err(AppleError::NotACrash(_))
        ));
        let ppc = IPS.replace("ARM-64", "PPC");
        assert!(matches!(parse(ppc.as_bytes()), Err(AppleError::Arch(_))));
        // deep nesting is refused by serde_json's recursion limit, not a stack overflow
        let deep = format!("{{\"bug_type\":\"309\"}}\n{}", "[".repeat(100_000));
        assert!(parse(deep.as_bytes()).is_err());
    }
}
