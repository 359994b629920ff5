//! quorum-engine: turns many concurrent token requests into well-packed forward passes.
//!
//! Pure parts (no tensors, no threads), each property-tested: the paged KV block pool
//! ([`BlockPool`]), automatic prefix caching ([`PrefixCache`]), per-sequence block tables, and a
//! vLLM-v1-style [`Scheduler`] (one token budget per step shared by decodes and prefill chunks,
//! preemption by recompute). Per-request sampling ([`Sampler`]), stop conditions
//! ([`StopChecker`]) and incremental detokenization ([`Detokenizer`]).

pub mod block_pool;
pub mod block_table;
mod config;
mod detokenizer;
mod device_attention;
mod device_kv;
pub mod device_memory;
mod engine_error;
mod grammar;
mod handle;
pub mod ids;
pub mod kv_cache;
mod logit_rows;
mod logits_constraint;
mod paged_attention;
pub mod pinned_prefixes;
pub mod prefix_cache;
pub mod prompt_lookup;
mod request;
mod runner;
mod sampler;
mod sampling_params;
pub mod scheduler;
mod shared;
mod stats;
pub mod step;
mod step_pacer;
mod stop;

pub use block_pool::{Allocated, BlockPool, BlockPoolError, blocks_for_budget};
pub use block_table::{BlockCopy, BlockTable, Growth, Slot};
pub use config::{
    DEFAULT_MAX_DRAFT_TOKENS, DEFAULT_PINNED_PREFIX_SHARE, DEFAULT_TARGET_STEP, EngineConfig,
};
pub use detokenizer::{Detokenizer, DetokenizerError};
pub use device_attention::DevicePagedAttention;
pub use device_kv::{DeviceKvStore, slot_index};
pub use engine_error::EngineError;
pub use grammar::{
    Grammar, GrammarCompiler, GrammarConstraint, GrammarError, GrammarRejection, GrammarSpec,
};
pub use handle::{EngineHandle, ModelInfo, spawn_engine};
pub use ids::{BlockId, RequestId, SeqId};
pub use kv_cache::{KvCache, KvCacheError};
pub use logits_constraint::{AllowedTokens, LogitsConstraint};
pub use paged_attention::{PagedAttention, SeqBlocks};
pub use prefix_cache::{
    BlockHash, CacheKey, PrefixCache, PrefixCacheError, PrefixCacheStats, PrefixHit,
};
pub use prompt_lookup::DraftSource;
pub use request::{EngineEvent, FinishEvent, GenerateRequest, TokenEvent};
pub use sampler::{SampleOutcome, Sampler, SamplerError};
pub use sampling_params::{
    DEFAULT_MAX_NEW_TOKENS, MAX_N, MAX_STOP_STRINGS, SamplingParams, SamplingParamsError,
};
pub use scheduler::{NewRequest, Scheduler, SchedulerConfig, SchedulerError, SchedulerStats};
pub use stats::{EngineStats, Histogram};
pub use step::{Finished, ScheduledSeq, StepPlan, StepResult};
pub use step_pacer::StepPacer;
pub use stop::{FinishReason, StopChecker, StopStep};
