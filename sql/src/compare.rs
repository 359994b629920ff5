//! Result comparison with the semantics of the benchmarks: Spider's and BIRD's here, SQL-Eval's
//! in [`sqleval`].
//!
//! Spider EX (test-suite-sql-eval): the results are bags of rows; row order matters only when
//! the gold SQL contains `order by`; any column permutation of the prediction is accepted;
//! `1 == 1.0`; two empty results are equal whatever their columns; floats compare exactly.
//! BIRD EX: `set(pred_rows) == set(gold_rows)`, duplicates ignored, column order significant.
//!
//! The official Spider code prunes the column permutations by sampling rows; here every
//! candidate column pair must have the same multiset of values, and the search grows the
//! permutation one column at a time, checking the partial projection at each step. Both are
//! exact searches for "some permutation makes the results equal", so the answers agree; this
//! one is deterministic. One known difference: the official quick rejection sorts the cells of
//! a row by their Python `str`, under which `1` and `1.0` can sort differently and make an
//! int/float pair unequal after all; we treat `1 == 1.0` consistently.

use std::cmp::Ordering;

use crate::value::Value;

mod sqleval;
pub use sqleval::sqleval_eq;

/// A cell in canonical comparable form: numbers that are equal in Python (`1 == 1.0`) map to the
/// same key, so that equality, hashing and sorting agree with the official evaluator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Key<'a> {
    Null,
    Int(i64),
    Float(ExactFloat),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// A float that is not integral (or out of i64 range), ordered and compared by its exact value.
/// SQLite never returns NaN (it becomes NULL), and -0.0 is integral so it becomes `Int(0)`;
/// `total_cmp` is therefore plain numeric comparison here.
#[derive(Debug, Clone, Copy)]
struct ExactFloat(f64);

impl PartialEq for ExactFloat {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0) == Ordering::Equal
    }
}
impl Eq for ExactFloat {}
impl PartialOrd for ExactFloat {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ExactFloat {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}
impl std::hash::Hash for ExactFloat {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// 2^63 as f64: the exclusive upper bound of floats that convert to i64 without loss.
const I64_BOUND: f64 = 9_223_372_036_854_775_808.0;

fn key(v: &Value) -> Key<'_> {
    match v {
        Value::Null => Key::Null,
        Value::Integer(i) => Key::Int(*i),
        Value::Real(r) if r.fract() == 0.0 && *r >= -I64_BOUND && *r < I64_BOUND => {
            // Exact: the float is integral and in range, so the cast loses nothing.
            Key::Int(*r as i64)
        }
        Value::Real(r) => Key::Float(ExactFloat(*r)),
        Value::Text(s) => Key::Text(s),
        Value::Blob(b) => Key::Blob(b),
    }
}

/// A cell's canonical text: equal exactly when the cells are equal under [`key`] (`1` and `1.0`
/// alike), so hashes of it agree with the comparison.
pub(crate) fn canonical_cell(v: &Value) -> String {
    match key(v) {
        Key::Null => "n".to_owned(),
        Key::Int(i) => format!("i{i}"),
        Key::Float(ExactFloat(r)) => format!("f{:016x}", r.to_bits()),
        Key::Text(s) => format!("t{s}"),
        Key::Blob(b) => {
            let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
            format!("b{hex}")
        }
    }
}

fn keyed(rows: &[Vec<Value>]) -> Vec<Vec<Key<'_>>> {
    rows.iter().map(|r| r.iter().map(key).collect()).collect()
}

/// Whether Spider EX compares row order: the official evaluator's literal test on the gold SQL
/// (lower-cased text contains `order by`; a double space or a comment defeats it, as there).
pub fn order_matters(gold_sql: &str) -> bool {
    gold_sql.to_lowercase().contains("order by")
}

/// Spider EX equality of a prediction's rows against the gold rows.
pub fn spider_eq(gold: &[Vec<Value>], pred: &[Vec<Value>], order_matters: bool) -> bool {
    if gold.is_empty() && pred.is_empty() {
        return true;
    }
    if gold.len() != pred.len() {
        return false;
    }
    let n_cols = gold[0].len();
    if pred.iter().chain(gold).any(|r| r.len() != n_cols) {
        return false;
    }
    let gold = keyed(gold);
    let pred = keyed(pred);
    if !same_unordered_rows(&gold, &pred, order_matters) {
        return false;
    }
    PermutationSearch::new(&gold, &pred, order_matters).run()
}

/// Result equivalence for voting: Spider semantics without row order. Symmetric.
pub fn same_result(a: &[Vec<Value>], b: &[Vec<Value>]) -> bool {
    spider_eq(a, b, false)
}

/// BIRD EX equality: the sets of rows are equal (duplicates ignored, column order significant).
pub fn bird_eq(gold: &[Vec<Value>], pred: &[Vec<Value>]) -> bool {
    let set =
        |rows| -> std::collections::BTreeSet<Vec<Key<'_>>> { keyed(rows).into_iter().collect() };
    set(gold) == set(pred)
}

/// A necessary condition that rejects most unequal results cheaply: with the cells of every row
/// sorted (which erases column order), the rows must match as a sequence when order matters,
/// else as a multiset.
fn same_unordered_rows<'v>(gold: &[Vec<Key<'v>>], pred: &[Vec<Key<'v>>], ordered: bool) -> bool {
    let unorder = |rows: &[Vec<Key<'v>>]| -> Vec<Vec<Key<'v>>> {
        let mut out: Vec<Vec<Key<'v>>> = rows
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.sort_unstable();
                r
            })
            .collect();
        if !ordered {
            out.sort_unstable();
        }
        out
    };
    unorder(gold) == unorder(pred)
}

/// Depth-first search for a column permutation `perm` (gold column i takes prediction column
/// `perm[i]`) under which the results are equal.
struct PermutationSearch<'r, 'v> {
    gold: &'r [Vec<Key<'v>>],
    pred: &'r [Vec<Key<'v>>],
    ordered: bool,
    /// `compatible[i][j]`: gold column i and prediction column j hold the same multiset of
    /// values, which any valid permutation needs.
    compatible: Vec<Vec<bool>>,
    /// `twin_of[j]`: the first prediction column identical to column j (cell for cell). Trying
    /// one of two identical columns at a position is enough, which keeps results with repeated
    /// columns (`SELECT a, a, a, …`) from exploding into factorially many equal permutations.
    twin_of: Vec<usize>,
    perm: Vec<usize>,
    used: Vec<bool>,
}

impl<'r, 'v> PermutationSearch<'r, 'v> {
    fn new(gold: &'r [Vec<Key<'v>>], pred: &'r [Vec<Key<'v>>], ordered: bool) -> Self {
        let n = gold[0].len();
        let column = |rows: &[Vec<Key<'v>>], c: usize| -> Vec<Key<'v>> {
            rows.iter().map(|r| r[c]).collect()
        };
        let sorted = |mut col: Vec<Key<'v>>| {
            col.sort_unstable();
            col
        };
        let gold_sets: Vec<_> = (0..n).map(|c| sorted(column(gold, c))).collect();
        let pred_cols: Vec<_> = (0..n).map(|c| column(pred, c)).collect();
        let pred_sets: Vec<_> = pred_cols.iter().cloned().map(sorted).collect();
        let compatible = gold_sets
            .iter()
            .map(|g| pred_sets.iter().map(|p| g == p).collect())
            .collect();
        let twin_of = (0..n)
            .map(|j| (0..j).find(|&k| pred_cols[k] == pred_cols[j]).unwrap_or(j))
            .collect();
        PermutationSearch {
            gold,
            pred,
            ordered,
            compatible,
            twin_of,
            perm: Vec::with_capacity(n),
            used: vec![false; n],
        }
    }

    fn run(mut self) -> bool {
        self.extend()
    }

    /// Tries every admissible prediction column for the next gold column.
    fn extend(&mut self) -> bool {
        let i = self.perm.len();
        let n = self.used.len();
        if i == n {
            return true;
        }
        for j in 0..n {
            if self.used[j] || !self.compatible[i][j] || self.has_unused_earlier_twin(j) {
                continue;
            }
            self.perm.push(j);
            self.used[j] = true;
            if self.prefix_matches() && self.extend() {
                return true;
            }
            self.used[j] = false;
            self.perm.pop();
        }
        false
    }

    fn has_unused_earlier_twin(&self, j: usize) -> bool {
        (0..j).any(|k| !self.used[k] && self.twin_of[k] == self.twin_of[j])
    }

    /// Whether the gold columns assigned so far equal their prediction columns: row by row when
    /// order matters, else as multisets of projected rows. A failed prefix cannot be completed.
    fn prefix_matches(&self) -> bool {
        let i = self.perm.len() - 1;
        if self.ordered {
            // Earlier columns were checked at their own step.
            let j = self.perm[i];
            return self.gold.iter().zip(self.pred).all(|(g, p)| g[i] == p[j]);
        }
        let mut gold: Vec<&[Key<'v>]> = self.gold.iter().map(|r| &r[..=i]).collect();
        let mut pred: Vec<Vec<Key<'v>>> = self
            .pred
            .iter()
            .map(|r| self.perm.iter().map(|&j| r[j]).collect())
            .collect();
        gold.sort_unstable();
        pred.sort_unstable();
        gold.iter().zip(&pred).all(|(g, p)| *g == p.as_slice())
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
        Value::Text(v.to_string())
    }
    const N: Value = Value::Null;

    struct Case {
        name: &'static str,
        gold: Vec<Vec<Value>>,
        pred: Vec<Vec<Value>>,
        ordered: bool,
        spider: bool,
        bird: bool,
    }

    fn cases() -> Vec<Case> {
        let case = |name, gold, pred, ordered, spider, bird| Case {
            name,
            gold,
            pred,
            ordered,
            spider,
            bird,
        };
        vec![
            case(
                "identical",
                vec![vec![i(1), t("a")]],
                vec![vec![i(1), t("a")]],
                false,
                true,
                true,
            ),
            case("both empty", vec![], vec![], false, true, true),
            case(
                "empty vs row",
                vec![],
                vec![vec![i(1)]],
                false,
                false,
                false,
            ),
            case("row vs empty", vec![vec![N]], vec![], false, false, false),
            case(
                "int equals real",
                vec![vec![i(1)]],
                vec![vec![f(1.0)]],
                false,
                true,
                true,
            ),
            case(
                "real is exact",
                vec![vec![f(0.1 + 0.2)]],
                vec![vec![f(0.3)]],
                false,
                false,
                false,
            ),
            case(
                "text is not number",
                vec![vec![t("1")]],
                vec![vec![i(1)]],
                false,
                false,
                false,
            ),
            case(
                "null equals null",
                vec![vec![N, i(2)]],
                vec![vec![N, i(2)]],
                false,
                true,
                true,
            ),
            case(
                "null is not zero",
                vec![vec![N]],
                vec![vec![i(0)]],
                false,
                false,
                false,
            ),
            case(
                "null is not empty text",
                vec![vec![N]],
                vec![vec![t("")]],
                false,
                false,
                false,
            ),
            case(
                "row order ignored",
                vec![vec![i(1)], vec![i(2)]],
                vec![vec![i(2)], vec![i(1)]],
                false,
                true,
                true,
            ),
            case(
                "row order matters with order by",
                vec![vec![i(1)], vec![i(2)]],
                vec![vec![i(2)], vec![i(1)]],
                true,
                false,
                true,
            ),
            case(
                "bag: duplicate count matters",
                vec![vec![i(1)], vec![i(1)], vec![i(2)]],
                vec![vec![i(1)], vec![i(2)], vec![i(2)]],
                false,
                false,
                true,
            ),
            case(
                "set: duplicates ignored by bird",
                vec![vec![i(1)], vec![i(1)]],
                vec![vec![i(1)]],
                false,
                false,
                true,
            ),
            case(
                "column permutation accepted by spider only",
                vec![vec![i(1), t("a")], vec![i(2), t("b")]],
                vec![vec![t("b"), i(2)], vec![t("a"), i(1)]],
                false,
                true,
                false,
            ),
            case(
                "columns permuted and rows ordered",
                vec![vec![i(1), t("a")], vec![i(2), t("b")]],
                vec![vec![t("a"), i(1)], vec![t("b"), i(2)]],
                true,
                true,
                false,
            ),
            case(
                "same column multisets but rows pair differently",
                vec![vec![i(1), i(2)], vec![i(2), i(1)], vec![i(3), i(3)]],
                vec![vec![i(1), i(1)], vec![i(2), i(2)], vec![i(3), i(3)]],
                false,
                false,
                false,
            ),
            case(
                "duplicate-looking columns need the right permutation",
                vec![vec![i(1), i(2), i(1)], vec![i(2), i(1), i(1)]],
                vec![vec![i(1), i(1), i(2)], vec![i(1), i(2), i(1)]],
                false,
                true,
                false,
            ),
            case(
                "column count differs",
                vec![vec![i(1), i(1)]],
                vec![vec![i(1)]],
                false,
                false,
                false,
            ),
            case(
                "rows match unordered but no column permutation fits",
                vec![vec![i(1), i(2)], vec![i(4), i(3)]],
                vec![vec![i(1), i(2)], vec![i(3), i(4)]],
                false,
                false,
                false,
            ),
            case(
                "cells swapped across rows",
                vec![vec![i(1), t("a")], vec![i(2), t("b")]],
                vec![vec![i(1), t("b")], vec![i(2), t("a")]],
                false,
                false,
                false,
            ),
            case(
                "mixed int and real rows",
                vec![vec![i(3), f(2.5)], vec![i(4), f(0.5)]],
                vec![vec![f(2.5), f(3.0)], vec![f(0.5), i(4)]],
                false,
                true,
                false,
            ),
        ]
    }

    #[test]
    fn table_of_cases() {
        for c in cases() {
            assert_eq!(
                spider_eq(&c.gold, &c.pred, c.ordered),
                c.spider,
                "spider: {}",
                c.name
            );
            assert_eq!(bird_eq(&c.gold, &c.pred), c.bird, "bird: {}", c.name);
            if !c.ordered {
                // Voting equivalence is Spider's unordered relation, which is symmetric.
                assert_eq!(
                    same_result(&c.pred, &c.gold),
                    c.spider,
                    "symmetry: {}",
                    c.name
                );
            }
        }
    }

    #[test]
    fn order_by_detection_is_literal() {
        assert!(order_matters("SELECT a FROM t ORDER BY a"));
        assert!(order_matters("select a from t order by a desc limit 1"));
        assert!(!order_matters("SELECT a FROM t"));
        assert!(!order_matters("SELECT a FROM t ORDER  BY a"));
    }

    #[test]
    fn many_identical_columns_stay_fast() {
        let row: Vec<Value> = (0..12).map(|_| i(7)).collect();
        let gold = vec![row.clone(); 50];
        let mut pred = gold.clone();
        assert!(spider_eq(&gold, &pred, false));
        pred[49][11] = i(8);
        assert!(!spider_eq(&gold, &pred, false));
    }

    #[test]
    fn wide_permutation_is_found() {
        // Nine columns whose rows reversed column order; ties in value sets force a search.
        let gold: Vec<Vec<Value>> = (0..20)
            .map(|r| (0..9).map(|c| i((r * c) % 5)).collect())
            .collect();
        let pred: Vec<Vec<Value>> = gold
            .iter()
            .rev()
            .map(|r| r.iter().rev().cloned().collect())
            .collect();
        assert!(spider_eq(&gold, &pred, false));
        assert!(!spider_eq(&gold, &pred, true));
    }
}

#[cfg(test)]
mod properties;
