//! Question de-semanticization (DAIL-SQL / PET-SQL): words that name the schema become
//! `<mask>`, numbers and words found in the database's cells become `<unk>`, so that the
//! embedding of what is left captures the question's intent rather than its domain, and demos
//! from other databases can be retrieved by it.
//!
//! Schema matching runs over n-grams (5 down to 1) of lower-cased question tokens in their
//! singular form ([`crate::words`]):
//! an n-gram equal to a table or column name (split at `_` and camel case), or a non-stopword
//! n-gram found inside one at word boundaries. Cell values are probed one token at a time
//! through a caller-supplied closure, so the caller chooses between the sampled values already
//! in the schema ([`schema_value_probe`]) and LIKE queries on the database ([`like_value_probe`]).
//! Where a token matches both, the schema wins.

use std::collections::HashMap;

use rusqlite::Connection;

use crate::schema::{Schema, quote_ident};
use crate::words::{Token, contains_phrase, is_function_word, is_number, name_words, tokenize};

pub const MASK: &str = "<mask>";
pub const UNK: &str = "<unk>";

const MAX_NGRAM: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Keep,
    Value,
    Schema,
}

/// Masks `question` against `schema`; `is_value` says whether a lower-cased token occurs in the
/// database's cells.
pub fn mask_question(
    question: &str,
    schema: &Schema,
    is_value: &mut dyn FnMut(&str) -> bool,
) -> String {
    let tokens = tokenize(question);
    let mut tags = vec![Tag::Keep; tokens.len()];
    for (i, token) in tokens.iter().enumerate() {
        let lower = token.text.to_lowercase();
        if !token.is_word || is_function_word(&lower) {
            continue;
        }
        // The lemma is probed too: "dogs" should find the cell "dog".
        if is_number(&lower) || is_value(&lower) || (token.lemma != lower && is_value(&token.lemma))
        {
            tags[i] = Tag::Value;
        }
    }
    for i in schema_matches(&tokens, schema) {
        tags[i] = Tag::Schema;
    }
    let mut out = String::with_capacity(question.len());
    let mut cursor = 0;
    for (token, tag) in tokens.iter().zip(&tags) {
        out.push_str(&question[cursor..token.start]);
        out.push_str(match tag {
            Tag::Keep => token.text,
            Tag::Value => UNK,
            Tag::Schema => MASK,
        });
        cursor = token.start + token.text.len();
    }
    out.push_str(&question[cursor..]);
    out
}

/// Indices of question tokens inside an n-gram that names a table or column.
fn schema_matches(tokens: &[Token<'_>], schema: &Schema) -> Vec<usize> {
    let mut names: Vec<String> = Vec::new();
    for table in &schema.tables {
        names.push(name_words(&table.name));
        names.extend(table.columns.iter().map(|c| name_words(&c.name)));
    }
    names.retain(|n| !n.is_empty());
    let mut matched = vec![false; tokens.len()];
    for n in (1..=MAX_NGRAM.min(tokens.len())).rev() {
        for start in 0..=tokens.len() - n {
            let window = &tokens[start..start + n];
            if !window.iter().all(|t| t.is_word) {
                continue;
            }
            let ngram: Vec<&str> = window.iter().map(|t| t.lemma.as_str()).collect();
            let ngram = ngram.join(" ");
            let exact = names.contains(&ngram);
            let partial = || {
                !window.iter().all(|t| is_function_word(&t.lemma))
                    && names.iter().any(|name| contains_phrase(name, &ngram))
            };
            if exact || partial() {
                matched[start..start + n].iter_mut().for_each(|m| *m = true);
            }
        }
    }
    matched
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.then_some(i))
        .collect()
}

/// A value probe over the values already sampled into the schema (first rows and distinct
/// examples): a token matches a text value that contains it as a whole word, case-insensitively.
pub fn schema_value_probe(schema: &Schema) -> impl FnMut(&str) -> bool + use<> {
    let mut words: Vec<String> = Vec::new();
    for table in &schema.tables {
        let cells = table.rows.iter().flatten();
        let examples = table.columns.iter().flat_map(|c| c.examples.iter());
        for value in cells.chain(examples) {
            if let crate::value::Value::Text(text) = value {
                words.extend(
                    text.to_lowercase()
                        .split(|c: char| !c.is_alphanumeric())
                        .filter(|w| !w.is_empty())
                        .map(str::to_owned),
                );
            }
        }
    }
    words.sort();
    words.dedup();
    move |token: &str| words.binary_search(&token.to_owned()).is_ok()
}

/// A value probe that asks the database: does any text column hold the token as a whole word
/// (`tok`, `tok …`, `… tok`, `… tok …`; LIKE is case-insensitive for ASCII)? Answers are cached
/// per token; a failing query counts as no match, since masking is best effort.
pub fn like_value_probe<'c>(
    conn: &'c Connection,
    schema: &Schema,
) -> impl FnMut(&str) -> bool + 'c {
    let queries: Vec<String> = schema
        .tables
        .iter()
        .flat_map(|table| {
            table
                .columns
                .iter()
                .filter(|c| is_textual(&c.declared_type))
                .map(move |c| {
                    let column = quote_ident(&c.name);
                    format!(
                        "SELECT 1 FROM {} WHERE {column} LIKE ?1 OR {column} LIKE ?2 \
                         OR {column} LIKE ?3 OR {column} LIKE ?4 LIMIT 1",
                        quote_ident(&table.name)
                    )
                })
        })
        .collect();
    let mut cache: HashMap<String, bool> = HashMap::new();
    move |token: &str| {
        if let Some(&hit) = cache.get(token) {
            return hit;
        }
        // Tokens are letters and digits only, so they hold no LIKE wildcards to escape.
        let patterns = [
            token.to_owned(),
            format!("{token} %"),
            format!("% {token}"),
            format!("% {token} %"),
        ];
        let hit = queries.iter().any(|sql| {
            conn.prepare_cached(sql)
                .and_then(|mut stmt| stmt.exists(rusqlite::params_from_iter(&patterns)))
                .unwrap_or(false)
        });
        cache.insert(token.to_owned(), hit);
        hit
    }
}

/// Columns whose declared type can hold words (numbers are matched as numbers instead).
fn is_textual(declared: &str) -> bool {
    let t = declared.to_ascii_lowercase();
    !["int", "real", "floa", "doub", "num", "dec", "bool"]
        .iter()
        .any(|n| t.contains(n))
}

#[cfg(test)]
mod tests {
    use rusqlite::OpenFlags;

    use super::*;
    use crate::prompt::fixture::schema;
    use crate::spider_fixture::spider_db;

    fn never(_: &str) -> bool {
        false
    }

    #[test]
    fn masks_schema_words() {
        let s = schema("concert_singer");
        let cases = [
            (
                "How many singers do we have?",
                "How many <mask> do we have?",
            ),
            (
                "What is the total number of singers?",
                "What is the total number of <mask>?",
            ),
            (
                "Show name, country, age for all singers ordered by age from the oldest to the youngest.",
                "Show <mask>, <mask>, <mask> for all <mask> ordered by <mask> from the oldest to the youngest.",
            ),
            (
                "What are the names of the stadiums without any concerts?",
                "What are the <mask> of the <mask> without any <mask>?",
            ),
            (
                "Show the song release year of singers older than 40.",
                "Show the <mask> <mask> <mask> of <mask> older than <unk>.",
            ),
        ];
        for (question, expected) in cases {
            assert_eq!(
                mask_question(question, &s, &mut never),
                expected,
                "{question}"
            );
        }
    }

    #[test]
    fn masks_values_with_the_schema_probe_and_schema_wins() {
        let s = schema("concert_singer");
        let mut probe = schema_value_probe(&s);
        assert_eq!(
            mask_question(
                "How many singers are from France or the Netherlands?",
                &s,
                &mut probe
            ),
            "How many <mask> are from <unk> or the <unk>?"
        );
        // "Name" is a column and also appears in no cell; "Park" is a cell word only.
        let mut probe = |t: &str| t == "park" || t == "name";
        assert_eq!(
            mask_question(
                "Which stadium name ends with Park, 2.5 times?",
                &s,
                &mut probe
            ),
            "Which <mask> <mask> ends with <unk>, <unk> times?"
        );
    }

    #[test]
    fn like_probe_queries_the_database() {
        let s = schema("pets_1");
        let conn =
            Connection::open_with_flags(spider_db("pets_1"), OpenFlags::SQLITE_OPEN_READ_ONLY)
                .expect("pets_1 opens");
        let mut probe = like_value_probe(&conn, &s);
        assert!(probe("dog"));
        assert!(probe("dog"), "cached answer");
        assert!(!probe("giraffe"));
        assert_eq!(
            mask_question(
                "Find the average weight for each pet type of dogs owned by students.",
                &s,
                &mut probe
            ),
            "Find the average <mask> for each <mask> <mask> of <unk> owned by <mask>."
        );
    }

    #[test]
    fn an_empty_question_masks_to_nothing() {
        assert_eq!(mask_question("", &schema("pets_1"), &mut never), "");
    }
}
