//! The text values of a database's columns, matched against a question, so that a prompt can
//! show the exact spelling a column stores (`'USA'` where the question says "usa", `'JetBlue
//! Airways'` where it says "Jetblue") beside the column that stores it.
//!
//! Built once per database through any backend's read-only session (`SELECT DISTINCT` per text
//! column), so SQLite and PostgreSQL share it. Memory and time are bounded: at most
//! [`ValueIndexLimits::per_column`] distinct values per column and
//! [`ValueIndexLimits::total`] per database, values longer than
//! [`ValueIndexLimits::max_chars`] skipped, and every query under the session's time limit
//! (a column whose query fails or times out is left out, never the database).
//!
//! Matching, in the spirit of CodeS's and XiYan's value retrievers but without a model: the
//! question and each value are normalized (lower case, letters and digits, single spaces); a
//! value matches when it equals a run of one to four question words (score 1), or, for runs of
//! at least four characters, when its character trigrams overlap the run's by a Jaccard index of
//! at least [`FUZZY_THRESHOLD`] (score = that index). Trigram postings keep the fuzzy search to
//! values that share a trigram with the question.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::backend::Session;
use crate::schema::Schema;
use crate::value::Value;

/// The least trigram Jaccard index for a fuzzy match.
pub const FUZZY_THRESHOLD: f32 = 0.6;

/// Longest run of question words a value is compared with.
const MAX_SPAN_WORDS: usize = 4;

/// Words that name nothing a column could store on their own.
const NEVER_VALUES: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "has",
    "have", "how", "in", "is", "it", "its", "many", "much", "of", "on", "or", "the", "their",
    "them", "there", "they", "this", "to", "was", "were", "what", "when", "where", "which", "who",
    "whose", "with", "all", "any", "each", "list", "show", "give", "find", "name", "names",
    "number", "count", "total", "average", "id", "ids", "yes", "no", "not", "than", "more", "most",
    "less", "least", "that", "those", "these", "also", "both", "only",
];

/// Bounds on what an index holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueIndexLimits {
    /// Distinct values read per column.
    pub per_column: usize,
    /// Values kept per database.
    pub total: usize,
    /// Longer values are skipped (descriptions and free text are not looked up by name).
    pub max_chars: usize,
}

impl Default for ValueIndexLimits {
    fn default() -> Self {
        Self {
            per_column: 2_000,
            total: 100_000,
            max_chars: 60,
        }
    }
}

/// A stored value the question names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValueMatch {
    pub table: String,
    pub column: String,
    /// The value as the column stores it.
    pub value: String,
    /// 1 for an exact match after normalization, the trigram Jaccard index otherwise.
    pub score: f32,
}

#[derive(Debug, Clone)]
struct Entry {
    table: String,
    column: String,
    value: String,
    /// Distinct trigrams of the normalized value, for the Jaccard index.
    trigram_count: usize,
}

/// The text values of one database.
#[derive(Debug, Clone, Default)]
pub struct ValueIndex {
    entries: Vec<Entry>,
    /// Normalized value → entries with it.
    exact: HashMap<String, Vec<u32>>,
    /// Trigram → entries whose normalized value contains it.
    trigrams: HashMap<[char; 3], Vec<u32>>,
    /// Columns whose values could not be read (the query failed or ran out of time).
    pub skipped_columns: usize,
}

impl ValueIndex {
    /// Reads the text values of every column of `schema` through `session`.
    pub fn build(schema: &Schema, session: &mut dyn Session, limits: ValueIndexLimits) -> Self {
        let mut index = Self::default();
        'tables: for table in &schema.tables {
            for column in &table.columns {
                if index.entries.len() >= limits.total {
                    break 'tables;
                }
                let sql = format!(
                    "SELECT DISTINCT {col} FROM {table} WHERE {col} IS NOT NULL LIMIT {n}",
                    col = schema.dialect.quote(&column.name),
                    table = schema.dialect.quote(&table.name),
                    n = limits.per_column,
                );
                let Ok(result) = session.execute(&sql) else {
                    index.skipped_columns += 1;
                    continue;
                };
                for row in result.rows {
                    let Some(Value::Text(text)) = row.into_iter().next() else {
                        continue;
                    };
                    if index.entries.len() >= limits.total {
                        break;
                    }
                    index.add(&table.name, &column.name, text.trim(), limits.max_chars);
                }
            }
        }
        index
    }

    fn add(&mut self, table: &str, column: &str, value: &str, max_chars: usize) {
        let normalized = normalize(value);
        let looks_like_a_name = normalized.chars().any(char::is_alphabetic);
        if value.chars().count() > max_chars
            || normalized.chars().count() < 2
            || !looks_like_a_name
            || NEVER_VALUES.contains(&normalized.as_str())
        {
            return;
        }
        let id = self.entries.len() as u32;
        let grams: HashSet<[char; 3]> = trigrams(&normalized).collect();
        for &gram in &grams {
            self.trigrams.entry(gram).or_default().push(id);
        }
        self.exact.entry(normalized).or_default().push(id);
        self.entries.push(Entry {
            table: table.to_owned(),
            column: column.to_owned(),
            value: value.to_owned(),
            trigram_count: grams.len(),
        });
    }

    /// Values kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every kept value as (table, column, value), in the order they were read.
    pub fn values(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.entries
            .iter()
            .map(|e| (e.table.as_str(), e.column.as_str(), e.value.as_str()))
    }

    /// The stored values `question` names, best first (exact before fuzzy, longer spans
    /// first among equals), at most `per_column` per column and `max` in all.
    pub fn matches(&self, question: &str, max: usize, per_column: usize) -> Vec<ValueMatch> {
        let words: Vec<String> = normalize(question)
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        // Best score per entry, and the span length that gave it.
        let mut best: HashMap<u32, (f32, usize)> = HashMap::new();
        let mut keep = |id: u32, score: f32, span: usize| {
            let slot = best.entry(id).or_insert((0.0, 0));
            if (score, span) > *slot {
                *slot = (score, span);
            }
        };
        for n in 1..=MAX_SPAN_WORDS.min(words.len()) {
            for window in words.windows(n) {
                if window.iter().all(|w| NEVER_VALUES.contains(&w.as_str())) {
                    continue;
                }
                let span = window.join(" ");
                if let Some(ids) = self.exact.get(&span) {
                    ids.iter().for_each(|&id| keep(id, 1.0, n));
                }
                if span.chars().count() >= 4 {
                    for (id, score) in self.fuzzy(&span) {
                        keep(id, score, n);
                    }
                }
            }
        }
        let mut found: Vec<(u32, f32, usize)> =
            best.into_iter().map(|(id, (s, n))| (id, s, n)).collect();
        // Ties go by name, not by the order the backend returned the values in, so that the
        // same data gives the same matches whatever the database.
        let key = |id: u32| {
            let e = &self.entries[id as usize];
            (e.table.as_str(), e.column.as_str(), e.value.as_str())
        };
        found.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then(b.2.cmp(&a.2))
                .then_with(|| key(a.0).cmp(&key(b.0)))
        });
        let mut per: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        let mut out = Vec::new();
        for (id, score, _) in found {
            let e = &self.entries[id as usize];
            let count = per.entry((&e.table, &e.column)).or_default();
            if *count >= per_column {
                continue;
            }
            *count += 1;
            out.push(ValueMatch {
                table: e.table.clone(),
                column: e.column.clone(),
                value: e.value.clone(),
                score,
            });
            if out.len() == max {
                break;
            }
        }
        out
    }

    /// Entries whose trigrams overlap `span`'s by at least [`FUZZY_THRESHOLD`].
    fn fuzzy(&self, span: &str) -> Vec<(u32, f32)> {
        let grams: HashSet<[char; 3]> = trigrams(span).collect();
        let mut shared: HashMap<u32, usize> = HashMap::new();
        for gram in &grams {
            for &id in self.trigrams.get(gram).map_or(&[][..], Vec::as_slice) {
                *shared.entry(id).or_default() += 1;
            }
        }
        shared
            .into_iter()
            .filter_map(|(id, common)| {
                let theirs = self.entries[id as usize].trigram_count;
                let union = grams.len() + theirs - common;
                let score = common as f32 / union.max(1) as f32;
                (score >= FUZZY_THRESHOLD).then_some((id, score))
            })
            .collect()
    }
}

/// Lower case, letters and digits, single spaces between runs of them.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with(' ') {
            out.push(' ');
        }
    }
    out.trim_end().to_owned()
}

/// Character trigrams of ` text ` (padded, so that short values have some).
fn trigrams(text: &str) -> impl Iterator<Item = [char; 3]> {
    let chars: Vec<char> = format!(" {text} ").chars().collect();
    (0..chars.len().saturating_sub(2))
        .map(move |i| [chars[i], chars[i + 1], chars[i + 2]])
        .collect::<Vec<_>>()
        .into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(values: &[(&str, &str, &str)]) -> ValueIndex {
        let mut index = ValueIndex::default();
        for (table, column, value) in values {
            index.add(table, column, value, 60);
        }
        index
    }

    #[test]
    fn exact_matches_ignore_case_and_punctuation() {
        let index = index(&[
            ("airlines", "Airline", "JetBlue Airways"),
            ("airlines", "Country", "USA"),
            ("singer", "Country", "France"),
            ("singer", "Name", "Joe Sharp"),
        ]);
        let found = index.matches("Which airlines are from usa, like Jetblue Airways?", 8, 3);
        let values: Vec<&str> = found.iter().map(|m| m.value.as_str()).collect();
        assert_eq!(values, vec!["JetBlue Airways", "USA"]);
        assert!(found.iter().all(|m| m.score == 1.0));
        assert!(
            index
                .matches("How many singers are there?", 8, 3)
                .is_empty()
        );
    }

    #[test]
    fn near_spellings_match_by_trigrams_and_unrelated_words_do_not() {
        let index = index(&[
            ("country", "Name", "Afghanistan"),
            ("country", "Name", "Aruba"),
            ("city", "District", "Kabol"),
        ]);
        let found = index.matches("What is the population of Afganistan?", 8, 3);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].value, "Afghanistan");
        assert!(found[0].score >= FUZZY_THRESHOLD && found[0].score < 1.0);
        assert!(index.matches("Show the districts", 8, 3).is_empty());
    }

    #[test]
    fn stopwords_numbers_and_long_text_are_not_indexed() {
        let long = "x".repeat(61);
        let index = index(&[
            ("t", "a", "the"),
            ("t", "a", "1999"),
            ("t", "a", "12.5"),
            ("t", "a", &long),
            ("t", "a", "Y"),
        ]);
        assert!(index.is_empty());
    }

    #[test]
    fn matches_are_capped_per_column_and_in_all() {
        let index = index(&[
            ("t", "a", "red"),
            ("t", "a", "green"),
            ("t", "a", "blue"),
            ("t", "b", "blue sky"),
        ]);
        let found = index.matches("red green blue sky", 8, 2);
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0].value, "blue sky", "the longer exact span first");
        assert_eq!(index.matches("red green blue sky", 1, 2).len(), 1);
    }

    #[test]
    fn a_spider_database_is_read_through_its_session() {
        let db = crate::spider_fixture::concert();
        let index = db.value_index().expect("read");
        assert_eq!(index.skipped_columns, 0);
        let found = index.matches("Which singers are from the netherlands?", 6, 2);
        assert_eq!(
            (found[0].table.as_str(), found[0].column.as_str()),
            ("singer", "Country")
        );
        assert_eq!(found[0].value, "Netherlands");
        // Numbers are not text values: years and ids are never matched.
        assert!(index.matches("concerts in 2014", 6, 2).is_empty());
    }

    #[test]
    fn an_unreachable_database_is_an_error_each_time_not_an_empty_index() {
        let concert = crate::spider_fixture::concert();
        let gone = crate::database::DatabaseHandle::new(
            "concert_singer",
            std::sync::Arc::new(crate::backend::SqliteFile {
                path: "/nonexistent/concert_singer.sqlite".into(),
            }),
            concert.schema.clone(),
        );
        assert!(gone.value_index().is_err());
        assert!(
            gone.value_index().is_err(),
            "a failure is not kept as an index"
        );
    }

    #[test]
    fn normalization() {
        assert_eq!(normalize("  Jet-Blue  AIRWAYS! "), "jet blue airways");
        assert_eq!(normalize("São Paulo"), "são paulo");
        assert_eq!(normalize("--"), "");
    }
}
