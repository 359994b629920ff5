//! Reworded training questions: the same gold query asked with other words and other values.
//!
//! A generator trained only on Spider's wording learns to link a question to the schema by
//! the schema's own words, and to copy the few values train.json asks about. A variant keeps
//! the question's meaning and changes what it can lean on:
//! - **values**: a string the gold query compares with, and the question names, is replaced in
//!   both by another value of the column that holds it (read from the database's value index),
//!   so the answer stays right for the new question;
//! - **synonyms**: a question word that is part of a name of the gold query's tables or their
//!   columns is replaced by a synonym from a lexicon written for Spider's schema words
//!   (`synonyms.txt`), keeping its plural and capital, so the question no longer spells the
//!   schema's name.

use std::collections::{BTreeMap, HashMap};

use quorum_sql::lexer::{LexKind, lex};
use quorum_sql::linking::tables::link_tables;
use quorum_sql::linking::value_index::ValueIndex;
use quorum_sql::schema::Schema;
use rand::Rng;
use rand::seq::IndexedRandom;
use serde::Serialize;

/// The lexicon: one `word: synonym | synonym` a line, singular forms, lower case.
const LEXICON: &str = include_str!("synonyms.txt");

/// Longest replacement value taken from a column: a long text is a description, not a name a
/// question would say.
const MAX_VALUE_CHARS: usize = 40;

/// A reworded question and its gold query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    pub question: String,
    pub query: String,
    pub values_replaced: usize,
    pub words_replaced: usize,
}

impl Variant {
    /// (values, words) replaced.
    pub fn replaced(&self) -> (usize, usize) {
        (self.values_replaced, self.words_replaced)
    }
}

/// What the rewording did over the examples kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AugmentStats {
    pub variants: usize,
    pub values_replaced: usize,
    pub words_replaced: usize,
}

/// The synonym lexicon, parsed.
#[derive(Debug, Clone)]
pub struct Synonyms {
    by_word: HashMap<String, Vec<String>>,
}

impl Default for Synonyms {
    fn default() -> Self {
        Self::parse(LEXICON)
    }
}

impl Synonyms {
    /// Reads `word: a | b` lines; blank lines and `#` comments are skipped.
    pub fn parse(text: &str) -> Self {
        let mut by_word = HashMap::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((word, synonyms)) = line.split_once(':') else {
                continue;
            };
            let synonyms: Vec<String> = synonyms
                .split('|')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect();
            if !synonyms.is_empty() {
                by_word.insert(word.trim().to_lowercase(), synonyms);
            }
        }
        Self { by_word }
    }

    pub fn len(&self) -> usize {
        self.by_word.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_word.is_empty()
    }

    /// The lexicon entry of `word` (lower case) and whether `word` is its plural.
    fn entry(&self, word: &str) -> Option<(&str, bool)> {
        if let Some((key, _)) = self.by_word.get_key_value(word) {
            return Some((key, false));
        }
        let singulars = [
            word.strip_suffix("ies").map(|s| format!("{s}y")),
            word.strip_suffix("es").map(str::to_owned),
            word.strip_suffix('s').map(str::to_owned),
        ];
        singulars.into_iter().flatten().find_map(|s| {
            self.by_word
                .get_key_value(&s)
                .map(|(k, _)| (k.as_str(), true))
        })
    }
}

/// English plural of a (possibly several-word) noun phrase: its last word's.
fn plural(phrase: &str) -> String {
    let (head, last) = match phrase.rsplit_once(' ') {
        Some((head, last)) => (format!("{head} "), last),
        None => (String::new(), phrase),
    };
    let consonant_y = last.len() > 1
        && last.ends_with('y')
        && !matches!(
            last.as_bytes()[last.len() - 2],
            b'a' | b'e' | b'i' | b'o' | b'u'
        );
    let last = if consonant_y {
        format!("{}ies", &last[..last.len() - 1])
    } else if ["s", "x", "ch", "sh"].iter().any(|end| last.ends_with(end)) {
        format!("{last}es")
    } else {
        format!("{last}s")
    };
    format!("{head}{last}")
}

/// `word` with its first letter upper-cased.
fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The words of the names of `tables` and their columns, lower case (`song_name` gives `song`
/// and `name`; `StuID` gives `stuid`).
fn schema_words(schema: &Schema, tables: &[String]) -> Vec<String> {
    let mut words = Vec::new();
    for table in schema
        .tables
        .iter()
        .filter(|t| tables.iter().any(|n| n.eq_ignore_ascii_case(&t.name)))
    {
        let names = std::iter::once(&table.name).chain(table.columns.iter().map(|c| &c.name));
        for name in names {
            words.extend(
                name.split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                    .map(str::to_lowercase),
            );
        }
    }
    words
}

/// Byte ranges of `needle` in `haystack`, compared without case, at word boundaries.
fn find_phrase(haystack: &str, needle: &str) -> Vec<(usize, usize)> {
    let lower = haystack.to_lowercase();
    let needle = needle.to_lowercase();
    // Lower-casing changed some character's length: byte offsets would not map back.
    if lower.len() != haystack.len() || needle.is_empty() {
        return Vec::new();
    }
    let is_word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    lower
        .match_indices(&needle)
        .map(|(start, m)| (start, start + m.len()))
        .filter(|&(start, end)| {
            !is_word(lower[..start].chars().next_back()) && !is_word(lower[end..].chars().next())
        })
        .collect()
}

/// Rewords one training question. `None` when neither a value nor a word could be replaced.
pub fn reword(
    question: &str,
    query: &str,
    schema: &Schema,
    values: &ValueIndex,
    synonyms: &Synonyms,
    rng: &mut impl Rng,
) -> Option<Variant> {
    let tables = link_tables(query, schema).tables;
    let (mut question, mut query) = (question.to_owned(), query.to_owned());
    let values_replaced = replace_values(&mut question, &mut query, &tables, values, rng);
    // The question's spelling of each value the query compares with is not reworded.
    let kept: Vec<(usize, usize)> = lex(&query)
        .into_iter()
        .filter(|l| matches!(l.kind, LexKind::Quoted('\'' | '"')))
        .flat_map(|l| find_phrase(&question, l.unquoted(&query).trim_matches('%')))
        .collect();
    let words_replaced = replace_words(&mut question, &kept, &tables, schema, synonyms, rng);
    (values_replaced + words_replaced > 0).then_some(Variant {
        question,
        query,
        values_replaced,
        words_replaced,
    })
}

/// Replaces each string literal of `query` that `question` names, and that a column of one of
/// `tables` holds, by another value of that column, in both. Returns how many were replaced.
fn replace_values(
    question: &mut String,
    query: &mut String,
    tables: &[String],
    values: &ValueIndex,
    rng: &mut impl Rng,
) -> usize {
    // Ordered, so that a literal two columns hold is looked up in the same column every run.
    let mut by_column: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for (table, column, value) in values.values() {
        if tables.iter().any(|t| t.eq_ignore_ascii_case(table)) {
            by_column.entry((table, column)).or_default().push(value);
        }
    }
    let literals: Vec<String> = lex(query)
        .into_iter()
        .filter(|l| matches!(l.kind, LexKind::Quoted('\'' | '"')))
        .map(|l| l.unquoted(query).trim_matches('%').to_lowercase())
        .collect();
    // Literals in query order; the same one twice gets the same replacement, and no
    // replacement is a value the query already names or another literal's replacement (two
    // values the question tells apart stay apart).
    let mut chosen: HashMap<String, String> = HashMap::new();
    for lexeme in lex(query) {
        if !matches!(lexeme.kind, LexKind::Quoted('\'' | '"')) {
            continue;
        }
        let literal = lexeme.unquoted(query).trim_matches('%');
        let key = literal.to_lowercase();
        if chosen.contains_key(&key) || find_phrase(question, literal).is_empty() {
            continue;
        }
        let taken = |v: &str| {
            let v = v.to_lowercase();
            literals.contains(&v) || chosen.values().any(|c| c.to_lowercase() == v)
        };
        let holder = by_column
            .values()
            .find(|column| column.iter().any(|v| v.eq_ignore_ascii_case(literal)));
        let others: Vec<&str> = holder
            .map(|column| {
                column
                    .iter()
                    .copied()
                    .filter(|v| {
                        !taken(v)
                            && v.chars().count() <= MAX_VALUE_CHARS
                            && !v.contains(['\'', '"', '%', '\n'])
                    })
                    .collect()
            })
            .unwrap_or_default();
        if let Some(other) = others.choose(rng) {
            chosen.insert(key, (*other).to_owned());
        }
    }
    if chosen.is_empty() {
        return 0;
    }
    // Rewrite the query's literals back to front, keeping quotes and `%` wildcards.
    for lexeme in lex(query).into_iter().rev() {
        if !matches!(lexeme.kind, LexKind::Quoted('\'' | '"')) {
            continue;
        }
        let inner = lexeme.unquoted(query);
        let Some(other) = chosen.get(&inner.trim_matches('%').to_lowercase()) else {
            continue;
        };
        let quote = &query[lexeme.start..lexeme.start + 1];
        let lead = if inner.starts_with('%') { "%" } else { "" };
        let trail = if inner.len() > 1 && inner.ends_with('%') {
            "%"
        } else {
            ""
        };
        let text = format!("{quote}{lead}{other}{trail}{quote}");
        query.replace_range(lexeme.start..lexeme.end, &text);
    }
    // All of the question's spans at once, back to front: a replacement is never replaced again.
    let mut spans: Vec<(usize, usize, &str)> = chosen
        .iter()
        .flat_map(|(literal, other)| {
            find_phrase(question, literal)
                .into_iter()
                .map(move |(s, e)| (s, e, other.as_str()))
        })
        .collect();
    spans.sort_by_key(|&(start, end, _)| (std::cmp::Reverse(start), end));
    let mut limit = question.len();
    for (start, end, other) in spans {
        // A literal inside another's span ("New York" in "New York City") is left to it.
        if end <= limit {
            question.replace_range(start..end, other);
            limit = start;
        }
    }
    chosen.len()
}

/// Replaces the question's words that are schema words of `tables` and lexicon entries, and
/// lie outside the `kept` byte ranges, by a synonym (one choice per entry). Returns how many
/// words were replaced.
fn replace_words(
    question: &mut String,
    kept: &[(usize, usize)],
    tables: &[String],
    schema: &Schema,
    synonyms: &Synonyms,
    rng: &mut impl Rng,
) -> usize {
    let names = schema_words(schema, tables);
    let mut words: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    for (i, c) in question.char_indices().chain([(question.len(), ' ')]) {
        match (start, c.is_alphanumeric()) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                words.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    let mut chosen: HashMap<String, String> = HashMap::new();
    let mut replaced = 0;
    for &(s, e) in words.iter().rev() {
        if kept.iter().any(|&(ks, ke)| s < ke && ks < e) {
            continue;
        }
        let word = &question[s..e];
        let lower = word.to_lowercase();
        let Some((entry, is_plural)) = synonyms.entry(&lower) else {
            continue;
        };
        if !names.iter().any(|n| n == entry || n == &lower) {
            continue;
        }
        let synonym = chosen
            .entry(entry.to_owned())
            .or_insert_with(|| {
                synonyms.by_word[entry]
                    .choose(rng)
                    .expect("entries have synonyms")
                    .clone()
            })
            .clone();
        let mut text = if is_plural { plural(&synonym) } else { synonym };
        if word.starts_with(char::is_uppercase) {
            text = capitalized(&text);
        }
        question.replace_range(s..e, &text);
        replaced += 1;
    }
    replaced
}

#[cfg(test)]
mod tests {
    use super::*;
    use quorum_sql::database::DatabaseHandle;
    use quorum_sql::dataset::SpiderDataset;
    use quorum_sql::schema::IntrospectOptions;
    use rand::SeedableRng;

    /// Spider's concert_singer (`$QUORUM_SPIDER_DIR`, else beside the repository) and its
    /// value index.
    fn concert_singer() -> (Schema, ValueIndex) {
        let dir = std::env::var_os("QUORUM_SPIDER_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../../shared/data/spider")
            });
        let path = SpiderDataset::new(dir).database_path("concert_singer");
        let handle = DatabaseHandle::open(&path, "concert_singer", IntrospectOptions::default())
            .expect("concert_singer opens");
        let values = handle.value_index().expect("its values read").clone();
        (handle.schema, values)
    }

    fn rng() -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(7)
    }

    #[test]
    fn the_shipped_lexicon_parses() {
        let synonyms = Synonyms::default();
        assert!(synonyms.len() > 100, "{} entries", synonyms.len());
        assert_eq!(synonyms.entry("singer"), Some(("singer", false)));
        assert_eq!(synonyms.entry("singers"), Some(("singer", true)));
        assert_eq!(synonyms.entry("countries"), Some(("country", true)));
        assert_eq!(synonyms.entry("of"), None);
    }

    #[test]
    fn plurals_and_capitals_are_kept() {
        assert_eq!(plural("vocalist"), "vocalists");
        assert_eq!(plural("nation"), "nations");
        assert_eq!(plural("staff member"), "staff members");
        assert_eq!(plural("body"), "bodies");
        assert_eq!(plural("day"), "days");
        assert_eq!(plural("match"), "matches");
        assert_eq!(capitalized("vocalist"), "Vocalist");
    }

    #[test]
    fn phrases_are_found_at_word_boundaries_only() {
        assert_eq!(find_phrase("Songs by France?", "france"), vec![(9, 15)]);
        assert!(find_phrase("Frances", "France").is_empty());
    }

    #[test]
    fn schema_words_of_the_query_tables_are_replaced() {
        let (schema, values) = concert_singer();
        let synonyms = Synonyms::parse("singer: vocalist\ncountry: nation\nconcert: show\n");
        let variant = reword(
            "How many singers are from each country?",
            "SELECT country, count(*) FROM singer GROUP BY country",
            &schema,
            &values,
            &synonyms,
            &mut rng(),
        )
        .expect("two words to replace");
        assert_eq!(variant.question, "How many vocalists are from each nation?");
        assert_eq!(
            variant.query,
            "SELECT country, count(*) FROM singer GROUP BY country"
        );
        assert_eq!((variant.words_replaced, variant.values_replaced), (2, 0));
        // `concert` is a lexicon word but names no table of this query: it stays.
        let kept = reword(
            "Singers older than 40 at a concert",
            "SELECT name FROM singer WHERE age > 40",
            &schema,
            &values,
            &synonyms,
            &mut rng(),
        )
        .unwrap();
        assert_eq!(kept.question, "Vocalists older than 40 at a concert");
    }

    #[test]
    fn a_value_is_replaced_in_the_question_and_the_query_alike() {
        let (schema, values) = concert_singer();
        let variant = reword(
            "What are the names of singers from France?",
            "SELECT name FROM singer WHERE country = 'France'",
            &schema,
            &values,
            &Synonyms::parse(""),
            &mut rng(),
        )
        .expect("France is a value of singer.country");
        assert_eq!(variant.values_replaced, 1);
        let other = variant
            .query
            .strip_prefix("SELECT name FROM singer WHERE country = '")
            .and_then(|rest| rest.strip_suffix('\''))
            .expect("only the literal changes");
        assert_ne!(other, "France");
        assert!(
            values
                .values()
                .any(|(t, c, v)| t == "singer" && c == "Country" && v == other),
            "{other} is a country of the singer table"
        );
        assert_eq!(
            variant.question,
            format!("What are the names of singers from {other}?")
        );
    }

    #[test]
    fn two_values_are_replaced_at_once_and_stay_apart() {
        let (schema, values) = concert_singer();
        for seed in 0..20 {
            let variant = reword(
                "Singers from France or the Netherlands?",
                "SELECT name FROM singer WHERE country = 'France' OR country = 'Netherlands'",
                &schema,
                &values,
                &Synonyms::parse(""),
                &mut rand::rngs::StdRng::seed_from_u64(seed),
            );
            // Three countries: each literal may only take the third, and one of them cannot.
            let variant = variant.expect("one of the two can change");
            assert_eq!(variant.values_replaced, 1);
            let (q, sql) = (&variant.question, &variant.query);
            assert!(q.contains("United States"), "{q}");
            assert_eq!(
                q.contains("France"),
                sql.contains("'France'"),
                "{q} / {sql}"
            );
            assert_eq!(q.contains("Netherlands"), sql.contains("'Netherlands'"));
        }
    }

    #[test]
    fn a_value_keeps_its_words() {
        let (schema, values) = concert_singer();
        let variant = reword(
            "Who sang Singer?",
            "SELECT name FROM singer WHERE song_name = 'Singer'",
            &schema,
            &values,
            &Synonyms::parse("singer: vocalist"),
            &mut rng(),
        );
        assert_eq!(variant, None);
    }

    #[test]
    fn a_value_the_question_does_not_name_is_left_alone() {
        let (schema, values) = concert_singer();
        let variant = reword(
            "Which singers are French?",
            "SELECT name FROM singer WHERE country = 'France'",
            &schema,
            &values,
            &Synonyms::parse(""),
            &mut rng(),
        );
        assert_eq!(variant, None);
    }
}
