//! Joins the answer does not need, dropped.
//!
//! A model shown two related tables often joins both whatever the question asks: "Brazil's
//! population and life expectancy" becomes `FROM city JOIN country ON city.CountryCode =
//! country.Code WHERE country.Name = 'Brazil'`, which repeats Brazil's row once per Brazilian
//! city. The joined table gives the query nothing but rows to repeat or drop: none of its
//! columns is read outside the join's own condition. When the question does not speak of that
//! table either, the join is taken out.
//!
//! A join is dropped only when all of these hold, and anything less certain is left alone:
//! - the SELECT has no HAVING, no `*`, and no aggregate that counts rows (`count`, `sum`,
//!   `avg`, `total`, `group_concat`, `string_agg`) unless over DISTINCT values: there the
//!   repeated rows are the answer's substance ("the museum visited most times" counts visits
//!   through the join), while `count(DISTINCT T1.Code)` sees only which values occur, as
//!   `max` does. A join on the joined table's whole primary key is the exception: it finds at
//!   most one row for each row before it, so it repeats nothing and only drops the rows that
//!   have no match ("the total sent by each country's users" joined to the coupons of the
//!   transactions loses every transaction without a coupon), which a question that does not
//!   speak of the table does not ask for;
//! - the join's condition only equates columns of the joined table with columns of one other
//!   table of the same SELECT, so it is a key and filters on nothing else;
//! - the joined table is read nowhere else in the SELECT, its subqueries and its ORDER BY: not
//!   by its name or alias, nor by a bare column name it has;
//! - the question says no word of the table's name, nor a word grown from one ("liked" from
//!   `Likes`), and not the whole name of its key column: "students who have a pet" keeps
//!   `Has_Pet`, "students who have vice president votes" keeps the join on
//!   `Vice_President_Vote`; such joins are the question's filter.
//!
//! The query's first table goes the same way when it has exactly one inner join, the joined
//! table then standing first.

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, Ident, Join, JoinConstraint, JoinOperator, Query, Select, SelectItem,
    SetExpr, Statement, TableFactor, Visit, VisitMut, Visitor, VisitorMut,
};
use sqlparser::parser::Parser;

use crate::aggregate::counts_repeated_rows;
use crate::defect::column_name;
use crate::schema::{Schema, Table};
use crate::words::{name_words, tokenize};

/// `sql` without the joins that give it nothing the question asks for; `None` when no join
/// was dropped.
pub fn drop_unused_joins(question: &str, sql: &str, schema: &Schema) -> Option<String> {
    let mut statements = Parser::parse_sql(schema.dialect.parser().as_ref(), sql).ok()?;
    let [Statement::Query(query)] = statements.as_mut_slice() else {
        return None;
    };
    let said: Vec<String> = tokenize(question)
        .into_iter()
        .filter(|t| t.is_word)
        .map(|t| t.lemma)
        .collect();
    let mut dropper = Dropper {
        schema,
        said: format!(" {} ", said.join(" ")),
        dropped: 0,
    };
    let _ = query.visit(&mut dropper);
    (dropper.dropped > 0).then(|| query.to_string())
}

struct Dropper<'a> {
    schema: &'a Schema,
    /// The question's words in their singular form, space-separated and space-padded.
    said: String,
    dropped: usize,
}

impl VisitorMut for Dropper<'_> {
    type Break = ();

    // Every query, subqueries included, passes here once.
    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        // A plain SELECT's ORDER BY reads its tables; a set operation's orders its output.
        let order_by: Vec<Expr> = match (query.body.as_ref(), &query.order_by) {
            (SetExpr::Select(_), Some(order_by)) => {
                let mut exprs = Vec::new();
                let _ = order_by.visit(&mut CollectExprs(&mut exprs));
                exprs
            }
            _ => Vec::new(),
        };
        self.drop_in_body(&mut query.body, &order_by);
        ControlFlow::Continue(())
    }
}

impl Dropper<'_> {
    fn drop_in_body(&mut self, body: &mut SetExpr, order_by: &[Expr]) {
        match body {
            SetExpr::Select(select) => self.drop_in_select(select, order_by),
            SetExpr::SetOperation { left, right, .. } => {
                self.drop_in_body(left, &[]);
                self.drop_in_body(right, &[]);
            }
            _ => {}
        }
    }

    fn drop_in_select(&mut self, select: &mut Select, order_by: &[Expr]) {
        if select.having.is_some()
            || select.projection.iter().any(|item| {
                matches!(
                    item,
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
                )
            })
        {
            return;
        }
        let counts_rows = counts_repeated_rows(select) || order_by.iter().any(counts_repeated_rows);
        let [from] = select.from.as_slice() else {
            return;
        };
        if from.joins.is_empty() {
            return;
        }
        // Every table of the SELECT a table of the schema, each under its own name.
        let mut names: Vec<String> = Vec::new();
        for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
        {
            let Some((name, _)) = self.table_of(factor) else {
                return;
            };
            if names.contains(&name) {
                return;
            }
            names.push(name);
        }
        while let Some(i) = (0..select.from[0].joins.len())
            .find(|&i| self.droppable(select, i, order_by, counts_rows))
        {
            select.from[0].joins.remove(i);
            self.dropped += 1;
        }
        if !counts_rows {
            self.drop_first_table(select, order_by);
        }
    }

    /// Whether join `i` of the SELECT's one FROM item can go; where the SELECT `counts_rows`,
    /// only a join on the joined table's whole primary key.
    fn droppable(&self, select: &Select, i: usize, order_by: &[Expr], counts_rows: bool) -> bool {
        let join = &select.from[0].joins[i];
        let Some((name, table)) = self.table_of(&join.relation) else {
            return false;
        };
        let Some(condition) = on_condition(join, true) else {
            return false;
        };
        if !self.only_key(condition, &name, table)
            || (counts_rows && !on_whole_primary_key(condition, &name, table))
        {
            return false;
        }
        let mut without = select.clone();
        without.from[0].joins.remove(i);
        !reads(&without, order_by, &name, table)
    }

    /// Drops the first table when its one inner join's table can stand for it.
    fn drop_first_table(&mut self, select: &mut Select, order_by: &[Expr]) {
        let from = &select.from[0];
        let [join] = from.joins.as_slice() else {
            return;
        };
        let Some((name, table)) = self.table_of(&from.relation) else {
            return;
        };
        let Some(condition) = on_condition(join, false) else {
            return;
        };
        if !self.only_key(condition, &name, table) {
            return;
        }
        let mut without = select.clone();
        let join = without.from[0].joins.remove(0);
        without.from[0].relation = join.relation;
        if !reads(&without, order_by, &name, table) {
            *select = without;
            self.dropped += 1;
        }
    }

    /// Whether `condition` only equates columns of the table going by `name` with columns of
    /// one other table, and the question speaks neither of the table nor of its key column.
    fn only_key(&self, condition: &Expr, name: &str, table: &Table) -> bool {
        let Some(pairs) = key_pairs(condition) else {
            return false;
        };
        let mut other: Option<&str> = None;
        for (a, b) in &pairs {
            let (mine, theirs) = match (a.as_slice(), b.as_slice()) {
                ([ta, ca], [tb, _]) if ta == name && tb != name => ((ta, ca), tb),
                ([ta, _], [tb, cb]) if tb == name && ta != name => ((tb, cb), ta),
                _ => return false,
            };
            if other.is_some_and(|o| o != theirs.as_str()) {
                return false;
            }
            other = Some(theirs);
            if self.says(&name_words(mine.1)) {
                return false;
            }
        }
        !name_words(&table.name)
            .split_whitespace()
            .any(|word| self.says_word(word))
    }

    fn says(&self, phrase: &str) -> bool {
        !phrase.is_empty() && self.said.contains(&format!(" {phrase} "))
    }

    /// Whether a question word is `word` or grows from it: "liked" from `like`, "voting" from
    /// `vote`. Singular forms only undo plurals; a word taken for the table's keeps the join,
    /// so erring this way only keeps more joins.
    fn says_word(&self, word: &str) -> bool {
        let stem = match word.strip_suffix('e') {
            Some(stem) if stem.len() >= 3 => stem,
            _ => word,
        };
        self.says(word)
            || (stem.len() >= 3 && self.said.split(' ').any(|said| said.starts_with(stem)))
    }

    /// The name a table goes by in the query (lower case) and its schema table.
    fn table_of(&self, factor: &TableFactor) -> Option<(String, &Table)> {
        let (by, table) = named_table(self.schema, factor)?;
        Some((by.value.to_lowercase(), table))
    }
}

/// A FROM item that is a table of the schema: the name it goes by in the query (its alias,
/// else its name, as written) and the schema's table.
pub(crate) fn named_table<'s>(
    schema: &'s Schema,
    factor: &TableFactor,
) -> Option<(Ident, &'s Table)> {
    let TableFactor::Table { name, alias, .. } = factor else {
        return None;
    };
    let [part] = name.0.as_slice() else {
        return None;
    };
    let written = part.as_ident()?;
    let table = schema.table(&written.value)?;
    let by = alias.as_ref().map_or(written, |a| &a.name);
    Some((by.clone(), table))
}

/// A join's ON condition, when it is an inner join (or, with `left_too`, a left join).
pub(crate) fn on_condition(join: &Join, left_too: bool) -> Option<&Expr> {
    match &join.join_operator {
        JoinOperator::Join(JoinConstraint::On(on))
        | JoinOperator::Inner(JoinConstraint::On(on)) => Some(on),
        JoinOperator::Left(JoinConstraint::On(on))
        | JoinOperator::LeftOuter(JoinConstraint::On(on))
            if left_too =>
        {
            Some(on)
        }
        _ => None,
    }
}

/// The `ANDed` equalities of two qualified columns that make up `condition`, as lower-cased
/// `[table, column]` pairs; `None` when it holds anything else.
pub(crate) fn key_pairs(condition: &Expr) -> Option<Vec<(Vec<String>, Vec<String>)>> {
    match condition {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            let mut pairs = key_pairs(left)?;
            pairs.extend(key_pairs(right)?);
            Some(pairs)
        }
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => {
            let (a, b) = (column_name(left)?, column_name(right)?);
            (a.len() == 2 && b.len() == 2).then_some(vec![(a, b)])
        }
        Expr::Nested(inner) => key_pairs(inner),
        _ => None,
    }
}

/// Whether `condition` (equalities of columns, [`key_pairs`]) equates every column of the
/// primary key of `table`, which goes by `name`: then each row before the join meets at most
/// one of its rows.
fn on_whole_primary_key(condition: &Expr, name: &str, table: &Table) -> bool {
    let Some(pairs) = key_pairs(condition) else {
        return false;
    };
    let equated: Vec<&str> = pairs
        .iter()
        .flat_map(|(a, b)| [a, b])
        .filter(|column| column[0] == name)
        .map(|column| column[1].as_str())
        .collect();
    !table.primary_key.is_empty()
        && table
            .primary_key
            .iter()
            .all(|key| equated.iter().any(|c| c.eq_ignore_ascii_case(key)))
}

/// Whether the SELECT (its subqueries included) or its ORDER BY reads the table going by
/// `name`: a column qualified by that name, or a bare column name the table has.
fn reads(select: &Select, order_by: &[Expr], name: &str, table: &Table) -> bool {
    let mut exprs = Vec::new();
    let _ = select.visit(&mut CollectExprs(&mut exprs));
    exprs.extend(order_by.iter().cloned());
    exprs.iter().any(|expr| names_column_of(expr, name, table))
}

/// Whether `expr` itself is a column of the table going by `name`: qualified by that name, or
/// a bare column name the table has.
pub(crate) fn names_column_of(expr: &Expr, name: &str, table: &Table) -> bool {
    match expr {
        Expr::CompoundIdentifier(parts) => parts
            .iter()
            .rev()
            .nth(1)
            .is_some_and(|t| t.value.eq_ignore_ascii_case(name)),
        Expr::Identifier(ident) => table.column(&ident.value).is_some(),
        _ => false,
    }
}

/// Every expression of a node, nested ones included.
struct CollectExprs<'a>(&'a mut Vec<Expr>);

impl Visitor for CollectExprs<'_> {
    type Break = ();
    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        self.0.push(expr.clone());
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;
    use crate::prompt::fixture::schema;

    fn dropped(db: &str, question: &str, sql: &str) -> Option<String> {
        drop_unused_joins(question, sql, &schema(db))
    }

    #[test]
    fn a_first_table_that_only_repeats_rows_goes() {
        assert_eq!(
            dropped(
                "world_1",
                "Give me Brazil's population and life expectancies.",
                "SELECT T2.Population, T2.LifeExpectancy FROM city AS T1 INNER JOIN country AS T2 \
                 ON T1.CountryCode = T2.Code WHERE T2.Name = 'Brazil'"
            )
            .as_deref(),
            Some(
                "SELECT T2.Population, T2.LifeExpectancy FROM country AS T2 WHERE T2.Name = 'Brazil'"
            )
        );
    }

    #[test]
    fn a_joined_table_read_nowhere_goes() {
        assert_eq!(
            dropped(
                "course_teach",
                "What are the names of the teachers who are aged either 32 or 33?",
                "SELECT T1.Name FROM teacher AS T1 JOIN course_arrange AS T2 \
                 ON T1.Teacher_ID = T2.Teacher_ID WHERE T1.Age IN (32, 33)"
            )
            .as_deref(),
            Some("SELECT T1.Name FROM teacher AS T1 WHERE T1.Age IN (32, 33)")
        );
        // Each side of a set operation on its own, the aliases reused.
        assert_eq!(
            dropped(
                "course_teach",
                "Which names are of teachers aged 32 and of teachers aged 33?",
                "SELECT T1.Name FROM teacher AS T1 JOIN course_arrange AS T2 \
                 ON T1.Teacher_ID = T2.Teacher_ID WHERE T1.Age = 32 INTERSECT SELECT T1.Name \
                 FROM teacher AS T1 JOIN course_arrange AS T2 ON T1.Teacher_ID = T2.Teacher_ID \
                 WHERE T1.Age = 33"
            )
            .as_deref(),
            Some(
                "SELECT T1.Name FROM teacher AS T1 WHERE T1.Age = 32 INTERSECT SELECT T1.Name \
                 FROM teacher AS T1 WHERE T1.Age = 33"
            )
        );
    }

    #[test]
    fn a_count_of_distinct_values_does_not_keep_a_join() {
        assert_eq!(
            dropped(
                "world_1",
                "Count the number of countries in Asia.",
                "SELECT COUNT(DISTINCT T1.Code) FROM country AS T1 INNER JOIN countrylanguage AS T2 \
                 ON T1.Code = T2.CountryCode WHERE T1.Continent = 'Asia'"
            )
            .as_deref(),
            Some("SELECT COUNT(DISTINCT T1.Code) FROM country AS T1 WHERE T1.Continent = 'Asia'")
        );
        // Counting every joined row, the join's repetitions are the answer.
        assert_eq!(
            dropped(
                "world_1",
                "Count the number of countries in Asia.",
                "SELECT COUNT(T1.Code) FROM country AS T1 INNER JOIN countrylanguage AS T2 \
                 ON T1.Code = T2.CountryCode WHERE T1.Continent = 'Asia'"
            ),
            None
        );
    }

    #[test]
    fn a_join_the_question_speaks_of_stays() {
        // The table's name.
        assert_eq!(
            dropped(
                "pets_1",
                "Find the first name and age of students who have a pet.",
                "SELECT T1.Fname, T1.Age FROM Student AS T1 JOIN Has_Pet AS T2 ON T1.StuID = T2.StuID"
            ),
            None
        );
        // A word grown from the table's name.
        assert_eq!(
            dropped(
                "network_1",
                "Show the ids of high schoolers who have friends and are also liked by someone else.",
                "SELECT DISTINCT T1.id FROM Highschooler AS T1 JOIN Friend AS T2 \
                 ON T1.id = T2.student_id JOIN Likes AS T3 ON T3.liked_id = T2.friend_id"
            ),
            None
        );
        // Its key column's whole name.
        assert_eq!(
            dropped(
                "course_teach",
                "Which teachers have a teacher id in the arrangements?",
                "SELECT T1.Name FROM teacher AS T1 JOIN course_arrange AS T2 \
                 ON T1.Teacher_ID = T2.Teacher_ID"
            ),
            None
        );
    }

    #[test]
    fn a_join_that_counts_filters_or_is_read_stays() {
        let keep = |db: &str, question: &str, sql: &str| {
            assert_eq!(dropped(db, question, sql), None, "{sql}");
        };
        // Counted rows are the answer.
        keep(
            "world_1",
            "Which region has the most entries?",
            "SELECT T1.Region FROM country AS T1 JOIN city AS T2 ON T1.Code = T2.CountryCode \
             GROUP BY T1.Region ORDER BY count(*) DESC LIMIT 1",
        );
        // The condition filters on a value.
        keep(
            "world_1",
            "What are the regions that use English or Dutch?",
            "SELECT DISTINCT T1.Region FROM countrylanguage AS T2 INNER JOIN country AS T1 \
             ON T2.CountryCode = T1.Code AND T2.Language IN ('English', 'Dutch')",
        );
        // A column of the joined table is read.
        keep(
            "world_1",
            "Give me Brazil's population and the regions.",
            "SELECT T2.Population, T1.Name FROM city AS T1 JOIN country AS T2 \
             ON T1.CountryCode = T2.Code WHERE T2.Name = 'Brazil'",
        );
        // A bare column name the joined table has.
        keep(
            "world_1",
            "Give me Brazil's population and district.",
            "SELECT T2.Population, District FROM country AS T2 JOIN city AS T1 \
             ON T1.CountryCode = T2.Code WHERE T2.Name = 'Brazil'",
        );
        // The first table of a left join keeps the rows the join preserves.
        keep(
            "course_teach",
            "What are the teachers' names?",
            "SELECT T2.Name FROM course_arrange AS T1 LEFT JOIN teacher AS T2 \
             ON T1.Teacher_ID = T2.Teacher_ID",
        );
        // A column compared with itself is a defect, mended elsewhere.
        keep(
            "course_teach",
            "What are the names of the teachers aged 32?",
            "SELECT T1.Name FROM teacher AS T1 JOIN course_arrange AS T2 \
             ON T2.Teacher_ID = T2.Teacher_ID WHERE T1.Age = 32",
        );
    }

    #[test]
    fn a_join_on_the_joined_primary_key_goes_even_under_a_count() {
        // country.Code is country's key: each city meets one country, the sum repeats nothing,
        // and the join would only drop cities without a country.
        assert_eq!(
            dropped(
                "world_1",
                "What is the total population of the district of Kabol?",
                "SELECT sum(T1.Population) FROM city AS T1 JOIN country AS T2 \
                 ON T1.CountryCode = T2.Code WHERE T1.District = 'Kabol'"
            )
            .as_deref(),
            Some("SELECT sum(T1.Population) FROM city AS T1 WHERE T1.District = 'Kabol'")
        );
        // The first table is not its join's key: it stays under a count.
        assert_eq!(
            dropped(
                "world_1",
                "What is the total population of the district of Kabol?",
                "SELECT sum(T2.Population) FROM country AS T1 JOIN city AS T2 \
                 ON T2.CountryCode = T1.Code WHERE T2.District = 'Kabol'"
            ),
            None
        );
    }

    #[test]
    fn postgres_queries_are_read_in_their_dialect() {
        let mut postgres = schema("course_teach");
        postgres.dialect = Dialect::Postgres;
        assert_eq!(
            drop_unused_joins(
                "What are the names of the teachers aged 32?",
                "SELECT T1.\"Name\" FROM teacher AS T1 JOIN course_arrange AS T2 \
                 ON T1.\"Teacher_ID\" = T2.\"Teacher_ID\" WHERE T1.\"Age\" = 32",
                &postgres
            )
            .as_deref(),
            Some("SELECT T1.\"Name\" FROM teacher AS T1 WHERE T1.\"Age\" = 32")
        );
    }
}
