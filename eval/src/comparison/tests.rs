use expect_test::expect;

use super::*;
use crate::record::tests::sample;
use crate::summary::tests::hand_made;

/// Run B: question 1 fixed, question 2 broken, question 3 absent, question 7 new.
fn run_b() -> Vec<Record> {
    let mut b = hand_made();
    b[1].ex = true;
    b[1].valid = true;
    b[1].ves_ratio = Some(1.0);
    b[1].prediction = "SELECT 1 -- fixed".to_owned();
    b[2].ex = false;
    b[2].ves_ratio = None;
    b.truncate(3);
    b.push(sample(7, Hardness::Extra, true));
    b
}

#[test]
fn finds_flips_in_both_directions() {
    let c = compare(&hand_made(), &run_b());
    let fixed: Vec<usize> = c.fixed().map(|f| f.index).collect();
    let broken: Vec<usize> = c.broken().map(|f| f.index).collect();
    assert_eq!((fixed, broken), (vec![1], vec![2]));
    assert_eq!(c.flips[0].prediction_b, "SELECT 1 -- fixed");
    assert_eq!((c.only_a.clone(), c.only_b.clone()), (vec![3], vec![7]));
    // Both sides are summarized over the three common questions.
    assert_eq!((c.a.overall().count, c.b.overall().count), (3, 3));
    assert_eq!(c.b.overall().ex, Some(2.0 / 3.0));
}

#[test]
fn identical_runs_have_no_flips() {
    let c = compare(&hand_made(), &hand_made());
    assert!(c.flips.is_empty() && c.only_a.is_empty() && c.only_b.is_empty());
    assert_eq!(c.a, c.b);
}

/// Run A with a `|` in a flipped question, which must not break the table.
fn with_pipe() -> Vec<Record> {
    let mut a = hand_made();
    a[2].question = "pets | owners?".to_owned();
    a
}

#[test]
fn markdown_side_by_side() {
    expect![[r#"
        Questions compared: 3 (only in A: 1, only in B: 1); A → B (B − A).

        | metric | easy | medium | hard | extra | all |
        |---|--:|--:|--:|--:|--:|
        | n | 2 | 1 | 0 | 0 | 3 |
        | EX | 0.500 → 1.000 (+0.500) | 1.000 → 0.000 (-1.000) | – | – | 0.667 → 0.667 (+0.000) |
        | VA | 0.500 → 1.000 (+0.500) | 1.000 → 1.000 (+0.000) | – | – | 0.667 → 1.000 (+0.333) |
        | VES | 100.0 → 150.0 (+50.0) | 100.0 → 0.0 (-100.0) | – | – | 100.0 → 100.0 (+0.0) |
        | C-VES | 200.0 → 150.0 (-50.0) | 100.0 → – | – | – | 150.0 → 150.0 (+0.0) |
        | R_e | 0.500 → 0.500 (+0.000) | 0.000 → 0.000 (+0.000) | – | – | 0.333 → 0.333 (+0.000) |
        | R_s | 0.500 → 0.500 (+0.000) | 1.000 → 1.000 (+0.000) | – | – | 0.667 → 0.667 (+0.000) |
        | RES | 0.500 → 0.500 (+0.000) | 0.707 → 0.707 (+0.000) | – | – | 0.569 → 0.569 (+0.000) |
        | latency mean ms | 20.0 → 20.0 (+0.0) | 20.0 → 20.0 (+0.0) | – | – | 20.0 → 20.0 (+0.0) |
        | latency median ms | 20.0 → 20.0 (+0.0) | 20.0 → 20.0 (+0.0) | – | – | 20.0 → 20.0 (+0.0) |
        | tokens mean | 5.0 → 5.0 (+0.0) | 5.0 → 5.0 (+0.0) | – | – | 5.0 → 5.0 (+0.0) |

        Flipped: 1 wrong → correct, 1 correct → wrong.

        | index | db | hardness | flip | question |
        |--:|---|---|---|---|
        | 1 | pets | easy | wrong → correct | question 1 |
        | 2 | pets | medium | correct → wrong | pets \| owners? |
    "#]]
    .assert_eq(&compare(&with_pipe(), &run_b()).to_markdown());
}
