use quorum_kernels::PagedKvError;
use quorum_models::ModelError;

use crate::grammar::GrammarError;
use crate::sampling_params::SamplingParamsError;
use crate::scheduler::SchedulerError;

/// Why the engine refused or failed a request. Admission errors are returned by `submit`
/// synchronously so callers can map them to a status at once.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("engine is at capacity ({pending} requests pending, limit {limit})")]
    QueueFull { pending: usize, limit: usize },
    #[error(
        "prompt has {n_tokens} tokens plus {max_new_tokens} new tokens, above the limit of {max}"
    )]
    PromptTooLong {
        n_tokens: usize,
        max_new_tokens: usize,
        max: usize,
    },
    #[error("empty prompt")]
    EmptyPrompt,
    #[error("invalid sampling parameters: {0}")]
    InvalidParams(#[from] SamplingParamsError),
    #[error("{0}")]
    Grammar(#[from] GrammarError),
    #[error("unknown adapter `{adapter}`")]
    UnknownAdapter { adapter: String },
    #[error("an adapter named `{adapter}` is already loaded")]
    AdapterExists { adapter: String },
    #[error("adapter `{adapter}` is used by {requests} request(s) in flight; retry when they end")]
    AdapterInUse { adapter: String, requests: usize },
    #[error("engine is shutting down")]
    ShuttingDown,
    #[error("engine configuration: {detail}")]
    Config { detail: String },
    #[error("model: {0}")]
    Model(#[from] quorum_models::ModelError),
}

impl EngineError {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::QueueFull { .. } => "queue_full",
            Self::PromptTooLong { .. } => "prompt_too_long",
            Self::EmptyPrompt => "empty_prompt",
            Self::InvalidParams(_) => "invalid_params",
            Self::Grammar(GrammarError::Invalid(_)) => "invalid_grammar",
            Self::Grammar(GrammarError::Unsupported(_)) => "grammar_unsupported",
            Self::UnknownAdapter { .. } => "unknown_adapter",
            Self::AdapterExists { .. } => "adapter_exists",
            Self::AdapterInUse { .. } => "adapter_in_use",
            Self::ShuttingDown => "shutting_down",
            Self::Config { .. } => "config",
            Self::Model(e) => e.kind(),
        }
    }
}

/// Why one engine step failed. A failed forward pass finishes every request of its batch with
/// this error; the engine goes on with the next step either way.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    #[error("scheduler: {0}")]
    Scheduler(#[from] SchedulerError),
    #[error("copying a KV block: {0}")]
    HostCopy(#[from] PagedKvError),
    #[error("copying a KV block on the device: {0}")]
    DeviceCopy(candle_core::Error),
    #[error("forward pass failed: {0}")]
    Forward(#[from] ModelError),
}
