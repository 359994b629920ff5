//! SQLite's loose typing, read by a server that types its operators: models trained on Spider
//! compare a boolean column with `1` or `0` (SQLite stores booleans as integers) and match a
//! date or a number with `LIKE '2022%'` (SQLite stores dates as text and compares anything as
//! text). PostgreSQL refuses both (`operator does not exist: boolean = integer`, `date ~~
//! unknown`), DuckDB the second. Rewritten from the schema's declared types: the integer
//! becomes `TRUE` or `FALSE`, the matched column is cast to text (whose form, `2022-04-01`, is
//! the one the pattern was written for). Nothing else in the query changes.

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, CastKind, DataType, Expr, Statement, Value as SqlValue, VisitMut, VisitorMut,
};
use sqlparser::parser::Parser;

use crate::schema::Schema;

/// `sql` with every comparison (`=`, `<>`) of a boolean column with the integer `1` or `0`
/// written with `TRUE` or `FALSE`; `None` when `sql` does not parse or has none.
pub fn booleans_as_booleans(sql: &str, schema: &Schema) -> Option<String> {
    rewrite(sql, schema, Rewrite::Booleans)
}

/// `sql` with the column of every `LIKE`/`ILIKE` whose declared type is not text cast to text;
/// `None` when `sql` does not parse or has none.
pub fn like_over_text(sql: &str, schema: &Schema) -> Option<String> {
    rewrite(sql, schema, Rewrite::LikeOverText)
}

#[derive(Clone, Copy)]
enum Rewrite {
    Booleans,
    LikeOverText,
}

fn rewrite(sql: &str, schema: &Schema, rewrite: Rewrite) -> Option<String> {
    let mut statements: Vec<Statement> =
        Parser::parse_sql(schema.dialect.parser().as_ref(), sql).ok()?;
    let mut visitor = Retyper {
        schema,
        rewrite,
        changed: 0,
    };
    let _ = statements.visit(&mut visitor);
    if visitor.changed == 0 {
        return None;
    }
    Some(
        statements
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    )
}

struct Retyper<'a> {
    schema: &'a Schema,
    rewrite: Rewrite,
    changed: usize,
}

impl VisitorMut for Retyper<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match (self.rewrite, expr) {
            (
                Rewrite::Booleans,
                Expr::BinaryOp {
                    left,
                    op: BinaryOperator::Eq | BinaryOperator::NotEq,
                    right,
                },
            ) => {
                let is_boolean = |column: &Expr| {
                    self.declared_types(column)
                        .is_some_and(|types| types.iter().all(|t| t.contains("bool")))
                };
                let literal = if is_boolean(left) {
                    right
                } else if is_boolean(right) {
                    left
                } else {
                    return ControlFlow::Continue(());
                };
                if let Some(truth) = zero_or_one(literal) {
                    **literal = Expr::value(SqlValue::Boolean(truth));
                    self.changed += 1;
                }
            }
            (
                Rewrite::LikeOverText,
                Expr::Like { expr: matched, .. } | Expr::ILike { expr: matched, .. },
            ) => {
                let not_text = self
                    .declared_types(matched)
                    .is_some_and(|types| types.iter().all(|t| !is_text_type(t)));
                if not_text {
                    let column = std::mem::replace(&mut **matched, Expr::value(SqlValue::Null));
                    **matched = Expr::Cast {
                        kind: CastKind::Cast,
                        expr: Box::new(column),
                        data_type: DataType::Text,
                        format: None,
                    };
                    self.changed += 1;
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

impl Retyper<'_> {
    /// The declared types (lower-cased) of every column of the schema that a column reference
    /// can name: its table is not resolved, so a name is typed only where all its columns
    /// agree. `None` for anything but a column reference the schema knows.
    fn declared_types(&self, expr: &Expr) -> Option<Vec<String>> {
        let name = match expr {
            Expr::Identifier(ident) => &ident.value,
            Expr::CompoundIdentifier(parts) => &parts.last()?.value,
            _ => return None,
        };
        let types: Vec<String> = self
            .schema
            .tables
            .iter()
            .filter_map(|t| t.column(name))
            .map(|c| c.declared_type.to_lowercase())
            .collect();
        (!types.is_empty()).then_some(types)
    }
}

/// `true` for the literal `1`, `false` for `0`.
fn zero_or_one(expr: &Expr) -> Option<bool> {
    match expr {
        Expr::Value(value) => match &value.value {
            SqlValue::Number(n, _) if n == "1" => Some(true),
            SqlValue::Number(n, _) if n == "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// A declared type a typed server reads as text: `text`, `varchar(20)`, `character varying`,
/// `char`, `string`, or none at all (SQLite's untyped columns). A date is not text here, as it
/// is for question masking (`linking::mask`), which asks what SQLite's cells can hold.
fn is_text_type(declared: &str) -> bool {
    declared.is_empty()
        || ["char", "text", "string", "clob"]
            .iter()
            .any(|t| declared.contains(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;
    use crate::schema::{Column, Table};

    fn column(name: &str, declared_type: &str) -> Column {
        Column {
            name: name.into(),
            declared_type: declared_type.into(),
            primary_key: false,
            comment: None,
            examples: Vec::new(),
        }
    }

    fn schema() -> Schema {
        Schema {
            db_id: "broker".into(),
            tables: vec![Table {
                name: "sbticker".into(),
                columns: vec![
                    column("sbtickerid", "integer"),
                    column("sbtickerisactive", "boolean"),
                    column("sbtickersymbol", "character varying(10)"),
                    column("sblistdate", "date"),
                    column("sbcode", "integer"),
                ],
                primary_key: vec!["sbtickerid".into()],
                rows: Vec::new(),
            }],
            foreign_keys: Vec::new(),
            dialect: Dialect::Postgres,
        }
    }

    #[test]
    fn a_boolean_column_compared_with_one_or_zero_reads_true_or_false() {
        let fixed = booleans_as_booleans(
            "SELECT t.sbtickersymbol FROM sbticker t WHERE t.sbtickerisactive = 1 \
             AND 0 <> sbtickerisactive AND t.sbcode = 1",
            &schema(),
        );
        assert_eq!(
            fixed.as_deref(),
            Some(
                "SELECT t.sbtickersymbol FROM sbticker t WHERE t.sbtickerisactive = true \
                 AND false <> sbtickerisactive AND t.sbcode = 1"
            )
        );
        assert_eq!(
            booleans_as_booleans("SELECT 1 FROM sbticker WHERE sbcode = 1", &schema()),
            None
        );
    }

    #[test]
    fn like_over_a_date_or_number_casts_it_and_leaves_text_alone() {
        let fixed = like_over_text(
            "SELECT count(*) FROM sbticker WHERE sblistdate LIKE '2022%' \
             AND sbtickersymbol LIKE 'A%' AND sbcode NOT ILIKE '1%'",
            &schema(),
        );
        assert_eq!(
            fixed.as_deref(),
            Some(
                "SELECT count(*) FROM sbticker WHERE CAST(sblistdate AS TEXT) LIKE '2022%' \
                 AND sbtickersymbol LIKE 'A%' AND CAST(sbcode AS TEXT) NOT ILIKE '1%'"
            )
        );
        assert_eq!(
            like_over_text(
                "SELECT 1 FROM sbticker WHERE sbtickersymbol LIKE 'A%'",
                &schema()
            ),
            None
        );
        assert_eq!(like_over_text("SELECT FROM WHERE", &schema()), None);
    }
}
