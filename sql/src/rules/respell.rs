//! Values a column does not store, looked up before a query that finds nothing is believed.
//!
//! A model writes the value as the question spells it (`'North Carolina'` where the column
//! stores `'NorthCarolina'`, `'usa'` where it stores `'USA'`) or compares it with a neighbouring
//! column (`Region = 'Africa'` where `Continent` stores it). The query runs and finds nothing,
//! which is a plausible answer, so nothing downstream questions it. When a query found nothing,
//! each `column = 'text'` it writes is checked against the database: a value the column stores
//! is left as it is; otherwise the one value of that column that is the same but for case and
//! spaces replaces it, or, failing that, the one other column of the same table that stores the
//! value exactly takes the column's place. A stored value that differs only by spaces around
//! it is left alone (below). The caller keeps the result only if it then finds something.

use std::collections::HashMap;
use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, Ident, Statement, TableFactor, Value as SqlValue, Visit, VisitMut,
    Visitor, VisitorMut,
};
use sqlparser::parser::Parser;

use crate::backend::Session;
use crate::defect::column_name;
use crate::dialect::Dialect;
use crate::sandbox::QueryResult;
use crate::schema::Schema;
use crate::value::Value;

/// Whether a result says "nothing": no rows, or one row of zeros and NULLs (an aggregate over
/// no rows).
pub fn finds_nothing(result: &QueryResult) -> bool {
    match result.rows.as_slice() {
        [] => true,
        [row] => row.iter().all(|v| match v {
            Value::Null => true,
            Value::Integer(n) => *n == 0,
            Value::Real(x) => *x == 0.0,
            _ => false,
        }),
        _ => false,
    }
}

/// `sql` with each compared text value the database does not store in that column respelled
/// as the column stores it, or compared with the one other column of the table that stores
/// it; `None` when nothing changed. Lookups run through `session`.
pub fn respell_values(sql: &str, schema: &Schema, session: &mut dyn Session) -> Option<String> {
    let dialect = schema.dialect;
    let mut statements = Parser::parse_sql(dialect.parser().as_ref(), sql).ok()?;
    let [Statement::Query(query)] = statements.as_mut_slice() else {
        return None;
    };
    let tables = query_tables(query, schema);
    let mut respeller = Respeller {
        schema,
        dialect,
        tables,
        session,
        changed: 0,
    };
    let _ = query.visit(&mut respeller);
    (respeller.changed > 0).then(|| query.to_string())
}

/// The query's names for its tables (aliases and bare names, lower case) → the schema's table;
/// a name that stands for two tables in different scopes is left out, as unresolvable.
fn query_tables(query: &sqlparser::ast::Query, schema: &Schema) -> HashMap<String, String> {
    struct Collect<'a> {
        schema: &'a Schema,
        names: HashMap<String, Option<String>>,
    }
    impl Visitor for Collect<'_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table { name, alias, .. } = factor
                && let [part] = name.0.as_slice()
                && let Some(ident) = part.as_ident()
                && let Some(table) = self.schema.table(&ident.value)
            {
                let mut note = |key: String| {
                    let entry = self.names.entry(key).or_insert(Some(table.name.clone()));
                    if entry.as_deref() != Some(table.name.as_str()) {
                        *entry = None;
                    }
                };
                note(ident.value.to_lowercase());
                if let Some(alias) = alias {
                    note(alias.name.value.to_lowercase());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut collect = Collect {
        schema,
        names: HashMap::new(),
    };
    let _ = query.visit(&mut collect);
    collect
        .names
        .into_iter()
        .filter_map(|(name, table)| Some((name, table?)))
        .collect()
}

struct Respeller<'a> {
    schema: &'a Schema,
    dialect: Dialect,
    tables: HashMap<String, String>,
    session: &'a mut dyn Session,
    changed: usize,
}

impl VisitorMut for Respeller<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = expr
        else {
            return ControlFlow::Continue(());
        };
        let (column, value, literal) = match (text_literal(right), text_literal(left)) {
            (Some(text), None) => (left, right, text),
            (None, Some(text)) => (right, left, text),
            _ => return ControlFlow::Continue(()),
        };
        let Some((table, stored_column)) = self.resolve(column) else {
            return ControlFlow::Continue(());
        };
        match self.fix(&table, &stored_column, &literal) {
            Some(Fix::Value(respelled)) => {
                **value = Expr::value(SqlValue::SingleQuotedString(respelled));
                self.changed += 1;
            }
            Some(Fix::Column(other)) => {
                rename_column(column, self.ident(&other));
                self.changed += 1;
            }
            None => {}
        }
        ControlFlow::Continue(())
    }
}

enum Fix {
    /// The column's own spelling of the value.
    Value(String),
    /// The one other column of the table that stores the value.
    Column(String),
}

impl Respeller<'_> {
    /// The schema's table and column a column reference of the query names.
    fn resolve(&self, column: &Expr) -> Option<(String, String)> {
        let parts = column_name(column)?;
        let (tables, name): (Vec<&String>, &String) = match parts.as_slice() {
            [qualifier, name] => (vec![self.tables.get(qualifier)?], name),
            [name] => {
                let mut owners: Vec<&String> = self
                    .tables
                    .values()
                    .filter(|t| {
                        self.schema.table(t).is_some_and(|t| {
                            t.columns.iter().any(|c| c.name.eq_ignore_ascii_case(name))
                        })
                    })
                    .collect();
                owners.sort_unstable();
                owners.dedup();
                (owners, name)
            }
            _ => return None,
        };
        let [table] = tables.as_slice() else {
            return None;
        };
        let table = self.schema.table(table)?;
        let column = table
            .columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))?;
        Some((table.name.clone(), column.name.clone()))
    }

    fn fix(&mut self, table: &str, column: &str, literal: &str) -> Option<Fix> {
        let t = self.dialect.quote(table);
        let text = sql_string(literal);
        if self.rows(&format!(
            "SELECT 1 FROM {t} WHERE {c} = {text} LIMIT 1",
            c = self.dialect.quote(column)
        ))? > 0
        {
            return None;
        }
        let squeezed: String = literal
            .chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .collect();
        if !squeezed.is_empty() {
            let respelled = self.session.execute(&format!(
                "SELECT DISTINCT {c} FROM {t} WHERE lower(replace({c}, ' ', '')) = {s} LIMIT 2",
                c = self.dialect.quote(column),
                s = sql_string(&squeezed),
            ));
            if let Ok(result) = respelled
                && !result.rows.is_empty()
            {
                // The column stores the value, spelt another way: the column is right. One
                // spelling is taken; two are a guess. Spaces around a stored value are what an
                // import left behind, and the database's own queries compare with the bare
                // value (every airport code of Spider's flight_2 is stored as `' APG'` and its
                // reference queries say `'APG'`): such a value is left to them.
                return match result.rows.as_slice() {
                    [row] => match row.as_slice() {
                        [Value::Text(value)] if value.trim() != literal => {
                            Some(Fix::Value(value.clone()))
                        }
                        _ => None,
                    },
                    _ => None,
                };
            }
        }
        let others: Vec<String> = self
            .schema
            .table(table)?
            .columns
            .iter()
            .filter(|c| !c.name.eq_ignore_ascii_case(column))
            .map(|c| c.name.clone())
            .collect();
        let mut storing = Vec::new();
        for other in others {
            let found = self.rows(&format!(
                "SELECT 1 FROM {t} WHERE {c} = {text} LIMIT 1",
                c = self.dialect.quote(&other)
            ));
            if found.is_some_and(|n| n > 0) {
                storing.push(other);
            }
        }
        match <[String; 1]>::try_from(storing) {
            Ok([other]) => Some(Fix::Column(other)),
            Err(_) => None,
        }
    }

    /// Rows a lookup returned; `None` when it failed (a column of another type, say).
    fn rows(&mut self, sql: &str) -> Option<usize> {
        self.session.execute(sql).ok().map(|r| r.rows.len())
    }

    /// A column name as this dialect must write it ([`Dialect::needs_quotes`]).
    fn ident(&self, name: &str) -> Ident {
        if self.dialect.needs_quotes(name) {
            Ident::with_quote(self.dialect.name_quote(), name)
        } else {
            Ident::new(name)
        }
    }
}

/// The text of a single-quoted string literal.
fn text_literal(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Value(v) => match &v.value {
            SqlValue::SingleQuotedString(s) => Some(s.clone()),
            _ => None,
        },
        Expr::Nested(inner) => text_literal(inner),
        _ => None,
    }
}

/// `column` (a bare or qualified name) pointed at `name`, its qualifier kept.
fn rename_column(column: &mut Expr, name: Ident) {
    match column {
        Expr::Identifier(ident) => *ident = name,
        Expr::CompoundIdentifier(parts) => {
            if let Some(last) = parts.last_mut() {
                *last = name;
            }
        }
        Expr::Nested(inner) => rename_column(inner, name),
        _ => {}
    }
}

/// `text` as an SQL string literal.
fn sql_string(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Sandbox;
    use crate::spider_fixture::spider_db;

    fn respell(db: &str, sql: &str) -> Option<String> {
        let path = spider_db(db);
        let schema = Schema::from_sqlite(&path, db, Default::default()).expect("introspects");
        let mut sandbox = Sandbox::open(&path, Default::default()).expect("opens");
        respell_values(sql, &schema, &mut sandbox)
    }

    #[test]
    fn a_value_spelt_another_way_takes_the_columns_spelling() {
        assert_eq!(
            respell(
                "student_transcripts_tracking",
                "SELECT T1.last_name FROM Students AS T1 JOIN Addresses AS T2 \
                 ON T1.current_address_id = T2.address_id \
                 WHERE T2.state_province_county = 'North Carolina'"
            )
            .as_deref(),
            Some(
                "SELECT T1.last_name FROM Students AS T1 JOIN Addresses AS T2 \
                 ON T1.current_address_id = T2.address_id \
                 WHERE T2.state_province_county = 'NorthCarolina'"
            )
        );
        // Case alone, the value on the left, a bare column.
        assert_eq!(
            respell(
                "world_1",
                "SELECT count(*) FROM country WHERE 'north america' = Continent"
            )
            .as_deref(),
            Some("SELECT count(*) FROM country WHERE 'North America' = Continent")
        );
    }

    #[test]
    fn a_value_another_column_of_the_table_stores_moves_there() {
        assert_eq!(
            respell(
                "world_1",
                "SELECT COUNT(DISTINCT GovernmentForm) FROM country WHERE Region = 'Africa'"
            )
            .as_deref(),
            Some("SELECT COUNT(DISTINCT GovernmentForm) FROM country WHERE Continent = 'Africa'")
        );
    }

    #[test]
    fn stored_values_and_unclear_cases_are_left_alone() {
        for (db, sql) in [
            // Stored as written: the empty result is the answer.
            (
                "world_1",
                "SELECT Name FROM country WHERE Continent = 'Europe' AND Population = 80000",
            ),
            // Stored but for the spaces around it (flight_2 keeps its codes as ' APG').
            (
                "flight_2",
                "SELECT FlightNo FROM flights WHERE DestAirport = 'APG'",
            ),
            // Stored nowhere in the table.
            (
                "world_1",
                "SELECT Name FROM country WHERE Continent = 'Atlantis'",
            ),
            // A column the query's tables do not resolve to one table.
            (
                "world_1",
                "SELECT city.Name FROM city JOIN country ON city.CountryCode = country.Code WHERE Name = 'Kabul'",
            ),
            // Not a query.
            ("world_1", "DELETE FROM country WHERE Region = 'Africa'"),
        ] {
            assert_eq!(respell(db, sql), None, "{sql}");
        }
    }

    #[test]
    fn nothing_is_no_rows_or_one_row_of_zeros() {
        let result = |rows: Vec<Vec<Value>>| QueryResult {
            columns: vec!["x".into()],
            rows,
            truncated: false,
            elapsed: Default::default(),
        };
        assert!(finds_nothing(&result(vec![])));
        assert!(finds_nothing(&result(vec![vec![
            Value::Integer(0),
            Value::Null
        ]])));
        assert!(!finds_nothing(&result(vec![vec![Value::Integer(3)]])));
        assert!(!finds_nothing(&result(vec![vec![Value::Text("a".into())]])));
        assert!(!finds_nothing(&result(vec![
            vec![Value::Integer(0)],
            vec![Value::Integer(0)]
        ])));
    }
}
