use std::time::{Duration, Instant};

use super::*;
use crate::test_db::{pets_db, scratch_dir};

fn spider() -> ScoreOptions {
    ScoreOptions {
        ves_iterations: 0,
        ..ScoreOptions::default()
    }
}

fn bird() -> ScoreOptions {
    ScoreOptions {
        semantics: Semantics::Bird,
        ..spider()
    }
}

fn score(gold: &str, pred: &str, options: &ScoreOptions) -> ExecScore {
    let dir = scratch_dir("metrics");
    let db = pets_db(&dir);
    let s = score_execution(gold, pred, &db, options).expect("db opens");
    std::fs::remove_dir_all(&dir).expect("cleanup");
    s
}

#[test]
fn equal_results_are_correct_and_timed() {
    let s = score(
        "SELECT name FROM pets WHERE age > 2",
        "SELECT name FROM pets WHERE age >= 3",
        &spider(),
    );
    assert!(s.ex && s.valid);
    assert_eq!((s.error.as_deref(), s.gold_error.as_deref()), (None, None));
    assert!(s.gold_time.is_some() && s.pred_time.is_some());
    assert_eq!(s.ves_ratio, None, "timing disabled");
}

#[test]
fn wrong_result_is_valid_but_incorrect() {
    let s = score(
        "SELECT name FROM pets WHERE age > 2",
        "SELECT name FROM pets WHERE age > 4",
        &spider(),
    );
    assert!(!s.ex && s.valid);
    assert_eq!(s.error, None);
}

#[test]
fn error_is_invalid_and_incorrect() {
    let s = score("SELECT name FROM pets", "SELECT nme FROM pets", &spider());
    assert!(!s.ex && !s.valid);
    assert!(s.error.as_deref().is_some_and(|e| e.contains("nme")));
    assert_eq!(s.pred_time, None);
    let empty = score("SELECT name FROM pets", "", &spider());
    assert!(!empty.ex && !empty.valid);
}

#[test]
fn gold_error_makes_every_prediction_wrong() {
    let s = score("SELECT nope FROM pets", "SELECT nope FROM pets", &spider());
    assert!(!s.ex && !s.valid);
    assert!(s.gold_error.is_some());
}

#[test]
fn timeout_interrupts_and_counts_as_wrong() {
    let options = ScoreOptions {
        limits: Limits {
            timeout: Duration::from_millis(200),
            ..spider().limits
        },
        ..spider()
    };
    let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                   SELECT count(*) FROM c";
    let start = Instant::now();
    let s = score("SELECT count(*) FROM pets", endless, &options);
    assert!(!s.ex && !s.valid);
    assert!(s.error.as_deref().is_some_and(|e| e.contains("time limit")));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "really interrupted"
    );
}

#[test]
fn distinct_is_stripped_unless_kept() {
    let gold = "SELECT kind FROM pets";
    let pred = "SELECT DISTINCT kind FROM pets";
    assert!(score(gold, pred, &spider()).ex, "both run without DISTINCT");
    let keep = ScoreOptions {
        keep_distinct: true,
        ..spider()
    };
    assert!(!score(gold, pred, &keep).ex, "2 rows against 4");
}

#[test]
fn spider_and_bird_disagree_where_they_should() {
    // Column order: Spider accepts a permutation, BIRD does not.
    let (gold, swapped) = ("SELECT name, age FROM pets", "SELECT age, name FROM pets");
    assert!(score(gold, swapped, &spider()).ex);
    assert!(!score(gold, swapped, &bird()).ex);
    // Duplicates: BIRD compares sets, Spider bags.
    let (gold, deduped) = (
        "SELECT kind FROM pets",
        "SELECT kind FROM pets GROUP BY kind",
    );
    assert!(!score(gold, deduped, &spider()).ex);
    assert!(score(gold, deduped, &bird()).ex);
    // BIRD never strips DISTINCT, but as sets the results are equal anyway.
    assert!(score(gold, "SELECT DISTINCT kind FROM pets", &bird()).ex);
}

#[test]
fn order_counts_only_when_gold_orders() {
    let asc = "SELECT name FROM pets ORDER BY age";
    let desc = "SELECT name FROM pets ORDER BY age DESC";
    assert!(!score(asc, desc, &spider()).ex);
    assert!(score("SELECT name FROM pets", desc, &spider()).ex);
}

#[test]
fn ves_ratio_is_measured_for_correct_predictions_only() {
    let options = ScoreOptions {
        ves_iterations: 5,
        ..spider()
    };
    let right = score(
        "SELECT count(*) FROM pets",
        "SELECT count(id) FROM pets",
        &options,
    );
    let ratio = right.ves_ratio.expect("correct and timed");
    assert!(ratio.is_finite() && ratio > 0.0);
    let wrong = score("SELECT count(*) FROM pets", "SELECT 7", &options);
    assert_eq!(wrong.ves_ratio, None);
}

#[test]
fn ves_reward_is_the_square_root() {
    assert_eq!(ves_reward(4.0), 2.0);
}

#[test]
fn linking_scores() {
    let exact = score_linking(&["Pets", "owners"], &["owners", "pets"]);
    assert_eq!(
        exact,
        LinkScore {
            exact: true,
            subset: true,
            res: 1.0
        }
    );
    let extra = score_linking(&["pets"], &["pets", "owners", "toys", "vets"]);
    assert!(!extra.exact && extra.subset);
    assert_eq!(extra.res, 0.5, "sqrt(1/4)");
    let missing = score_linking(&["pets", "owners"], &["pets"]);
    assert_eq!(
        (missing.exact, missing.subset, missing.res),
        (false, false, 0.0)
    );
    let none: [&str; 0] = [];
    assert_eq!(score_linking(&none, &none).res, 1.0);
    assert_eq!(score_linking(&none, &["pets"]).res, 0.0);
}

fn sqleval() -> ScoreOptions {
    ScoreOptions {
        semantics: Semantics::SqlEval,
        ..spider()
    }
}

#[test]
fn sqleval_allows_extra_columns_where_spider_does_not() {
    let (gold, with_id) = (
        "SELECT name FROM pets WHERE age > 2",
        "SELECT id, name FROM pets WHERE age > 2",
    );
    assert!(!score(gold, with_id, &spider()).ex);
    assert!(score(gold, with_id, &sqleval()).ex);
    // Missing one of the gold's columns is still wrong.
    assert!(
        !score(
            "SELECT name, age FROM pets",
            "SELECT name FROM pets",
            &sqleval()
        )
        .ex
    );
}

#[test]
fn any_alternative_counts_and_the_prediction_runs_once() {
    let dir = scratch_dir("metrics-alternatives");
    let db = pets_db(&dir);
    let mut sandbox = Sandbox::open(&db, sqleval().limits).expect("db opens");
    let golds = [
        "SELECT nope FROM pets",
        "SELECT age FROM pets WHERE age > 2",
        "SELECT name FROM pets WHERE age > 2",
    ];
    let s = score_against_any(
        &mut sandbox,
        &golds,
        "SELECT name FROM pets WHERE age >= 3",
        &sqleval(),
    );
    assert!(s.ex && s.valid);
    assert_eq!(
        s.gold_error, None,
        "the matching gold's outcome is reported"
    );
    let wrong = score_against_any(&mut sandbox, &golds, "SELECT 1", &sqleval());
    assert!(!wrong.ex && wrong.valid);
    assert!(
        wrong.gold_error.is_some(),
        "no match: the first gold's outcome"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
