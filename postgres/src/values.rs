//! Result cells. Rows are fetched in PostgreSQL's text format (a cursor read with the simple
//! protocol), then typed by the column's type: integers and floats as SQLite returns them,
//! `numeric` as an integer when it is one and a float otherwise, booleans as 1/0 (what a
//! comparison yields in SQLite), `bytea` as bytes, and everything else (text, dates,
//! timestamps, intervals, arrays, JSON) as PostgreSQL prints it with `DateStyle` pinned to ISO.

use postgres::types::Type;
use quorum_sql::value::Value;

/// The cell `text` of a column of type `ty`; `None` is SQL NULL.
pub(crate) fn value(ty: &Type, text: Option<&str>) -> Value {
    let Some(text) = text else {
        return Value::Null;
    };
    let as_text = || Value::Text(text.to_owned());
    match *ty {
        Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => {
            text.parse().map_or_else(|_| as_text(), Value::Integer)
        }
        Type::FLOAT4 | Type::FLOAT8 => float(text).map_or_else(as_text, Value::Real),
        Type::NUMERIC => match text.parse::<i64>() {
            Ok(i) => Value::Integer(i),
            Err(_) => float(text).map_or_else(as_text, Value::Real),
        },
        Type::BOOL => Value::Integer(i64::from(text == "t")),
        Type::BYTEA => hex_bytes(text).map_or_else(as_text, Value::Blob),
        _ => as_text(),
    }
}

fn float(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => text.parse().ok(),
    }
}

/// `\x0a0b` (PostgreSQL's default `bytea_output`).
fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?;
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_take_the_shape_sqlite_gives_them() {
        assert_eq!(value(&Type::INT8, Some("42")), Value::Integer(42));
        assert_eq!(value(&Type::NUMERIC, Some("15")), Value::Integer(15));
        assert_eq!(
            value(&Type::NUMERIC, Some("2.5000000000000000")),
            Value::Real(2.5)
        );
        assert_eq!(value(&Type::FLOAT8, Some("0.1")), Value::Real(0.1));
        assert_eq!(value(&Type::BOOL, Some("t")), Value::Integer(1));
        assert_eq!(value(&Type::BOOL, Some("f")), Value::Integer(0));
        assert_eq!(
            value(&Type::BYTEA, Some("\\x00ff")),
            Value::Blob(vec![0, 255])
        );
        assert_eq!(
            value(&Type::DATE, Some("2008-12-01")),
            Value::Text("2008-12-01".into())
        );
        assert_eq!(value(&Type::TEXT, None), Value::Null);
    }
}
