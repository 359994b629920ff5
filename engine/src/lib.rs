//! quorum-engine

mod detokenizer;
mod logits_constraint;
mod sampler;
mod sampling_params;
mod stop;

pub use detokenizer::{Detokenizer, DetokenizerError};
pub use logits_constraint::{AllowedTokens, LogitsConstraint};
pub use sampler::{SampleOutcome, Sampler, SamplerError};
pub use sampling_params::{
    DEFAULT_MAX_NEW_TOKENS, MAX_N, MAX_STOP_STRINGS, SamplingParams, SamplingParamsError,
};
pub use stop::{FinishReason, StopChecker, StopStep};
