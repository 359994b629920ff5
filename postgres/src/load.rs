//! Copies a SQLite database into a schema of a PostgreSQL server, so that the same questions
//! can be asked of both and the answers compared database for database.
//!
//! Names are folded to lower case, as unquoted names are in PostgreSQL, so that SQL written
//! for the SQLite database (`SELECT PetType FROM Has_Pet`) reads the copy unchanged. SQLite
//! types values, not columns, so each column's PostgreSQL type comes from the values it
//! holds: only integers → `bigint`; integers and reals → `double precision` (SQLite computes
//! in binary floating point; `numeric` would round differently); only blobs → `bytea`;
//! text that is all numbers in their exact printed form → `bigint` or `double precision`
//! (SQLite compares such text as numbers); anything else holding text → `text`, every value
//! as SQLite would print it. A column with no
//! values takes its declared type's family. Primary keys are added when the data satisfies
//! them; foreign keys when PostgreSQL can express them (the referenced columns must be a key),
//! `NOT VALID` so that Spider's dangling references do not block them; the report lists what
//! could not be kept.

use std::io::Write;
use std::path::Path;

use quorum_sql::schema::{IntrospectOptions, Schema};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use crate::error::PgError;
use crate::guard::check_schema_name;
use crate::introspect::quote;

/// What a copy kept and what it could not.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LoadReport {
    pub tables: usize,
    pub rows: usize,
    pub foreign_keys: usize,
    /// `table(columns)` of primary keys the data violates.
    pub primary_keys_dropped: Vec<String>,
    /// `table(column) -> table(column)` of foreign keys PostgreSQL refused.
    pub foreign_keys_skipped: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum PgType {
    Bigint,
    Double,
    Text,
    Bytea,
}

impl PgType {
    fn sql(self) -> &'static str {
        match self {
            PgType::Bigint => "bigint",
            PgType::Double => "double precision",
            PgType::Text => "text",
            PgType::Bytea => "bytea",
        }
    }

    /// The family of a declared SQLite type, for a column without values.
    fn declared(declared: &str) -> Self {
        let t = declared.to_ascii_lowercase();
        if t.contains("int") {
            PgType::Bigint
        } else if ["real", "floa", "doub", "num", "dec"]
            .iter()
            .any(|n| t.contains(n))
        {
            PgType::Double
        } else {
            PgType::Text
        }
    }
}

/// One SQLite value, owned.
enum Cell {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// Replaces schema `schema` of the server with a copy of the SQLite database at `path`.
pub fn load_sqlite(
    client: &mut postgres::Client,
    path: &Path,
    schema: &str,
) -> Result<LoadReport, PgError> {
    check_schema_name(schema)?;
    let load = |what: &str| {
        let what = what.to_owned();
        move |e: postgres::Error| PgError::Load {
            what: what.clone(),
            message: match e.as_db_error() {
                Some(db) => db.message().to_owned(),
                None => e.to_string(),
            },
        }
    };
    let sqlite_err = |e: rusqlite::Error| PgError::Load {
        what: path.display().to_string(),
        message: e.to_string(),
    };
    let bare = IntrospectOptions {
        sample_rows: 0,
        distinct_examples: 0,
    };
    let source = Schema::from_sqlite(path, schema, bare).map_err(|e| PgError::Load {
        what: path.display().to_string(),
        message: e.to_string(),
    })?;
    let conn =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(sqlite_err)?;
    let mut report = LoadReport::default();
    let mut tx = client.transaction().map_err(load("begin"))?;
    let ns = quote(schema);
    tx.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {ns} CASCADE; CREATE SCHEMA {ns}"
    ))
    .map_err(load("schema"))?;
    // Every table's rows and column types first: a foreign key's column takes the type of the
    // column it references when its values allow, so that joins compare like with like.
    let mut data: Vec<(Vec<Vec<Cell>>, Vec<PgType>)> = Vec::with_capacity(source.tables.len());
    for table in &source.tables {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT * FROM {}",
                quorum_sql::schema::quote_ident(&table.name)
            ))
            .map_err(sqlite_err)?;
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
            .map_err(sqlite_err)?
            .collect::<Result<_, _>>()
            .map_err(sqlite_err)?;
        let types: Vec<PgType> = (0..n)
            .map(|i| column_type(&rows, i, &table.columns[i].declared_type))
            .collect();
        data.push((rows, types));
    }
    harmonize_keys(&source, &mut data);
    for (table, (rows, types)) in source.tables.iter().zip(&data) {
        let name = format!("{ns}.{}", quote(&table.name.to_lowercase()));
        let columns: Vec<String> = table
            .columns
            .iter()
            .zip(types)
            .map(|(c, t)| format!("{} {}", quote(&c.name.to_lowercase()), t.sql()))
            .collect();
        tx.batch_execute(&format!("CREATE TABLE {name} ({})", columns.join(", ")))
            .map_err(load(&table.name))?;
        let mut writer = tx
            .copy_in(&format!("COPY {name} FROM STDIN"))
            .map_err(load(&table.name))?;
        let mut line = String::new();
        for row in rows {
            line.clear();
            for (i, (cell, ty)) in row.iter().zip(types).enumerate() {
                if i > 0 {
                    line.push('\t');
                }
                copy_text(cell, *ty, &mut line);
            }
            line.push('\n');
            writer
                .write_all(line.as_bytes())
                .map_err(|e| PgError::Load {
                    what: table.name.clone(),
                    message: e.to_string(),
                })?;
        }
        writer.finish().map_err(load(&table.name))?;
        report.tables += 1;
        report.rows += rows.len();
        if !table.primary_key.is_empty() {
            let key: Vec<String> = table
                .primary_key
                .iter()
                .map(|c| quote(&c.to_lowercase()))
                .collect();
            let mut savepoint = tx.savepoint("pk").map_err(load("savepoint"))?;
            let added = savepoint.batch_execute(&format!(
                "ALTER TABLE {name} ADD PRIMARY KEY ({})",
                key.join(", ")
            ));
            match added {
                Ok(()) => savepoint.commit().map_err(load("savepoint"))?,
                Err(_) => {
                    drop(savepoint);
                    report.primary_keys_dropped.push(format!(
                        "{}({})",
                        table.name,
                        table.primary_key.join(", ")
                    ));
                }
            }
        }
    }
    for fk in &source.foreign_keys {
        let mut savepoint = tx.savepoint("fk").map_err(load("savepoint"))?;
        let added = savepoint.batch_execute(&format!(
            "ALTER TABLE {ns}.{} ADD FOREIGN KEY ({}) REFERENCES {ns}.{} ({}) NOT VALID",
            quote(&fk.from_table.to_lowercase()),
            quote(&fk.from_column.to_lowercase()),
            quote(&fk.to_table.to_lowercase()),
            quote(&fk.to_column.to_lowercase()),
        ));
        match added {
            Ok(()) => {
                savepoint.commit().map_err(load("savepoint"))?;
                report.foreign_keys += 1;
            }
            Err(_) => {
                drop(savepoint);
                report.foreign_keys_skipped.push(format!(
                    "{}({}) -> {}({})",
                    fk.from_table, fk.from_column, fk.to_table, fk.to_column
                ));
            }
        }
    }
    tx.commit().map_err(load("commit"))?;
    Ok(report)
}

/// Gives each foreign-key column the type of the column it references when every value it
/// holds reads as that type exactly (Spider keeps many integer keys in text columns).
fn harmonize_keys(source: &Schema, data: &mut [(Vec<Vec<Cell>>, Vec<PgType>)]) {
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
        let target = data[tt].1[tc];
        if data[ft].1[fc] == target {
            continue;
        }
        let fits = data[ft].0.iter().all(|row| fits(&row[fc], target));
        if fits {
            data[ft].1[fc] = target;
        }
    }
}

/// Whether `cell` is stored exactly by a column of type `ty`.
fn fits(cell: &Cell, ty: PgType) -> bool {
    match (cell, ty) {
        (Cell::Null, _) | (_, PgType::Text) => true,
        (Cell::Integer(_), PgType::Bigint | PgType::Double) => true,
        (Cell::Real(_), PgType::Double) => true,
        (Cell::Text(s), PgType::Bigint) => s.parse::<i64>().is_ok_and(|i| i.to_string() == *s),
        (Cell::Text(s), PgType::Double) => s
            .parse::<f64>()
            .is_ok_and(|f| f.is_finite() && (format!("{f}") == *s || format!("{f:?}") == *s)),
        (Cell::Blob(_), PgType::Bytea) => true,
        _ => false,
    }
}

fn column_type(rows: &[Vec<Cell>], i: usize, declared: &str) -> PgType {
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
        (0, 0, 0, 0) => PgType::declared(declared),
        (_, 0, 0, 0) => PgType::Bigint,
        (_, _, 0, 0) => PgType::Double,
        (0, 0, 0, _) => PgType::Bytea,
        // Numbers kept as text (Spider has many): SQLite compares and averages them as numbers
        // by affinity, PostgreSQL only if the column is numeric. Exact forms only: `007`
        // stays text.
        (_, _, _, 0) if rows.iter().all(|r| fits(&r[i], PgType::Bigint)) => PgType::Bigint,
        (_, _, _, 0) if rows.iter().all(|r| fits(&r[i], PgType::Double)) => PgType::Double,
        _ => PgType::Text,
    }
}

/// Appends `cell` in COPY's text format for a column of type `ty`.
fn copy_text(cell: &Cell, ty: PgType, out: &mut String) {
    match cell {
        Cell::Null => out.push_str("\\N"),
        Cell::Integer(v) => out.push_str(&v.to_string()),
        Cell::Real(v) if ty == PgType::Text => escape(&sqlite_real_text(*v), out),
        Cell::Real(v) if v.is_nan() => out.push_str("NaN"),
        Cell::Real(v) if v.is_infinite() => {
            out.push_str(if *v > 0.0 { "Infinity" } else { "-Infinity" })
        }
        Cell::Real(v) => out.push_str(&format!("{v:?}")),
        Cell::Text(s) => escape(s, out),
        Cell::Blob(b) if ty == PgType::Bytea => {
            out.push_str("\\\\x");
            for byte in b {
                out.push_str(&format!("{byte:02x}"));
            }
        }
        Cell::Blob(b) => escape(&String::from_utf8_lossy(b).replace('\0', ""), out),
    }
}

/// SQLite's text for a real (`CAST(x AS TEXT)`): `5.0`, `0.5`, `1.0e+20`-style only far out.
fn sqlite_real_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

fn escape(s: &str, out: &mut String) {
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
}
