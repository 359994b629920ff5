//! quorum-engine

mod sampling_params;

pub use sampling_params::{
    DEFAULT_MAX_NEW_TOKENS, MAX_N, MAX_STOP_STRINGS, SamplingParams, SamplingParamsError,
};
