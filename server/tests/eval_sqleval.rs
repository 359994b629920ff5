//! `quorum eval --semantics sqleval` through the binary: a question file with SQL-Eval's
//! `alternatives` and `category`, answers given with `--predictions`, scored the way business
//! benchmarks compare (extra columns allowed, any alternative counts), with EX and VA by
//! category in the summary.

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
fn alternatives_extra_columns_and_categories_are_scored_the_sqleval_way() {
    let data = tempfile::tempdir().unwrap();
    let databases = data.path().join("database/concert_singer");
    std::fs::create_dir_all(&databases).unwrap();
    std::fs::copy(
        spider_dir().join("database/concert_singer/concert_singer.sqlite"),
        databases.join("concert_singer.sqlite"),
    )
    .unwrap();
    let questions = serde_json::json!([
        {"db_id": "concert_singer", "question": "Names of the French singers?",
         "SQL": "SELECT Name FROM singer WHERE Country = 'France'",
         "category": "filter"},
        {"db_id": "concert_singer", "question": "The oldest singer?",
         "SQL": "SELECT Name FROM singer ORDER BY Age DESC LIMIT 1",
         "alternatives": ["SELECT Name FROM singer ORDER BY Age DESC LIMIT 1",
                          "SELECT Singer_ID FROM singer ORDER BY Age DESC LIMIT 1"],
         "category": "order"},
        {"db_id": "concert_singer", "question": "How many singers?",
         "SQL": "SELECT count(*) FROM singer", "category": "filter"}
    ]);
    std::fs::write(
        data.path().join("questions.json"),
        serde_json::to_string(&questions).unwrap(),
    )
    .unwrap();
    // An id beside the name (extra column), the second alternative's column, and a wrong count.
    let answers = [
        (
            0,
            "SELECT Singer_ID, Name FROM singer WHERE Country = 'France'",
        ),
        (1, "SELECT Singer_ID FROM singer ORDER BY Age DESC LIMIT 1"),
        (2, "SELECT count(*) + 1 FROM singer"),
    ];
    let predictions: String = answers
        .iter()
        .map(|(i, sql)| format!("{}\n", serde_json::json!({"index": i, "sql": sql})))
        .collect();
    std::fs::write(data.path().join("answers.jsonl"), predictions).unwrap();

    let scored = |semantics: &str| -> (Vec<serde_json::Value>, String) {
        let out = data.path().join(format!("{semantics}.jsonl"));
        let output = Command::new(env!("CARGO_BIN_EXE_quorum"))
            .args([
                "eval",
                "--semantics",
                semantics,
                "--questions",
                "questions.json",
            ])
            .arg("--data")
            .arg(data.path())
            .arg("--predictions")
            .arg(data.path().join("answers.jsonl"))
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut records: Vec<serde_json::Value> = std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        records.sort_by_key(|r| r["index"].as_u64());
        (
            records,
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };

    let (records, summary) = scored("sqleval");
    let ex: Vec<bool> = records.iter().map(|r| r["ex"].as_bool().unwrap()).collect();
    assert_eq!(ex, [true, true, false]);
    assert_eq!(records[1]["category"], "order");
    assert!(
        summary.contains("| filter | 2 | 0.500 | 1.000 |"),
        "{summary}"
    );
    assert!(
        summary.contains("| order | 1 | 1.000 | 1.000 |"),
        "{summary}"
    );

    // Spider's EX also takes any listed alternative (the file says each is right), but not
    // the extra column.
    let (records, _) = scored("spider");
    let ex: Vec<bool> = records.iter().map(|r| r["ex"].as_bool().unwrap()).collect();
    assert_eq!(ex, [false, true, false]);
}
