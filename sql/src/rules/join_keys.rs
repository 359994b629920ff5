//! Joins on nothing, mended by the schema's foreign keys.
//!
//! A model that cannot find the key between two tables writes `JOIN model_list AS T2 ON
//! T2.Model = T2.Model`: the condition holds on every row, so the query pairs every row with
//! every row, runs, and returns a plausible-looking answer ([`crate::defect`] names the shape).
//! What the model meant is almost always "join these two tables the way they are joined", and
//! the schema says how: when exactly one foreign key links the joined table to one of the
//! tables before it, that key replaces the self-comparison; when none does but exactly one
//! table outside the query links to both (`car_names` between `model_list` and `cars_data`),
//! that table is joined in between. Anything less certain (two keys, two bridges, a derived
//! table, an alias used twice) is left alone, and the defect check still keeps such a query
//! from outvoting a sound one.
//!
//! A join on the wrong key is mended the same way ([`mend_wrong_keys`], a rule of its own):
//! `patients AS p JOIN outcomes AS o ON
//! p.patient_id = o.treatment_id` equates a patient's key with a column that the schema
//! declares a key to a third table (treatments), and no key links the two columns; the rows it
//! pairs share a number, not a relation. Only that shape counts (one equality, both columns
//! keys, one of them pointing elsewhere): a join on two columns the schema does not relate
//! otherwise (names, codes, dates) may be what the question asks.

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, Join, JoinConstraint, JoinOperator, Query, Select, SetExpr, Statement,
    TableFactor, VisitMut, VisitorMut,
};
use sqlparser::parser::Parser;

use crate::defect::{column_name, is_self_comparison};
use crate::dialect::Dialect;
use crate::schema::{ForeignKey, Schema};

/// `sql` with every join whose condition compares a column with itself joined by the
/// schema's keys instead, when the schema leaves one way to do it; `None` when nothing was
/// mended.
pub fn mend_self_joins(sql: &str, schema: &Schema) -> Option<String> {
    mend(sql, schema, Mending::SelfComparisons)
}

/// `sql` with every join on the wrong key ([`Mender::on_a_wrong_key`]) joined by the schema's
/// keys instead, when the schema leaves one way to do it; `None` when nothing was mended.
pub fn mend_wrong_keys(sql: &str, schema: &Schema) -> Option<String> {
    mend(sql, schema, Mending::WrongKeys)
}

fn mend(sql: &str, schema: &Schema, mending: Mending) -> Option<String> {
    let dialect = schema.dialect;
    let mut statements = Parser::parse_sql(dialect.parser().as_ref(), sql).ok()?;
    let [Statement::Query(query)] = statements.as_mut_slice() else {
        return None;
    };
    let mut mender = Mender {
        schema,
        dialect,
        mending,
        mended: 0,
    };
    let _ = query.visit(&mut mender);
    (mender.mended > 0).then(|| query.to_string())
}

/// Which joins a [`Mender`] mends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mending {
    /// Joins whose condition compares a column with itself.
    SelfComparisons,
    /// Joins on the wrong key.
    WrongKeys,
}

struct Mender<'a> {
    schema: &'a Schema,
    dialect: Dialect,
    mending: Mending,
    mended: usize,
}

impl VisitorMut for Mender<'_> {
    type Break = ();

    // Every query, subqueries included, passes here once; its own SELECTs are mended and the
    // visitor goes on into the queries nested in them.
    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        self.mend_body(&mut query.body);
        ControlFlow::Continue(())
    }
}

impl Mender<'_> {
    fn mend_body(&mut self, body: &mut SetExpr) {
        match body {
            SetExpr::Select(select) => self.mend_select(select),
            SetExpr::SetOperation { left, right, .. } => {
                self.mend_body(left);
                self.mend_body(right);
            }
            _ => {}
        }
    }

    fn mend_select(&mut self, select: &mut Select) {
        for from in &mut select.from {
            let mut seen = vec![self.table_ref(&from.relation)];
            let mut i = 0;
            while i < from.joins.len() {
                let right = self.table_ref(&from.joins[i].relation);
                if let Some(bridge) = self.mend_join(&seen, &right, &mut from.joins[i]) {
                    // The bridge goes before the join it leads to.
                    from.joins.insert(i, bridge.join);
                    seen.push(Some(bridge.table));
                    i += 1;
                }
                seen.push(right);
                i += 1;
            }
        }
    }

    /// Mends `join` in place when its condition compares a column with itself, or (mending
    /// wrong keys) is [`Self::on_a_wrong_key`], and the schema links its table to the tables
    /// before it in one way; returns the table to join in between, when that way goes through
    /// one.
    fn mend_join(
        &mut self,
        seen: &[Option<TableRef>],
        right: &Option<TableRef>,
        join: &mut Join,
    ) -> Option<Bridge> {
        let (keyword, constraint) = match &mut join.join_operator {
            JoinOperator::Join(c) => ("JOIN", c),
            JoinOperator::Inner(c) => ("INNER JOIN", c),
            JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => ("LEFT JOIN", c),
            _ => return None,
        };
        let JoinConstraint::On(condition) = constraint else {
            return None;
        };
        // A join that also compares two tables' columns has a key already: its
        // self-comparison is a slip beside it, not a join on nothing.
        let on_nothing = has_self_comparison(condition) && !compares_two_tables(condition);
        let right = right.as_ref()?;
        let left: Vec<&TableRef> = seen.iter().map(Option::as_ref).collect::<Option<_>>()?;
        let mend = match self.mending {
            Mending::SelfComparisons => on_nothing,
            Mending::WrongKeys => self.on_a_wrong_key(condition, &left, right),
        };
        if !mend {
            return None;
        }
        let names_unique = {
            let mut names: Vec<&str> = left.iter().map(|t| t.name.as_str()).collect();
            names.push(&right.name);
            names.sort_unstable();
            names.windows(2).all(|w| w[0] != w[1])
        };
        if !names_unique {
            return None;
        }
        match self.route(&left, right)? {
            Route::Direct(l, key) => {
                let on = self.expr(&format!(
                    "{} = {}",
                    l.column(key.side(&l.table), self.dialect),
                    right.column(key.side(&right.table), self.dialect)
                ))?;
                replace_condition(condition, on, on_nothing);
                self.mended += 1;
                None
            }
            Route::Through(l, to_left, table, to_right) => {
                let middle = TableRef {
                    name: table.to_lowercase(),
                    written: quoted(&table, self.dialect),
                    table: table.clone(),
                };
                let first = format!(
                    "{} = {}",
                    l.column(to_left.side(&l.table), self.dialect),
                    middle.column(to_left.side(&table), self.dialect)
                );
                let second = format!(
                    "{} = {}",
                    middle.column(to_right.side(&table), self.dialect),
                    right.column(to_right.side(&right.table), self.dialect)
                );
                let bridge = self.join(&format!(
                    "SELECT 1 FROM t {keyword} {} ON {first}",
                    middle.written
                ))?;
                let on = self.expr(&second)?;
                replace_condition(condition, on, on_nothing);
                self.mended += 1;
                Some(Bridge {
                    join: bridge,
                    table: middle,
                })
            }
        }
    }

    /// Whether `condition` is one equality of a column of `right` with a column of a table
    /// of `left` that no chain of foreign keys relates ([`Self::reach`]), where one is declared
    /// a key to the other's table but to another of its columns, or to a third table while the
    /// other is a primary key of one column or a key to a table other than the first's.
    fn on_a_wrong_key(&self, condition: &Expr, left: &[&TableRef], right: &TableRef) -> bool {
        let mut condition = condition;
        while let Expr::Nested(inner) = condition {
            condition = inner;
        }
        let Expr::BinaryOp {
            left: a,
            op: BinaryOperator::Eq,
            right: b,
        } = condition
        else {
            return false;
        };
        // A qualified column of the join's table (`Some(true)`) or of an earlier one.
        let side = |expr: &Expr| -> Option<(&TableRef, String, bool)> {
            let [qualifier, column] = column_name(expr)?.try_into().ok()?;
            if right.name == qualifier {
                return Some((right, column, true));
            }
            let table = left.iter().find(|t| t.name == qualifier)?;
            Some((table, column, false))
        };
        let (Some((ta, ca, a_is_right)), Some((tb, cb, b_is_right))) = (side(a), side(b)) else {
            return false;
        };
        if a_is_right == b_is_right {
            return false;
        }
        let is = |x: &str, y: &str| x.eq_ignore_ascii_case(y);
        let keys = &self.schema.foreign_keys;
        // Columns that name the same row somewhere (one a key to the other, both keys to one
        // column, or through a chain of keys) are a join the schema allows.
        let (reach_a, reach_b) = (self.reach(&ta.table, &ca), self.reach(&tb.table, &cb));
        let related = reach_a.iter().any(|x| reach_b.contains(x));
        // The column is declared a key to a table other than `other`'s.
        let points_elsewhere = |t: &TableRef, c: &str, other: &TableRef| {
            keys.iter().any(|k| {
                is(&k.from_table, &t.table)
                    && is(&k.from_column, c)
                    && !is(&k.to_table, &other.table)
            }) && !keys.iter().any(|k| {
                is(&k.from_table, &t.table)
                    && is(&k.from_column, c)
                    && is(&k.to_table, &other.table)
            })
        };
        let primary = |t: &TableRef, c: &str| {
            self.schema
                .table(&t.table)
                .is_some_and(|table| matches!(table.primary_key.as_slice(), [key] if is(key, c)))
        };
        // The column is declared a key to `other`'s table, to a column other than `d`.
        let points_past = |t: &TableRef, c: &str, other: &TableRef, d: &str| {
            keys.iter().any(|k| {
                is(&k.from_table, &t.table)
                    && is(&k.from_column, c)
                    && is(&k.to_table, &other.table)
                    && !is(&k.to_column, d)
            })
        };
        let wrong = |(t, c): (&TableRef, &str), (u, d): (&TableRef, &str)| {
            points_past(t, c, u, d)
                || points_elsewhere(t, c, u) && (primary(u, d) || points_elsewhere(u, d, t))
        };
        !related && (wrong((ta, &ca), (tb, &cb)) || wrong((tb, &cb), (ta, &ca)))
    }

    /// The columns `table.column` names a row of by the schema's foreign keys, itself first,
    /// each as (table, column) in lower case.
    fn reach(&self, table: &str, column: &str) -> Vec<(String, String)> {
        let mut reached = vec![(table.to_lowercase(), column.to_lowercase())];
        let mut next = 0;
        while let Some((t, c)) = reached.get(next).cloned() {
            next += 1;
            for k in &self.schema.foreign_keys {
                let to = (k.to_table.to_lowercase(), k.to_column.to_lowercase());
                if k.from_table.eq_ignore_ascii_case(&t)
                    && k.from_column.eq_ignore_ascii_case(&c)
                    && !reached.contains(&to)
                {
                    reached.push(to);
                }
            }
        }
        reached
    }

    /// The one way the schema links `right` to a table of `left`: a key between them, else a
    /// table outside the query with one key to each. `None` when there are none or several.
    fn route<'t>(&self, left: &[&'t TableRef], right: &TableRef) -> Option<Route<'t>> {
        let keys = |a: &str, b: &str| -> Vec<&ForeignKey> {
            self.schema
                .foreign_keys
                .iter()
                .filter(|k| !k.from_table.eq_ignore_ascii_case(&k.to_table))
                .filter(|k| {
                    (k.from_table.eq_ignore_ascii_case(a) && k.to_table.eq_ignore_ascii_case(b))
                        || (k.from_table.eq_ignore_ascii_case(b)
                            && k.to_table.eq_ignore_ascii_case(a))
                })
                .collect()
        };
        let direct: Vec<(&TableRef, &ForeignKey)> = left
            .iter()
            .flat_map(|l| {
                keys(&l.table, &right.table)
                    .into_iter()
                    .map(move |k| (*l, k))
            })
            .collect();
        match direct.as_slice() {
            [(l, key)] => return Some(Route::Direct(l, Key::of(key))),
            [] => {}
            _ => return None,
        }
        let in_query = |name: &str| {
            right.table.eq_ignore_ascii_case(name)
                || left.iter().any(|l| l.table.eq_ignore_ascii_case(name))
        };
        let mut routes = Vec::new();
        for middle in self.schema.table_names().filter(|t| !in_query(t)) {
            let [to_right] = keys(middle, &right.table)[..] else {
                continue;
            };
            let to_left: Vec<(&TableRef, &ForeignKey)> = left
                .iter()
                .flat_map(|l| keys(middle, &l.table).into_iter().map(move |k| (*l, k)))
                .collect();
            if let [(l, key)] = to_left[..] {
                routes.push(Route::Through(
                    l,
                    Key::of(key),
                    middle.to_owned(),
                    Key::of(to_right),
                ));
            }
        }
        match routes.len() {
            1 => routes.pop(),
            _ => None,
        }
    }

    /// A table of the schema as the query writes it; `None` for anything else (a derived
    /// table, a function, a table the schema does not have).
    fn table_ref(&self, factor: &TableFactor) -> Option<TableRef> {
        let TableFactor::Table { name, alias, .. } = factor else {
            return None;
        };
        let [part] = name.0.as_slice() else {
            return None;
        };
        let table = self.schema.table(&part.as_ident()?.value)?.name.clone();
        Some(match alias {
            Some(alias) => TableRef {
                name: alias.name.value.to_lowercase(),
                written: alias.name.to_string(),
                table,
            },
            None => TableRef {
                name: table.to_lowercase(),
                written: name.to_string(),
                table,
            },
        })
    }

    fn expr(&self, text: &str) -> Option<Expr> {
        Parser::new(self.dialect.parser().as_ref())
            .try_with_sql(text)
            .ok()?
            .parse_expr()
            .ok()
    }

    /// The one join of `sql`, a query written to carry it.
    fn join(&self, sql: &str) -> Option<Join> {
        let statements = Parser::parse_sql(self.dialect.parser().as_ref(), sql).ok()?;
        let [Statement::Query(query)] = statements.as_slice() else {
            return None;
        };
        let SetExpr::Select(select) = query.body.as_ref() else {
            return None;
        };
        select.from.first()?.joins.first().cloned()
    }
}

/// A table the query reads: the name it goes by there (lower case, for comparing), that name
/// as written, and the schema's table.
#[derive(Debug, Clone)]
struct TableRef {
    name: String,
    written: String,
    table: String,
}

impl TableRef {
    fn column(&self, column: &str, dialect: Dialect) -> String {
        format!("{}.{}", self.written, quoted(column, dialect))
    }
}

enum Route<'t> {
    /// A key between a table of the query and the joined one.
    Direct(&'t TableRef, Key),
    /// A table of the query, its key to the table between, that table, its key to the joined
    /// one.
    Through(&'t TableRef, Key, String, Key),
}

/// A foreign key's two ends.
struct Key {
    from_table: String,
    from_column: String,
    to_column: String,
}

impl Key {
    fn of(key: &ForeignKey) -> Key {
        Key {
            from_table: key.from_table.clone(),
            from_column: key.from_column.clone(),
            to_column: key.to_column.clone(),
        }
    }

    /// The key's column in `table` (one of its two ends).
    fn side(&self, table: &str) -> &str {
        if self.from_table.eq_ignore_ascii_case(table) {
            &self.from_column
        } else {
            &self.to_column
        }
    }
}

struct Bridge {
    join: Join,
    table: TableRef,
}

/// A name as SQL must write it in `dialect` ([`Dialect::needs_quotes`]).
fn quoted(name: &str, dialect: Dialect) -> String {
    if dialect.needs_quotes(name) {
        dialect.quote(name)
    } else {
        name.to_owned()
    }
}

/// Whether one of the condition's `AND`ed parts compares a column with itself.
fn has_self_comparison(condition: &Expr) -> bool {
    match condition {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => has_self_comparison(left) || has_self_comparison(right),
        Expr::Nested(inner) if !is_self_comparison(condition) => has_self_comparison(inner),
        other => is_self_comparison(other),
    }
}

/// Whether one of the condition's `AND`ed parts equates columns of two tables (or a column
/// whose table is not written, which may be another table's).
fn compares_two_tables(condition: &Expr) -> bool {
    match condition {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => compares_two_tables(left) || compares_two_tables(right),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => match (column_name(left), column_name(right)) {
            (Some(a), Some(b)) => match (a.as_slice(), b.as_slice()) {
                ([.., ta, _], [.., tb, _]) => ta != tb,
                _ => a != b,
            },
            _ => false,
        },
        Expr::Nested(inner) => compares_two_tables(inner),
        _ => false,
    }
}

/// Puts `with` in place of the self-comparison in `condition` (`on_nothing`) or of the whole
/// condition, a join on the wrong key.
fn replace_condition(condition: &mut Expr, with: Expr, on_nothing: bool) {
    if on_nothing {
        replace_self_comparison(condition, with);
    } else {
        *condition = with;
    }
}

/// Replaces the first `AND`ed part of `condition` that compares a column with itself.
fn replace_self_comparison(condition: &mut Expr, with: Expr) -> bool {
    if is_self_comparison(condition) {
        *condition = with;
        return true;
    }
    match condition {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            if has_self_comparison(left) {
                replace_self_comparison(left, with)
            } else {
                replace_self_comparison(right, with)
            }
        }
        Expr::Nested(inner) => replace_self_comparison(inner, with),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::fixture::schema;

    fn mend(db: &str, sql: &str) -> Option<String> {
        mend_self_joins(sql, &schema(db))
    }

    fn mend_key(db: &str, sql: &str) -> Option<String> {
        mend_wrong_keys(sql, &schema(db))
    }

    #[test]
    fn a_self_comparison_becomes_the_one_key_between_the_tables() {
        assert_eq!(
            mend(
                "car_1",
                "SELECT count(*) FROM countries AS T1 JOIN car_makers AS T2 ON T2.Country = T2.Country"
            )
            .as_deref(),
            Some(
                "SELECT count(*) FROM countries AS T1 JOIN car_makers AS T2 ON T1.CountryId = T2.Country"
            )
        );
        // PostgreSQL folds bare names to lower case: the schema's mixed-case names are quoted.
        let mut postgres = schema("car_1");
        postgres.dialect = Dialect::Postgres;
        assert_eq!(
            mend_self_joins(
                "SELECT count(*) FROM countries AS T1 JOIN car_makers AS T2 ON T2.Country = T2.Country",
                &postgres
            )
            .as_deref(),
            Some(
                "SELECT count(*) FROM countries AS T1 JOIN car_makers AS T2 ON T1.\"CountryId\" = T2.\"Country\""
            )
        );
        // Other conditions of the join stay; tables without aliases go by their names.
        assert_eq!(
            mend(
                "world_1",
                "SELECT DISTINCT country.Region FROM countrylanguage JOIN country ON \
                 countrylanguage.CountryCode = countrylanguage.CountryCode AND \
                 countrylanguage.Language IN ('Dutch', 'English')"
            )
            .as_deref(),
            Some(
                "SELECT DISTINCT country.Region FROM countrylanguage JOIN country ON \
                 countrylanguage.CountryCode = country.Code AND \
                 countrylanguage.Language IN ('Dutch', 'English')"
            )
        );
    }

    #[test]
    fn tables_without_a_key_between_them_get_the_one_table_that_links_them() {
        assert_eq!(
            mend(
                "car_1",
                "SELECT DISTINCT T2.Model FROM cars_data AS T1 INNER JOIN model_list AS T2 \
                 ON T2.Model = T2.Model WHERE T1.Year > 1980"
            )
            .as_deref(),
            Some(
                "SELECT DISTINCT T2.Model FROM cars_data AS T1 INNER JOIN car_names ON \
                 T1.Id = car_names.MakeId INNER JOIN model_list AS T2 ON \
                 car_names.Model = T2.Model WHERE T1.Year > 1980"
            )
        );
        // In a subquery and on one side of a set operation too.
        let mended = mend(
            "car_1",
            "SELECT Model FROM model_list WHERE Model IN (SELECT ml.Model FROM model_list ml \
             JOIN cars_data cd ON ml.ModelId = ml.ModelId WHERE cd.Cylinders = 4) \
             UNION SELECT ml.Model FROM model_list AS ml JOIN cars_data AS cd ON cd.Id = cd.Id",
        )
        .expect("mended");
        assert_eq!(mended.matches("JOIN car_names ON").count(), 2, "{mended}");
        assert!(!mended.contains("cd.Id = cd.Id"), "{mended}");
    }

    #[test]
    fn a_join_on_the_wrong_key_takes_the_schemas() {
        // A country's continent is no car maker's id; car makers name their country.
        assert_eq!(
            mend_key(
                "car_1",
                "SELECT T1.Maker FROM car_makers AS T1 JOIN countries AS T2 ON T1.Id = T2.Continent"
            )
            .as_deref(),
            Some(
                "SELECT T1.Maker FROM car_makers AS T1 JOIN countries AS T2 ON T1.Country = T2.CountryId"
            )
        );
        // A car maker's country is a country's id, not its continent.
        assert_eq!(
            mend_key(
                "car_1",
                "SELECT T2.Maker FROM countries AS T1 JOIN car_makers AS T2 ON (T1.Continent = T2.Country)"
            )
            .as_deref(),
            Some("SELECT T2.Maker FROM countries AS T1 JOIN car_makers AS T2 ON T1.CountryId = T2.Country")
        );
        // No key between the two tables: the one table between them is joined.
        assert_eq!(
            mend_key(
                "car_1",
                "SELECT T1.Model FROM model_list AS T1 JOIN cars_data AS T2 ON T1.ModelId = T2.Id"
            )
            .as_deref(),
            Some(
                "SELECT T1.Model FROM model_list AS T1 JOIN car_names ON T1.Model = car_names.Model \
                 JOIN cars_data AS T2 ON car_names.MakeId = T2.Id"
            )
        );
        // Each of the two rules mends its own kind of join only.
        assert_eq!(
            mend(
                "car_1",
                "SELECT T1.Maker FROM car_makers AS T1 JOIN countries AS T2 ON T1.Id = T2.Continent"
            ),
            None
        );
        assert_eq!(
            mend_key(
                "car_1",
                "SELECT count(*) FROM countries AS T1 JOIN car_makers AS T2 ON T2.Country = T2.Country"
            ),
            None
        );
        // Joins on the schema's keys, or on columns it does not relate, stay as written.
        for sql in [
            "SELECT T1.Maker FROM car_makers AS T1 JOIN countries AS T2 ON T1.Country = T2.CountryId",
            "SELECT T1.Maker FROM car_makers AS T1 JOIN countries AS T2 ON T1.FullName = T2.CountryName",
            "SELECT T1.Maker FROM car_makers AS T1 JOIN countries AS T2 ON T1.Id = T2.CountryId",
            "SELECT T1.Maker FROM car_makers AS T1 JOIN countries AS T2 ON T1.Id = T2.Continent AND T1.Maker = 'x'",
        ] {
            assert_eq!(mend_key("car_1", sql), None, "{sql}");
        }
    }

    #[test]
    fn anything_uncertain_is_left_alone() {
        for (db, sql) in [
            // No self-comparison: nothing to mend.
            (
                "car_1",
                "SELECT T1.Model FROM car_names AS T1 JOIN cars_data AS T2 ON T1.MakeId = T2.Id",
            ),
            // Two keys between the tables (source and destination airport).
            (
                "flight_2",
                "SELECT count(*) FROM flights AS T1 JOIN airports AS T2 ON T2.AirportCode = T2.AirportCode",
            ),
            // No key and no table between.
            (
                "dog_kennels",
                "SELECT T1.state FROM Owners AS T1 JOIN Professionals AS T2 ON T1.owner_id = T1.owner_id",
            ),
            // One alias for two tables.
            (
                "world_1",
                "SELECT c.Continent FROM city c JOIN country c ON c.CountryCode = c.CountryCode",
            ),
            // A derived table.
            (
                "car_1",
                "SELECT x.Model FROM (SELECT * FROM car_names) AS x JOIN cars_data AS T2 ON T2.Id = T2.Id",
            ),
            // A join that has its key already: the self-comparison beside it is left to the
            // defect check.
            (
                "voter_1",
                "SELECT DISTINCT T1.area_code FROM AREA_CODE_STATE AS T1 JOIN VOTES AS T2 ON T1.state = T2.state AND T1.area_code = T1.area_code",
            ),
            // A self-comparison under OR is not a join condition to replace.
            (
                "car_1",
                "SELECT count(*) FROM countries AS T1 JOIN car_makers AS T2 ON T2.Country = T2.Country OR T1.CountryId = 1",
            ),
            // Not a query.
            ("car_1", "DELETE FROM car_makers WHERE Id = Id"),
        ] {
            assert_eq!(mend(db, sql), None, "{sql}");
        }
    }

    #[test]
    fn the_mended_query_has_no_defect_and_answers_as_the_reference_does() {
        let path = crate::spider_fixture::spider_db("car_1");
        let car = crate::schema::Schema::from_sqlite(
            &path,
            "car_1",
            crate::schema::IntrospectOptions::default(),
        )
        .expect("car_1 introspects");
        let sandbox = crate::sandbox::Sandbox::open(&path, Default::default()).expect("opens");
        let model = "SELECT DISTINCT T1.Model FROM model_list AS T1 JOIN cars_data AS T2 \
                     ON T1.ModelId = T1.ModelId WHERE T2.Cylinders = 4 ORDER BY T2.Horsepower DESC LIMIT 1";
        let mended = mend_self_joins(model, &car).expect("mended");
        assert_eq!(crate::defect::find_defect(&mended, Dialect::Sqlite), None);
        let reference = "SELECT T1.Model FROM CAR_NAMES AS T1 JOIN CARS_DATA AS T2 ON \
                         T1.MakeId = T2.Id WHERE T2.Cylinders = 4 ORDER BY T2.horsepower DESC LIMIT 1";
        let rows = |sql: &str| sandbox.execute(sql).expect(sql).rows;
        assert_eq!(rows(&mended), rows(reference));
        assert_ne!(rows(model), rows(reference));
    }

    /// Of Spider's reference queries, only eight annotation slips on `activity_1` compare a
    /// column with itself (`ON T2.actid = T2.actid`, [`crate::defect`]); each is mended to the
    /// key its join was meant to use, and nothing else is touched. Six join on a wrong key:
    /// `store_1`'s album joined to its tracks by their genre (`T1.id = T2.genre_id`) and
    /// `tracking_share_transactions`' lot by a transaction's id (`T1.lot_id =
    /// T2.transaction_id`), annotation slips both; each is joined by the schema's key (`T2.album_id`,
    /// `T2.lot_id`). Joins of two keys to one row (`T2.person_id = T3.student_id`, both people's
    /// ids) or through a chain of keys are left alone.
    #[test]
    fn spider_reference_queries_are_left_alone_but_the_annotation_slips() {
        const CHECKED: usize = 7876;
        let spider = crate::spider_fixture::spider();
        let mut examples = spider.train().expect("train.json");
        examples.extend(spider.dev().expect("dev.json"));
        assert!(examples.len() > 8000);
        let mut schemas = std::collections::HashMap::new();
        let mut mended = Vec::new();
        let mut rekeyed: Vec<(usize, String)> = Vec::new();
        // Spider ships without a few train databases (soccer_1 among them); their queries
        // have no schema to mend by and are counted out.
        let mut checked = 0;
        for (i, e) in examples.iter().enumerate() {
            if !spider.database_path(&e.db_id).exists() {
                continue;
            }
            checked += 1;
            let schema = schemas
                .entry(e.db_id.clone())
                .or_insert_with(|| schema(&e.db_id));
            if let Some(sql) = mend_self_joins(&e.query, schema) {
                assert_eq!(
                    crate::defect::find_defect(&sql, Dialect::Sqlite),
                    None,
                    "{sql}"
                );
                mended.push(i);
            }
            rekeyed.extend(mend_wrong_keys(&e.query, schema).map(|sql| (i, sql)));
        }
        assert_eq!(checked, CHECKED);
        assert_eq!(mended, (6795..=6802).collect::<Vec<_>>());
        let rekeyed: Vec<usize> = rekeyed.into_iter().map(|(i, _)| i).collect();
        assert_eq!(rekeyed, [623, 624, 625, 626, 5864, 5865]);
    }
}
