//! What a candidate may ask of DuckDB, checked before it runs.
//!
//! The database is opened read-only with external access off and its configuration locked
//! ([`crate::source`]), so DuckDB itself refuses writes, `COPY`, `ATTACH`, `INSTALL`/`LOAD`,
//! `SET` and any file or URL a query names. This is the first line, and it refuses what the
//! second would only stop late or not at all: more than one statement, anything but a query, a
//! table function (`read_csv('…')`, `glob`, `query('…')`, the catalog's `duckdb_*()`), a table
//! named like a file (`"data.csv"`, which DuckDB would look up on disk), a table outside the
//! database's `main` schema (`information_schema`, `pg_catalog`, another attached catalog), and
//! the functions that read the host or change the session (`getenv`, `setseed`, sequences).

use std::ops::ControlFlow;

use quorum_sql::lexer::{LexKind, Quoting, lex_with};
use quorum_sql::reads_only::beyond_reading;
use quorum_sql::sandbox::ExecError;
use sqlparser::ast::{
    Expr, ObjectName, ObjectNamePart, Query, Statement, TableFactor, Visit, Visitor,
};
use sqlparser::dialect::DuckDbDialect;
use sqlparser::parser::Parser;

/// Scalar functions refused by exact name (case-blind): they read the host, advance a
/// sequence, change the session's random state, or run SQL text of their own.
const DENIED_FUNCTIONS: &[&str] = &[
    "getenv",
    "setseed",
    "nextval",
    "currval",
    "query",
    "query_table",
    "current_setting",
    "read_text",
    "read_blob",
    "glob",
    "sniff_csv",
];

/// Name prefixes of functions that read files or the catalog (`read_csv_auto`,
/// `parquet_metadata`, `duckdb_settings`, `pragma_version`, ...).
const DENIED_PREFIXES: &[&str] = &["read_", "parquet_", "duckdb_", "pragma_", "json_execute"];

/// The one schema a query may name: where DuckDB keeps a database's own tables.
const OWN_SCHEMA: &str = "main";

fn denied(what: impl Into<String>) -> ExecError {
    ExecError::Denied { what: what.into() }
}

fn denied_function(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    DENIED_FUNCTIONS.contains(&name.as_str()) || DENIED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Refuses `sql` unless it is one plain query over the database's own tables (a trailing `;`
/// removed by the caller).
pub fn check_query(sql: &str) -> Result<(), ExecError> {
    let lexemes = lex_with(sql, Quoting::Postgres);
    let code: Vec<_> = lexemes
        .iter()
        .filter(|l| l.kind != LexKind::Comment)
        .collect();
    for (i, lexeme) in code.iter().enumerate() {
        let text = lexeme.text(sql);
        let next = code.get(i + 1).map(|l| l.text(sql));
        match lexeme.kind {
            LexKind::Symbol if text == ";" => return Err(ExecError::MultipleStatements),
            LexKind::Word if next == Some("(") && denied_function(text) => {
                return Err(denied(format!(
                    "the function {}() reaches outside a read-only query",
                    text.to_ascii_lowercase()
                )));
            }
            _ => {}
        }
    }
    let statements = Parser::parse_sql(&DuckDbDialect {}, sql).map_err(|e| ExecError::Syntax {
        message: format!("cannot be read as one DuckDB query: {e}"),
    })?;
    match statements.as_slice() {
        [] => Err(ExecError::Empty),
        [Statement::Query(query)] => match query.visit(&mut OwnTablesOnly) {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(what) => Err(denied(what)),
        },
        [_] => Err(denied("only a query (SELECT) runs")),
        _ => Err(ExecError::MultipleStatements),
    }
}

/// Finds what a query could do besides reading the database's own tables.
struct OwnTablesOnly;

impl Visitor for OwnTablesOnly {
    type Break = String;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        match beyond_reading(query) {
            Some(what) => ControlFlow::Break(what.into()),
            None => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<String> {
        match factor {
            TableFactor::Table { args: Some(_), .. }
            | TableFactor::TableFunction { .. }
            | TableFactor::Function { .. } => ControlFlow::Break(
                "table functions (read_csv, glob, query, ...) are not accepted".into(),
            ),
            _ => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<String> {
        let parts: Option<Vec<&str>> = relation
            .0
            .iter()
            .map(|p| match p {
                ObjectNamePart::Identifier(ident) => Some(ident.value.as_str()),
                ObjectNamePart::Function(_) => None,
            })
            .collect();
        let table = match parts.as_deref() {
            Some([table]) => *table,
            Some([schema, table]) if schema.eq_ignore_ascii_case(OWN_SCHEMA) => *table,
            _ => {
                return ControlFlow::Break(format!(
                    "{relation} is outside the database; a query reads only its own tables"
                ));
            }
        };
        if table.contains(['.', '/', '\\', ':', '*', '?']) {
            return ControlFlow::Break(format!(
                "{relation} reads like a file name; a query reads only the database's tables"
            ));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<String> {
        match expr {
            Expr::Function(function) => {
                let last = function.name.0.last().and_then(ObjectNamePart::as_ident);
                if function.name.0.len() > 1 {
                    ControlFlow::Break(format!(
                        "the function {} is named with a schema; only built-in functions are called",
                        function.name
                    ))
                } else if last.is_some_and(|ident| denied_function(&ident.value)) {
                    ControlFlow::Break(format!(
                        "the function {}() reaches outside a read-only query",
                        function.name
                    ))
                } else {
                    ControlFlow::Continue(())
                }
            }
            _ => ControlFlow::Continue(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_reaches_outside_the_tables_is_refused() {
        for sql in [
            "SELECT * FROM read_csv('/etc/passwd')",
            "SELECT * FROM read_csv_auto('/etc/passwd')",
            "SELECT * FROM read_parquet('s3://bucket/x.parquet')",
            "SELECT * FROM 'data.csv'",
            "SELECT * FROM \"/etc/passwd\"",
            "SELECT * FROM \"other.parquet\"",
            "SELECT * FROM glob('/*')",
            "SELECT * FROM query('DROP TABLE singer')",
            "SELECT * FROM duckdb_settings()",
            "SELECT * FROM duckdb_tables()",
            "SELECT content FROM read_text('/etc/hostname')",
            "SELECT getenv('HOME')",
            "SELECT setseed(0.5)",
            "SELECT nextval('s')",
            "SELECT current_setting('threads')",
            "SELECT * FROM information_schema.tables",
            "SELECT * FROM pg_catalog.pg_class",
            "SELECT * FROM other.main.singer",
            "SELECT name FROM singer WHERE id IN (SELECT id FROM other.singer)",
            "SELECT main.f(1) FROM singer",
            "SELECT 1; DROP TABLE singer",
            "DROP TABLE singer",
            "CREATE TABLE x AS SELECT 1",
            "CREATE TEMP TABLE x AS SELECT * FROM singer",
            "INSERT INTO singer VALUES (1)",
            "UPDATE singer SET age = 1",
            "DELETE FROM singer",
            "COPY singer TO '/tmp/x.csv'",
            "COPY (SELECT 1) TO '/tmp/x.parquet' (FORMAT PARQUET)",
            "ATTACH '/tmp/other.duckdb' AS other",
            "INSTALL httpfs",
            "LOAD httpfs",
            "SET enable_external_access = true",
            "PRAGMA database_list",
            "EXPORT DATABASE '/tmp/out'",
            "CALL pragma_version()",
            "CHECKPOINT",
            "SELECT * FROM singer FOR UPDATE",
            "WITH x AS (SELECT * FROM read_csv('/etc/passwd')) SELECT * FROM x",
        ] {
            assert!(check_query(sql).is_err(), "{sql}");
        }
    }

    #[test]
    fn ordinary_queries_and_look_alikes_in_strings_pass() {
        for sql in [
            "SELECT count(*) FROM singer",
            "SELECT name FROM singer WHERE name = 'read_csv(''/etc/passwd''); DROP TABLE x'",
            "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.id",
            "SELECT avg(age) FROM main.singer WHERE country = 'France' GROUP BY country",
            "WITH x AS (SELECT age FROM singer) SELECT max(age) FROM x",
            "SELECT name FROM a UNION SELECT name FROM b ORDER BY name LIMIT 3",
            "SELECT \"Song Name\" FROM singer -- read_csv('x')",
            "SELECT strftime(d, '%Y') FROM t WHERE d >= DATE '2020-01-01'",
            "SELECT DISTINCT ON (country) name FROM singer ORDER BY country, age",
        ] {
            assert_eq!(check_query(sql), Ok(()), "{sql}");
        }
    }
}
