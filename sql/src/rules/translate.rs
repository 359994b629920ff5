//! SQL written for SQLite, read by PostgreSQL: the SQLite habits of Spider's gold queries (and
//! of models trained on them) that change a query's validity or meaning there, rewritten:
//! double-quoted strings, case-blind `LIKE`, a `GROUP BY` that leaves selected columns out
//! (SQLite takes them from any row of the group; PostgreSQL refuses unless it can prove them
//! functionally dependent), a bare column beside `min`/`max` with no `GROUP BY` (SQLite takes
//! it from the row holding the extreme), and a subquery in `FROM` without an alias (which
//! PostgreSQL before 16 refuses). The pipeline applies the last four to a candidate when
//! PostgreSQL refuses it for them. Whatever else a query needs is left alone, and its execution
//! error is counted by the evaluation.

use std::ops::ControlFlow;

use sqlparser::ast::{
    Distinct, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident,
    OrderByKind, Query, SelectItem, SetExpr, Statement, TableAlias, TableFactor, VisitMut,
    VisitorMut,
};
use sqlparser::parser::Parser;

use crate::dialect::Dialect;
use crate::lexer::{LexKind, lex};
use crate::rules::typed_comparisons::{booleans_as_booleans, like_over_text};
use crate::schema::Schema;

/// A Spider gold query (written for SQLite) as a server of `dialect` reads it: unchanged on
/// SQLite, [`sqlite_gold_to_postgres`] on PostgreSQL and DuckDB (which reads PostgreSQL's
/// spelling: `ILIKE`, `DISTINCT ON`, single quotes), [`sqlite_gold_to_mysql`] on MySQL.
pub fn sqlite_gold_for(dialect: Dialect, sql: &str) -> String {
    match dialect {
        Dialect::Sqlite => sql.to_owned(),
        Dialect::Postgres | Dialect::DuckDb => sqlite_gold_to_postgres(sql),
        Dialect::MySql => sqlite_gold_to_mysql(sql),
    }
}

/// A Spider gold query for MySQL and MariaDB, which read SQLite's double-quoted strings and
/// case-blind `LIKE` (under the loader's settings) as SQLite does, but not two spellings of
/// it: a built-in function's name apart from its parenthesis (`COUNT (*)`, a syntax error
/// unless `IGNORE_SPACE` is set) is joined to it, and a subquery in `FROM` gets a name
/// ([`alias_derived_tables`]; error 1248, 1064 on MariaDB).
pub fn sqlite_gold_to_mysql(sql: &str) -> String {
    let joined = functions_joined_to_parentheses(sql);
    alias_derived_tables(&joined, Dialect::MySql).unwrap_or(joined)
}

/// MySQL's functions whose name must touch its `(` (the manual's "Function Name Parsing and
/// Resolution": the aggregates and the functions parsed specially), as far as Spider's SQL
/// uses them.
const NAME_TOUCHES_PARENTHESIS: [&str; 12] = [
    "avg",
    "count",
    "max",
    "min",
    "sum",
    "cast",
    "extract",
    "group_concat",
    "substr",
    "substring",
    "trim",
    "now",
];

/// `sql` with the space between a [`NAME_TOUCHES_PARENTHESIS`] function and its `(` removed.
fn functions_joined_to_parentheses(sql: &str) -> String {
    let lexemes = lex(sql);
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0;
    for pair in lexemes.windows(2) {
        let (name, next) = (pair[0], pair[1]);
        if name.kind == LexKind::Word
            && next.text(sql) == "("
            && next.start > name.end
            && NAME_TOUCHES_PARENTHESIS.contains(&name.text(sql).to_ascii_lowercase().as_str())
        {
            out.push_str(&sql[copied..name.end]);
            copied = next.start;
        }
    }
    out.push_str(&sql[copied..]);
    out
}

/// A Spider gold query for PostgreSQL: [`quote_and_like`], then [`extreme_row`] or else
/// [`complete_group_by`], then [`alias_derived_tables`].
pub fn sqlite_gold_to_postgres(sql: &str) -> String {
    let quoted = quote_and_like(sql);
    let grouped = extreme_row(&quoted, Dialect::Postgres)
        .or_else(|| complete_group_by(&quoted, Dialect::Postgres))
        .unwrap_or(quoted);
    alias_derived_tables(&grouped, Dialect::Postgres).unwrap_or(grouped)
}

/// `sql` with SQLite's double-quoted string literals as standard single-quoted ones (Spider
/// never quotes identifiers with `"`; the PostgreSQL copies have lower-case unquoted names) and
/// `LIKE` as `ILIKE` (SQLite's `LIKE` ignores ASCII case, PostgreSQL's does not).
pub fn quote_and_like(sql: &str) -> String {
    rescan(sql, &|_| true, true)
}

/// `sql` with every `LIKE` as `ILIKE`, for a server whose `LIKE` minds case: a query written
/// for SQLite's `LIKE` (which ignores ASCII case) keeps its meaning there.
pub fn like_ignoring_case(sql: &str) -> String {
    rescan(sql, &|_| false, true)
}

/// The SQLite habits of models trained on Spider that a database server refuses, rewritten
/// from the server's error `message`. PostgreSQL: a selected column that the query neither
/// groups by nor aggregates (SQLSTATE 42803: beside one `min` or `max`, the row holding it is
/// asked for, [`extreme_row`]; otherwise the column is added to the `GROUP BY`,
/// [`complete_group_by`]), a subquery in `FROM` with no name (SQLSTATE 42601,
/// [`alias_derived_tables`]), and a string in double quotes, read as a column that does not
/// exist ([`string_literals_for`]). MySQL: the same `GROUP BY` under `ONLY_FULL_GROUP_BY`
/// (error 1055, MySQL 8's default), completed, and the unnamed subquery (error 1248; 1064 on
/// MariaDB). DuckDB: the `GROUP BY` and the double-quoted string, as on PostgreSQL (it reads
/// `DISTINCT ON` too). PostgreSQL and DuckDB: SQLite's loose typing, a boolean compared with
/// `1`/`0` and `LIKE` over a date or number ([`crate::rules::typed_comparisons`]).
pub fn repair_for_server(sql: &str, message: &str, schema: &Schema) -> Option<String> {
    let dialect = schema.dialect;
    if matches!(dialect, Dialect::Postgres | Dialect::DuckDb) {
        // PostgreSQL: `operator does not exist: boolean = integer`, `date ~~ unknown`; DuckDB:
        // `No function matches ... '~~(DATE, STRING_LITERAL)'`.
        let refused_operator =
            message.contains("operator does not exist") || message.contains("No function matches");
        if refused_operator && message.contains("~~") {
            return like_over_text(sql, schema);
        }
        if refused_operator && message.to_lowercase().contains("boolean") {
            return booleans_as_booleans(sql, schema);
        }
    }
    let (partial_group_by, unnamed_subquery) = match dialect {
        Dialect::Sqlite => return None,
        Dialect::Postgres => (
            message.contains("SQLSTATE 42803"),
            message.contains("must have an alias"),
        ),
        // MariaDB reports the unnamed subquery as a plain syntax error (1064), MySQL as 1248;
        // `alias_derived_tables` finds nothing to name in any other syntax error.
        Dialect::MySql => (
            message.contains("MySQL error 1055"),
            message.contains("MySQL error 1248") || message.contains("MySQL error 1064"),
        ),
        // DuckDB names every subquery in FROM itself.
        Dialect::DuckDb => (
            message.contains("must appear in the GROUP BY clause"),
            false,
        ),
    };
    if partial_group_by && matches!(dialect, Dialect::Postgres | Dialect::DuckDb) {
        extreme_row(sql, dialect).or_else(|| complete_group_by(sql, dialect))
    } else if partial_group_by {
        // `extreme_row` writes PostgreSQL's `DISTINCT ON`, which MySQL does not read.
        complete_group_by(sql, dialect)
    } else if unnamed_subquery {
        alias_derived_tables(sql, dialect)
    } else if dialect.double_quotes_name() && message.contains("no such column: ") {
        string_literals_for(sql, schema)
    } else {
        None
    }
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

/// `sql` with a name given to every subquery in `FROM` that has none (`derived_1`, ...):
/// SQLite and PostgreSQL 16 accept `SELECT count(*) FROM (SELECT ...)`, PostgreSQL 15 does
/// not (SQLSTATE 42601). `None` when every derived table is named already.
pub fn alias_derived_tables(sql: &str, dialect: Dialect) -> Option<String> {
    let mut statements = Parser::parse_sql(dialect.parser().as_ref(), sql).ok()?;
    let mut namer = DerivedTableNamer { named: 0 };
    let _ = statements.visit(&mut namer);
    if namer.named == 0 || statements.len() != 1 {
        return None;
    }
    Some(statements[0].to_string())
}

struct DerivedTableNamer {
    named: usize,
}

impl VisitorMut for DerivedTableNamer {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Derived {
            alias: alias @ None,
            ..
        } = factor
        {
            self.named += 1;
            *alias = Some(TableAlias {
                explicit: true,
                name: Ident::new(format!("derived_{}", self.named)),
                columns: Vec::new(),
                at: None,
            });
        }
        ControlFlow::Continue(())
    }
}

/// SQLite's reading of `SELECT min(price), name FROM t [WHERE ...] [GROUP BY k]`: the other
/// columns come from the row that holds the minimum (or maximum), of the table or of each
/// group. PostgreSQL refuses the bare column (SQLSTATE 42803), so that row is asked for
/// directly: `SELECT price, name FROM t ... ORDER BY price ASC NULLS LAST LIMIT 1`, or per
/// group `SELECT DISTINCT ON (k) price, name FROM t ... ORDER BY k, price ASC NULLS LAST`
/// (`min` and `max` skip NULLs, so NULLs sort last either way). Only for a top-level `SELECT`
/// with one `min` or `max` of a column, every other item a plain column (one at least neither
/// grouped nor aggregated), and no `HAVING`, `DISTINCT`, `ORDER BY` or `LIMIT`; `None`
/// otherwise. (On no rows SQLite answers one row of NULLs without a `GROUP BY`, the rewrite
/// none.)
pub fn extreme_row(sql: &str, dialect: Dialect) -> Option<String> {
    let mut statements = Parser::parse_sql(dialect.parser().as_ref(), sql).ok()?;
    let [Statement::Query(query)] = statements.as_mut_slice() else {
        return None;
    };
    if query.order_by.is_some() || query.limit_clause.is_some() || query.with.is_some() {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    let GroupByExpr::Expressions(grouped, modifiers) = &select.group_by else {
        return None;
    };
    if !modifiers.is_empty() || select.having.is_some() || select.distinct.is_some() {
        return None;
    }
    let keys: Vec<Expr> = grouped.clone();
    let key_texts: Vec<String> = keys.iter().map(|k| k.to_string().to_lowercase()).collect();
    let is_column = |e: &Expr| matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_));
    let mut extreme = None;
    let mut bare_columns = 0;
    for item in select.projection.iter_mut() {
        let (SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. }) = item else {
            return None;
        };
        if is_column(expr) {
            if !key_texts.contains(&expr.to_string().to_lowercase()) {
                bare_columns += 1;
            }
            continue;
        }
        let (direction, column) = min_or_max_of_column(expr)?;
        if extreme.is_some() || !is_column(&column) {
            return None;
        }
        extreme = Some((direction, column.to_string()));
        *expr = column;
    }
    let (direction, column) = extreme?;
    if bare_columns == 0 {
        return None;
    }
    if keys.is_empty() {
        return Some(format!(
            "{} ORDER BY {column} {direction} NULLS LAST LIMIT 1",
            statements[0]
        ));
    }
    select.group_by = GroupByExpr::Expressions(Vec::new(), Vec::new());
    select.distinct = Some(Distinct::On(keys.clone()));
    let keys: Vec<String> = keys.iter().map(Expr::to_string).collect();
    Some(format!(
        "{} ORDER BY {}, {column} {direction} NULLS LAST",
        statements[0],
        keys.join(", ")
    ))
}

/// `("ASC", x)` for `min(x)`, `("DESC", x)` for `max(x)`; `None` for anything else.
fn min_or_max_of_column(expr: &Expr) -> Option<(&'static str, Expr)> {
    let Expr::Function(function) = expr else {
        return None;
    };
    let direction = match function.name.to_string().to_lowercase().as_str() {
        "min" => "ASC",
        "max" => "DESC",
        _ => return None,
    };
    let FunctionArguments::List(list) = &function.args else {
        return None;
    };
    if list.duplicate_treatment.is_some()
        || !list.clauses.is_empty()
        || function.over.is_some()
        || function.filter.is_some()
    {
        return None;
    }
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(argument))] => {
            Some((direction, argument.clone()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mysql_gold_joins_functions_to_parentheses_and_names_subqueries() {
        assert_eq!(
            sqlite_gold_to_mysql(
                "SELECT name FROM t GROUP BY name ORDER BY COUNT (*) DESC, sum  (x) LIMIT 1"
            ),
            "SELECT name FROM t GROUP BY name ORDER BY COUNT(*) DESC, sum(x) LIMIT 1"
        );
        // Names of other functions, words before a parenthesis and strings stay as written.
        assert_eq!(
            sqlite_gold_to_mysql("SELECT x FROM t WHERE y IN (1) AND z = 'count (*)'"),
            "SELECT x FROM t WHERE y IN (1) AND z = 'count (*)'"
        );
        assert_eq!(
            sqlite_gold_to_mysql(
                "SELECT COUNT(*) FROM (SELECT a FROM t WHERE b = \"x\" INTERSECT SELECT a FROM u)"
            ),
            "SELECT COUNT(*) FROM (SELECT a FROM t WHERE b = \"x\" INTERSECT SELECT a FROM u) AS derived_1"
        );
        assert_eq!(
            sqlite_gold_for(Dialect::Sqlite, "SELECT COUNT (*) FROM t"),
            "SELECT COUNT (*) FROM t"
        );
    }

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

    #[test]
    fn subqueries_in_from_get_names() {
        assert_eq!(
            alias_derived_tables(
                "SELECT count(*) FROM (SELECT a FROM t INTERSECT SELECT a FROM u)",
                Dialect::Postgres
            )
            .as_deref(),
            Some("SELECT count(*) FROM (SELECT a FROM t INTERSECT SELECT a FROM u) AS derived_1")
        );
        assert_eq!(
            alias_derived_tables(
                "SELECT count(*) FROM (SELECT a FROM t) AS s",
                Dialect::Postgres
            ),
            None
        );
        // The gold translation applies it after the quotes.
        assert_eq!(
            sqlite_gold_to_postgres("SELECT count(*) FROM (SELECT a FROM t WHERE b = \"x\")"),
            "SELECT count(*) FROM (SELECT a FROM t WHERE b = 'x') AS derived_1"
        );
    }

    #[test]
    fn a_bare_column_beside_min_or_max_asks_for_the_extreme_row() {
        assert_eq!(
            extreme_row(
                "SELECT min(Version_Number), template_type_code FROM Templates",
                Dialect::Postgres
            )
            .as_deref(),
            Some(
                "SELECT Version_Number, template_type_code FROM Templates ORDER BY Version_Number ASC NULLS LAST LIMIT 1"
            )
        );
        assert_eq!(
            extreme_row(
                "SELECT name, max(t.age) AS oldest FROM t WHERE x > 1",
                Dialect::Postgres
            )
            .as_deref(),
            Some(
                "SELECT name, t.age AS oldest FROM t WHERE x > 1 ORDER BY t.age DESC NULLS LAST LIMIT 1"
            )
        );
        // Per group: the row holding each group's extreme.
        assert_eq!(
            extreme_row(
                "SELECT LANGUAGE, CountryCode, max(Percentage) FROM countrylanguage GROUP BY CountryCode",
                Dialect::Postgres
            )
            .as_deref(),
            Some(
                "SELECT DISTINCT ON (CountryCode) LANGUAGE, CountryCode, Percentage FROM countrylanguage ORDER BY CountryCode, Percentage DESC NULLS LAST"
            )
        );
        for untouched in [
            "SELECT min(a) FROM t",
            "SELECT min(a), max(b), c FROM t",
            "SELECT min(a), c FROM t GROUP BY c",
            "SELECT min(a), c FROM t GROUP BY d HAVING count(*) > 1",
            "SELECT min(a), c FROM t GROUP BY d ORDER BY c",
            "SELECT min(a + 1), c FROM t",
            "SELECT count(*), c FROM t",
            "SELECT min(a), c FROM t ORDER BY c LIMIT 3",
            "SELECT DISTINCT min(a), c FROM t",
        ] {
            assert_eq!(
                extreme_row(untouched, Dialect::Postgres),
                None,
                "{untouched}"
            );
        }
    }

    #[test]
    fn server_errors_choose_their_rewrite() {
        let mut schema = Schema {
            db_id: "t".into(),
            tables: Vec::new(),
            foreign_keys: Vec::new(),
            dialect: Dialect::MySql,
        };
        let grouped = "SELECT name, count(*) FROM t GROUP BY id";
        let mysql_1055 = "MySQL error 1055: 'x.t.name' isn't in GROUP BY";
        assert_eq!(
            repair_for_server(grouped, mysql_1055, &schema).as_deref(),
            Some("SELECT name, count(*) FROM t GROUP BY id, name")
        );
        let unnamed = "SELECT count(*) FROM (SELECT a FROM t)";
        let fixed = repair_for_server(
            unnamed,
            "MySQL error 1248: Every derived table must have its own alias",
            &schema,
        )
        .expect("named");
        assert!(fixed.contains(") AS "), "{fixed}");
        assert_eq!(repair_for_server(grouped, "SQLSTATE 42803", &schema), None);
        schema.dialect = Dialect::Postgres;
        assert!(repair_for_server(grouped, "(SQLSTATE 42803)", &schema).is_some());
        schema.dialect = Dialect::DuckDb;
        let duckdb = "DuckDB error: Binder Error: column \"name\" must appear in the GROUP BY \
                      clause or must be part of an aggregate function.";
        assert_eq!(
            repair_for_server(grouped, duckdb, &schema).as_deref(),
            Some("SELECT name, count(*) FROM t GROUP BY id, name")
        );
        assert_eq!(repair_for_server(unnamed, duckdb, &schema), None);
        schema.dialect = Dialect::Sqlite;
        assert_eq!(repair_for_server(grouped, mysql_1055, &schema), None);
    }

    #[test]
    fn like_ignoring_case_changes_only_the_operator() {
        assert_eq!(
            like_ignoring_case(
                "SELECT name FROM t WHERE name LIKE 'J%' AND note NOT like '%\"like\"%' -- like"
            ),
            "SELECT name FROM t WHERE name ILIKE 'J%' AND note NOT ILIKE '%\"like\"%' -- like"
        );
        assert_eq!(
            like_ignoring_case("SELECT \"like\" FROM t"),
            "SELECT \"like\" FROM t"
        );
        assert!(Dialect::Postgres.like_minds_case() && Dialect::DuckDb.like_minds_case());
        assert!(!Dialect::Sqlite.like_minds_case() && !Dialect::MySql.like_minds_case());
    }

    #[test]
    fn typed_servers_get_booleans_and_text_for_like() {
        let mut schema = Schema {
            db_id: "t".into(),
            tables: vec![crate::schema::Table {
                name: "t".into(),
                columns: ["id integer", "active boolean", "joined date"]
                    .iter()
                    .map(|c| {
                        let (name, ty) = c.split_once(' ').expect("name and type");
                        crate::schema::Column {
                            name: name.into(),
                            declared_type: ty.into(),
                            primary_key: false,
                            comment: None,
                            examples: Vec::new(),
                        }
                    })
                    .collect(),
                primary_key: vec!["id".into()],
                rows: Vec::new(),
            }],
            foreign_keys: Vec::new(),
            dialect: Dialect::Postgres,
        };
        let boolean = "SELECT id FROM t WHERE active = 1";
        let boolean_error =
            "SQL error: operator does not exist: boolean = integer (SQLSTATE 42883)";
        assert_eq!(
            repair_for_server(boolean, boolean_error, &schema).as_deref(),
            Some("SELECT id FROM t WHERE active = true")
        );
        let like = "SELECT id FROM t WHERE joined LIKE '2022%'";
        let like_error = "SQL error: operator does not exist: date ~~ unknown (SQLSTATE 42883)";
        assert_eq!(
            repair_for_server(like, like_error, &schema).as_deref(),
            Some("SELECT id FROM t WHERE CAST(joined AS TEXT) LIKE '2022%'")
        );
        schema.dialect = Dialect::DuckDb;
        let duckdb = "DuckDB error: Binder Error: No function matches the given name and argument \
                      types '~~(DATE, STRING_LITERAL)'.";
        assert!(repair_for_server(like, duckdb, &schema).is_some());
        schema.dialect = Dialect::Sqlite;
        assert_eq!(repair_for_server(like, like_error, &schema), None);
    }
}
