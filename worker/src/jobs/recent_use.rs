//! The files' uses this process recorded lately, so that a job writes a symbol file's
//! last use (`binary_projects.last_used_at`, for the retention of symbol files) only when
//! this process has not written it within [`binaries::USE_RECORDED_EVERY_MS`] (half an
//! hour).
//!
//! Issue 40: every job wrote the last use of every file it was processed with, an
//! autocommit write per crash. On SQLite that write waited for the single writer while a
//! worker's claim or batched store held it; on PostgreSQL it was a commit per crash. The
//! retention counts whole days, so a use known to the hour is enough: a process writes a
//! file's use at most twice an hour, and the statement itself leaves a hold written within
//! the half hour (by another process) alone, so the recorded use is less than an hour
//! older than the real one.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::store::binaries;

/// Notes kept before the stale ones are dropped (and, if none is, all of them: a note
/// forgotten costs one more write, never a wrong one).
const MAX_NOTES: usize = 65_536;

/// When this process last recorded each (project, file sha256) use, Unix ms.
#[derive(Debug, Default)]
pub struct RecentUse {
    noted: Mutex<HashMap<String, HashMap<String, i64>>>,
}

impl RecentUse {
    /// Of `sha256s`, the files whose use by `project` this process has not recorded
    /// within [`binaries::USE_RECORDED_EVERY_MS`] before `at`.
    pub fn due<'a>(&self, project: &str, sha256s: &[&'a str], at: i64) -> Vec<&'a str> {
        let noted = self.noted.lock().unwrap_or_else(PoisonError::into_inner);
        let since = at.saturating_sub(binaries::USE_RECORDED_EVERY_MS);
        let of_project = noted.get(project);
        sha256s
            .iter()
            .copied()
            .filter(|sha| {
                of_project
                    .and_then(|files| files.get(*sha))
                    .is_none_or(|&when| when <= since)
            })
            .collect()
    }

    /// Notes that the use of `sha256s` by `project` was recorded at `at`.
    pub fn noted(&self, project: &str, sha256s: &[&str], at: i64) {
        let mut noted = self.noted.lock().unwrap_or_else(PoisonError::into_inner);
        let count: usize = noted.values().map(HashMap::len).sum();
        if count + sha256s.len() > MAX_NOTES {
            let since = at.saturating_sub(binaries::USE_RECORDED_EVERY_MS);
            noted.retain(|_, files| {
                files.retain(|_, when| *when > since);
                !files.is_empty()
            });
            if noted.values().map(HashMap::len).sum::<usize>() + sha256s.len() > MAX_NOTES {
                noted.clear();
            }
        }
        let files = noted.entry(project.to_string()).or_default();
        for sha in sha256s {
            files.insert((*sha).to_string(), at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY: i64 = binaries::USE_RECORDED_EVERY_MS;

    #[test]
    fn a_use_recorded_within_the_interval_is_not_due_again() {
        let recent = RecentUse::default();
        let at = 1_000 * EVERY;
        assert_eq!(recent.due("a", &["x", "y"], at), ["x", "y"]);
        recent.noted("a", &["x"], at);
        assert_eq!(recent.due("a", &["x", "y"], at + EVERY - 1), ["y"]);
        // another project's use of the same file is its own
        assert_eq!(recent.due("b", &["x"], at + 1), ["x"]);
        // the interval on, the use is written again
        assert_eq!(recent.due("a", &["x", "y"], at + EVERY), ["x", "y"]);
    }

    #[test]
    fn the_notes_stay_bounded_and_a_forgotten_note_makes_the_use_due() {
        let recent = RecentUse::default();
        let at = 1_000 * EVERY;
        let shas: Vec<String> = (0..MAX_NOTES).map(|i| format!("{i:064x}")).collect();
        let shas: Vec<&str> = shas.iter().map(String::as_str).collect();
        recent.noted("a", &shas, at);
        assert!(recent.due("a", &shas, at + 1).is_empty());
        // full of fresh notes: they are all forgotten for the new one
        recent.noted("a", &["new"], at + 2);
        assert!(recent.due("a", &["new"], at + 3).is_empty());
        assert_eq!(recent.due("a", &shas[..1], at + 3), shas[..1]);
        let noted = recent.noted.lock().unwrap_or_else(PoisonError::into_inner);
        let count: usize = noted.values().map(HashMap::len).sum();
        assert_eq!(count, 1);
    }
}
