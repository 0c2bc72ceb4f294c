//! The deletion-by-filter selection (`worker::store::delete_filter`) on SQLite and on
//! PostgreSQL (a fresh database on 127.0.0.1:5432, dropped afterwards;
//! `POSTMORTEM_SKIP_PG=1` skips it): annotation filters matched exactly as strings (any
//! name, bound, never SQL; no pattern; a number is no string), several annotations
//! together, the project always, and the keyset batches that page through every match
//! once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;

use crate::common;

use worker::store::crashes::{self, NewCrash};
use worker::store::delete_filter;
use worker::store::reprocess::Filter;
use worker::store::Db;

async fn crash(db: &Db, project: &str, annotations: serde_json::Value) -> String {
    let id = crashes::new_id();
    let new = NewCrash {
        id: id.clone(),
        received_at: 1_700_000_000_000,
        dump_sha256: "00".into(),
        dump_size: 1,
        dump_format: "elf-core".into(),
        annotations: annotations.to_string(),
        annotations_cut: None,
    };
    crashes::insert_in(db, &new, project).await.unwrap();
    id
}

fn filter(project: &str, annotations: &[(&str, &str)]) -> Filter {
    Filter {
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        project: Some(project.to_string()),
        ..Filter::default()
    }
}

async fn scenario(db: &Db) {
    use serde_json::json;
    let mut wanted = Vec::new();
    for _ in 0..5 {
        wanted.push(crash(db, "team-a", json!({ "user_id": "u-42", "prod": "app" })).await);
    }
    wanted.sort();
    crash(db, "team-a", json!({ "user_id": "u-7" })).await;
    crash(db, "team-b", json!({ "user_id": "u-42" })).await;
    crash(db, "team-a", json!({ "user_id": 42 })).await;
    let odd = crash(db, "team-a", json!({ "o'k$1\".\\": "x'; --" })).await;
    crash(db, "team-a", json!({})).await;

    let count = |f: Filter| async move { delete_filter::count(db, &f).await.unwrap() };
    let privacy = filter("team-a", &[("user_id", "u-42")]);
    assert!(privacy.check().is_ok());
    assert_eq!(count(privacy.clone()).await, 5);
    assert_eq!(count(filter("team-b", &[("user_id", "u-42")])).await, 1);
    assert_eq!(
        count(filter("team-a", &[("user_id", "42")])).await,
        0,
        "a number"
    );
    assert_eq!(
        count(filter("team-a", &[("user_id", "u-%")])).await,
        0,
        "no pattern"
    );
    assert_eq!(
        count(filter("team-a", &[("user_id", "u-42"), ("prod", "app")])).await,
        5
    );
    assert_eq!(
        count(filter("team-a", &[("user_id", "u-42"), ("prod", "x")])).await,
        0
    );
    let strange = filter("team-a", &[("o'k$1\".\\", "x'; --")]);
    assert_eq!(
        delete_filter::ids_after(db, &strange, None, 10)
            .await
            .unwrap(),
        vec![odd]
    );
    // Pages of 2 walk every match once, in id order.
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = delete_filter::ids_after(db, &privacy, after.as_deref(), 2)
            .await
            .unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last().cloned() else {
            break;
        };
        seen.extend(page);
        after = Some(last);
    }
    assert_eq!(seen, wanted);
    // An empty filter is refused unless `all`; `all` takes the project's every crash.
    assert!(filter("team-a", &[]).check().is_err());
    let all = Filter {
        all: true,
        ..filter("team-a", &[])
    };
    assert_eq!(count(all).await, 9);
    let many: Vec<(String, String)> = (0..17).map(|i| (format!("k{i}"), "v".into())).collect();
    let refs: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert!(filter("team-a", &refs).check().is_err(), "17 annotations");
}

#[tokio::test]
async fn delete_filter_store_sqlite() {
    let (_dir, db) = common::sqlite_migrated().await;
    scenario(&db).await;
    db.close().await;
}

#[tokio::test]
async fn delete_filter_store_postgres() {
    let Some((name, db)) = common::pg_migrated("pm_delete_filter").await else {
        return;
    };
    scenario(&db).await;
    db.close().await;
    common::drop_db(&name).await;
}
