//! Training examples from Spider-format data, rendered by the code the server prompts with.
//!
//! One example is the generation prompt the pipeline sends a generator of the chosen format
//! (`quorum_sql::pipeline::generation_prompt` → chat template → the answer prefix written for
//! the model), followed by the gold query as the model must continue it, the closing fence and
//! the end-of-turn token. The loss covers only that continuation. A share of the examples shows
//! only the gold query's tables, as round 2 of the pipeline does after schema linking (in
//! round 2's format, where it differs), and a share of the questions is asked a second time
//! reworded ([`crate::augment`]).

use std::collections::HashMap;

use quorum_sql::database::DatabaseHandle;
use quorum_sql::dataset::{Example, SpiderDataset};
use quorum_sql::linking::tables::link_tables;
use quorum_sql::model::SQL_ANSWER_PREFIX;
use quorum_sql::pipeline::{PromptFormat, generation_messages, generation_prompt};
use quorum_sql::prompt::RepOptions;
use quorum_sql::schema::{IntrospectOptions, Schema};
use quorum_weights::{ChatTemplate, render_turn};
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::augment::{AugmentStats, Synonyms, reword};
use crate::error::{TrainError, TrainResult};
use crate::seed::mix;

/// One tokenized example: the prompt, then the answer from `answer_start` on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrainingExample {
    pub tokens: Vec<u32>,
    pub answer_start: usize,
}

impl TrainingExample {
    pub fn answer_tokens(&self) -> usize {
        self.tokens.len() - self.answer_start
    }
}

/// How the examples are rendered.
#[derive(Debug, Clone)]
pub struct ExampleOptions {
    pub format: PromptFormat,
    /// The format of the examples that show only the gold query's tables. One adapted model
    /// that writes the PreSQL in one format over the whole schema and the FinSQL in another
    /// over the linked tables (the default profile: RE_p, then SimpleDDL) learns both calls
    /// in one adapter; for an adapter of one format it is `format`.
    pub linked_format: PromptFormat,
    /// Longest example kept, prompt and answer together.
    pub max_tokens: usize,
    /// Share of examples whose prompt shows only the gold query's tables (round 2's view).
    pub linked_share: f64,
    /// Share of the questions that also train reworded (other values, synonyms of schema
    /// words), as an example of their own after the original.
    pub augment_share: f64,
    pub seed: u64,
}

/// The tokenizer side of a model: what its prompts are rendered and tokenized with.
#[derive(Debug, Clone, Copy)]
pub struct PromptCodec<'a> {
    pub tokenizer: &'a tokenizers::Tokenizer,
    pub chat_template: Option<&'a ChatTemplate>,
    /// Appended after the answer: the model's end-of-turn token.
    pub end_token: u32,
}

impl PromptCodec<'_> {
    /// `text` (a rendered prompt) followed by `answer` (and the end-of-turn token when
    /// `end_turn`), the loss on the answer. Tokenized apart, as at serving time: the server
    /// tokenizes the prompt and the model continues after its last token.
    pub fn prompt_and_answer(
        &self,
        text: &str,
        answer: &str,
        end_turn: bool,
    ) -> TrainResult<TrainingExample> {
        let encode = |s: &str| -> TrainResult<Vec<u32>> {
            Ok(self
                .tokenizer
                .encode(s, false)
                .map_err(|e| TrainError::Data(format!("tokenizer: {e}")))?
                .get_ids()
                .to_vec())
        };
        let mut tokens = encode(text)?;
        let answer_start = tokens.len();
        tokens.extend(encode(answer)?);
        if end_turn {
            tokens.push(self.end_token);
        }
        Ok(TrainingExample {
            tokens,
            answer_start,
        })
    }
}

/// What building the examples kept and dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExampleStats {
    pub kept: usize,
    pub linked_schema: usize,
    pub too_long: usize,
    /// Gold queries that do not start with `SELECT` cannot continue the answer prefix.
    pub not_select: usize,
    pub database_errors: usize,
    pub prompt_tokens: usize,
    pub answer_tokens: usize,
    /// Reworded examples among `kept`, and what their rewording replaced.
    pub augmented: AugmentStats,
}

/// The answer as the model continues it after [`SQL_ANSWER_PREFIX`], or `None` when the gold
/// query does not start with `SELECT`.
pub fn answer_continuation(gold: &str) -> Option<String> {
    let sql = gold.trim().trim_end_matches(';').trim_end();
    let head = sql.get(..7)?;
    if !head.eq_ignore_ascii_case("SELECT ") {
        return None;
    }
    // The prefix ends with `SELECT `, so the answer continues after it.
    debug_assert!(SQL_ANSWER_PREFIX.ends_with("SELECT "));
    Some(format!("{}\n```", &sql[7..]))
}

/// Renders and tokenizes one example over `schema`.
pub fn render_example(
    codec: PromptCodec<'_>,
    format: PromptFormat,
    schema: &Schema,
    question: &str,
    answer: &str,
) -> TrainResult<TrainingExample> {
    let prompt = generation_prompt(format, RepOptions::default(), schema, question, None);
    let messages = generation_messages(&prompt, true);
    let text = render_turn(
        codec.chat_template,
        messages.system.as_deref(),
        &messages.user,
        messages.answer_prefix.as_deref(),
    )
    .map_err(|e| TrainError::Data(e.to_string()))?;
    codec.prompt_and_answer(&text, answer, true)
}

/// Every usable example of `examples` (Spider's `train.json`), in file order, each reworded
/// variant right after its original.
pub fn build_examples(
    dataset: &SpiderDataset,
    examples: &[Example],
    codec: PromptCodec<'_>,
    options: &ExampleOptions,
) -> TrainResult<(Vec<TrainingExample>, ExampleStats)> {
    let mut databases: HashMap<String, Option<DatabaseHandle>> = HashMap::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(options.seed);
    // A stream of its own, so that a run without rewording draws what it always drew.
    let mut augment_rng = rand::rngs::StdRng::seed_from_u64(mix(options.seed, AUGMENT_STREAM));
    let synonyms = Synonyms::default();
    let mut stats = ExampleStats::default();
    let mut out = Vec::new();
    for ex in examples {
        let database = databases.entry(ex.db_id.clone()).or_insert_with(|| {
            DatabaseHandle::open(
                &dataset.database_path(&ex.db_id),
                &ex.db_id,
                IntrospectOptions::default(),
            )
            .map_err(|e| tracing::warn!(db = %ex.db_id, error = %e, "skipping database"))
            .ok()
        });
        let Some(database) = database else {
            stats.database_errors += 1;
            continue;
        };
        let schema = &database.schema;
        if answer_continuation(&ex.query).is_none() {
            stats.not_select += 1;
            continue;
        }
        // The question, its gold query and, for a reworded one, what was replaced.
        let mut asked = vec![(ex.question.clone(), ex.query.clone(), None)];
        if options.augment_share > 0.0 && augment_rng.random::<f64>() < options.augment_share {
            let values = database
                .value_index()
                .map_err(|e| TrainError::Data(format!("{}: values: {e}", ex.db_id)))?;
            if let Some(variant) = reword(
                &ex.question,
                &ex.query,
                schema,
                values,
                &synonyms,
                &mut augment_rng,
            ) {
                let replaced = variant.replaced();
                asked.push((variant.question, variant.query, Some(replaced)));
            }
        }
        for (question, query, replaced) in asked {
            let answer = answer_continuation(&query).expect("a rewording keeps the SELECT");
            let linked = rng.random::<f64>() < options.linked_share;
            let restricted;
            let view = if linked {
                let tables = link_tables(&query, schema).tables;
                if tables.is_empty() {
                    schema
                } else {
                    restricted = schema.restrict_to(&tables);
                    &restricted
                }
            } else {
                schema
            };
            // Drawn for round 2's view: its format, even in the rare example whose gold
            // query names no table found in the schema and so shows the whole schema.
            let format = if linked {
                options.linked_format
            } else {
                options.format
            };
            let example = render_example(codec, format, view, &question, &answer)?;
            if example.tokens.len() > options.max_tokens {
                stats.too_long += 1;
                continue;
            }
            stats.kept += 1;
            stats.linked_schema += usize::from(linked);
            if let Some((values, words)) = replaced {
                stats.augmented.variants += 1;
                stats.augmented.values_replaced += values;
                stats.augmented.words_replaced += words;
            }
            stats.prompt_tokens += example.answer_start;
            stats.answer_tokens += example.answer_tokens();
            out.push(example);
        }
    }
    if out.is_empty() {
        return Err(TrainError::Data(format!("no usable example ({stats:?})")));
    }
    Ok((out, stats))
}

/// The seed stream of the rewording draws ([`mix`]).
const AUGMENT_STREAM: u64 = 0xA6;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_continues_the_prefix() {
        assert_eq!(
            answer_continuation("SELECT count(*) FROM singer ;").as_deref(),
            Some("count(*) FROM singer\n```")
        );
        assert_eq!(
            answer_continuation("select name from t").as_deref(),
            Some("name from t\n```")
        );
        assert_eq!(
            answer_continuation("WITH x AS (SELECT 1) SELECT * FROM x"),
            None
        );
        assert_eq!(answer_continuation("SELECT"), None);
    }
}
