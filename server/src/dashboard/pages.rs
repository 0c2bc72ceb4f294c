//! The dashboard's HTML, one function per page (maud). maud escapes every `(value)`
//! spliced into the markup; `PreEscaped` is used only for the fixed style sheet.

use std::collections::HashMap;

use engine::report::signature::Explanation;
use engine::report::{AnalysisKind, Frame, LookupResult, Report, Thread};
use maud::{html, Markup, PreEscaped, DOCTYPE};
use worker::store::binaries::BinaryRow;
use worker::store::crashes::{CrashRow, CrashSummary};
use worker::store::dashboard::{Failure, Group, GroupSort};
use worker::store::missing::MissingModule;

use super::nav::Nav;
use super::time::{format_day, format_ms};
use super::url_component;

const STYLE: &str = r#"
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;gap:1.4em;align-items:baseline}
header a{color:#cfd8ea;text-decoration:none}th a.sort{color:inherit;text-decoration:none}header a:hover{color:#fff}
header .brand{font-weight:700;color:#fff;font-size:1.1em}
header form{margin-left:auto;color:#cfd8ea}header button{padding:.2em .7em}
main{padding:1em 1.4em;max-width:1400px}
h1{font-size:1.35em;margin:.3em 0 .6em}h2{font-size:1.1em;margin:1.3em 0 .5em}
table{border-collapse:collapse;width:100%;background:#fff;margin-bottom:1em}
th,td{border-bottom:1px solid #e3e6eb;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600;font-size:.92em}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.92em}
.sig{font-family:ui-monospace,monospace;word-break:break-all}
form.filters{display:flex;gap:.8em;flex-wrap:wrap;align-items:end;margin-bottom:1em}
form.filters label{display:flex;flex-direction:column;font-size:.85em;color:#555}
.pill{display:inline-block;padding:0 .45em;border-radius:.6em;font-size:.85em;background:#e3e6eb}
.s-done{background:#d6f0dc}.s-failed{background:#f8d4d4}.s-pending,.s-processing{background:#fbeec8}
tr.weak td{color:#8a90a0}tr.weak td.trust{font-style:italic}
tr.inl td.fn{padding-left:2.2em}tr.inl td.fn:before{content:"↳ ";color:#8a90a0}
tr.missing{background:#fff1f1}
.status-missing{color:#b00020;font-weight:700}
.status-ok{color:#1a7f37}
.kind{font-family:monospace;background:#eef;padding:0 .3em;border-radius:3px}
details{background:#fff;border:1px solid #e3e6eb;margin:.4em 0;padding:.3em .6em}
summary{cursor:pointer;font-weight:600}
.kv td:first-child{font-weight:600;width:12em}
.warn{background:#fff8e1;border-left:4px solid #f0b400;padding:.3em .6em;margin:.3em 0}
pre.cmd{background:#1d2330;color:#e8ecf4;padding:.4em .6em;white-space:pre-wrap;word-break:break-all;margin:.2em 0}
button{background:#2f5bd3;color:#fff;border:0;padding:.4em 1em;border-radius:3px;cursor:pointer}
svg.chart rect{fill:#2f5bd3}svg.chart{background:#f0f2f7}
.muted{color:#8a90a0}
.reason{font-family:system-ui,sans-serif;color:#4a5060;font-size:.92em;word-break:normal}
dl.evidence{display:grid;grid-template-columns:max-content 1fr;gap:0 1em;margin:.4em 0 0}
dl.evidence dt{color:#555}dl.evidence dd{margin:0;font-family:ui-monospace,monospace;word-break:break-all}
pre.source{background:#fff;border:1px solid #e3e6eb;padding:.4em 0;overflow-x:auto;margin:.2em 0}
pre.source span{display:block;padding:0 .6em}pre.source mark{display:block;padding:0 .6em;background:#fff1c2}
pre.source i{display:inline-block;min-width:3.5em;color:#8a90a0;font-style:normal}
"#;

fn layout(title: &str, nav: &Nav, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) " — postmortem" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                (nav.header())
                main { (body) }
            }
        }
    }
}

fn status_pill(status: &str) -> Markup {
    let class = match status {
        "done" => "pill s-done",
        "failed" => "pill s-failed",
        "pending" => "pill s-pending",
        "processing" => "pill s-processing",
        _ => "pill",
    };
    html! { span class=(class) { (status) } }
}

/// A group row's data.
pub struct GroupView {
    pub group: Group,
    /// Crashes per day, oldest first, the last entry today.
    pub per_day: Vec<i64>,
    pub products: Vec<(Option<String>, Option<String>)>,
}

/// A small bar chart of crashes per day.
fn chart(per_day: &[i64], today: i64) -> Markup {
    let max = per_day.iter().copied().max().unwrap_or(0).max(1);
    let (w, h, bar) = (per_day.len() as i64 * 8, 28i64, 6i64);
    let first = today - per_day.len() as i64 + 1;
    html! {
        svg.chart width=(w) height=(h) viewBox={"0 0 " (w) " " (h)} role="img"
            aria-label="crashes per day" {
            @for (i, &c) in per_day.iter().enumerate() {
                @let bh = if c > 0 { (c * (h - 2) / max).max(2) } else { 0 };
                rect x=(i as i64 * 8 + 1) y=(h - bh) width=(bar) height=(bh) {
                    title { (format_day(first + i as i64)) ": " (c) }
                }
            }
        }
    }
}

/// The hidden field that keeps the project in a GET form of the page.
fn project_field(nav: &Nav) -> Markup {
    html! {
        @if let Some(p) = &nav.project { input type="hidden" name="project" value=(p); }
    }
}

/// The order of the groups page.
#[derive(Debug, Clone, Copy)]
pub struct GroupOrder {
    pub sort: GroupSort,
    pub descending: bool,
}

/// The groups page's current filters and order, which its links keep.
struct GroupsQuery<'a> {
    nav: &'a Nav,
    params: &'a HashMap<String, String>,
    days: String,
    order: GroupOrder,
}

impl GroupsQuery<'_> {
    fn get(&self, k: &str) -> &str {
        self.params.get(k).map(String::as_str).unwrap_or("")
    }

    /// This page's address with `sort`, `descending` and an optional cursor (with the
    /// project of its group when the page spans every project).
    fn href(&self, sort: GroupSort, descending: bool, after: Option<Cursor<'_>>) -> String {
        let mut q = vec![
            ("days", self.days.as_str()),
            ("product", self.get("product")),
            ("version", self.get("version")),
            ("kind", self.get("kind")),
            ("sort", sort.name()),
            ("dir", if descending { "desc" } else { "asc" }),
        ];
        if let Some((after, project)) = after {
            q.push(("after", after));
            q.push(("after_project", project.unwrap_or("")));
        }
        self.nav.href("/", &q)
    }

    /// A column header that sorts by its column; on the current one it flips the
    /// direction.
    fn header(&self, label: &str, sort: GroupSort) -> Markup {
        let order = self.order;
        let descending = if sort == order.sort {
            !order.descending
        } else {
            sort.default_descending()
        };
        let arrow = match (sort == order.sort, order.descending) {
            (false, _) => "",
            (true, true) => " ▼",
            (true, false) => " ▲",
        };
        html! { a.sort href=(self.href(sort, descending, None)) data-sort=(sort.name()) { (label) (arrow) } }
    }
}

/// The groups page's filter form.
fn group_filters(q: &GroupsQuery<'_>) -> Markup {
    let order = q.order;
    html! {
        form.filters method="get" action="/" {
            (project_field(q.nav))
            label { "Time range"
                select name="days" {
                    @for (v, label) in [("1", "last day"), ("7", "last 7 days"), ("30", "last 30 days"), ("90", "last 90 days"), ("all", "all time")] {
                        option value=(v) selected[q.days == v] { (label) }
                    }
                }
            }
            label { "Product" input name="product" value=(q.get("product")); }
            label { "Version" input name="version" value=(q.get("version")); }
            label { "Kind" select name="kind" {
                option value="" selected[q.get("kind").is_empty()] { "any" }
                @for k in AnalysisKind::all() {
                    option value=(k) selected[q.get("kind") == k.as_str()] { (k) }
                }
            } }
            label { "Sort by"
                select name="sort" {
                    @for (v, label) in [(GroupSort::Count, "crashes"), (GroupSort::LastSeen, "last seen"), (GroupSort::FirstSeen, "first seen"), (GroupSort::Signature, "signature")] {
                        option value=(v.name()) selected[order.sort == v] { (label) }
                    }
                }
            }
            label { "Order"
                select name="dir" {
                    option value="desc" selected[order.descending] { "descending" }
                    option value="asc" selected[!order.descending] { "ascending" }
                }
            }
            button type="submit" { "Filter" }
        }
    }
}

/// The groups page's cursor: `KEY:SIGNATURE` of the last group, and its project when the
/// page spans every project.
pub type Cursor<'a> = (&'a str, Option<&'a str>);

/// The groups table, inside the form that merges the ticked ones.
fn groups_table(groups: &[GroupView], q: &GroupsQuery<'_>, today: i64) -> Markup {
    let every = q.nav.project.is_none();
    html! {
        form #merge method="post" action=(q.nav.href("/groups/merge", &[])) {
        p.muted { "Tick groups that are one bug and merge them (into the one chosen, else the first ticked): "
            button type="submit" { "Merge the ticked groups" } }
        table #groups {
            thead { tr {
                th { "Merge" } th { "Into" }
                @if every { th { "Project" } }
                th { (q.header("Signature", GroupSort::Signature)) } th { (q.header("Crashes", GroupSort::Count)) }
                th { (q.header("First seen", GroupSort::FirstSeen)) } th { (q.header("Last seen", GroupSort::LastSeen)) }
                th { "Products / versions" } th { "Last " (groups.first().map_or(0, |g| g.per_day.len())) " days" }
            } }
            tbody {
                @for g in groups {
                    tr {
                        td { input type="checkbox" name="group" value=(g.group.signature); }
                        td { input type="radio" name="into" value=(g.group.signature); }
                        @if every { td.project { (g.group.project) } }
                        td.sig { a href=(q.nav.href("/crashes", &[("signature", &g.group.signature)])) { (g.group.signature) } }
                        td.count { (g.group.count) }
                        td.mono { (format_ms(g.group.first_seen)) }
                        td.mono { (format_ms(g.group.last_seen)) }
                        td {
                            @for (p, v) in &g.products {
                                span.pill { (p.as_deref().unwrap_or("?")) " " (v.as_deref().unwrap_or("")) } " "
                            }
                        }
                        td { (chart(&g.per_day, today)) }
                    }
                }
            }
        }
        }
    }
}

/// Home: crash groups.
pub fn groups(
    nav: &Nav,
    groups: &[GroupView],
    params: &HashMap<String, String>,
    days: Option<i64>,
    order: GroupOrder,
    next: Option<Cursor<'_>>,
    today: i64,
) -> Markup {
    let q = GroupsQuery {
        nav,
        params,
        days: days.map_or("all".to_string(), |d| d.to_string()),
        order,
    };
    let body = html! {
        h1 { "Crash groups" }
        @match &nav.project {
            Some(p) => p.muted #groups-scope { "The crash groups of project " strong { (p) } ", counted over its crashes only: merging and splitting act in it." }
            None => p.muted #groups-scope { "Every project's crash groups (no project chosen): each row is one project's group, counted over that project's crashes, so a signature found in two projects is two rows, and a group's crash list shows every project's crashes of its signature. Merging and splitting act in the one project that has the groups; choose a project above to see and change one project's groups." }
        }
        (group_filters(&q))
        @if groups.is_empty() {
            p.muted { "No processed crashes match." }
        } @else {
            (groups_table(groups, &q, today))
        }
        @if let Some(after) = next {
            a #next href=(q.href(order.sort, order.descending, Some(after))) { "Next page →" }
        }
    };
    layout("Crash groups", nav, body)
}

/// The crash list: each crash's signature with its analysis kind (from the search index,
/// `kinds`) and, under it, the analysis's sentence (`summaries`), by crash id.
/// What the crash list shows beside its rows.
pub struct CrashListPage<'a> {
    pub nav: &'a Nav,
    /// Each crash's analysis kind (from the search index), by crash id.
    pub kinds: &'a HashMap<String, String>,
    /// Each crash's analysis sentence, by crash id.
    pub summaries: &'a HashMap<String, String>,
    pub params: &'a HashMap<String, String>,
    /// The next page's cursor.
    pub next: Option<&'a str>,
    /// On one group's list: the groups merged into it (with their crash counts), which
    /// a split can give back.
    pub merged: Option<&'a [(String, i64)]>,
    /// On one signature's list of every project's crashes: the projects that have a group
    /// of that name, when several do (the page then offers no split: choose one).
    pub several: &'a [String],
    /// The project's disk use and removed dumps (first page of one project's list).
    pub usage: Option<&'a ProjectUsage>,
}

/// What a project's blobs take and what its retention and sampling removed.
#[derive(Debug, Default)]
pub struct ProjectUsage {
    pub bytes: worker::store::usage::Bytes,
    /// Crashes whose dump was removed, by reason (`retention`, `sampled`).
    pub gone: Vec<(String, i64)>,
    /// Uploads the project's quota refused since the server started (429): over its
    /// crashes a minute, and over its bytes a day.
    pub throttled: u64,
    pub refused: u64,
}

/// The "Disk used" line of a project's crash list.
fn usage_line(u: &ProjectUsage) -> Markup {
    let gone = |reason: &str| {
        u.gone
            .iter()
            .find(|(r, _)| r == reason)
            .map_or(0, |(_, n)| *n)
    };
    html! {
        p #usage {
            "Disk used by project " span.mono { (u.bytes.project) } ": dumps "
            span #usage-dumps { (u.bytes.dumps) } " bytes, symbol files "
            span #usage-symbols { (u.bytes.symbols) } " bytes (a file another project holds too counts in both). Dumps removed: "
            span #usage-sampled { (gone("sampled")) } " sampled, "
            span #usage-retention { (gone("retention")) } " by retention (their reports are kept)."
        }
        p #quota {
            "Uploads refused by the project's quota since the server started (429): "
            span #quota-throttled { (u.throttled) } " over its crashes a minute, "
            span #quota-refused { (u.refused) } " over its bytes a day."
        }
    }
}

/// The "Merged into this group" section: one undo button per merged group.
fn merged_section(nav: &Nav, group: &str, merged: &[(String, i64)]) -> Markup {
    html! {
        @if !merged.is_empty() {
            h2 { "Merged into this group" }
            table #merged {
                thead { tr { th { "Group" } th { "Crashes" } th {} } }
                tbody { @for (from, n) in merged {
                    tr { td.sig { (from) } td { (n) } td {
                        form method="post" action=(nav.href("/groups/split", &[])) {
                            input type="hidden" name="group" value=(group);
                            input type="hidden" name="undo" value=(from);
                            button.undo type="submit" { "Undo merge" }
                        }
                    } }
                } }
            }
        }
    }
}

/// The crash list's table; with a checkbox per crash on one group's list (`group`).
fn crash_table(rows: &[CrashSummary], page: &CrashListPage<'_>, group: Option<&str>) -> Markup {
    let (kinds, summaries, nav) = (page.kinds, page.summaries, page.nav);
    html! {
        table #crashes {
            thead { tr { @if group.is_some() { th {} } th { "Received" } th { "Crash" } th { "Status" } th { "Signature" } th { "Format" } } }
            tbody {
                @for r in rows {
                    tr {
                        @if group.is_some() { td { input type="checkbox" name="crash" value=(r.id); } }
                        td.mono { (format_ms(r.received_at)) }
                        td.mono.id { a href=(nav.href(&format!("/crashes/{}", url_component(&r.id)), &[])) { (r.id) } }
                        td { (status_pill(&r.status)) }
                        td.sig {
                            (r.signature.as_deref().unwrap_or(""))
                            @if let Some(c) = r.computed_signature.as_deref().filter(|c| Some(*c) != r.signature.as_deref()) {
                                div.computed.muted { "signature: " (c) }
                            }
                            @if let Some(k) = kinds.get(&r.id) { " " span.kind { (k) } }
                            @if let Some(s) = summaries.get(&r.id) { div.reason { (s) } }
                        }
                        td { (r.dump_format) }
                    }
                }
            }
        }
    }
}

pub fn crash_list(rows: &[CrashSummary], page: &CrashListPage<'_>) -> Markup {
    let (params, next) = (page.params, page.next);
    let nav = page.nav;
    let get = |k: &str| params.get(k).map(String::as_str).unwrap_or("");
    // On one group's list (and only there), crashes can be ticked and split out.
    let group = page.merged.map(|_| get("signature"));
    let table = crash_table(rows, page, group);
    let body = html! {
        h1 { "Crashes" }
        @if let Some(u) = page.usage { (usage_line(u)) }
        form.filters method="get" action="/crashes" {
            (project_field(nav))
            label { "Signature" input name="signature" size="50" value=(get("signature")); }
            label { "Status"
                select name="status" {
                    @for v in ["", "pending", "processing", "done", "failed"] {
                        option value=(v) selected[get("status") == v] { @if v.is_empty() { "any" } @else { (v) } }
                    }
                }
            }
            label { "Product" input name="product" size="12" value=(get("product")); }
            label { "Version" input name="version" size="10" value=(get("version")); }
            label { "Module" input name="module" size="16" placeholder="libc.so.6" value=(get("module")); }
            label { "Function contains" input name="function" size="20" value=(get("function")); }
            label { "Kind" select name="kind" {
                option value="" selected[get("kind").is_empty()] { "any" }
                @for k in AnalysisKind::all() {
                    option value=(k) selected[get("kind") == k.as_str()] { (k) }
                }
            } }
            label { "From" input type="date" name="from" value=(get("from")); }
            label { "To" input type="date" name="to" value=(get("to")); }
            button type="submit" { "Filter" }
        }
        @if let (Some(g), Some(m)) = (group, page.merged) { (merged_section(nav, g, m)) }
        @if page.several.len() > 1 {
            p.muted #several-projects { "Projects " (page.several.join(", ")) " each have a group of this signature, and this list shows all their crashes: choose a project above to see one group, split it or undo its merges." }
        }
        @if rows.is_empty() {
            p.muted { "No crashes match." }
        } @else {
            @if let Some(g) = group {
                form #split method="post" action=(nav.href("/groups/split", &[])) {
                    input type="hidden" name="group" value=(g);
                    p {
                        label { "New group's name " input name="name" size="40" placeholder={ (g) " (split)" }; }
                        " " button type="submit" { "Split the ticked crashes into a new group" }
                    }
                    (table)
                }
            } @else { (table) }
        }
        @if let Some(after) = next {
            a #next href=(nav.href("/crashes", &[("signature", get("signature")), ("status", get("status")), ("product", get("product")), ("version", get("version")), ("module", get("module")), ("function", get("function")), ("kind", get("kind")), ("from", get("from")), ("to", get("to")), ("after", after)])) { "Next page →" }
        }
    };
    layout("Crashes", nav, body)
}

/// The command that uploads module `name` to `url` (the binaries route, with the project).
fn upload_command(url: &str, name: &str, with_token: bool) -> String {
    let auth = if with_token {
        "-H \"Authorization: Bearer $TOKEN\" "
    } else {
        ""
    };
    // The module name is shell-quoted for the copy-paste, and escaped by maud for HTML.
    let quoted = format!("'{}'", name.replace('\'', "'\\''"));
    format!("curl {auth}-F file=@{quoted} {url}")
}

fn frame_row(f: &Frame, signature_frames: &[usize]) -> Markup {
    // Scanned frames are guesses: the row is greyed.
    let weak = f.trust == engine::report::Trust::Scan;
    let class = match (weak, f.inlined) {
        (true, true) => Some("weak inl"),
        (true, false) => Some("weak"),
        (false, true) => Some("inl"),
        (false, false) => None,
    };
    let location = match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{file}:{line}"),
        (Some(file), None) => file.clone(),
        _ => String::new(),
    };
    html! {
        tr class=[class] {
            td { (f.index) @if signature_frames.contains(&f.index) { " ★" } }
            td.mono { (f.module.as_deref().unwrap_or("?")) }
            td.fn.mono { (f.function.as_deref().unwrap_or("")) }
            td.mono.loc { (location) }
            td.mono { (f.module_offset.unwrap_or(f.pc)) }
            td.trust { (f.trust) @if f.inlined { " (inlined)" } }
        }
    }
}

fn frames_table(t: &Thread, signature_frames: &[usize]) -> Markup {
    html! {
        table.frames {
            thead { tr { th { "#" } th { "Module" } th { "Function" } th { "File:line" } th { "Offset" } th { "Trust" } } }
            tbody { @for f in &t.frames { (frame_row(f, signature_frames)) } }
        }
        p.muted { "Walk ended: " (t.end) @if let Some(d) = &t.end_detail { " — " (d) } }
    }
}

/// The source lines around the crashed thread's first frame that has them (the innermost
/// frame in code with sources: frame 0 is often in a library without), its line marked:
/// the line an engineer opens the file for, as gdb prints it where the program stopped.
fn source_block(t: &Thread, modules: &[engine::report::Module], page: &CrashPage<'_>) -> Markup {
    let Some(f) = t.frames.iter().find(|f| f.context_line.is_some()) else {
        return html! {};
    };
    let (Some(line), Some(text)) = (f.line, &f.context_line) else {
        return html! {};
    };
    let n = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
    let first = line.saturating_sub(n(f.pre_context.len()));
    let file = f.file.as_deref().unwrap_or("?");
    let build = sources::source_link::Build {
        commit: page.commit.as_deref(),
        build_id: f
            .module_index
            .and_then(|m| modules.get(m))
            .and_then(|m| m.build_id.as_deref()),
    };
    // the mapped URL, at the line (`#L8`, as the forges mark one)
    let link = sources::source_link::urls(page.source_links, file, build)
        .map(|(_, web)| format!("{web}#L{line}"));
    html! {
        h2 #source { "Source of frame " (f.index) }
        p.mono {
            @if let Some(url) = &link {
                a #source-link href=(url) rel="noopener noreferrer nofollow" { (file) ":" (line) }
            } @else { (file) ":" (line) }
            @if let Some(func) = &f.function { " in " (func) } }
        pre.source {
            @for (i, l) in f.pre_context.iter().enumerate() {
                span { i { (first.saturating_add(n(i))) } (l) }
            }
            mark { i { (line) } (text) }
            @for (i, l) in f.post_context.iter().enumerate() {
                span { i { (line.saturating_add(1).saturating_add(n(i))) } (l) }
            }
        }
    }
}

/// What the crash page shows beside the crash row and its report.
pub struct CrashPage<'a> {
    /// Each module's name, and whether a binary with its build-id was uploaded.
    pub uploaded: &'a [(String, bool)],
    /// The URL the upload commands name (the binaries route, with the project).
    pub upload_url: &'a str,
    pub nav: &'a Nav,
    pub with_token: bool,
    /// The report's signature under the service's rules, frame by frame.
    pub explained: Option<&'a Explanation>,
    /// The source-link mappings, and the crash's commit: the source block links its
    /// frame's file to the repository.
    pub source_links: &'a [sources::source_link::Mapping],
    pub commit: Option<String>,
}

/// The "Signature, explained" section: each frame's verdict and the rule that gave it.
fn signature_explained(e: &Explanation) -> Markup {
    html! {
        details #signature-explained {
            summary { "Signature, explained (rules version " (e.rules_version) ")" }
            @if let Some(k) = &e.kind_prefix { p.mono { "first: " (k) } }
            table.frames {
                thead { tr { th { "#" } th { "Verdict" } th { "Frame" } th { "Rule" } } }
                tbody {
                    @for f in &e.frames {
                        tr class={ "verdict-" (f.verdict.as_str()) } {
                            td { (f.index) } td { (f.verdict.as_str()) }
                            td.mono { (f.frame) } td { (f.why) }
                        }
                    }
                }
            }
        }
    }
}

/// The crash's facts: signature and group, analysis, reason, dump and times.
fn crash_facts(nav: &Nav, row: &CrashRow, r: &Report) -> Markup {
    html! {
        table.kv {
            @if let Some(s) = &r.signature { tr { td { "Signature" } td.sig {
                a href=(nav.href("/crashes", &[("signature", &s.text)])) { (s.text) } } } }
            @if let Some(g) = row.signature.as_deref().filter(|g| Some(*g) != row.computed_signature.as_deref()) {
                tr #group { td { "Group" } td.sig {
                    a href=(nav.href("/crashes", &[("signature", g)])) { (g) }
                    " " span.muted { "(merged or split by hand)" } } } }
            @if let Some(prev) = row.previous_signature.as_deref().filter(|p| Some(*p) != row.signature.as_deref()) {
                tr.sig-changed { td { "Signature changed" } td.sig { "was " (prev) } } }
            @if let Some(c) = &r.crash {
                @if let Some(a) = &c.analysis { tr #analysis { td { "Analysis" } td {
                    span.kind { (a.kind) } " " (a.summary)
                    @if !a.evidence.is_empty() {
                        dl.evidence { @for (k, v) in &a.evidence { dt { (k) } dd { (v) } } }
                    }
                } } }
                tr { td { "Reason" } td { (c.reason) } }
                @if let Some(i) = &c.instruction { tr #instruction { td { "Instruction" } td.mono { (i.describe()) } } }
                @if let Some(a) = &c.assertion { tr { td { "Assertion" } td { (a) } } } }
            tr { td { "Executable" } td.mono { (r.dump.executable.as_deref().unwrap_or("?")) } }
            tr { td { "Dump" } td { (r.dump.format) ", " (r.dump.os) "/" (r.dump.arch) ", " (r.dump.size) " bytes" } }
            tr { td { "Received" } td.mono { (format_ms(row.received_at)) } }
            @if let Some(t) = row.finished_at {
                tr #processed { td { "Processed" } td {
                    span.mono { (format_ms(t)) }
                    " · " (row.completions) @if row.completions == 1 { " time" } @else { " times" }
                } }
            }
        }
    }
}

/// The crashed thread (frames, source, registers), then the others folded.
fn crash_threads(r: &Report, page: &CrashPage<'_>) -> Markup {
    let sig_frames = r
        .signature
        .as_ref()
        .map(|s| s.frames.clone())
        .unwrap_or_default();
    html! {
        @for t in r.threads.iter().filter(|t| t.crashed) {
            h2 #crashed { "Crashed thread " (t.tid) @if let Some(n) = &t.name { " (" (n) ")" } }
            (frames_table(t, &sig_frames))
            p.muted { "★ frames that make the signature · grey italic rows were found by stack scanning and may be wrong · ↳ inlined" }
            (source_block(t, &r.modules, page))
            h2 { "Registers of the crashing frame" }
            table.regs.mono { tbody {
                @for chunk in t.registers.iter().collect::<Vec<_>>().chunks(4) {
                    tr { @for (k, v) in chunk { td { b { (k) } } td { (v) } } }
                }
            } }
        }
        h2 { "Other threads" }
        @if r.threads.iter().all(|t| t.crashed) { p.muted { "None." } }
        @for t in r.threads.iter().filter(|t| !t.crashed) {
            details {
                summary { "Thread " (t.tid) @if let Some(n) = &t.name { " (" (n) ")" } " — " (t.frames.len()) " frames" }
                (frames_table(t, &[]))
            }
        }
    }
}

/// The modules table: status, where files came from, and the upload command of a
/// missing one.
fn crash_modules(r: &Report, page: &CrashPage<'_>) -> Markup {
    html! {
        h2 { "Modules" }
        table #modules {
            thead { tr { th { "Name" } th { "Build-id" } th { "Base" } th { "Status" } th { "Unwind" } th { "Symbols" } } }
            tbody {
                @for (i, m) in r.modules.iter().enumerate() {
                    @let missing = m.status == engine::report::ModuleStatus::Missing;
                    @let is_uploaded = page.uploaded.get(i).is_some_and(|u| u.1);
                    tr class=[missing.then_some("missing")] {
                        td.mono { (m.name) }
                        td.mono { (m.build_id.as_deref().unwrap_or("—")) }
                        td.mono { (m.base) }
                        td class={ "status-" (m.status) } {
                            (m.status)
                            @if missing && is_uploaded { " (uploaded since: reprocess)" }
                            @for source in fetched_from(m) { br; span.muted.origin { "fetched from " (source) } }
                            @for l in m.lookups.iter().filter(|l| l.result != LookupResult::Fetched) {
                                br;
                                @let error = l.result == LookupResult::Error;
                                span.origin class=[error.then_some("status-missing")] {
                                    (l.file) @if error { " — source error at " } @else { " not found at " } (l.source)
                                    (engine::report::text::lookup_note(l))
                                }
                            }
                        }
                        td { (names(&m.unwind, |s| s.as_str())) }
                        td { (names(&m.symbols, |s| s.as_str())) }
                    }
                    @if missing && m.build_id.is_some() && !is_uploaded {
                        tr.missing { td colspan="6" {
                            "Upload it: " pre.cmd { (upload_command(page.upload_url, m.path.as_deref().unwrap_or(&m.name), page.with_token)) }
                        } }
                    }
                }
            }
        }
    }
}

/// One crash.
pub fn crash_detail(row: &CrashRow, report: Option<&Report>, page: &CrashPage<'_>) -> Markup {
    let id = url_component(&row.id);
    let nav = page.nav;
    let body = html! {
        h1 { "Crash " span.mono { (row.id) } " " (status_pill(&row.status)) }
        p {
            a #report-json href=(nav.href(&format!("/crashes/{id}/report.json"), &[])) { "Raw report JSON" } " · "
            @if row.dump_gone.is_none() {
                a #dump href=(nav.href(&format!("/api/v1/crashes/{id}/dump"), &[])) { "Download dump" }
            } @else { "Dump removed" }
            " · project " span.mono #project { (row.project) }
        }
        @if let Some(reason) = &row.dump_gone {
            div.warn #dump-gone {
                "Dump removed (" (reason) ", " (super::time::format_ms(row.dump_gone_at.unwrap_or(0))) "): "
                (worker::store::dump_gone::explain(reason)) "."
            }
        } @else {
            form method="post" action=(nav.href(&format!("/crashes/{id}/reprocess"), &[])) {
                button type="submit" { "Reprocess" }
            }
        }
        @if let Some(e) = &row.error { div.warn { "Error: " (e) } }
        @match report {
            None => { p.muted { "No report yet." } }
            Some(r) => {
                (crash_facts(nav, row, r))
                @for w in &r.warnings { div.warn { code { (w.code) } " " (w.message) } }
                @if let Some(e) = page.explained { (signature_explained(e)) }
                (crash_threads(r, page))
                (crash_modules(r, page))
                h2 { "Annotations" }
                @if r.annotations.is_empty() { p.muted { "None." } } @else {
                    table.kv { @for (k, v) in &r.annotations { tr { td { (k) } td { (v) } } } }
                }
            }
        }
    };
    layout(&format!("Crash {}", row.id), nav, body)
}

/// The remote sources a module's files were fetched from, each once.
fn fetched_from(m: &engine::report::Module) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for source in m.files.iter().filter_map(|f| f.source.as_deref()) {
        if !out.contains(&source) {
            out.push(source);
        }
    }
    out
}

/// Build-ids needed by crashes and never uploaded.
pub fn missing(nav: &Nav, rows: &[MissingModule], upload_url: &str, with_token: bool) -> Markup {
    let body = html! {
        h1 { "Missing symbols" }
        p { "Build-ids that crashes needed and no binary was uploaded for (Apple images: the UUID of the dSYM they need), most-needed first. Uploading one reprocesses the crashes that missed it." }
        @if rows.is_empty() { p.muted { "Nothing is missing." } } @else {
            table #missing {
                thead { tr { th { "Module" } th { "Build-id" } th { "Crashes" } th { "Last seen" } th { "Upload command" } } }
                tbody {
                    @for m in rows {
                        tr {
                            @let uuid = super::dsym::apple_uuid(&m.build_id, &m.module_name);
                            td.mono { (m.module_name) }
                            td.mono {
                                @if let Some(uuid) = &uuid { span.dsym { "dSYM UUID " (uuid) } } @else { (m.build_id) }
                            }
                            td { (m.crash_count) }
                            td.mono { (format_ms(m.last_seen)) }
                            td { pre.cmd {
                                @if uuid.is_some() { (super::dsym::upload_command(upload_url, &m.module_name, with_token)) }
                                @else { (upload_command(upload_url, &m.module_name, with_token)) }
                            } }
                        }
                    }
                }
            }
        }
    };
    layout("Missing symbols", nav, body)
}

/// Uploaded binaries, newest first.
pub fn binaries(nav: &Nav, rows: &[BinaryRow]) -> Markup {
    let body = html! {
        h1 { "Binaries" }
        @if rows.is_empty() { p.muted { "No binaries uploaded." } } @else {
            table #binaries {
                thead { tr { th { "File" } th { "Build-id" } th { "Kind" } th { "Arch" } th { "Size" } th { "Sections" } th { "Uploaded" } } }
                tbody {
                    @for b in rows {
                        tr {
                            td.mono { (b.file_name.as_deref().unwrap_or("?")) }
                            td.mono { (b.build_id) }
                            td { (b.kind) }
                            td { (b.arch.as_deref().unwrap_or("?")) }
                            td { (b.size) }
                            td.mono { (b.section_list().join(" ")) }
                            td.mono { (format_ms(b.uploaded_at)) }
                        }
                    }
                }
            }
        }
    };
    layout("Binaries", nav, body)
}

/// Queue depth by status and the latest failures.
pub fn jobs(nav: &Nav, counts: &[(String, i64)], failures: &[Failure]) -> Markup {
    let body = html! {
        h1 { "Jobs" }
        p.muted #server-wide { "The queue and its failures of every project (server-wide tokens only)." }
        h2 { "Queue" }
        table #queue.kv {
            @for status in ["pending", "processing", "done", "failed"] {
                @let n = counts.iter().find(|(s, _)| s == status).map_or(0, |c| c.1);
                tr { td { (status_pill(status)) } td { (n) } }
            }
        }
        h2 { "Failures" }
        @if failures.is_empty() { p.muted { "No failed jobs." } } @else {
            table #failures {
                thead { tr { th { "Received" } th { "Crash" } th { "Attempts" } th { "Reason" } } }
                tbody {
                    @for f in failures {
                        tr {
                            td.mono { (format_ms(f.received_at)) }
                            td.mono { a href=(nav.href(&format!("/crashes/{}", url_component(&f.id)), &[])) { (f.id) } }
                            td { (f.attempts) }
                            td { (f.error.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    };
    layout("Jobs", nav, body)
}

/// A module's sources as the page lists them: their report names, comma-separated.
fn names<T: Copy>(sources: &[T], name: impl Fn(T) -> &'static str) -> String {
    sources
        .iter()
        .map(|&s| name(s))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_escaped() {
        let m = MissingModule {
            build_id: "ab<cd".into(),
            module_name: "<script>alert(1)</script>'x".into(),
            crash_count: 1,
            last_seen: 0,
        };
        let nav = Nav {
            project: None,
            server_wide: true,
            projects: Vec::new(),
            here: "/missing".into(),
            keep: Vec::new(),
        };
        let html = missing(&nav, &[m], "http://h:1/api/v1/binaries", false).into_string();
        assert!(!html.contains("<script>alert"));
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("ab&lt;cd"));
    }
}
