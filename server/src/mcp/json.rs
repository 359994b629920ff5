//! What the MCP tools answer, as plain JSON a program (or a model) can read: cells are JSON
//! numbers, strings and nulls (a blob is its base64), rows are arrays in column order, and no
//! field carries a protobuf wrapper.

use base64::Engine;
use quorum_proto::v1 as pb;
use serde_json::{Value, json};

pub fn cell(value: &pb::Value) -> Value {
    use pb::value::Kind;
    match &value.kind {
        None | Some(Kind::Null(_)) => Value::Null,
        Some(Kind::Integer(i)) => json!(i),
        Some(Kind::Real(r)) => serde_json::Number::from_f64(*r).map_or(Value::Null, Value::Number),
        Some(Kind::Text(t)) => json!(t),
        Some(Kind::Blob(b)) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
    }
}

pub fn result(preview: Option<&pb::ResultPreview>) -> Value {
    let Some(p) = preview else {
        return Value::Null;
    };
    json!({
        "columns": p.columns,
        "rows": p.rows.iter().map(|r| r.values.iter().map(cell).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "row_count": p.total_rows,
        "truncated": p.truncated,
    })
}

pub fn databases(listed: &pb::ListDatabasesResponse) -> Value {
    json!(
        listed
            .databases
            .iter()
            .map(|d| json!({ "db_id": d.db_id, "dialect": d.dialect, "tables": d.table_count }))
            .collect::<Vec<_>>()
    )
}

pub fn description(
    described: &pb::DescribeDatabaseResponse,
    notes: &pb::ListNotesResponse,
) -> Value {
    json!({
        "db_id": described.db_id,
        "tables": described.tables.iter().map(|t| json!({
            "name": t.name,
            "columns": t.columns.iter().map(|c| json!({
                "name": c.name,
                "type": c.declared_type,
                "primary_key": c.primary_key,
                "examples": c.examples.iter().map(cell).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "foreign_keys": described.foreign_keys.iter().map(|f| json!({
            "from": format!("{}.{}", f.from_table, f.from_column),
            "to": format!("{}.{}", f.to_table, f.to_column),
        })).collect::<Vec<_>>(),
        "notes": notes.notes.iter().map(|n| json!({ "id": n.id, "text": n.text })).collect::<Vec<_>>(),
    })
}

/// An answer: the SQL, its result, and why it was chosen (the vote and the candidates).
pub fn answer(a: &pb::Text2SqlResponse) -> Value {
    json!({
        "sql": a.sql,
        "result": result(a.preview.as_ref()),
        "why": {
            "candidates": a.candidates.iter().map(|c| json!({
                "id": c.id,
                "model": c.model,
                "sql": c.sql,
                "ran": matches!(c.outcome, Some(pb::candidate::Outcome::Ok(_))),
            })).collect::<Vec<_>>(),
            "chosen_candidate": a.chosen_candidate,
            "vote_split": a.vote.as_ref().is_some_and(|v| v.split),
            "notes_used": a.notes_used.iter().map(|n| n.id).collect::<Vec<_>>(),
            "evidence_set_aside": a.evidence_set_aside,
        },
        "tokens_generated": a.tokens_generated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_plain_json() {
        use pb::value::Kind;
        let v = |k| pb::Value { kind: Some(k) };
        assert_eq!(cell(&v(Kind::Integer(6))), json!(6));
        assert_eq!(cell(&v(Kind::Real(2.5))), json!(2.5));
        assert_eq!(cell(&v(Kind::Text("x".into()))), json!("x"));
        assert_eq!(cell(&v(Kind::Null(true))), Value::Null);
        assert_eq!(cell(&v(Kind::Blob(vec![0, 1]))), json!("AAE="));
        assert_eq!(cell(&v(Kind::Real(f64::NAN))), Value::Null);
    }
}
