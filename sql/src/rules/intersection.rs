//! Questions that ask for what has both of two values, answered by a filter for either.
//!
//! "Stadiums that had concerts in both 2014 and 2015" asks for the stadiums in two sets at
//! once. Small models write one filter for it instead: `WHERE c.Year IN (2014, 2015)` (or
//! `c.Year = 2014 OR c.Year = 2015`), which answers "in either year", or `WHERE
//! c.Year = 2014 AND c.Year = 2015`, which no row can satisfy. The query runs, so revision
//! never sees it.
//!
//! The rewrite runs the query twice, once with each value, and keeps the rows both give:
//! `SELECT ... WHERE c.Year = 2014 INTERSECT SELECT ... WHERE c.Year = 2015`. It applies
//! when
//! - the query filters one column to two literal values, either of them (`IN`, `OR`) or
//!   both at once (two `=` conjuncts of one `AND`), anywhere in it (a subquery's filter is
//!   rewritten in the whole query, so the outer rows are those both values reach);
//! - the question writes both values, for an either-filter joined by "and" (not "or")
//!   within a few words;
//! - the query is one plain `SELECT` without `GROUP BY`, `HAVING`, `ORDER BY` or `LIMIT`,
//!   whose result is rows, or one `count` of a column (counted over the intersection).
//!
//! How sure the rewrite is depends on the question's words. With "both" before the values,
//! or for a conjunction no row satisfies, the intersection is the answer even when it is
//! empty. "A and B" alone sometimes means either ("orders from Germany and France"): then
//! the intersection is taken only when it finds something (rows, or a count above zero).
//! Spider's reference queries, written by people, agree: of the training questions that name
//! two values of one column joined by "and", 132 are answered with `INTERSECT` and 3 with a
//! filter for either (two of them a `sum` or `avg`, which the rule leaves alone).

use std::ops::ControlFlow;

use sqlparser::ast::{
    self, BinaryOperator, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, Query, SelectItem, SetExpr, Statement, Visit, Visitor,
    visit_expressions_mut,
};
use sqlparser::parser::Parser;

use crate::aggregate::{AGGREGATES, calls_any};
use crate::defect::column_name;
use crate::dialect::Dialect;
use crate::sandbox::QueryResult;
use crate::value::Value;

/// A query rewritten as the intersection of its two single-value queries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intersection {
    pub sql: String,
    /// The question said "both" (or the query asked one row for both values): the
    /// intersection answers it even when empty. Otherwise it is the answer only if it finds
    /// something.
    pub even_if_empty: bool,
    /// The result is the count of the intersection, one row.
    counted: bool,
}

impl Intersection {
    /// Whether the rewrite's result answers the question in place of the original query's.
    pub fn answers(&self, result: &QueryResult) -> bool {
        if self.even_if_empty {
            return true;
        }
        match (
            self.counted,
            result.rows.first().and_then(|row| row.first()),
        ) {
            (false, _) => !result.rows.is_empty(),
            (true, Some(Value::Integer(n))) => *n > 0,
            (true, _) => false,
        }
    }
}

/// `sql` rewritten as the intersection of its two single-value queries, when `question` asks
/// for what has both values and `sql` filters for either (or for both in one row); `None`
/// when the rule does not apply.
pub fn as_intersection(question: &str, sql: &str, dialect: Dialect) -> Option<Intersection> {
    let statements = Parser::parse_sql(dialect.parser().as_ref(), sql).ok()?;
    let [Statement::Query(query)] = statements.as_slice() else {
        return None;
    };
    let shape = result_shape(query)?;
    let asked = Asked {
        question: &question.to_lowercase(),
        // SQLite reads `"English"` as a string when no column has that name, and models
        // write it so; PostgreSQL and DuckDB read it as a column, always.
        quoted_words_are_strings: !dialect.double_quotes_name(),
    };
    let site = the_site(query, &asked)?;
    let [first, second] = site.queries(query)?;
    let sql = match shape {
        Shape::Rows => format!("{first} INTERSECT {second}"),
        Shape::Count => {
            format!("SELECT COUNT(*) FROM ({first} INTERSECT {second}) AS both_values")
        }
    };
    Some(Intersection {
        sql,
        even_if_empty: site.even_if_empty,
        counted: matches!(shape, Shape::Count),
    })
}

/// What the query returns, when the rule may rewrite it.
enum Shape {
    /// Rows of the filtered tables: intersected as they are.
    Rows,
    /// `count(x)` or `count(DISTINCT x)`: the rows of `x` are intersected, then counted.
    Count,
}

fn result_shape(query: &Query) -> Option<Shape> {
    if query.with.is_some()
        || query.order_by.is_some()
        || query.limit_clause.is_some()
        || query.fetch.is_some()
    {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let grouped = match &select.group_by {
        GroupByExpr::All(_) => true,
        GroupByExpr::Expressions(exprs, _) => !exprs.is_empty(),
    };
    if grouped || select.having.is_some() || select.projection.is_empty() {
        return None;
    }
    let exprs: Vec<&Expr> = select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => Some(expr),
            _ => None,
        })
        .collect::<Option<_>>()?;
    if !exprs.iter().any(|expr| calls_any(*expr, AGGREGATES)) {
        return Some(Shape::Rows);
    }
    match exprs.as_slice() {
        [only] if counted_column(only).is_some() => Some(Shape::Count),
        _ => None,
    }
}

/// The column of `count(x)` or `count(DISTINCT x)`; `None` for `count(*)` (its rows have no
/// identity to intersect) and anything else.
fn counted_column(expr: &Expr) -> Option<&Expr> {
    let Expr::Function(function) = expr else {
        return None;
    };
    if !function.name.to_string().eq_ignore_ascii_case("count") {
        return None;
    }
    let FunctionArguments::List(list) = &function.args else {
        return None;
    };
    if matches!(list.duplicate_treatment, Some(DuplicateTreatment::All)) {
        return None;
    }
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(column))] => Some(column),
        _ => None,
    }
}

/// Where the query filters one column to two values.
#[derive(Debug, Clone, PartialEq)]
struct Site {
    /// `c IN (a, b)`, `c = a OR c = b`, or a conjunction holding `c = a` and `c = b`.
    filter: Expr,
    /// What takes its place in each of the two queries: `c = a` and `c = b`, or the
    /// conjunction without `c = b` and without `c = a`.
    each: [Expr; 2],
    /// The column's name and the two values, lower-cased: the same pair found twice (an
    /// `AND` chain's inner links) is one site.
    pair: (Vec<String>, [String; 2]),
    /// See [`Intersection::even_if_empty`].
    even_if_empty: bool,
}

impl Site {
    /// The query with each single-value filter in place of the site.
    fn queries(&self, query: &Query) -> Option<[Query; 2]> {
        let target = self.filter.to_string();
        let rewrite = |replacement: &Expr| -> Option<Query> {
            let mut copy = query.clone();
            let mut replaced = false;
            let _ = visit_expressions_mut(&mut copy, |expr| {
                if !replaced && expr.to_string() == target {
                    *expr = replacement.clone();
                    replaced = true;
                }
                ControlFlow::<()>::Continue(())
            });
            replaced.then_some(copy)
        };
        let counted = |mut query: Query| -> Query {
            if let SetExpr::Select(select) = query.body.as_mut()
                && let [item] = select.projection.as_slice()
                && let SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } = item
                && let Some(column) = counted_column(expr)
            {
                select.projection = vec![SelectItem::UnnamedExpr(column.clone())];
            }
            query
        };
        Some([
            counted(rewrite(&self.each[0])?),
            counted(rewrite(&self.each[1])?),
        ])
    }
}

/// The one site whose values the question names; `None` when there is none, or two with
/// different pairs (which one the question means is not clear).
fn the_site(query: &Query, asked: &Asked<'_>) -> Option<Site> {
    struct Find<'a> {
        asked: &'a Asked<'a>,
        sites: Vec<Site>,
    }
    impl Visitor for Find<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if let Some(site) = site_at(expr, self.asked) {
                self.sites.push(site);
            }
            ControlFlow::Continue(())
        }
    }
    let mut find = Find {
        asked,
        sites: Vec::new(),
    };
    let _ = query.visit(&mut find);
    // Expressions are visited outside in, so an `AND` chain comes before its inner links.
    let mut sites = find.sites.into_iter();
    let first = sites.next()?;
    sites.all(|other| other.pair == first.pair).then_some(first)
}

/// A site rooted at `expr`, if its two values are written in `question` (lower-cased).
fn site_at(expr: &Expr, asked: &Asked<'_>) -> Option<Site> {
    match expr {
        Expr::InList {
            expr: column,
            list,
            negated: false,
        } => {
            column_name(column)?;
            let [a, b] = list.as_slice() else {
                return None;
            };
            either(expr, column, [a, b], asked)
        }
        Expr::BinaryOp {
            op: BinaryOperator::Or,
            ..
        } => {
            let parts = chain(expr, &BinaryOperator::Or);
            let [a, b] = parts.as_slice() else {
                return None;
            };
            let (column_a, value_a) = equality(a, asked)?;
            let (column_b, value_b) = equality(b, asked)?;
            if column_name(column_a) != column_name(column_b) {
                return None;
            }
            either(expr, column_a, [value_a, value_b], asked)
        }
        Expr::BinaryOp {
            op: BinaryOperator::And,
            ..
        } => both(expr, asked),
        _ => None,
    }
}

/// The either-filter site, when the values differ and the question joins them by "and".
fn either(filter: &Expr, column: &Expr, values: [&Expr; 2], asked: &Asked<'_>) -> Option<Site> {
    let texts = [
        asked.literal_text(values[0])?,
        asked.literal_text(values[1])?,
    ];
    let cue = cue(asked.question, &texts)?;
    let equals = |value: &Expr| Expr::BinaryOp {
        left: Box::new(column.clone()),
        op: BinaryOperator::Eq,
        right: Box::new(value.clone()),
    };
    Some(Site {
        filter: filter.clone(),
        each: [equals(values[0]), equals(values[1])],
        pair: pair_of(column, texts)?,
        even_if_empty: cue == Cue::Both,
    })
}

/// The conjunction site: two `=` conjuncts of one column with different values, both written
/// in the question.
fn both(filter: &Expr, asked: &Asked<'_>) -> Option<Site> {
    let question = asked.question;
    let parts = conjuncts(filter);
    for (i, a) in parts.iter().enumerate() {
        let Some((column_a, value_a)) = equality(a, asked) else {
            continue;
        };
        for (j, b) in parts.iter().enumerate().skip(i + 1) {
            let Some((column_b, value_b)) = equality(b, asked) else {
                continue;
            };
            if column_name(column_a) != column_name(column_b) {
                continue;
            }
            let (Some(text_a), Some(text_b)) =
                (asked.literal_text(value_a), asked.literal_text(value_b))
            else {
                continue;
            };
            // No row has both values, whatever asked: the question need only name them.
            if text_a == text_b || !question.contains(&text_a) || !question.contains(&text_b) {
                continue;
            }
            let without = |skip: usize| {
                let kept: Vec<Expr> = parts
                    .iter()
                    .enumerate()
                    .filter(|&(k, _)| k != skip)
                    .map(|(_, e)| (*e).clone())
                    .collect();
                and_of(kept)
            };
            return Some(Site {
                filter: filter.clone(),
                each: [without(j), without(i)],
                pair: pair_of(column_a, [text_a, text_b])?,
                even_if_empty: true,
            });
        }
    }
    None
}

fn pair_of(column: &Expr, mut values: [String; 2]) -> Option<(Vec<String>, [String; 2])> {
    values.sort();
    Some((column_name(column)?, values))
}

/// The operands of a chain of one operator, through parentheses: `a AND (b AND c)` → a, b, c.
fn chain<'e>(expr: &'e Expr, op: &BinaryOperator) -> Vec<&'e Expr> {
    match expr {
        Expr::BinaryOp { left, op: o, right } if o == op => {
            let mut parts = chain(left, op);
            parts.extend(chain(right, op));
            parts
        }
        Expr::Nested(inner) if matches!(inner.as_ref(), Expr::BinaryOp { op: o, .. } if o == op) => {
            chain(inner, op)
        }
        other => vec![other],
    }
}

fn conjuncts(expr: &Expr) -> Vec<&Expr> {
    chain(expr, &BinaryOperator::And)
}

fn and_of(parts: Vec<Expr>) -> Expr {
    let mut parts = parts.into_iter();
    let first = parts.next().expect("a conjunction keeps at least one part");
    parts.fold(first, |left, right| Expr::BinaryOp {
        left: Box::new(left),
        op: BinaryOperator::And,
        right: Box::new(right),
    })
}

/// `column = value` or `value = column`, through parentheses: the column and the value.
fn equality<'e>(expr: &'e Expr, asked: &Asked<'_>) -> Option<(&'e Expr, &'e Expr)> {
    match expr {
        Expr::Nested(inner) => equality(inner, asked),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => {
            if column_name(left).is_some() && asked.literal_text(right).is_some() {
                Some((left, right))
            } else if column_name(right).is_some() && asked.literal_text(left).is_some() {
                Some((right, left))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The question and how the dialect reads what the query writes.
struct Asked<'q> {
    /// Lower-cased.
    question: &'q str,
    /// A double-quoted word is a string where no column has its name (SQLite), not a column.
    quoted_words_are_strings: bool,
}

impl Asked<'_> {
    /// A literal's text, lower-cased: a string, a number, or (where the dialect reads it so)
    /// a double-quoted word.
    fn literal_text(&self, expr: &Expr) -> Option<String> {
        let text = match expr {
            Expr::Value(value) => match &value.value {
                ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
                ast::Value::Number(n, _) => n.to_string(),
                _ => return None,
            },
            Expr::Identifier(ident)
                if self.quoted_words_are_strings && ident.quote_style == Some('"') =>
            {
                ident.value.clone()
            }
            Expr::Nested(inner) => return self.literal_text(inner),
            _ => return None,
        };
        let text = text.trim().to_lowercase();
        (!text.is_empty()).then_some(text)
    }
}

/// How the question joins two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cue {
    /// "both A and B".
    Both,
    /// "A and B", "A and cartoons by B".
    And,
}

/// Words at most between two values joined by "and".
const MAX_WORDS_BETWEEN: usize = 6;

/// How `question` (lower-cased) joins the two values (lower-cased): both written, apart,
/// with "and" and no "or" between them and no "either" before; `Both` when the word "both"
/// comes before them.
fn cue(question: &str, values: &[String; 2]) -> Option<Cue> {
    let [a, b] = values;
    if a == b {
        return None;
    }
    let (start_a, start_b) = (question.find(a.as_str())?, question.find(b.as_str())?);
    let ((first_start, first), second_start) = if start_a < start_b {
        ((start_a, a), start_b)
    } else {
        ((start_b, b), start_a)
    };
    let between = question.get(first_start + first.len()..second_start)?;
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let between = words(between);
    if between.len() > MAX_WORDS_BETWEEN
        || !between.iter().any(|w| w == "and")
        || between.iter().any(|w| w == "or" || w == "either")
    {
        return None;
    }
    let before = words(&question[..first_start]);
    if before.iter().any(|w| w == "either") {
        return None;
    }
    if before.iter().any(|w| w == "both") {
        Some(Cue::Both)
    } else {
        Some(Cue::And)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spider_fixture::spider;

    fn rewrite(question: &str, sql: &str) -> Option<String> {
        as_intersection(question, sql, Dialect::Sqlite).map(|i| i.sql)
    }

    fn even_if_empty(question: &str, sql: &str) -> Option<bool> {
        as_intersection(question, sql, Dialect::Sqlite).map(|i| i.even_if_empty)
    }

    #[test]
    fn an_either_filter_for_a_both_question_becomes_an_intersection() {
        let question = "What are the names and locations of the stadiums that had concerts \
                        that occurred in both 2014 and 2015?";
        let rewritten = |sql: &str| rewrite(question, sql).expect(sql);
        let r#in = "SELECT s.Name, s.Location FROM stadium AS s JOIN concert AS c \
                    ON s.Stadium_ID = c.Stadium_ID WHERE c.Year IN (2014, 2015)";
        assert_eq!(
            rewritten(r#in),
            "SELECT s.Name, s.Location FROM stadium AS s JOIN concert AS c \
             ON s.Stadium_ID = c.Stadium_ID WHERE c.Year = 2014 INTERSECT \
             SELECT s.Name, s.Location FROM stadium AS s JOIN concert AS c \
             ON s.Stadium_ID = c.Stadium_ID WHERE c.Year = 2015"
        );
        let or = "SELECT s.Name FROM stadium AS s JOIN concert AS c ON s.Stadium_ID = \
                  c.Stadium_ID WHERE s.Capacity > 0 AND (c.Year = 2014 OR 2015 = c.Year)";
        assert_eq!(
            rewritten(or),
            "SELECT s.Name FROM stadium AS s JOIN concert AS c ON s.Stadium_ID = \
             c.Stadium_ID WHERE s.Capacity > 0 AND (c.Year = 2014) INTERSECT SELECT s.Name \
             FROM stadium AS s JOIN concert AS c ON s.Stadium_ID = c.Stadium_ID WHERE \
             s.Capacity > 0 AND (c.Year = 2015)"
        );
    }

    #[test]
    fn a_conjunction_no_row_satisfies_becomes_an_intersection_of_its_counted_column() {
        let question = "How many countries speak both English and Dutch?";
        let sql = "SELECT COUNT(DISTINCT T2.CountryCode) FROM country AS T1 JOIN \
                   countrylanguage AS T2 ON T1.Code = T2.CountryCode WHERE \
                   T2.Language = 'English' AND T2.IsOfficial = 1 AND T2.Language = \"Dutch\"";
        assert_eq!(
            rewrite(question, sql).as_deref(),
            Some(
                "SELECT COUNT(*) FROM (SELECT T2.CountryCode FROM country AS T1 JOIN \
                 countrylanguage AS T2 ON T1.Code = T2.CountryCode WHERE \
                 T2.Language = 'English' AND T2.IsOfficial = 1 INTERSECT SELECT \
                 T2.CountryCode FROM country AS T1 JOIN countrylanguage AS T2 ON \
                 T1.Code = T2.CountryCode WHERE T2.IsOfficial = 1 AND T2.Language = \"Dutch\") \
                 AS both_values"
            )
        );
        // Without "both", the same conjunction is still no row's, and still rewritten.
        assert!(rewrite("How many countries speak English and Dutch?", sql).is_some());
        // PostgreSQL reads "Dutch" as a column: there, no conjunction of two values.
        assert_eq!(as_intersection(question, sql, Dialect::Postgres), None);
    }

    #[test]
    fn a_filter_in_a_subquery_is_rewritten_in_the_whole_query() {
        let question = "What is the id of the semester that had both Masters and Bachelors \
                        students enrolled?";
        let sql = "SELECT semester_id FROM Semesters WHERE semester_id IN (SELECT semester_id \
                   FROM Student_Enrolment WHERE degree_program_id IN (SELECT degree_program_id \
                   FROM Degree_Programs WHERE degree_summary_name IN ('Master', 'Bachelor')))";
        let rewritten = rewrite(question, sql).expect("rewritten");
        let (first, second) = rewritten.split_once(" INTERSECT ").expect("two parts");
        assert!(first.starts_with("SELECT semester_id FROM Semesters WHERE"));
        assert!(first.contains("degree_summary_name = 'Master')"), "{first}");
        assert!(
            second.contains("degree_summary_name = 'Bachelor')"),
            "{second}"
        );
    }

    #[test]
    fn how_sure_the_rewrite_is_follows_the_questions_words() {
        let sql = "SELECT owner FROM pets WHERE kind IN ('dog', 'cat')";
        assert_eq!(
            even_if_empty("Which owners have both a dog and a cat?", sql),
            Some(true)
        );
        // "and" alone sometimes means either: the rewrite is taken only if it has rows.
        assert_eq!(
            even_if_empty("Which owners have a dog and also a cat?", sql),
            Some(false)
        );
        // Asked as either, with the values apart, or not both written.
        for question in [
            "Which owners have a dog or a cat?",
            "Which owners have both a dog or a cat?",
            "Which owners have either a dog and a cat?",
            "Which owners have a dog, and which of them have names longer than six letters \
             that also have a cat?",
            "Which owners have both pets? (dog, cat)",
            "Which owners have a dog and a hamster?",
        ] {
            assert_eq!(rewrite(question, sql), None, "{question}");
        }
        // A conjunction no row satisfies needs no "and": the query is wrong whatever asked.
        let neither = "SELECT owner FROM pets WHERE kind = 'dog' AND kind = 'cat'";
        assert_eq!(
            even_if_empty("Owners with a dog, a cat?", neither),
            Some(true)
        );
    }

    #[test]
    fn without_both_the_intersection_must_find_something() {
        let result = |rows: Vec<Vec<Value>>| QueryResult {
            columns: vec!["x".into()],
            rows,
            truncated: false,
            elapsed: std::time::Duration::ZERO,
        };
        let intersection = |question: &str, sql: &str| {
            as_intersection(question, sql, Dialect::Sqlite).expect("rewritten")
        };
        let rows = "SELECT owner FROM pets WHERE kind IN ('dog', 'cat')";
        let count = "SELECT count(DISTINCT owner) FROM pets WHERE kind IN ('dog', 'cat')";
        let (and, both) = (
            "Which owners have a dog and a cat?",
            "Which owners have both a dog and a cat?",
        );
        let empty = result(Vec::new());
        let zero = result(vec![vec![Value::Integer(0)]]);
        let two = result(vec![vec![Value::Integer(2)]]);
        let one_row = result(vec![vec![Value::Text("Ann".into())]]);
        assert!(!intersection(and, rows).answers(&empty));
        assert!(intersection(and, rows).answers(&one_row));
        assert!(!intersection(and, count).answers(&zero));
        assert!(intersection(and, count).answers(&two));
        assert!(intersection(both, rows).answers(&empty));
        assert!(intersection(both, count).answers(&zero));
    }

    #[test]
    fn the_rule_needs_a_plain_result_and_one_pair() {
        let question = "Which owners have both a dog and a cat?";
        for sql in [
            "SELECT name FROM pets WHERE kind IN ('dog', 'cat') ORDER BY name",
            "SELECT name FROM pets WHERE kind IN ('dog', 'cat') LIMIT 3",
            "SELECT owner, count(*) FROM pets WHERE kind IN ('dog', 'cat') GROUP BY owner",
            "SELECT count(*) FROM pets WHERE kind IN ('dog', 'cat')",
            "SELECT avg(age) FROM pets WHERE kind IN ('dog', 'cat')",
            "SELECT name FROM pets WHERE kind IN ('dog', 'cat', 'cow')",
            "SELECT name FROM pets WHERE kind NOT IN ('dog', 'cat')",
            "SELECT name FROM pets WHERE kind = 'dog' OR owner = 'cat'",
            // Two different pairs: which one the question means is not clear.
            "SELECT name FROM pets WHERE kind IN ('dog', 'cat') AND a IN ('dog', 'cat')",
            "SELECT name FROM pets WHERE kind = 'dog' UNION SELECT name FROM pets",
            "DELETE FROM pets WHERE kind IN ('dog', 'cat')",
        ] {
            assert_eq!(rewrite(question, sql), None, "{sql}");
        }
    }

    /// Of Spider's 8,034 reference queries, written by people, the rule rewrites one: they
    /// intersected where the question joins two values by "and", but for this question,
    /// whose "any" means either.
    #[test]
    fn spider_gold_queries_are_rewritten_once() {
        let spider = spider();
        let mut examples = spider.train().expect("train.json");
        examples.extend(spider.dev().expect("dev.json"));
        assert!(examples.len() > 8000);
        let fired: Vec<(&str, bool)> = examples
            .iter()
            .filter_map(|e| {
                let rewrite = as_intersection(&e.question, &e.query, Dialect::Sqlite)?;
                Some((e.question.as_str(), rewrite.even_if_empty))
            })
            .collect();
        assert_eq!(
            fired,
            [(
                "Find the name of students who took any class in the years of 2009 and 2010.",
                false
            )]
        );
    }
}
