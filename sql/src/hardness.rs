//! Spider's hardness classifier (`eval_hardness` in the official evaluation.py), on SQL text.
//!
//! The official function works on the parsed `sql` dict of Spider's own parser. This module
//! parses with sqlparser and rebuilds just the parts of that dict the classifier reads, with its
//! quirks (see text2sql-reference.md, "Spider hardness"):
//! - Only the top-level query counts: subqueries add to component2 (in conditions) or to the
//!   table-unit count (in FROM) but their own clauses are not examined. For a set operation the
//!   top level is its leftmost SELECT, and a trailing ORDER BY / LIMIT belongs to the right-hand
//!   query, as Spider's left-to-right parser assigns it.
//! - Conditions are a flat list joined by `and`/`or` connectors (Spider has no parentheses).
//! - The aggregate count tests element 0 of each unit: for WHERE conditions that is the NOT
//!   flag, for HAVING every connector string counts too; real aggregates in WHERE and HAVING are
//!   not counted.
//! - A column-valued condition (`a = b`) swallows the `or`-joined conditions after it up to the
//!   next `and`: Spider's value parser scans ahead and keeps only the first column.
//! - A SELECT item is aggregated when it begins with an aggregate call (`max(a) - min(a)` counts
//!   once, `a - min(b)` not at all), because Spider reads the aggregate keyword before the value.

use serde::{Deserialize, Serialize};
use sqlparser::ast::{
    BinaryOperator, Expr, GroupByExpr, JoinConstraint, JoinOperator, OrderByKind, Query, Select,
    SelectItem, SetExpr, Statement, TableFactor, TableWithJoins, UnaryOperator,
};
use sqlparser::dialect::{GenericDialect, SQLiteDialect};
use sqlparser::parser::Parser;

/// Spider's four difficulty levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Hardness {
    Easy,
    Medium,
    Hard,
    Extra,
}

impl Hardness {
    pub const ALL: [Hardness; 4] = [
        Hardness::Easy,
        Hardness::Medium,
        Hardness::Hard,
        Hardness::Extra,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Hardness::Easy => "easy",
            Hardness::Medium => "medium",
            Hardness::Hard => "hard",
            Hardness::Extra => "extra",
        }
    }
}

impl std::fmt::Display for Hardness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The three counts `eval_hardness` combines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Components {
    pub component1: usize,
    pub component2: usize,
    pub others: usize,
}

impl Components {
    /// The official decision table, verbatim.
    pub fn hardness(self) -> Hardness {
        let Components {
            component1: c1,
            component2: c2,
            others: o,
        } = self;
        if c1 <= 1 && o == 0 && c2 == 0 {
            Hardness::Easy
        } else if (o <= 2 && c1 <= 1 && c2 == 0) || (c1 <= 2 && o < 2 && c2 == 0) {
            Hardness::Medium
        } else if (o > 2 && c1 <= 2 && c2 == 0)
            || (2 < c1 && c1 <= 3 && o <= 2 && c2 == 0)
            || (c1 <= 1 && o == 0 && c2 <= 1)
        {
            Hardness::Hard
        } else {
            Hardness::Extra
        }
    }
}

/// Spider hardness of `sql`; SQL that cannot be parsed as one query is `Extra`.
pub fn hardness(sql: &str) -> Hardness {
    components(sql).map_or(Hardness::Extra, Components::hardness)
}

/// The classifier's components, or `None` when `sql` is not a single parsable query.
pub fn components(sql: &str) -> Option<Components> {
    let query = parse_query(sql)?;
    let top = TopLevel::of(&query)?;
    Some(top.components())
}

fn parse_query(sql: &str) -> Option<Box<Query>> {
    // SQLite's dialect first since that is what the SQL targets; the generic one accepts a
    // few constructs models borrow from other dialects.
    let statements = Parser::parse_sql(&SQLiteDialect {}, sql)
        .or_else(|_| Parser::parse_sql(&GenericDialect {}, sql))
        .ok()?;
    match <[Statement; 1]>::try_from(statements) {
        Ok([Statement::Query(query)]) => Some(query),
        _ => None,
    }
}

/// The aggregates Spider's classifier counts (its `AGG_OPS`), not every aggregate SQL has
/// (`crate::aggregate`): hardness must match the official evaluator's.
const SPIDER_AGGREGATES: [&str; 5] = ["max", "min", "count", "sum", "avg"];

/// The parts of Spider's top-level `sql` dict that the classifier reads.
struct TopLevel<'q> {
    select: &'q Select,
    /// Whether the query is a set operation (Spider's intersect/union/except field is set).
    set_operation: bool,
    /// ORDER BY expressions, only when they belong to the top SELECT.
    order_by: Vec<&'q Expr>,
    has_limit: bool,
}

impl<'q> TopLevel<'q> {
    fn of(query: &'q Query) -> Option<TopLevel<'q>> {
        match query.body.as_ref() {
            SetExpr::Select(select) => {
                let order_by = match query.order_by.as_ref().map(|o| &o.kind) {
                    Some(OrderByKind::Expressions(items)) => {
                        items.iter().map(|i| &i.expr).collect()
                    }
                    Some(OrderByKind::All(_)) | None => Vec::new(),
                };
                Some(TopLevel {
                    select,
                    set_operation: false,
                    order_by,
                    has_limit: query.limit_clause.is_some(),
                })
            }
            SetExpr::Query(inner) => TopLevel::of(inner),
            SetExpr::SetOperation { .. } => Some(TopLevel {
                select: leftmost_select(query.body.as_ref())?,
                set_operation: true,
                order_by: Vec::new(),
                has_limit: false,
            }),
            _ => None,
        }
    }

    fn components(&self) -> Components {
        let select = self.select;
        let mut from = FromClause::default();
        for twj in &select.from {
            from.add(twj);
        }
        let from_conds = Conditions::of_all(from.on_conditions.iter().copied());
        let where_conds = Conditions::of_all(select.selection.as_ref());
        let having_conds = Conditions::of_all(select.having.as_ref());
        let group_by: &[Expr] = match &select.group_by {
            GroupByExpr::Expressions(exprs, _) => exprs,
            GroupByExpr::All(_) => &[],
        };
        let all_conds = [&from_conds, &where_conds, &having_conds];

        let mut c1 = usize::from(!where_conds.units.is_empty())
            + usize::from(!group_by.is_empty())
            + usize::from(!self.order_by.is_empty())
            + usize::from(self.has_limit)
            + from.table_units.saturating_sub(1);
        c1 += all_conds.iter().map(|c| c.ors).sum::<usize>();
        c1 += all_conds
            .iter()
            .flat_map(|c| &c.units)
            .filter(|u| is_like(u))
            .count();

        let c2 = all_conds
            .iter()
            .flat_map(|c| &c.units)
            .map(|u| nested_selects(u))
            .sum::<usize>()
            + usize::from(self.set_operation);

        let agg = select
            .projection
            .iter()
            .filter(|i| select_item_aggregated(i))
            .count()
            + where_conds.units.iter().filter(|u| is_negated(u)).count()
            + group_by.iter().filter(|e| is_aggregate(e)).count()
            + self
                .order_by
                .iter()
                .map(|e| order_operand_aggregates(e))
                .sum::<usize>()
            + having_conds.ors
            + having_conds.ands
            + having_conds.units.iter().filter(|u| is_negated(u)).count();
        let others = usize::from(agg > 1)
            + usize::from(select.projection.len() > 1)
            + usize::from(where_conds.units.len() > 1)
            + usize::from(group_by.len() > 1);
        Components {
            component1: c1,
            component2: c2,
            others,
        }
    }
}

fn leftmost_select(body: &SetExpr) -> Option<&Select> {
    match body {
        SetExpr::Select(select) => Some(select),
        SetExpr::SetOperation { left, .. } => leftmost_select(left),
        SetExpr::Query(query) => leftmost_select(&query.body),
        _ => None,
    }
}

/// Spider's `from`: every table or subquery is one table unit; the ON conditions of all joins
/// form one condition list.
#[derive(Default)]
struct FromClause<'q> {
    table_units: usize,
    on_conditions: Vec<&'q Expr>,
}

impl<'q> FromClause<'q> {
    fn add(&mut self, twj: &'q TableWithJoins) {
        self.add_factor(&twj.relation);
        for join in &twj.joins {
            self.add_factor(&join.relation);
            if let Some(JoinConstraint::On(cond)) = join_constraint(&join.join_operator) {
                self.on_conditions.push(cond);
            }
        }
    }

    fn add_factor(&mut self, factor: &'q TableFactor) {
        match factor {
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => self.add(table_with_joins),
            _ => self.table_units += 1,
        }
    }
}

fn join_constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c)
        | JoinOperator::Semi(c)
        | JoinOperator::LeftSemi(c)
        | JoinOperator::RightSemi(c)
        | JoinOperator::Anti(c)
        | JoinOperator::LeftAnti(c)
        | JoinOperator::RightAnti(c)
        | JoinOperator::StraightJoin(c)
        | JoinOperator::AsOf { constraint: c, .. } => Some(c),
        _ => None,
    }
}

/// A condition flattened the way Spider's parser sees it: condition units and the and/or
/// connectors between them.
#[derive(Default)]
struct Conditions<'q> {
    units: Vec<&'q Expr>,
    ands: usize,
    ors: usize,
}

/// A condition unit and the connector before it (`None` for the first).
type Link<'q> = (Option<BinaryOperator>, &'q Expr);

impl<'q> Conditions<'q> {
    fn of_all(exprs: impl IntoIterator<Item = &'q Expr>) -> Conditions<'q> {
        let mut links = Vec::new();
        for e in exprs {
            // Spider joins the ON conditions of successive joins with `and`.
            let first = if links.is_empty() {
                None
            } else {
                Some(BinaryOperator::And)
            };
            flatten(e, first, &mut links);
        }
        let mut out = Conditions::default();
        let mut i = 0;
        while i < links.len() {
            let (connector, unit) = &links[i];
            match connector {
                Some(BinaryOperator::Or) => out.ors += 1,
                Some(_) => out.ands += 1,
                None => {}
            }
            out.units.push(unit);
            i += 1;
            // Spider's parse_value reads a column-valued operand by scanning to the next `and`,
            // `,`, `)`, clause or join keyword and keeping only the first column: everything
            // joined by `or` after a column value disappears (e.g. `ON a = b OR a = c`).
            if column_valued(unit) {
                while links
                    .get(i)
                    .is_some_and(|(c, _)| *c == Some(BinaryOperator::Or))
                {
                    i += 1;
                }
            }
        }
        out
    }
}

fn flatten<'q>(e: &'q Expr, connector: Option<BinaryOperator>, out: &mut Vec<Link<'q>>) {
    match e {
        Expr::BinaryOp {
            left,
            op: op @ (BinaryOperator::And | BinaryOperator::Or),
            right,
        } => {
            flatten(left, connector, out);
            flatten(right, Some(op.clone()), out);
        }
        // Spider cannot parse parenthesised conditions; reading through them gives the
        // closest count for predictions that use them.
        Expr::Nested(inner) if is_connective(inner) => flatten(inner, connector, out),
        other => out.push((connector, other)),
    }
}

/// Whether the last value of a condition unit is what Spider's parse_value reads as a column
/// (neither a number, a string nor a subquery).
fn column_valued(unit: &Expr) -> bool {
    let value = match strip_parens(unit) {
        Expr::BinaryOp { right, .. } => right,
        Expr::Like { pattern, .. } | Expr::ILike { pattern, .. } => pattern,
        Expr::Between { high, .. } => high,
        _ => return false,
    };
    match strip_parens(value) {
        Expr::Value(_) | Expr::Subquery(_) => false,
        Expr::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::Plus,
            expr,
        } => !matches!(strip_parens(expr), Expr::Value(_)),
        // Spider's tokenizer reads "…" as a string; the SQLite dialect as an identifier.
        Expr::Identifier(ident) => ident.quote_style != Some('"'),
        _ => true,
    }
}

fn is_connective(e: &Expr) -> bool {
    match e {
        Expr::BinaryOp { op, .. } => matches!(op, BinaryOperator::And | BinaryOperator::Or),
        Expr::Nested(inner) => is_connective(inner),
        _ => false,
    }
}

fn strip_parens(mut e: &Expr) -> &Expr {
    while let Expr::Nested(inner) = e {
        e = inner;
    }
    e
}

fn is_like(unit: &Expr) -> bool {
    match strip_parens(unit) {
        Expr::Like { .. } | Expr::ILike { .. } => true,
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => is_like(expr),
        _ => false,
    }
}

/// Spider's `not_op` flag: `x NOT IN`, `x NOT LIKE`, `x NOT BETWEEN`. `NOT (…)` and
/// `IS NOT NULL`, which Spider's parser rejects, are read as negations too.
fn is_negated(unit: &Expr) -> bool {
    match strip_parens(unit) {
        Expr::InList { negated, .. }
        | Expr::InSubquery { negated, .. }
        | Expr::Between { negated, .. }
        | Expr::Like { negated, .. }
        | Expr::ILike { negated, .. } => *negated,
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            ..
        }
        | Expr::IsNotNull(_) => true,
        _ => false,
    }
}

/// Subqueries among a condition unit's operands (Spider's val1/val2 being a dict).
fn nested_selects(unit: &Expr) -> usize {
    let is_subquery = |e: &Expr| usize::from(matches!(strip_parens(e), Expr::Subquery(_)));
    match strip_parens(unit) {
        Expr::InSubquery { expr, .. } => 1 + is_subquery(expr),
        Expr::Exists { .. } => 1,
        Expr::BinaryOp { left, right, .. } => is_subquery(left) + is_subquery(right),
        Expr::Between {
            expr, low, high, ..
        } => is_subquery(expr) + is_subquery(low) + is_subquery(high),
        Expr::Like { expr, pattern, .. } | Expr::ILike { expr, pattern, .. } => {
            is_subquery(expr) + is_subquery(pattern)
        }
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => nested_selects(expr),
        _ => 0,
    }
}

/// Whether `e` is an aggregate call, as Spider's column unit records it.
fn is_aggregate(e: &Expr) -> bool {
    match strip_parens(e) {
        Expr::Function(f) => {
            let name = f.name.to_string();
            SPIDER_AGGREGATES
                .iter()
                .any(|a| a.eq_ignore_ascii_case(&name))
        }
        _ => false,
    }
}

/// Whether the leftmost operand of an arithmetic expression is an aggregate call: Spider reads a
/// SELECT item's aggregate keyword before its value, so only a leading aggregate counts.
fn begins_with_aggregate(e: &Expr) -> bool {
    match e {
        Expr::BinaryOp { left, op, .. } if is_arithmetic(op) => begins_with_aggregate(left),
        Expr::Function(_) => is_aggregate(e),
        _ => false,
    }
}

fn is_arithmetic(op: &BinaryOperator) -> bool {
    matches!(
        op,
        BinaryOperator::Plus
            | BinaryOperator::Minus
            | BinaryOperator::Multiply
            | BinaryOperator::Divide
            | BinaryOperator::Modulo
    )
}

fn select_item_aggregated(item: &SelectItem) -> bool {
    match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
            begins_with_aggregate(e)
        }
        _ => false,
    }
}

/// Aggregated column units of an ORDER BY value unit: one operand, or both sides of one
/// arithmetic operator.
fn order_operand_aggregates(e: &Expr) -> usize {
    match strip_parens(e) {
        Expr::BinaryOp { left, op, right } if is_arithmetic(op) => {
            usize::from(is_aggregate(left)) + usize::from(is_aggregate(right))
        }
        other => usize::from(is_aggregate(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(c1: usize, c2: usize, o: usize) -> Components {
        Components {
            component1: c1,
            component2: c2,
            others: o,
        }
    }

    #[test]
    fn components_of_typical_queries() {
        let cases = [
            ("SELECT count(*) FROM singer", c(0, 0, 0), Hardness::Easy),
            (
                "SELECT name, age FROM singer ORDER BY age DESC",
                c(1, 0, 1),
                Hardness::Medium,
            ),
            (
                "SELECT T2.name FROM a AS T1 JOIN b AS T2 ON T1.id = T2.id WHERE T1.x = 1 OR T1.y LIKE '%z%'",
                c(4, 0, 1),
                Hardness::Extra,
            ),
            (
                "SELECT name FROM t WHERE id NOT IN (SELECT id FROM u)",
                c(1, 1, 0),
                Hardness::Hard,
            ),
            (
                "SELECT name FROM t WHERE a = 1 INTERSECT SELECT name FROM t WHERE b = 2 ORDER BY name",
                c(1, 1, 0),
                Hardness::Hard,
            ),
            (
                "SELECT a, count(*) FROM t GROUP BY a HAVING count(*) > 1 AND sum(b) > 2",
                c(1, 0, 2),
                Hardness::Medium,
            ),
            (
                "SELECT max(a) - min(a), avg(b) FROM t",
                c(0, 0, 2),
                Hardness::Medium,
            ),
            (
                "SELECT x FROM (SELECT a AS x FROM t WHERE a > 1 ORDER BY a)",
                c(0, 0, 0),
                Hardness::Easy,
            ),
        ];
        for (sql, want, level) in cases {
            assert_eq!(components(sql), Some(want), "{sql}");
            assert_eq!(hardness(sql), level, "{sql}");
        }
    }

    #[test]
    fn unparsable_is_extra() {
        assert_eq!(components("SELEC name FROM t"), None);
        assert_eq!(hardness("SELEC name FROM t"), Hardness::Extra);
        assert_eq!(hardness("SELECT 1; SELECT 2"), Hardness::Extra);
        assert_eq!(hardness("DELETE FROM t"), Hardness::Extra);
    }

    #[test]
    fn decision_table_boundaries() {
        assert_eq!(c(1, 0, 0).hardness(), Hardness::Easy);
        assert_eq!(c(1, 0, 2).hardness(), Hardness::Medium);
        assert_eq!(c(2, 0, 1).hardness(), Hardness::Medium);
        assert_eq!(c(2, 0, 2).hardness(), Hardness::Extra);
        assert_eq!(c(2, 0, 3).hardness(), Hardness::Hard);
        assert_eq!(c(3, 0, 2).hardness(), Hardness::Hard);
        assert_eq!(c(1, 1, 0).hardness(), Hardness::Hard);
        assert_eq!(c(4, 0, 0).hardness(), Hardness::Extra);
        assert_eq!(c(0, 2, 0).hardness(), Hardness::Extra);
    }
}
