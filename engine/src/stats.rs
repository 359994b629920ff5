//! Engine metrics: a snapshot the server exports (Prometheus) and tests inspect.

use std::time::Duration;

/// A cumulative histogram with fixed bucket upper bounds (seconds), as Prometheus exports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub bounds: Vec<f64>,
    /// `counts[i]` = observations <= `bounds[i]`; observations above the last bound only count
    /// in `count`.
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    /// Latency buckets from 5 ms to 60 s: CPU decode steps are tens of milliseconds, long
    /// prefills seconds.
    pub fn latency() -> Self {
        let bounds = vec![
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
        ];
        Self {
            counts: vec![0; bounds.len()],
            bounds,
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        for (b, c) in self.bounds.iter().zip(self.counts.iter_mut()) {
            if s <= *b {
                *c += 1;
            }
        }
        self.sum += s;
        self.count += 1;
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EngineStats {
    pub running: usize,
    pub waiting: usize,
    pub kv_blocks_used: usize,
    pub kv_blocks_total: u32,
    pub prefix_cache_queries: u64,
    pub prefix_cache_hits: u64,
    pub prompt_tokens_total: u64,
    pub generation_tokens_total: u64,
    pub preemptions: u64,
    pub steps: u64,
    pub requests_finished: u64,
    pub ttft: Histogram,
    pub inter_token_latency: Histogram,
}

impl Default for EngineStats {
    fn default() -> Self {
        Self {
            running: 0,
            waiting: 0,
            kv_blocks_used: 0,
            kv_blocks_total: 0,
            prefix_cache_queries: 0,
            prefix_cache_hits: 0,
            prompt_tokens_total: 0,
            generation_tokens_total: 0,
            preemptions: 0,
            steps: 0,
            requests_finished: 0,
            ttft: Histogram::latency(),
            inter_token_latency: Histogram::latency(),
        }
    }
}
