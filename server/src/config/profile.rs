//! The shipped configurations a server can run without naming models: [`Profile`].

use serde::Deserialize;

/// A shipped configuration, chosen with `--profile` (`QUORUM_PROFILE`, `[server] profile`) when
/// the configuration names no models of its own. docs/RESULTS.md has each one's accuracy and
/// latency on the same host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// Three voters on Qwen2.5-Coder-0.5B with the shipped adapters, and the shipped selector.
    #[default]
    Default,
    /// Three voters on Qwen2.5-Coder-1.5B (the base model: no adapter is trained for it yet),
    /// judged on split votes by the shipped selector on Qwen2.5-Coder-0.5B. Needs
    /// `scripts/fetch-models.sh --with-1.5b`; about 1.5 GB more weight memory.
    Accurate,
}

impl Profile {
    /// The short name of the model that writes the SQL.
    pub fn generator_model(self) -> &'static str {
        match self {
            Self::Default => "qwen2.5-coder-0.5b",
            Self::Accurate => "qwen2.5-coder-1.5b",
        }
    }

    /// The name its voters carry in answers and metrics: `qwen-rep`, `qwen15-rep`, ...
    pub fn voter_prefix(self) -> &'static str {
        match self {
            Self::Default => "qwen",
            Self::Accurate => "qwen15",
        }
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Default => "default",
            Self::Accurate => "accurate",
        })
    }
}
