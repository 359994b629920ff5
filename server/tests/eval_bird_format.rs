//! `quorum eval` reads a question file in BIRD's format (gold SQL under `SQL`, `evidence`,
//! `question_id`, `difficulty`) from a data directory with no `slices.json`, over databases in
//! a directory of another name (`--database-dir`, BIRD's `dev_databases`), and scores it with
//! BIRD's semantics, through the binary.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn spider_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("QUORUM_SPIDER_DIR") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/spider")
}

#[test]
fn a_bird_format_question_file_is_scored_over_its_own_database_directory() {
    let data = tempfile::tempdir().unwrap();
    let databases = data.path().join("dev_databases/concert_singer");
    std::fs::create_dir_all(&databases).unwrap();
    std::fs::copy(
        spider_dir().join("database/concert_singer/concert_singer.sqlite"),
        databases.join("concert_singer.sqlite"),
    )
    .unwrap();
    let questions = serde_json::json!([
        {"question_id": 0, "db_id": "concert_singer", "question": "How many singers are there?",
         "evidence": "", "SQL": "SELECT count(*) FROM singer", "difficulty": "simple"},
        {"question_id": 1, "db_id": "concert_singer",
         "question": "Names of singers from the Netherlands?",
         "evidence": "the Netherlands refers to Country = 'Netherlands'",
         "SQL": "SELECT Name FROM singer WHERE Country = 'Netherlands'",
         "difficulty": "simple"}
    ]);
    std::fs::write(
        data.path().join("dev.json"),
        serde_json::to_string(&questions).unwrap(),
    )
    .unwrap();
    let out = data.path().join("gold.jsonl");
    let status = Command::new(env!("CARGO_BIN_EXE_quorum"))
        .args(["eval", "--predict-gold", "--semantics", "bird"])
        .arg("--data")
        .arg(data.path())
        .args(["--questions", "dev.json", "--database-dir", "dev_databases"])
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2);
    for record in &records {
        assert_eq!(record["ex"], true, "{record}");
        assert_eq!(record["valid"], true, "{record}");
    }
    // Records are written as questions finish, not in question order.
    let second = records.iter().find(|r| r["index"] == 1).unwrap();
    assert_eq!(
        second["gold"],
        "SELECT Name FROM singer WHERE Country = 'Netherlands'"
    );
}
