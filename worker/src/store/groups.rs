//! Crash groups people corrected (migration 0017): merging groups, splitting crashes out
//! of a group, undoing a merge — decisions that outlive reprocessing and rule changes.
//!
//! A crash's group is `crashes.signature`; the signature the rules gave is
//! `crashes.computed_signature`. Whenever a report is stored ([`super::crashes::finish`])
//! and whenever a decision is taken here, a crash's group is settled by one rule:
//! its pin (`group_pins`) if it has one, else the merge of its computed signature
//! (`group_merges`), else its computed signature. A merge pins every crash of both
//! groups and records the merged one's name as a signature to follow; a split pins the
//! crashes it moves; undoing a merge pins what it gives back. The group rows and rollups
//! of migrations 0006 and 0021 follow `crashes.signature` through their triggers, so
//! counts, windows, lists, search and the reprocess filter all see the decision.
//!
//! Groups and decisions belong to a project (migration 0026): every function here acts
//! in the one project it is given, so a decision never moves, pins or names another
//! project's crashes, and another project's group is as missing as a group that does
//! not exist ([`DecisionError::NoGroup`]).
//!
//! Each operation runs in one transaction, which on PostgreSQL first takes the advisory
//! locks of the groups it moves crashes out of and into, as a worker's store does for
//! the groups its reports enter.

use super::{Db, StoreError};

/// SQL: the group a crash row belongs to under the stored decisions (of its project).
const SETTLED: &str = "COALESCE(\
    (SELECT gp.group_name FROM group_pins gp WHERE gp.crash_id = crashes.id), \
    (SELECT gm.into_group FROM group_merges gm WHERE gm.project = crashes.project \
     AND gm.signature = crashes.computed_signature), \
    computed_signature)";

/// Why a decision was refused.
#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    #[error("no crash group {0:?}")]
    NoGroup(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for DecisionError {
    fn from(e: sqlx::Error) -> Self {
        DecisionError::Store(StoreError::from(e))
    }
}

/// What a decision changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Moved {
    /// The group the crashes are in now.
    pub group: String,
    /// Crashes whose group changed.
    pub crashes: u64,
}

/// One statement with its text binds.
struct Step {
    sql: String,
    binds: Vec<String>,
}

fn step(sql: impl Into<String>, binds: &[&str]) -> Step {
    Step {
        sql: sql.into(),
        binds: binds.iter().map(|b| b.to_string()).collect(),
    }
}

/// Runs the steps in one transaction; the rows each changed. On PostgreSQL the
/// transaction first takes the locks of `groups` (the groups its crashes leave and
/// enter), those a worker's store takes for the groups its reports enter
/// ([`super::crashes::GROUP_LOCKS_SQL`], in one order of keys): a decision moving a
/// crash storm's crashes while a store adds to the same groups' rows could take them in
/// another order, and PostgreSQL would end one of the two as a deadlock, the decision
/// with an error. On SQLite the transaction takes its turn at the one writer
/// ([`crate::in_transaction!`]).
async fn run(db: &Db, groups: &[&str], steps: &[Step]) -> Result<Vec<u64>, StoreError> {
    let groups = serde_json::to_string(groups).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let postgres = matches!(db.backend(), super::Backend::Postgres(_));
    Ok(crate::in_transaction!(db, tx => {
        if postgres {
            sqlx::query(super::crashes::GROUP_LOCKS_SQL)
                .bind(&groups).bind("[]")
                .execute(&mut *tx).await?;
        }
        let mut counts = Vec::with_capacity(steps.len());
        for s in steps {
            let mut q = sqlx::query(sqlx::AssertSqlSafe(s.sql.as_str()));
            for b in &s.binds {
                q = q.bind(b.as_str());
            }
            counts.push(q.execute(&mut *tx).await?.rows_affected());
        }
        counts
    }))
}

/// Whether a group with this name has crashes in `project`.
pub async fn exists(db: &Db, project: &str, group: &str) -> Result<bool, StoreError> {
    let group = super::text::clean(group);
    let sql = "SELECT COUNT(*) FROM crash_groups WHERE project = $1 AND signature = $2";
    let n: i64 = crate::on_pool!(db, p => sqlx::query_scalar(sql)
        .bind(project)
        .bind(&*group)
        .fetch_one(p)
        .await)?;
    Ok(n > 0)
}

async fn need(db: &Db, project: &str, group: &str) -> Result<(), DecisionError> {
    if group.is_empty() || !exists(db, project, group).await? {
        return Err(DecisionError::NoGroup(group.to_string()));
    }
    Ok(())
}

/// Merges group `from` into group `into`: its crashes move now, stay there whatever
/// signature reprocessing gives them later, and new crashes whose signature is one that
/// `from` was made of go to `into` too. Both are groups of `project`.
pub async fn merge(db: &Db, project: &str, into: &str, from: &str) -> Result<Moved, DecisionError> {
    let (into, from) = (super::text::clean(into), super::text::clean(from));
    let (into, from) = (&*into, &*from);
    if into == from {
        return Err(DecisionError::Invalid(format!(
            "a group cannot be merged into itself ({into:?})"
        )));
    }
    need(db, project, into).await?;
    need(db, project, from).await?;
    let steps = [
        // signatures that went to `from` go to `into`, remembered as coming from `from`
        step(
            "UPDATE group_merges SET into_group = $1, origin = $2 \
             WHERE project = $3 AND into_group = $2",
            &[into, from, project],
        ),
        step(
            "INSERT INTO group_merges (project, signature, into_group, origin) \
             VALUES ($3, $2, $1, $2) \
             ON CONFLICT (project, signature) DO UPDATE SET into_group = $1, origin = $2",
            &[into, from, project],
        ),
        step(
            "DELETE FROM group_merges WHERE project = $1 AND signature = into_group",
            &[project],
        ),
        // `into`'s own crashes are pinned there (origin NULL: no merge brought them), so
        // that a rules change cannot take the merged group apart
        step(
            "INSERT INTO group_pins (crash_id, group_name, origin, project) \
             SELECT id, $1, NULL, $2 FROM crashes WHERE project = $2 AND signature = $1 \
             ON CONFLICT (crash_id) DO NOTHING",
            &[into, project],
        ),
        // crashes pinned to `from`, and every other crash of it, are pinned to `into`
        step(
            "UPDATE group_pins SET group_name = $1, origin = $2 \
             WHERE project = $3 AND group_name = $2",
            &[into, from, project],
        ),
        step(
            "INSERT INTO group_pins (crash_id, group_name, origin, project) \
             SELECT id, $1, $2, $3 FROM crashes WHERE project = $3 AND signature = $2 \
             ON CONFLICT (crash_id) DO UPDATE SET group_name = $1, origin = $2",
            &[into, from, project],
        ),
        step(
            format!(
                "UPDATE crashes SET signature = {SETTLED} WHERE project = $2 \
                 AND signature = $1 AND COALESCE({SETTLED}, '') <> $1"
            ),
            &[from, project],
        ),
    ];
    let counts = run(db, &[into, from], &steps).await?;
    Ok(Moved {
        group: into.to_string(),
        crashes: counts.last().copied().unwrap_or(0),
    })
}

/// Undoes the merge of group `from` into `group`: the crashes and signatures that came
/// from `from` go back to it (pinned there, so the split stays split). `group` is a
/// group of `project`.
pub async fn unmerge(
    db: &Db,
    project: &str,
    group: &str,
    from: &str,
) -> Result<Moved, DecisionError> {
    let (group, from) = (super::text::clean(group), super::text::clean(from));
    let (group, from) = (&*group, &*from);
    need(db, project, group).await?;
    let steps = [
        step(
            "UPDATE group_merges SET into_group = $2, origin = NULL \
             WHERE project = $3 AND into_group = $1 AND origin = $2",
            &[group, from, project],
        ),
        step(
            "DELETE FROM group_merges WHERE project = $1 AND signature = into_group",
            &[project],
        ),
        step(
            "UPDATE group_pins SET group_name = $2, origin = NULL \
             WHERE project = $3 AND group_name = $1 AND origin = $2",
            &[group, from, project],
        ),
        // every crash of the group is settled again: the pinned ones and those that
        // came through the merge rule leave
        step(
            format!(
                "UPDATE crashes SET signature = {SETTLED} WHERE project = $2 \
                 AND signature = $1 AND COALESCE({SETTLED}, '') <> $1"
            ),
            &[group, project],
        ),
    ];
    let counts = run(db, &[group, from], &steps).await?;
    let moved = counts.last().copied().unwrap_or(0);
    if moved == 0 {
        return Err(DecisionError::Invalid(format!(
            "no crash of group {group:?} came from a merge of {from:?}"
        )));
    }
    Ok(Moved {
        group: from.to_string(),
        crashes: moved,
    })
}

/// Splits the crashes `ids` (those of them that are in `group`) out of `group` into a
/// group of their own, named `name` or, by default, after `group` with "(split N)". They
/// stay there across reprocessing and rule changes. `group` is a group of `project`, and
/// only its crashes of that project move.
pub async fn split(
    db: &Db,
    project: &str,
    group: &str,
    ids: &[String],
    name: Option<&str>,
) -> Result<Moved, DecisionError> {
    let group = super::text::clean(group);
    let group = &*group;
    need(db, project, group).await?;
    if ids.is_empty() {
        return Err(DecisionError::Invalid("no crashes to split out".into()));
    }
    let name = match name.map(str::trim).filter(|n| !n.is_empty()) {
        Some(n) if n == group => {
            return Err(DecisionError::Invalid(format!(
                "the new group must have another name than {group:?}"
            )))
        }
        Some(n) => super::text::clean(n).into_owned(),
        None => fresh_name(db, project, group).await?,
    };
    let mut steps = Vec::with_capacity(ids.len() * 2);
    for id in ids {
        let id = super::text::clean(id);
        steps.push(step(
            "INSERT INTO group_pins (crash_id, group_name, origin, project) \
             SELECT id, $2, $3, $4 FROM crashes WHERE id = $1 AND project = $4 \
             AND signature = $3 \
             ON CONFLICT (crash_id) DO UPDATE SET group_name = $2, origin = $3",
            &[&*id, name.as_str(), group, project],
        ));
        steps.push(step(
            format!(
                "UPDATE crashes SET signature = {SETTLED} WHERE id = $1 AND project = $3 \
                 AND signature = $2 AND COALESCE({SETTLED}, '') <> $2"
            ),
            &[&*id, group, project],
        ));
    }
    let counts = run(db, &[group, name.as_str()], &steps).await?;
    let moved: u64 = counts.iter().skip(1).step_by(2).sum();
    if moved == 0 {
        return Err(DecisionError::Invalid(format!(
            "none of the crashes given is in group {group:?}"
        )));
    }
    Ok(Moved {
        group: name,
        crashes: moved,
    })
}

/// `GROUP (split)`, or `GROUP (split N)` with the first N not taken by a group or a pin
/// of `project`.
async fn fresh_name(db: &Db, project: &str, group: &str) -> Result<String, StoreError> {
    for n in 1..1000u32 {
        let name = if n == 1 {
            format!("{group} (split)")
        } else {
            format!("{group} (split {n})")
        };
        let sql = "SELECT (SELECT COUNT(*) FROM crash_groups WHERE project = $2 \
                   AND signature = $1) + (SELECT COUNT(*) FROM group_pins \
                   WHERE project = $2 AND group_name = $1)";
        let taken: i64 = crate::on_pool!(db, p => sqlx::query_scalar(sql)
            .bind(&name)
            .bind(project)
            .fetch_one(p)
            .await)?;
        if taken == 0 {
            return Ok(name);
        }
    }
    Ok(format!("{group} (split {})", super::now_ms()))
}

/// The group a crash would be in if its signature were `computed`: its pin, else the
/// merge of `computed` in the crash's project, else `computed` (what `signature
/// --preview` compares).
pub async fn settle(db: &Db, crash_id: &str, computed: &str) -> Result<String, StoreError> {
    let sql = "SELECT COALESCE(\
               (SELECT group_name FROM group_pins WHERE crash_id = $1), \
               (SELECT gm.into_group FROM group_merges gm WHERE gm.signature = $2 \
                AND gm.project = (SELECT c.project FROM crashes c WHERE c.id = $1)), $2)";
    let (id, computed) = (super::text::clean(crash_id), super::text::clean(computed));
    Ok(
        crate::on_pool!(db, p => sqlx::query_scalar::<_, String>(sql)
        .bind(&*id)
        .bind(&*computed)
        .fetch_one(p)
        .await)?,
    )
}

/// The groups merged into `group` that an undo can give back (the `origin`s of its
/// pins in `project`), in name order.
pub async fn merged_into(
    db: &Db,
    project: &str,
    group: &str,
) -> Result<Vec<(String, i64)>, StoreError> {
    let sql = "SELECT origin, COUNT(*) FROM group_pins WHERE project = $2 AND group_name = $1 \
               AND origin IS NOT NULL AND origin <> $1 GROUP BY origin ORDER BY origin LIMIT 100";
    let group = super::text::clean(group);
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, (String, i64)>(sql)
        .bind(&*group)
        .bind(project)
        .fetch_all(p)
        .await)?,
    )
}

/// The projects that have every one of `groups` (at most 20, in name order): where a
/// decision of a caller that named no project can act (a server-wide caller, who may act
/// in any project) — one project, or none, or several to choose from.
pub async fn projects_with(db: &Db, groups: &[&str]) -> Result<Vec<String>, StoreError> {
    let mut names: Vec<String> = groups
        .iter()
        .map(|g| super::text::clean(g).into_owned())
        .collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let list = serde_json::to_string(&names).unwrap_or_else(|_| "[]".into());
    let sql = format!(
        "SELECT project FROM crash_groups WHERE signature IN ({}) GROUP BY project \
         HAVING COUNT(*) = $2 ORDER BY project LIMIT 20",
        db.json_strings("$1")
    );
    let n = i64::try_from(names.len()).unwrap_or(i64::MAX);
    Ok(
        crate::on_pool!(db, p => sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&list)
        .bind(n)
        .fetch_all(p)
        .await)?,
    )
}
