//! The part every dashboard page shares: who is looking and in which project, the links
//! between pages (which keep `?project=`), and the project switcher (issue 41).
//!
//! The switcher is a GET form — no JavaScript — whose `<select>` offers the projects the
//! caller may see: every registered project to a server-wide token (and "every project"),
//! its own to a project token. It submits to the page it is on, with that page's filters,
//! so switching keeps the page (a crash's page, whose crash is in one project, switches
//! to the crash list). Project names are `a-z0-9-_.` (`projects::valid_name`), and maud
//! escapes them anyway.

use maud::{html, Markup};

use super::url_component;

/// The caller of a page, as its links and header need it.
#[derive(Debug, Clone)]
pub struct Nav {
    /// The project the page acts in; none: every project (a server-wide caller that
    /// named none). Every link of the page keeps it as `?project=`.
    pub project: Option<String>,
    /// A server-wide token (or none configured): it may use the jobs page, and switch to
    /// any project.
    pub server_wide: bool,
    /// The switcher's choices.
    pub projects: Vec<String>,
    /// Where the switcher submits: the current page (or the crash list, from a crash).
    pub here: String,
    /// The current page's query, without `project` and the page cursor, which the
    /// switcher keeps.
    pub keep: Vec<(String, String)>,
}

impl Nav {
    /// The address of `path` with `params` (empty values left out) and the project.
    pub fn href(&self, path: &str, params: &[(&str, &str)]) -> String {
        let mut q: Vec<String> = params
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", url_component(v)))
            .collect();
        if let Some(p) = &self.project {
            q.push(format!("project={}", url_component(p)));
        }
        if q.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{}", q.join("&"))
        }
    }

    /// The page header: the links to the pages this caller may open, and the switcher.
    pub fn header(&self) -> Markup {
        html! {
            header {
                a.brand href=(self.href("/", &[])) { "postmortem" }
                a href=(self.href("/", &[])) { "Crash groups" }
                a href=(self.href("/crashes", &[])) { "Crashes" }
                a href=(self.href("/missing", &[])) { "Missing symbols" }
                a href=(self.href("/binaries", &[])) { "Binaries" }
                @if self.server_wide { a href=(self.href("/jobs", &[])) { "Jobs" } }
                (self.switcher())
            }
        }
    }

    /// The project switcher: a GET form to the current page.
    fn switcher(&self) -> Markup {
        let current = self.project.as_deref().unwrap_or("");
        html! {
            form #project-switcher method="get" action=(self.here) {
                @for (k, v) in &self.keep {
                    input type="hidden" name=(k) value=(v);
                }
                label { "Project "
                    select name="project" {
                        @if self.server_wide {
                            option value="" selected[current.is_empty()] { "every project" }
                        }
                        @for p in &self.projects {
                            option value=(p) selected[current == p] { (p) }
                        }
                    }
                }
                " " button type="submit" { "Switch" }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nav(project: Option<&str>) -> Nav {
        Nav {
            project: project.map(str::to_string),
            server_wide: project.is_none(),
            projects: vec!["team-a".into()],
            here: "/crashes".into(),
            keep: vec![("signature".into(), "a<b".into())],
        }
    }

    #[test]
    fn links_keep_the_project() {
        assert_eq!(nav(None).href("/missing", &[]), "/missing");
        assert_eq!(
            nav(Some("team-a")).href("/crashes", &[("signature", "a b"), ("kind", "")]),
            "/crashes?signature=a%20b&project=team-a"
        );
        let html = nav(Some("team-a")).header().into_string();
        assert!(html.contains("href=\"/missing?project=team-a\""), "{html}");
        assert!(!html.contains("/jobs"), "a project token has no jobs link");
        assert!(html.contains("value=\"a&lt;b\""), "{html}");
    }
}
