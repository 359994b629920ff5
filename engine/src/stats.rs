//! Engine metrics: a snapshot the server exports (Prometheus) and tests inspect.

use std::time::Duration;

/// A histogram with fixed upper bounds, as Prometheus exposes them: `counts[i]` counts the
/// observations in bucket `i` (at most `bounds[i]`, above the bound before), and one extra slot
/// counts those above the last bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub bounds: Vec<f64>,
    pub counts: Vec<u64>,
    pub sum: f64,
}

impl Histogram {
    pub fn new(bounds: &[f64]) -> Self {
        Self {
            bounds: bounds.to_vec(),
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    /// Latency buckets from 5 ms to 60 s: CPU decode steps are tens of milliseconds, long
    /// prefills seconds.
    pub fn latency() -> Self {
        Self::new(&[
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
        ])
    }

    /// Token-count buckets, powers of two from 1 to 8,192: a SQL answer is tens of tokens, a
    /// schema prompt thousands.
    pub fn token_counts() -> Self {
        let bounds: Vec<f64> = (0..14).map(|i| f64::from(1u32 << i)).collect();
        Self::new(&bounds)
    }

    pub fn observe(&mut self, value: f64) {
        let slot = self
            .bounds
            .iter()
            .position(|b| value <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[slot] += 1;
        self.sum += value;
    }

    pub fn observe_duration(&mut self, d: Duration) {
        self.observe(d.as_secs_f64());
    }

    /// All observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EngineStats {
    pub running: usize,
    pub waiting: usize,
    pub kv_blocks_used: usize,
    pub kv_blocks_total: u32,
    /// Blocks held by pinned prefixes (a database's schema prompt kept warm).
    pub kv_blocks_pinned: usize,
    pub prefix_cache_queries: u64,
    pub prefix_cache_hits: u64,
    pub prompt_tokens_total: u64,
    pub generation_tokens_total: u64,
    pub preemptions: u64,
    pub steps: u64,
    pub requests_finished: u64,
    /// Draft tokens checked by speculative decoding, and those the sampler kept.
    pub draft_tokens: u64,
    pub draft_tokens_accepted: u64,
    pub ttft: Histogram,
    pub inter_token_latency: Histogram,
    /// From submission to the first step that computes a request's tokens.
    pub queue_time: Histogram,
    /// Of each finished request: from its first step to its first token (the prompt's
    /// prefill, chunked or preempted as it was), and from its first token to its last.
    pub prefill_time: Histogram,
    pub decode_time: Histogram,
    /// Prompt and generated tokens of each finished request.
    pub prompt_tokens: Histogram,
    pub generation_tokens: Histogram,
    /// Finished requests by finish reason ([`crate::FinishReason::as_str`]).
    pub finished_by_reason: std::collections::BTreeMap<&'static str, u64>,
    /// Finished requests by LoRA adapter name ("" for the base model).
    pub finished_by_adapter: std::collections::BTreeMap<String, u64>,
}

impl Default for EngineStats {
    fn default() -> Self {
        Self {
            running: 0,
            waiting: 0,
            kv_blocks_used: 0,
            kv_blocks_total: 0,
            kv_blocks_pinned: 0,
            prefix_cache_queries: 0,
            prefix_cache_hits: 0,
            prompt_tokens_total: 0,
            generation_tokens_total: 0,
            preemptions: 0,
            steps: 0,
            requests_finished: 0,
            draft_tokens: 0,
            draft_tokens_accepted: 0,
            ttft: Histogram::latency(),
            inter_token_latency: Histogram::latency(),
            queue_time: Histogram::latency(),
            prefill_time: Histogram::latency(),
            decode_time: Histogram::latency(),
            prompt_tokens: Histogram::token_counts(),
            generation_tokens: Histogram::token_counts(),
            finished_by_reason: std::collections::BTreeMap::new(),
            finished_by_adapter: std::collections::BTreeMap::new(),
        }
    }
}
