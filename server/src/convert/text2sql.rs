//! Pipeline options in, answers and stage events out.

use quorum_proto::v1 as pb;
use quorum_sql::pipeline::{
    Candidate, CandidateOutcome, CandidateRound, LinkingReport, PipelineAnswer, PipelineConfig,
    PipelineEvent, PipelineKnobs, PromptFormat, ResultPreview, VoteReport,
};
use quorum_sql::vote::VotingMode;

use super::schema::value;
use crate::status::ServiceError;

/// Applies a request's overrides to the server's pipeline configuration: the generators it
/// names (in its order), then its knobs, checked against their bounds.
pub fn pipeline_config(
    base: &PipelineConfig,
    options: Option<&pb::PipelineOptions>,
) -> Result<PipelineConfig, ServiceError> {
    let mut config = base.clone();
    let Some(o) = options else {
        return Ok(config);
    };
    if !o.generators.is_empty() {
        config.generators = o
            .generators
            .iter()
            .map(|name| {
                base.generators
                    .iter()
                    .find(|g| &g.name == name)
                    .cloned()
                    .ok_or_else(|| ServiceError::NotFound {
                        what: "generator",
                        id: name.clone(),
                    })
            })
            .collect::<Result<_, _>>()?;
    }
    knobs(o)?
        .apply(&mut config)
        .map_err(|e| ServiceError::invalid(format!("options.{}", e.knob), e.reason))?;
    Ok(config)
}

/// A request's knobs: every field of `PipelineOptions` but the generator list.
pub fn knobs(o: &pb::PipelineOptions) -> Result<PipelineKnobs, ServiceError> {
    let count = |v: Option<u32>| v.map(|n| n as usize);
    let voting = match pb::VotingMode::try_from(o.voting) {
        Ok(pb::VotingMode::Unspecified) => None,
        Ok(pb::VotingMode::None) => Some(VotingMode::None),
        Ok(pb::VotingMode::Majority) => Some(VotingMode::Majority),
        Err(_) => {
            return Err(ServiceError::invalid(
                "options.voting",
                format!("unknown voting mode {}", o.voting),
            ));
        }
    };
    let round1_format = o
        .round1_format
        .as_deref()
        .map(PromptFormat::from_name)
        .transpose()
        .map_err(|reason| ServiceError::invalid("options.round1_format", reason))?;
    Ok(PipelineKnobs {
        round1_format,
        round1_shots: count(o.round1_shots),
        round2: o.round2,
        round2_shots: count(o.round2_shots),
        revision: o.revision,
        revision_rounds: count(o.revision_rounds),
        revise_empty: o.revise_empty,
        defect_check: o.defect_check,
        both_as_intersection: o.both_as_intersection,
        mend_self_joins: o.mend_self_joins,
        mend_wrong_keys: o.mend_wrong_keys,
        respell_values: o.respell_values,
        revise_settled: o.revise_settled,
        revise_beside_results: o.revise_beside_results,
        revision_samples: count(o.revision_samples),
        revision_temperature: o.revision_temperature,
        answer_prefix: o.answer_prefix,
        constrained: o.constrained,
        consistency_check: o.consistency_check,
        consistency_threshold: o.consistency_threshold,
        voting,
        selector: o.selector,
        selector_vote_weight: o.selector_vote_weight,
        value_retrieval: o.value_retrieval,
        schema_filter_above: count(o.schema_filter_above),
        link_columns: o.link_columns,
        link_named_tables: o.link_named_tables,
        drop_unused_joins: o.drop_unused_joins,
        drop_unlabeled_groups: o.drop_unlabeled_groups,
        case_blind_like: o.case_blind_like,
        calendar_days: o.calendar_days,
        group_by_key: o.group_by_key,
        term_hints: o.term_hints,
        evidence_filter: o.evidence_filter,
        preview_rows: count(o.preview_rows),
        rep_optimization_rule: o.rep_optimization_rule,
        rep_cell_values: o.rep_cell_values,
        rep_foreign_keys: o.rep_foreign_keys,
    })
}

/// The request options that set `knobs` (and no generator list): how a client such as
/// `quorum eval` sends the knobs it was given.
pub fn options(knobs: &PipelineKnobs) -> pb::PipelineOptions {
    let count = |v: Option<usize>| v.map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    pb::PipelineOptions {
        round1_format: knobs.round1_format.map(|f| f.name()),
        round1_shots: count(knobs.round1_shots),
        round2: knobs.round2,
        round2_shots: count(knobs.round2_shots),
        revision: knobs.revision,
        revision_rounds: count(knobs.revision_rounds),
        revise_empty: knobs.revise_empty,
        defect_check: knobs.defect_check,
        both_as_intersection: knobs.both_as_intersection,
        mend_self_joins: knobs.mend_self_joins,
        mend_wrong_keys: knobs.mend_wrong_keys,
        respell_values: knobs.respell_values,
        revise_settled: knobs.revise_settled,
        revise_beside_results: knobs.revise_beside_results,
        revision_samples: count(knobs.revision_samples),
        revision_temperature: knobs.revision_temperature,
        answer_prefix: knobs.answer_prefix,
        constrained: knobs.constrained,
        consistency_check: knobs.consistency_check,
        consistency_threshold: knobs.consistency_threshold,
        voting: knobs
            .voting
            .map_or(pb::VotingMode::Unspecified, voting_mode) as i32,
        selector: knobs.selector,
        selector_vote_weight: knobs.selector_vote_weight,
        value_retrieval: knobs.value_retrieval,
        schema_filter_above: count(knobs.schema_filter_above),
        link_columns: knobs.link_columns,
        link_named_tables: knobs.link_named_tables,
        drop_unused_joins: knobs.drop_unused_joins,
        drop_unlabeled_groups: knobs.drop_unlabeled_groups,
        case_blind_like: knobs.case_blind_like,
        calendar_days: knobs.calendar_days,
        group_by_key: knobs.group_by_key,
        term_hints: knobs.term_hints,
        evidence_filter: knobs.evidence_filter,
        preview_rows: count(knobs.preview_rows),
        rep_optimization_rule: knobs.rep_optimization_rule,
        rep_cell_values: knobs.rep_cell_values,
        rep_foreign_keys: knobs.rep_foreign_keys,
        generators: Vec::new(),
    }
}

fn voting_mode(mode: VotingMode) -> pb::VotingMode {
    match mode {
        VotingMode::None => pb::VotingMode::None,
        VotingMode::Majority => pb::VotingMode::Majority,
    }
}

fn candidate(c: &Candidate) -> pb::Candidate {
    let (round, attempt) = match c.round {
        CandidateRound::PreSql => (pb::CandidateRound::PreSql, 0),
        CandidateRound::FinSql => (pb::CandidateRound::FinSql, 0),
        CandidateRound::Revision { attempt } => (pb::CandidateRound::Revision, attempt as u32),
    };
    let outcome = match &c.outcome {
        CandidateOutcome::Ok {
            signature,
            rows,
            truncated,
        } => pb::candidate::Outcome::Ok(pb::ExecutionOk {
            result_signature: signature.clone(),
            rows: u32::try_from(*rows).unwrap_or(u32::MAX),
            truncated: *truncated,
        }),
        CandidateOutcome::Error { kind, message } => {
            pb::candidate::Outcome::Error(pb::ExecutionError {
                kind: kind.clone(),
                message: message.clone(),
            })
        }
    };
    pb::Candidate {
        id: c.id as u32,
        model: c.model.clone(),
        round: round.into(),
        revision_attempt: attempt,
        sql: c.sql.clone(),
        outcome: Some(outcome),
        revised_from: c.revised_from.map(|i| i as u32),
        tokens_generated: c.tokens_generated as u32,
        repaired_from: c.repaired_from.clone(),
        rewritten_by: c.rewritten_by.clone(),
        constrained: c.constrained,
        prompt_tokens: c.prompt_tokens as u32,
        cached_tokens: c.cached_tokens as u32,
    }
}

fn linking(l: &LinkingReport) -> pb::LinkedTables {
    pb::LinkedTables {
        tables: l.tables.clone(),
        parsed: l.parsed,
        fell_back_to_all: l.fell_back_to_all,
    }
}

fn ids(v: &[usize]) -> Vec<u32> {
    v.iter().map(|&i| i as u32).collect()
}

fn vote(v: &VoteReport) -> pb::Vote {
    pb::Vote {
        mode: voting_mode(v.mode).into(),
        voters: ids(&v.voters),
        clusters: v
            .clusters
            .iter()
            .map(|c| pb::Cluster {
                candidate_ids: ids(c),
            })
            .collect(),
        winner: v.winner.map(|i| i as u32),
        split: v.split,
        all_failed: v.all_failed,
        selector: v.selector.as_ref().map(|s| pb::SelectorVerdict {
            labels: s.labels.clone(),
            shown: ids(&s.shown),
            logprobs: s.logprobs.clone(),
            chosen: s.chosen.map(|i| i as u32),
            error: s.error.clone().unwrap_or_default(),
        }),
    }
}

pub fn preview(p: &ResultPreview) -> pb::ResultPreview {
    pb::ResultPreview {
        columns: p.columns.clone(),
        rows: p
            .rows
            .iter()
            .map(|r| pb::Row {
                values: r.iter().map(value).collect(),
            })
            .collect(),
        total_rows: u32::try_from(p.total_rows).unwrap_or(u32::MAX),
        truncated: p.truncated,
    }
}

pub fn answer_response(a: &PipelineAnswer) -> pb::Text2SqlResponse {
    let t = &a.timings;
    pb::Text2SqlResponse {
        notes_used: Vec::new(),
        sql: a.sql.clone(),
        chosen_candidate: a.chosen as u32,
        preview: a.preview.as_ref().map(preview),
        candidates: a.candidates.iter().map(candidate).collect(),
        vote: Some(vote(&a.vote)),
        linked_tables: a.linking.as_ref().map(linking),
        demos: a.demos.clone(),
        timings: Some(pb::StageTimings {
            retrieval_ms: t.retrieval_ms,
            round1_ms: t.round1_ms,
            linking_ms: t.linking_ms,
            round2_ms: t.round2_ms,
            revision_ms: t.revision_ms,
            execution_ms: t.execution_ms,
            vote_ms: t.vote_ms,
            selection_ms: t.selection_ms,
            total_ms: t.total_ms,
        }),
        tokens_generated: a.tokens_generated as u32,
        settings: a
            .settings
            .entries()
            .into_iter()
            .map(|(name, value)| pb::Setting {
                name: name.to_owned(),
                value,
            })
            .collect(),
        consistency: a.consistency.as_ref().map(|c| pb::ConsistencyCheck {
            explanation: c.explanation.clone(),
            verdict: c.verdict.as_ref().map(super::consistency),
            error: c.error.clone().unwrap_or_default(),
            elapsed_ms: c.elapsed_ms,
        }),
        unrevised_candidates: a.unrevised.iter().map(|&id| id as u32).collect(),
        matched_values: a
            .values
            .iter()
            .map(|m| pb::MatchedValue {
                table: m.table.clone(),
                column: m.column.clone(),
                value: m.value.clone(),
                score: m.score,
            })
            .collect(),
        term_hints: a
            .term_hints
            .iter()
            .map(|h| pb::TermHint {
                word: h.word.clone(),
                target: h.target.clone(),
                similarity: h.similarity,
            })
            .collect(),
        evidence_set_aside: a.evidence_set_aside.clone(),
        schema_filter: a.schema_filter.as_ref().map(|f| pb::SchemaFilter {
            tables: f.tables.clone(),
            schema_tables: u32::try_from(f.schema_tables).unwrap_or(u32::MAX),
        }),
    }
}

/// A stage event as a stream message. The pipeline's own `Final` event is not sent: the
/// stream ends with the whole answer instead, which carries the final SQL and preview too.
pub fn event_message(e: &PipelineEvent) -> Option<pb::Text2SqlEvent> {
    use pb::text2_sql_event::Event;
    let event = match e {
        PipelineEvent::PreSql(c) => Event::PreSql(candidate(c)),
        PipelineEvent::LinkedTables(l) => Event::LinkedTables(linking(l)),
        PipelineEvent::Candidate(c) => Event::Candidate(candidate(c)),
        PipelineEvent::Vote(v) => Event::Vote(vote(v)),
        PipelineEvent::Final { .. } => return None,
    };
    Some(pb::Text2SqlEvent { event: Some(event) })
}
