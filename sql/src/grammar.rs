//! The SQL a generator may write about one database, as a grammar for constrained decoding.
//!
//! [`schema_grammar`] renders a Lark grammar (the syntax llguidance reads) of the SELECT
//! language Spider and BIRD use — joins, aliases, subqueries, set operations, GROUP BY/HAVING,
//! ORDER BY/LIMIT, CASE, CAST, LIKE, BETWEEN and the usual functions — whose only identifiers are
//! the database's own tables and columns. A column after `table.` must belong to that table;
//! after a table alias (short, and not resolved to its table: a context-free grammar cannot) it
//! may be any column of the schema; a bare name is any column.
//! Literals are free. The grammar is text so that this crate stays free of the grammar engine:
//! the engine compiles it, and `quorum grammar-coverage` checks it against gold queries.
//!
//! What a context-free grammar with a lexer cannot see: an alias is not tied to its declaration,
//! and a name glued to the keyword after it (`highestis x`) lexes as the two, since a lexeme
//! ends where the next character cannot extend it; sampled answers are rarely glued that way,
//! and execution catches the rest. A minus sign is never followed by another (`--` begins a
//! comment), so a negative number is a single literal after a comparison or BETWEEN.
//!
//! An answer may be wrapped in a Markdown fence (` ```sql … ``` `) because the pipeline starts
//! answers inside one, and may end with a semicolon.

use std::fmt::Write as _;

use crate::aggregate::AGGREGATES;
use crate::dialect::Dialect;
use crate::schema::Schema;

/// Reserved words that cannot be an alias without quoting. Excluding them from the alias
/// terminal keeps `FROM t WHERE …` from reading `WHERE` as the alias of `t`, which would
/// double the parser's work at every clause boundary.
const RESERVED: &[&str] = &[
    "select",
    "from",
    "where",
    "group",
    "by",
    "having",
    "order",
    "limit",
    "offset",
    "union",
    "intersect",
    "except",
    "join",
    "inner",
    "left",
    "right",
    "full",
    "outer",
    "cross",
    "natural",
    "on",
    "using",
    "as",
    "and",
    "or",
    "not",
    "in",
    "is",
    "null",
    "like",
    "ilike",
    "glob",
    "between",
    "case",
    "when",
    "then",
    "else",
    "end",
    "distinct",
    "all",
    "asc",
    "desc",
    "exists",
    "cast",
    "collate",
];

/// Scalar functions an answer may call (SQLite's core and date functions, plus the PostgreSQL
/// spellings of the same ideas); the aggregates are `crate::aggregate::AGGREGATES`.
const SCALAR_FUNCTIONS: &[&str] = &[
    "abs",
    "round",
    "length",
    "char_length",
    "lower",
    "upper",
    "substr",
    "substring",
    "instr",
    "position",
    "replace",
    "trim",
    "ltrim",
    "rtrim",
    "coalesce",
    "ifnull",
    "nullif",
    "iif",
    "typeof",
    "printf",
    "format",
    "concat",
    "strftime",
    "date",
    "time",
    "datetime",
    "julianday",
    "unixepoch",
    "date_part",
    "extract",
    "now",
    "random",
    "floor",
    "ceil",
    "ceiling",
    "sqrt",
    "power",
    "pow",
    "exp",
    "ln",
    "log",
    "mod",
    "sign",
    "hex",
    "quote",
];

/// The fixed part of the grammar: everything but the identifiers. Rules in lower case are
/// parsed by llguidance's Earley parser; UPPER-CASE names are single lexemes.
const SELECT_LANGUAGE: &str = r#"
start: fence_open? query ";"? fence_close?
fence_open: "```sql"i | "```"
fence_close: "```"

query: select_core (compound_op select_core)* order_by? limit?
compound_op: "union"i "all"i? | "intersect"i | "except"i
select_core: "select"i ("distinct"i | "all"i)? result_column ("," result_column)* from_clause? where_clause? group_by? having?
result_column: "*" | QUALIFIED_STAR | expr output_alias?
output_alias: "as"i (OUTPUT_ALIAS | QUOTED_ALIAS)

from_clause: "from"i source (join_op source join_constraint?)*
join_op: "," | "natural"i? ("left"i "outer"i? | "right"i "outer"i? | "full"i "outer"i? | "inner"i | "cross"i)? "join"i
join_constraint: "on"i expr | "using"i "(" column_name ("," column_name)* ")"
// A table's alias needs `AS` unless white space sets it apart, which only a lexeme that takes
// the blanks after the name can see: the lexer ends a name where the next character cannot
// extend it, so without that the table `singer` and the alias `s` would let `singers` through.
source: table_name ("as"i ALIAS)? | TABLE_NAME_SPACED ("as"i? ALIAS)? | "(" query ")" ("as"i? ALIAS)?

where_clause: "where"i expr
group_by: "group"i "by"i expr ("," expr)*
having: "having"i expr
order_by: "order"i "by"i ordering ("," ordering)*
ordering: expr ("collate"i COLLATION)? ("asc"i | "desc"i)? ("nulls"i ("first"i | "last"i))?
limit: "limit"i expr (("offset"i | ",") expr)?

expr: operand (comparison_op signed_operand | arithmetic_op operand | postfix)*
// A minus sign only as part of a number after a comparison: "a - -1" would be written "a --1"
// by a model as easily, and `--` starts a comment in SQL.
signed_operand: operand | NEGATIVE_NUMBER
comparison_op: "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">=" | "and"i | "or"i | "is"i "not"i? ("distinct"i "from"i)?
arithmetic_op: "+" | "-" | "*" | "/" | "%" | "||" | "&" | "|" | "<<" | ">>"
postfix: "not"i? ("like"i | "ilike"i | "glob"i) operand ("escape"i STRING)?
       | "not"i? "between"i signed_operand "and"i signed_operand
       | "not"i? "in"i "(" (query | expr ("," expr)*)? ")"
       | "isnull"i | "notnull"i | "not"i "null"i
       | "collate"i COLLATION
       | "::" type_name
operand: unary_op* primary
unary_op: "~" | "not"i
primary: literal
       | column
       | function_call
       | "(" expr ("," expr)* ")"
       | "(" query ")"
       | "exists"i "(" query ")"
       | "case"i expr? ("when"i expr "then"i expr)+ ("else"i expr)? "end"i
       | "cast"i "(" expr "as"i type_name ")"
function_call: FUNCTION "(" (("distinct"i)? expr ("," expr)* | "*")? ")"
type_name: TYPE_WORD+ ("(" NUMBER ("," NUMBER)? ")")?
literal: NUMBER | STRING | "null"i | "true"i | "false"i | "current_date"i | "current_time"i | "current_timestamp"i

%ignore /[ \t\r\n]{1,16}/
// Literals and aliases are bounded (numbers 18 digits either side of the point, strings 200
// characters): a model pushed off the name it wanted (one the grammar does not have) otherwise
// tends to write digits until its budget ends.
NEGATIVE_NUMBER: /-[0-9]{1,18}(\.[0-9]{0,18})?([eE][+-]?[0-9]{1,3})?/
NUMBER: /[0-9]{1,18}(\.[0-9]{0,18})?([eE][+-]?[0-9]{1,3})?/ | /\.[0-9]{1,18}([eE][+-]?[0-9]{1,3})?/
SINGLE_QUOTED: /'([^']|''){0,200}'/
TYPE_WORD: /[A-Za-z_][A-Za-z0-9_]*/
COLLATION: /(?i:nocase|binary|rtrim|"C"|"POSIX")/
"#;

/// One name as the grammar accepts it: case-blind, bare where SQL allows that, and in each
/// quoting style the dialect reads as an identifier.
fn name_alternatives(name: &str, dialect: Dialect) -> Vec<String> {
    let mut out = Vec::new();
    let plain = !name.is_empty()
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        out.push(lark_string(name, true));
    }
    if dialect != Dialect::MySql {
        out.push(lark_string(
            &format!("\"{}\"", name.replace('"', "\"\"")),
            true,
        ));
    }
    if matches!(dialect, Dialect::Sqlite | Dialect::MySql) {
        out.push(lark_string(&format!("`{}`", name.replace('`', "``")), true));
    }
    if dialect == Dialect::Sqlite && !name.contains(']') {
        out.push(lark_string(&format!("[{name}]"), true));
    }
    out
}

/// A Lark string literal, `i`-suffixed when case-blind.
fn lark_string(text: &str, case_blind: bool) -> String {
    let mut s = String::with_capacity(text.len() + 3);
    s.push('"');
    for c in text.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\t' => s.push_str("\\t"),
            c => s.push(c),
        }
    }
    s.push('"');
    if case_blind {
        s.push('i');
    }
    s
}

/// A regex alternation matching any of `words`, case-blind, for use inside `/…/`.
fn word_regex(words: impl IntoIterator<Item = String>) -> String {
    let mut alts: Vec<String> = words
        .into_iter()
        .map(|w| {
            w.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        c.to_string()
                    } else {
                        format!("\\x{:02x}", c as u32)
                    }
                })
                .collect::<String>()
        })
        .collect();
    alts.sort();
    alts.dedup();
    format!("(?i:{})", alts.join("|"))
}

/// The grammar of the answers a generator may give about `schema`, in `dialect`.
///
/// Deterministic: the same schema gives the same text, so callers may cache compiled grammars
/// by it. A schema with no tables still gets a grammar (one that can only select constants).
pub fn schema_grammar(schema: &Schema, dialect: Dialect) -> String {
    let mut g = String::with_capacity(SELECT_LANGUAGE.len() + 64 * schema.tables.len());
    // White space between lexemes is one run of at most 16 characters: a model that cannot
    // write the name it wants otherwise may pad with blanks until its budget ends.
    g.push_str("%llguidance {\"ignore_once\": true}\n");
    g.push_str(SELECT_LANGUAGE);

    // Strings: single quotes everywhere; SQLite also reads a double-quoted word that names no
    // column as a string, and Spider's gold queries rely on it; MySQL reads every one so.
    if matches!(dialect, Dialect::Sqlite | Dialect::MySql) {
        g.push_str("STRING: SINGLE_QUOTED | /\"([^\"]|\"\"){0,200}\"/\n");
    } else {
        g.push_str("STRING: SINGLE_QUOTED\n");
    }
    let _ = writeln!(
        g,
        "FUNCTION: /{}/",
        word_regex(
            AGGREGATES
                .iter()
                .chain(SCALAR_FUNCTIONS)
                .map(|f| f.to_string())
        )
    );

    // Table aliases are short (`T1`, `s`, `sc2`: up to three letters and two digits), neither
    // reserved nor a table's name, so that `table.` always means the table and only its columns
    // may follow. The grammar cannot tie an alias to its declaration; keeping aliases short
    // keeps a free-running word from passing as one. Output aliases (after `AS` in the select
    // list) may be any word but are never read back: ORDER BY and HAVING name columns.
    let mut not_alias: Vec<String> = RESERVED.iter().map(|w| w.to_string()).collect();
    not_alias.extend(schema.tables.iter().map(|t| t.name.clone()));
    let _ = writeln!(
        g,
        "ALIAS: /[A-Za-z][A-Za-z]?[A-Za-z]?[0-9]?[0-9]?/ & ~/{}/",
        word_regex(not_alias)
    );
    let _ = writeln!(
        g,
        "OUTPUT_ALIAS: /[A-Za-z_][A-Za-z0-9_]{{0,63}}/ & ~/{}/",
        word_regex(RESERVED.iter().map(|w| w.to_string()))
    );
    g.push_str("QUOTED_ALIAS: /\"[^\"]{1,64}\"/ | SINGLE_QUOTED\n");

    // Tables, and for each table the columns that may follow `table.`. Names are terminals
    // (upper case): each set compiles to one lexeme, where a rule with one alternative per name
    // would cost the Earley parser an item per name at every position a name may start.
    let mut qualified = Vec::new();
    for (i, table) in schema.tables.iter().enumerate() {
        let names = name_alternatives(&table.name, dialect).join(" | ");
        let _ = writeln!(g, "TABLE_{i}: {names}");
        let columns: Vec<String> = table
            .columns
            .iter()
            .flat_map(|c| name_alternatives(&c.name, dialect))
            .collect();
        if columns.is_empty() {
            continue;
        }
        let _ = writeln!(g, "COLUMN_OF_{i}: {}", columns.join(" | "));
        let _ = writeln!(g, "QUALIFIED_{i}: TABLE_{i} \".\" COLUMN_OF_{i}");
        qualified.push(format!("QUALIFIED_{i}"));
    }
    let mut all_columns: Vec<String> = schema
        .tables
        .iter()
        .flat_map(|t| t.columns.iter())
        .flat_map(|c| name_alternatives(&c.name, dialect))
        .collect();
    all_columns.sort();
    all_columns.dedup();

    if schema.tables.is_empty() {
        // Nothing to read from: keep the rules defined but unmatchable by any table text.
        g.push_str("table_name: \"\\x00no table\\x00\"\n");
        g.push_str("TABLE_NAME_SPACED: \"\\x00no table \\x00\"\n");
        g.push_str("column_name: \"\\x00no column\\x00\"\n");
        g.push_str("column: \"\\x00no column\\x00\"\n");
        g.push_str("QUALIFIED_STAR: ALIAS \".*\"\n");
        return g;
    }
    let tables: Vec<String> = (0..schema.tables.len())
        .map(|i| format!("TABLE_{i}"))
        .collect();
    let _ = writeln!(g, "TABLE_NAME: {}", tables.join(" | "));
    g.push_str("table_name: TABLE_NAME\n");
    g.push_str("TABLE_NAME_SPACED: TABLE_NAME /[ \\t\\r\\n]{1,16}/\n");
    if all_columns.is_empty() {
        g.push_str("column_name: \"\\x00no column\\x00\"\n");
    } else {
        let _ = writeln!(g, "COLUMN_NAME: {}", all_columns.join(" | "));
        g.push_str("column_name: COLUMN_NAME\n");
    }
    // A qualified name is one lexeme, with no blanks around its dot: SQLite reads
    // `singer . name`, but other SQL tools (sqlparser among them) do not.
    g.push_str("QUALIFIED_STAR: (TABLE_NAME | ALIAS) \".*\"\n");
    let mut column_forms = vec!["column_name".to_owned()];
    if !all_columns.is_empty() {
        g.push_str("ALIAS_COLUMN: ALIAS \".\" COLUMN_NAME\n");
        column_forms.push("ALIAS_COLUMN".to_owned());
    }
    column_forms.extend(qualified);
    let _ = writeln!(g, "column: {}", column_forms.join(" | "));
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Column, Table};

    fn column(name: &str) -> Column {
        Column {
            name: name.into(),
            declared_type: "text".into(),
            primary_key: false,
            comment: None,
            examples: vec![],
        }
    }

    fn schema() -> Schema {
        Schema {
            db_id: "t".into(),
            tables: vec![
                Table {
                    name: "singer".into(),
                    columns: vec![column("Singer_ID"), column("Name")],
                    primary_key: vec![],
                    rows: vec![],
                },
                Table {
                    name: "Home Town".into(),
                    columns: vec![column("City \"Name\"")],
                    primary_key: vec![],
                    rows: vec![],
                },
            ],
            foreign_keys: vec![],
            dialect: Dialect::Sqlite,
        }
    }

    #[test]
    fn names_are_case_blind_and_quoted_where_needed() {
        let g = schema_grammar(&schema(), Dialect::Sqlite);
        assert!(g.contains(r#"TABLE_0: "singer"i | "\"singer\""i | "`singer`"i | "[singer]"i"#));
        // A name with a space has only quoted forms; inner double quotes are doubled.
        assert!(g.contains(r#"TABLE_1: "\"Home Town\""i | "`Home Town`"i | "[Home Town]"i"#));
        assert!(g.contains(r#""\"City \"\"Name\"\"\""i"#));
        assert!(g.contains("COLUMN_OF_0: \"Singer_ID\"i"));
    }

    #[test]
    fn postgres_reads_only_double_quotes_as_identifiers_and_no_double_quoted_strings() {
        let g = schema_grammar(&schema(), Dialect::Postgres);
        assert!(g.contains(r#"TABLE_0: "singer"i | "\"singer\""i"#));
        let table = g.lines().find(|l| l.starts_with("TABLE_0:")).unwrap_or("");
        assert!(!table.contains('`') && !table.contains('['), "{table}");
        assert!(g.contains("STRING: SINGLE_QUOTED\n"));
    }

    #[test]
    fn aliases_exclude_reserved_words_and_table_names() {
        let g = schema_grammar(&schema(), Dialect::Sqlite);
        let alias = g.lines().find(|l| l.starts_with("ALIAS:")).unwrap_or("");
        assert!(alias.contains("|singer"), "{alias}");
        assert!(alias.contains("|where"), "{alias}");
        assert!(alias.contains("Home\\x20Town"), "{alias}");
    }

    #[test]
    fn an_empty_schema_still_renders() {
        let mut s = schema();
        s.tables.clear();
        let g = schema_grammar(&s, Dialect::Sqlite);
        assert!(g.contains("table_name:"));
    }
}
