//! Term hints: the question's words for a table or column that its name does not spell
//! ("vocalists" for `singer`, "nations" for `Country`), found by meaning and told to the
//! generators beside the question.
//!
//! Spider's questions mostly reuse the schema's words, and the generators lean on that; users
//! word questions their own way. A question word that is not a schema word is embedded with
//! every table and column name; where one name is close in meaning, and clearly closer than
//! every other, the pair becomes a hint. Single words are embedded alone, so a hint says only
//! which name a word stands for, never what the question asks.

use crate::model::{Embedder, ModelCallError, cosine, embed_checked};
use crate::schema::Schema;
use crate::words::{is_function_word, is_number, name_words, tokenize};

/// Cosine similarity at and above which a name is taken to be what a word means. Measured on
/// all-MiniLM-L6-v2 word pairs: synonyms ("vocalists" and "singer", "towns" and "city", "price"
/// and "cost") score 0.55 to 0.76, related but different things ("country" and "city")
/// around 0.5, unrelated ones below 0.45.
pub const MIN_SIMILARITY: f32 = 0.55;

/// How much closer the best name must be than the next best, so that a word between two names
/// ("area" between a region and a surface area) gets no hint.
pub const MIN_MARGIN: f32 = 0.08;

/// Question words shorter than this say too little alone ("car" is a word, "of" is not).
const MIN_WORD_CHARS: usize = 3;

/// One question word and the name it stands for.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TermHint {
    /// The word as the question writes it.
    pub word: String,
    /// `table T` or `column T.C`.
    pub target: String,
    pub similarity: f32,
}

/// The hints for `question` over `schema`; empty when every word is a schema word or none is
/// close enough to one name.
pub fn term_hints(
    question: &str,
    schema: &Schema,
    embedder: &dyn Embedder,
) -> Result<Vec<TermHint>, ModelCallError> {
    let names = schema_names(schema);
    let schema_words: Vec<&str> = names
        .iter()
        .flat_map(|n| n.words.split_whitespace())
        .collect();
    let words = candidate_words(question, &schema_words);
    if words.is_empty() || names.is_empty() {
        return Ok(Vec::new());
    }
    // Names spelt alike (`Country` in two tables) share one vector.
    let mut distinct: Vec<&str> = names.iter().map(|n| n.words.as_str()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let texts: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .chain(distinct.iter().copied())
        .collect();
    let vectors = embed_checked(embedder, &texts, None)?;
    let (word_vectors, name_vectors) = vectors.split_at(words.len());
    let mut hints = Vec::new();
    for (word, vector) in words.iter().zip(word_vectors) {
        let mut scored: Vec<(f32, &str)> = distinct
            .iter()
            .zip(name_vectors)
            .map(|(name, v)| (cosine(vector, v), *name))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let Some(&(best, best_words)) = scored.first() else {
            continue;
        };
        let runner_up = scored.get(1).map_or(0.0, |s| s.0);
        if best < MIN_SIMILARITY || best - runner_up < MIN_MARGIN {
            continue;
        }
        let owners: Vec<&Name> = names.iter().filter(|n| n.words == best_words).collect();
        hints.push(TermHint {
            word: word.clone(),
            target: describe(&owners),
            similarity: best,
        });
    }
    Ok(hints)
}

/// A table or column name of the schema and the words it is made of.
struct Name<'s> {
    table: &'s str,
    column: Option<&'s str>,
    words: String,
}

fn schema_names(schema: &Schema) -> Vec<Name<'_>> {
    let mut names = Vec::new();
    for table in &schema.tables {
        names.push(Name {
            table: &table.name,
            column: None,
            words: name_words(&table.name),
        });
        for column in &table.columns {
            names.push(Name {
                table: &table.name,
                column: Some(&column.name),
                words: name_words(&column.name),
            });
        }
    }
    names
}

/// `table T`, `column T.C`, or `column C` for a column several tables have, or the names in
/// turn where a table and a column are spelt alike.
fn describe(owners: &[&Name<'_>]) -> String {
    let columns: Vec<&str> = owners.iter().filter_map(|n| n.column).collect();
    let tables: Vec<&str> = owners
        .iter()
        .filter(|n| n.column.is_none())
        .map(|n| n.table)
        .collect();
    let mut parts: Vec<String> = tables.iter().map(|t| format!("table {t}")).collect();
    match owners
        .iter()
        .filter(|n| n.column.is_some())
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => {}
        [only] => parts.push(format!("column {}.{}", only.table, columns[0])),
        _ => parts.push(format!("column {}", columns[0])),
    }
    parts.join(" or ")
}

/// The hints as one line of evidence: `"vocalists" means table singer; ...`.
pub fn hints_as_evidence(hints: &[TermHint]) -> Option<String> {
    (!hints.is_empty()).then(|| {
        let pairs: Vec<String> = hints
            .iter()
            .map(|h| format!("\"{}\" means {}", h.word, h.target))
            .collect();
        format!("in this database, {}", pairs.join("; "))
    })
}

/// The question's words worth a hint: lower-case words (a capitalized word inside the
/// sentence is most often a name, a value), not inside quotes, not function words or numbers,
/// and not already a schema word (as written or as its singular), each once.
fn candidate_words(question: &str, schema_words: &[&str]) -> Vec<String> {
    let quoted = quoted_ranges(question);
    let mut out: Vec<String> = Vec::new();
    for (i, token) in tokenize(question).iter().enumerate() {
        let lower = token.text.to_lowercase();
        let inside_quotes = quoted
            .iter()
            .any(|&(s, e)| token.start >= s && token.start < e);
        let capitalized_inside = i > 0 && token.text.chars().next().is_some_and(char::is_uppercase);
        if !token.is_word
            || inside_quotes
            || capitalized_inside
            || lower.chars().count() < MIN_WORD_CHARS
            || is_function_word(&lower)
            || is_number(&lower)
            || schema_words.contains(&lower.as_str())
            || schema_words.contains(&token.lemma.as_str())
            || out.contains(&lower)
        {
            continue;
        }
        out.push(lower);
    }
    out
}

/// Byte ranges of the question inside single or double quotes.
fn quoted_ranges(question: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut open: Option<(char, usize)> = None;
    for (i, c) in question.char_indices() {
        match open {
            Some((q, start)) if c == q => {
                ranges.push((start, i));
                open = None;
            }
            None if c == '"' || c == '“' => open = Some((if c == '“' { '”' } else { '"' }, i)),
            None if c == '\''
                && question[..i]
                    .chars()
                    .next_back()
                    .is_none_or(|p| !p.is_alphanumeric()) =>
            {
                open = Some(('\'', i));
            }
            _ => {}
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Column, Table};

    /// Vectors by word: each known word points along its own axis, synonyms along the same one.
    struct Axes;

    impl Embedder for Axes {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelCallError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let axis = match *t {
                        "singer" | "vocalists" => 0,
                        "country" | "nations" => 1,
                        "age" => 2,
                        "concert" => 3,
                        _ => 4,
                    };
                    let mut v = vec![0.0; 6];
                    v[axis] = 1.0;
                    // Unknown words also lean a little on one more axis, to differ.
                    if axis == 4 {
                        v[5] = t.len() as f32;
                    }
                    v
                })
                .collect())
        }
    }

    fn schema() -> Schema {
        let column = |name: &str| Column {
            name: name.into(),
            declared_type: String::new(),
            primary_key: false,
            comment: None,
            examples: Vec::new(),
        };
        let table = |name: &str, columns: Vec<Column>| Table {
            name: name.into(),
            columns,
            primary_key: Vec::new(),
            rows: Vec::new(),
        };
        Schema {
            db_id: "concert_singer".into(),
            tables: vec![
                table("singer", vec![column("Country"), column("Age")]),
                table("concert", vec![column("Country")]),
            ],
            foreign_keys: Vec::new(),
            dialect: Default::default(),
        }
    }

    #[test]
    fn a_synonym_gets_a_hint_and_a_schema_word_does_not() {
        let hints = term_hints(
            "How many vocalists from each nations are older than the average age?",
            &schema(),
            &Axes,
        )
        .unwrap();
        let pairs: Vec<(&str, &str)> = hints
            .iter()
            .map(|h| (h.word.as_str(), h.target.as_str()))
            .collect();
        // "Country" is a column of two tables: the hint names the column alone.
        assert_eq!(
            pairs,
            [("vocalists", "table singer"), ("nations", "column Country")]
        );
        assert_eq!(
            hints_as_evidence(&hints).unwrap(),
            "in this database, \"vocalists\" means table singer; \"nations\" means column Country"
        );
    }

    #[test]
    fn names_values_and_quoted_words_get_no_hint() {
        let hints = term_hints(
            "Which vocalists sang \"nations unite\" in Paris for Vocalists Inc?",
            &schema(),
            &Axes,
        )
        .unwrap();
        assert_eq!(hints.len(), 1, "{hints:?}");
        assert_eq!(hints[0].word, "vocalists");
        assert!(hints_as_evidence(&[]).is_none());
    }
}
