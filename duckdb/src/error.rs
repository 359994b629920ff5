//! DuckDB's errors in Quorum's terms. DuckDB reports errors as text with a class in front
//! (`Binder Error: ...`, `Catalog Error: ...`); name errors are restated the way SQLite words
//! them (`no such column: x`) in front of DuckDB's own text, so that schema repair and
//! revision hints read one phrasing for every backend.

use std::path::PathBuf;
use std::time::Duration;

use quorum_sql::sandbox::ExecError;

/// Why files could not be opened as a database, introspected or written.
#[derive(Debug, thiserror::Error)]
pub enum DuckDbError {
    #[error("cannot open {path:?}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("{what}: {message}")]
    Load { what: String, message: String },
    #[error("{message}")]
    Query { message: String },
}

impl DuckDbError {
    pub(crate) fn query(e: duckdb::Error) -> Self {
        Self::Query {
            message: e.to_string(),
        }
    }

    /// A label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Open { .. } => "open",
            Self::Load { .. } => "load",
            Self::Query { .. } => "query",
        }
    }
}

/// An execution error, classified; `interrupted` when the watchdog stopped the query.
pub(crate) fn exec_error(e: &duckdb::Error, timeout: Duration, interrupted: bool) -> ExecError {
    let message = e.to_string();
    if interrupted || message.contains("INTERRUPT") || message.contains("Interrupted") {
        return ExecError::Timeout { limit: timeout };
    }
    if message.contains("read-only") || message.contains("read only") {
        return ExecError::Denied { what: message };
    }
    if message.contains("external access") || message.contains("lock_configuration") {
        return ExecError::Denied { what: message };
    }
    ExecError::DuckDb {
        message: sqlite_worded(&message),
    }
}

/// `message` with SQLite's wording of a missing column or table in front, when it is one.
fn sqlite_worded(message: &str) -> String {
    let quoted_after = |marker: &str| {
        let rest = &message[message.find(marker)? + marker.len()..];
        let rest = rest.trim_start().strip_prefix('"')?;
        Some(rest[..rest.find('"')?].to_owned())
    };
    if let (Some(table), Some(column)) = (
        quoted_after("Table"),
        quoted_after("does not have a column named"),
    ) {
        return format!("no such column: {table}.{column} ({message})");
    }
    if message.contains("Referenced column")
        && let Some(name) = quoted_after("Referenced column")
    {
        return format!("no such column: {name} ({message})");
    }
    if message.contains("Table with name")
        && let Some(name) = quoted_after("Table with name")
    {
        return format!("no such table: {name} ({message})");
    }
    if let Some(name) = message
        .split("Table with name ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
    {
        return format!("no such table: {name} ({message})");
    }
    message.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_errors_read_as_sqlite_words_them() {
        assert_eq!(
            sqlite_worded(
                "Binder Error: Referenced column \"France\" not found in FROM clause!\nCandidate bindings: \"country\""
            )
            .split(" (")
            .next(),
            Some("no such column: France")
        );
        assert_eq!(
            sqlite_worded(
                "Binder Error: Table \"T1\" does not have a column named \"Fname\"\nCandidate bindings: : \"PetID\""
            )
            .split(" (")
            .next(),
            Some("no such column: T1.Fname")
        );
        assert!(
            sqlite_worded("Catalog Error: Table with name singers does not exist!")
                .starts_with("no such table: singers (")
        );
        assert_eq!(
            sqlite_worded("Parser Error: syntax error at or near \"FORM\""),
            "Parser Error: syntax error at or near \"FORM\""
        );
    }
}
