//! Who may use the service, as `serve` is told: the bearer tokens (`--token
//! SECRET:SCOPES[:PROJECT]`), the projects they and the quotas (`--quota
//! PROJECT:CRASHES_PER_MINUTE:BYTES_PER_DAY`), the retentions (`--retention
//! PROJECT:DUMP_DAYS:REPORT_DAYS:SYMBOL_DAYS`) and the samplings (`--sample PROJECT:N`)
//! name, registered in the database at start.

use anyhow::Context;
use worker::store::retention::Rule;
use worker::store::sampling::Sample;
use worker::store::{projects, Db};

use crate::api::state::{Quota, Scope, Token};

/// Parses `SECRET:SCOPES[:PROJECT]` (scopes separated by commas). A secret may hold `:`;
/// when the text reads both ways (`a:ingest:b`), it is read as a project token, the
/// narrower of the two.
pub fn parse_token(s: &str) -> anyhow::Result<Token> {
    let (rest, last) = s.rsplit_once(':').with_context(|| {
        "a token is SECRET:SCOPES[:PROJECT], e.g. s3cret:ingest,symbols:team-a".to_string()
    })?;
    let as_project = rest.rsplit_once(':').and_then(|(secret, scopes)| {
        let scopes = parse_scopes(scopes).ok()?;
        projects::valid_name(last).then(|| (secret, scopes, Some(last.to_string())))
    });
    let (secret, scopes, project) = match as_project {
        Some(found) => found,
        None => (rest, parse_scopes(last)?, None),
    };
    anyhow::ensure!(!secret.is_empty(), "empty token in --token");
    Ok(Token {
        secret: secret.to_string(),
        scopes,
        project,
    })
}

fn parse_scopes(s: &str) -> anyhow::Result<Vec<Scope>> {
    s.split(',')
        .map(|sc| {
            Scope::parse(sc.trim())
                .with_context(|| format!("unknown scope {sc:?} (ingest, symbols, read, admin)"))
        })
        .collect()
}

/// Parses `PROJECT:CRASHES_PER_MINUTE:BYTES_PER_DAY` (0: no limit of that kind).
pub fn parse_quota(s: &str) -> anyhow::Result<Quota> {
    let usage = "a quota is PROJECT:CRASHES_PER_MINUTE:BYTES_PER_DAY, e.g. team-a:60:1000000000";
    let mut parts = s.split(':');
    let (Some(project), Some(per_minute), Some(per_day), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        anyhow::bail!("{usage}, not {s:?}");
    };
    anyhow::ensure!(
        projects::valid_name(project),
        "bad project name {project:?} in --quota"
    );
    Ok(Quota {
        project: project.to_string(),
        crashes_per_minute: per_minute.parse().with_context(|| usage.to_string())?,
        bytes_per_day: per_day.parse().with_context(|| usage.to_string())?,
    })
}

/// The fields of `s` split at `:`, exactly `n` of them after a valid project name.
fn project_fields<'s>(s: &'s str, n: usize, usage: &str) -> anyhow::Result<(&'s str, Vec<u32>)> {
    let mut parts = s.split(':');
    let project = parts.next().unwrap_or_default();
    let numbers = parts
        .map(|p| {
            p.parse::<u32>()
                .with_context(|| format!("{usage}, not {s:?}"))
        })
        .collect::<anyhow::Result<Vec<u32>>>()?;
    anyhow::ensure!(numbers.len() == n, "{usage}, not {s:?}");
    anyhow::ensure!(
        projects::valid_name(project),
        "bad project name {project:?} in {s:?}"
    );
    Ok((project, numbers))
}

/// Parses `PROJECT:DUMP_DAYS:REPORT_DAYS:SYMBOL_DAYS` (0: keep forever).
pub fn parse_retention(s: &str) -> anyhow::Result<Rule> {
    let usage = "a retention is PROJECT:DUMP_DAYS:REPORT_DAYS:SYMBOL_DAYS (0: keep forever), \
                 e.g. team-a:30:365:90";
    let (project, days) = project_fields(s, 3, usage)?;
    Ok(Rule {
        project: project.to_string(),
        dump_days: days[0],
        report_days: days[1],
        symbol_days: days[2],
    })
}

/// Parses `PROJECT:N` (N dumps kept per signature per UTC day; 0: every dump).
pub fn parse_sample(s: &str) -> anyhow::Result<Sample> {
    let usage = "a sampling is PROJECT:DUMPS_PER_SIGNATURE_PER_DAY, e.g. team-a:10";
    let (project, n) = project_fields(s, 1, usage)?;
    Ok(Sample {
        project: project.to_string(),
        dumps_per_day: n[0],
    })
}

/// Registers the projects the tokens, quotas, scrubbing options (`scrubbed`) and the
/// retention and sampling `policy` name, and returns every project the database holds
/// (with `default`).
pub async fn projects(
    db: &Db,
    tokens: &[Token],
    quotas: &[Quota],
    scrubbed: &[String],
    policy: &worker::store::retention::Policy,
) -> anyhow::Result<Vec<String>> {
    let named: Vec<String> = tokens
        .iter()
        .filter_map(|t| t.project.clone())
        .chain(quotas.iter().map(|q| q.project.clone()))
        .chain(scrubbed.iter().cloned())
        .chain(policy.rules.iter().map(|r| r.project.clone()))
        .chain(policy.samples.iter().map(|s| s.project.clone()))
        .collect();
    projects::register(db, &named)
        .await
        .context("registering the projects")?;
    projects::list(db).await.context("reading the projects")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tokens_with_and_without_a_project() {
        let t = parse_token("s3cret:ingest,symbols").unwrap();
        assert_eq!((t.secret.as_str(), t.project), ("s3cret", None));
        assert_eq!(t.scopes, [Scope::Ingest, Scope::Symbols]);
        let t = parse_token("s3cret:read,admin:team-a").unwrap();
        assert_eq!(t.secret, "s3cret");
        assert_eq!(t.project.as_deref(), Some("team-a"));
        assert_eq!(t.scopes, [Scope::Read, Scope::Admin]);
        let t = parse_token("a:b:ingest").unwrap();
        assert_eq!((t.secret.as_str(), t.project), ("a:b", None));
        let t = parse_token("a:ingest:admin").unwrap();
        assert_eq!(t.project.as_deref(), Some("admin"), "the narrower reading");
        assert!(parse_token("s3cret:everything").is_err());
        assert!(parse_token(":ingest").is_err());
        assert!(parse_token("x:ingest:Team A").is_err());
    }

    #[test]
    fn quotas() {
        let q = parse_quota("team-a:60:1000").unwrap();
        assert_eq!((q.crashes_per_minute, q.bytes_per_day), (60, 1000));
        assert!(parse_quota("team-a:60").is_err());
        assert!(parse_quota("team-a:x:1").is_err());
        assert!(parse_quota("Team:1:1").is_err());
    }

    #[test]
    fn retentions_and_samplings() {
        let r = parse_retention("team-a:30:365:0").unwrap();
        assert_eq!(r.project, "team-a");
        assert_eq!((r.dump_days, r.report_days, r.symbol_days), (30, 365, 0));
        assert!(parse_retention("team-a:30:365").is_err());
        assert!(parse_retention("team-a:30:365:1:2").is_err());
        assert!(parse_retention("team-a:-1:0:0").is_err());
        assert!(parse_retention("Team:1:1:1").is_err());
        let s = parse_sample("team-a:10").unwrap();
        assert_eq!((s.project.as_str(), s.dumps_per_day), ("team-a", 10));
        assert!(parse_sample("team-a").is_err());
        assert!(parse_sample("team-a:x").is_err());
    }
}
