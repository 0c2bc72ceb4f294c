//! Golden files: output compared byte for byte with an expectation committed in the
//! repository, so that a change which alters the output shows up as a failing test and,
//! once accepted, as a diff of the expectation in the commit.
//!
//! [`check`] compares and, with `POSTMORTEM_BLESS=1` in the environment, rewrites the
//! expectation instead of failing; [`unified_diff`] is the failure message (no diff crate
//! is in the workspace's tree, and expectations are a few hundred lines).

use std::path::Path;

/// Set to `1` to rewrite the expectations with what the code produces now.
pub const BLESS_VAR: &str = "POSTMORTEM_BLESS";

/// Whether the expectations are being rewritten ([`BLESS_VAR`] is `1`).
pub fn blessing() -> bool {
    std::env::var(BLESS_VAR).as_deref() == Ok("1")
}

/// Compares `got` with the file `expected`: `None` when equal (or when blessing, after
/// writing `got` there), else a unified diff from the expectation to `got` naming the
/// file. A missing expectation is compared as empty.
pub fn check(expected: &Path, got: &[u8]) -> Option<String> {
    check_rendered(expected, got, |b| String::from_utf8_lossy(b).into_owned())
}

/// [`check`] for output whose lines make a poor diff (e.g. compact JSON on one line):
/// the bytes are compared as they are, the diff is of both as `render` shows them.
pub fn check_rendered(
    expected: &Path,
    got: &[u8],
    render: impl Fn(&[u8]) -> String,
) -> Option<String> {
    if blessing() {
        if let Some(dir) = expected.parent() {
            std::fs::create_dir_all(dir).expect("create the expectation's directory");
        }
        std::fs::write(expected, got).expect("write the expectation");
        return None;
    }
    let want = std::fs::read(expected).unwrap_or_default();
    (want != got).then(|| {
        let name = expected.display().to_string();
        let (mut a, mut b) = (render(&want), render(got));
        if a == b {
            // The bytes differ where the rendering does not show (e.g. whitespace).
            a = String::from_utf8_lossy(&want).into_owned();
            b = String::from_utf8_lossy(got).into_owned();
        }
        unified_diff(&a, &b, &name, &format!("{name} (now)"))
    })
}

/// One line of an edit script: kept, removed from `a`, added from `b`.
#[derive(Clone, Copy, PartialEq)]
enum Edit<'a> {
    Keep(&'a str),
    Remove(&'a str),
    Add(&'a str),
}

/// The shortest edit script from `a` to `b` (longest common subsequence, quadratic).
fn edits<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Edit<'a>> {
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(Edit::Keep(a[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            // Removals before additions, as `diff -u` shows a changed line.
            out.push(Edit::Remove(a[i]));
            i += 1;
        } else {
            out.push(Edit::Add(b[j]));
            j += 1;
        }
    }
    out
}

/// `diff -u`-style hunks (three lines of context) turning `a` into `b`; a line ending
/// missing at the end of either shows as a `\ No newline at end of file` note.
pub fn unified_diff(a: &str, b: &str, a_name: &str, b_name: &str) -> String {
    const CONTEXT: usize = 3;
    let (al, bl): (Vec<&str>, Vec<&str>) = (
        a.split_inclusive('\n').collect(),
        b.split_inclusive('\n').collect(),
    );
    let script = edits(&al, &bl);
    let changed: Vec<usize> = (0..script.len())
        .filter(|&k| !matches!(script[k], Edit::Keep(_)))
        .collect();
    let mut out = format!("--- {a_name}\n+++ {b_name}\n");
    let mut k = 0;
    while k < changed.len() {
        // A hunk: changes whose context overlaps, with CONTEXT kept lines either side.
        let mut last = k;
        while last + 1 < changed.len() && changed[last + 1] - changed[last] <= 2 * CONTEXT {
            last += 1;
        }
        let start = changed[k].saturating_sub(CONTEXT);
        let end = (changed[last] + CONTEXT + 1).min(script.len());
        // Line numbers (1-based) where the hunk starts in a and in b.
        let before = &script[..start];
        let a_at = before.iter().filter(|e| !matches!(e, Edit::Add(_))).count();
        let b_at = before
            .iter()
            .filter(|e| !matches!(e, Edit::Remove(_)))
            .count();
        let hunk = &script[start..end];
        let a_len = hunk.iter().filter(|e| !matches!(e, Edit::Add(_))).count();
        let b_len = hunk
            .iter()
            .filter(|e| !matches!(e, Edit::Remove(_)))
            .count();
        out += &format!("@@ -{},{a_len} +{},{b_len} @@\n", a_at + 1, b_at + 1);
        for e in hunk {
            let (mark, line) = match e {
                Edit::Keep(l) => (' ', l),
                Edit::Remove(l) => ('-', l),
                Edit::Add(l) => ('+', l),
            };
            out.push(mark);
            out += line;
            if !line.ends_with('\n') {
                out += "\n\\ No newline at end of file\n";
            }
        }
        k = last + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    //! The diff on small texts whose `diff -u` is known.

    use super::unified_diff;

    #[test]
    fn one_changed_line_with_context() {
        let a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let b = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            unified_diff(a, b, "a", "b"),
            "--- a\n+++ b\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn distant_changes_make_two_hunks_and_equal_texts_none() {
        let a: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let b: String = (1..=20)
            .filter(|&i| i != 19)
            .map(|i| {
                if i == 2 {
                    "two\n".into()
                } else {
                    format!("{i}\n")
                }
            })
            .collect();
        let d = unified_diff(&a, &b, "a", "b");
        assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        assert!(d.contains("-2\n+two\n") && d.contains("-19\n"), "{d}");
        assert_eq!(unified_diff(&a, &a, "a", "b"), "--- a\n+++ b\n");
    }

    #[test]
    fn missing_final_newline_is_noted() {
        let d = unified_diff("x\n", "x", "a", "b");
        assert_eq!(
            d,
            "--- a\n+++ b\n@@ -1,1 +1,1 @@\n-x\n+x\n\\ No newline at end of file\n"
        );
    }
}
