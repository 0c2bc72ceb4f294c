//! The dashboard: server-rendered HTML pages (maud, no JavaScript) over the same store
//! the API reads.
//!
//! - `/`: crash groups, one row per project and signature, with a crashes-per-day chart, sortable by
//!   count, first seen, last seen or signature (column headers or the form), and a form that merges the groups ticked (`POST /groups/merge`);
//! - `/crashes`, `/crashes/{id}`: the crash list and one crash's report, with a
//!   Reprocess form (`POST /crashes/{id}/reprocess`); a group's crash list
//!   (`/crashes?signature=…`) splits the crashes ticked into a new group, or undoes a
//!   merge (`POST /groups/split`);
//! - `/missing`, `/binaries`, `/jobs`: build-ids waiting for an upload (Apple images by
//!   UUID, with their dSYM's upload command: `dsym`), uploaded files, the queue;
//! - `/crashes/{id}/report.json`: the raw report (the dump's download link is the API's
//!   `/api/v1/crashes/{id}/dump`, which takes these pages' credentials too).
//!
//! Every string that comes from a report (function names, paths, annotations) is
//! attacker-controlled: maud escapes everything spliced with `(…)`, and nothing here uses
//! `PreEscaped` on such data. Pages need the `admin` scope when tokens are configured: a
//! bearer token, or for a browser HTTP Basic auth with the token as password (any user
//! name). Since a browser then sends credentials on its own, the Reprocess, merge and
//! split POSTs are refused unless they come from the dashboard's own origin.
//!
//! Pages act in a project like the API (issue 41): a project token's own, or the one a
//! server-wide token names with `?project=` (none: every project). The crash list, a
//! crash's page, its report and Reprocess, the groups page, merge and split, the
//! missing-symbols and binaries pages show that project's rows only (another project's
//! crash or group is the same 404 as a missing one; groups are kept per project by
//! migration 0026). With no project named, the groups page lists every project's groups,
//! each with its project, and a merge or split acts in the one project that has the
//! groups (`api::groups::decision_project`). The jobs page spans every project and stays
//! server-wide (403 to a project token). Every page has the project switcher (`nav`).

mod dsym;
mod nav;
mod pages;
mod time;

use std::collections::HashMap;

use axum::extract::{Form, Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use engine::report::Report;
use worker::store::served_report::{pieces, Piece};
use worker::store::{binaries, crashes, dashboard as q, missing, projects};

use crate::api::auth::{self, Who};
use crate::api::browser_auth::{caller, DashError};
use crate::api::crashes::crash_or_404;
use crate::api::problem::ApiError;
use crate::api::state::{AppState, Scope};
use nav::Nav;

/// Rows per page of every listing.
const PAGE: i64 = 50;
/// Days shown by a group's chart.
const CHART_DAYS: i64 = 14;
const DAY_MS: i64 = 86_400_000;

/// The dashboard's routes (merged into the API router, which adds the layers and state).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(groups))
        .route("/crashes", get(crash_list))
        .route("/crashes/{id}", get(crash_detail))
        .route("/crashes/{id}/reprocess", post(reprocess))
        .route("/groups/merge", post(merge_groups))
        .route("/groups/split", post(split_group))
        .route("/crashes/{id}/report.json", get(report_json))
        .route("/missing", get(missing_page))
        .route("/binaries", get(binaries_page))
        .route("/jobs", get(jobs_page))
}

type Params = Query<HashMap<String, String>>;

/// A query parameter, `None` when absent or empty (an empty form field means "any").
fn param<'a>(q: &'a HashMap<String, String>, key: &str) -> Option<&'a str> {
    q.get(key).map(|s| s.trim()).filter(|s| !s.is_empty())
}

/// The binaries route the upload commands name: the request's Host header (else a
/// placeholder), and the page's project.
fn upload_url(headers: &HeaderMap, nav: &Nav) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        })
        .unwrap_or("HOST:PORT");
    format!("http://{host}{}", nav.href("/api/v1/binaries", &[]))
}

async fn groups(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(params): Params,
) -> Result<Html<String>, DashError> {
    let (who, nav) = viewer(&s, &headers, &params, "/").await?;
    let now = worker::store::now_ms();
    let days = match param(&params, "days") {
        Some("all") => None,
        Some(d) => Some(
            d.parse::<i64>()
                .ok()
                .filter(|d| (1..=3650).contains(d))
                .ok_or_else(|| bad(format!("days must be 1 to 3650 or all, not {d:?}")))?,
        ),
        None => Some(30),
    };
    let sort = match param(&params, "sort") {
        Some(v) => q::GroupSort::parse(v).ok_or_else(|| {
            bad(format!(
                "sort must be count, first_seen, last_seen or signature, not {v:?}"
            ))
        })?,
        None => q::GroupSort::default(),
    };
    let descending = match param(&params, "dir") {
        Some("asc") => false,
        Some("desc") => true,
        Some(d) => return Err(bad(format!("dir must be asc or desc, not {d:?}")).into()),
        None => sort.default_descending(),
    };
    // The cursor is `KEY:SIGNATURE` (the key is a number, so the first colon ends it).
    let after = match param(&params, "after") {
        Some(a) => Some(
            a.split_once(':')
                .and_then(|(k, sig)| Some((k.parse::<i64>().ok()?, sig.to_string())))
                .ok_or_else(|| bad(format!("after must be KEY:SIGNATURE, not {a:?}")))?,
        ),
        None => None,
    };
    let query = q::GroupQuery {
        project: who.project.clone(),
        after_project: param(&params, "after_project").map(str::to_string),
        since: days.map(|d| now.saturating_sub(d.saturating_mul(DAY_MS))),
        until: None,
        product: param(&params, "product").map(str::to_string),
        version: param(&params, "version").map(str::to_string),
        kind: param(&params, "kind").map(str::to_string),
        sort,
        descending,
        after,
        limit: PAGE,
    };
    let rows = q::groups(&s.db, &query).await?;
    let today = now.div_euclid(DAY_MS);
    let chart_since = (today - CHART_DAYS + 1) * DAY_MS;
    // every row's chart and products in two queries, not two per row
    let keys: Vec<q::GroupKey> = rows
        .iter()
        .map(|g| (g.project.clone(), g.signature.clone()))
        .collect();
    let charts = q::groups_days(&s.db, &keys, chart_since, now + DAY_MS).await?;
    let products = q::groups_products(&s.db, &keys, 6).await?;
    let mut groups = Vec::with_capacity(rows.len());
    for g in rows {
        let mut counts = vec![0i64; CHART_DAYS as usize];
        let own = |p: &str, sig: &str| p == g.project && sig == g.signature;
        for d in charts.iter().filter(|d| own(&d.project, &d.signature)) {
            let i = d.day.day - (today - CHART_DAYS + 1);
            if let Some(c) = usize::try_from(i).ok().and_then(|i| counts.get_mut(i)) {
                *c += d.day.count;
            }
        }
        let versions = products
            .iter()
            .filter(|(p, sig, _, _)| own(p, sig))
            .map(|(_, _, p, v)| (p.clone(), v.clone()))
            .collect();
        groups.push(pages::GroupView {
            group: g,
            per_day: counts,
            products: versions,
        });
    }
    // the cursor, and across projects the last group's project (ties of one signature)
    let next = groups
        .last()
        .filter(|_| groups.len() as i64 == PAGE)
        .map(|g| {
            let after = format!("{}:{}", sort.key(&g.group), g.group.signature);
            let project = who.project.is_none().then(|| g.group.project.clone());
            (after, project)
        });
    let order = pages::GroupOrder { sort, descending };
    Ok(Html(
        pages::groups(
            &nav,
            &groups,
            &params,
            days,
            order,
            next.as_ref().map(|(a, p)| (a.as_str(), p.as_deref())),
            today,
        )
        .into_string(),
    ))
}

async fn crash_list(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(params): Params,
) -> Result<Html<String>, DashError> {
    let (who, nav) = viewer(&s, &headers, &params, "/crashes").await?;
    let after = match param(&params, "after") {
        Some(a) => {
            let (ms, id) = a
                .split_once(':')
                .and_then(|(ms, id)| Some((ms.parse::<i64>().ok()?, id.to_string())))
                .ok_or_else(|| bad(format!("after must be MS:ID, not {a:?}")))?;
            Some((ms, id))
        }
        None => None,
    };
    let date = |key: &str| -> Result<Option<i64>, ApiError> {
        param(&params, key)
            .map(|d| {
                time::parse_date(d)
                    .ok_or_else(|| bad(format!("{key} must be a date YYYY-MM-DD, not {d:?}")))
            })
            .transpose()
    };
    let since = date("from")?;
    // `to` is inclusive: the whole day.
    let until = date("to")?.map(|d| d.saturating_add(DAY_MS));
    let query = crashes::ListQuery {
        project: who.project.clone(),
        signature: param(&params, "signature").map(str::to_string),
        status: param(&params, "status").map(str::to_string),
        since,
        until,
        product: param(&params, "product").map(str::to_string),
        version: param(&params, "version").map(str::to_string),
        module: param(&params, "module").map(str::to_string),
        function: param(&params, "function").map(str::to_string),
        kind: param(&params, "kind").map(str::to_string),
        after,
        limit: PAGE,
    };
    let rows = crashes::list(&s.db, &query).await?;
    let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    let kinds = worker::store::search::analysis_kinds(&s.db, &ids).await?;
    let summaries: HashMap<String, String> = rows
        .iter()
        .filter_map(|r| Some((r.id.clone(), r.analysis_summary.clone()?)))
        .collect();
    let next = if rows.len() as i64 == PAGE {
        rows.last().map(|r| format!("{}:{}", r.received_at, r.id))
    } else {
        None
    };
    // A group's own list offers its split (the merges it holds can be undone), in the
    // page's project, or with none named in the one project that has the group (the
    // page names them when several do).
    let (mut merged, mut several) = (None, Vec::new());
    if let Some(g) = param(&params, "signature") {
        match group_project(&s, &who, g).await? {
            Ok(p) => merged = Some(worker::store::groups::merged_into(&s.db, &p, g).await?),
            Err(projects) => several = projects,
        }
    }
    let usage = match (&who.project, &query.after) {
        (Some(project), None) => Some(project_usage(&s, project).await?),
        _ => None,
    };
    let page = pages::CrashListPage {
        nav: &nav,
        kinds: &kinds,
        summaries: &summaries,
        params: &params,
        next: next.as_deref(),
        merged: merged.as_deref(),
        several: &several,
        usage: usage.as_ref(),
    };
    Ok(Html(pages::crash_list(&rows, &page).into_string()))
}

/// The disk `project` uses and the dumps its retention and sampling removed.
async fn project_usage(s: &AppState, project: &str) -> Result<pages::ProjectUsage, DashError> {
    use worker::store::usage;
    let bytes = usage::bytes(&s.db, Some(project))
        .await?
        .into_iter()
        .next()
        .unwrap_or_else(|| usage::Bytes {
            project: project.to_string(),
            ..usage::Bytes::default()
        });
    let gone = usage::dumps_gone(&s.db, Some(project))
        .await?
        .into_iter()
        .map(|(_, reason, n)| (reason, n))
        .collect();
    // refused uploads since this server started (its quota counts, as `/metrics` has them)
    let refusals = s.quotas.counts().get(project).copied().unwrap_or_default();
    Ok(pages::ProjectUsage {
        bytes,
        gone,
        throttled: refusals.throttled,
        refused: refusals.refused,
    })
}

async fn crash_detail(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(params): Params,
) -> Result<Html<String>, DashError> {
    let (who, nav) = viewer(&s, &headers, &params, "/crashes").await?;
    let row = crash_or_404(&s, &id, who.filter()).await?;
    // A report that does not parse (an older, newer or damaged document) still shows the
    // crash row and the raw JSON link.
    let report: Option<Report> = row
        .served_report(s.config.max_report_bytes)
        .and_then(|r| serde_json::from_str(&r).ok());
    let uploaded = match &report {
        Some(r) => uploaded(&s, r, &row.project).await?,
        None => Vec::new(),
    };
    let upload = upload_url(&headers, &nav);
    let with_token = !s.config.tokens.is_empty();
    let explained = report
        .as_ref()
        .map(|r| crate::cli::signature::explain(&s.config.signature_rules, r));
    let page = pages::CrashPage {
        uploaded: &uploaded,
        upload_url: &upload,
        nav: &nav,
        with_token,
        explained: explained.as_ref(),
        source_links: &s.config.source_links,
        commit: ::worker::jobs::source_links::commit_of(&row.annotations),
    };
    Ok(Html(
        pages::crash_detail(&row, report.as_ref(), &page).into_string(),
    ))
}

async fn reprocess(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(params): Params,
) -> Result<Response, DashError> {
    let (who, nav) = viewer(&s, &headers, &params, "/crashes").await?;
    same_origin(&headers)?;
    let row = crash_or_404(&s, &id, who.filter()).await?;
    if let Some(reason) = &row.dump_gone {
        return Err(crate::api::crashes::dump_gone(&id, reason).into());
    }
    if q::requeue(&s.db, &id).await? {
        s.wake.notify_one();
    }
    // 303: the browser follows with a GET of the detail page, which shows the new status.
    let page = nav.href(&format!("/crashes/{}", url_component(&id)), &[]);
    Ok(Redirect::to(&page).into_response())
}

/// Each module of `r` (a crash of `project`) by name, and whether a file with its
/// build-id is there for that project's crashes (its own or a shared one): one query for
/// all of them (a page of a many-module dump once cost thousands).
async fn uploaded(
    s: &AppState,
    r: &Report,
    project: &str,
) -> Result<Vec<(String, bool)>, DashError> {
    let ids: Vec<&str> = r
        .modules
        .iter()
        .filter_map(|m| m.build_id.as_deref())
        .collect();
    let files = binaries::by_build_ids(&s.db, &ids).await?;
    let seen = binaries::visible_each(&s.db, binaries::Sees::Project(project), files).await?;
    Ok(r.modules
        .iter()
        .map(|m| {
            let up = m
                .build_id
                .as_ref()
                .and_then(|b| seen.get(b))
                .is_some_and(|f| !f.is_empty());
            (m.name.clone(), up)
        })
        .collect())
}

/// A form's fields in order, repeated names kept (the ticked boxes).
type Fields = Form<Vec<(String, String)>>;

fn values<'a>(fields: &'a [(String, String)], key: &'a str) -> impl Iterator<Item = &'a str> {
    fields
        .iter()
        .filter(move |(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// The groups page's merge: the ticked groups (`group`) join the one chosen as `into`, or
/// the first ticked when none is chosen; then the merged group's crash list.
async fn merge_groups(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(params): Params,
    Form(fields): Fields,
) -> Result<Response, DashError> {
    let (who, nav) = viewer(&s, &headers, &params, "/").await?;
    same_origin(&headers)?;
    let ticked: Vec<String> = values(&fields, "group").map(str::to_string).collect();
    let into = values(&fields, "into")
        .next()
        .or(ticked.first().map(String::as_str))
        .ok_or_else(|| bad("tick the groups to merge".into()))?
        .to_string();
    if !ticked.iter().any(|g| *g != into) {
        return Err(bad("tick at least one group besides the one merged into".into()).into());
    }
    if ticked.len() > crate::api::groups::MAX_SPLIT {
        return Err(bad("too many groups ticked".into()).into());
    }
    let mut named: Vec<&str> = vec![into.as_str()];
    named.extend(ticked.iter().map(String::as_str));
    let project = crate::api::groups::decision_project(&s, &who, &named).await?;
    let moved = crate::api::groups::merge_all(&s, &project, &into, &ticked).await?;
    Ok(Redirect::to(&group_url(&nav, &moved.group)).into_response())
}

/// A group's crash list: the crashes ticked (`crash`) leave `group` for a new group
/// (named `name`, else after the group), or `undo` names a merge to give back.
async fn split_group(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(params): Params,
    Form(fields): Fields,
) -> Result<Response, DashError> {
    let (who, nav) = viewer(&s, &headers, &params, "/").await?;
    same_origin(&headers)?;
    let group = values(&fields, "group")
        .next()
        .ok_or_else(|| bad("which group to split is missing".into()))?;
    let project = &crate::api::groups::decision_project(&s, &who, &[group]).await?;
    let decision = match values(&fields, "undo").next() {
        Some(from) => worker::store::groups::unmerge(&s.db, project, group, from).await,
        None => {
            let ids: Vec<String> = values(&fields, "crash").map(str::to_string).collect();
            if ids.len() > crate::api::groups::MAX_SPLIT {
                return Err(bad("too many crashes ticked".into()).into());
            }
            let name = values(&fields, "name").next();
            worker::store::groups::split(&s.db, project, group, &ids, name).await
        }
    };
    let moved = decision.map_err(|e| crate::api::groups::decision_error(project, e))?;
    Ok(Redirect::to(&group_url(&nav, &moved.group)).into_response())
}

/// The project of the group `group` a page shows: the page's, or with none named the one
/// project that has such a group; else the projects that have one (none, or several).
async fn group_project(
    s: &AppState,
    who: &Who,
    group: &str,
) -> Result<Result<String, Vec<String>>, DashError> {
    if let Some(p) = &who.project {
        return Ok(Ok(p.clone()));
    }
    let mut found = worker::store::groups::projects_with(&s.db, &[group]).await?;
    Ok(match found.len() {
        1 => Ok(found.remove(0)),
        _ => Err(found),
    })
}

/// The crash list of one group, in the page's project.
fn group_url(nav: &Nav, group: &str) -> String {
    nav.href("/crashes", &[("signature", group)])
}

async fn report_json(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(params): Params,
) -> Result<Response, DashError> {
    let who = page_caller(&s, &headers, &params)?;
    let row = crash_or_404(&s, &id, who.filter()).await?;
    // the stored text is sent in pieces around the upload's fields, never copied whole
    let mut edits = row
        .served_edits(s.config.max_report_bytes)
        .unwrap_or_default();
    let report = bytes::Bytes::from(
        row.report
            .ok_or_else(|| ApiError::NotFound(format!("crash {id} has no report yet")))?,
    );
    let chunks: Vec<bytes::Bytes> = pieces(report.len(), &edits)
        .into_iter()
        .map(|p| match p {
            Piece::Stored(range) => report.slice(range),
            Piece::New(i) => bytes::Bytes::from(std::mem::take(&mut edits[i].1)),
        })
        .collect();
    let body = axum::body::Body::from_stream(futures::stream::iter(
        chunks.into_iter().map(Ok::<_, std::convert::Infallible>),
    ));
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

async fn missing_page(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(params): Params,
) -> Result<Html<String>, DashError> {
    let (who, nav) = viewer(&s, &headers, &params, "/missing").await?;
    let rows = missing::list_in(&s.db, who.filter(), 200).await?;
    let upload = upload_url(&headers, &nav);
    let with_token = !s.config.tokens.is_empty();
    Ok(Html(
        pages::missing(&nav, &rows, &upload, with_token).into_string(),
    ))
}

async fn binaries_page(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(params): Params,
) -> Result<Html<String>, DashError> {
    let (who, nav) = viewer(&s, &headers, &params, "/binaries").await?;
    let rows = binaries::recent_in(&s.db, who.sees(), 200).await?;
    Ok(Html(pages::binaries(&nav, &rows).into_string()))
}

async fn jobs_page(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(params): Params,
) -> Result<Html<String>, DashError> {
    let (_, nav) = server_wide(&s, &headers, &params, "/jobs").await?;
    let counts = crashes::count_by_status(&s.db).await?;
    let failures = q::failures(&s.db, PAGE).await?;
    Ok(Html(pages::jobs(&nav, &counts, &failures).into_string()))
}

/// The caller of a page with the `admin` scope, by bearer token or HTTP Basic auth
/// (password = token), in the project the request names (`?project=`, where the
/// switcher's empty "every project" names none, or the header) or its token's. Without
/// configured tokens every request is a server-wide caller (the server is on loopback
/// then).
fn page_caller(
    s: &AppState,
    headers: &HeaderMap,
    params: &HashMap<String, String>,
) -> Result<Who, DashError> {
    let query = param(params, "project").map(str::to_string);
    let named = auth::named_project_from(query, headers)?;
    caller(s, headers, Scope::Admin, named)
}

/// [`page_caller`], and what the page's header needs: the projects the switcher offers
/// (every registered one to a server-wide caller, its own to a project token), and the
/// page it submits to (`here`) with the current query but the project and the cursor.
async fn viewer(
    s: &AppState,
    headers: &HeaderMap,
    params: &HashMap<String, String>,
    here: &str,
) -> Result<(Who, Nav), DashError> {
    let who = page_caller(s, headers, params)?;
    let projects = if who.server_wide {
        projects::list(&s.db).await?
    } else {
        who.project.iter().cloned().collect()
    };
    let mut keep: Vec<(String, String)> = params
        .iter()
        .filter(|(k, v)| {
            !matches!(k.as_str(), "project" | "after" | "after_project") && !v.trim().is_empty()
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    keep.sort();
    let nav = Nav {
        project: who.project.clone(),
        server_wide: who.server_wide,
        projects,
        here: here.to_string(),
        keep,
    };
    Ok((who, nav))
}

/// [`viewer`] for the pages that span every project (jobs): a project token gets 403
/// `server-wide-token-required`.
async fn server_wide(
    s: &AppState,
    headers: &HeaderMap,
    params: &HashMap<String, String>,
    here: &str,
) -> Result<(Who, Nav), DashError> {
    let (who, nav) = viewer(s, headers, params, here).await?;
    if !who.server_wide {
        return Err(ApiError::ServerWideOnly.into());
    }
    Ok((who, nav))
}

/// Refuses a state-changing request sent from another site (the browser would attach
/// Basic credentials to it): `Sec-Fetch-Site`, else `Origin`, must be this host.
fn same_origin(headers: &HeaderMap) -> Result<(), DashError> {
    let forbidden = |from: &str| {
        DashError::from(ApiError::CrossSite(format!(
            "a request from {from} cannot change anything here: use this server's own pages"
        )))
    };
    if let Some(site) = headers.get("sec-fetch-site") {
        return match site.to_str().unwrap_or("") {
            "same-origin" | "none" => Ok(()),
            site => Err(forbidden(&format!("a {site} page"))),
        };
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let bare = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .unwrap_or("");
        if host.is_empty() || bare != host {
            return Err(forbidden(&format!("the web origin {origin:?}")));
        }
    }
    Ok(())
}

/// Standard base64 (with or without padding); `None` on any other byte.
fn bad(detail: String) -> ApiError {
    ApiError::BadRequest {
        code: "bad-request",
        detail,
    }
}

/// Percent-encodes a path or query component (everything but unreserved characters).
pub fn url_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn cross_site_posts_are_refused() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "127.0.0.1:8080".parse().unwrap());
        assert!(same_origin(&h).is_ok(), "curl sends neither header");
        h.insert(header::ORIGIN, "http://127.0.0.1:8080".parse().unwrap());
        assert!(same_origin(&h).is_ok());
        h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(same_origin(&h).is_err());
        h.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(same_origin(&h).is_err());
        h.insert("sec-fetch-site", "same-origin".parse().unwrap());
        assert!(same_origin(&h).is_ok());
    }
}
