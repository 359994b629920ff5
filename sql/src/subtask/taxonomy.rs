//! The benchmarking paper's error taxonomy for a wrong SQL (its section 4.2.1): a *system
//! error* when the database refuses the query, else a *result error*, classified in the order
//! of a query's logic: the tables read (excessive, missing, incorrect), the columns selected
//! (likewise), the join columns, the filter conditions, and finally the data processing
//! (aggregation, calculation, grouping, ordering).
//!
//! The paper decides the first three by rules and the last two with an LLM; here all five are
//! rules, comparing the wrong query's structure with the reference query's: conditions are the
//! WHERE and HAVING conjuncts (names without their table qualifiers, quotes unified), and a
//! wrong result whose tables, selected columns, join columns and conditions all agree with the
//! reference is a data-processing error. A 0.5B model asked the paper's yes/no question about
//! conditions answers little better than chance, and a rule gives the same label every time.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use sqlparser::ast::{
    BinaryOperator, Expr, Query, Select, SelectItem, SetExpr, Statement, Visit, Visitor,
};
use sqlparser::parser::Parser;

use crate::dialect::Dialect;
use crate::linking::tables::{join_condition, referenced_tables_in};

/// How a wrong set of tables or columns differs from the right one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mismatch {
    /// A strict superset of the right ones.
    Excessive,
    /// A strict subset.
    Missing,
    /// Neither.
    Incorrect,
}

impl Mismatch {
    fn of<T: Ord>(wrong: &BTreeSet<T>, right: &BTreeSet<T>) -> Option<Mismatch> {
        if wrong == right {
            None
        } else if wrong.is_superset(right) {
            Some(Mismatch::Excessive)
        } else if wrong.is_subset(right) {
            Some(Mismatch::Missing)
        } else {
            Some(Mismatch::Incorrect)
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Excessive => "excessive",
            Self::Missing => "missing",
            Self::Incorrect => "incorrect",
        }
    }
}

/// Why a query that runs returns the wrong result, by the first part of its logic that
/// differs from the reference query's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultError {
    Tables(Mismatch),
    Columns(Mismatch),
    JoinColumns,
    ConditionFilter,
    DataProcessing,
    /// One of the two queries did not parse, so no part can be compared.
    Unclassified,
}

impl ResultError {
    /// A stable label: `table_missing`, `column_excessive`, `join_columns`, ….
    pub fn name(self) -> String {
        match self {
            Self::Tables(m) => format!("table_{}", m.name()),
            Self::Columns(m) => format!("column_{}", m.name()),
            Self::JoinColumns => "join_columns".into(),
            Self::ConditionFilter => "condition_filter".into(),
            Self::DataProcessing => "data_processing".into(),
            Self::Unclassified => "unclassified".into(),
        }
    }

    /// The error type as the "all error information" strategy states it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Tables(Mismatch::Excessive) => "Table query error: excessive tables.",
            Self::Tables(Mismatch::Missing) => "Table query error: missing tables.",
            Self::Tables(Mismatch::Incorrect) => "Table query error: incorrect tables.",
            Self::Columns(Mismatch::Excessive) => "Column selection error: excessive columns.",
            Self::Columns(Mismatch::Missing) => "Column selection error: missing columns.",
            Self::Columns(Mismatch::Incorrect) => "Column selection error: incorrect columns.",
            Self::JoinColumns => "Join columns error.",
            Self::ConditionFilter => "Condition filter error.",
            Self::DataProcessing => "Data processing error.",
            Self::Unclassified => "Result error.",
        }
    }

    /// The explanation the "with comments" strategy adds (the paper's table 14, in our words):
    /// what is already right, then what is wrong.
    pub fn comment(self) -> &'static str {
        match self {
            Self::Tables(Mismatch::Excessive) => {
                "The query reads the wrong tables: it reads more tables than the question needs."
            }
            Self::Tables(Mismatch::Missing) => {
                "The query reads the wrong tables: the question needs more tables than it reads."
            }
            Self::Tables(Mismatch::Incorrect) => "The query reads the wrong tables.",
            Self::Columns(Mismatch::Excessive) => {
                "The tables are right, but the selected columns are wrong: it selects more columns than the question asks for."
            }
            Self::Columns(Mismatch::Missing) => {
                "The tables are right, but the selected columns are wrong: the question asks for more columns."
            }
            Self::Columns(Mismatch::Incorrect) => {
                "The tables are right, but the selected columns are wrong."
            }
            Self::JoinColumns => {
                "The tables and the selected columns are right, but the JOIN matches the rows of the tables on the wrong columns."
            }
            Self::ConditionFilter => {
                "The tables, the selected columns and the joins are right, but a filter condition is wrong."
            }
            Self::DataProcessing => {
                "The tables, the selected columns, the joins and the filter conditions are right, but the data is processed wrongly (an aggregation, a calculation, the grouping or the ordering)."
            }
            Self::Unclassified => "The query runs, but its result is wrong.",
        }
    }
}

/// The parts of a query the taxonomy compares.
#[derive(Debug, Default)]
struct Shape {
    tables: BTreeSet<String>,
    columns: BTreeSet<String>,
    joins: BTreeSet<(String, String)>,
    conditions: BTreeSet<String>,
}

/// Classifies the result error of `wrong` (which runs, but returns another result than
/// `reference`).
pub fn classify_result_error(wrong: &str, reference: &str, dialect: Dialect) -> ResultError {
    let (Some(wrong), Some(right)) = (shape(wrong, dialect), shape(reference, dialect)) else {
        return ResultError::Unclassified;
    };
    if let Some(m) = Mismatch::of(&wrong.tables, &right.tables) {
        return ResultError::Tables(m);
    }
    if let Some(m) = Mismatch::of(&wrong.columns, &right.columns) {
        return ResultError::Columns(m);
    }
    if wrong.joins != right.joins {
        return ResultError::JoinColumns;
    }
    if wrong.conditions != right.conditions {
        return ResultError::ConditionFilter;
    }
    ResultError::DataProcessing
}

fn shape(sql: &str, dialect: Dialect) -> Option<Shape> {
    let statements = Parser::parse_sql(dialect.parser().as_ref(), sql).ok()?;
    let [Statement::Query(query)] = statements.as_slice() else {
        return None;
    };
    let tables = referenced_tables_in(sql, dialect)
        .ok()?
        .into_iter()
        .map(|t| t.to_lowercase())
        .collect();
    let mut shape = Shape {
        tables,
        ..Shape::default()
    };
    let select = outer_select(query)?;
    for item in &select.projection {
        match item {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                shape.columns.extend(column_names(expr));
            }
            SelectItem::ExprWithAliases { expr, .. } => {
                shape.columns.extend(column_names(expr));
            }
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                shape.columns.insert("*".into());
            }
        }
    }
    for from in &select.from {
        for join in &from.joins {
            if let Some(on) = join_condition(&join.join_operator) {
                shape.joins.extend(equalities(on));
            }
        }
    }
    for clause in select.selection.iter().chain(select.having.iter()) {
        for conjunct in conjuncts(clause) {
            shape.conditions.insert(normalized(&conjunct.to_string()));
        }
    }
    Some(shape)
}

/// The SELECT whose projection is the result: through parentheses and, for a set operation,
/// its left side.
fn outer_select(query: &Query) -> Option<&Select> {
    let mut body = query.body.as_ref();
    loop {
        match body {
            SetExpr::Select(select) => return Some(select),
            SetExpr::Query(q) => body = q.body.as_ref(),
            SetExpr::SetOperation { left, .. } => body = left.as_ref(),
            _ => return None,
        }
    }
}

/// Unqualified, lower-cased names of the columns an expression reads.
fn column_names(expr: &Expr) -> BTreeSet<String> {
    struct Names(BTreeSet<String>);
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> std::ops::ControlFlow<()> {
            match expr {
                Expr::Identifier(ident) => {
                    self.0.insert(ident.value.to_lowercase());
                }
                Expr::CompoundIdentifier(parts) => {
                    if let Some(last) = parts.last() {
                        self.0.insert(last.value.to_lowercase());
                    }
                }
                _ => {}
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut names = Names(BTreeSet::new());
    let _ = expr.visit(&mut names);
    names.0
}

/// The column pairs a join condition equates, each pair in sorted order.
fn equalities(on: &Expr) -> Vec<(String, String)> {
    conjuncts(on)
        .into_iter()
        .filter_map(|c| match c {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } => {
                let a = column_names(left).into_iter().next()?;
                let b = column_names(right).into_iter().next()?;
                Some(if a <= b { (a, b) } else { (b, a) })
            }
            _ => None,
        })
        .collect()
}

fn conjuncts(expr: &Expr) -> Vec<&Expr> {
    match expr {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            let mut all = conjuncts(left);
            all.extend(conjuncts(right));
            all
        }
        Expr::Nested(inner) => conjuncts(inner),
        other => vec![other],
    }
}

/// A condition's text for comparison: names and keywords in lower case, table qualifiers
/// dropped, one kind of quote, no blanks. String literals keep their case: SQLite compares
/// strings case-sensitively, so `'France'` and `'france'` are different conditions.
fn normalized(text: &str) -> String {
    let text = text.replace('"', "'");
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let mut in_string = false;
    for c in text.chars() {
        if c == '\'' {
            in_string = !in_string;
        }
        if !in_string && (c.is_alphanumeric() || c == '_') {
            word.extend(c.to_lowercase());
            continue;
        }
        // A word followed by `.` outside a string is a qualifier: drop both.
        if !in_string && c == '.' && !word.is_empty() && !word.chars().all(|d| d.is_ascii_digit()) {
            word.clear();
            continue;
        }
        out.push_str(&word);
        word.clear();
        if in_string || !c.is_whitespace() {
            out.push(c);
        }
    }
    out.push_str(&word);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(wrong: &str, right: &str) -> String {
        classify_result_error(wrong, right, Dialect::Sqlite).name()
    }

    #[test]
    fn tables_first() {
        let right = "SELECT T1.Name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.Singer_ID = T2.Singer_ID";
        assert_eq!(
            class(
                "SELECT T1.Name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.Singer_ID = T2.Singer_ID JOIN concert AS T3 ON T2.concert_ID = T3.concert_ID",
                right
            ),
            "table_excessive"
        );
        assert_eq!(class("SELECT Name FROM singer", right), "table_missing");
        assert_eq!(class("SELECT Name FROM stadium", right), "table_incorrect");
    }

    #[test]
    fn then_columns_then_joins() {
        let right = "SELECT name, country FROM singer";
        assert_eq!(
            class("SELECT name, country, age FROM singer", right),
            "column_excessive"
        );
        assert_eq!(
            class("SELECT T1.name FROM singer AS T1", right),
            "column_missing"
        );
        assert_eq!(
            class("SELECT name, age FROM singer", right),
            "column_incorrect"
        );
        let joined = "SELECT T1.Name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.Singer_ID = T2.Singer_ID";
        assert_eq!(
            class(
                "SELECT T1.Name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.Singer_ID = T2.concert_ID",
                joined
            ),
            "join_columns"
        );
        // Same pair written the other way round is the same join.
        assert_eq!(
            class(
                "SELECT T1.Name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T2.Singer_ID = T1.Singer_ID WHERE T1.Age > 30",
                joined
            ),
            "condition_filter"
        );
    }

    #[test]
    fn then_conditions_then_processing() {
        let right = "SELECT count(*) FROM singer WHERE country = 'France' AND age > 20";
        assert_eq!(
            class(
                "SELECT count(*) FROM singer AS s WHERE s.age > 20 AND s.country = \"France\"",
                right
            ),
            "data_processing",
            "same conjuncts in another order, qualified and double-quoted"
        );
        assert_eq!(
            class(
                "SELECT count(*) FROM singer WHERE country = 'France'",
                right
            ),
            "condition_filter"
        );
        assert_eq!(
            class(
                "SELECT avg(age) FROM singer GROUP BY country",
                "SELECT max(age) FROM singer GROUP BY country"
            ),
            "data_processing"
        );
        assert_eq!(class("SELECT FROM WHERE", right), "unclassified");
    }

    #[test]
    fn normalization_keeps_strings_and_numbers() {
        assert_eq!(normalized("T1.Name = 'A. Smith'"), "name='A. Smith'");
        assert_ne!(
            normalized("country = 'France'"),
            normalized("COUNTRY = 'france'")
        );
        assert_eq!(
            normalized("Country = \"France\""),
            normalized("country = 'France'")
        );
        assert_eq!(normalized("price > 1.5"), "price>1.5");
    }
}
