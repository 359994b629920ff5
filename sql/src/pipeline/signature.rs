//! A result signature that lets a reader of the pipeline's evidence see at a glance which
//! candidates returned the same rows.

use crate::compare::canonical_cell;
use crate::fingerprint::Fnv64;
use crate::sandbox::QueryResult;

/// A 16-hex-digit signature of a result that ignores row order and column order, and treats
/// `1` and `1.0` alike, like the vote's equality. Equal results (as the vote sees them) always
/// share a signature; the converse holds except in contrived cases, so the vote clusters stay
/// the authority.
pub fn result_signature(result: &QueryResult) -> String {
    let mut rows: Vec<Vec<String>> = result
        .rows
        .iter()
        .map(|row| {
            let mut cells: Vec<String> = row.iter().map(canonical_cell).collect();
            cells.sort_unstable();
            cells
        })
        .collect();
    rows.sort_unstable();
    let mut hash = Fnv64::default();
    for row in &rows {
        hash.write(&(row.len() as u64).to_le_bytes());
        for cell in row {
            hash.write_field(cell.as_bytes());
        }
    }
    format!("{:016x}", hash.finish())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::value::Value;

    fn result(rows: Vec<Vec<Value>>) -> QueryResult {
        QueryResult {
            columns: vec![],
            rows,
            truncated: false,
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn signature_ignores_row_and_column_order_and_int_float() {
        let a = result(vec![
            vec![Value::Integer(1), Value::Text("x".into())],
            vec![Value::Integer(2), Value::Text("y".into())],
        ]);
        let b = result(vec![
            vec![Value::Text("y".into()), Value::Real(2.0)],
            vec![Value::Text("x".into()), Value::Integer(1)],
        ]);
        let c = result(vec![vec![Value::Integer(1), Value::Text("x".into())]]);
        assert_eq!(result_signature(&a), result_signature(&b));
        assert_ne!(result_signature(&a), result_signature(&c));
        assert_eq!(result_signature(&a).len(), 16);
    }

    #[test]
    fn fnv_fields_are_length_prefixed() {
        let hash = |parts: &[&str]| {
            let mut h = Fnv64::default();
            for p in parts {
                h.write_field(p.as_bytes());
            }
            h.finish()
        };
        assert_ne!(hash(&["ab", "c"]), hash(&["a", "bc"]));
        assert_eq!(hash(&["ab", "c"]), hash(&["ab", "c"]));
    }
}
