use std::io::Write;

use super::*;
use crate::summary::Level;
use crate::test_db::{pets_db, scratch_dir};

/// A Spider-layout directory with one database, `pets`.
fn spider_dir() -> PathBuf {
    let dir = scratch_dir("runner");
    let db_dir = dir.join("database/pets");
    std::fs::create_dir_all(&db_dir).expect("db dir");
    let made = pets_db(&db_dir);
    std::fs::rename(made, db_dir.join("pets.sqlite")).expect("place db");
    dir
}

fn options(dir: &Path) -> EvalOptions {
    EvalOptions {
        database_dir: dir.join("database"),
        opener: None,
        gold_as_written: false,
        score: ScoreOptions {
            ves_iterations: 2,
            ..ScoreOptions::default()
        },
        concurrency: 1,
    }
}

fn questions() -> Vec<(usize, Example)> {
    [
        "SELECT count(*) FROM pets",
        "SELECT name FROM pets WHERE kind = 'dog'",
        "SELECT T1.name FROM pets AS T1 JOIN owners AS T2 ON T1.id = T2.pet_id",
        "SELECT kind, count(*) FROM pets GROUP BY kind ORDER BY count(*) DESC",
    ]
    .iter()
    .enumerate()
    .map(|(i, sql)| {
        let example = Example {
            db_id: "pets".to_owned(),
            question: format!("q{i}"),
            query: (*sql).to_owned(),
            evidence: None,
            alternatives: Vec::new(),
            category: None,
        };
        (i * 10, example)
    })
    .collect()
}

/// Answers with the gold SQL, except a wrong answer for the second question.
fn answer(_index: usize, example: &Example) -> Prediction {
    let sql = if example.question == "q1" {
        "SELECT name FROM pets".to_owned()
    } else {
        example.query.clone()
    };
    Prediction {
        linked_tables: Some(vec!["PETS".to_owned()]),
        latency_ms: 4.0,
        tokens: 3,
        ..Prediction::sql(sql)
    }
}

#[test]
fn scores_and_records_every_question() {
    let dir = spider_dir();
    let out = dir.join("run.jsonl");
    let mut seen = Vec::new();
    let summary = run_eval(
        &questions(),
        &answer,
        &out,
        &options(&dir),
        &mut |done, total| seen.push((done, total)),
    )
    .expect("run");
    assert_eq!(seen, [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]);
    let all = summary.overall();
    assert_eq!((all.count, all.ex, all.va), (4, Some(0.75), Some(1.0)));
    // Linked [pets]: exact for the one-table questions, a miss for the join.
    assert_eq!((all.r_e, all.r_s), (Some(0.75), Some(0.75)));
    assert!(all.ves.is_some_and(|v| v > 0.0));
    let log = read_records(&out).expect("read");
    let join = &log.records[2];
    assert_eq!(
        (join.index, join.gold_tables.clone()),
        (20, vec!["pets".to_owned(), "owners".to_owned()])
    );
    let gold_hardness = quorum_sql::hardness::hardness(&questions()[3].1.query);
    assert_eq!(log.records[3].hardness, gold_hardness);
    let per_level: usize = Level::ALL[..4]
        .iter()
        .map(|&l| summary.level(l).count)
        .sum();
    assert_eq!(per_level, 4);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn resumes_after_an_interruption() {
    let dir = spider_dir();
    let out = dir.join("run.jsonl");
    let all = questions();
    let mut quiet = |_: usize, _: usize| {};
    run_eval(&all[..2], &answer, &out, &options(&dir), &mut quiet).expect("first part");
    // The process died while writing the third line.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&out)
        .expect("open");
    file.write_all(br#"{"index": 20, "db_id": "pe"#)
        .expect("partial");
    drop(file);

    let asked = std::sync::Mutex::new(Vec::new());
    let counting = |i: usize, e: &Example| {
        asked.lock().expect("lock").push(e.question.clone());
        answer(i, e)
    };
    let mut seen = Vec::new();
    let summary = run_eval(&all, &counting, &out, &options(&dir), &mut |d, t| {
        seen.push((d, t))
    })
    .expect("resume");
    assert_eq!(asked.into_inner().expect("lock"), ["q2", "q3"]);
    assert_eq!(seen, [(2, 4), (3, 4), (4, 4)]);
    assert_eq!(summary.overall().count, 4);
    let log = read_records(&out).expect("read");
    assert!(!log.dropped_partial_line);
    assert_eq!(log.finished().collect::<Vec<_>>(), [0, 10, 20, 30]);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn missing_database_fails_the_run() {
    let dir = spider_dir();
    let mut q = questions();
    q[0].1.db_id = "absent".to_owned();
    let err = run_eval(
        &q,
        &answer,
        &dir.join("run.jsonl"),
        &options(&dir),
        &mut |_, _| {},
    )
    .expect_err("no such database");
    assert_eq!(err.kind(), "database");
    assert!(err.to_string().contains("absent"), "{err}");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn concurrent_answers_are_all_recorded_once() {
    let dir = spider_dir();
    let out = dir.join("run.jsonl");
    let sequential =
        run_eval(&questions(), &answer, &out, &options(&dir), &mut |_, _| {}).expect("sequential");
    let out4 = dir.join("run4.jsonl");
    let four = EvalOptions {
        concurrency: 4,
        ..options(&dir)
    };
    let mut calls = 0;
    let concurrent =
        run_eval(&questions(), &answer, &out4, &four, &mut |_, _| calls += 1).expect("concurrent");
    assert_eq!(calls, 5);
    assert_eq!(concurrent.overall().ex, sequential.overall().ex);
    let mut indices: Vec<usize> = read_records(&out4).expect("read").finished().collect();
    indices.sort_unstable();
    assert_eq!(indices, [0, 10, 20, 30]);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
