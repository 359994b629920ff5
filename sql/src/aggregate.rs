//! Aggregate functions: which function names aggregate rows, and finding a call to one
//! anywhere in a query tree. The rewrite rules ask this before they change which rows a query
//! reads (`intersection`, `unused_joins`); the decoding grammar lets an answer call them.

use std::ops::ControlFlow;

use sqlparser::ast::{DuplicateTreatment, Expr, FunctionArguments, Visit, Visitor};

/// Every aggregate an answer may call: SQLite's, with PostgreSQL's `string_agg`.
pub const AGGREGATES: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "total",
    "group_concat",
    "string_agg",
];

/// The aggregates whose value depends on how many rows there are, so a join that repeats or
/// removes rows changes it; `min` and `max` see only which values occur.
pub const ROW_AGGREGATES: &[&str] = &["count", "sum", "avg", "total", "group_concat", "string_agg"];

/// Whether `node` calls, anywhere inside it (subqueries included), a function named in `names`
/// (compared without case, as SQL does).
pub fn calls_any<V: Visit>(node: &V, names: &[&str]) -> bool {
    calls_where(node, names, |_| true)
}

/// Whether `node` calls, anywhere inside it (subqueries included), an aggregate whose value
/// changes when a row is repeated: one of [`ROW_AGGREGATES`] not over DISTINCT values.
/// `count(DISTINCT T1.code)` sees, like `max`, only which values occur.
pub fn counts_repeated_rows<V: Visit>(node: &V) -> bool {
    calls_where(node, ROW_AGGREGATES, |arguments| {
        !matches!(
            arguments,
            FunctionArguments::List(list)
                if list.duplicate_treatment == Some(DuplicateTreatment::Distinct)
        )
    })
}

/// Whether `node` calls a function named in `names` whose arguments pass `accept`.
fn calls_where<V: Visit>(
    node: &V,
    names: &[&str],
    accept: impl Fn(&FunctionArguments) -> bool,
) -> bool {
    struct Find<'n, A> {
        names: &'n [&'n str],
        accept: A,
        found: bool,
    }
    impl<A: Fn(&FunctionArguments) -> bool> Visitor for Find<'_, A> {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if let Expr::Function(function) = expr {
                let name = function.name.to_string();
                if self.names.iter().any(|n| n.eq_ignore_ascii_case(&name))
                    && (self.accept)(&function.args)
                {
                    self.found = true;
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut find = Find {
        names,
        accept,
        found: false,
    };
    let _ = node.visit(&mut find);
    find.found
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::Statement;
    use sqlparser::dialect::SQLiteDialect;
    use sqlparser::parser::Parser;

    fn parse(sql: &str) -> Statement {
        Parser::parse_sql(&SQLiteDialect {}, sql).unwrap().remove(0)
    }

    #[test]
    fn finds_a_call_in_a_subquery_in_any_case() {
        let statement = parse("SELECT name FROM t WHERE x > (SELECT AVG(x) FROM t)");
        assert!(calls_any(&statement, AGGREGATES));
        assert!(calls_any(&statement, ROW_AGGREGATES));
    }

    #[test]
    fn min_and_max_do_not_count_rows() {
        let statement = parse("SELECT max(x), lower(name) FROM t");
        assert!(calls_any(&statement, AGGREGATES));
        assert!(!calls_any(&statement, ROW_AGGREGATES));
        assert!(!calls_any(&parse("SELECT lower(name) FROM t"), AGGREGATES));
    }

    #[test]
    fn an_aggregate_over_distinct_values_does_not_count_repeated_rows() {
        assert!(counts_repeated_rows(&parse("SELECT count(*) FROM t")));
        assert!(counts_repeated_rows(&parse("SELECT sum(x) FROM t")));
        assert!(counts_repeated_rows(&parse(
            "SELECT count(DISTINCT a) FROM t WHERE x > (SELECT avg(x) FROM t)"
        )));
        assert!(!counts_repeated_rows(&parse(
            "SELECT COUNT(DISTINCT T1.code) FROM t AS T1"
        )));
        assert!(!counts_repeated_rows(&parse(
            "SELECT max(x), sum(DISTINCT y) FROM t"
        )));
    }
}
