//! Which questions a run evaluates: a named slice of slices.json, an explicit id list, a limit.
//!
//! Questions keep their index in the question file through the whole harness: the index is the
//! key that makes runs resumable and comparable, whatever subset each run evaluated.

use std::collections::HashSet;

use crate::error::EvalError;
use quorum_sql::dataset::{Example, Slices};

/// A selection as the CLI states it (`--slice`, `--ids`, `--limit`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    /// A slice name from slices.json; `None` is every question.
    pub slice: Option<String>,
    /// Only these indices (in the given order); combined with a slice, only those in the slice.
    pub ids: Option<Vec<usize>>,
    /// At most this many questions, the first ones of the selection.
    pub limit: Option<usize>,
}

/// The selected questions with their indices into `examples`.
pub fn select_examples(
    examples: &[Example],
    slices: &Slices,
    selection: &Selection,
) -> Result<Vec<(usize, Example)>, EvalError> {
    let base: Vec<usize> = match &selection.slice {
        None => (0..examples.len()).collect(),
        Some(name) => slices
            .get(name)
            .ok_or_else(|| EvalError::UnknownSlice {
                name: name.clone(),
                known: slices.0.keys().cloned().collect::<Vec<_>>().join(", "),
            })?
            .to_vec(),
    };
    let chosen = match &selection.ids {
        None => base,
        Some(ids) => {
            let allowed: HashSet<usize> = base.into_iter().collect();
            ids.iter()
                .copied()
                .filter(|i| allowed.contains(i))
                .collect()
        }
    };
    let limit = selection.limit.unwrap_or(usize::MAX);
    chosen
        .into_iter()
        .take(limit)
        .map(|i| {
            examples
                .get(i)
                .map(|e| (i, e.clone()))
                .ok_or(EvalError::IdOutOfRange {
                    id: i,
                    len: examples.len(),
                })
        })
        .collect()
}

/// Parses an id list such as `3,7,10-12` (ranges inclusive, spaces allowed).
pub fn parse_ids(text: &str) -> Result<Vec<usize>, EvalError> {
    let bad = || EvalError::BadIds {
        text: text.to_owned(),
    };
    let mut ids = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number = |s: &str| s.trim().parse::<usize>().map_err(|_| bad());
        match part.split_once('-') {
            Some((from, to)) => {
                let (from, to) = (number(from)?, number(to)?);
                if from > to {
                    return Err(bad());
                }
                ids.extend(from..=to);
            }
            None => ids.push(number(part)?),
        }
    }
    if ids.is_empty() {
        return Err(bad());
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn examples(n: usize) -> Vec<Example> {
        (0..n)
            .map(|i| Example {
                db_id: "db".to_owned(),
                question: format!("q{i}"),
                query: format!("SELECT {i}"),
                evidence: None,
                alternatives: Vec::new(),
                category: None,
            })
            .collect()
    }

    fn slices() -> Slices {
        Slices(BTreeMap::from([
            ("odd".to_owned(), vec![1, 3, 5, 7]),
            ("broken".to_owned(), vec![2, 99]),
        ]))
    }

    fn indices(selection: Selection) -> Result<Vec<usize>, EvalError> {
        let chosen = select_examples(&examples(10), &slices(), &selection)?;
        Ok(chosen.into_iter().map(|(i, _)| i).collect())
    }

    #[test]
    fn slices_ids_and_limits_combine() {
        assert_eq!(indices(Selection::default()).expect("all").len(), 10);
        let odd = Some("odd".to_owned());
        let sel = |ids: Option<Vec<usize>>, limit| Selection {
            slice: odd.clone(),
            ids,
            limit,
        };
        assert_eq!(indices(sel(None, None)).expect("slice"), [1, 3, 5, 7]);
        assert_eq!(indices(sel(None, Some(2))).expect("limit"), [1, 3]);
        assert_eq!(
            indices(sel(Some(vec![7, 2, 1]), None)).expect("ids"),
            [7, 1]
        );
        let ids_only = Selection {
            ids: Some(vec![4, 0]),
            ..Selection::default()
        };
        assert_eq!(indices(ids_only).expect("ids"), [4, 0]);
        let first = select_examples(&examples(10), &slices(), &sel(None, Some(1))).expect("one");
        assert_eq!(first[0].1.question, "q1");
    }

    #[test]
    fn bad_selections_are_errors() {
        let unknown = Selection {
            slice: Some("nope".to_owned()),
            ..Selection::default()
        };
        let err = indices(unknown).expect_err("unknown slice");
        assert_eq!(err.kind(), "unknown_slice");
        assert!(err.to_string().contains("broken, odd"), "{err}");
        let out_of_range = Selection {
            slice: Some("broken".to_owned()),
            ..Selection::default()
        };
        assert_eq!(
            indices(out_of_range).expect_err("99").kind(),
            "id_out_of_range"
        );
    }

    #[test]
    fn id_lists() {
        assert_eq!(parse_ids("3, 7,10-12").expect("ok"), [3, 7, 10, 11, 12]);
        assert_eq!(parse_ids("5").expect("ok"), [5]);
        for bad in ["", "a", "3-1", "1,,x", "-4"] {
            assert_eq!(parse_ids(bad).expect_err(bad).kind(), "bad_ids", "{bad}");
        }
    }
}
