//! Groups keyed by the row they count for, not by its label.
//!
//! "The names of students who have at least 2 likes" is often answered `... FROM Highschooler
//! AS T1 JOIN Likes AS T2 ON T1.ID = T2.student_id GROUP BY T1.name HAVING COUNT(*) >= 2`:
//! grouped by the name, two students called Jordan are one group with their likes added up. A
//! name or a title labels a row; the table's key tells rows apart. Such a query keeps its
//! grouping and gains the key after it (`GROUP BY T1.name, T1.ID`): where the labels are unique
//! the same groups in the same order (a tie under `ORDER BY ... LIMIT` resolves as before), and
//! one group a row where they are not.
//!
//! Only when all of these hold:
//! - every GROUP BY item is a column of one table, and each is a label: a column whose name
//!   has the word `name` or `title` (`name`, `customer_name`, `Title`);
//! - that table's primary key is one column, not among them, and a join's ON condition
//!   equates it with a column of another table: the table is the "one" side of the rows the
//!   query aggregates;
//! - the SELECT calls an aggregate, and no aggregate reads a column of that table, so what is
//!   counted are the joined rows for each of its rows.
//!
//! A grouping by anything but a label is the question's own ("the top countries by number of
//! invoices", `GROUP BY T2.country`), and so is a count of the table's own rows ("cities with
//! more than one employee", `GROUP BY T1.City HAVING COUNT(T1.Employee_ID) > 1`): both are left
//! alone.

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, GroupByExpr, Ident, Query, Select, SetExpr, Statement, Visit, VisitMut, Visitor,
    VisitorMut,
};
use sqlparser::parser::Parser;

use crate::aggregate::AGGREGATES;
use crate::defect::column_name;
use crate::rules::unused_joins::{key_pairs, named_table, names_column_of, on_condition};
use crate::schema::{Schema, Table};
use crate::words::name_words;

/// `sql` with the key of the table whose labels it groups by added to the GROUP BY; `None`
/// when no grouping changed.
pub fn group_by_key(sql: &str, schema: &Schema) -> Option<String> {
    let mut statements = Parser::parse_sql(schema.dialect.parser().as_ref(), sql).ok()?;
    let [Statement::Query(query)] = statements.as_mut_slice() else {
        return None;
    };
    let mut keyer = Keyer { schema, keyed: 0 };
    let _ = query.visit(&mut keyer);
    (keyer.keyed > 0).then(|| query.to_string())
}

struct Keyer<'a> {
    schema: &'a Schema,
    keyed: usize,
}

impl VisitorMut for Keyer<'_> {
    type Break = ();

    // Every query, subqueries included, passes here once.
    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let order_by: Vec<Expr> = match (query.body.as_ref(), &query.order_by) {
            (SetExpr::Select(_), Some(order_by)) => {
                let mut exprs = Vec::new();
                let _ = order_by.visit(&mut CollectAggregates(&mut exprs));
                exprs
            }
            _ => Vec::new(),
        };
        if let SetExpr::Select(select) = query.body.as_mut()
            && self.key_select(select, &order_by)
        {
            self.keyed += 1;
        }
        ControlFlow::Continue(())
    }
}

impl Keyer<'_> {
    /// Adds the key to the SELECT's GROUP BY when the rules above allow; whether it did.
    fn key_select(&self, select: &mut Select, order_by_aggregates: &[Expr]) -> bool {
        let GroupByExpr::Expressions(grouped, modifiers) = &select.group_by else {
            return false;
        };
        let [from] = select.from.as_slice() else {
            return false;
        };
        if grouped.is_empty() || !modifiers.is_empty() || from.joins.is_empty() {
            return false;
        }
        // The tables of the SELECT by the name each goes by (its alias, else its name).
        let mut tables: Vec<(Ident, &Table)> = Vec::new();
        for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
        {
            let Some(named) = named_table(self.schema, factor) else {
                return false;
            };
            tables.push(named);
        }
        // The one table every grouped column belongs to.
        let mut owner: Option<usize> = None;
        for expr in grouped {
            let Some(path) = column_name(expr) else {
                return false;
            };
            let (index, column) = match path.as_slice() {
                [qualifier, column] => {
                    let Some(i) = tables
                        .iter()
                        .position(|(by, _)| by.value.eq_ignore_ascii_case(qualifier))
                    else {
                        return false;
                    };
                    (i, column)
                }
                [column] => {
                    let mut having =
                        (0..tables.len()).filter(|&i| tables[i].1.column(column).is_some());
                    let (Some(i), None) = (having.next(), having.next()) else {
                        return false;
                    };
                    (i, column)
                }
                _ => return false,
            };
            if owner.is_some_and(|o| o != index) || !is_label(column) {
                return false;
            }
            owner = Some(index);
        }
        let Some(owner) = owner else {
            return false;
        };
        let (by, table) = (&tables[owner].0, tables[owner].1);
        let [key] = table.primary_key.as_slice() else {
            return false;
        };
        let by_lower = by.value.to_lowercase();
        let key_lower = key.to_lowercase();
        if grouped
            .iter()
            .any(|e| column_name(e).is_some_and(|p| p.last().is_some_and(|c| *c == key_lower)))
        {
            return false;
        }
        let joined_by_key = from.joins.iter().any(|join| {
            on_condition(join, true)
                .and_then(key_pairs)
                .is_some_and(|pairs| {
                    pairs.iter().any(|(a, b)| {
                        let mine = |p: &Vec<String>| p[0] == by_lower && p[1] == key_lower;
                        (mine(a) && b[0] != by_lower) || (mine(b) && a[0] != by_lower)
                    })
                })
        });
        if !joined_by_key {
            return false;
        }
        let mut aggregates = Vec::new();
        let _ = Visit::visit(&*select, &mut CollectAggregates(&mut aggregates));
        aggregates.extend(order_by_aggregates.iter().cloned());
        if aggregates.is_empty() || aggregates.iter().any(|a| reads_table(a, &by_lower, table)) {
            return false;
        }
        let key_expr = Expr::CompoundIdentifier(vec![by.clone(), Ident::new(key.clone())]);
        if let GroupByExpr::Expressions(grouped, _) = &mut select.group_by {
            grouped.push(key_expr);
        }
        true
    }
}

/// Whether a column's name labels a row: one of its words is `name` or `title`.
fn is_label(column: &str) -> bool {
    name_words(column)
        .split_whitespace()
        .any(|w| w.eq_ignore_ascii_case("name") || w.eq_ignore_ascii_case("title"))
}

/// Whether `expr` reads a column of the table going by `by`: qualified by that name, or a bare
/// column name the table has.
fn reads_table(expr: &Expr, by: &str, table: &Table) -> bool {
    struct Reads<'a> {
        by: &'a str,
        table: &'a Table,
        found: bool,
    }
    impl Visitor for Reads<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if names_column_of(expr, self.by, self.table) {
                self.found = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut reads = Reads {
        by,
        table,
        found: false,
    };
    let _ = expr.visit(&mut reads);
    reads.found
}

/// Every aggregate call of a node (subqueries included).
struct CollectAggregates<'a>(&'a mut Vec<Expr>);

impl Visitor for CollectAggregates<'_> {
    type Break = ();
    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        if let Expr::Function(function) = expr {
            let name = function.name.to_string();
            if AGGREGATES.iter().any(|a| a.eq_ignore_ascii_case(&name)) {
                self.0.push(expr.clone());
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;
    use crate::prompt::fixture::schema;

    fn keyed(db: &str, sql: &str) -> Option<String> {
        group_by_key(sql, &schema(db))
    }

    #[test]
    fn a_count_of_joined_rows_grouped_by_a_name_is_keyed() {
        assert_eq!(
            keyed(
                "network_1",
                "SELECT DISTINCT T1.name FROM Highschooler AS T1 JOIN Likes AS T2 \
                 ON T1.ID = T2.student_id GROUP BY T1.name HAVING COUNT(T2.liked_id) >= 2"
            )
            .as_deref(),
            Some(
                "SELECT DISTINCT T1.name FROM Highschooler AS T1 JOIN Likes AS T2 \
                 ON T1.ID = T2.student_id GROUP BY T1.name, T1.ID HAVING COUNT(T2.liked_id) >= 2"
            )
        );
        // Unqualified, the count in the ORDER BY, the table joined second.
        assert_eq!(
            keyed(
                "orchestra",
                "SELECT Name FROM orchestra JOIN conductor ON orchestra.Conductor_ID = \
                 conductor.Conductor_ID GROUP BY Name ORDER BY COUNT(*) DESC LIMIT 1"
            )
            .as_deref(),
            Some(
                "SELECT Name FROM orchestra JOIN conductor ON orchestra.Conductor_ID = \
                 conductor.Conductor_ID GROUP BY Name, conductor.Conductor_ID \
                 ORDER BY COUNT(*) DESC LIMIT 1"
            )
        );
    }

    #[test]
    fn groupings_that_are_the_question_s_own_stay() {
        let keep = |db: &str, sql: &str| assert_eq!(keyed(db, sql), None, "{sql}");
        // An attribute, not a label.
        keep(
            "orchestra",
            "SELECT T1.Year_of_Founded FROM orchestra AS T1 JOIN performance AS T2 \
             ON T1.Orchestra_ID = T2.Orchestra_ID GROUP BY T1.Year_of_Founded HAVING COUNT(*) > 1",
        );
        // The table's own rows counted.
        keep(
            "network_1",
            "SELECT T1.name FROM Highschooler AS T1 JOIN Likes AS T2 ON T1.ID = T2.student_id \
             GROUP BY T1.name HAVING COUNT(T1.ID) > 1",
        );
        // Already grouped by the key.
        keep(
            "network_1",
            "SELECT T1.name, COUNT(*) FROM Highschooler AS T1 JOIN Likes AS T2 \
             ON T1.ID = T2.student_id GROUP BY T1.ID",
        );
        // No aggregate: the grouping only removes repeated names.
        keep(
            "network_1",
            "SELECT T1.name FROM Highschooler AS T1 JOIN Likes AS T2 ON T1.ID = T2.student_id \
             GROUP BY T1.name",
        );
        // Not joined by its key.
        keep(
            "network_1",
            "SELECT T1.name, COUNT(*) FROM Highschooler AS T1 JOIN Likes AS T2 \
             ON T1.grade = T2.liked_id GROUP BY T1.name",
        );
        // No join at all.
        keep(
            "network_1",
            "SELECT name, COUNT(*) FROM Highschooler GROUP BY name",
        );
    }

    #[test]
    fn postgres_queries_are_read_in_their_dialect() {
        let mut postgres = schema("network_1");
        postgres.dialect = Dialect::Postgres;
        assert_eq!(
            group_by_key(
                "SELECT T1.name, COUNT(*) FROM Highschooler AS T1 JOIN Likes AS T2 \
                 ON T1.ID = T2.student_id GROUP BY T1.name",
                &postgres
            )
            .as_deref(),
            Some(
                "SELECT T1.name, COUNT(*) FROM Highschooler AS T1 JOIN Likes AS T2 \
                 ON T1.ID = T2.student_id GROUP BY T1.name, T1.ID"
            )
        );
    }
}
