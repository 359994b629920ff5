use expect_test::expect;

use super::*;
use crate::record::tests::sample;

/// Four questions whose numbers are easy to check by hand (see the assertions).
pub(crate) fn hand_made() -> Vec<Record> {
    let mut easy_right = sample(0, Hardness::Easy, true);
    easy_right.ves_ratio = Some(4.0);
    let mut easy_error = sample(1, Hardness::Easy, false);
    easy_error.valid = false;
    easy_error.error = Some("SQL error: no such column".to_owned());
    easy_error.gold_tables = vec!["pets".to_owned(), "owners".to_owned()];
    easy_error.latency_ms = 30.0;
    let mut medium_right = sample(2, Hardness::Medium, true);
    medium_right.linked_tables = Some(vec!["Pets".to_owned(), "owners".to_owned()]);
    medium_right.latency_ms = 20.0;
    let mut hard_wrong = sample(3, Hardness::Hard, false);
    hard_wrong.linked_tables = None;
    hard_wrong.latency_ms = 40.0;
    hard_wrong.tokens_generated = 15;
    vec![easy_right, easy_error, medium_right, hard_wrong]
}

#[test]
fn overall_numbers() {
    let s = summarize(&hand_made());
    let all = s.overall();
    assert_eq!((all.count, all.correct, all.linked), (4, 2, 3));
    assert_eq!(all.ex, Some(0.5));
    assert_eq!(all.va, Some(0.75));
    // Rewards sqrt(4) + sqrt(1) = 3 over 4 questions, and over 2 correct ones.
    assert_eq!(all.ves, Some(75.0));
    assert_eq!(all.c_ves, Some(150.0));
    assert_eq!(all.r_e, Some(1.0 / 3.0));
    assert_eq!(all.r_s, Some(2.0 / 3.0));
    let res = all.res.expect("linked questions");
    assert!((res - (1.0 + 0.0 + 0.5f64.sqrt()) / 3.0).abs() < 1e-12);
    assert_eq!(all.latency_mean_ms, Some(25.0));
    assert_eq!(all.latency_median_ms, Some(25.0));
    assert_eq!(all.tokens_mean, Some(7.5));
    assert_eq!(all.tokens_total, 30);
}

#[test]
fn per_level_numbers() {
    let s = summarize(&hand_made());
    let easy = s.level(Level::Easy);
    assert_eq!(
        (easy.count, easy.ex, easy.ves, easy.c_ves),
        (2, Some(0.5), Some(100.0), Some(200.0))
    );
    let hard = s.level(Level::Hard);
    assert_eq!(
        (hard.ex, hard.va, hard.ves, hard.c_ves),
        (Some(0.0), Some(1.0), Some(0.0), None)
    );
    assert_eq!((hard.linked, hard.r_e), (0, None));
    let extra = s.level(Level::Extra);
    assert_eq!(
        (extra.count, extra.ex, extra.latency_median_ms),
        (0, None, None)
    );
    assert_eq!(s.levels.map(|l| l.count), [2, 1, 1, 0, 4]);
}

#[test]
fn untimed_correct_question_hides_ves() {
    let mut records = hand_made();
    records[2].ves_ratio = None;
    let s = summarize(&records);
    assert_eq!((s.overall().ves, s.overall().c_ves), (None, None));
    assert_eq!(s.level(Level::Easy).ves, Some(100.0), "easy is fully timed");
    assert_eq!(s.overall().ex, Some(0.5), "EX does not depend on timing");
}

#[test]
fn median_of_odd_and_even() {
    assert_eq!(median(&[1.0, 2.0, 10.0]), Some(2.0));
    assert_eq!(median(&[1.0, 2.0, 4.0, 10.0]), Some(3.0));
    assert_eq!(median(&[]), None);
}

#[test]
fn markdown_table() {
    expect![[r#"
        | level | n | EX | VA | VES | C-VES | R_e | R_s | RES | latency mean ms | latency median ms | tokens mean |
        |---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|
        | easy | 2 | 0.500 | 0.500 | 100.0 | 200.0 | 0.500 | 0.500 | 0.500 | 20.0 | 20.0 | 5.0 |
        | medium | 1 | 1.000 | 1.000 | 100.0 | 100.0 | 0.000 | 1.000 | 0.707 | 20.0 | 20.0 | 5.0 |
        | hard | 1 | 0.000 | 1.000 | 0.0 | – | – | – | – | 40.0 | 40.0 | 15.0 |
        | extra | 0 | – | – | – | – | – | – | – | – | – | – |
        | all | 4 | 0.500 | 0.750 | 75.0 | 150.0 | 0.333 | 0.667 | 0.569 | 25.0 | 25.0 | 7.5 |
    "#]]
    .assert_eq(&summarize(&hand_made()).to_markdown());
}

#[test]
fn categories_are_summarized_when_the_questions_carry_them() {
    assert!(summarize(&hand_made()).categories.is_empty());
    let mut records = hand_made();
    records[0].category = Some("ratio".to_owned());
    records[1].category = Some("ratio".to_owned());
    records[2].category = Some("date".to_owned());
    let s = summarize(&records);
    let rows: Vec<(&str, usize, Option<f64>, Option<f64>)> = s
        .categories
        .iter()
        .map(|c| (c.category.as_str(), c.count, c.ex, c.va))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("date", 1, Some(1.0), Some(1.0)),
            ("ratio", 2, Some(0.5), Some(0.5))
        ]
    );
    let markdown = s.to_markdown();
    assert!(
        markdown.contains("| category | n | EX | VA |"),
        "{markdown}"
    );
    assert!(
        markdown.contains("| ratio | 2 | 0.500 | 0.500 |"),
        "{markdown}"
    );
}
