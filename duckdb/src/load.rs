//! Writes a SQLite database as files, one a table (`<table>.parquet` or `<table>.csv` with a
//! header), so that the same questions can be asked of the files through DuckDB and the answers
//! compared database for database.
//!
//! Column types come from the values ([`quorum_sql::sqlite_copy`]): `BIGINT`, `DOUBLE`,
//! `VARCHAR` or `BLOB`. Parquet keeps them; a CSV file keeps only the text, and DuckDB's
//! reader detects the types again when the folder is opened. Files declare no keys, so none are
//! written.

use std::path::{Path, PathBuf};

use duckdb::Connection;
use duckdb::types::Value as DuckValue;
use quorum_sql::dialect::Dialect;
pub use quorum_sql::sqlite_copy::LoadReport;
use quorum_sql::sqlite_copy::{Cell, Family, read_sqlite, sqlite_real_text};

use crate::error::DuckDbError;
use crate::source::string_literal;

/// The format tables are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    Parquet,
    Csv,
}

impl TableFormat {
    pub fn extension(self) -> &'static str {
        match self {
            TableFormat::Parquet => "parquet",
            TableFormat::Csv => "csv",
        }
    }
}

/// Writes every table of the SQLite database at `path` into the folder `out` (created; files
/// already there for the same tables are replaced).
pub fn write_sqlite_as_files(
    path: &Path,
    out: &Path,
    format: TableFormat,
) -> Result<LoadReport, DuckDbError> {
    let load = |what: &str| {
        let what = what.to_owned();
        move |e: duckdb::Error| DuckDbError::Load {
            what: what.clone(),
            message: e.to_string(),
        }
    };
    let (source, data) = read_sqlite(path, "copy").map_err(|message| DuckDbError::Load {
        what: path.display().to_string(),
        message,
    })?;
    std::fs::create_dir_all(out).map_err(|e| DuckDbError::Load {
        what: out.display().to_string(),
        message: e.to_string(),
    })?;
    let conn = Connection::open_in_memory().map_err(load("DuckDB"))?;
    let mut report = LoadReport::default();
    for (table, table_data) in source.tables.iter().zip(&data) {
        let name = Dialect::DuckDb.quote(&table.name);
        let columns: Vec<String> = table
            .columns
            .iter()
            .zip(&table_data.families)
            .map(|(c, family)| {
                format!(
                    "{} {}",
                    Dialect::DuckDb.quote(&c.name),
                    column_type(*family)
                )
            })
            .collect();
        conn.execute_batch(&format!(
            "DROP TABLE IF EXISTS {name}; CREATE TABLE {name} ({})",
            columns.join(", ")
        ))
        .map_err(load(&table.name))?;
        {
            let mut appender = conn.appender(&table.name).map_err(load(&table.name))?;
            for row in &table_data.rows {
                let values: Vec<DuckValue> = row
                    .iter()
                    .zip(&table_data.families)
                    .map(|(cell, family)| cell_value(cell, *family))
                    .collect();
                appender
                    .append_row(duckdb::appender_params_from_iter(values))
                    .map_err(load(&table.name))?;
            }
            appender.flush().map_err(load(&table.name))?;
        }
        let file: PathBuf = out.join(format!("{}.{}", table.name, format.extension()));
        let file_text = file.to_str().ok_or_else(|| DuckDbError::Load {
            what: file.display().to_string(),
            message: "the path is not UTF-8".into(),
        })?;
        let options = match format {
            TableFormat::Parquet => "FORMAT PARQUET",
            TableFormat::Csv => "FORMAT CSV, HEADER",
        };
        conn.execute_batch(&format!(
            "COPY {name} TO {} ({options})",
            string_literal(file_text)
        ))
        .map_err(load(&table.name))?;
        report.tables += 1;
        report.rows += table_data.rows.len();
    }
    Ok(report)
}

/// Column type of a family.
fn column_type(family: Family) -> &'static str {
    match family {
        Family::Integer => "BIGINT",
        Family::Double => "DOUBLE",
        Family::Text => "VARCHAR",
        Family::Bytes => "BLOB",
    }
}

/// `cell` as a value of a column of family `family`.
fn cell_value(cell: &Cell, family: Family) -> DuckValue {
    match (cell, family) {
        (Cell::Null, _) => DuckValue::Null,
        (Cell::Integer(v), Family::Text) => DuckValue::Text(v.to_string()),
        (Cell::Integer(v), Family::Double) => DuckValue::Double(*v as f64),
        (Cell::Integer(v), _) => DuckValue::BigInt(*v),
        (Cell::Real(v), Family::Text) => DuckValue::Text(sqlite_real_text(*v)),
        (Cell::Real(v), _) => DuckValue::Double(*v),
        // A numeric family holds text only in the exact printed form of its numbers; anything
        // else is passed on as text, for DuckDB to refuse rather than to become a NULL.
        (Cell::Text(s), Family::Integer) => s
            .parse()
            .map_or_else(|_| DuckValue::Text(s.clone()), DuckValue::BigInt),
        (Cell::Text(s), Family::Double) => s
            .parse()
            .map_or_else(|_| DuckValue::Text(s.clone()), DuckValue::Double),
        (Cell::Text(s), _) => DuckValue::Text(s.clone()),
        (Cell::Blob(b), Family::Bytes) => DuckValue::Blob(b.clone()),
        (Cell::Blob(b), _) => DuckValue::Text(String::from_utf8_lossy(b).replace('\0', "")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_take_their_column_family() {
        assert_eq!(
            cell_value(&Cell::Text("12".into()), Family::Integer),
            DuckValue::BigInt(12)
        );
        assert_eq!(
            cell_value(&Cell::Integer(3), Family::Text),
            DuckValue::Text("3".into())
        );
        assert_eq!(
            cell_value(&Cell::Real(5.0), Family::Text),
            DuckValue::Text("5.0".into())
        );
        assert_eq!(
            cell_value(&Cell::Integer(2), Family::Double),
            DuckValue::Double(2.0)
        );
        assert_eq!(
            cell_value(&Cell::Blob(vec![0, 255]), Family::Bytes),
            DuckValue::Blob(vec![0, 255])
        );
    }
}
