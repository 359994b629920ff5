//! Groups nobody can tell apart, dropped.
//!
//! "How many Toyota cars were sold in the last 30 days? Return the number of sales and total
//! revenue." is often answered `SELECT COUNT(s.id), SUM(s.sale_price) FROM ... WHERE ...
//! GROUP BY c.make`: one row of totals per make (or per customer, per day), and since the
//! query selects only the totals, nothing in the answer says which row is which. Asked for
//! totals, the user wants one row. Such a query loses its `GROUP BY`: the totals are then over
//! every row the filters keep, and where there was one group (the usual case: the filter named
//! the make) the numbers are the same, except that no rows at all now give one row of zero and
//! NULL rather than none.
//!
//! Only when all of these hold:
//! - the query is one `SELECT` (no set operation) with a `GROUP BY` and no `HAVING`, `ORDER
//!   BY`, `LIMIT` or window function: "the largest number of orders any customer placed" is
//!   `GROUP BY ... ORDER BY COUNT(*) DESC LIMIT 1`, a grouping of the question's own;
//! - every selected item is an aggregate over the rows (`COUNT(*)`, `100.0 * SUM(a) /
//!   COUNT(b)`), with no column outside an aggregate;
//! - the question does not ask per group: none of "each", "per", "every", "all", "respective",
//!   "breakdown", "group".
//!
//! In Spider's 7,000 training queries one gold query has this shape ("the number of followers
//! for each user", which says "each").

use std::ops::ControlFlow;

use sqlparser::ast::{Expr, GroupByExpr, Query, SelectItem, SetExpr, Statement, Visit, Visitor};
use sqlparser::parser::Parser;

use crate::aggregate::AGGREGATES;
use crate::schema::Schema;
use crate::words::tokenize;

/// Question words that ask for one answer per group.
const PER_GROUP_WORDS: &[&str] = &[
    "each",
    "per",
    "every",
    "all",
    "respective",
    "respectively",
    "breakdown",
    "group",
    "grouped",
];

/// `sql` without its `GROUP BY` when it selects only totals of groups it does not name, for a
/// question that does not ask per group; `None` otherwise.
pub fn drop_unlabeled_groups(question: &str, sql: &str, schema: &Schema) -> Option<String> {
    if asks_per_group(question) {
        return None;
    }
    let mut statements = Parser::parse_sql(schema.dialect.parser().as_ref(), sql).ok()?;
    let [Statement::Query(query)] = statements.as_mut_slice() else {
        return None;
    };
    if !selects_only_totals_of_groups(query) {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    select.group_by = GroupByExpr::Expressions(Vec::new(), Vec::new());
    Some(query.to_string())
}

fn asks_per_group(question: &str) -> bool {
    tokenize(question)
        .iter()
        .any(|token| PER_GROUP_WORDS.contains(&token.text.to_lowercase().as_str()))
}

fn selects_only_totals_of_groups(query: &Query) -> bool {
    if query.order_by.is_some() || query.limit_clause.is_some() || query.fetch.is_some() {
        return false;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return false;
    };
    let grouped =
        matches!(&select.group_by, GroupByExpr::Expressions(exprs, _) if !exprs.is_empty());
    if !grouped || select.having.is_some() || select.distinct.is_some() {
        return false;
    }
    !select.projection.is_empty()
        && select.projection.iter().all(|item| match item {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                is_total(expr)
            }
            _ => false,
        })
}

/// Whether `expr` calls an aggregate, reads no column outside one, and uses no window.
fn is_total(expr: &Expr) -> bool {
    let mut finder = Totals::default();
    let _ = expr.visit(&mut finder);
    finder.aggregates > 0 && !finder.bare_column && !finder.window
}

#[derive(Default)]
struct Totals {
    /// How many aggregate calls enclose the node being visited.
    depth: usize,
    aggregates: usize,
    bare_column: bool,
    window: bool,
}

impl Visitor for Totals {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        match expr {
            Expr::Function(function) => {
                if function.over.is_some() {
                    self.window = true;
                }
                let name = function.name.to_string().to_lowercase();
                if AGGREGATES.contains(&name.as_str()) {
                    self.depth += 1;
                    self.aggregates += 1;
                }
            }
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) if self.depth == 0 => {
                self.bare_column = true;
            }
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
                // A subquery's columns are its own; a total beside one is not judged here.
                self.bare_column = true;
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        if let Expr::Function(function) = expr
            && AGGREGATES.contains(&function.name.to_string().to_lowercase().as_str())
        {
            self.depth -= 1;
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;

    fn schema() -> Schema {
        Schema {
            db_id: "car_dealership".into(),
            tables: Vec::new(),
            foreign_keys: Vec::new(),
            dialect: Dialect::Postgres,
        }
    }

    const TOTALS: &str = "How many Toyota cars were sold in the last 30 days? Return the number \
                          of sales and total revenue.";

    #[test]
    fn totals_of_unnamed_groups_lose_the_grouping() {
        let fixed = drop_unlabeled_groups(
            TOTALS,
            "SELECT COUNT(s.id) AS num_sales, SUM(s.sale_price) AS revenue FROM cars c \
             JOIN sales s ON c.id = s.car_id WHERE c.make = 'Toyota' GROUP BY c.make",
            &schema(),
        );
        assert_eq!(
            fixed.as_deref(),
            Some(
                "SELECT COUNT(s.id) AS num_sales, SUM(s.sale_price) AS revenue FROM cars c \
                 JOIN sales s ON c.id = s.car_id WHERE c.make = 'Toyota'"
            )
        );
        let ratio = drop_unlabeled_groups(
            "What share of customers is active?",
            "SELECT 100.0 * COUNT(CASE WHEN status = 'active' THEN 1 END) / COUNT(id) \
             FROM customers GROUP BY country",
            &schema(),
        );
        assert_eq!(
            ratio.as_deref(),
            Some(
                "SELECT 100.0 * COUNT(CASE WHEN status = 'active' THEN 1 END) / COUNT(id) \
                 FROM customers"
            )
        );
    }

    #[test]
    fn groupings_the_question_or_the_query_names_stay() {
        let keep = |question: &str, sql: &str| {
            assert_eq!(
                drop_unlabeled_groups(question, sql, &schema()),
                None,
                "{sql}"
            );
        };
        // The group is selected.
        keep(TOTALS, "SELECT make, COUNT(*) FROM cars GROUP BY make");
        // The question asks per group.
        keep(
            "Find the number of followers for each user.",
            "SELECT count(*) FROM follows GROUP BY f1",
        );
        // The grouping serves an ordering or a limit, or a HAVING filters the groups.
        keep(
            "What is the largest number of sales of a salesperson?",
            "SELECT COUNT(*) FROM sales GROUP BY salesperson_id ORDER BY COUNT(*) DESC LIMIT 1",
        );
        keep(
            TOTALS,
            "SELECT COUNT(*) FROM sales GROUP BY car_id HAVING COUNT(*) > 1",
        );
        // A bare column, a window, a set operation, no grouping at all.
        keep(TOTALS, "SELECT COUNT(*) + price FROM sales GROUP BY price");
        keep(
            TOTALS,
            "SELECT SUM(price) - LAG(SUM(price)) OVER (ORDER BY month) FROM sales GROUP BY month",
        );
        keep(
            TOTALS,
            "SELECT COUNT(*) FROM a GROUP BY x UNION SELECT COUNT(*) FROM b GROUP BY y",
        );
        keep(TOTALS, "SELECT COUNT(*) FROM sales");
        keep(TOTALS, "not sql");
    }
}
