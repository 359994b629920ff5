//! Copies a SQLite database into a schema of a PostgreSQL server, so that the same questions
//! can be asked of both and the answers compared database for database.
//!
//! Names are folded to lower case, as unquoted names are in PostgreSQL, so that SQL written
//! for the SQLite database (`SELECT PetType FROM Has_Pet`) reads the copy unchanged. Column
//! types come from the values ([`quorum_sql::sqlite_copy`]): `bigint`, `double precision`,
//! `text` or `bytea`. Primary keys are added when the data satisfies them; foreign keys when
//! PostgreSQL can express them (the referenced columns must be a key), `NOT VALID` so that
//! Spider's dangling references do not block them; the report lists what could not be kept.

use std::io::Write;
use std::path::Path;

pub use quorum_sql::sqlite_copy::LoadReport;
use quorum_sql::sqlite_copy::{Cell, Family, read_sqlite, sqlite_real_text};

use crate::error::PgError;
use crate::guard::check_schema_name;
use crate::introspect::quote;

fn pg_type(family: Family) -> &'static str {
    match family {
        Family::Integer => "bigint",
        Family::Double => "double precision",
        Family::Text => "text",
        Family::Bytes => "bytea",
    }
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
    let (source, data) = read_sqlite(path, schema).map_err(|message| PgError::Load {
        what: path.display().to_string(),
        message,
    })?;
    let mut report = LoadReport::default();
    let mut tx = client.transaction().map_err(load("begin"))?;
    let ns = quote(schema);
    tx.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {ns} CASCADE; CREATE SCHEMA {ns}"
    ))
    .map_err(load("schema"))?;
    for (table, table_data) in source.tables.iter().zip(&data) {
        let (rows, types) = (&table_data.rows, &table_data.families);
        let name = format!("{ns}.{}", quote(&table.name.to_lowercase()));
        let columns: Vec<String> = table
            .columns
            .iter()
            .zip(types)
            .map(|(c, t)| format!("{} {}", quote(&c.name.to_lowercase()), pg_type(*t)))
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

/// Appends `cell` in COPY's text format for a column of type `ty`.
fn copy_text(cell: &Cell, ty: Family, out: &mut String) {
    match cell {
        Cell::Null => out.push_str("\\N"),
        Cell::Integer(v) => out.push_str(&v.to_string()),
        Cell::Real(v) if ty == Family::Text => escape(&sqlite_real_text(*v), out),
        Cell::Real(v) if v.is_nan() => out.push_str("NaN"),
        Cell::Real(v) if v.is_infinite() => {
            out.push_str(if *v > 0.0 { "Infinity" } else { "-Infinity" })
        }
        Cell::Real(v) => out.push_str(&format!("{v:?}")),
        Cell::Text(s) => escape(s, out),
        Cell::Blob(b) if ty == Family::Bytes => {
            out.push_str("\\\\x");
            for byte in b {
                out.push_str(&format!("{byte:02x}"));
            }
        }
        Cell::Blob(b) => escape(&String::from_utf8_lossy(b).replace('\0', ""), out),
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
