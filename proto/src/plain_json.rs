//! Result cells and rows in JSON as a program reads them: a cell is a plain JSON value (an
//! integer or a real as a number, text as a string, NULL as `null`, a blob as its base64
//! string) and a row is an array of cells in column order. The proto3 JSON mapping would wrap
//! each cell in its `oneof` (`{"integer": "6"}`) and each row in an object; over gRPC both
//! messages stay as they are, so nothing is lost on the binary face.
//!
//! Reading JSON back is the inverse for what JSON can say: a whole number within `i64` is an
//! integer, any other number a real, a string text (a blob written as base64 reads back as
//! text), `null` NULL.

use base64::Engine;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

use crate::v1::value::Kind;
use crate::v1::{Row, Value};

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.kind {
            None | Some(Kind::Null(_)) => serializer.serialize_none(),
            Some(Kind::Integer(i)) => serializer.serialize_i64(*i),
            // A non-finite real has no JSON number; it is written as null, as serde_json does.
            Some(Kind::Real(r)) if !r.is_finite() => serializer.serialize_none(),
            Some(Kind::Real(r)) => serializer.serialize_f64(*r),
            Some(Kind::Text(t)) => serializer.serialize_str(t),
            Some(Kind::Blob(b)) => {
                serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b))
            }
        }
    }
}

struct CellVisitor;

impl<'de> Visitor<'de> for CellVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a cell: a number, a string or null")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(cell(Kind::Null(true)))
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(cell(Kind::Null(true)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(cell(Kind::Integer(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(cell(
            i64::try_from(v).map_or(Kind::Real(v as f64), Kind::Integer),
        ))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(cell(Kind::Real(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(cell(Kind::Text(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(cell(Kind::Text(v)))
    }
}

fn cell(kind: Kind) -> Value {
    Value { kind: Some(kind) }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CellVisitor)
    }
}

impl Serialize for Row {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.values.len()))?;
        for value in &self.values {
            seq.serialize_element(value)?;
        }
        seq.end()
    }
}

struct RowVisitor;

impl<'de> Visitor<'de> for RowVisitor {
    type Value = Row;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a row: an array of cells")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Row, A::Error> {
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(value) = seq.next_element()? {
            values.push(value);
        }
        Ok(Row { values })
    }
}

impl<'de> Deserialize<'de> for Row {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(RowVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::ResultPreview;

    fn row(kinds: Vec<Kind>) -> Row {
        Row {
            values: kinds.into_iter().map(cell).collect(),
        }
    }

    #[test]
    fn a_preview_is_plain_arrays_of_plain_values() {
        let preview = ResultPreview {
            columns: vec!["n".into(), "name".into(), "x".into(), "b".into()],
            rows: vec![row(vec![
                Kind::Integer(6),
                Kind::Text("Joe".into()),
                Kind::Null(true),
                Kind::Blob(vec![0, 1]),
            ])],
            total_rows: 1,
            truncated: false,
        };
        let json = serde_json::to_value(&preview).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "columns": ["n", "name", "x", "b"],
                "rows": [[6, "Joe", null, "AAE="]],
                "totalRows": 1,
                "truncated": false,
            })
        );
    }

    #[test]
    fn cells_read_back_as_what_json_can_say() {
        let back: Row =
            serde_json::from_str(r#"[6, 2.5, "x", null, 18446744073709551615]"#).unwrap();
        let kinds: Vec<_> = back.values.into_iter().map(|v| v.kind.unwrap()).collect();
        assert_eq!(
            kinds,
            vec![
                Kind::Integer(6),
                Kind::Real(2.5),
                Kind::Text("x".into()),
                Kind::Null(true),
                Kind::Real(u64::MAX as f64),
            ]
        );
        assert!(serde_json::from_str::<Row>(r#"[{"integer": "6"}]"#).is_err());
    }

    #[test]
    fn a_non_finite_real_is_null() {
        let json = serde_json::to_string(&cell(Kind::Real(f64::NAN))).unwrap();
        assert_eq!(json, "null");
    }
}
