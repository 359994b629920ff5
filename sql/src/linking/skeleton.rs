//! SQL skeletons (DAIL-SQL's query-similarity signal): the query with its schema names and
//! literals replaced by `_` and the parts that only repeat structure collapsed, so that two
//! queries of the same shape over different databases compare equal. Demonstrations whose
//! skeleton is close to the preliminary SQL's (multiset Jaccard ≥ 0.85) come first.

use std::collections::HashMap;

use crate::lexer::LexKind;
use crate::schema::Schema;

const PLACEHOLDER: &str = "_";

/// SQL words that can follow a table or subquery, so they are never aliases (nor, to
/// linking, column names).
pub(crate) const KEYWORDS: [&str; 38] = [
    "select",
    "from",
    "where",
    "group",
    "by",
    "order",
    "having",
    "limit",
    "offset",
    "join",
    "on",
    "as",
    "and",
    "or",
    "not",
    "in",
    "like",
    "between",
    "union",
    "intersect",
    "except",
    "inner",
    "left",
    "right",
    "outer",
    "cross",
    "natural",
    "using",
    "asc",
    "desc",
    "is",
    "null",
    "distinct",
    "case",
    "when",
    "then",
    "else",
    "end",
];

/// Tokens that end an ORDER BY clause.
const ORDER_BY_END: [&str; 5] = ["limit", "union", "intersect", "except", "offset"];

const COMPARISONS: [&str; 6] = ["=", "!=", ">", ">=", "<", "<="];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A keyword, function name or identifier, possibly dotted (`t1.name`, `t.*`).
    Word(String),
    /// A string or number literal.
    Literal,
    Symbol(String),
}

/// The skeleton of `sql` against `schema`: tokens separated by single spaces.
pub fn sql_skeleton(sql: &str, schema: &Schema) -> String {
    let tokens = remove_aliases(lex(sql));
    let tokens = add_default_order(tokens);
    let names = SchemaNames::new(schema);
    let pieces: Vec<String> = tokens
        .into_iter()
        .map(|token| match token {
            Token::Literal => PLACEHOLDER.to_owned(),
            Token::Word(w) if names.contains(&w) => PLACEHOLDER.to_owned(),
            Token::Word(w) => w,
            Token::Symbol(s) if s == "*" => PLACEHOLDER.to_owned(),
            Token::Symbol(s) => s,
        })
        .collect();
    collapse(pieces).join(" ")
}

/// Multiset Jaccard similarity of two skeletons' tokens: Σ min(counts) / Σ max(counts).
/// Two empty skeletons are identical (1.0).
pub fn skeleton_jaccard(a: &str, b: &str) -> f64 {
    let count = |s: &str| {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for token in s.split_whitespace() {
            *counts.entry(token.to_owned()).or_default() += 1;
        }
        counts
    };
    let (ca, cb) = (count(a), count(b));
    let mut intersection = 0;
    let mut union = 0;
    for (token, &na) in &ca {
        let nb = cb.get(token).copied().unwrap_or(0);
        intersection += na.min(nb);
        union += na.max(nb);
    }
    union += cb
        .iter()
        .filter(|(token, _)| !ca.contains_key(*token))
        .map(|(_, n)| n)
        .sum::<usize>();
    if union == 0 {
        return 1.0;
    }
    intersection as f64 / union as f64
}

/// Lower-cased table and column names of a schema.
struct SchemaNames {
    tables: Vec<String>,
    columns: Vec<String>,
}

impl SchemaNames {
    fn new(schema: &Schema) -> Self {
        Self {
            tables: schema
                .tables
                .iter()
                .map(|t| t.name.to_lowercase())
                .collect(),
            columns: schema
                .tables
                .iter()
                .flat_map(|t| t.columns.iter().map(|c| c.name.to_lowercase()))
                .collect(),
        }
    }

    /// A table, a column, or `qualifier.column` / `qualifier.*` with a known column: the
    /// qualifier may be an alias, so only the column part is checked.
    fn contains(&self, word: &str) -> bool {
        if let Some((_, column)) = word.rsplit_once('.') {
            return column == "*" || self.columns.iter().any(|c| c == column);
        }
        self.tables.iter().any(|t| t == word) || self.columns.iter().any(|c| c == word)
    }
}

/// Splits SQL into lower-cased words, literals and symbols; `;` and comments are dropped.
/// Double-quoted text counts as a literal, as in Spider's SQL where it holds values; backticks
/// and brackets quote identifiers. A name and the dotted parts written right after it
/// (`t1.name`, `t.*`, `t1."name"`) are one word.
fn lex(sql: &str) -> Vec<Token> {
    let lexemes = crate::lexer::lex(sql);
    let mut tokens = Vec::with_capacity(lexemes.len());
    let mut i = 0;
    while i < lexemes.len() {
        let l = lexemes[i];
        i += 1;
        match l.kind {
            LexKind::Comment => {}
            LexKind::Symbol if l.text(sql) == ";" => {}
            LexKind::Quoted('\'' | '"') | LexKind::Number => tokens.push(Token::Literal),
            LexKind::Quoted(_) => tokens.push(Token::Word(l.unquoted(sql).to_lowercase())),
            LexKind::Symbol => tokens.push(Token::Symbol(l.text(sql).to_owned())),
            LexKind::Word => {
                let mut word = l.text(sql).to_owned();
                let mut end = l.end;
                while let Some(next) = lexemes.get(i).filter(|n| n.start == end) {
                    let text = next.text(sql);
                    let after_dot = word.ends_with('.');
                    match next.kind {
                        LexKind::Symbol if text == "." => word.push('.'),
                        LexKind::Symbol if text == "*" && after_dot => word.push('*'),
                        LexKind::Word if after_dot => word.push_str(text),
                        LexKind::Number if text.starts_with('.') => word.push_str(text),
                        LexKind::Quoted(_) if after_dot => {
                            word.push_str(next.unquoted(sql));
                            i += 1;
                            break;
                        }
                        _ => break,
                    }
                    end = next.end;
                    i += 1;
                }
                tokens.push(Token::Word(word.to_lowercase()));
            }
        }
    }
    tokens
}

fn is_word(token: Option<&Token>, word: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w == word)
}

fn is_alias_name(token: Option<&Token>) -> bool {
    matches!(token, Some(Token::Word(w)) if !KEYWORDS.contains(&w.as_str()) && !w.contains('.'))
}

/// Drops `AS name` everywhere and a bare alias after a table or subquery in FROM/JOIN
/// (`FROM singer s`, `(SELECT …) t`).
fn remove_aliases(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if is_word(tokens.get(i), "as") && is_alias_name(tokens.get(i + 1)) {
            i += 2;
            continue;
        }
        let after_relation = match out.last() {
            Some(Token::Symbol(s)) => s == ")",
            Some(Token::Word(w)) => {
                !KEYWORDS.contains(&w.as_str())
                    && out.len() >= 2
                    && matches!(&out[out.len() - 2], Token::Word(p) if p == "from" || p == "join")
            }
            _ => false,
        };
        if after_relation && is_alias_name(tokens.get(i)) && !is_call(&tokens, i) {
            i += 1;
            continue;
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    out
}

fn is_call(tokens: &[Token], i: usize) -> bool {
    matches!(tokens.get(i + 1), Some(Token::Symbol(s)) if s == "(")
}

/// Adds `asc` to every ORDER BY item that has no direction.
fn add_default_order(tokens: Vec<Token>) -> Vec<Token> {
    let mut out = Vec::with_capacity(tokens.len() + 2);
    let mut i = 0;
    while i < tokens.len() {
        out.push(tokens[i].clone());
        if is_word(tokens.get(i), "order") && is_word(tokens.get(i + 1), "by") {
            out.push(tokens[i + 1].clone());
            i = order_items(&tokens, i + 2, &mut out);
            continue;
        }
        i += 1;
    }
    out
}

/// Copies the ORDER BY items starting at `start` into `out`, adding `asc` where missing;
/// returns the index of the first token after the clause.
fn order_items(tokens: &[Token], start: usize, out: &mut Vec<Token>) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    let mut item_has_direction = false;
    let close_item = |out: &mut Vec<Token>, has_direction: bool| {
        if !has_direction {
            out.push(Token::Word("asc".to_owned()));
        }
    };
    while i < tokens.len() {
        match &tokens[i] {
            Token::Symbol(s) if s == "(" => depth += 1,
            Token::Symbol(s) if s == ")" && depth == 0 => break,
            Token::Symbol(s) if s == ")" => depth -= 1,
            Token::Symbol(s) if s == "," && depth == 0 => {
                close_item(out, item_has_direction);
                item_has_direction = false;
            }
            Token::Word(w) if depth == 0 && ORDER_BY_END.contains(&w.as_str()) => break,
            Token::Word(w) if depth == 0 && (w == "asc" || w == "desc") => {
                item_has_direction = true;
            }
            _ => {}
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    close_item(out, item_has_direction);
    i
}

/// DAIL-SQL's collapsing rules, in its order, on whole tokens.
fn collapse(tokens: Vec<String>) -> Vec<String> {
    let mut t = replace_seq(
        tokens,
        &["on", "_", "=", "_", "and", "_", "=", "_"],
        &["on", "_", "=", "_"],
    );
    t = replace_seq(
        t,
        &["on", "_", "=", "_", "or", "_", "=", "_"],
        &["on", "_", "=", "_"],
    );
    t = replace_seq(t, &["on", "_", "=", "_"], &[]);
    t = collapse_join_chains(t);
    while contains_seq(&t, &["_", ",", "_"]) {
        t = replace_seq(t, &["_", ",", "_"], &["_"]);
    }
    for op in COMPARISONS {
        t = replace_seq(t, &["_", op, "_"], &["_"]);
    }
    while contains_seq(&t, &["where", "_", "and", "_"])
        || contains_seq(&t, &["where", "_", "or", "_"])
    {
        t = replace_seq(t, &["where", "_", "and", "_"], &["where", "_"]);
        t = replace_seq(t, &["where", "_", "or", "_"], &["where", "_"]);
    }
    t
}

/// `_ join _ join _` → `_`.
fn collapse_join_chains(tokens: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        out.push(tokens[i].clone());
        if tokens[i] == PLACEHOLDER {
            while tokens.get(i + 1).is_some_and(|t| t == "join")
                && tokens.get(i + 2).is_some_and(|t| t == PLACEHOLDER)
            {
                i += 2;
            }
        }
        i += 1;
    }
    out
}

fn contains_seq(tokens: &[String], pattern: &[&str]) -> bool {
    tokens
        .windows(pattern.len())
        .any(|w| w.iter().zip(pattern).all(|(a, b)| a == b))
}

/// Replaces non-overlapping occurrences of `pattern`, left to right, in one pass.
fn replace_seq(tokens: Vec<String>, pattern: &[&str], with: &[&str]) -> Vec<String> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let matches = tokens.len() - i >= pattern.len()
            && tokens[i..i + pattern.len()]
                .iter()
                .zip(pattern)
                .all(|(a, b)| a == b);
        if matches {
            out.extend(with.iter().map(|s| (*s).to_owned()));
            i += pattern.len();
        } else {
            out.push(tokens[i].clone());
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::fixture::schema;

    #[test]
    fn skeletons_of_spider_queries() {
        let s = schema("concert_singer");
        let cases = [
            ("SELECT count(*) FROM singer", "select count ( _ ) from _"),
            (
                "SELECT T2.name FROM singer_in_concert AS T1 JOIN singer AS T2 ON T1.singer_id = T2.singer_id WHERE T1.concert_id = 1 ORDER BY T2.age;",
                "select _ from _ where _ order by _ asc",
            ),
            (
                "select name , country , age from singer order by age desc",
                "select _ from _ order by _ desc",
            ),
            (
                "SELECT name FROM stadium WHERE capacity > 5000 AND name LIKE '%Park' OR average >= 2.5",
                // `where _ and _` collapses even when the second `_` starts a LIKE, as in DAIL-SQL.
                "select _ from _ where _ like _ or _",
            ),
            (
                "SELECT country FROM singer s WHERE age > 20 INTERSECT SELECT country FROM singer WHERE age < 30",
                "select _ from _ where _ intersect select _ from _ where _",
            ),
            (
                "SELECT T1.name , count(*) AS n FROM stadium AS T1 JOIN concert AS T2 ON T1.stadium_id = T2.stadium_id GROUP BY T1.stadium_id ORDER BY n, T1.name DESC LIMIT 3",
                "select _ , count ( _ ) from _ group by _ order by n asc , _ desc limit _",
            ),
            (
                "SELECT name FROM (SELECT * FROM singer) t WHERE \"Name\" != 'Joe' ORDER BY age",
                "select _ from ( select _ from _ ) where _ order by _ asc",
            ),
        ];
        for (sql, expected) in cases {
            assert_eq!(sql_skeleton(sql, &s), expected, "{sql}");
        }
    }

    #[test]
    fn skeleton_is_schema_independent() {
        let a = sql_skeleton(
            "SELECT count(*) FROM singer WHERE age > 30",
            &schema("concert_singer"),
        );
        let b = sql_skeleton(
            "SELECT count(*) FROM Pets WHERE weight > 10",
            &schema("pets_1"),
        );
        assert_eq!(a, b);
    }

    /// Every usable dev gold query gets a skeleton that starts like a query and keeps no
    /// quote of a literal.
    #[test]
    fn dev_gold_skeletons() {
        let data = crate::spider_fixture::spider();
        let dev = data.dev().expect("dev.json");
        let slices = data.slices().expect("slices.json");
        let mut schemas = std::collections::HashMap::new();
        for &i in slices.get("usable").expect("usable") {
            let example = &dev[i];
            let s = schemas
                .entry(example.db_id.clone())
                .or_insert_with(|| schema(&example.db_id));
            let skeleton = sql_skeleton(&example.query, s);
            assert!(
                skeleton.starts_with("select") || skeleton.starts_with("( select"),
                "{i}: {skeleton}"
            );
            assert!(!skeleton.contains(['\'', '"', ';']), "{i}: {skeleton}");
        }
    }

    proptest::proptest! {
        #[test]
        fn jaccard_is_a_bounded_symmetric_similarity(
            a in proptest::collection::vec("[_a-c]", 0..8),
            b in proptest::collection::vec("[_a-c]", 0..8),
        ) {
            let (a, b) = (a.join(" "), b.join(" "));
            let ab = skeleton_jaccard(&a, &b);
            proptest::prop_assert!((0.0..=1.0).contains(&ab));
            proptest::prop_assert_eq!(ab, skeleton_jaccard(&b, &a));
            proptest::prop_assert_eq!(skeleton_jaccard(&a, &a), 1.0);
        }
    }

    #[test]
    fn jaccard_is_multiset() {
        assert_eq!(skeleton_jaccard("a b c", "a b c"), 1.0);
        assert_eq!(skeleton_jaccard("", ""), 1.0);
        assert_eq!(skeleton_jaccard("a", ""), 0.0);
        // {_:2, a:1} vs {_:1, a:1, b:1}: min = 2, max = 4.
        assert_eq!(skeleton_jaccard("_ a _", "_ a b"), 0.5);
        assert_eq!(skeleton_jaccard("_ _ _", "_"), 1.0 / 3.0);
        let x = "select _ from _ where _";
        let y = "select _ from _ where _ order by _ asc";
        assert!((skeleton_jaccard(x, y) - 6.0 / 10.0).abs() < 1e-12);
        assert_eq!(skeleton_jaccard(x, y), skeleton_jaccard(y, x));
    }

    #[test]
    fn lexer_handles_quotes_and_operators() {
        let tokens = lex("a.`b c` >= 'it''s' || [x];");
        assert_eq!(
            tokens,
            [
                Token::Word("a.b c".into()),
                Token::Symbol(">=".into()),
                Token::Literal,
                Token::Symbol("||".into()),
                Token::Word("x".into()),
            ]
        );
    }
}
