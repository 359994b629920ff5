//! Result cells: DuckDB's types as the other backends give them. Integers of every width as
//! integers (a `HUGEINT` or `UBIGINT` beyond 64 bits as a float), floats and doubles as floats,
//! `DECIMAL` as an integer when it is one and a float otherwise (as PostgreSQL's `numeric`
//! reads), booleans as 0 and 1 (SQLite's), dates and times in ISO form (`2008-12-01`,
//! `2008-12-01 10:30:00`, `10:30:00`), blobs as bytes, anything else (lists, structs,
//! intervals) as the client library's debug text of the value (not DuckDB's own spelling: such
//! cells compare equal only with themselves).

use duckdb::types::ValueRef;
use quorum_sql::value::Value;

/// The cell `cell`.
pub(crate) fn value(cell: ValueRef<'_>) -> Value {
    match cell {
        ValueRef::Null => Value::Null,
        ValueRef::Boolean(b) => Value::Integer(i64::from(b)),
        ValueRef::TinyInt(i) => Value::Integer(i64::from(i)),
        ValueRef::SmallInt(i) => Value::Integer(i64::from(i)),
        ValueRef::Int(i) => Value::Integer(i64::from(i)),
        ValueRef::BigInt(i) => Value::Integer(i),
        ValueRef::HugeInt(i) => i64::try_from(i).map_or(Value::Real(i as f64), Value::Integer),
        ValueRef::UHugeInt(u) => i64::try_from(u).map_or(Value::Real(u as f64), Value::Integer),
        ValueRef::UTinyInt(u) => Value::Integer(i64::from(u)),
        ValueRef::USmallInt(u) => Value::Integer(i64::from(u)),
        ValueRef::UInt(u) => Value::Integer(i64::from(u)),
        ValueRef::UBigInt(u) => i64::try_from(u).map_or(Value::Real(u as f64), Value::Integer),
        ValueRef::Float(f) => Value::Real(f64::from(f)),
        ValueRef::Double(f) => Value::Real(f),
        ValueRef::Decimal(d) => decimal(&d.to_string()),
        ValueRef::Text(bytes) => Value::Text(String::from_utf8_lossy(bytes).into_owned()),
        ValueRef::Blob(bytes) => Value::Blob(bytes.to_vec()),
        ValueRef::Date32(days) => Value::Text(date(i64::from(days))),
        ValueRef::Timestamp(unit, t) => Value::Text(timestamp(unit.to_micros(t))),
        ValueRef::Time64(unit, t) => Value::Text(time_of_day(unit.to_micros(t))),
        other => Value::Text(format!("{:?}", other.to_owned())),
    }
}

/// A decimal's text as a number: an integer when written as one, else a float.
fn decimal(text: &str) -> Value {
    match text.parse::<i64>() {
        Ok(i) => Value::Integer(i),
        Err(_) => text
            .parse()
            .map_or_else(|_| Value::Text(text.to_owned()), Value::Real),
    }
}

/// `YYYY-MM-DD` of a day counted from 1970-01-01 (the proleptic Gregorian calendar: days to
/// 400-year eras, then the year, day of year and month within the era, March-based so that the
/// leap day falls last).
fn date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `HH:MM:SS`, with `.ffffff` when there are microseconds.
fn time_of_day(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let (h, m, s) = (seconds / 3_600, seconds / 60 % 60, seconds % 60);
    if fraction == 0 {
        format!("{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}.{fraction:06}")
    }
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]` of microseconds since 1970-01-01 00:00:00.
fn timestamp(micros: i64) -> String {
    const DAY: i64 = 86_400 * 1_000_000;
    format!(
        "{} {}",
        date(micros.div_euclid(DAY)),
        time_of_day(micros.rem_euclid(DAY))
    )
}

#[cfg(test)]
mod tests {
    use duckdb::types::TimeUnit;

    use super::*;

    #[test]
    fn dates_and_times_read_in_iso_form() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(-1), "1969-12-31");
        assert_eq!(date(11_017), "2000-03-01");
        assert_eq!(date(11_016), "2000-02-29");
        assert_eq!(date(19_723), "2024-01-01");
        assert_eq!(date(-719_162), "0001-01-01");
        assert_eq!(time_of_day(37_800_000_000), "10:30:00");
        assert_eq!(time_of_day(37_800_000_250), "10:30:00.000250");
        assert_eq!(timestamp(1_228_127_400_000_000), "2008-12-01 10:30:00");
        assert_eq!(timestamp(-1), "1969-12-31 23:59:59.999999");
        assert_eq!(
            value(ValueRef::Timestamp(TimeUnit::Second, 86_400)).to_string(),
            "1970-01-02 00:00:00"
        );
    }

    #[test]
    fn decimals_read_as_sqlite_holds_them() {
        assert_eq!(decimal("15"), Value::Integer(15));
        assert_eq!(decimal("30.0000"), Value::Real(30.0));
        assert_eq!(decimal("-2.5"), Value::Real(-2.5));
    }
}
