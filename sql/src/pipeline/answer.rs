//! What a pipeline run returns and streams: the final SQL with the evidence behind it, so that
//! a client (or an evaluation report) can see every candidate, the vote and where time went.

use serde::{Deserialize, Serialize};

use crate::linking::term_hints::TermHint;
use crate::linking::value_index::ValueMatch;
use crate::sandbox::QueryResult;
use crate::subtask::explain::Consistency;
use crate::value::Value;
use crate::vote::VotingMode;

/// The stage that produced a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateRound {
    /// Round 1: the PreSQL over the full schema.
    PreSql,
    /// Round 2: a FinSQL over the linked tables.
    FinSql,
    /// A revision of an earlier candidate (1 = first debugging round).
    Revision { attempt: usize },
}

/// How a candidate fared when executed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateOutcome {
    Ok {
        /// See [`crate::pipeline::signature::result_signature`].
        signature: String,
        rows: usize,
        truncated: bool,
    },
    /// `kind` is the execution error's kind, or `model_<kind>` when the model call failed.
    Error { kind: String, message: String },
}

impl CandidateOutcome {
    pub fn is_ok(&self) -> bool {
        matches!(self, Self::Ok { .. })
    }
}

/// One SQL the pipeline considered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// Position in [`PipelineAnswer::candidates`].
    pub id: usize,
    /// The generator that wrote it.
    pub model: String,
    pub round: CandidateRound,
    pub sql: String,
    pub outcome: CandidateOutcome,
    /// The candidate this one revises.
    pub revised_from: Option<usize>,
    pub tokens_generated: usize,
    /// The prompt's tokens and those of them the prefix cache served (0 without a model call).
    #[serde(default)]
    pub prompt_tokens: usize,
    #[serde(default)]
    pub cached_tokens: usize,
    /// The model's SQL when a query rule rewrote it ([`crate::rules`]).
    #[serde(default)]
    pub repaired_from: Option<String>,
    /// The rules that rewrote it, in order: `repair` for schema repair of a failed query, else
    /// the switch of a rewrite after a run (`mend_self_joins`, `respell_values`, ...).
    #[serde(default)]
    pub rewritten_by: Vec<String>,
    /// Decoded under the database's schema grammar ([`crate::grammar`]) from its first token
    /// to its last.
    #[serde(default)]
    pub constrained: bool,
}

/// The tables round 2 was restricted to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkingReport {
    pub tables: Vec<String>,
    /// False when the PreSQL did not parse and table names were found by tokens.
    pub parsed: bool,
    /// True when linking found nothing and every table was used instead.
    pub fell_back_to_all: bool,
}

/// What the selection model was asked and answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectorReport {
    pub labels: Vec<String>,
    /// Candidate ids shown, one per label (each group's first member).
    pub shown: Vec<usize>,
    /// Log-probabilities per label; empty when the call failed.
    pub logprobs: Vec<f32>,
    /// The chosen candidate id, or `None` when the call failed and the vote stood.
    pub chosen: Option<usize>,
    pub error: Option<String>,
}

/// The vote, with candidate ids rather than positions among the voters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VoteReport {
    pub mode: VotingMode,
    /// Candidate ids that voted (each generator's latest candidate, after revision).
    pub voters: Vec<usize>,
    /// Candidate ids per result cluster, clusters in order of first appearance.
    pub clusters: Vec<Vec<usize>>,
    /// The chosen candidate id (before any selector).
    pub winner: Option<usize>,
    pub split: bool,
    /// Every voter failed to execute: the answer is the first voter's SQL, unverified.
    pub all_failed: bool,
    pub selector: Option<SelectorReport>,
}

/// Wall time per stage in milliseconds. Execution time is counted once, in `execution_ms`,
/// wherever it happened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StageTimings {
    /// The question's linking (stored values, term hints, the schema filter) and the demos'
    /// retrieval.
    pub retrieval_ms: f64,
    pub round1_ms: f64,
    pub linking_ms: f64,
    pub round2_ms: f64,
    pub revision_ms: f64,
    pub execution_ms: f64,
    pub vote_ms: f64,
    pub selection_ms: f64,
    pub total_ms: f64,
}

/// The first rows of a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultPreview {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    /// Rows in the full result (as far as the sandbox read it).
    pub total_rows: usize,
    /// The sandbox cut the result short.
    pub truncated: bool,
}

impl ResultPreview {
    pub fn of(result: &QueryResult, max_rows: usize) -> Self {
        Self {
            columns: result.columns.clone(),
            rows: result.rows.iter().take(max_rows).cloned().collect(),
            total_rows: result.rows.len(),
            truncated: result.truncated,
        }
    }
}

/// The pipeline's answer and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineAnswer {
    pub sql: String,
    /// The final candidate's id.
    pub chosen: usize,
    /// `None` when the final SQL failed to execute (see its candidate's outcome).
    pub preview: Option<ResultPreview>,
    pub candidates: Vec<Candidate>,
    pub vote: VoteReport,
    /// `None` when round 2 was off.
    pub linking: Option<LinkingReport>,
    /// Questions of the demonstrations shown in round 1.
    pub demos: Vec<String>,
    pub timings: StageTimings,
    pub tokens_generated: usize,
    /// The settings the answer was produced with.
    pub settings: super::knobs::PipelineKnobs,
    /// The consistency check of the final SQL, when it was asked for.
    #[serde(default)]
    pub consistency: Option<ConsistencyReport>,
    /// Failed candidates left unrevised: the majority vote was settled without them, or
    /// another voter's query had run and `revise_beside_results` was off.
    #[serde(default)]
    pub unrevised: Vec<usize>,
    /// The stored values the prompts showed (value retrieval).
    #[serde(default)]
    pub values: Vec<ValueMatch>,
    /// The question's words the prompts were told mean a table or column (`term_hints`).
    #[serde(default)]
    pub term_hints: Vec<TermHint>,
    /// The statements of the evidence and notes the prompts were not told, because the
    /// question does not call for them (`evidence_filter`).
    #[serde(default)]
    pub evidence_set_aside: Vec<String>,
    /// The tables the prompts showed when the schema was filtered; `None` when it was shown
    /// whole.
    #[serde(default)]
    pub schema_filter: Option<SchemaFilterReport>,
}

/// What the schema filter kept ([`crate::linking::schema_filter`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaFilterReport {
    /// The tables shown, in schema order.
    pub tables: Vec<String>,
    /// Tables in the whole schema.
    pub schema_tables: usize,
}

/// What the consistency check found ([`crate::subtask::explain`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsistencyReport {
    /// The final SQL explained as a question; empty when the explanation failed.
    pub explanation: String,
    /// The judge's verdict; `None` when a model call failed (see `error`).
    pub verdict: Option<Consistency>,
    /// Why the check could not finish; the answer stands either way.
    pub error: Option<String>,
    pub elapsed_ms: f64,
}

/// Progress of a run, in order: `PreSql`, `LinkedTables` (with round 2), one `Candidate` per
/// later candidate, `Vote`, `Final`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PipelineEvent {
    PreSql(Candidate),
    LinkedTables(LinkingReport),
    Candidate(Candidate),
    Vote(VoteReport),
    Final {
        sql: String,
        preview: Option<ResultPreview>,
    },
}
