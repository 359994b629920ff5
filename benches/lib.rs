//! What the benchmark binaries share: reading a request's stream to its end and the
//! decode-phase rate of a batch of requests.

use quorum_engine::{EngineEvent, FinishEvent};

/// Waits for a request's (first choice's) finish event.
pub fn finish(mut rx: tokio::sync::mpsc::UnboundedReceiver<EngineEvent>) -> FinishEvent {
    loop {
        if let Some(EngineEvent::Finished(f)) = rx.blocking_recv() {
            return f;
        }
    }
}

/// Tokens after each request's first, over the time after the last first token: the decode
/// phase of requests submitted together, `wall_s` seconds from submission to the last finish.
/// Returns (tokens per second, tokens).
pub fn decode_phase(fins: &[FinishEvent], wall_s: f64) -> (f64, usize) {
    let last_first = fins
        .iter()
        .filter_map(|f| f.ttft)
        .max()
        .unwrap_or_default()
        .as_secs_f64();
    let decoded: usize = fins
        .iter()
        .map(|f| f.completion_tokens.saturating_sub(1))
        .sum();
    (decoded as f64 / (wall_s - last_first), decoded)
}
