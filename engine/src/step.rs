//! What the scheduler and the model runner exchange each step.
//!
//! The scheduler hands out a [`StepPlan`]; the runner performs the block copies, runs one
//! forward pass over every scheduled token, samples where asked, and hands back one
//! [`StepResult`] per scheduled sequence. Plain data, so the scheduler can be driven by tests
//! with no model at all.

use crate::block_table::{BlockCopy, Slot};
use crate::ids::{BlockId, RequestId, SeqId};

/// One sequence's share of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledSeq {
    pub request_id: RequestId,
    pub seq_id: SeqId,
    /// Position of the first token to compute; tokens before it already have KV.
    pub start_position: usize,
    /// The tokens to compute: one for a decode, a chunk of the prompt (or, after preemption,
    /// of prompt and output) for a prefill.
    pub token_ids: Vec<u32>,
    /// Where each token's KV goes, in order.
    pub slots: Vec<Slot>,
    /// The sequence's whole block table, for attention over its earlier tokens.
    pub block_table: Vec<BlockId>,
    /// Whether this chunk reaches the sequence's last known token, so the runner samples
    /// the next token from its logits. A non-final prefill chunk produces no token.
    pub samples: bool,
    /// How many of `token_ids`, at the end, are draft tokens (speculative decoding): guesses
    /// at the next tokens, kept only as far as the runner samples the same ones from the
    /// logits before each. Only a decode has drafts.
    pub drafts: usize,
}

impl ScheduledSeq {
    pub fn num_tokens(&self) -> usize {
        self.token_ids.len()
    }

    /// The draft tokens, in order.
    pub fn draft_tokens(&self) -> &[u32] {
        &self.token_ids[self.token_ids.len() - self.drafts..]
    }
}

/// Everything one forward pass must do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepPlan {
    /// Scheduled sequences, running ones first, then newly admitted ones, each in arrival order.
    pub seqs: Vec<ScheduledSeq>,
    /// KV copies to make before the forward pass (copy-on-write of shared blocks).
    pub copies: Vec<BlockCopy>,
    /// Requests preempted this step: their KV is gone and they will recompute; the runner
    /// drops any per-sequence state it keeps for them (a request's sampler state survives).
    pub preempted: Vec<RequestId>,
}

impl StepPlan {
    /// Tokens computed by this step; never above the scheduler's `max_batched_tokens`.
    pub fn num_tokens(&self) -> usize {
        self.seqs.iter().map(ScheduledSeq::num_tokens).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }
}

/// The runner's answer for one scheduled sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepResult {
    pub request_id: RequestId,
    /// The sampled token: `Some` exactly when the plan said `samples`. With drafts, the last
    /// token sampled.
    pub token: Option<u32>,
    /// Draft tokens the runner sampled itself, in order, before `token`: the sequence grows
    /// by these and then `token`.
    pub accepted: usize,
    /// The sampler saw a stop condition (EOS, stop string, constraint complete). The scheduler
    /// itself ends requests that reach `max_new_tokens`.
    pub stop: bool,
}

/// Why a request ended (the scheduler itself only finishes with `Stop` or `Length`).
use crate::stop::FinishReason;

/// A request that ended in a commit; its blocks are already released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub request_id: RequestId,
    pub reason: FinishReason,
    pub output: Vec<u32>,
}
