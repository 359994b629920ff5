//! SQL-Eval's notion of a right answer, the one users of business benchmarks (defog's
//! SQL-Eval and the questions built from it) compare with.
//!
//! A prediction is right when its result holds the gold's: every gold column is matched by a
//! distinct column of the prediction (names and column order ignored; the prediction may
//! return more columns, such as an id beside a name), and under that matching the two results
//! are the same rows once duplicates are dropped; row order counts only when the gold query
//! orders. Numbers compare as pandas' `assert_frame_equal` does by default, within a relative
//! 1e-5 (here: equal after rounding floats to six significant digits; integers stay exact, as pandas
//! compares integer columns), so `2.5` from a `numeric` and `2.5000001` from a `float8` are
//! the same answer, and `1` equals `1.0`.
//!
//! Where SQL-Eval's own code is greedy (it takes the first prediction column whose sorted
//! values equal a gold column's and never backtracks), this search tries every matching, so a
//! prediction with two look-alike columns is not failed by the order they come in.

use std::collections::BTreeSet;

use super::{I64_BOUND, canonical_cell};
use crate::value::Value;

/// Whether `pred` answers like `gold` under SQL-Eval's rules; `ordered` when the gold query
/// orders its rows ([`super::order_matters`]).
pub fn sqleval_eq(gold: &[Vec<Value>], pred: &[Vec<Value>], ordered: bool) -> bool {
    let gold = distinct_rows(gold);
    let pred = distinct_rows(pred);
    if gold.is_empty() || pred.is_empty() {
        return gold.is_empty() && pred.is_empty();
    }
    let gold_width = gold[0].len();
    let pred_width = pred[0].len();
    if gold_width > pred_width
        || gold.iter().any(|r| r.len() != gold_width)
        || pred.iter().any(|r| r.len() != pred_width)
    {
        return false;
    }
    // A gold column can only be matched by a prediction column holding the same values.
    let candidates: Vec<Vec<usize>> = (0..gold_width)
        .map(|g| {
            let wanted = value_set(&gold, g);
            (0..pred_width)
                .filter(|&p| value_set(&pred, p) == wanted)
                .collect()
        })
        .collect();
    let mut search = Matching {
        gold: &gold,
        pred: &pred,
        ordered,
        candidates,
        chosen: Vec::with_capacity(gold_width),
        used: vec![false; pred_width],
    };
    search.extend()
}

/// The distinct values of column `c`.
fn value_set(rows: &[Vec<String>], c: usize) -> BTreeSet<&str> {
    rows.iter().map(|r| r[c].as_str()).collect()
}

/// Canonical cells, rows in first-seen order with repeats dropped (pandas' `drop_duplicates`).
fn distinct_rows(rows: &[Vec<Value>]) -> Vec<Vec<String>> {
    let mut seen = BTreeSet::new();
    rows.iter()
        .map(|r| r.iter().map(tolerant_cell).collect::<Vec<String>>())
        .filter(|r| seen.insert(r.clone()))
        .collect()
}

/// A cell's canonical text with numbers rounded to six significant digits, so that values
/// within SQL-Eval's tolerance share one text (and an integral result equals an integer).
fn tolerant_cell(v: &Value) -> String {
    match v {
        Value::Real(r) if r.is_finite() => {
            let rounded: f64 = format!("{r:.5e}").parse().unwrap_or(*r);
            if rounded.fract() == 0.0 && rounded.abs() < I64_BOUND {
                // Exact: integral and in range.
                canonical_cell(&Value::Integer(rounded as i64))
            } else {
                canonical_cell(&Value::Real(rounded))
            }
        }
        other => canonical_cell(other),
    }
}

/// Depth-first search for an injective matching of gold columns to prediction columns.
struct Matching<'r> {
    gold: &'r [Vec<String>],
    pred: &'r [Vec<String>],
    ordered: bool,
    candidates: Vec<Vec<usize>>,
    /// `chosen[g]`: the prediction column matched to gold column g so far.
    chosen: Vec<usize>,
    used: Vec<bool>,
}

impl Matching<'_> {
    fn extend(&mut self) -> bool {
        let g = self.chosen.len();
        if g == self.candidates.len() {
            return self.projection_equal();
        }
        for k in 0..self.candidates[g].len() {
            let p = self.candidates[g][k];
            if self.used[p] {
                continue;
            }
            self.used[p] = true;
            self.chosen.push(p);
            if self.extend() {
                return true;
            }
            self.chosen.pop();
            self.used[p] = false;
        }
        false
    }

    /// The prediction's rows on the matched columns, duplicates dropped, against the gold's.
    fn projection_equal(&self) -> bool {
        let mut seen = BTreeSet::new();
        let projected: Vec<Vec<&str>> = self
            .pred
            .iter()
            .map(|r| self.chosen.iter().map(|&p| r[p].as_str()).collect())
            .filter(|r: &Vec<&str>| seen.insert(r.clone()))
            .collect();
        let gold: Vec<Vec<&str>> = self
            .gold
            .iter()
            .map(|r| r.iter().map(String::as_str).collect())
            .collect();
        if projected.len() != gold.len() {
            return false;
        }
        if self.ordered {
            return projected == gold;
        }
        let a: BTreeSet<&Vec<&str>> = projected.iter().collect();
        let b: BTreeSet<&Vec<&str>> = gold.iter().collect();
        a == b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(v: i64) -> Value {
        Value::Integer(v)
    }
    fn f(v: f64) -> Value {
        Value::Real(v)
    }
    fn t(v: &str) -> Value {
        Value::Text(v.into())
    }

    #[test]
    fn extra_columns_in_the_prediction_are_allowed() {
        let gold = vec![vec![t("Alice")], vec![t("Bob")]];
        let pred = vec![vec![i(2), t("Bob")], vec![i(1), t("Alice")]];
        assert!(sqleval_eq(&gold, &pred, false));
        // The other way round is not: the gold's id column is missing from the prediction.
        assert!(!sqleval_eq(&pred, &gold, false));
    }

    #[test]
    fn duplicates_are_dropped_and_order_counts_only_when_the_gold_orders() {
        let gold = vec![vec![t("a")], vec![t("b")]];
        let pred = vec![vec![t("b")], vec![t("a")], vec![t("b")]];
        assert!(sqleval_eq(&gold, &pred, false));
        assert!(!sqleval_eq(&gold, &pred, true));
        let in_order = vec![vec![t("a")], vec![t("a")], vec![t("b")]];
        assert!(sqleval_eq(&gold, &in_order, true));
    }

    #[test]
    fn numbers_compare_within_a_relative_tolerance() {
        assert!(sqleval_eq(&[vec![f(2.5)]], &[vec![f(2.500_000_1)]], false));
        assert!(sqleval_eq(&[vec![i(3)]], &[vec![f(3.0)]], false));
        assert!(sqleval_eq(
            &[vec![f(1.0 / 3.0)]],
            &[vec![f(0.333_333_3)]],
            false
        ));
        assert!(!sqleval_eq(
            &[vec![f(0.33)]],
            &[vec![f(0.333_333_3)]],
            false
        ));
        assert!(!sqleval_eq(&[vec![i(2)]], &[vec![f(2.5)]], false));
    }

    #[test]
    fn rows_must_agree_under_the_matching_not_only_columns() {
        // Each column holds the same values, but the pairs differ.
        let gold = vec![vec![t("a"), i(1)], vec![t("b"), i(2)]];
        let pred = vec![vec![t("a"), i(2)], vec![t("b"), i(1)]];
        assert!(!sqleval_eq(&gold, &pred, false));
    }

    #[test]
    fn look_alike_columns_are_searched_not_taken_greedily() {
        // Every column holds {1, 2}: matching gold's columns to the prediction's first two
        // gives the wrong pairs, the first and third the right ones.
        let gold = vec![vec![i(1), i(1)], vec![i(2), i(2)]];
        let pred = vec![vec![i(1), i(2), i(1)], vec![i(2), i(1), i(2)]];
        assert!(sqleval_eq(&gold, &pred, false));
    }

    #[test]
    fn empty_results_match_only_empty_results() {
        assert!(sqleval_eq(&[], &[], false));
        assert!(!sqleval_eq(&[], &[vec![i(1)]], false));
        assert!(!sqleval_eq(&[vec![i(1)]], &[], false));
    }

    #[test]
    fn nulls_are_values() {
        let gold = vec![vec![Value::Null], vec![i(1)]];
        assert!(sqleval_eq(&gold, &[vec![i(1)], vec![Value::Null]], false));
        assert!(!sqleval_eq(&gold, &[vec![i(1)], vec![i(0)]], false));
    }
}
