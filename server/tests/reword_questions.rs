//! `quorum reword` writes Spider's dev file with one slice's questions reworded: every other
//! question as it was, at its index, and every reworded gold query still runs on its database
//! (scored through `quorum eval --predict-gold` on the written file), through the binary.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn spider_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("QUORUM_SPIDER_DIR") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/spider")
}

fn read_array(path: &Path) -> Vec<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_reworded_slice_keeps_every_index_and_its_gold_queries_run() {
    let data = spider_dir();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dev-reworded.json");
    let status = Command::new(env!("CARGO_BIN_EXE_quorum"))
        .arg("reword")
        .arg("--data")
        .arg(&data)
        .args(["--slice", "dev100", "--seed", "1"])
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success(), "quorum reword: {status}");

    let original = read_array(&data.join("dev.json"));
    let reworded = read_array(&out);
    assert_eq!(reworded.len(), original.len());
    let slices: serde_json::Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(data.join("slices.json")).unwrap()).unwrap();
    let dev100: Vec<usize> = slices["dev100"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_u64().unwrap() as usize)
        .collect();
    let mut changed = Vec::new();
    for (index, (before, after)) in original.iter().zip(&reworded).enumerate() {
        if after.get("reworded").is_none() {
            assert_eq!(before, after, "question {index} changed without a note");
            continue;
        }
        assert!(
            dev100.contains(&index),
            "question {index} is not in the slice"
        );
        assert_ne!(before["question"], after["question"], "question {index}");
        assert_eq!(after["reworded"]["original"], before["question"]);
        assert_eq!(before["db_id"], after["db_id"]);
        changed.push(index);
    }
    // Spider's questions mostly spell the schema's words and name values, so a good share of
    // the slice can be reworded; none at all would mean the lexicon or the values were not read.
    assert!(changed.len() >= 20, "only {} reworded", changed.len());
    let with_values = changed
        .iter()
        .filter(|&&i| reworded[i]["reworded"]["values"].as_u64().unwrap() > 0)
        .count();
    assert!(with_values > 0, "no value replaced");

    let ids: Vec<String> = changed.iter().map(usize::to_string).collect();
    let records = dir.path().join("gold.jsonl");
    let status = Command::new(env!("CARGO_BIN_EXE_quorum"))
        .args(["eval", "--predict-gold"])
        .arg("--data")
        .arg(&data)
        .arg("--questions")
        .arg(&out)
        .args(["--ids", &ids.join(",")])
        .arg("--out")
        .arg(&records)
        .status()
        .unwrap();
    assert!(status.success(), "quorum eval --predict-gold: {status}");
    let records: Vec<Value> = std::fs::read_to_string(&records)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), changed.len());
    for record in &records {
        assert_eq!(record["gold_error"], Value::Null, "{record}");
        assert_eq!(record["valid"], true, "{record}");
    }
}
