//! Defects of a query that runs: shapes no question asks for, whatever the schema.
//!
//! A model that cannot find a join's key sometimes writes `ON T2.Model = T2.Model`. The
//! condition holds on every row (whose value is not NULL), so the join pairs every row of one
//! table with every row of the other; the query still runs, so revision, which looks at
//! errors, never sees it, and its result votes like a real answer. A model that gives up on
//! the data writes a constant answer instead (`SELECT 12.0 FROM cars_data ...`). Both are
//! found here from the query's syntax alone; with the pipeline's `defect_check` such a
//! candidate votes as if it had failed while another ran without a defect.

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, Query, SelectItem, SetExpr, Statement, UnaryOperator, Visit, Visitor,
};
use sqlparser::parser::Parser;

use crate::dialect::Dialect;

/// What makes a query that runs wrong for any question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Defect {
    /// A column compared with itself (`T2.Model = T2.Model`), as written.
    SelfComparison(String),
    /// A result made only of constants while tables are read, as written (`12.0`).
    ConstantAnswer(String),
}

/// The first defect of `sql`, if it parses as one query in `dialect` and has one.
pub fn find_defect(sql: &str, dialect: Dialect) -> Option<Defect> {
    let statements = Parser::parse_sql(dialect.parser().as_ref(), sql).ok()?;
    let [Statement::Query(query)] = statements.as_slice() else {
        return None;
    };
    self_comparison(query)
        .map(Defect::SelfComparison)
        .or_else(|| constant_answer(&query.body).map(Defect::ConstantAnswer))
}

/// The first `x = x` anywhere in the query (joins, filters, subqueries) where `x` is a column
/// name, spelt the same on both sides (names compared without case, as SQL does).
fn self_comparison(query: &Query) -> Option<String> {
    struct Find(Option<String>);
    impl Visitor for Find {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if !matches!(expr, Expr::Nested(_)) && is_self_comparison(expr) {
                self.0 = Some(expr.to_string());
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut find = Find(None);
    let _ = query.visit(&mut find);
    find.0
}

/// Whether `expr` is `x = x` for one column name `x` (through parentheses).
pub(crate) fn is_self_comparison(expr: &Expr) -> bool {
    match expr {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => matches!((column_name(left), column_name(right)), (Some(a), Some(b)) if a == b),
        Expr::Nested(inner) => is_self_comparison(inner),
        _ => false,
    }
}

/// A column reference's lower-cased parts (`t2.model`); `None` for anything else.
pub(crate) fn column_name(expr: &Expr) -> Option<Vec<String>> {
    match expr {
        Expr::Identifier(ident) => Some(vec![ident.value.to_lowercase()]),
        Expr::CompoundIdentifier(parts) => {
            Some(parts.iter().map(|p| p.value.to_lowercase()).collect())
        }
        Expr::Nested(inner) => column_name(inner),
        _ => None,
    }
}

/// The result columns, when every one is a literal and the query reads a table: through
/// parentheses and both sides of a set operation (each side is a result). A subquery's
/// `SELECT 1 FROM ...` (under EXISTS) is not a result and is not looked at.
fn constant_answer(body: &SetExpr) -> Option<String> {
    match body {
        SetExpr::Select(select) => {
            if select.from.is_empty() || select.projection.is_empty() {
                return None;
            }
            let mut items = Vec::new();
            for item in &select.projection {
                let expr = match item {
                    SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => expr,
                    _ => return None,
                };
                if !is_literal(expr) {
                    return None;
                }
                items.push(expr.to_string());
            }
            Some(items.join(", "))
        }
        SetExpr::Query(query) => constant_answer(&query.body),
        SetExpr::SetOperation { left, right, .. } => {
            constant_answer(left).or_else(|| constant_answer(right))
        }
        _ => None,
    }
}

fn is_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Value(_) => true,
        Expr::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::Plus,
            expr,
        } => is_literal(expr),
        Expr::Nested(inner) => is_literal(inner),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spider_fixture::spider;

    fn defect(sql: &str) -> Option<Defect> {
        find_defect(sql, Dialect::Sqlite)
    }

    #[test]
    fn a_column_compared_with_itself_is_a_defect_wherever_it_is() {
        let join = "SELECT DISTINCT T2.Model FROM cars_data AS T1 JOIN model_list AS T2 \
                    ON T2.Model = T2.Model WHERE T1.Year > 1980";
        assert_eq!(
            defect(join),
            Some(Defect::SelfComparison("T2.Model = T2.Model".into()))
        );
        // Case does not make two names different; a filter or a subquery counts too.
        assert!(matches!(
            defect("SELECT a FROM t WHERE t.ID = T.id"),
            Some(Defect::SelfComparison(_))
        ));
        assert!(matches!(
            defect("SELECT a FROM t WHERE a IN (SELECT b FROM u WHERE (c) = c)"),
            Some(Defect::SelfComparison(_))
        ));
    }

    #[test]
    fn a_constant_answer_over_tables_is_a_defect() {
        assert_eq!(
            defect("SELECT 12.0 FROM cars_data AS cd WHERE cd.Year = 1970"),
            Some(Defect::ConstantAnswer("12.0".into()))
        );
        assert_eq!(
            defect("SELECT 'x' AS a, -2 FROM t UNION SELECT name, 1 FROM u"),
            Some(Defect::ConstantAnswer("'x', -2".into()))
        );
    }

    #[test]
    fn ordinary_queries_have_no_defect() {
        for sql in [
            // Two aliases of one table: a self-join, not a self-comparison.
            "SELECT a.name FROM people AS a JOIN people AS b ON a.boss = b.id",
            "SELECT T1.name FROM t AS T1 JOIN u AS T2 ON T1.id = T2.id",
            // A constant beside a column, a constant without tables, EXISTS's SELECT 1.
            "SELECT name, 1 FROM t",
            "SELECT 1",
            "SELECT name FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id)",
            "SELECT count(*) FROM t",
            // Not one query.
            "SELECT FROM WHERE",
            "DELETE FROM t WHERE a = a",
        ] {
            assert_eq!(defect(sql), None, "{sql}");
        }
    }

    /// Spider's reference queries, 8,000 written by people, have no defect but for one
    /// annotation slip: eight train queries on `activity_1` join `ON T2.actid = T2.actid`
    /// (their results are right only because of that database's rows).
    #[test]
    fn spider_gold_queries_have_no_defect_but_one_annotation_slip() {
        let spider = spider();
        let train = spider.train().expect("train.json");
        let dev = spider.dev().expect("dev.json");
        let flagged = |examples: &[crate::dataset::Example]| -> Vec<usize> {
            examples
                .iter()
                .enumerate()
                .filter(|(_, e)| find_defect(&e.query, Dialect::Sqlite).is_some())
                .map(|(i, _)| i)
                .collect()
        };
        assert!(train.len() + dev.len() > 8000);
        assert_eq!(flagged(&dev), Vec::<usize>::new());
        let slips = flagged(&train);
        assert_eq!(slips, (6795..=6802).collect::<Vec<_>>());
        for i in slips {
            assert_eq!(train[i].db_id, "activity_1");
            assert!(
                train[i].query.contains("T2.actid  =  T2.actid"),
                "{}",
                train[i].query
            );
        }
    }
}
