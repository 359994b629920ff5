//! Pipeline options in, answers and stage events out.

use quorum_proto::v1 as pb;
use quorum_sql::hardness::Hardness;
use quorum_sql::pipeline::{
    Candidate, CandidateOutcome, CandidateRound, LinkingReport, PipelineAnswer, PipelineConfig,
    PipelineEvent, PromptFormat, ResultPreview, VoteReport, VotingMode,
};
use quorum_sql::vote::VotingPolicy;

use super::schema::sandbox_value;
use crate::status::ServiceError;

/// Revision rounds beyond 3 add latency with no measured gain (gains flatten after 1-2).
const MAX_REVISION_ROUNDS: u32 = 3;
const MAX_PREVIEW_ROWS: u32 = 1000;
const MAX_REVISION_SAMPLES: u32 = 16;
/// More demonstrations than this do not fit small models' contexts next to a schema.
const MAX_SHOTS: u32 = 16;

/// Applies a request's overrides to the server's pipeline configuration.
pub fn pipeline_config(
    base: &PipelineConfig,
    options: Option<&pb::PipelineOptions>,
) -> Result<PipelineConfig, ServiceError> {
    let mut config = base.clone();
    let Some(o) = options else {
        return Ok(config);
    };
    if let Some(enabled) = o.round2 {
        config.round2.enabled = enabled;
    }
    if let Some(shots) = o.round1_shots {
        config.round1.shots = bounded("options.round1_shots", shots, 0, MAX_SHOTS)?;
    }
    if let Some(shots) = o.round2_shots {
        config.round2.shots = bounded("options.round2_shots", shots, 0, MAX_SHOTS)?;
    }
    if let Some(enabled) = o.revision {
        config.revision.enabled = enabled;
    }
    if let Some(rounds) = o.revision_rounds {
        config.revision.max_rounds =
            bounded("options.revision_rounds", rounds, 1, MAX_REVISION_ROUNDS)?;
    }
    match pb::VotingMode::try_from(o.voting) {
        Ok(pb::VotingMode::Unspecified) => {}
        Ok(pb::VotingMode::None) => config.voting = VotingMode::None,
        Ok(pb::VotingMode::Majority) => config.voting = VotingMode::Majority,
        Ok(pb::VotingMode::DifficultyAware) => {
            config.voting = VotingMode::DifficultyAware(VotingPolicy::default());
        }
        Err(_) => {
            return Err(ServiceError::invalid(
                "options.voting",
                format!("unknown voting mode {}", o.voting),
            ));
        }
    }
    if let Some(enabled) = o.selector {
        config.selector.enabled = enabled;
    }
    if let Some(rows) = o.preview_rows {
        config.preview_rows = bounded("options.preview_rows", rows, 0, MAX_PREVIEW_ROWS)?;
    }
    if let Some(name) = &o.round1_format {
        config.round1.format = PromptFormat::from_name(name)
            .map_err(|reason| ServiceError::invalid("options.round1_format", reason))?;
    }
    if let Some(enabled) = o.revise_empty {
        config.revision.revise_empty = enabled;
    }
    if let Some(samples) = o.revision_samples {
        config.revision.samples =
            bounded("options.revision_samples", samples, 1, MAX_REVISION_SAMPLES)?;
    }
    if let Some(enabled) = o.answer_prefix {
        config.answer_prefix = enabled;
    }
    if let Some(enabled) = o.constrained {
        config.constrained = enabled;
    }
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
    // After the generator list: the switches apply to the generators chosen.
    let rep_switches = [
        o.rep_optimization_rule,
        o.rep_cell_values,
        o.rep_foreign_keys,
    ];
    for rep in std::iter::once(&mut config.round1.rep)
        .chain(config.generators.iter_mut().map(|g| &mut g.rep))
    {
        let [rule, cells, keys] = rep_switches;
        rep.optimization_rule = rule.unwrap_or(rep.optimization_rule);
        rep.cell_values = cells.unwrap_or(rep.cell_values);
        rep.foreign_keys = keys.unwrap_or(rep.foreign_keys);
    }
    Ok(config)
}

fn bounded(field: &str, value: u32, min: u32, max: u32) -> Result<usize, ServiceError> {
    if (min..=max).contains(&value) {
        Ok(value as usize)
    } else {
        Err(ServiceError::invalid(
            field,
            format!("must be in {min}..={max}"),
        ))
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
            rows: *rows as u64,
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
        constrained: c.constrained,
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
    let mode = match v.mode.as_str() {
        "none" => pb::VotingMode::None,
        "majority" => pb::VotingMode::Majority,
        "difficulty_aware" => pb::VotingMode::DifficultyAware,
        _ => pb::VotingMode::Unspecified,
    };
    let hardness = match v.hardness {
        None => pb::Hardness::Unspecified,
        Some(Hardness::Easy) => pb::Hardness::Easy,
        Some(Hardness::Medium) => pb::Hardness::Medium,
        Some(Hardness::Hard) => pb::Hardness::Hard,
        Some(Hardness::Extra) => pb::Hardness::Extra,
    };
    pb::Vote {
        mode: mode.into(),
        hardness: hardness.into(),
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

fn preview(p: &ResultPreview) -> pb::ResultPreview {
    pb::ResultPreview {
        columns: p.columns.clone(),
        rows: p
            .rows
            .iter()
            .map(|r| pb::Row {
                values: r.iter().map(sandbox_value).collect(),
            })
            .collect(),
        total_rows: p.total_rows as u64,
        truncated: p.truncated,
    }
}

pub fn answer_response(a: &PipelineAnswer) -> pb::Text2SqlResponse {
    let t = &a.timings;
    pb::Text2SqlResponse {
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
