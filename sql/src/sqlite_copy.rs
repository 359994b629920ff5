//! A SQLite database read for copying into a database server (PostgreSQL, MySQL), so that the
//! same questions can be asked of both and the answers compared database for database.
//!
//! SQLite types values, not columns, so each column's type on the server comes from the values
//! it holds: only integers → an integer column; integers and reals → a double (SQLite computes
//! in binary floating point; a decimal type would round differently); only blobs → bytes; text
//! that is all numbers in their exact printed form → integer or double (SQLite compares such
//! text as numbers); anything else holding text → text, every value as SQLite would print it.
//! A column with no values takes its declared type's family. A foreign key's column takes the
//! family of the column it references when its values allow, so that joins compare like with
//! like. Each server's loader maps the families to its own types.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use crate::schema::{IntrospectOptions, Schema, quote_ident};

/// The kind of column a copy gives a SQLite column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Integer,
    Double,
    Text,
    Bytes,
}

impl Family {
    /// The family of a declared SQLite type, for a column without values.
    fn declared(declared: &str) -> Self {
        let t = declared.to_ascii_lowercase();
        if t.contains("int") {
            Family::Integer
        } else if ["real", "floa", "doub", "num", "dec"]
            .iter()
            .any(|n| t.contains(n))
        {
            Family::Double
        } else {
            Family::Text
        }
    }
}

/// One SQLite value, owned (NUL characters dropped from text: no server stores them in text).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// What a copy into a server kept and what it could not.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LoadReport {
    pub tables: usize,
    pub rows: usize,
    pub foreign_keys: usize,
    /// `table(columns)` of primary keys the data violates.
    pub primary_keys_dropped: Vec<String>,
    /// `table(column) -> table(column)` of foreign keys the server refused.
    pub foreign_keys_skipped: Vec<String>,
}

/// One table's rows and the family of each column.
#[derive(Debug, Clone)]
pub struct TableData {
    pub rows: Vec<Vec<Cell>>,
    pub families: Vec<Family>,
}

/// The database at `path`: its schema (named `db_id`, no samples) and every table's data, in
/// the schema's table order.
pub fn read_sqlite(path: &Path, db_id: &str) -> Result<(Schema, Vec<TableData>), String> {
    let bare = IntrospectOptions {
        sample_rows: 0,
        distinct_examples: 0,
    };
    let schema = Schema::from_sqlite(path, db_id, bare).map_err(|e| e.to_string())?;
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| e.to_string())?;
    let mut data = Vec::with_capacity(schema.tables.len());
    for table in &schema.tables {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {}", quote_ident(&table.name)))
            .map_err(|e| e.to_string())?;
        let n = table.columns.len();
        let rows: Vec<Vec<Cell>> = stmt
            .query_map([], |row| {
                (0..n)
                    .map(|i| {
                        Ok(match row.get_ref(i)? {
                            ValueRef::Null => Cell::Null,
                            ValueRef::Integer(v) => Cell::Integer(v),
                            ValueRef::Real(v) => Cell::Real(v),
                            ValueRef::Text(t) => {
                                Cell::Text(String::from_utf8_lossy(t).replace('\0', ""))
                            }
                            ValueRef::Blob(b) => Cell::Blob(b.to_vec()),
                        })
                    })
                    .collect()
            })
            .map_err(|e| e.to_string())?
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        let families = (0..n)
            .map(|i| column_family(&rows, i, &table.columns[i].declared_type))
            .collect();
        data.push(TableData { rows, families });
    }
    harmonize_keys(&schema, &mut data);
    Ok((schema, data))
}

/// Gives each foreign-key column the family of the column it references when every value it
/// holds reads as that family exactly (Spider keeps many integer keys in text columns).
fn harmonize_keys(source: &Schema, data: &mut [TableData]) {
    let position = |table: &str, column: &str| -> Option<(usize, usize)> {
        let t = source
            .tables
            .iter()
            .position(|t| t.name.eq_ignore_ascii_case(table))?;
        let c = source.tables[t]
            .columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(column))?;
        Some((t, c))
    };
    for fk in &source.foreign_keys {
        let (Some((ft, fc)), Some((tt, tc))) = (
            position(&fk.from_table, &fk.from_column),
            position(&fk.to_table, &fk.to_column),
        ) else {
            continue;
        };
        let target = data[tt].families[tc];
        if data[ft].families[fc] == target {
            continue;
        }
        if data[ft].rows.iter().all(|row| fits(&row[fc], target)) {
            data[ft].families[fc] = target;
        }
    }
}

/// Whether `cell` is stored exactly by a column of family `family`.
fn fits(cell: &Cell, family: Family) -> bool {
    match (cell, family) {
        (Cell::Null, _) | (_, Family::Text) => true,
        (Cell::Integer(_), Family::Integer | Family::Double) => true,
        (Cell::Real(_), Family::Double) => true,
        (Cell::Text(s), Family::Integer) => s.parse::<i64>().is_ok_and(|i| i.to_string() == *s),
        (Cell::Text(s), Family::Double) => s
            .parse::<f64>()
            .is_ok_and(|f| f.is_finite() && (format!("{f}") == *s || format!("{f:?}") == *s)),
        (Cell::Blob(_), Family::Bytes) => true,
        _ => false,
    }
}

fn column_family(rows: &[Vec<Cell>], i: usize, declared: &str) -> Family {
    let (mut ints, mut reals, mut texts, mut blobs) = (0, 0, 0, 0);
    for row in rows {
        match row[i] {
            Cell::Null => {}
            Cell::Integer(_) => ints += 1,
            Cell::Real(_) => reals += 1,
            Cell::Text(_) => texts += 1,
            Cell::Blob(_) => blobs += 1,
        }
    }
    match (ints, reals, texts, blobs) {
        (0, 0, 0, 0) => Family::declared(declared),
        (_, 0, 0, 0) => Family::Integer,
        (_, _, 0, 0) => Family::Double,
        (0, 0, 0, _) => Family::Bytes,
        // Numbers kept as text (Spider has many): SQLite compares and averages them as numbers
        // by affinity, a server only if the column is numeric. Exact forms only: `007` stays
        // text.
        (_, _, _, 0) if rows.iter().all(|r| fits(&r[i], Family::Integer)) => Family::Integer,
        (_, _, _, 0) if rows.iter().all(|r| fits(&r[i], Family::Double)) => Family::Double,
        _ => Family::Text,
    }
}

/// SQLite's text for a real (`CAST(x AS TEXT)`): `5.0`, `0.5`, `1.0e+20`-style only far out.
pub fn sqlite_real_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_follow_the_values_a_column_holds() {
        let rows = |cells: Vec<Cell>| cells.into_iter().map(|c| vec![c]).collect::<Vec<_>>();
        let family = |cells: Vec<Cell>, declared: &str| column_family(&rows(cells), 0, declared);
        assert_eq!(
            family(vec![Cell::Integer(1), Cell::Null], "text"),
            Family::Integer
        );
        assert_eq!(
            family(vec![Cell::Integer(1), Cell::Real(0.5)], "int"),
            Family::Double
        );
        assert_eq!(
            family(vec![Cell::Text("12".into())], "text"),
            Family::Integer
        );
        assert_eq!(family(vec![Cell::Text("007".into())], "int"), Family::Text);
        assert_eq!(
            family(vec![Cell::Text("2.5".into())], "text"),
            Family::Double
        );
        assert_eq!(family(vec![Cell::Blob(vec![1])], "blob"), Family::Bytes);
        assert_eq!(family(vec![], "varchar(20)"), Family::Text);
        assert_eq!(family(vec![], "NUMERIC(10,2)"), Family::Double);
        assert_eq!(sqlite_real_text(5.0), "5.0");
        assert_eq!(sqlite_real_text(0.25), "0.25");
    }
}
