//! Property tests: Spider comparison agrees with a brute-force reading of its definition.

use proptest::prelude::*;

use super::*;

/// A tiny domain, so that equal cells, rows and columns are common.
fn cell() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        (0i64..2).prop_map(Value::Integer),
        (0i64..2).prop_map(|v| Value::Real(v as f64)),
        Just(Value::Real(0.5)),
        Just(Value::Text("a".into())),
    ]
}

fn table(cols: usize, rows: usize) -> impl Strategy<Value = Vec<Vec<Value>>> {
    prop::collection::vec(prop::collection::vec(cell(), cols), rows)
}

/// Either two independent tables, or a table and a near-copy with cells swapped within
/// rows and rows reversed. Swaps within a row survive the cheap unordered-row test, so
/// these pairs exercise the permutation search itself.
fn pair() -> impl Strategy<Value = (Vec<Vec<Value>>, Vec<Vec<Value>>)> {
    (1usize..5, 0usize..5)
        .prop_flat_map(|(cols, rows)| {
            let swap = (0..rows.max(1), 0..cols, 0..cols);
            (
                table(cols, rows),
                table(cols, rows),
                prop::collection::vec(swap, 0..4),
                any::<(bool, bool)>(),
            )
        })
        .prop_map(|(gold, other, swaps, (independent, reverse))| {
            if independent {
                return (gold, other);
            }
            let mut pred = gold.clone();
            for (r, a, b) in swaps {
                if let Some(row) = pred.get_mut(r) {
                    row.swap(a, b);
                }
            }
            if reverse {
                pred.reverse();
            }
            (gold, pred)
        })
}

fn cell_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Integer(i), Value::Real(r)) | (Value::Real(r), Value::Integer(i)) => {
            *i as f64 == *r
        }
        _ => a == b,
    }
}

fn row_eq(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| cell_eq(x, y))
}

/// Multiset equality by greedy matching; exact because `row_eq` is an equivalence.
fn bag_eq(a: &[Vec<Value>], b: &[Vec<Value>]) -> bool {
    let mut left: Vec<&Vec<Value>> = b.iter().collect();
    a.len() == b.len()
        && a.iter()
            .all(|r| match left.iter().position(|l| row_eq(r, l)) {
                Some(p) => {
                    left.swap_remove(p);
                    true
                }
                None => false,
            })
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in 0..=p.len() {
            let mut q = p.clone();
            q.insert(at, n - 1);
            out.push(q);
        }
    }
    out
}

/// The definition, by brute force over every column permutation.
fn brute_force(gold: &[Vec<Value>], pred: &[Vec<Value>], ordered: bool) -> bool {
    if gold.is_empty() && pred.is_empty() {
        return true;
    }
    if gold.len() != pred.len() || gold[0].len() != pred[0].len() {
        return false;
    }
    permutations(gold[0].len()).iter().any(|perm| {
        let permuted: Vec<Vec<Value>> = pred
            .iter()
            .map(|r| perm.iter().map(|&j| r[j].clone()).collect())
            .collect();
        if ordered {
            gold.iter().zip(&permuted).all(|(g, p)| row_eq(g, p))
        } else {
            bag_eq(gold, &permuted)
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn spider_eq_matches_brute_force((gold, pred) in pair(), ordered in any::<bool>()) {
        prop_assert_eq!(
            spider_eq(&gold, &pred, ordered),
            brute_force(&gold, &pred, ordered)
        );
    }

    #[test]
    fn permuting_columns_and_rows_keeps_equality(
        (gold, perm, order) in pair().prop_flat_map(|(gold, _)| {
            let cols = gold.first().map_or(0, Vec::len);
            let rows = gold.len();
            (
                Just(gold),
                Just((0..cols).collect::<Vec<_>>()).prop_shuffle(),
                Just((0..rows).collect::<Vec<_>>()).prop_shuffle(),
            )
        })
    ) {
        let pred: Vec<Vec<Value>> = order
            .iter()
            .map(|&r| perm.iter().map(|&c| gold[r][c].clone()).collect())
            .collect();
        prop_assert!(spider_eq(&gold, &pred, false));
        prop_assert!(same_result(&pred, &gold));
    }
}
