//! One SQLite value, as results, sample rows and column examples hold it, and how prompts
//! print it.

use std::fmt;

use rusqlite::types::ValueRef;
use serde::{Deserialize, Serialize};

/// One SQLite value in its five storage classes: a cell of a query result, a sample row or a
/// column example of a schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    pub(crate) fn from_sqlite(value: ValueRef<'_>) -> Self {
        match value {
            ValueRef::Null => Self::Null,
            ValueRef::Integer(i) => Self::Integer(i),
            ValueRef::Real(f) => Self::Real(f),
            // Some Spider databases hold Latin-1 text; a lossy decode keeps the row instead of
            // failing the whole schema.
            ValueRef::Text(bytes) => Self::Text(String::from_utf8_lossy(bytes).into_owned()),
            ValueRef::Blob(bytes) => Self::Blob(bytes.to_vec()),
        }
    }

    /// Bytes this value counts against the sandbox's byte cap: payload size, with numbers at
    /// their in-memory width. Row overhead is ignored; the cap guards memory, not accounting.
    pub fn size_bytes(&self) -> usize {
        match self {
            Self::Null => 0,
            Self::Integer(_) | Self::Real(_) => 8,
            Self::Text(s) => s.len(),
            Self::Blob(b) => b.len(),
        }
    }

    /// Whether the value is SQL NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }
}

/// Prints the value the way Python's `str()` prints what `sqlite3` returns, because the
/// reference prompt formats were produced by Python code: `None`, `1`, `1.0`, `1e-05`, text as is.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Null => f.write_str("None"),
            Self::Integer(i) => write!(f, "{i}"),
            Self::Real(x) => f.write_str(&python_float(*x)),
            Self::Text(s) => f.write_str(s),
            Self::Blob(bytes) => write!(f, "b'{}'", bytes.escape_ascii()),
        }
    }
}

/// Python's `repr(float)`: shortest round-trip digits, scientific notation outside
/// `1e-4 <= |x| < 1e16`, and always a fractional part otherwise.
fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sci = format!("{x:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if x == 0.0 || (-4..16).contains(&exponent) {
        let plain = format!("{x}");
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}
