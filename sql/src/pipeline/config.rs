//! The pipeline's configuration: plain data (serde) with every stage switchable, so that an
//! ablation is a config file rather than a code change.

use crate::subtask::explain::DEFAULT_THRESHOLD;
use serde::{Deserialize, Serialize};

use crate::model::Sampling;
use crate::prompt::{RepOptions, Template};
use crate::rules::RuleSwitches;
use crate::sandbox::Limits;
use crate::vote::{SplitRule, VotingMode};

/// How a prompt presents the schema and the question. Config files and requests write it by
/// its [`PromptFormat::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum PromptFormat {
    /// PET-SQL's RE_p, the only format that carries few-shot demonstrations.
    Rep,
    /// XiYan's generator prompt over M-Schema (zero-shot).
    MSchema,
    /// SimpleDDL-MD-Chat, the benchmarking paper's best zero-shot template.
    SimpleDdl,
    /// Any of the benchmarking paper's zero-shot templates, for template ablations.
    Template(Template),
}

impl PromptFormat {
    /// The name configs, request options and CLI flags use: `rep`, `m_schema`, `simple_ddl`,
    /// or a template's paper name such as `DDL-MD-Chat`.
    pub fn name(self) -> String {
        match self {
            Self::Rep => "rep".into(),
            Self::MSchema => "m_schema".into(),
            Self::SimpleDdl => "simple_ddl".into(),
            Self::Template(t) => t.name(),
        }
    }

    /// Parses [`PromptFormat::name`] (case-insensitive); the error lists the known names.
    pub fn from_name(name: &str) -> Result<Self, String> {
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "rep" | "re_p" => Ok(Self::Rep),
            "m_schema" | "m-schema" | "mschema" => Ok(Self::MSchema),
            "simple_ddl" => Ok(Self::SimpleDdl),
            _ => Template::from_name(name)
                .map(Self::Template)
                .ok_or_else(|| {
                    let templates: Vec<String> = Template::ALL.iter().map(|t| t.name()).collect();
                    format!(
                        "unknown prompt format `{name}`; known: rep, m_schema, simple_ddl, {}",
                        templates.join(", ")
                    )
                }),
        }
    }
}

impl From<PromptFormat> for String {
    fn from(format: PromptFormat) -> String {
        format.name()
    }
}

impl TryFrom<String> for PromptFormat {
    type Error = String;
    fn try_from(name: String) -> Result<Self, String> {
        Self::from_name(&name)
    }
}

impl std::str::FromStr for PromptFormat {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        Self::from_name(name)
    }
}

/// One generator of round 2 (the first one also writes the PreSQL in round 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratorConfig {
    /// The name the server knows the model (or model + adapter) by.
    pub name: String,
    pub format: PromptFormat,
    /// RE_p switches; ignored by the other formats.
    #[serde(default)]
    pub rep: RepOptions,
    #[serde(default)]
    pub sampling: Sampling,
}

impl GeneratorConfig {
    pub fn new(name: impl Into<String>, format: PromptFormat) -> Self {
        Self {
            name: name.into(),
            format,
            rep: RepOptions::default(),
            sampling: Sampling::default(),
        }
    }
}

/// Round 1: the preliminary SQL over the full schema.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Round1Config {
    pub format: PromptFormat,
    pub rep: RepOptions,
    /// Few-shot demonstrations (0 = zero-shot). PET-SQL uses 9.
    pub shots: usize,
}

/// Round 2: every generator over the linked tables.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Round2Config {
    pub enabled: bool,
    pub shots: usize,
    /// Put demos whose SQL skeleton is close to the PreSQL's first (DAIL-SQL / PET-SQL).
    pub skeleton_rerank: bool,
    /// XiYan: when linking selected two or more tables, prefer demos that join tables.
    pub multi_table_filter: bool,
    /// Link to every table when the PreSQL names none, instead of skipping round 2.
    pub all_tables_when_unlinked: bool,
    /// Link also the tables that own a column the PreSQL names and its tables lack
    /// ([`crate::linking::tables::tables_of_unplaced_columns`]).
    pub link_columns: bool,
    /// Link also the tables whose whole name the question says
    /// ([`crate::linking::tables::tables_named_in`]).
    #[serde(default)]
    pub link_named_tables: bool,
}

/// Revising candidates that fail (the de-semanticization paper's fallback to the full schema plus
/// the benchmarking study's self-debugging with the error message).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RevisionConfig {
    pub enabled: bool,
    /// Debugging rounds; the benchmarking paper finds gains flatten after 1-2.
    pub max_rounds: usize,
    /// Also revise queries that run but return no rows: often a wrong literal, but sometimes
    /// the right answer, so it is a switch.
    pub revise_empty: bool,
    /// Fixes sampled per failed query and round. Greedy decoding answers the same input the
    /// same way, and a small model often repeats the failing query; several samples at
    /// `temperature` find a query that runs far more often. The most common result among the
    /// samples that run is kept. 1 = one greedy fix.
    pub samples: usize,
    pub temperature: f32,
    /// Also revise when the majority vote is settled without the failed candidates: the
    /// leading result outnumbers any group they could join and comes first in voter order, so
    /// their fixes cannot change the answer.
    #[serde(default)]
    pub revise_settled: bool,
    /// Also revise failed candidates when another voter's query ran. Off, revision is a
    /// rescue for questions where nothing ran: a failed voter's fix beside a result that
    /// stands mostly adds a split vote for the selector, at a question's longest decode.
    pub revise_beside_results: bool,
}

/// The selection model for split votes (XiYan's candidate selection).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SelectorConfig {
    pub enabled: bool,
    pub split_rule: SplitRule,
    /// Result rows shown per candidate (XiYan shows 10).
    pub preview_rows: usize,
    /// At most this many result groups are offered, in order of first appearance.
    pub max_groups: usize,
    /// How much a group's votes count against the selector's log-probabilities
    /// ([`crate::vote::weighed_choice`]); 0 lets the selector alone decide.
    #[serde(default)]
    pub vote_weight: f32,
}

/// The whole two-round method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineConfig {
    pub round1: Round1Config,
    pub round2: Round2Config,
    /// Round-2 generators in order; the first also writes the PreSQL. At least one.
    pub generators: Vec<GeneratorConfig>,
    pub revision: RevisionConfig,
    pub voting: VotingMode,
    pub selector: SelectorConfig,
    /// Limits for every execution of generated SQL.
    pub limits: Limits,
    /// Rows of the final result returned as a preview.
    pub preview_rows: usize,
    /// Start every answer with ```` ```sql\nSELECT ```` (and stop at the closing fence): the
    /// model writes a query at once instead of prose or DDL, and stops when it is done.
    #[serde(default)]
    pub answer_prefix: bool,
    /// Decode every answer under the schema grammar of its database ([`crate::grammar`]), in
    /// every round (round 2 too shows only the linked tables but may name any). Tokens
    /// that would leave the grammar (a misspelled column, a table not in the database, a
    /// clause out of place) are never chosen.
    #[serde(default)]
    pub constrained: bool,
    /// Show the question's matches among the database's text values in every prompt
    /// ([`crate::linking::value_index`]).
    #[serde(default)]
    pub value_retrieval: bool,
    /// Schemas with more tables than this are filtered before round 1: the prompts show the
    /// tables the question is about and the tables that join them
    /// ([`crate::linking::schema_filter`]). 0 shows every schema whole.
    #[serde(default)]
    pub schema_filter_above: usize,
    /// Candidates that run but have a defect no question asks for (a column compared with
    /// itself, a constant answer: [`crate::defect`]) are left out of the vote while a
    /// candidate without one ran.
    #[serde(default)]
    pub defect_check: bool,
    /// On a server whose `LIKE` minds case (PostgreSQL, DuckDB), a generated `LIKE` runs as
    /// `ILIKE`: the generators learned SQLite's, which ignores case
    /// ([`crate::rules::translate::like_ignoring_case`]).
    #[serde(default)]
    pub case_blind_like: bool,
    /// On a database server, a window of whole days back from now starts at midnight, and a
    /// day of the week compared with 7 is read in ISO's numbering
    /// ([`crate::rules::calendar_days`]).
    #[serde(default)]
    pub calendar_days: bool,
    /// Which query rules rewrite a query that ran ([`crate::rules`]): one switch each, named
    /// as its knob.
    #[serde(flatten)]
    pub rules: RuleSwitches,
    /// Question words that mean a table or column name, found by the embedder, shown to the
    /// prompts as evidence ([`crate::linking::term_hints`]).
    #[serde(default)]
    pub term_hints: bool,
    /// Only the statements of the evidence (and notes) the question calls for are told: a
    /// definition when the question uses its term ([`crate::evidence_filter`]).
    #[serde(default)]
    pub evidence_filter: bool,
    /// The semantic consistency check of the final answer.
    #[serde(default)]
    pub consistency: ConsistencyConfig,
}

/// The benchmarking paper's consistency check as a last stage: the final SQL is explained in
/// words by a generator and the selection model judges whether that asks the user's question.
/// The answer is flagged, never changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsistencyConfig {
    pub enabled: bool,
    /// The generator that explains the SQL, by the name the pipeline's model answers to; it need
    /// not be one of this run's voters (a request may vote with a subset and still be
    /// explained by the server's sub-task generator). `None`: the first voter.
    #[serde(default)]
    pub generator: Option<String>,
    /// The judge's `p_same` at and above which the answer counts as consistent.
    pub threshold: f32,
}

impl Default for ConsistencyConfig {
    /// Off, explained by the first generator, judged against the default judge's threshold.
    fn default() -> Self {
        Self {
            enabled: false,
            generator: None,
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

impl PipelineConfig {
    /// Applies `f` to the RE_p switches of round 1 and of every generator.
    pub fn for_each_rep(&mut self, mut f: impl FnMut(&mut RepOptions)) {
        f(&mut self.round1.rep);
        for g in &mut self.generators {
            f(&mut g.rep);
        }
    }

    /// Whether any stage needs the demo index and an embedder.
    pub fn uses_demos(&self) -> bool {
        let round1 = self.round1.shots > 0 && self.round1.format == PromptFormat::Rep;
        let round2 = self.round2.enabled
            && self.round2.shots > 0
            && self
                .generators
                .iter()
                .any(|g| g.format == PromptFormat::Rep);
        round1 || round2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_round_trips_through_json() {
        let mut config = PipelineConfig::new(vec![
            GeneratorConfig::new("a", PromptFormat::Rep),
            GeneratorConfig::new("b", PromptFormat::Template(Template::DdlMdChat)),
        ]);
        config.voting = VotingMode::None;
        config.round1.shots = 9;
        config.round2.shots = 9;
        let json = serde_json::to_string(&config).expect("serializes");
        let back: PipelineConfig = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, config);
        assert!(config.uses_demos());
        config.round1.shots = 0;
        config.round2.shots = 0;
        assert!(!config.uses_demos());
    }

    #[test]
    fn format_names_round_trip() {
        for format in [
            PromptFormat::Rep,
            PromptFormat::MSchema,
            PromptFormat::SimpleDdl,
        ]
        .into_iter()
        .chain(Template::ALL.into_iter().map(PromptFormat::Template))
        {
            assert_eq!(PromptFormat::from_name(&format.name()), Ok(format));
        }
        assert_eq!(
            PromptFormat::from_name("ddl-md-chat"),
            Ok(PromptFormat::Template(Template::DdlMdChat))
        );
        let err = PromptFormat::from_name("yaml").expect_err("unknown");
        assert!(err.contains("SimpleDDL-MD-Chat"), "{err}");
    }

    #[test]
    fn generator_config_defaults_rep_and_sampling() {
        let g: GeneratorConfig =
            serde_json::from_str(r#"{"name": "m", "format": "m_schema"}"#).expect("parses");
        assert_eq!(g.format, PromptFormat::MSchema);
        assert_eq!(g.sampling, Sampling::default());
        assert_eq!(g.rep, RepOptions::default());
    }
}
