//! Table linking from a preliminary SQL (PET-SQL's PreSQL): the real tables a query reads,
//! mapped onto the schema's spelling, and the tables that own a column it names but none of
//! those tables has. Only tables are linked: column linking is too brittle for weak models,
//! and a missing column costs more than an extra one.
//!
//! The query is parsed with sqlparser's SQLite dialect and walked through CTEs, set
//! operations, joins, derived tables and subqueries in expressions; aliases never appear (the
//! walk reads table names, not qualifiers) and CTE names are excluded. SQL that does not parse
//! falls back to the tokens of the text that name schema tables, which keeps round 2 usable
//! when the model writes almost-SQL.

use std::collections::{HashMap, HashSet, VecDeque};

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, JoinConstraint,
    JoinOperator, ObjectName, OrderByKind, Query, Select, SelectItem, SetExpr, Statement,
    TableFactor, TableWithJoins,
};
use sqlparser::parser::Parser;

use crate::dialect::Dialect;
use crate::lexer::{LexKind, lex_with};
use crate::linking::skeleton::KEYWORDS;
use crate::schema::{Schema, Table};
use crate::words::{name_words, tokenize};

/// The tables linked to a SQL query, in schema order, spelled as in the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedTables {
    pub tables: Vec<String>,
    /// False when the SQL did not parse and the token fallback produced the tables.
    pub parsed: bool,
}

/// Links `sql` to the tables of `schema`. Names that are not schema tables are dropped.
pub fn link_tables(sql: &str, schema: &Schema) -> LinkedTables {
    let (names, parsed) = match referenced_tables_in(sql, schema.dialect) {
        Ok(names) => (names, true),
        Err(_) => (word_tokens(sql), false),
    };
    let wanted: HashSet<String> = names.iter().map(|n| n.to_lowercase()).collect();
    LinkedTables {
        tables: schema
            .table_names()
            .filter(|t| wanted.contains(&t.to_lowercase()))
            .map(str::to_owned)
            .collect(),
        parsed,
    }
}

/// The most schema tables a column name may belong to and still say which table a query
/// needs: a name most tables share (`id`, `name`) says nothing.
const MAX_COLUMN_OWNERS: usize = 2;

/// The tables, in schema order and not among `linked`, that own a column `sql` names which no
/// table of `linked` has. A weak model's PreSQL often reads the wrong table for a column
/// (`SELECT max(Horsepower) FROM car_names`, where only `cars_data` has `Horsepower`): the
/// query fails, but the column still says which table the question needs. Words come from the
/// scanner, so SQL that does not parse counts too; a word before `(` is a function, one after
/// `AS` an alias, SQL's keywords and table names are not columns, and a name that more than
/// [`MAX_COLUMN_OWNERS`] tables share is skipped. Strings are not names (`"dog"` is a value to
/// the models that write it), except on PostgreSQL and DuckDB, where double quotes always quote a
/// name.
pub fn tables_of_unplaced_columns(sql: &str, linked: &[String], schema: &Schema) -> Vec<String> {
    let is_linked = |t: &Table| linked.iter().any(|l| l.eq_ignore_ascii_case(&t.name));
    let lexemes = lex_with(sql, schema.dialect.quoting());
    let mut wanted = vec![false; schema.tables.len()];
    for (i, lexeme) in lexemes.iter().enumerate() {
        let name = match lexeme.kind {
            LexKind::Word => lexeme.text(sql),
            LexKind::Quoted('`' | '[') => lexeme.unquoted(sql),
            LexKind::Quoted('"') if schema.dialect.double_quotes_name() => lexeme.unquoted(sql),
            _ => continue,
        };
        let calls = lexemes.get(i + 1).is_some_and(|l| l.text(sql) == "(");
        let aliases = i
            .checked_sub(1)
            .is_some_and(|p| lexemes[p].text(sql).eq_ignore_ascii_case("as"));
        let keyword = KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(name));
        let placed = schema.tables.iter().any(|t| {
            t.name.eq_ignore_ascii_case(name) || (is_linked(t) && t.column(name).is_some())
        });
        if calls || aliases || keyword || placed {
            continue;
        }
        let owners: Vec<usize> = (0..schema.tables.len())
            .filter(|&t| schema.tables[t].column(name).is_some())
            .collect();
        if owners.len() <= MAX_COLUMN_OWNERS {
            for t in owners {
                wanted[t] = true;
            }
        }
    }
    schema
        .tables
        .iter()
        .zip(wanted)
        .filter(|(t, w)| *w && !is_linked(t))
        .map(|(t, _)| t.name.clone())
        .collect()
}

/// Words a question opens with as a command ("Show the names of…", "List…"): a table whose
/// whole name is one of them (orchestra's `show`) is not named by the command.
const COMMAND_WORDS: &[&str] = &["show", "list", "find", "give", "return", "count", "tell"];

/// The tables, in schema order and not among `linked`, whose whole name the question says as
/// words: `car_makers` in "the car maker General Motors", `performance` in "more than one
/// performance". Names are split at `_` and camel case and plurals meet singulars
/// ([`crate::words::name_words`]), the question's words singularized the same way. A PreSQL that
/// reads the wrong table for what the question names (`car_names` for "car maker") would
/// otherwise leave round 2 without the very table the question is about.
pub fn tables_named_in(question: &str, linked: &[String], schema: &Schema) -> Vec<String> {
    let words: Vec<String> = tokenize(question)
        .into_iter()
        .filter(|t| t.is_word)
        .map(|t| t.lemma)
        .collect();
    let said = format!(" {} ", words.join(" "));
    schema
        .tables
        .iter()
        .filter(|t| !linked.iter().any(|l| l.eq_ignore_ascii_case(&t.name)))
        .filter(|t| {
            let name = name_words(&t.name);
            !name.is_empty()
                && !COMMAND_WORDS.contains(&name.as_str())
                && said.contains(&format!(" {name} "))
        })
        .map(|t| t.name.clone())
        .collect()
}

/// The most tables [`with_join_paths`] adds to join two linked tables.
const MAX_BRIDGE: usize = 2;

/// `tables` (spelled as in `schema`) and the tables that join them. When the linked tables do
/// not form one connected piece of the foreign-key graph, the tables on a shortest foreign-key
/// path (at most [`MAX_BRIDGE`] in between) from the piece to each table left out are added,
/// in schema order. A PreSQL that reads `Pets` and `Student` but not `Has_Pet` has no way to
/// join them, and a round 2 shown only those two tables leaves the FinSQLs none either.
pub fn with_join_paths(tables: &[String], schema: &Schema) -> Vec<String> {
    let index: HashMap<String, usize> = schema
        .tables
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.to_lowercase(), i))
        .collect();
    let n = schema.tables.len();
    let mut adjacent = vec![Vec::new(); n];
    for fk in &schema.foreign_keys {
        let (Some(&a), Some(&b)) = (
            index.get(&fk.from_table.to_lowercase()),
            index.get(&fk.to_table.to_lowercase()),
        ) else {
            continue;
        };
        if a != b {
            adjacent[a].push(b);
            adjacent[b].push(a);
        }
    }
    let linked: Vec<usize> = tables
        .iter()
        .filter_map(|t| index.get(&t.to_lowercase()).copied())
        .collect();
    let Some(&first) = linked.first() else {
        return tables.to_vec();
    };
    let mut chosen = vec![false; n];
    for &t in &linked {
        chosen[t] = true;
    }
    // Linked tables that no short path joins: left as they are.
    let mut apart = vec![false; n];
    loop {
        // The chosen tables joined to the first linked one.
        let mut piece = vec![false; n];
        piece[first] = true;
        let mut stack = vec![first];
        while let Some(t) = stack.pop() {
            for &u in &adjacent[t] {
                if chosen[u] && !piece[u] {
                    piece[u] = true;
                    stack.push(u);
                }
            }
        }
        if linked.iter().all(|&t| piece[t] || apart[t]) {
            break;
        }
        // Breadth-first from the piece to the nearest linked table outside it.
        let mut parent: Vec<Option<usize>> = vec![None; n];
        let mut seen = piece.clone();
        let mut queue: VecDeque<usize> = (0..n).filter(|&t| piece[t]).collect();
        let mut target = None;
        'search: while let Some(t) = queue.pop_front() {
            for &u in &adjacent[t] {
                if seen[u] {
                    continue;
                }
                seen[u] = true;
                parent[u] = Some(t);
                if chosen[u] && !apart[u] {
                    target = Some(u);
                    break 'search;
                }
                queue.push_back(u);
            }
        }
        let Some(target) = target else {
            for &t in &linked {
                apart[t] |= !piece[t];
            }
            continue;
        };
        let mut bridge = Vec::new();
        let mut at = parent[target];
        while let Some(t) = at.filter(|&t| !piece[t]) {
            bridge.push(t);
            at = parent[t];
        }
        if bridge.len() > MAX_BRIDGE {
            apart[target] = true;
            continue;
        }
        for t in bridge {
            chosen[t] = true;
        }
    }
    schema
        .tables
        .iter()
        .zip(&chosen)
        .filter(|&(_, &c)| c)
        .map(|(t, _)| t.name.clone())
        .collect()
}

/// The unquoted names of the tables `sql` reads, in order of appearance and without
/// duplicates (compared case-insensitively), CTE names excluded. A schema-qualified name
/// (`main.t`) gives its last part.
pub fn referenced_tables(sql: &str) -> Result<Vec<String>, sqlparser::parser::ParserError> {
    referenced_tables_in(sql, Dialect::Sqlite)
}

/// [`referenced_tables`] read in `dialect`.
pub fn referenced_tables_in(
    sql: &str,
    dialect: Dialect,
) -> Result<Vec<String>, sqlparser::parser::ParserError> {
    let statements = Parser::parse_sql(dialect.parser().as_ref(), sql)?;
    let mut walk = Walk::default();
    for statement in &statements {
        if let Statement::Query(query) = statement {
            walk.query(query);
        }
    }
    let mut seen = HashSet::new();
    Ok(walk
        .tables
        .into_iter()
        .filter(|t| !walk.ctes.contains(&t.to_lowercase()))
        .filter(|t| seen.insert(t.to_lowercase()))
        .collect())
}

/// Runs of word characters: the fallback for SQL that does not parse.
fn word_tokens(sql: &str) -> Vec<String> {
    sql.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The `ON` condition of a join, whatever its kind.
pub(crate) fn join_condition(op: &JoinOperator) -> Option<&Expr> {
    match op {
        JoinOperator::Join(JoinConstraint::On(on))
        | JoinOperator::Inner(JoinConstraint::On(on))
        | JoinOperator::Left(JoinConstraint::On(on))
        | JoinOperator::LeftOuter(JoinConstraint::On(on))
        | JoinOperator::Right(JoinConstraint::On(on))
        | JoinOperator::RightOuter(JoinConstraint::On(on))
        | JoinOperator::FullOuter(JoinConstraint::On(on))
        | JoinOperator::CrossJoin(JoinConstraint::On(on)) => Some(on),
        _ => None,
    }
}

#[derive(Default)]
struct Walk {
    tables: Vec<String>,
    /// Lower-cased CTE names; excluded at the end, so that a reference met before its
    /// definition in the walk is excluded too.
    ctes: HashSet<String>,
}

impl Walk {
    fn query(&mut self, query: &Query) {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_lowercase());
                self.query(&cte.query);
            }
        }
        self.set_expr(&query.body);
        if let Some(order_by) = &query.order_by
            && let OrderByKind::Expressions(items) = &order_by.kind
        {
            for item in items {
                self.expr(&item.expr);
            }
        }
    }

    fn set_expr(&mut self, body: &SetExpr) {
        match body {
            SetExpr::Select(select) => self.select(select),
            SetExpr::Query(query) => self.query(query),
            SetExpr::SetOperation { left, right, .. } => {
                self.set_expr(left);
                self.set_expr(right);
            }
            SetExpr::Table(table) => {
                if let Some(name) = &table.table_name {
                    self.tables.push(name.clone());
                }
            }
            _ => {}
        }
    }

    fn select(&mut self, select: &Select) {
        for from in &select.from {
            self.table_with_joins(from);
        }
        for item in &select.projection {
            match item {
                SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                    self.expr(expr);
                }
                _ => {}
            }
        }
        let groups = match &select.group_by {
            GroupByExpr::Expressions(exprs, _) => exprs.as_slice(),
            GroupByExpr::All(_) => &[],
        };
        let clauses = select.selection.iter().chain(select.having.iter());
        for expr in clauses.chain(groups) {
            self.expr(expr);
        }
    }

    fn table_with_joins(&mut self, from: &TableWithJoins) {
        self.table_factor(&from.relation);
        for join in &from.joins {
            self.table_factor(&join.relation);
            if let Some(on) = join_condition(&join.join_operator) {
                self.expr(on);
            }
        }
    }

    fn table_factor(&mut self, factor: &TableFactor) {
        match factor {
            TableFactor::Table { name, .. } => self.push_name(name),
            TableFactor::Derived { subquery, .. } => self.query(subquery),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => self.table_with_joins(table_with_joins),
            _ => {}
        }
    }

    fn push_name(&mut self, name: &ObjectName) {
        if let Some(ident) = name.0.last().and_then(|part| part.as_ident()) {
            self.tables.push(ident.value.clone());
        }
    }

    /// Follows the expressions that can hold a subquery; the rest cannot read a table.
    fn expr(&mut self, expr: &Expr) {
        match expr {
            Expr::Subquery(query)
            | Expr::Exists {
                subquery: query, ..
            } => self.query(query),
            Expr::InSubquery { expr, subquery, .. } => {
                self.expr(expr);
                self.query(subquery);
            }
            Expr::BinaryOp { left, right, .. }
            | Expr::AnyOp { left, right, .. }
            | Expr::AllOp { left, right, .. }
            | Expr::IsDistinctFrom(left, right)
            | Expr::IsNotDistinctFrom(left, right) => {
                self.expr(left);
                self.expr(right);
            }
            Expr::Like { expr, pattern, .. }
            | Expr::ILike { expr, pattern, .. }
            | Expr::SimilarTo { expr, pattern, .. }
            | Expr::RLike { expr, pattern, .. } => {
                self.expr(expr);
                self.expr(pattern);
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                for e in [expr, low, high] {
                    self.expr(e);
                }
            }
            Expr::InList { expr, list, .. } => {
                self.expr(expr);
                list.iter().for_each(|e| self.expr(e));
            }
            Expr::Tuple(items) => items.iter().for_each(|e| self.expr(e)),
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                operand
                    .iter()
                    .chain(else_result.iter())
                    .for_each(|e| self.expr(e));
                for when in conditions {
                    self.expr(&when.condition);
                    self.expr(&when.result);
                }
            }
            Expr::Function(function) => self.function_args(&function.args),
            Expr::UnaryOp { expr, .. }
            | Expr::Nested(expr)
            | Expr::Cast { expr, .. }
            | Expr::Collate { expr, .. }
            | Expr::IsNull(expr)
            | Expr::IsNotNull(expr)
            | Expr::IsTrue(expr)
            | Expr::IsFalse(expr)
            | Expr::IsNotTrue(expr)
            | Expr::IsNotFalse(expr) => self.expr(expr),
            _ => {}
        }
    }

    fn function_args(&mut self, args: &FunctionArguments) {
        match args {
            FunctionArguments::Subquery(query) => self.query(query),
            FunctionArguments::List(list) => {
                for arg in &list.args {
                    let (FunctionArg::Named { arg, .. }
                    | FunctionArg::ExprNamed { arg, .. }
                    | FunctionArg::Unnamed(arg)) = arg;
                    if let FunctionArgExpr::Expr(expr) = arg {
                        self.expr(expr);
                    }
                }
            }
            FunctionArguments::None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::prompt::fixture::schema;
    use crate::schema::IntrospectOptions;
    use crate::spider_fixture::spider;

    fn linked(sql: &str, db: &str) -> (Vec<String>, bool) {
        let result = link_tables(sql, &schema(db));
        (result.tables, result.parsed)
    }

    fn unplaced(sql: &str, linked: &[&str], db: &str) -> Vec<String> {
        let linked: Vec<String> = linked.iter().map(|t| (*t).to_owned()).collect();
        tables_of_unplaced_columns(sql, &linked, &schema(db))
    }

    #[test]
    fn columns_the_linked_tables_lack_link_the_tables_that_own_them() {
        // Horsepower and Cylinders are cars_data's alone, Make is car_names' alone.
        let sql = "SELECT max(HORSEPOWER) , Make FROM model_list WHERE cylinders = 3";
        assert_eq!(
            unplaced(sql, &["model_list"], "car_1"),
            ["car_names", "cars_data"]
        );
        // SQL that does not parse still names its columns.
        let broken = "SELECT avg(edispl FROM car_makers WHERE maker = 'volvo";
        assert_eq!(unplaced(broken, &["car_makers"], "car_1"), ["cars_data"]);
        // Every column in place: nothing to add.
        let placed = "SELECT count(*) FROM car_makers WHERE Maker = 'volvo'";
        assert!(unplaced(placed, &["car_makers"], "car_1").is_empty());
    }

    #[test]
    fn aliases_strings_functions_and_shared_names_link_nothing() {
        // `horsepower` is an alias, `T1` a qualifier, "Weight" a string, `year(` a call.
        let sql = "SELECT T1.Model AS horsepower , year(T1.Make) FROM car_names AS T1 WHERE T1.Make = \"Weight\"";
        assert!(unplaced(sql, &["car_names"], "car_1").is_empty());
        // `id` is a column of all three of battle_death's tables: it says nothing.
        assert!(unplaced("SELECT id FROM battle", &["battle"], "battle_death").is_empty());
        // Without any linked table, a column owned by one table still links it.
        assert_eq!(
            unplaced("SELECT injured FROM nowhere", &[], "battle_death"),
            ["death"]
        );
    }

    fn named(question: &str, linked: &[&str], db: &str) -> Vec<String> {
        let linked: Vec<String> = linked.iter().map(|t| (*t).to_owned()).collect();
        tables_named_in(question, &linked, &schema(db))
    }

    #[test]
    fn tables_the_question_names_are_linked() {
        // "car maker" is `car_makers`, plural against singular and `_` against a space;
        // "car models" names no table (`model_list`, `car_names`).
        let question =
            "What is the number of car models created by the car maker American Motor Company?";
        assert_eq!(named(question, &["car_names"], "car_1"), ["car_makers"]);
        // Tables already linked are not repeated.
        assert!(named(question, &["car_makers", "car_names"], "car_1").is_empty());
        // A question that opens with "Show" does not name orchestra's `show`; "performance"
        // names `performance`.
        let question = "Show the years in which orchestras that have given more than one performance are founded.";
        assert_eq!(
            named(question, &["orchestra"], "orchestra"),
            ["performance"]
        );
        // Camel case and plurals: "TV channels" is `TV_Channel`.
        let question = "List the titles of cartoons on TV channels in English.";
        assert_eq!(named(question, &[], "tvshow"), ["TV_Channel", "Cartoon"]);
        // Part of a name is not the name: "template" alone is not `Ref_Template_Types`.
        let question = "Return the ids of templates with the description 'Presentation'.";
        assert_eq!(named(question, &[], "cre_Doc_Template_Mgt"), ["Templates"]);
    }

    #[test]
    fn aliases_and_joins() {
        let sql = "SELECT T2.name FROM singer_in_concert AS T1 JOIN singer AS T2 ON T1.singer_id = T2.singer_id JOIN concert c ON c.concert_id = T1.concert_id";
        let (tables, parsed) = linked(sql, "concert_singer");
        assert!(parsed);
        assert_eq!(tables, ["singer", "concert", "singer_in_concert"]);
    }

    fn joined(tables: &[&str], db: &str) -> Vec<String> {
        let tables: Vec<String> = tables.iter().map(|t| t.to_string()).collect();
        with_join_paths(&tables, &schema(db))
    }

    #[test]
    fn tables_that_join_the_linked_ones_are_added() {
        // The bridge table between two linked tables.
        assert_eq!(
            joined(&["Pets", "Student"], "pets_1"),
            ["Student", "Has_Pet", "Pets"]
        );
        assert_eq!(
            joined(&["singer", "concert"], "concert_singer"),
            schema_order(
                "concert_singer",
                &["concert", "singer_in_concert", "singer"]
            )
        );
        // Two tables in between, and nothing added to tables that already join.
        assert_eq!(
            joined(&["stadium", "singer"], "concert_singer"),
            schema_order(
                "concert_singer",
                &["stadium", "concert", "singer_in_concert", "singer"]
            )
        );
        assert_eq!(
            joined(&["singer", "singer_in_concert"], "concert_singer"),
            schema_order("concert_singer", &["singer", "singer_in_concert"])
        );
        assert_eq!(joined(&["Student"], "pets_1"), ["Student"]);
        // Without foreign keys nothing can be added.
        let mut bare = schema("pets_1");
        bare.foreign_keys.clear();
        let linked = vec!["Pets".to_owned(), "Student".to_owned()];
        assert_eq!(with_join_paths(&linked, &bare), ["Student", "Pets"]);
    }

    fn schema_order(db: &str, tables: &[&str]) -> Vec<String> {
        schema(db)
            .table_names()
            .filter(|t| tables.iter().any(|w| w.eq_ignore_ascii_case(t)))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn ctes_are_not_tables() {
        let sql = "WITH stadium AS (SELECT * FROM concert), big AS (SELECT * FROM stadium) SELECT count(*) FROM big";
        assert_eq!(referenced_tables(sql).expect("parses"), ["concert"]);
        let (tables, _) = linked(sql, "concert_singer");
        assert_eq!(tables, ["concert"]);
    }

    #[test]
    fn nested_subqueries_and_set_operations() {
        let sql = "SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert WHERE year = 2014 AND concert_id IN (SELECT concert_id FROM singer_in_concert)) \
                   UNION SELECT name FROM (SELECT name FROM singer) WHERE EXISTS (SELECT 1 FROM singer WHERE age > (SELECT avg(age) FROM singer))";
        let (tables, parsed) = linked(sql, "concert_singer");
        assert!(parsed);
        assert_eq!(
            tables,
            ["stadium", "singer", "concert", "singer_in_concert"]
        );
        let in_function = "SELECT max((SELECT count(*) FROM concert)) FROM stadium ORDER BY (SELECT 1 FROM singer)";
        assert_eq!(
            referenced_tables(in_function).expect("parses"),
            ["stadium", "concert", "singer"]
        );
    }

    #[test]
    fn quoted_names_and_case() {
        let sql = "SELECT \"Name\" FROM `SINGER` JOIN [singer_in_concert] ON 1 = 1 JOIN main.\"Concert\" ON 1 = 1";
        let (tables, parsed) = linked(sql, "concert_singer");
        assert!(parsed);
        assert_eq!(tables, ["singer", "concert", "singer_in_concert"]);
        let (pets, _) = linked("select count(*) from pets join has_pet", "pets_1");
        assert_eq!(pets, ["Has_Pet", "Pets"]);
    }

    #[test]
    fn broken_sql_falls_back_to_tokens() {
        let sql = "SELECT name FROM singer WHERE (age > AND concert.year = 2014 FROM stadiums";
        let (tables, parsed) = linked(sql, "concert_singer");
        assert!(!parsed);
        // `stadiums` is not a table name; `concert` appears as a qualifier.
        assert_eq!(tables, ["singer", "concert"]);
        let (none, parsed) = linked("not sql at all", "concert_singer");
        assert!(!parsed);
        assert!(none.is_empty());
    }

    #[test]
    fn unknown_tables_are_dropped() {
        let (tables, parsed) = linked("SELECT * FROM farm JOIN singer", "concert_singer");
        assert!(parsed);
        assert_eq!(tables, ["singer"]);
    }

    /// Every usable dev question's gold SQL parses and links only to tables that tables.json
    /// lists for its database, and to at least one.
    #[test]
    fn gold_sql_links_to_existing_tables() {
        let data = spider();
        let dev = data.dev().expect("dev.json");
        let usable = data.slices().expect("slices.json");
        let usable = usable.get("usable").expect("usable slice");
        let tables: BTreeMap<String, Vec<String>> = data
            .tables()
            .expect("tables.json")
            .into_iter()
            .map(|t| (t.db_id, t.table_names_original))
            .collect();
        let mut schemas: BTreeMap<String, Schema> = BTreeMap::new();
        for &index in usable {
            let example = &dev[index];
            let schema = schemas.entry(example.db_id.clone()).or_insert_with(|| {
                Schema::from_sqlite(
                    &data.database_path(&example.db_id),
                    &example.db_id,
                    IntrospectOptions {
                        sample_rows: 0,
                        distinct_examples: 0,
                    },
                )
                .expect("dev database introspects")
            });
            let result = link_tables(&example.query, schema);
            assert!(
                result.parsed,
                "gold SQL {index} does not parse: {}",
                example.query
            );
            assert!(
                !result.tables.is_empty(),
                "no table for {index}: {}",
                example.query
            );
            let known = &tables[&example.db_id];
            for table in &result.tables {
                assert!(
                    known.iter().any(|k| k.eq_ignore_ascii_case(table)),
                    "{table} of question {index} not in tables.json for {}",
                    example.db_id
                );
            }
        }
    }
}
