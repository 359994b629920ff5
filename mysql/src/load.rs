//! Copies a SQLite database into a database of a MySQL or MariaDB server, so that the same
//! questions can be asked of both and the answers compared database for database.
//!
//! Column types come from the values ([`quorum_sql::sqlite_copy`]): `BIGINT`, `DOUBLE`,
//! `LONGTEXT` or `LONGBLOB`, except that a text column in a key is a `VARCHAR` as long as its
//! longest value (MySQL indexes no unbounded text). Table names are folded to lower case (MySQL
//! compares them case-blind only under `lower_case_table_names`, which
//! `scripts/mariadb-server.sh` sets), and text compares as SQLite compares it, byte for byte
//! with trailing spaces significant (`utf8mb4_nopad_bin`). Primary keys are added when the data satisfies them;
//! foreign keys when MySQL can express them (the referenced columns must be indexed, the types
//! alike), with `foreign_key_checks` off so that Spider's dangling references do not block
//! them; the report lists what could not be kept.

use std::fmt::Write as _;
use std::path::Path;

use mysql::prelude::Queryable;
pub use quorum_sql::sqlite_copy::LoadReport;
use quorum_sql::sqlite_copy::{Cell, Family, TableData, read_sqlite, sqlite_real_text};

use crate::error::MySqlError;
use crate::guard::plain_name;
use crate::introspect::quote;

/// The longest text a key column may hold: 768 characters of four bytes fill InnoDB's
/// 3,072-byte index key.
const MAX_KEY_CHARS: usize = 768;
/// Rows per `INSERT`.
const INSERT_BATCH: usize = 500;

/// Replaces database `database` of the server with a copy of the SQLite database at `path`.
pub fn load_sqlite(
    conn: &mut mysql::Conn,
    path: &Path,
    database: &str,
) -> Result<LoadReport, MySqlError> {
    if !plain_name(database) {
        return Err(MySqlError::BadDatabaseName(database.to_owned()));
    }
    let load = |what: &str| {
        let what = what.to_owned();
        move |e: mysql::Error| MySqlError::Load {
            what: what.clone(),
            message: match e {
                mysql::Error::MySqlError(db) => db.message,
                other => other.to_string(),
            },
        }
    };
    let (source, data) = read_sqlite(path, database).map_err(|message| MySqlError::Load {
        what: path.display().to_string(),
        message,
    })?;
    let db = quote(database);
    conn.query_drop(format!(
        "DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db} CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin; \
         SET SESSION foreign_key_checks = 0, sql_mode = 'NO_ENGINE_SUBSTITUTION'"
    ))
    .map_err(load("database"))?;
    let keyed = |table: &str, column: &str| {
        let t = table.to_lowercase();
        let c = column.to_lowercase();
        let in_pk = source.tables.iter().any(|s| {
            s.name.to_lowercase() == t && s.primary_key.iter().any(|k| k.to_lowercase() == c)
        });
        in_pk
            || source.foreign_keys.iter().any(|fk| {
                (fk.from_table.to_lowercase() == t && fk.from_column.to_lowercase() == c)
                    || (fk.to_table.to_lowercase() == t && fk.to_column.to_lowercase() == c)
            })
    };
    let mut report = LoadReport::default();
    for (table, table_data) in source.tables.iter().zip(&data) {
        let name = format!("{db}.{}", quote(&table.name.to_lowercase()));
        let columns: Vec<String> = table
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let ty = column_type(table_data, i, keyed(&table.name, &c.name));
                format!("{} {ty}", quote(&c.name))
            })
            .collect();
        conn.query_drop(format!(
            "CREATE TABLE {name} ({}) ENGINE = InnoDB",
            columns.join(", ")
        ))
        .map_err(load(&table.name))?;
        for batch in table_data.rows.chunks(INSERT_BATCH) {
            let mut sql = format!("INSERT INTO {name} VALUES ");
            for (r, row) in batch.iter().enumerate() {
                sql.push_str(if r == 0 { "(" } else { ", (" });
                for (i, (cell, family)) in row.iter().zip(&table_data.families).enumerate() {
                    if i > 0 {
                        sql.push_str(", ");
                    }
                    literal(cell, *family, &mut sql);
                }
                sql.push(')');
            }
            conn.query_drop(sql).map_err(load(&table.name))?;
        }
        report.tables += 1;
        report.rows += table_data.rows.len();
        if !table.primary_key.is_empty() {
            let key: Vec<String> = table.primary_key.iter().map(|c| quote(c)).collect();
            let added = conn.query_drop(format!(
                "ALTER TABLE {name} ADD PRIMARY KEY ({})",
                key.join(", ")
            ));
            if added.is_err() {
                report.primary_keys_dropped.push(format!(
                    "{}({})",
                    table.name,
                    table.primary_key.join(", ")
                ));
            }
        }
    }
    for fk in &source.foreign_keys {
        let added = conn.query_drop(format!(
            "ALTER TABLE {db}.{} ADD FOREIGN KEY ({}) REFERENCES {db}.{} ({})",
            quote(&fk.from_table.to_lowercase()),
            quote(&fk.from_column),
            quote(&fk.to_table.to_lowercase()),
            quote(&fk.to_column),
        ));
        match added {
            Ok(()) => report.foreign_keys += 1,
            Err(_) => report.foreign_keys_skipped.push(format!(
                "{}({}) -> {}({})",
                fk.from_table, fk.from_column, fk.to_table, fk.to_column
            )),
        }
    }
    Ok(report)
}

/// Column `i`'s MySQL type.
fn column_type(data: &TableData, i: usize, keyed: bool) -> String {
    match data.families[i] {
        Family::Integer => "BIGINT".into(),
        Family::Double => "DOUBLE".into(),
        Family::Bytes => "LONGBLOB".into(),
        Family::Text if keyed => {
            let longest = data
                .rows
                .iter()
                .map(|row| match &row[i] {
                    Cell::Null => 0,
                    Cell::Text(s) => s.chars().count(),
                    Cell::Integer(v) => v.to_string().len(),
                    Cell::Real(v) => sqlite_real_text(*v).len(),
                    Cell::Blob(b) => String::from_utf8_lossy(b).chars().count(),
                })
                .max()
                .unwrap_or(0);
            if longest <= MAX_KEY_CHARS {
                format!("VARCHAR({})", longest.max(1))
            } else {
                "LONGTEXT".into()
            }
        }
        Family::Text => "LONGTEXT".into(),
    }
}

/// Appends `cell` as a SQL literal for a column of family `family`.
fn literal(cell: &Cell, family: Family, out: &mut String) {
    match cell {
        Cell::Null => out.push_str("NULL"),
        Cell::Integer(v) if family == Family::Text => string(&v.to_string(), out),
        Cell::Integer(v) => {
            let _ = write!(out, "{v}");
        }
        Cell::Real(v) if family == Family::Text => string(&sqlite_real_text(*v), out),
        // MySQL stores no NaN or infinity.
        Cell::Real(v) if !v.is_finite() => out.push_str("NULL"),
        Cell::Real(v) => {
            let _ = write!(out, "{v:?}");
        }
        // A numeric family holds text only in the exact printed form of its numbers.
        Cell::Text(s) if family != Family::Text => out.push_str(s),
        Cell::Text(s) => string(s, out),
        Cell::Blob(b) if family == Family::Bytes => {
            out.push_str("X'");
            for byte in b {
                let _ = write!(out, "{byte:02x}");
            }
            out.push('\'');
        }
        Cell::Blob(b) => string(&String::from_utf8_lossy(b).replace('\0', ""), out),
    }
}

/// A string literal under MySQL's default `sql_mode` (backslash escapes on).
fn string(s: &str, out: &mut String) {
    out.push('\'');
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("''"),
            c => out.push(c),
        }
    }
    out.push('\'');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_written_for_mysql() {
        let mut out = String::new();
        literal(&Cell::Text("it's a\\b".into()), Family::Text, &mut out);
        assert_eq!(out, "'it''s a\\\\b'");
        out.clear();
        literal(&Cell::Text("12".into()), Family::Integer, &mut out);
        assert_eq!(out, "12");
        out.clear();
        literal(&Cell::Real(5.0), Family::Text, &mut out);
        assert_eq!(out, "'5.0'");
        out.clear();
        literal(&Cell::Blob(vec![0, 255]), Family::Bytes, &mut out);
        assert_eq!(out, "X'00ff'");
        out.clear();
        literal(&Cell::Real(f64::NAN), Family::Double, &mut out);
        assert_eq!(out, "NULL");
    }
}
