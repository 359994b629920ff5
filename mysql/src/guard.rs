//! What a MySQL `READ ONLY` transaction does not stop, refused before a candidate is sent.
//!
//! MySQL refuses writes to tables in such a transaction, but DDL commits it implicitly and then
//! runs; `SELECT ... INTO OUTFILE` / `DUMPFILE` writes a file on the server and `LOAD_FILE`
//! reads one; user-level locks (`GET_LOCK`) and user variables outlive the transaction on a
//! pooled connection; `SLEEP`/`BENCHMARK` hold a connection; MariaDB's sequences advance;
//! `/*! ... */` comments are executed. So a candidate must read as exactly one query (no
//! `SET`, `CALL`, `DO`, `LOCK`, `HANDLER`, `LOAD`, DDL or DML statement) with no `INTO`, no
//! locking clause, no variable, no executable comment and none of the functions below. And it
//! reads only its own database: every table it names is unqualified or qualified with the
//! session's database (exactly as spelled, since whether names fold to lower case is the
//! server's setting), so neither another database nor `information_schema`, `mysql` or
//! `performance_schema` is read, and a function named with another database's prefix is not
//! called. A user with `SELECT` rights on that one database only is still the operator's first
//! line (docs/DEPLOY.md); this is the second.

use std::ops::ControlFlow;

use quorum_sql::lexer::{LexKind, Lexeme, Quoting, lex_with};
use quorum_sql::reads_only::beyond_reading;
use quorum_sql::sandbox::ExecError;
use sqlparser::ast::{Expr, ObjectName, ObjectNamePart, Query, Statement, Visit, Visitor};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

/// Functions refused by exact name (case-blind).
const DENIED_FUNCTIONS: &[&str] = &[
    "sleep",
    "benchmark",
    "get_lock",
    "release_lock",
    "release_all_locks",
    "is_free_lock",
    "is_used_lock",
    "load_file",
    "master_pos_wait",
    "source_pos_wait",
    "master_gtid_wait",
    "wait_for_executed_gtid_set",
    "wait_until_sql_thread_after_gtids",
    "nextval",
    "setval",
    "lastval",
    "sys_exec",
    "sys_eval",
    "last_insert_id",
];

/// Words that have no place in a read-only query, whatever surrounds them.
const DENIED_WORDS: &[&str] = &["into", "outfile", "dumpfile"];

fn denied(what: impl Into<String>) -> ExecError {
    ExecError::Denied { what: what.into() }
}

/// Refuses `sql` unless it is one plain query (a trailing `;` removed by the caller) that reads
/// only `database`.
pub fn check_query(sql: &str, database: &str) -> Result<(), ExecError> {
    let lexemes: Vec<Lexeme> = lex_with(sql, Quoting::MySql);
    for lexeme in &lexemes {
        let text = lexeme.text(sql);
        if lexeme.kind == LexKind::Comment && (text.starts_with("/*!") || text.starts_with("/*M!"))
        {
            return Err(denied("executable comments (/*! ... */) are not accepted"));
        }
    }
    let code: Vec<&Lexeme> = lexemes
        .iter()
        .filter(|l| l.kind != LexKind::Comment)
        .collect();
    for (i, lexeme) in code.iter().enumerate() {
        let text = lexeme.text(sql);
        let next = code.get(i + 1).map(|l| l.text(sql));
        match lexeme.kind {
            LexKind::Symbol if text == ";" => return Err(ExecError::MultipleStatements),
            LexKind::Symbol if text == "@" => {
                return Err(denied("user and system variables are not accepted"));
            }
            LexKind::Symbol if text == ":" && next == Some("=") => {
                return Err(denied("assignments (:=) are not accepted"));
            }
            LexKind::Word => {
                let word = text.to_ascii_lowercase();
                if DENIED_WORDS.contains(&word.as_str()) {
                    return Err(denied(format!(
                        "{} has no place in a read-only query",
                        word.to_ascii_uppercase()
                    )));
                }
                if next == Some("(") && DENIED_FUNCTIONS.contains(&word.as_str()) {
                    return Err(denied(format!(
                        "the function {word}() acts outside a read-only query"
                    )));
                }
                let next_word = next.map(str::to_ascii_lowercase);
                let locking = matches!(
                    (word.as_str(), next_word.as_deref()),
                    ("for", Some("update" | "share")) | ("lock", Some("in"))
                );
                if locking {
                    return Err(denied("locking reads are not accepted"));
                }
                if (word == "next" || word == "previous") && next_word.as_deref() == Some("value") {
                    return Err(denied("sequences are not read or advanced"));
                }
            }
            _ => {}
        }
    }
    let statements = Parser::parse_sql(&MySqlDialect {}, sql).map_err(|e| ExecError::Syntax {
        message: format!("cannot be read as one MySQL query: {e}"),
    })?;
    match statements.as_slice() {
        [] => Err(ExecError::Empty),
        [Statement::Query(query)] => {
            let mut reads = ReadsOnly { database };
            match query.visit(&mut reads) {
                ControlFlow::Continue(()) => Ok(()),
                ControlFlow::Break(what) => Err(denied(what)),
            }
        }
        [_] => Err(denied("only a query (SELECT) runs")),
        _ => Err(ExecError::MultipleStatements),
    }
}

/// Finds what a query could do besides reading its own database: a data-changing body, a
/// locking clause, an `INTO`, a table or function of another database.
struct ReadsOnly<'a> {
    database: &'a str,
}

impl ReadsOnly<'_> {
    /// Whether `name` (a table's or a function's) lies in the session's database: one part, or
    /// two whose first is the database exactly.
    fn in_own_database(&self, name: &ObjectName) -> bool {
        match name.0.as_slice() {
            [ObjectNamePart::Identifier(_)] => true,
            [
                ObjectNamePart::Identifier(db),
                ObjectNamePart::Identifier(_),
            ] => db.value == self.database,
            _ => false,
        }
    }
}

impl Visitor for ReadsOnly<'_> {
    type Break = String;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        match beyond_reading(query) {
            Some(what) => ControlFlow::Break(what.into()),
            None => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<String> {
        if self.in_own_database(relation) {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(format!(
                "{relation} is outside the database {}; a query reads only its own tables",
                self.database
            ))
        }
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<String> {
        match expr {
            Expr::Function(function) if !self.in_own_database(&function.name) => {
                ControlFlow::Break(format!(
                    "the function {} is outside the database {}",
                    function.name, self.database
                ))
            }
            _ => ControlFlow::Continue(()),
        }
    }
}

/// A database name must be a plain identifier: it names the schema every session uses.
pub(crate) fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_a_read_only_transaction_lets_through_is_refused() {
        for sql in [
            "SELECT SLEEP(10)",
            "SELECT benchmark(100000000, md5('x'))",
            "SELECT GET_LOCK('q', 10)",
            "SELECT LOAD_FILE('/etc/passwd')",
            "SELECT * FROM singer INTO OUTFILE '/tmp/x'",
            "SELECT * INTO DUMPFILE '/tmp/x' FROM singer",
            "SELECT name INTO @n FROM singer LIMIT 1",
            "SELECT @n := name FROM singer",
            "SELECT @@global.max_connections",
            "SELECT 1 /*! , SLEEP(5) */",
            "SELECT 1 /*M!100000 , SLEEP(5) */",
            "SELECT * FROM singer FOR UPDATE",
            "SELECT * FROM singer LOCK IN SHARE MODE",
            "SELECT NEXT VALUE FOR s",
            "SELECT nextval(s)",
            "SELECT 1; DROP TABLE singer",
            "DROP TABLE singer",
            "CREATE TEMPORARY TABLE t AS SELECT 1",
            "SET SESSION max_statement_time = 0",
            "CALL p()",
            "DO SLEEP(1)",
            "LOCK TABLES singer READ",
            "HANDLER singer OPEN",
            "INSERT INTO singer VALUES (1)",
            "UPDATE singer SET age = 1",
            "DELETE FROM singer",
            "WITH x AS (SELECT 1) UPDATE singer SET age = 2",
            "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE singer",
            "PREPARE s FROM 'DROP TABLE singer'",
            "SELECT sleep /* c */ (1)",
            "SELECT * FROM mysql.user",
            "SELECT table_name FROM information_schema.tables",
            "SELECT * FROM performance_schema.threads",
            "SELECT name FROM singer WHERE id IN (SELECT id FROM other_db.singer)",
            "WITH x AS (SELECT * FROM other_db.t) SELECT * FROM x",
            "SELECT * FROM singer JOIN sys.version ON 1 = 1",
            "SELECT * FROM `Concert_Singer`.singer",
            "SELECT other_db.f(1) FROM singer",
            "SELECT * FROM a.b.c",
        ] {
            assert!(check_query(sql, "concert_singer").is_err(), "{sql}");
        }
    }

    #[test]
    fn ordinary_queries_and_look_alikes_in_strings_pass() {
        for sql in [
            "SELECT count(*) FROM singer",
            "SELECT name FROM singer WHERE name = 'into outfile; sleep(1)'",
            "SELECT `update`, `into` FROM t WHERE c = \"@x := 1\"",
            "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.id",
            "SELECT avg(age) FROM singer WHERE country = 'France' GROUP BY country",
            "WITH x AS (SELECT age FROM singer) SELECT max(age) FROM x",
            "SELECT name FROM singer # a comment: SLEEP(1)\nORDER BY age DESC LIMIT 3",
            "SELECT name FROM a UNION SELECT name FROM b",
            "SELECT replace(name, 'a', 'b') FROM singer",
            "SELECT count(*) FROM concert_singer.singer AS s WHERE s.age > 30",
            "SELECT `concert_singer`.`singer`.name FROM `concert_singer`.`singer`",
            "WITH information_schema AS (SELECT 1 AS a) SELECT a FROM information_schema",
            "SELECT concert_singer.f(1)",
        ] {
            assert_eq!(check_query(sql, "concert_singer"), Ok(()), "{sql}");
        }
    }
}
