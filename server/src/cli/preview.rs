//! `postmortem signature --preview`: what a rules file would do to the stored crash
//! groups — which groups would split and which would merge — before it is applied (by
//! restarting the service with it and running `postmortem reprocess`).
//!
//! It reads the stored reports of finished crashes, page by page, and recomputes each
//! signature under the rules, without the dumps or binaries: the frames are the ones the
//! last processing found. Groups people merged or split stay as they decided
//! (`worker::store::groups::settle`): a crash pinned to a group is not counted as moving.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use ::worker::store::crashes::{self, ListQuery};
use ::worker::store::Db;
use engine::report::signature::SignatureRules;
use engine::report::Report;

/// Crashes read per page.
const PAGE: i64 = 500;
/// Groups listed per kind of change (the counts are always whole).
const MAX_LISTED: usize = 50;

/// What the rules change would do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Preview {
    /// Finished crashes with a report that parses.
    pub crashes: usize,
    /// Reports that did not parse (an older or damaged document): left as they are.
    pub unreadable: usize,
    /// Crashes whose signature would change.
    pub changed: usize,
    /// Today's group → the groups its crashes would go to, where more than one.
    pub splits: BTreeMap<String, BTreeSet<String>>,
    /// A group under the new rules → today's groups it would take crashes from, where
    /// more than one.
    pub merges: BTreeMap<String, BTreeSet<String>>,
}

impl Preview {
    /// Adds one crash: its stored signature and its signature under the new rules.
    pub fn add(&mut self, old: &str, new: &str, olds: &mut Groups, news: &mut Groups) {
        self.crashes += 1;
        if old != new {
            self.changed += 1;
        }
        olds.entry(old.to_string())
            .or_default()
            .insert(new.to_string());
        news.entry(new.to_string())
            .or_default()
            .insert(old.to_string());
    }

    /// Keeps the groups that split or merge.
    pub fn finish(&mut self, olds: Groups, news: Groups) {
        self.splits = olds.into_iter().filter(|(_, v)| v.len() > 1).collect();
        self.merges = news.into_iter().filter(|(_, v)| v.len() > 1).collect();
    }

    /// The preview as text.
    pub fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(
            out,
            "crashes: {} (unreadable reports: {})\nsignature changed: {}\ngroups that \
             split: {}\ngroups that merge: {}",
            self.crashes,
            self.unreadable,
            self.changed,
            self.splits.len(),
            self.merges.len()
        )?;
        for (old, news) in self.splits.iter().take(MAX_LISTED) {
            writeln!(out, "split {old:?} -> {news:?}")?;
        }
        for (new, olds) in self.merges.iter().take(MAX_LISTED) {
            writeln!(out, "merge {olds:?} -> {new:?}")?;
        }
        Ok(())
    }
}

/// A group's signature → the signatures on the other side.
pub type Groups = BTreeMap<String, BTreeSet<String>>;

/// The preview of `rules` over the finished crashes of `db`.
pub async fn preview(db: &Db, rules: &SignatureRules) -> anyhow::Result<Preview> {
    let mut p = Preview::default();
    let (mut olds, mut news) = (Groups::new(), Groups::new());
    let mut q = ListQuery {
        status: Some("done".to_string()),
        limit: PAGE,
        ..ListQuery::default()
    };
    loop {
        let rows = crashes::list(db, &q).await?;
        let Some(last) = rows.last() else { break };
        q.after = Some((last.received_at, last.id.clone()));
        for row in &rows {
            // Lists carry no reports (issue 34, finding 2): each is read on its own, so
            // the preview holds one report at a time.
            let full = crashes::get(db, &row.id).await?;
            let report = full
                .as_ref()
                .and_then(|c| c.report.as_deref())
                .and_then(|r| serde_json::from_str::<Report>(r).ok());
            let Some(report) = report else {
                p.unreadable += 1;
                continue;
            };
            let computed = super::signature::explain(rules, &report)
                .signature
                .map(|s| s.text)
                .unwrap_or_default();
            // The group it would land in: a person's merge or split still decides.
            let new = ::worker::store::groups::settle(db, &row.id, &computed).await?;
            p.add(
                row.signature.as_deref().unwrap_or(""),
                &new,
                &mut olds,
                &mut news,
            );
        }
        if rows.len() < PAGE as usize {
            break;
        }
    }
    p.finish(olds, news);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_merges_are_found() {
        let mut p = Preview::default();
        let (mut o, mut n) = (Groups::new(), Groups::new());
        // today's "libc" group holds two bugs; "a" and "a2" are one bug
        for (old, new) in [
            ("libc", "f"),
            ("libc", "g"),
            ("a", "a"),
            ("a2", "a"),
            ("x", "x"),
        ] {
            p.add(old, new, &mut o, &mut n);
        }
        p.finish(o, n);
        assert_eq!(p.crashes, 5);
        assert_eq!(p.changed, 3);
        assert_eq!(p.splits.len(), 1);
        assert_eq!(
            p.splits["libc"],
            ["f", "g"].iter().map(|s| s.to_string()).collect()
        );
        assert_eq!(p.merges.len(), 1);
        assert_eq!(
            p.merges["a"],
            ["a", "a2"].iter().map(|s| s.to_string()).collect()
        );
        let mut text = Vec::new();
        p.write(&mut text).expect("write");
        let text = String::from_utf8(text).expect("utf-8");
        assert!(
            text.contains("groups that split: 1\ngroups that merge: 1"),
            "{text}"
        );
    }
}
