//! The two-round text-to-SQL method (PET-SQL, with XiYan's selection and the de-semanticization
//! paper's and the benchmarking study's revision) as plain synchronous code over model traits.
//!
//! A run: retrieve demos for the de-semanticized question → round 1 writes a preliminary SQL
//! (PreSQL) over the full schema → execute it → link the tables it reads → round 2: every
//! configured generator writes a FinSQL over the linked tables, all in one batched call →
//! execute every candidate → revise failures with the full schema and the error → vote over
//! the PreSQL and the FinSQLs by execution result → on a split vote, ask the selection model →
//! answer with the chosen SQL and all the evidence ([`PipelineAnswer`]).
//!
//! Every stage is switchable in [`PipelineConfig`] so that the paper's ablations are configs.

pub mod answer;
pub mod config;
pub mod knobs;
mod render;
mod run;
mod selection;
pub mod signature;
#[cfg(test)]
pub(crate) mod tests;
mod warm;

use crate::run_error::RunError;
use std::sync::Arc;
use std::time::Instant;

use crate::database::DatabaseHandle;
use crate::evidence_filter::{FilteredEvidence, filter_evidence};
use crate::linking::term_hints::{TermHint, hints_as_evidence};
use crate::linking::{QuestionLinking, QuestionLinks, link_question};
use crate::model::{Embedder, Generator, Selector};
pub use answer::{
    Candidate, CandidateOutcome, CandidateRound, ConsistencyReport, LinkingReport, PipelineAnswer,
    PipelineEvent, ResultPreview, SelectorReport, StageTimings, VoteReport,
};
pub use config::{
    ConsistencyConfig, GeneratorConfig, PipelineConfig, PromptFormat, RevisionConfig, Round1Config,
    Round2Config, SelectorConfig,
};
pub use knobs::{KnobError, KnobSpec, PipelineKnobs, knob_specs};
pub use render::{generation_messages, generation_prompt};
pub use selection::{MAX_LABELS, SelectionInput, Shown, render_selection, selection_labels};
pub use warm::WarmReport;

use crate::demo_index::DemoIndex;

/// The models a pipeline calls. The embedder and the demo index are needed only when a stage
/// uses demonstrations; the selector only when selection is enabled.
#[derive(Clone)]
pub struct PipelineModels {
    pub generator: Arc<dyn Generator>,
    pub embedder: Option<Arc<dyn Embedder>>,
    pub selector: Option<Arc<dyn Selector>>,
    pub demos: Option<Arc<DemoIndex>>,
    /// The masked language model behind relevance masking, when the demo index uses it.
    pub context_encoder: Option<Arc<dyn crate::model::ContextEncoder>>,
}

impl std::fmt::Debug for PipelineModels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineModels")
            .field("embedder", &self.embedder.is_some())
            .field("selector", &self.selector.is_some())
            .field("demos", &self.demos.as_ref().map(|d| d.len()))
            .finish_non_exhaustive()
    }
}

/// A configured pipeline; cheap to share across requests (`run` takes `&self`).
#[derive(Debug, Clone)]
pub struct Pipeline {
    config: PipelineConfig,
    models: PipelineModels,
}

impl Pipeline {
    /// Checks that the configuration is usable with these models.
    pub fn new(config: PipelineConfig, models: PipelineModels) -> Result<Self, RunError> {
        let invalid = |reason: &str| {
            Err(RunError::Config {
                reason: reason.to_owned(),
            })
        };
        if config.generators.is_empty() {
            return invalid("at least one generator is required (the first writes the PreSQL)");
        }
        // Demonstrations appear only in RE_p prompts: asking for them elsewhere would answer
        // without them and report nothing.
        if config.round1.shots > 0 && config.round1.format != PromptFormat::Rep {
            return invalid(&format!(
                "round 1 writes {} prompts, which show no demonstrations: round1 shots must be 0",
                config.round1.format.name()
            ));
        }
        if config.round2.enabled
            && config.round2.shots > 0
            && !config
                .generators
                .iter()
                .any(|g| g.format == PromptFormat::Rep)
        {
            return invalid(
                "no round-2 generator writes RE_p prompts, the only ones with demonstrations: \
                 round2 shots must be 0",
            );
        }
        if config.uses_demos() && (models.embedder.is_none() || models.demos.is_none()) {
            return Err(RunError::MissingModel {
                what: "few-shot retrieval (an embedder model and a demonstration index)",
            });
        }
        if config.term_hints && models.embedder.is_none() {
            return Err(RunError::MissingModel {
                what: "term hints (an embedder model)",
            });
        }
        if config.selector.enabled && models.selector.is_none() {
            return Err(RunError::MissingModel {
                what: "selection (a model with the selector role)",
            });
        }
        if config.consistency.enabled && models.selector.is_none() {
            return Err(RunError::MissingModel {
                what: "the consistency check (a model with the selector role)",
            });
        }
        if config.selector.enabled
            && !(2..=selection::MAX_LABELS).contains(&config.selector.max_groups)
        {
            return invalid("selector.max_groups must be between 2 and 26");
        }
        Ok(Self { config, models })
    }

    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// Answers `question` over `db`.
    pub fn run(
        &self,
        question: &str,
        evidence: Option<&str>,
        db: &DatabaseHandle,
    ) -> Result<PipelineAnswer, RunError> {
        self.run_with_events(question, evidence, db, &mut |_| {})
    }

    /// The question's links before any SQL is written ([`link_question`]): its stored values
    /// when `value_retrieval` is on, its words for schema names when `term_hints` is, and a
    /// schema of more than `schema_filter_above` tables cut down to the question's.
    fn link_question(
        &self,
        question: &str,
        db: &DatabaseHandle,
    ) -> Result<QuestionLinks, RunError> {
        let values = if self.config.value_retrieval {
            // A database whose values cannot be read cannot run candidates either: the run
            // fails here as it would at its first execution.
            Some(db.value_index().map_err(|source| RunError::Database {
                db_id: db.db_id.clone(),
                source,
            })?)
        } else {
            None
        };
        let embedder = self.models.embedder.as_deref();
        let hints_by = if self.config.term_hints {
            Some(embedder.ok_or(RunError::MissingModel {
                what: "term hints (an embedder model)",
            })?)
        } else {
            None
        };
        let above = self.config.schema_filter_above;
        let filters = above > 0 && db.schema.tables.len() > above;
        let meaning = match embedder {
            Some(embedder) if filters => {
                let tables = db
                    .table_vectors(embedder)
                    .map_err(|source| RunError::Model {
                        stage: "schema_filter",
                        source,
                    })?;
                Some((tables, embedder))
            }
            _ => None,
        };
        let how = QuestionLinking {
            values,
            hints_by,
            filter_above: above,
            meaning,
        };
        link_question(question, &db.schema, how).map_err(|e| RunError::Model {
            stage: e.stage,
            source: e.source,
        })
    }

    /// The evidence the prompts are told: the statements the question calls for when
    /// `evidence_filter` is on ([`crate::evidence_filter`]), all of it otherwise.
    fn filtered_evidence(&self, question: &str, evidence: Option<&str>) -> FilteredEvidence {
        let Some(evidence) = evidence.filter(|e| !e.trim().is_empty()) else {
            return FilteredEvidence::default();
        };
        if self.config.evidence_filter {
            filter_evidence(question, evidence)
        } else {
            FilteredEvidence {
                told: Some(evidence.to_owned()),
                set_aside: Vec::new(),
            }
        }
    }

    /// [`Pipeline::run`], reporting progress to `on_event` as stages finish.
    pub fn run_with_events(
        &self,
        question: &str,
        evidence: Option<&str>,
        db: &DatabaseHandle,
        on_event: &mut dyn FnMut(PipelineEvent),
    ) -> Result<PipelineAnswer, RunError> {
        let started = Instant::now();
        let links = self.link_question(question, db)?;
        let linking_ms = started.elapsed().as_secs_f64() * 1e3;
        let filtered = self.filtered_evidence(question, evidence);
        let evidence = with_hints(filtered.told.as_deref(), &links.hints);
        let question = run::Question {
            question,
            evidence: evidence.as_deref(),
            values: &links.values,
            term_hints: &links.hints,
            shown_tables: links.shown.as_deref(),
            evidence_set_aside: &filtered.set_aside,
            linking_ms,
            started,
        };
        run::Run::new(self, question, db, on_event)?.answer()
    }
}

/// The request's evidence with the term hints after it: the prompts of every format show
/// evidence, so the hints reach them all.
fn with_hints(evidence: Option<&str>, hints: &[TermHint]) -> Option<String> {
    let given = evidence.filter(|e| !e.trim().is_empty()).map(str::to_owned);
    match (given, hints_as_evidence(hints)) {
        (Some(given), Some(hints)) => Some(format!("{given}; {hints}")),
        (given, hints) => given.or(hints),
    }
}
