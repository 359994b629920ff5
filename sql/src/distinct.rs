//! Spider EX's query preparation: DISTINCT removal and operator repair.
//!
//! test-suite-sql-eval executes both queries with every `DISTINCT` keyword removed unless
//! `--keep_distinct` is given (also inside `count(DISTINCT x)`), so that a prediction is not
//! penalised for a redundant or missing DISTINCT. It drops the keyword token and keeps the text
//! around it. Before that it repairs operators that tokenised predictions split (`> =`).
//!
//! The keyword is found with the forgiving scanner ([`crate::lexer`]) instead of a full parse:
//! removal must also work on SQL that no parser accepts (the database then reports the error),
//! and only bare words count, never the contents of string literals, quoted identifiers or
//! comments.

use serde::{Deserialize, Serialize};

use crate::lexer::{LexKind, lex};

/// Whether Spider EX keeps DISTINCT (the official `--keep_distinct` switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum DistinctMode {
    /// The official default: remove every DISTINCT keyword.
    #[default]
    Strip,
    Keep,
}

/// The SQL text that Spider EX actually executes for `sql`.
pub fn prepare_for_spider_ex(sql: &str, mode: DistinctMode) -> String {
    // The official replacements are plain text substitutions, applied before DISTINCT removal.
    let sql = sql
        .replace("> =", ">=")
        .replace("< =", "<=")
        .replace("! =", "!=");
    match mode {
        DistinctMode::Strip => strip_distinct(&sql),
        DistinctMode::Keep => sql,
    }
}

/// Removes every bare `DISTINCT` keyword (any case), leaving the surrounding text as it was;
/// quoted text and comments are left alone. PostgreSQL's `DISTINCT ON (...)` stays: it picks
/// one row per key rather than dropping duplicates, and the query means nothing without it.
pub fn strip_distinct(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0;
    let lexemes = lex(sql);
    let is_word = |at: usize, word: &str| {
        lexemes.get(at).is_some_and(|l: &crate::lexer::Lexeme| {
            l.kind == LexKind::Word && l.text(sql).eq_ignore_ascii_case(word)
        })
    };
    for (at, lexeme) in lexemes.iter().enumerate() {
        if is_word(at, "distinct") && !is_word(at + 1, "on") {
            out.push_str(&sql[copied..lexeme.start]);
            copied = lexeme.end;
        }
    }
    out.push_str(&sql[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_keyword_everywhere_but_quotes_and_comments() {
        let cases = [
            ("SELECT DISTINCT name FROM t", "SELECT  name FROM t"),
            (
                "select count(distinct name) from t",
                "select count( name) from t",
            ),
            ("SELECT Distinct(a), b FROM t", "SELECT (a), b FROM t"),
            (
                "SELECT DISTINCT ON (k) k, v FROM t ORDER BY k, v",
                "SELECT DISTINCT ON (k) k, v FROM t ORDER BY k, v",
            ),
            (
                "SELECT a FROM t WHERE b = 'distinct'",
                "SELECT a FROM t WHERE b = 'distinct'",
            ),
            ("SELECT \"distinct\" FROM t", "SELECT \"distinct\" FROM t"),
            (
                "SELECT [distinct], `distinct` FROM t",
                "SELECT [distinct], `distinct` FROM t",
            ),
            ("SELECT distinct_id FROM t", "SELECT distinct_id FROM t"),
            (
                "SELECT a -- distinct\nFROM t",
                "SELECT a -- distinct\nFROM t",
            ),
            ("SELECT /* distinct */ a", "SELECT /* distinct */ a"),
            (
                "SELECT 'it''s distinct' , DISTINCT x",
                "SELECT 'it''s distinct' ,  x",
            ),
            (
                "SELECT 'unterminated distinct",
                "SELECT 'unterminated distinct",
            ),
            ("SELECT DISTINCT é FROM t", "SELECT  é FROM t"),
        ];
        for (input, want) in cases {
            assert_eq!(strip_distinct(input), want, "input: {input}");
        }
    }

    #[test]
    fn preparation_repairs_operators_and_honours_the_switch() {
        let sql = "SELECT DISTINCT a FROM t WHERE b > = 3 AND c ! = 2";
        assert_eq!(
            prepare_for_spider_ex(sql, DistinctMode::Strip),
            "SELECT  a FROM t WHERE b >= 3 AND c != 2"
        );
        assert_eq!(
            prepare_for_spider_ex(sql, DistinctMode::Keep),
            "SELECT DISTINCT a FROM t WHERE b >= 3 AND c != 2"
        );
    }
}
