//! Whether a parsed query's bodies only read. A `Statement::Query` is not always a read:
//! `WITH x AS (...) UPDATE ...` and `SELECT ... INTO t` parse as queries too. The server
//! backends' guards (MySQL, DuckDB) refuse those by this one rule.

use sqlparser::ast::SetExpr;

/// What `body` does besides reading, if anything: a data-changing body (`INSERT`, `UPDATE`,
/// `DELETE`, `MERGE` under a `WITH`) or a `SELECT ... INTO`, in either side of a set operation.
pub fn beyond_reading(body: &SetExpr) -> Option<&'static str> {
    match body {
        SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_) => {
            Some("only a query (SELECT) runs")
        }
        SetExpr::Select(select) if select.into.is_some() => {
            Some("SELECT ... INTO has no place in a read-only query")
        }
        SetExpr::SetOperation { left, right, .. } => {
            beyond_reading(left).or_else(|| beyond_reading(right))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use sqlparser::ast::Statement;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    use super::*;

    fn body_of(sql: &str) -> Box<SetExpr> {
        match Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .expect("parses")
            .remove(0)
        {
            Statement::Query(query) => query.body,
            other => panic!("not a query: {other}"),
        }
    }

    #[test]
    fn writes_that_parse_as_queries_are_named() {
        assert!(beyond_reading(&body_of("WITH x AS (SELECT 1) UPDATE t SET a = 1")).is_some());
        assert!(beyond_reading(&body_of("SELECT a INTO b FROM t")).is_some());
        assert!(beyond_reading(&body_of("SELECT 1 UNION SELECT a INTO b FROM t")).is_some());
        assert_eq!(
            beyond_reading(&body_of("SELECT a FROM t UNION SELECT b FROM u")),
            None
        );
        assert_eq!(
            beyond_reading(&body_of("WITH x AS (SELECT 1) SELECT * FROM x")),
            None
        );
    }
}
