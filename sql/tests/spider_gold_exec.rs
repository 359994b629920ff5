//! Gold against gold on every usable Spider dev question: each gold query, prepared as Spider EX
//! prepares it, runs twice in the sandbox and the two results must be Spider-equal. This checks
//! that the sandbox runs all of Spider's gold SQL (no false denial, timeout or cap), that
//! execution is deterministic enough for EX, and that the comparison accepts equal results,
//! also with their columns (and, without ORDER BY, rows) permuted.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use quorum_sql::compare::{order_matters, spider_eq};
use quorum_sql::distinct::{DistinctMode, prepare_for_spider_ex};
use quorum_sql::sandbox::{Limits, Overflow, Sandbox};
use serde_json::Value as Json;

fn spider_dir() -> PathBuf {
    match std::env::var_os("QUORUM_SPIDER_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/spider"),
    }
}

fn read_json(name: &str) -> Json {
    let path = spider_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read {path:?} (set QUORUM_SPIDER_DIR): {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path:?}: {e}"))
}

#[test]
fn gold_equals_gold_on_every_usable_question() {
    let dev = read_json("dev.json");
    let slices = read_json("slices.json");
    let usable: Vec<usize> = slices["usable"]
        .as_array()
        .expect("usable is a list")
        .iter()
        .map(|i| i.as_u64().expect("index") as usize)
        .collect();
    assert_eq!(usable.len(), 972);

    // Failing on overflow: a truncated gold result would make the comparison meaningless.
    let limits = Limits {
        timeout: Duration::from_secs(30),
        on_overflow: Overflow::Fail,
        ..Limits::default()
    };
    let start = Instant::now();
    let mut sandboxes: HashMap<String, Sandbox> = HashMap::new();
    let mut failures = Vec::new();
    let mut compared = 0;
    for &i in &usable {
        let q = &dev[i];
        let db = q["db_id"].as_str().expect("db_id");
        let gold = q["query"].as_str().expect("query");
        let sandbox = sandboxes.entry(db.to_string()).or_insert_with(|| {
            let path = spider_dir().join(format!("database/{db}/{db}.sqlite"));
            Sandbox::open(&path, limits).unwrap_or_else(|e| panic!("open {db}: {e}"))
        });
        let sql = prepare_for_spider_ex(gold, DistinctMode::Strip);
        let (first, second) = match (sandbox.execute(&sql), sandbox.execute(&sql)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                failures.push(format!("#{i} [{db}] {gold}: {e}"));
                continue;
            }
        };
        let ordered = order_matters(gold);
        if !spider_eq(&first.rows, &second.rows, ordered) {
            failures.push(format!("#{i} [{db}] {gold}: results differ"));
        }
        // The same result with its columns reversed (and its rows too, where order is free)
        // must still be equal: exercises the permutation search on real results.
        let mut shuffled: Vec<Vec<_>> = second
            .rows
            .into_iter()
            .map(|r| r.into_iter().rev().collect())
            .collect();
        if !ordered {
            shuffled.reverse();
        }
        if !spider_eq(&first.rows, &shuffled, ordered) {
            failures.push(format!("#{i} [{db}] {gold}: permuted result rejected"));
        }
        compared += 1;
    }
    eprintln!(
        "gold vs gold: {compared} compared, {} failures, {:?}",
        failures.len(),
        start.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(compared, 972);
}
