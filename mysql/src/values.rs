//! Result cells. Rows come in the binary protocol (prepared statements), typed by the server:
//! integers and floats as SQLite returns them, `DECIMAL` as an integer when it is one and a
//! float otherwise, dates and times in ISO form (`2008-12-01`, `2008-12-01 10:30:00`,
//! `10:30:00`), binary strings and blobs as bytes, every other string as text.

use mysql::Column;
use mysql::Value as Cell;
use mysql::consts::ColumnType;
use quorum_sql::value::Value;

/// The character set number MySQL gives binary strings and blobs.
const BINARY_CHARSET: u16 = 63;

/// The cell `cell` of column `column`.
pub(crate) fn value(column: &Column, cell: Cell) -> Value {
    match cell {
        Cell::NULL => Value::Null,
        Cell::Int(i) => Value::Integer(i),
        Cell::UInt(u) => i64::try_from(u).map_or(Value::Real(u as f64), Value::Integer),
        Cell::Float(f) => Value::Real(f64::from(f)),
        Cell::Double(f) => Value::Real(f),
        Cell::Date(y, mo, d, h, mi, s, us) => {
            let date = format!("{y:04}-{mo:02}-{d:02}");
            if matches!(
                column.column_type(),
                ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_NEWDATE
            ) {
                Value::Text(date)
            } else if us == 0 {
                Value::Text(format!("{date} {h:02}:{mi:02}:{s:02}"))
            } else {
                Value::Text(format!("{date} {h:02}:{mi:02}:{s:02}.{us:06}"))
            }
        }
        Cell::Time(negative, days, h, mi, s, us) => {
            let hours = u64::from(days) * 24 + u64::from(h);
            let sign = if negative { "-" } else { "" };
            Value::Text(if us == 0 {
                format!("{sign}{hours:02}:{mi:02}:{s:02}")
            } else {
                format!("{sign}{hours:02}:{mi:02}:{s:02}.{us:06}")
            })
        }
        Cell::Bytes(bytes) => bytes_value(column, bytes),
    }
}

fn bytes_value(column: &Column, bytes: Vec<u8>) -> Value {
    match column.column_type() {
        ColumnType::MYSQL_TYPE_DECIMAL | ColumnType::MYSQL_TYPE_NEWDECIMAL => {
            let text = String::from_utf8_lossy(&bytes);
            decimal(&text).unwrap_or_else(|| Value::Text(text.into_owned()))
        }
        _ if column.character_set() == BINARY_CHARSET => Value::Blob(bytes),
        _ => Value::Text(
            String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        ),
    }
}

/// A decimal's text as a number: an integer when written as one, else a float (as
/// PostgreSQL's `numeric` reads; SQLite's `avg` is a float too).
fn decimal(text: &str) -> Option<Value> {
    match text.parse::<i64>() {
        Ok(i) => Some(Value::Integer(i)),
        Err(_) => text.parse().ok().map(Value::Real),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_read_as_sqlite_holds_them() {
        assert_eq!(decimal("15"), Some(Value::Integer(15)));
        assert_eq!(decimal("30.0000"), Some(Value::Real(30.0)));
        assert_eq!(decimal("-2.5000"), Some(Value::Real(-2.5)));
        assert_eq!(decimal("x"), None);
    }
}
