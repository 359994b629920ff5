//! What callers hand the engine and what streams back.

use std::time::{Duration, Instant};

use crate::grammar::Grammar;
use crate::sampling_params::SamplingParams;
use crate::stop::FinishReason;

/// One generation request: already-tokenized prompt plus sampling settings.
#[derive(Debug, Clone)]
pub struct GenerateRequest {
    pub prompt_tokens: Vec<u32>,
    pub params: SamplingParams,
    /// LoRA adapter name; part of the prefix-cache key (KV differs across adapters).
    pub adapter: Option<String>,
    /// After this instant the request is cancelled at the next step.
    pub deadline: Option<Instant>,
    /// Every generated token must keep the output inside this grammar (structured output,
    /// schema-constrained SQL). Compiled at submit: a bad grammar is refused there.
    pub grammar: Option<Grammar>,
    /// Tokens the output is likely to repeat (an earlier answer to the same question, say):
    /// speculative decoding drafts from them first, then from the prompt. Never changes the
    /// output, only how many tokens one step can produce.
    pub draft_hint: Vec<u32>,
    /// Keep this prompt's KV resident under this tag once the request ends (a database's
    /// schema prompt, warmed before its first question): later prompts that begin the same way
    /// skip its prefill. One pin per tag; the engine bounds what pins hold in all and takes
    /// them back, oldest first, before it would preempt a request.
    pub keep_prefix: Option<String>,
}

/// A streamed event. Every request ends with exactly one `Finished` per choice (unless the
/// receiver was dropped, which cancels it).
#[derive(Debug, Clone)]
pub enum EngineEvent {
    Token(TokenEvent),
    Finished(FinishEvent),
}

#[derive(Debug, Clone)]
pub struct TokenEvent {
    /// Which of the request's `n` choices this token belongs to.
    pub choice: u32,
    pub token_id: u32,
    /// Text this token adds (may be empty: held back for a possible stop string, or a stop token).
    pub text: String,
    pub logprob: Option<f32>,
    /// Log-probabilities of the request's `candidate_token_ids` at this step (raw logits).
    pub candidate_logprobs: Vec<(u32, f32)>,
}

#[derive(Debug, Clone)]
pub struct FinishEvent {
    pub choice: u32,
    pub reason: FinishReason,
    /// Text released at the end (held-back text of an unmatched stop-string prefix).
    pub text: String,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: usize,
    pub ttft: Option<Duration>,
    pub total: Duration,
    pub error: Option<String>,
    /// With a grammar: `Some(true)` when it held for every token, `Some(false)` when the
    /// grammar engine gave up part way (logged) and the rest was decoded freely.
    pub constrained: Option<bool>,
}
