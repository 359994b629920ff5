//! Whether a parsed query only reads. A `Statement::Query` is not always a read:
//! `WITH x AS (...) UPDATE ...`, `SELECT ... INTO t` and `SELECT ... FOR UPDATE` parse as
//! queries too. The server backends' guards (MySQL, DuckDB) refuse those by this one rule,
//! applied to every query and subquery they visit.

use sqlparser::ast::{Query, SetExpr};

/// What `query` does besides reading, if anything: a locking clause, or a body that does.
pub fn beyond_reading(query: &Query) -> Option<&'static str> {
    if !query.locks.is_empty() {
        return Some("locking reads are not accepted");
    }
    body_beyond_reading(&query.body)
}

/// What `body` does besides reading, if anything: a data-changing body (`INSERT`, `UPDATE`,
/// `DELETE`, `MERGE` under a `WITH`) or a `SELECT ... INTO`, in either side of a set operation.
fn body_beyond_reading(body: &SetExpr) -> Option<&'static str> {
    match body {
        SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_) => {
            Some("only a query (SELECT) runs")
        }
        SetExpr::Select(select) if select.into.is_some() => {
            Some("SELECT ... INTO has no place in a read-only query")
        }
        SetExpr::SetOperation { left, right, .. } => {
            body_beyond_reading(left).or_else(|| body_beyond_reading(right))
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

    fn query_of(sql: &str) -> Box<Query> {
        match Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .expect("parses")
            .remove(0)
        {
            Statement::Query(query) => query,
            other => panic!("not a query: {other}"),
        }
    }

    #[test]
    fn writes_that_parse_as_queries_are_named() {
        assert!(beyond_reading(&query_of("WITH x AS (SELECT 1) UPDATE t SET a = 1")).is_some());
        assert!(beyond_reading(&query_of("SELECT a INTO b FROM t")).is_some());
        assert!(beyond_reading(&query_of("SELECT 1 UNION SELECT a INTO b FROM t")).is_some());
        assert!(beyond_reading(&query_of("SELECT a FROM t FOR UPDATE")).is_some());
        assert_eq!(
            beyond_reading(&query_of("SELECT a FROM t UNION SELECT b FROM u")),
            None
        );
        assert_eq!(
            beyond_reading(&query_of("WITH x AS (SELECT 1) SELECT * FROM x")),
            None
        );
    }
}
