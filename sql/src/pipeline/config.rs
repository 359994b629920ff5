//! The pipeline's configuration: plain data (serde) with every stage switchable, so that an
//! ablation is a config file rather than a code change.

use serde::{Deserialize, Serialize};

use super::model::Sampling;
use crate::prompt::{RepOptions, Template};
use crate::sandbox::Limits;
use crate::vote::VotingPolicy;

/// How a prompt presents the schema and the question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
}

/// Revising candidates that fail (seed 1's fallback to the full schema plus seed 2's
/// self-debugging with the error message).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
    #[serde(default = "one")]
    pub samples: usize,
    #[serde(default = "revision_temperature")]
    pub temperature: f32,
}

fn one() -> usize {
    1
}

fn revision_temperature() -> f32 {
    0.8
}

/// How the final SQL is chosen among the PreSQL and the FinSQLs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VotingMode {
    /// No vote: the first generator's last candidate (its FinSQL, or the PreSQL without
    /// round 2) is the answer.
    None,
    /// Cross-consistency: the largest cluster of equal results wins.
    Majority,
    /// PET-SQL's difficulty-aware voting: the PreSQL's Spider hardness picks the voters.
    DifficultyAware(VotingPolicy),
}

/// When a vote counts as split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitRule {
    /// The winning cluster holds at most half of the voters.
    NoStrictMajority,
    /// Two or more clusters share the largest size.
    Tie,
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
}

impl PipelineConfig {
    /// PET-SQL as published, with the given generators: RE_p with 9 shots in both rounds,
    /// skeleton re-ranking, one revision round for errors, majority vote, no selector.
    pub fn pet_sql(generators: Vec<GeneratorConfig>) -> Self {
        Self {
            round1: Round1Config {
                format: PromptFormat::Rep,
                rep: RepOptions::default(),
                shots: 9,
            },
            round2: Round2Config {
                enabled: true,
                shots: 9,
                skeleton_rerank: true,
                multi_table_filter: false,
                all_tables_when_unlinked: true,
            },
            generators,
            revision: RevisionConfig {
                enabled: true,
                max_rounds: 1,
                revise_empty: false,
                samples: 1,
                temperature: revision_temperature(),
            },
            voting: VotingMode::Majority,
            selector: SelectorConfig {
                enabled: false,
                split_rule: SplitRule::NoStrictMajority,
                preview_rows: 10,
                max_groups: 5,
            },
            limits: Limits::default(),
            preview_rows: 20,
            answer_prefix: false,
            constrained: false,
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
        let mut config = PipelineConfig::pet_sql(vec![
            GeneratorConfig::new("a", PromptFormat::Rep),
            GeneratorConfig::new("b", PromptFormat::Template(Template::DdlMdChat)),
        ]);
        config.voting = VotingMode::DifficultyAware(VotingPolicy::default());
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
