//! SQL written for SQLite, read by PostgreSQL: the SQLite habits of Spider's gold queries (and
//! of models trained on them) that change a query's validity or meaning there, rewritten:
//! double-quoted strings, case-blind `LIKE`, and a `GROUP BY` that leaves selected columns out
//! (SQLite takes them from any row of the group; PostgreSQL refuses unless it can prove them
//! functionally dependent). The pipeline applies the last two to a candidate when PostgreSQL
//! refuses it for them. Whatever else a query needs is left alone, and its execution
//! error is counted by the evaluation.

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, GroupByExpr, OrderByKind, Query, SelectItem, SetExpr, VisitMut, VisitorMut,
};
use sqlparser::parser::Parser;

use crate::dialect::Dialect;
use crate::lexer::{LexKind, lex};
use crate::schema::Schema;

/// A Spider gold query for PostgreSQL: [`quote_and_like`], then [`complete_group_by`].
pub fn sqlite_gold_to_postgres(sql: &str) -> String {
    let quoted = quote_and_like(sql);
    complete_group_by(&quoted, Dialect::Postgres).unwrap_or(quoted)
}

/// `sql` with SQLite's double-quoted string literals as standard single-quoted ones (Spider
/// never quotes identifiers with `"`; the PostgreSQL copies have lower-case unquoted names) and
/// `LIKE` as `ILIKE` (SQLite's `LIKE` ignores ASCII case, PostgreSQL's does not).
pub fn quote_and_like(sql: &str) -> String {
    rescan(sql, &|_| true, true)
}

/// `sql` with every double-quoted token that names no table or column of `schema` as a string
/// literal: SQLite reads `WHERE country = "France"` as a string when no column is called
/// France, and models trained on Spider write it so; PostgreSQL reads a column name and fails.
/// `None` when nothing changed.
pub fn string_literals_for(sql: &str, schema: &Schema) -> Option<String> {
    let names_something = |word: &str| {
        schema.table(word).is_some()
            || schema
                .tables
                .iter()
                .any(|t| t.columns.iter().any(|c| c.name.eq_ignore_ascii_case(word)))
    };
    let aliases = quoted_aliases(sql);
    let out = rescan(
        sql,
        &|word| !names_something(word) && !aliases.iter().any(|a| a == word),
        false,
    );
    (out != sql).then_some(out)
}

/// The double-quoted names `sql` defines with `AS "name"`: they are identifiers wherever they
/// appear, though the schema does not know them.
fn quoted_aliases(sql: &str) -> Vec<String> {
    let mut aliases = Vec::new();
    let mut after_as = false;
    for lexeme in lex(sql) {
        if lexeme.kind == LexKind::Quoted('"') && after_as {
            aliases.push(lexeme.unquoted(sql).to_owned());
        }
        after_as = lexeme.kind == LexKind::Word && lexeme.text(sql).eq_ignore_ascii_case("as");
    }
    aliases
}

/// Copies `sql`, turning each double-quoted token for which `is_string` holds into a
/// single-quoted literal, and `LIKE` into `ILIKE` when `ilike`; everything else (single-quoted
/// literals, comments, blanks) is copied as it is.
fn rescan(sql: &str, is_string: &dyn Fn(&str) -> bool, ilike: bool) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut copied = 0;
    for lexeme in lex(sql) {
        let replacement = match lexeme.kind {
            LexKind::Quoted('"') if is_string(lexeme.unquoted(sql)) => {
                format!("'{}'", lexeme.unquoted(sql).replace('\'', "''"))
            }
            LexKind::Word if ilike && lexeme.text(sql).eq_ignore_ascii_case("like") => {
                "ILIKE".to_owned()
            }
            _ => continue,
        };
        out.push_str(&sql[copied..lexeme.start]);
        out.push_str(&replacement);
        copied = lexeme.end;
    }
    out.push_str(&sql[copied..]);
    out
}

/// `sql` with every plain column that a grouped query selects or orders by, and does not
/// group by, added to its `GROUP BY`: where the column is functionally dependent on the
/// groups (the usual case: a name beside its key) the groups and the answer do not change;
/// where it is not, SQLite's answer was an arbitrary row's. `None` when `sql` does not parse
/// or nothing was missing.
pub fn complete_group_by(sql: &str, dialect: Dialect) -> Option<String> {
    let mut statements = Parser::parse_sql(dialect.parser().as_ref(), sql).ok()?;
    let mut completer = GroupByCompleter { changed: false };
    let _ = statements.visit(&mut completer);
    if !completer.changed || statements.len() != 1 {
        return None;
    }
    Some(statements[0].to_string())
}

struct GroupByCompleter {
    changed: bool,
}

impl VisitorMut for GroupByCompleter {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let ordered: Vec<Expr> = match query.order_by.as_ref().map(|o| &o.kind) {
            Some(OrderByKind::Expressions(items)) => items.iter().map(|o| o.expr.clone()).collect(),
            _ => Vec::new(),
        };
        let SetExpr::Select(select) = query.body.as_mut() else {
            return ControlFlow::Continue(());
        };
        let GroupByExpr::Expressions(grouped, _) = &mut select.group_by else {
            return ControlFlow::Continue(());
        };
        if grouped.is_empty() {
            return ControlFlow::Continue(());
        }
        let mut aliases = Vec::new();
        let mut wanted: Vec<Expr> = Vec::new();
        for item in &select.projection {
            match item {
                SelectItem::UnnamedExpr(e) => wanted.push(e.clone()),
                SelectItem::ExprWithAlias { expr, alias } => {
                    aliases.push(alias.value.to_lowercase());
                    wanted.push(expr.clone());
                }
                _ => {}
            }
        }
        wanted.extend(ordered);
        for expr in wanted {
            let plain = matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_));
            let key = expr.to_string().to_lowercase();
            let is_alias =
                matches!(&expr, Expr::Identifier(i) if aliases.contains(&i.value.to_lowercase()));
            if plain && !is_alias && !grouped.iter().any(|g| g.to_string().to_lowercase() == key) {
                grouped.push(expr);
                self.changed = true;
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_quotes_and_like_are_rewritten_and_nothing_else() {
        assert_eq!(
            sqlite_gold_to_postgres(
                "SELECT name FROM pets WHERE PetType = \"dog\" AND name LIKE '%a\"b%' OR x like \"it's\""
            ),
            "SELECT name FROM pets WHERE PetType = 'dog' AND name ILIKE '%a\"b%' OR x ILIKE 'it''s'"
        );
        assert_eq!(
            sqlite_gold_to_postgres("SELECT unlikely, 'O''Neil' FROM t"),
            "SELECT unlikely, 'O''Neil' FROM t"
        );
    }

    #[test]
    fn double_quoted_values_become_strings_and_quoted_names_stay() {
        let schema = crate::prompt::fixture::schema("orchestra");
        assert_eq!(
            string_literals_for(
                "SELECT \"Name\" FROM conductor WHERE Nationality != \"USA\" AND x = 'a\"b'",
                &schema
            )
            .as_deref(),
            Some("SELECT \"Name\" FROM conductor WHERE Nationality != 'USA' AND x = 'a\"b'")
        );
        assert_eq!(
            string_literals_for("SELECT \"conductor\".name FROM conductor", &schema),
            None
        );
        // A quoted alias stays a name where it is used.
        assert_eq!(
            string_literals_for(
                "SELECT Nationality AS \"land\", count(*) FROM conductor WHERE Name = \"Ed\" GROUP BY \"land\"",
                &schema
            )
            .as_deref(),
            Some("SELECT Nationality AS \"land\", count(*) FROM conductor WHERE Name = 'Ed' GROUP BY \"land\"")
        );
        assert_eq!(
            string_literals_for("SELECT 1 FROM t WHERE a = \"O'Neil\"", &schema).as_deref(),
            Some("SELECT 1 FROM t WHERE a = 'O''Neil'")
        );
    }

    #[test]
    fn grouped_queries_group_by_what_they_select_and_order_by() {
        assert_eq!(
            complete_group_by(
                "SELECT t1.name, count(*) FROM employee AS t1 JOIN evaluation AS t2 ON t1.id = t2.id GROUP BY t2.id ORDER BY count(*) DESC LIMIT 1",
                Dialect::Postgres
            )
            .as_deref(),
            Some(
                "SELECT t1.name, count(*) FROM employee AS t1 JOIN evaluation AS t2 ON t1.id = t2.id GROUP BY t2.id, t1.name ORDER BY count(*) DESC LIMIT 1"
            )
        );
        // In a subquery too; aliases and aggregates are not columns to group by.
        assert_eq!(
            complete_group_by(
                "SELECT a FROM t WHERE b IN (SELECT b FROM u GROUP BY c ORDER BY n)",
                Dialect::Postgres
            )
            .as_deref(),
            Some("SELECT a FROM t WHERE b IN (SELECT b FROM u GROUP BY c, b, n ORDER BY n)")
        );
        assert_eq!(
            complete_group_by(
                "SELECT c AS k, max(x) FROM t GROUP BY c ORDER BY k",
                Dialect::Postgres
            ),
            None
        );
        assert_eq!(
            complete_group_by("SELECT a FROM t", Dialect::Postgres),
            None
        );
    }
}
