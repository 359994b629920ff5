//! Warming a database's prompts. Every round-1 prompt over a database begins with the same
//! instruction and schema, and every revision prompt with its own; only the question and what
//! follows it differ. Computing those beginnings once, when the database is registered, and
//! asking the server to keep them resident spares the database's first question their prefill
//! (on a 50-column business schema, thousands of tokens: tens of seconds on two cores), and
//! any later question the cost of a prefix that other prompts pushed out of the cache.

use std::time::Instant;

use super::Pipeline;
use super::config::GeneratorConfig;
use super::render::{Ask, Feedback, generation_messages, render_generation, render_revision};
use crate::database::DatabaseHandle;
use crate::model::{GenerationRequest, Sampling};
use crate::prompt::Prompt;
use crate::run_error::RunError;

/// The question the warming prompts ask. Only the blocks before it are kept, so its words do
/// not matter; a question mark keeps the prompt short.
const PLACEHOLDER_QUESTION: &str = "?";

/// What warming a database computed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WarmReport {
    /// One per generator and prompt kind (round 1, revision).
    pub prompts: usize,
    pub prompt_tokens: usize,
    /// Prompt tokens that were already resident.
    pub cached_tokens: usize,
    pub elapsed_ms: f64,
    /// Why nothing was warmed: the schema filter shows each question its own tables, so the
    /// prompts share no schema to keep.
    pub skipped: Option<&'static str>,
}

impl Pipeline {
    /// Computes the beginnings of the round-1 and revision prompts over `db` and asks the
    /// server to keep them resident under tags naming the database, the generator and the
    /// prompt kind. Costs one prefill of each; the answers to later questions are the same
    /// with or without it.
    pub fn warm(&self, db: &DatabaseHandle) -> Result<WarmReport, RunError> {
        let started = Instant::now();
        let config = &self.config;
        let above = config.schema_filter_above;
        if above > 0 && db.schema.tables.len() > above {
            return Ok(WarmReport {
                skipped: Some("the schema filter shows each question its own tables"),
                ..WarmReport::default()
            });
        }
        let ask = Ask {
            question: PLACEHOLDER_QUESTION,
            evidence: None,
            values: &[],
        };
        let mut requests = Vec::new();
        let first = &config.generators[0];
        let round1 = render_generation(
            config.round1.format,
            config.round1.rep,
            &db.schema,
            ask,
            &[],
        );
        requests.push(Self::warming_request(db, first, "round1", &round1));
        if config.revision.enabled {
            // Revision prompts start the same whatever failed; most revisions answer an error.
            let revision =
                render_revision(&db.schema, ask, "SELECT 1", &Feedback::Error(String::new()));
            let mut named: Vec<&str> = Vec::new();
            for generator in &config.generators {
                if named.contains(&generator.name.as_str()) {
                    continue;
                }
                named.push(&generator.name);
                requests.push(Self::warming_request(db, generator, "revision", &revision));
            }
        }
        let outputs = self.models.generator.generate_batch(&requests);
        if outputs.len() != requests.len() {
            return Err(RunError::BatchSize {
                expected: requests.len(),
                got: outputs.len(),
            });
        }
        let mut report = WarmReport {
            prompts: requests.len(),
            ..WarmReport::default()
        };
        for output in outputs {
            let generation = output.map_err(|source| RunError::Model {
                stage: "warm",
                source,
            })?;
            report.prompt_tokens += generation.prompt_tokens;
            report.cached_tokens += generation.cached_tokens;
        }
        report.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(report)
    }

    /// One token of `prompt` on `generator`, its prefix kept under a tag of its own.
    fn warming_request(
        db: &DatabaseHandle,
        generator: &GeneratorConfig,
        kind: &str,
        prompt: &Prompt,
    ) -> GenerationRequest {
        // No answer prefix: it follows the question, past every block kept.
        GenerationRequest {
            generator: generator.name.clone(),
            prompt: generation_messages(prompt, false),
            sampling: Sampling {
                max_new_tokens: 1,
                ..Sampling::default()
            },
            stop: Vec::new(),
            grammar: None,
            draft_hint: None,
            keep_prefix: Some(format!("{}/{}/{kind}", db.db_id, generator.name)),
        }
    }
}
