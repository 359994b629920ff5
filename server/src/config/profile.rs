//! The shipped configurations a server can run without naming models: [`Profile`].

use serde::Deserialize;

/// A shipped configuration, chosen with `--profile` (`QUORUM_PROFILE`, `[server] profile`) when
/// the configuration names no models of its own. docs/RESULTS.md has each one's accuracy and
/// latency on the same host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// Qwen2.5-Coder-1.5B writes two queries a question, the PreSQL in RE_p and one FinSQL in
    /// SimpleDDL over the linked tables; both vote, and the shipped selector on
    /// Qwen2.5-Coder-0.5B judges a split. On dev300 it is 10 points more accurate than the
    /// `small` profile in 0.63 times its latency: it writes fewer, better queries.
    #[default]
    Default,
    /// Three voters on Qwen2.5-Coder-0.5B with the shipped adapters, and the shipped selector:
    /// for hosts that cannot spare the 1.5B model's memory (`scripts/fetch-models.sh --small`).
    Small,
    /// Three voters on Qwen2.5-Coder-1.5B (the base model: no adapter is trained for it yet),
    /// judged on split votes by the shipped selector on Qwen2.5-Coder-0.5B: two more candidates
    /// than the default, 1.7 times its generated tokens a question.
    Accurate,
}

impl Profile {
    /// The short name of the model that writes the SQL.
    pub fn generator_model(self) -> &'static str {
        match self {
            Self::Small => "qwen2.5-coder-0.5b",
            Self::Default | Self::Accurate => "qwen2.5-coder-1.5b",
        }
    }

    /// The name its voters carry in answers and metrics: `qwen-rep`, `qwen15-ddl`, ...
    pub fn voter_prefix(self) -> &'static str {
        match self {
            Self::Small => "qwen",
            Self::Default | Self::Accurate => "qwen15",
        }
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Default => "default",
            Self::Small => "small",
            Self::Accurate => "accurate",
        })
    }
}
