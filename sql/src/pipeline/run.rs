//! One pipeline run as a small state machine: each stage is a method that reads the
//! candidates so far and adds to them, so the order of stages is visible in `answer`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Instant;

use super::Pipeline;
use super::answer::{
    Candidate, CandidateOutcome, CandidateRound, ConsistencyReport, LinkingReport, PipelineAnswer,
    PipelineEvent, ResultPreview, SchemaFilterReport, StageTimings, VoteReport,
};
use super::config::{GeneratorConfig, PromptFormat};
use super::knobs::PipelineKnobs;
use super::render::{Ask, Feedback, generation_messages, render_generation, render_revision};
use super::selection::{SelectionInput, Shown, select};
use super::signature::result_signature;
use crate::backend::Session;
use crate::database::DatabaseHandle;
use crate::defect::find_defect;
use crate::demo_index::{Rerank, SKELETON_THRESHOLD};
use crate::grammar::schema_grammar;
use crate::linking::skeleton::sql_skeleton;
use crate::linking::term_hints::TermHint;
use crate::linking::value_index::ValueMatch;
use crate::linking::{PresqlLinking, PresqlLinks, link_presql};
use crate::model::{Generation, GenerationRequest, ModelCallError};
use crate::postprocess::postprocess_for;
use crate::prompt::{Demo, Prompt};
use crate::rules::calendar_days::calendar_days;
use crate::rules::repair::repair_column;
use crate::rules::translate::{like_ignoring_case, repair_for_server};
use crate::rules::{AFTER_RUN, QueryRule, REPAIR, RuleInput};
use crate::run_error::RunError;
use crate::sandbox::{ExecError, QueryResult};
use crate::schema::Schema;
use crate::subtask::Asker;
use crate::subtask::explain::{check_consistency, explain_sql};
use crate::vote::{VotingMode, decide, settled_without};

/// The question of a run.
#[derive(Debug, Clone, Copy)]
pub(super) struct Question<'a> {
    pub question: &'a str,
    pub evidence: Option<&'a str>,
    /// The database's stored values the question names (value retrieval; empty when off).
    pub values: &'a [ValueMatch],
    /// The question's words for schema names, already in `evidence` (empty when off).
    pub term_hints: &'a [TermHint],
    /// The tables the schema filter kept; `None` when the schema is shown whole.
    pub shown_tables: Option<&'a [String]>,
    /// How long linking the question took: retrieval's time, with the demos'.
    pub linking_ms: f64,
    /// When the run began (its question's linking first).
    pub started: Instant,
    /// The statements of the given evidence not told (`evidence_filter`).
    pub evidence_set_aside: &'a [String],
}

/// Who wrote a candidate and at which stage.
struct Draft<'g> {
    generator: &'g GeneratorConfig,
    round: CandidateRound,
    revised_from: Option<usize>,
}

pub(super) struct Run<'r> {
    pipeline: &'r Pipeline,
    ask: Ask<'r>,
    term_hints: &'r [TermHint],
    evidence_set_aside: &'r [String],
    db: &'r DatabaseHandle,
    sandbox: Box<dyn Session>,
    on_event: &'r mut dyn FnMut(PipelineEvent),
    candidates: Vec<Candidate>,
    /// Execution results by candidate id; `None` for failures.
    results: Vec<Option<QueryResult>>,
    /// Generators often agree verbatim; each distinct SQL runs once.
    executed: HashMap<String, Result<QueryResult, ExecError>>,
    /// The latest candidate of each chain: 0 is the PreSQL, `i` is generator `i - 1`'s FinSQL.
    heads: Vec<usize>,
    /// The demo pool ranked by similarity to the question, when demos are used.
    ranked: Option<Vec<usize>>,
    demo_questions: Vec<String>,
    linking: Option<LinkingReport>,
    /// The schema the prompts show when the filter cut it down; the whole schema otherwise
    /// ([`Run::schema`]).
    filtered: Option<(Schema, SchemaFilterReport)>,
    timings: StageTimings,
    tokens: usize,
    /// Failed heads left unrevised: the vote was settled without them, or a result stood
    /// (`revise_beside_results` off).
    unrevised: Vec<usize>,
    started: Instant,
    /// Set when the database could not be reached: the run stops at the next stage boundary.
    unavailable: Option<ExecError>,
}

fn elapsed_ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

impl<'r> Run<'r> {
    pub(super) fn new(
        pipeline: &'r Pipeline,
        question: Question<'r>,
        db: &'r DatabaseHandle,
        on_event: &'r mut dyn FnMut(PipelineEvent),
    ) -> Result<Self, RunError> {
        let sandbox = db
            .backend
            .open_session(pipeline.config.limits)
            .map_err(|source| RunError::Database {
                db_id: db.db_id.clone(),
                source,
            })?;
        Ok(Self {
            pipeline,
            ask: Ask {
                question: question.question,
                evidence: question.evidence,
                values: question.values,
            },
            term_hints: question.term_hints,
            evidence_set_aside: question.evidence_set_aside,
            db,
            sandbox,
            on_event,
            candidates: Vec::new(),
            results: Vec::new(),
            executed: HashMap::new(),
            heads: Vec::new(),
            ranked: None,
            demo_questions: Vec::new(),
            linking: None,
            filtered: question.shown_tables.map(|tables| {
                let report = SchemaFilterReport {
                    schema_tables: db.schema.tables.len(),
                    tables: tables.to_vec(),
                };
                (db.schema.restrict_to(tables), report)
            }),
            timings: StageTimings {
                retrieval_ms: question.linking_ms,
                ..StageTimings::default()
            },
            tokens: 0,
            unrevised: Vec::new(),
            started: question.started,
            unavailable: None,
        })
    }

    pub(super) fn answer(mut self) -> Result<PipelineAnswer, RunError> {
        let config = &self.pipeline.config;
        self.retrieve()?;
        self.round1()?;
        self.check_available()?;
        if config.round2.enabled
            && let Some(tables) = self.link()
        {
            self.round2(&tables)?;
            self.check_available()?;
        }
        if config.revision.enabled {
            self.revise()?;
            self.check_available()?;
        }
        let mut vote = self.vote();
        self.select(&mut vote);
        (self.on_event)(PipelineEvent::Vote(vote.clone()));
        Ok(self.finish(vote))
    }

    /// Fails the run once the database was found unreachable: answers voted over connection
    /// errors would say nothing about the question.
    fn check_available(&mut self) -> Result<(), RunError> {
        match self.unavailable.take() {
            Some(source) => Err(RunError::Database {
                db_id: self.db.db_id.clone(),
                source,
            }),
            None => Ok(()),
        }
    }

    /// The schema every prompt shows: the filtered one when the filter ran.
    fn schema(&self) -> &Schema {
        self.filtered
            .as_ref()
            .map_or(&self.db.schema, |(schema, _)| schema)
    }

    fn retrieve(&mut self) -> Result<(), RunError> {
        let models = &self.pipeline.models;
        let (Some(index), Some(embedder)) = (&models.demos, &models.embedder) else {
            return Ok(());
        };
        if !self.pipeline.config.uses_demos() {
            return Ok(());
        }
        let start = Instant::now();
        // The asked question is masked the way the pool was.
        let masked = index
            .masking()
            .mask(
                self.ask.question,
                &self.db.schema,
                models.context_encoder.as_deref(),
            )
            .map_err(|source| RunError::Demos {
                source: crate::demo_index::DemoIndexError::Mask { source },
            })?;
        let ranked = index
            .rank(embedder.as_ref(), &masked, &self.db.db_id)
            .map_err(|source| RunError::Demos { source })?;
        self.ranked = Some(ranked);
        self.timings.retrieval_ms += elapsed_ms(start);
        Ok(())
    }

    fn demos(&self, k: usize, rerank: Rerank<'_>) -> Vec<Demo> {
        match (&self.ranked, &self.pipeline.models.demos) {
            (Some(ranked), Some(index)) => index
                .select(ranked, k, rerank)
                .into_iter()
                .map(|e| e.demo())
                .collect(),
            _ => Vec::new(),
        }
    }

    fn round1(&mut self) -> Result<(), RunError> {
        let config = &self.pipeline.config;
        let generator = &config.generators[0];
        // Only RE_p shows demos; retrieving them for another format would report demos
        // the model never saw.
        let demos = match config.round1.format {
            PromptFormat::Rep => self.demos(config.round1.shots, Rerank::default()),
            _ => Vec::new(),
        };
        self.demo_questions = demos.iter().map(|d| d.question.clone()).collect();
        let prompt = render_generation(
            config.round1.format,
            config.round1.rep,
            self.schema(),
            self.ask,
            &demos,
        );
        let start = Instant::now();
        let grammar = self.grammar(&self.db.schema);
        let outputs = self.generate(&[self.request(generator, &prompt, grammar)])?;
        self.timings.round1_ms += elapsed_ms(start);
        let generation = outputs
            .into_iter()
            .next()
            .expect("generate checked one result per request")
            .map_err(|source| RunError::Model {
                stage: "round1",
                source,
            })?;
        let draft = Draft {
            generator,
            round: CandidateRound::PreSql,
            revised_from: None,
        };
        let id = self.add_candidate(draft, Ok(generation), &prompt);
        self.heads.push(id);
        (self.on_event)(PipelineEvent::PreSql(self.candidates[id].clone()));
        Ok(())
    }

    /// Links the PreSQL's tables; `None` when round 2 has nothing to restrict to.
    fn link(&mut self) -> Option<Vec<String>> {
        let start = Instant::now();
        let round2 = &self.pipeline.config.round2;
        let how = PresqlLinking {
            link_columns: round2.link_columns,
            link_named_tables: round2.link_named_tables,
            all_tables_when_unlinked: round2.all_tables_when_unlinked,
        };
        let presql = &self.candidates[self.heads[0]].sql;
        let PresqlLinks {
            tables,
            parsed,
            fell_back_to_all,
        } = link_presql(
            presql,
            self.ask.question,
            self.schema(),
            &self.db.schema,
            how,
        );
        let report = LinkingReport {
            tables: tables.clone(),
            parsed,
            fell_back_to_all,
        };
        self.timings.linking_ms += elapsed_ms(start);
        (self.on_event)(PipelineEvent::LinkedTables(report.clone()));
        self.linking = Some(report);
        (!tables.is_empty()).then_some(tables)
    }

    fn round2(&mut self, tables: &[String]) -> Result<(), RunError> {
        let pipeline = self.pipeline;
        let config = &pipeline.config;
        let restricted = self.db.schema.restrict_to(tables);
        let presql = &self.candidates[self.heads[0]].sql;
        let skeleton = config
            .round2
            .skeleton_rerank
            .then(|| sql_skeleton(presql, &self.db.schema));
        let rerank = Rerank {
            skeleton: skeleton.as_deref(),
            threshold: SKELETON_THRESHOLD,
            prefer_multi_table: config.round2.multi_table_filter && tables.len() >= 2,
        };
        let demos = self.demos(config.round2.shots, rerank);
        let prompts: Vec<Prompt> = config
            .generators
            .iter()
            .map(|g| render_generation(g.format, g.rep, &restricted, self.ask, &demos))
            .collect();
        // Round 2's prompts show the linked tables, but its grammar is the whole schema's: when
        // linking missed a table the model still knows a column of it from the question, and a
        // grammar without it pushed a 0.5B model into runs of digits (docs/RESULTS.md).
        let grammar = self.grammar(&self.db.schema);
        let requests: Vec<GenerationRequest> = config
            .generators
            .iter()
            .zip(&prompts)
            .map(|(g, p)| {
                let mut r = self.request(g, p, grammar.clone());
                // A FinSQL mostly rewrites the PreSQL over fewer tables.
                r.draft_hint = Some(presql.clone());
                r
            })
            .collect();
        let start = Instant::now();
        let outputs = self.generate(&requests)?;
        self.timings.round2_ms += elapsed_ms(start);
        for ((generator, prompt), output) in config.generators.iter().zip(&prompts).zip(outputs) {
            let draft = Draft {
                generator,
                round: CandidateRound::FinSql,
                revised_from: None,
            };
            let id = self.add_candidate(draft, output, prompt);
            self.heads.push(id);
            (self.on_event)(PipelineEvent::Candidate(self.candidates[id].clone()));
        }
        Ok(())
    }

    /// Up to `max_rounds` rounds; each round sends every chain whose latest candidate needs
    /// revision in one batch. Chains whose latest SQL and generator are the same (the PreSQL
    /// and its FinSQL often are) share one revision.
    fn revise(&mut self) -> Result<(), RunError> {
        let pipeline = self.pipeline;
        // Each chain's latest attempt: revisions build on the last failed fix (greedy decoding
        // would repeat itself on the same input), while `heads` keeps what votes.
        let mut tails = self.heads.clone();
        for attempt in 1..=pipeline.config.revision.max_rounds {
            // (chains sharing the target, feedback), by first appearance.
            let mut targets: Vec<(Vec<usize>, Feedback)> = Vec::new();
            for chain in 0..self.heads.len() {
                let Some(feedback) = self.feedback(tails[chain]) else {
                    continue;
                };
                let key = (
                    self.chain_generator(chain).name.as_str(),
                    self.sql(tails[chain]),
                );
                match targets.iter_mut().find(|(chains, _)| {
                    let first = chains[0];
                    (
                        self.chain_generator(first).name.as_str(),
                        self.sql(tails[first]),
                    ) == key
                }) {
                    Some((chains, _)) => chains.push(chain),
                    None => targets.push((vec![chain], feedback)),
                }
            }
            if targets.is_empty() {
                break;
            }
            let pending: Vec<usize> = targets.iter().flat_map(|(c, _)| c.clone()).collect();
            if self.vote_is_settled_without(&pending) || self.a_result_stands() {
                self.unrevised = pending.iter().map(|&chain| self.heads[chain]).collect();
                self.unrevised.sort_unstable();
                break;
            }
            // The schema round 1 showed: whole, or as the filter cut it down.
            let shown = self.schema();
            let prompts: Vec<Prompt> = targets
                .iter()
                .map(|(chains, feedback)| {
                    render_revision(shown, self.ask, self.sql(tails[chains[0]]), feedback)
                })
                .collect();
            let samples = pipeline.config.revision.samples.max(1);
            let grammar = self.grammar(&self.db.schema);
            let mut requests: Vec<GenerationRequest> = Vec::with_capacity(targets.len() * samples);
            for ((chains, _), prompt) in targets.iter().zip(&prompts) {
                let mut r = self.request(self.chain_generator(chains[0]), prompt, grammar.clone());
                r.start_sql_answer();
                // A fix mostly repeats the query it fixes.
                r.draft_hint = Some(self.sql(tails[chains[0]]).to_owned());
                if samples == 1 {
                    requests.push(r);
                    continue;
                }
                for seed in 0..samples as u64 {
                    let mut sampled = r.clone();
                    sampled.sampling.temperature = pipeline.config.revision.temperature;
                    sampled.sampling.seed = Some(seed);
                    requests.push(sampled);
                }
            }
            let start = Instant::now();
            let mut outputs = self.generate(&requests)?.into_iter();
            self.timings.revision_ms += elapsed_ms(start);
            for ((chains, _), prompt) in targets.iter().zip(&prompts) {
                let mut fixes = Vec::with_capacity(samples);
                for _ in 0..samples {
                    let output = outputs
                        .next()
                        .expect("generate checked one result per request");
                    let draft = Draft {
                        generator: self.chain_generator(chains[0]),
                        round: CandidateRound::Revision { attempt },
                        revised_from: Some(tails[chains[0]]),
                    };
                    let id = self.add_candidate(draft, output, prompt);
                    (self.on_event)(PipelineEvent::Candidate(self.candidates[id].clone()));
                    fixes.push(id);
                }
                // A revision replaces its original only when it runs: a failed "fix" is often
                // worse than the original (small models answer an error with DDL), and the
                // original's failure is the one worth reporting.
                let best = self.most_common_result(&fixes);
                for &chain in chains {
                    tails[chain] = best.unwrap_or(fixes[0]);
                    if let Some(id) = best {
                        self.heads[chain] = id;
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether revising the `pending` chains cannot change the answer
    /// ([`crate::vote::settled_without`]): only under majority voting, and with the selector
    /// on the vote must also be beyond a split.
    fn vote_is_settled_without(&self, pending: &[usize]) -> bool {
        let config = &self.pipeline.config;
        if config.revision.revise_settled || config.voting != VotingMode::Majority {
            return false;
        }
        let heads: Vec<Option<&QueryResult>> = self
            .heads
            .iter()
            .map(|&id| self.results[id].as_ref())
            .collect();
        settled_without(&heads, pending, config.selector.enabled)
    }

    /// Whether revision is to be left out because a voter's query ran and the configuration
    /// revises only when none did (`revise_beside_results` off).
    fn a_result_stands(&self) -> bool {
        !self.pipeline.config.revision.revise_beside_results
            && self.heads.iter().any(|&id| self.results[id].is_some())
    }

    /// Among `ids`, the first candidate of the most common result (ties to the earliest);
    /// `None` when none of them ran.
    fn most_common_result(&self, ids: &[usize]) -> Option<usize> {
        let signature = |id: usize| match &self.candidates[id].outcome {
            CandidateOutcome::Ok { signature, .. } => Some(signature.clone()),
            _ => None,
        };
        let mut best: Option<(usize, usize)> = None;
        for &id in ids {
            let Some(sig) = signature(id) else { continue };
            let count = ids
                .iter()
                .filter(|&&other| signature(other).as_ref() == Some(&sig))
                .count();
            if best.is_none_or(|(_, n)| count > n) {
                best = Some((id, count));
            }
        }
        best.map(|(id, _)| id)
    }

    fn sql(&self, candidate: usize) -> &str {
        &self.candidates[candidate].sql
    }

    /// Why a candidate should be revised, if it should. A failed model call is not revised:
    /// there is no SQL to debug.
    fn feedback(&self, id: usize) -> Option<Feedback> {
        match &self.candidates[id].outcome {
            CandidateOutcome::Error { kind, message } if !kind.starts_with("model_") => {
                Some(Feedback::Error(message.clone()))
            }
            CandidateOutcome::Ok { rows: 0, .. } if self.pipeline.config.revision.revise_empty => {
                Some(Feedback::Empty)
            }
            _ => None,
        }
    }

    fn chain_generator(&self, chain: usize) -> &'r GeneratorConfig {
        let generators = &self.pipeline.config.generators;
        &generators[chain.saturating_sub(1)]
    }

    fn vote(&mut self) -> VoteReport {
        let start = Instant::now();
        let config = &self.pipeline.config;
        // With the defect check, a head that ran with a defect votes as if it had failed, as
        // long as another head ran without one: its result answers no question.
        let mut results = Cow::Borrowed(&self.results);
        if config.defect_check {
            let defective: Vec<usize> = self
                .heads
                .iter()
                .copied()
                .filter(|&id| {
                    self.results[id].is_some()
                        && find_defect(self.sql(id), self.db.dialect()).is_some()
                })
                .collect();
            let sound_ran = self
                .heads
                .iter()
                .any(|&id| self.results[id].is_some() && !defective.contains(&id));
            if sound_ran && !defective.is_empty() {
                let filtered = results.to_mut();
                for id in defective {
                    filtered[id] = None;
                }
            }
        }
        let decision = decide(
            config.voting,
            config.selector.split_rule,
            &self.heads,
            &results,
            self.heads.get(1).copied().unwrap_or(self.heads[0]),
        );
        self.timings.vote_ms += elapsed_ms(start);
        VoteReport {
            mode: config.voting,
            voters: decision.voters,
            clusters: decision.clusters,
            winner: decision.winner,
            split: decision.split,
            all_failed: decision.all_failed,
            selector: None,
        }
    }

    /// Asks the selector when the vote is split between at least two result groups.
    fn select(&mut self, vote: &mut VoteReport) {
        let config = &self.pipeline.config.selector;
        let Some(selector) = &self.pipeline.models.selector else {
            return;
        };
        if !config.enabled || !vote.split || vote.clusters.len() < 2 {
            return;
        }
        let start = Instant::now();
        let schema = match &self.linking {
            Some(linking) => self.db.schema.restrict_to(&linking.tables),
            None => self.schema().clone(),
        };
        let shown: Vec<Shown<'_>> = vote
            .clusters
            .iter()
            .take(config.max_groups)
            .map(|cluster| Shown {
                candidate: cluster[0],
                sql: &self.candidates[cluster[0]].sql,
                result: self.results[cluster[0]]
                    .as_ref()
                    .expect("vote clusters hold only candidates that executed"),
                votes: cluster.len(),
            })
            .collect();
        let input = SelectionInput {
            schema: &schema,
            question: self.ask.question,
            evidence: self.ask.evidence,
            shown: &shown,
            preview_rows: config.preview_rows,
        };
        vote.selector = Some(select(selector.as_ref(), input, config.vote_weight));
        self.timings.selection_ms += elapsed_ms(start);
    }

    fn finish(mut self, vote: VoteReport) -> PipelineAnswer {
        let chosen = vote
            .selector
            .as_ref()
            .and_then(|s| s.chosen)
            .or(vote.winner)
            .unwrap_or(self.heads[0]);
        let preview = self.results[chosen]
            .as_ref()
            .map(|r| ResultPreview::of(r, self.pipeline.config.preview_rows));
        let sql = self.candidates[chosen].sql.clone();
        (self.on_event)(PipelineEvent::Final {
            sql: sql.clone(),
            preview: preview.clone(),
        });
        let consistency = self.check_consistency(&sql);
        self.timings.total_ms = elapsed_ms(self.started);
        PipelineAnswer {
            sql,
            chosen,
            preview,
            candidates: self.candidates,
            vote,
            linking: self.linking,
            demos: self.demo_questions,
            timings: self.timings,
            tokens_generated: self.tokens,
            settings: PipelineKnobs::of(&self.pipeline.config),
            consistency,
            unrevised: self.unrevised,
            values: self.ask.values.to_vec(),
            term_hints: self.term_hints.to_vec(),
            evidence_set_aside: self.evidence_set_aside.to_vec(),
            schema_filter: self.filtered.map(|(_, report)| report),
        }
    }

    /// Explains `sql` and asks the selection model whether that asks the question, when the
    /// configuration wants it. A failed model call is reported, not raised: the answer is
    /// already chosen.
    fn check_consistency(&mut self, sql: &str) -> Option<ConsistencyReport> {
        let pipeline = self.pipeline;
        let config = &pipeline.config.consistency;
        if !config.enabled {
            return None;
        }
        let started = Instant::now();
        let first = &pipeline.config.generators[0];
        let asker = Asker {
            generator: pipeline.models.generator.as_ref(),
            name: config.generator.as_deref().unwrap_or(&first.name),
            max_new_tokens: first.sampling.max_new_tokens,
        };
        let judge = pipeline
            .models
            .selector
            .as_deref()
            .expect("Pipeline::new checks that the check has a selector");
        let mut report = ConsistencyReport {
            explanation: String::new(),
            verdict: None,
            error: None,
            elapsed_ms: 0.0,
        };
        match explain_sql(&asker, self.db.dialect(), sql) {
            Ok(explanation) => {
                self.tokens += explanation.tokens_generated;
                report.explanation = explanation.text;
                match check_consistency(
                    judge,
                    self.ask.question,
                    &report.explanation,
                    f64::from(config.threshold),
                ) {
                    Ok(verdict) => report.verdict = Some(verdict),
                    Err(e) => report.error = Some(e.to_string()),
                }
            }
            Err(e) => report.error = Some(e.to_string()),
        }
        report.elapsed_ms = elapsed_ms(started);
        Some(report)
    }

    /// One batched generator call; the answer must have one result per request.
    fn generate(
        &self,
        requests: &[GenerationRequest],
    ) -> Result<Vec<Result<Generation, ModelCallError>>, RunError> {
        let outputs = self.pipeline.models.generator.generate_batch(requests);
        if outputs.len() != requests.len() {
            return Err(RunError::BatchSize {
                expected: requests.len(),
                got: outputs.len(),
            });
        }
        Ok(outputs)
    }

    fn request(
        &self,
        generator: &GeneratorConfig,
        prompt: &Prompt,
        grammar: Option<String>,
    ) -> GenerationRequest {
        let mut request = GenerationRequest {
            generator: generator.name.clone(),
            prompt: generation_messages(prompt, false),
            sampling: generator.sampling,
            stop: Vec::new(),
            grammar,
            draft_hint: None,
            keep_prefix: None,
        };
        if self.pipeline.config.answer_prefix {
            request.start_sql_answer();
        }
        request
    }

    /// The grammar answers over `schema` are decoded under, when the config asks for one.
    fn grammar(&self, schema: &Schema) -> Option<String> {
        self.pipeline
            .config
            .constrained
            .then(|| schema_grammar(schema, schema.dialect))
    }

    /// Post-processes and executes a generation and records it as a candidate.
    fn add_candidate(
        &mut self,
        draft: Draft<'_>,
        generation: Result<Generation, ModelCallError>,
        prompt: &Prompt,
    ) -> usize {
        let id = self.candidates.len();
        let mut repaired_from = None;
        let mut rewritten_by = Vec::new();
        let mut constrained = false;
        let (mut prompt_tokens, mut cached_tokens) = (0, 0);
        let (sql, tokens_generated, outcome, result) = match generation {
            Ok(generation) => {
                (prompt_tokens, cached_tokens) =
                    (generation.prompt_tokens, generation.cached_tokens);
                constrained = generation.constrained;
                let mut sql = postprocess_for(prompt, &generation.text);
                if self.pipeline.config.case_blind_like && self.db.schema.dialect.like_minds_case()
                {
                    sql = like_ignoring_case(&sql);
                }
                if self.pipeline.config.calendar_days
                    && let Some(calendar) = calendar_days(&sql, self.db.schema.dialect)
                {
                    sql = calendar;
                }
                let (mut outcome, mut result) = self.execute(&sql);
                if let Some((fixed, fixed_outcome, fixed_result)) = self.repair(&sql, &outcome) {
                    repaired_from = Some(std::mem::replace(&mut sql, fixed));
                    rewritten_by.push(REPAIR.to_owned());
                    (outcome, result) = (fixed_outcome, fixed_result);
                }
                for rule in AFTER_RUN {
                    if let Some((rewritten, new_outcome, new_result)) =
                        self.apply_rule(rule, &sql, result.as_ref())
                    {
                        let generated = std::mem::replace(&mut sql, rewritten);
                        repaired_from.get_or_insert(generated);
                        rewritten_by.push(rule.name().to_owned());
                        (outcome, result) = (new_outcome, new_result);
                    }
                }
                (sql, generation.tokens_generated, outcome, result)
            }
            Err(e) => {
                let outcome = CandidateOutcome::Error {
                    kind: format!("model_{}", e.kind()),
                    message: e.to_string(),
                };
                (String::new(), 0, outcome, None)
            }
        };
        self.tokens += tokens_generated;
        self.candidates.push(Candidate {
            id,
            model: draft.generator.name.clone(),
            round: draft.round,
            sql,
            outcome,
            revised_from: draft.revised_from,
            tokens_generated,
            prompt_tokens,
            cached_tokens,
            repaired_from,
            rewritten_by,
            constrained,
        });
        self.results.push(result);
        id
    }

    /// `rule`'s rewrite of a query that ran, when its switch is on; the rewrite with how it ran
    /// when the rule keeps it ([`crate::rules`]).
    fn apply_rule(
        &mut self,
        rule: &dyn QueryRule,
        sql: &str,
        result: Option<&QueryResult>,
    ) -> Option<(String, CandidateOutcome, Option<QueryResult>)> {
        let result = result?;
        if !rule.switched_on(&self.pipeline.config.rules) {
            return None;
        }
        let input = RuleInput {
            question: self.ask.question,
            schema: &self.db.schema,
            dialect: self.db.dialect(),
            sql,
            result,
        };
        let rewrite = rule.rewrite(&input, self.sandbox.as_mut())?;
        let (outcome, result) = self.execute(&rewrite.sql);
        let kept = outcome.is_ok() && result.as_ref().is_some_and(|r| (rewrite.keep)(r));
        kept.then_some((rewrite.sql, outcome, result))
    }

    /// Rewrites misspelled columns while the database names one and the schema says which
    /// column it must be (at most a few, each a sure rename or join), and mends what PostgreSQL
    /// refuses of SQLite's habits; the repaired query if it then runs.
    fn repair(
        &mut self,
        sql: &str,
        outcome: &CandidateOutcome,
    ) -> Option<(String, CandidateOutcome, Option<QueryResult>)> {
        const MAX_REPAIRS: usize = 3;
        let CandidateOutcome::Error { message, .. } = outcome else {
            return None;
        };
        let mut message = message.clone();
        let mut current = sql.to_owned();
        for _ in 0..MAX_REPAIRS {
            let fixed = repair_column(&current, &message, &self.db.schema)
                .or_else(|| repair_for_server(&current, &message, &self.db.schema))?;
            let (outcome, result) = self.execute(&fixed);
            match outcome {
                CandidateOutcome::Ok { .. } => return Some((fixed, outcome, result)),
                CandidateOutcome::Error { message: next, .. } => {
                    message = next;
                    current = fixed;
                }
            }
        }
        None
    }

    fn execute(&mut self, sql: &str) -> (CandidateOutcome, Option<QueryResult>) {
        let start = Instant::now();
        let executed = match self.executed.get(sql) {
            Some(cached) => cached.clone(),
            None => {
                let fresh = self.sandbox.execute(sql);
                if let Err(e @ ExecError::Unavailable { .. }) = &fresh {
                    self.unavailable.get_or_insert_with(|| e.clone());
                    return (
                        CandidateOutcome::Error {
                            kind: e.kind().to_owned(),
                            message: e.to_string(),
                        },
                        None,
                    );
                }
                self.executed.insert(sql.to_owned(), fresh.clone());
                fresh
            }
        };
        self.timings.execution_ms += elapsed_ms(start);
        match executed {
            Ok(result) => (
                CandidateOutcome::Ok {
                    signature: result_signature(&result),
                    rows: result.rows.len(),
                    truncated: result.truncated,
                },
                Some(result),
            ),
            Err(e) => (
                CandidateOutcome::Error {
                    kind: e.kind().to_owned(),
                    message: e.to_string(),
                },
                None,
            ),
        }
    }
}
