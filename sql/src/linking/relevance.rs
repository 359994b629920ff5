//! The de-semanticization paper's question–schema relevance score, which decides which question
//! words are masked into the question's skeleton.
//!
//! For every question word `q_i` and schema item `s_j` (a table or column name):
//! - `D_p[i][j]`: how far `s_j`'s contextual representation moves, in the Poincaré ball, when
//!   `q_i` is masked in the sequence `[CLS] question [SEP] tables [SEP] columns [SEP]` fed to a
//!   masked language model (the MiniLM embedder here);
//! - `M[i][j]`: 1 for a name match (the word's lemma is a word of the item's name), 1 for a
//!   value match (a cell of that column contains the word), 2 for both;
//! - `R = D_p + β·M`, and the word's score `Q_i = ½ (mean_j R[i][j] + P_i)`, where `P_i = α` for
//!   nouns and numbers and 0 otherwise. Words with `Q_i ≥ τ` are masked.
//!
//! Two choices the paper leaves open, made here:
//! - The mean of `D_p` over the schema items is divided by its largest value among the
//!   question's words, so the word whose masking moves the schema most scores 1. Raw distances depend on the encoder's scale (MiniLM's hidden
//!   states have norms near 10, where `tanh` saturates and every point sits at the boundary),
//!   and the paper's τ needs a fixed scale. For the same reason the hidden states are scaled
//!   by `1/√dim` before they are projected into the ball.
//! - There is no part-of-speech tagger in the project: [`is_noun_or_number`] is a lexical
//!   stand-in (numbers, and content words that are not among the verbs, adjectives and
//!   adverbs that Spider questions use to state their intent).

use crate::linking::mask::{MASK, UNK};
use crate::linking::poincare;
use crate::model::ModelCallError;
use crate::schema::Schema;
use crate::value::Value;
use crate::words::{contains_phrase, is_function_word, is_number, name_words, tokenize};

use crate::model::{ContextEncoder, WordStates};

/// The paper's settings (α = 0.9, β = 0.5, τ = 0.6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RelevanceParams {
    pub alpha: f64,
    pub beta: f64,
    pub tau: f64,
}

impl Default for RelevanceParams {
    fn default() -> Self {
        Self {
            alpha: 0.9,
            beta: 0.5,
            tau: 0.6,
        }
    }
}

/// One question word's score and its parts.
#[derive(Debug, Clone, PartialEq)]
pub struct WordScore {
    pub word: String,
    /// Mean Poincaré shift of the schema items, relative to the question's largest.
    pub shift: f64,
    /// Mean over schema items of the match score `M`.
    pub matching: f64,
    /// `α` for a noun or number, else 0.
    pub pos: f64,
    pub score: f64,
    pub masked: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RelevanceMask {
    /// The question with masked words replaced: `<unk>` for numbers and cell values,
    /// `<mask>` otherwise (the same markers as the lexical masking).
    pub masked_question: String,
    pub words: Vec<WordScore>,
}

/// A schema item: its name as words, and for a column its cell words.
struct Item {
    words: String,
    cells: Vec<String>,
}

fn items(schema: &Schema) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    for table in &schema.tables {
        items.push(Item {
            words: name_words(&table.name),
            cells: Vec::new(),
        });
    }
    for table in &schema.tables {
        for (c, column) in table.columns.iter().enumerate() {
            let cells = table
                .rows
                .iter()
                .filter_map(|row| row.get(c))
                .chain(&column.examples)
                .filter_map(|v| match v {
                    Value::Text(t) => Some(t.to_lowercase()),
                    _ => None,
                })
                .flat_map(|t| {
                    t.split(|ch: char| !ch.is_alphanumeric())
                        .filter(|w| !w.is_empty())
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .collect();
            items.push(Item {
                words: name_words(&column.name),
                cells,
            });
        }
    }
    items
}

/// Scores every word of `question` against `schema` and masks those at or above τ.
pub fn relevance_mask(
    question: &str,
    schema: &Schema,
    encoder: &dyn ContextEncoder,
    params: RelevanceParams,
) -> Result<RelevanceMask, ModelCallError> {
    let tokens = tokenize(question);
    let word_tokens: Vec<usize> = (0..tokens.len()).filter(|&i| tokens[i].is_word).collect();
    let items = items(schema);
    let n_tables = schema.tables.len();
    let groups = vec![
        word_tokens
            .iter()
            .map(|&i| tokens[i].text.to_lowercase())
            .collect::<Vec<_>>(),
        items[..n_tables]
            .iter()
            .map(|it| it.words.clone())
            .collect(),
        items[n_tables..]
            .iter()
            .map(|it| it.words.clone())
            .collect(),
    ];
    let masks: Vec<Option<(usize, usize)>> = std::iter::once(None)
        .chain((0..word_tokens.len()).map(|w| Some((0, w))))
        .collect();
    let states = encoder.word_states(&groups, &masks)?;
    // Schema items in the order of `items`, as points of the ball, per probe.
    let item_points = |probe: &WordStates| -> Vec<Option<Vec<f64>>> {
        probe[1]
            .iter()
            .chain(&probe[2])
            .map(|h| (!h.is_empty()).then(|| poincare::project(&scaled(h))))
            .collect()
    };
    let reference = item_points(&states[0]);
    let shifts: Vec<Vec<f64>> = states[1..]
        .iter()
        .map(|probe| {
            item_points(probe)
                .iter()
                .zip(&reference)
                .map(|(moved, base)| match (moved, base) {
                    (Some(m), Some(b)) => poincare::distance(m, b),
                    _ => 0.0,
                })
                .collect()
        })
        .collect();
    let n_items = items.len().max(1) as f64;
    let mean_shifts: Vec<f64> = shifts
        .iter()
        .map(|row| row.iter().sum::<f64>() / n_items)
        .collect();
    let largest = mean_shifts.iter().fold(0f64, |m, &d| m.max(d));

    let mut masked = vec![None; tokens.len()];
    let mut words = Vec::with_capacity(word_tokens.len());
    for (w, &t) in word_tokens.iter().enumerate() {
        let token = &tokens[t];
        let lower = token.text.to_lowercase();
        let content = !is_function_word(&token.lemma);
        let matching: f64 = items
            .iter()
            .map(|it| {
                let name = content && contains_phrase(&it.words, &token.lemma);
                let value = content && it.cells.contains(&lower);
                f64::from(u8::from(name) + u8::from(value))
            })
            .sum::<f64>()
            / n_items;
        let shift = if largest > 0.0 {
            mean_shifts[w] / largest
        } else {
            0.0
        };
        let pos = if is_noun_or_number(&lower) {
            params.alpha
        } else {
            0.0
        };
        let score = 0.5 * (shift + params.beta * matching + pos);
        let mask = score >= params.tau;
        if mask {
            let value = is_number(&lower) || items.iter().any(|it| it.cells.contains(&lower));
            masked[t] = Some(if value { UNK } else { MASK });
        }
        words.push(WordScore {
            word: token.text.to_owned(),
            shift,
            matching,
            pos,
            score,
            masked: mask,
        });
    }
    let mut out = String::with_capacity(question.len());
    let mut cursor = 0;
    for (token, replacement) in tokens.iter().zip(&masked) {
        out.push_str(&question[cursor..token.start]);
        out.push_str(replacement.unwrap_or(token.text));
        cursor = token.start + token.text.len();
    }
    out.push_str(&question[cursor..]);
    Ok(RelevanceMask {
        masked_question: out,
        words,
    })
}

/// Hidden states scaled by `1/√dim`, so that their projection does not saturate at the
/// boundary of the ball.
fn scaled(h: &[f32]) -> Vec<f32> {
    let s = 1.0 / (h.len() as f32).sqrt();
    h.iter().map(|x| x * s).collect()
}

/// Words that Spider questions use to state what they ask for rather than what about: verbs,
/// quantity and order adjectives, adverbs.
const INTENT_WORDS: &[&str] = &[
    "show",
    "list",
    "find",
    "give",
    "return",
    "tell",
    "display",
    "count",
    "compute",
    "calculate",
    "sort",
    "sorted",
    "order",
    "ordered",
    "rank",
    "ranked",
    "arrange",
    "arranged",
    "group",
    "grouped",
    "have",
    "had",
    "has",
    "get",
    "make",
    "made",
    "belong",
    "belongs",
    "contain",
    "contains",
    "include",
    "includes",
    "many",
    "much",
    "number",
    "total",
    "average",
    "mean",
    "maximum",
    "minimum",
    "max",
    "min",
    "highest",
    "lowest",
    "largest",
    "smallest",
    "biggest",
    "greatest",
    "least",
    "longest",
    "shortest",
    "oldest",
    "youngest",
    "newest",
    "latest",
    "earliest",
    "older",
    "younger",
    "greater",
    "larger",
    "smaller",
    "bigger",
    "higher",
    "lower",
    "less",
    "fewer",
    "different",
    "distinct",
    "unique",
    "descending",
    "ascending",
    "alphabetical",
    "alphabetically",
    "respectively",
    "either",
    "neither",
    "never",
    "least",
    "top",
    "first",
    "last",
    "name",
    "names",
    "please",
    "corresponding",
    "whose",
    "ever",
    "there",
    "exactly",
    "equal",
    "same",
    "sum",
    "amount",
    "count",
    "times",
    "ids",
    "id",
    "info",
    "information",
    "details",
    "record",
    "records",
    "value",
    "values",
    "type",
    "types",
];

/// A lexical stand-in for a part-of-speech tagger: numbers, and content words that are not
/// intent words nor (by their ending) adverbs or verb forms.
pub fn is_noun_or_number(word: &str) -> bool {
    if is_number(word) {
        return true;
    }
    if is_function_word(word) || INTENT_WORDS.contains(&word) {
        return false;
    }
    let verbish = ["ly", "ing", "ed"]
        .iter()
        .any(|suffix| word.len() > suffix.len() + 2 && word.ends_with(suffix));
    !verbish
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Column, Table};

    /// An encoder whose representation of an item moves only when a word starting with one of
    /// the item's words is masked (`lexical`), or moves the same for every masked word: two
    /// stand-ins with obvious right answers.
    struct StandIn {
        lexical: bool,
    }

    impl ContextEncoder for StandIn {
        fn word_states(
            &self,
            groups: &[Vec<String>],
            masks: &[Option<(usize, usize)>],
        ) -> Result<Vec<WordStates>, ModelCallError> {
            Ok(masks
                .iter()
                .map(|mask| {
                    let masked_word = mask.map(|(g, w)| groups[g][w].clone());
                    groups
                        .iter()
                        .map(|words| {
                            words
                                .iter()
                                .map(|w| {
                                    let hit = masked_word.as_ref().is_some_and(|m| {
                                        !self.lexical || w.split(' ').any(|p| m.starts_with(p))
                                    });
                                    vec![if hit { 9.0 } else { 1.0 }, 2.0, -1.0]
                                })
                                .collect()
                        })
                        .collect()
                })
                .collect())
        }
    }

    fn singer_schema() -> Schema {
        let col = |name: &str, examples: &[&str]| Column {
            name: name.into(),
            declared_type: "text".into(),
            primary_key: false,
            comment: None,
            examples: examples.iter().map(|e| Value::Text((*e).into())).collect(),
        };
        Schema {
            db_id: "concert_singer".into(),
            tables: vec![Table {
                name: "singer".into(),
                columns: vec![
                    col("Name", &["Joe Sharp"]),
                    col("Country", &["France", "Netherlands"]),
                ],
                primary_key: vec![],
                rows: vec![],
            }],
            foreign_keys: vec![],
            dialect: Default::default(),
        }
    }

    #[test]
    fn schema_words_are_masked_and_the_intent_kept() {
        let question = "What are the names of the singers from France?";
        let params = RelevanceParams::default();
        let lexical = StandIn { lexical: true };
        let r = relevance_mask(question, &singer_schema(), &lexical, params).unwrap();
        // "names" moves the `Name` column as much as "singers" moves `singer`, but it states the
        // intent (no noun prior); "France" matches a cell but moves nothing here.
        assert_eq!(
            r.masked_question,
            "What are the names of the <mask> from France?"
        );
        let word = |w: &str| r.words.iter().find(|s| s.word == w).unwrap().clone();
        let singers = word("singers");
        assert!(singers.shift == 1.0 && singers.matching > 0.0 && singers.pos == 0.9);
        assert_eq!((word("names").shift, word("names").pos), (1.0, 0.0));
        assert!(word("France").matching > 0.0);

        // When every word moves the schema alike, the noun prior decides, and a word found in
        // the cells becomes `<unk>`.
        let uniform = StandIn { lexical: false };
        let r = relevance_mask(question, &singer_schema(), &uniform, params).unwrap();
        assert_eq!(
            r.masked_question,
            "What are the names of the <mask> from <unk>?"
        );
    }

    #[test]
    fn the_pos_stand_in() {
        for noun in ["singer", "stadium", "2014", "3.5", "france"] {
            assert!(is_noun_or_number(noun), "{noun}");
        }
        for other in [
            "what", "show", "many", "average", "quickly", "playing", "ordered",
        ] {
            assert!(!is_noun_or_number(other), "{other}");
        }
    }
}
