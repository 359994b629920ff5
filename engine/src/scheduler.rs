//! The continuous-batching scheduler, a pure state machine in the style of vLLM v1.
//!
//! There is no prefill or decode phase. Every request carries `num_computed`, the number of
//! its tokens (prompt, then output) whose KV exists, and each step closes part of the gap to
//! its token count: one token for a decode, a chunk for a prefill. One token budget per step
//! (at most `max_batched_tokens`, sized by the engine to its measured step time) is spent first
//! on running requests, in arrival order, then on admitting waiting ones, also in arrival
//! order, so chunked prefill, prefix caching and recompute after preemption all fall out of
//! the same rule. While requests wait and a running slot is free, a running prefill takes at
//! most half the budget.
//!
//! Priority is arrival order. When blocks run out, the latest-arrived running request is
//! preempted by recompute: its blocks are freed and it goes back to the waiting queue keeping
//! its output, to recompute prompt and output later (with help from the prefix cache, since
//! its full blocks stay cached until evicted). Admission is strictly FIFO and the earliest
//! running request can always take every block from later ones, so nothing starves.
//!
//! The engine calls [`Scheduler::plan_step`], runs the plan, then [`Scheduler::commit`]s the
//! sampled tokens; exactly one plan is in flight at a time.

use std::collections::{HashMap, VecDeque};

use crate::block_table::BlockCopy;
use crate::ids::{RequestId, SeqId};
use crate::kv_cache::{KvCache, KvCacheError};
use crate::prefix_cache::{CacheKey, PrefixCacheStats};
use crate::prompt_lookup::DraftSource;
use crate::step::{Finished, ScheduledSeq, StepPlan, StepResult};
use crate::stop::FinishReason;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

/// Scheduler limits. Plain data; the server derives `num_blocks` from its memory budget with
/// [`crate::blocks_for_budget`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    pub block_size: usize,
    pub num_blocks: u32,
    /// Tokens per forward pass. Larger batches amortize the weight read better; smaller ones
    /// bound the time a long prefill delays everyone's next token.
    pub max_batched_tokens: usize,
    pub max_running_seqs: usize,
    /// Requests allowed to wait; beyond it `add_request` fails fast instead of queueing.
    pub max_waiting: usize,
    /// Prompt plus output tokens of one request.
    pub max_model_len: usize,
    pub enable_prefix_caching: bool,
    /// Blocks that pinned prefixes ([`NewRequest::keep_prefix`]) may hold together.
    pub max_pinned_blocks: usize,
}

/// Steps of at most this many tokens get drafts (speculative decoding). On two AVX-512 cores
/// the int8 GEMM of 16 rows takes about 5x the time of one row (`q8_gemm_throughput`), so up
/// to here an extra row costs a fraction of a decode step.
pub const DRAFT_STEP_TOKENS: usize = 16;

/// A request as the engine submits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRequest {
    pub id: RequestId,
    pub prompt: Vec<u32>,
    pub max_new_tokens: usize,
    pub cache_key: CacheKey,
    /// Speculative decoding by prompt lookup for this request, if its output may be guessed
    /// at (the engine asks it only where checking a guess cannot change the output).
    pub drafts: Option<DraftSource>,
    /// Once the request finishes, its prompt's cached blocks stay resident under this tag
    /// (replacing the tag's earlier ones) instead of becoming evictable.
    pub keep_prefix: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerError {
    #[error("invalid scheduler config: {field} must be positive")]
    InvalidConfig { field: &'static str },
    #[error("waiting queue is full ({max_waiting} requests)")]
    QueueFull { max_waiting: usize },
    #[error("prompt and output need {n_tokens} tokens, the model allows {max}")]
    PromptTooLong { n_tokens: usize, max: usize },
    #[error("prompt and output need {n_tokens} tokens of KV, the cache holds {capacity}")]
    ExceedsKvCapacity { n_tokens: usize, capacity: usize },
    #[error("{request_id} has an empty prompt")]
    EmptyPrompt { request_id: RequestId },
    #[error("{request_id} asks for no new tokens")]
    NoNewTokens { request_id: RequestId },
    #[error("{request_id} is already scheduled")]
    DuplicateRequest { request_id: RequestId },
    #[error("a step plan is awaiting its commit")]
    PlanPending,
    #[error("no step plan is awaiting a commit")]
    NoPlanPending,
    #[error("{request_id} is not a live request")]
    UnknownRequest { request_id: RequestId },
    #[error("{request_id} was not in the step plan")]
    NotInPlan { request_id: RequestId },
    #[error("{request_id}: expected a sampled token: {expected}, got one: {got}")]
    TokenMismatch {
        request_id: RequestId,
        expected: bool,
        got: bool,
    },
    #[error("{request_id} has no result in the commit")]
    MissingResult { request_id: RequestId },
    #[error("{request_id}: {accepted} draft tokens accepted of {drafts}")]
    AcceptedBeyondDrafts {
        request_id: RequestId,
        accepted: usize,
        drafts: usize,
    },
    #[error(transparent)]
    Kv(#[from] KvCacheError),
}

impl SchedulerError {
    /// A stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidConfig { .. } => "invalid_config",
            Self::QueueFull { .. } => "queue_full",
            Self::PromptTooLong { .. } => "prompt_too_long",
            Self::ExceedsKvCapacity { .. } => "exceeds_kv_capacity",
            Self::EmptyPrompt { .. } => "empty_prompt",
            Self::NoNewTokens { .. } => "no_new_tokens",
            Self::DuplicateRequest { .. } => "duplicate_request",
            Self::PlanPending => "plan_pending",
            Self::NoPlanPending => "no_plan_pending",
            Self::UnknownRequest { .. } => "unknown_request",
            Self::NotInPlan { .. } => "not_in_plan",
            Self::TokenMismatch { .. } => "token_mismatch",
            Self::MissingResult { .. } => "missing_result",
            Self::AcceptedBeyondDrafts { .. } => "accepted_beyond_drafts",
            Self::Kv(e) => e.kind(),
        }
    }
}

/// Gauges and counters for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerStats {
    pub running: usize,
    pub waiting: usize,
    pub blocks_used: usize,
    pub blocks_total: u32,
    /// Blocks held by pinned prefixes (counted in `blocks_used`).
    pub blocks_pinned: usize,
    pub prefix_cache: PrefixCacheStats,
    pub preemptions: u64,
}

#[derive(Debug, Clone)]
struct Request {
    seq: SeqId,
    /// Arrival order, the priority: lower is earlier and more important.
    arrival: u64,
    key: CacheKey,
    prompt_len: usize,
    /// Prompt followed by the output so far.
    tokens: Vec<u32>,
    max_new_tokens: usize,
    /// Leading tokens whose KV is computed (or scheduled in the plan in flight).
    num_computed: usize,
    drafts: Option<DraftSource>,
    /// Draft tokens to ask for next (adapted to what the last drafts achieved).
    draft_len: usize,
    keep_prefix: Option<String>,
}

impl Request {
    fn num_output(&self) -> usize {
        self.tokens.len() - self.prompt_len
    }
}

/// A plan entry awaiting its commit.
#[derive(Debug, Clone)]
struct InFlight {
    request_id: RequestId,
    samples: bool,
    /// The draft tokens the plan asks the runner to check.
    drafts: Vec<u32>,
}

/// The running set, the waiting queue, and the KV cache they share.
#[derive(Debug, Clone)]
pub struct Scheduler {
    config: SchedulerConfig,
    kv: KvCache,
    requests: HashMap<RequestId, Request>,
    /// Waiting requests in arrival order (preempted ones included).
    waiting: VecDeque<RequestId>,
    /// Running requests in arrival order; preemption takes from the back.
    running: Vec<RequestId>,
    next_arrival: u64,
    in_flight: Option<Vec<InFlight>>,
    preemptions: u64,
    /// Tokens the next step may take (at most `max_batched_tokens`); the engine sets it from
    /// the measured step time.
    step_budget: usize,
}

/// The step being assembled.
struct Builder {
    budget: usize,
    plan: StepPlan,
}

impl Scheduler {
    pub fn new(config: SchedulerConfig) -> Result<Self, SchedulerError> {
        let positive = [
            ("max_batched_tokens", config.max_batched_tokens),
            ("max_running_seqs", config.max_running_seqs),
            ("max_model_len", config.max_model_len),
        ];
        if let Some((field, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(SchedulerError::InvalidConfig { field });
        }
        let kv = KvCache::new(
            config.num_blocks,
            config.block_size,
            config.enable_prefix_caching,
            config.max_pinned_blocks,
        )?;
        Ok(Self {
            step_budget: config.max_batched_tokens,
            config,
            kv,
            requests: HashMap::new(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            next_arrival: 0,
            in_flight: None,
            preemptions: 0,
        })
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    pub fn stats(&self) -> SchedulerStats {
        SchedulerStats {
            running: self.running.len(),
            waiting: self.waiting.len(),
            blocks_used: self.kv.pool().num_used(),
            blocks_total: self.kv.pool().num_total(),
            blocks_pinned: self.kv.pinned_blocks(),
            prefix_cache: self.kv.prefix_stats(),
            preemptions: self.preemptions,
        }
    }

    /// Whether any request is waiting or running.
    pub fn has_work(&self) -> bool {
        !self.requests.is_empty()
    }

    /// Queues a request, or refuses it at once: when the queue is full (the client should
    /// back off: RESOURCE_EXHAUSTED) or when it could never run.
    pub fn add_request(&mut self, request: NewRequest) -> Result<(), SchedulerError> {
        let request_id = request.id;
        if self.requests.contains_key(&request_id) {
            return Err(SchedulerError::DuplicateRequest { request_id });
        }
        if request.prompt.is_empty() {
            return Err(SchedulerError::EmptyPrompt { request_id });
        }
        if request.max_new_tokens == 0 {
            return Err(SchedulerError::NoNewTokens { request_id });
        }
        let n_tokens = request.prompt.len().saturating_add(request.max_new_tokens);
        if n_tokens > self.config.max_model_len {
            return Err(SchedulerError::PromptTooLong {
                n_tokens,
                max: self.config.max_model_len,
            });
        }
        // A request that fits the whole cache can always finish: once everything arrived before
        // it is done, it gets every block.
        let capacity = self.config.num_blocks as usize * self.config.block_size;
        if n_tokens > capacity {
            return Err(SchedulerError::ExceedsKvCapacity { n_tokens, capacity });
        }
        if self.waiting.len() >= self.config.max_waiting {
            return Err(SchedulerError::QueueFull {
                max_waiting: self.config.max_waiting,
            });
        }
        let arrival = self.next_arrival;
        self.next_arrival += 1;
        self.requests.insert(
            request_id,
            Request {
                seq: SeqId(arrival),
                arrival,
                key: request.cache_key,
                prompt_len: request.prompt.len(),
                tokens: request.prompt,
                max_new_tokens: request.max_new_tokens,
                num_computed: 0,
                draft_len: request.drafts.as_ref().map_or(0, |d| d.max_draft),
                drafts: request.drafts,
                keep_prefix: request.keep_prefix,
            },
        );
        self.waiting.push_back(request_id);
        Ok(())
    }

    /// Drops a request wherever it is and frees its blocks now, for a client that went away.
    /// Returns whether the request was known. A result for it in the commit of a plan already
    /// in flight is ignored.
    pub fn cancel(&mut self, request_id: RequestId) -> Result<bool, SchedulerError> {
        let Some(request) = self.requests.remove(&request_id) else {
            return Ok(false);
        };
        self.waiting.retain(|id| *id != request_id);
        self.running.retain(|id| *id != request_id);
        if self.kv.contains(request.seq) {
            self.kv.free(request.seq)?;
        }
        Ok(true)
    }

    /// Sets the tokens of the next steps, at least one and at most `max_batched_tokens`.
    /// Only where prefills are cut into chunks changes, not what any request computes.
    pub fn set_step_budget(&mut self, tokens: usize) {
        self.step_budget = tokens.clamp(1, self.config.max_batched_tokens);
    }

    /// Plans the next forward pass. Fails with `PlanPending` until the previous plan is
    /// committed. An empty plan means there is nothing to run.
    pub fn plan_step(&mut self) -> Result<StepPlan, SchedulerError> {
        if self.in_flight.is_some() {
            return Err(SchedulerError::PlanPending);
        }
        let mut step = Builder {
            budget: self.step_budget,
            plan: StepPlan::default(),
        };
        self.schedule_running(&mut step)?;
        // After a preemption memory is short: admitting more would only preempt again.
        if step.plan.preempted.is_empty() {
            self.schedule_waiting(&mut step)?;
            self.add_drafts(&mut step)?;
        }
        let in_flight = step
            .plan
            .seqs
            .iter()
            .map(|s| InFlight {
                request_id: s.request_id,
                samples: s.samples,
                drafts: s.draft_tokens().to_vec(),
            })
            .collect();
        self.in_flight = Some(in_flight);
        Ok(step.plan)
    }

    /// Running requests first: decodes and the rest of chunked prefills.
    fn schedule_running(&mut self, step: &mut Builder) -> Result<(), SchedulerError> {
        let mut i = 0;
        while i < self.running.len() && step.budget > 0 {
            let id = self.running[i];
            let request = self.request(id)?;
            let mut n = (request.tokens.len() - request.num_computed).min(step.budget);
            // A long prefill leaves half the step to requests that wait (when a running slot is
            // free for them), so a short request is admitted behind it at the next step instead
            // of after the whole prompt.
            let admissible = self.running.len() < self.config.max_running_seqs;
            if n > 1 && admissible && !self.waiting.is_empty() {
                n = n.min(self.step_budget.div_ceil(2));
            }
            if n == 0 {
                i += 1;
                continue;
            }
            match self.grow_or_preempt(id, n, step)? {
                Some(copies) => {
                    self.schedule(id, n, copies, step)?;
                    i += 1;
                }
                // The request preempted itself: it was the last running one.
                None => break,
            }
        }
        Ok(())
    }

    /// Gives decodes draft tokens to check while the step is small (speculative decoding,
    /// [`crate::prompt_lookup`]). A small step's time goes mostly to reading the weights, so a
    /// few more rows cost little; in a full step each row costs as much as any other, and a
    /// rejected draft is pure loss. Each request's draft length adapts: after a draft kept
    /// whole it may double, otherwise it drops to one more than the tokens kept. Drafts never
    /// preempt anyone: they are a bet.
    fn add_drafts(&mut self, step: &mut Builder) -> Result<(), SchedulerError> {
        for i in 0..step.plan.seqs.len() {
            let rows = step.plan.num_tokens();
            let room = DRAFT_STEP_TOKENS.saturating_sub(rows).min(step.budget);
            if room == 0 {
                break;
            }
            let s = &step.plan.seqs[i];
            let id = s.request_id;
            let request = self.request(id)?;
            let Some(source) = &request.drafts else {
                continue;
            };
            // A decode of a sequence that has output: its one token is its last one.
            let decode = s.samples && s.num_tokens() == 1 && request.num_output() > 0;
            // Output left after the token this decode samples in any case.
            let left = request
                .max_new_tokens
                .saturating_sub(request.num_output() + 1);
            if !decode || left == 0 {
                continue;
            }
            let drafts = source.propose(&request.tokens, room.min(left).min(request.draft_len));
            if drafts.is_empty() {
                continue;
            }
            let (seq, start) = (request.seq, request.num_computed);
            let written = start + drafts.len();
            let copies = match self.kv.grow(seq, start, written) {
                Ok(copies) => copies,
                Err(e) if e.is_exhausted() => continue,
                Err(e) => return Err(e.into()),
            };
            let s = &mut step.plan.seqs[i];
            s.slots = self.kv.slots(seq, s.start_position, written)?;
            s.block_table = self.kv.blocks(seq)?.to_vec();
            s.token_ids.extend_from_slice(&drafts);
            s.drafts = drafts.len();
            step.plan.copies.extend(copies);
            step.budget -= drafts.len();
            self.requests
                .get_mut(&id)
                .ok_or(SchedulerError::UnknownRequest { request_id: id })?
                .num_computed = written;
        }
        Ok(())
    }

    /// Finds blocks for `n` more tokens of running request `id`, preempting the latest-arrived
    /// running requests until they fit. `None` when `id` itself had to go. Running requests
    /// are visited front to back and victims taken from the back, so a victim was never
    /// scheduled earlier in this step.
    fn grow_or_preempt(
        &mut self,
        id: RequestId,
        n: usize,
        step: &mut Builder,
    ) -> Result<Option<Vec<BlockCopy>>, SchedulerError> {
        let (seq, start) = {
            let request = self.request(id)?;
            (request.seq, request.num_computed)
        };
        loop {
            match self.kv.grow(seq, start, start + n) {
                Ok(copies) => return Ok(Some(copies)),
                // A pinned prefix is only a bet on the next question: it goes before anyone
                // who is running.
                Err(e) if e.is_exhausted() && self.kv.unpin_oldest()? => {}
                Err(e) if e.is_exhausted() => {
                    let victim = self.running.pop().ok_or(SchedulerError::Kv(e))?;
                    self.preempt(victim)?;
                    step.plan.preempted.push(victim);
                    if victim == id {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Frees a running request's blocks and requeues it by arrival, to recompute from scratch.
    fn preempt(&mut self, id: RequestId) -> Result<(), SchedulerError> {
        let request = self
            .requests
            .get_mut(&id)
            .ok_or(SchedulerError::UnknownRequest { request_id: id })?;
        request.num_computed = 0;
        let (seq, arrival) = (request.seq, request.arrival);
        self.kv.free(seq)?;
        self.enqueue_waiting(id, arrival);
        self.preemptions += 1;
        Ok(())
    }

    fn enqueue_waiting(&mut self, id: RequestId, arrival: u64) {
        let requests = &self.requests;
        let at = self
            .waiting
            .partition_point(|w| requests.get(w).is_some_and(|r| r.arrival < arrival));
        self.waiting.insert(at, id);
    }

    /// Admits waiting requests in arrival order while budget, running slots and blocks last.
    /// Strict FIFO: if the head does not fit, nobody behind it is admitted.
    fn schedule_waiting(&mut self, step: &mut Builder) -> Result<(), SchedulerError> {
        // Requests passed over because their prompt is being computed by another, in order.
        let mut passed = 0;
        while step.budget > 0 && self.running.len() < self.config.max_running_seqs {
            let Some(&id) = self.waiting.get(passed) else {
                break;
            };
            // Field borrows, not `self.request`, so the KV cache can be borrowed beside it.
            let request = self
                .requests
                .get(&id)
                .ok_or(SchedulerError::UnknownRequest { request_id: id })?;
            if self.prefill_in_progress_covers(request, step) {
                passed += 1;
                continue;
            }
            let (seq, key) = (request.seq, request.key);
            let hit = self.kv.lookup_prefix(key, &request.tokens);
            let cached = hit.num_tokens(self.kv.block_size());
            let n = (request.tokens.len() - cached).min(step.budget);
            self.kv.admit(seq, key, hit)?;
            let copies = match self.kv.grow(seq, cached, cached + n) {
                Ok(copies) => copies,
                Err(e) => {
                    self.kv.free(seq)?;
                    // Pins give way to a waiting request too, or one that needs the whole
                    // cache could wait for them forever; it is looked up again, since the
                    // released blocks may be its own prefix.
                    if e.is_exhausted() && self.kv.unpin_oldest()? {
                        continue;
                    }
                    if e.is_exhausted() {
                        break;
                    }
                    return Err(e.into());
                }
            };
            self.waiting.remove(passed);
            self.running.push(id);
            self.requests
                .get_mut(&id)
                .ok_or(SchedulerError::UnknownRequest { request_id: id })?
                .num_computed = cached;
            self.schedule(id, n, copies, step)?;
        }
        Ok(())
    }

    /// Whether a running request is still computing full prompt blocks that `request` shares.
    /// Admitting `request` now would compute them twice (the samples of one prompt, the
    /// candidates of one question); after that prefill they are in the prefix cache, and
    /// `request` waits at most until then, so nothing starves.
    fn prefill_in_progress_covers(&self, request: &Request, step: &Builder) -> bool {
        let block = self.kv.block_size();
        self.running
            .iter()
            .filter_map(|id| self.requests.get(id).map(|r| (id, r)))
            .filter(|(_, r)| r.key == request.key)
            .any(|(id, r)| {
                // What the cache can hold by now: blocks computed before this step (a prefill
                // scheduled in this step is cached only at its commit).
                let computed = step
                    .plan
                    .seqs
                    .iter()
                    .find(|s| s.request_id == *id)
                    .map_or(r.num_computed, |s| s.start_position);
                if computed >= r.prompt_len {
                    return false;
                }
                let shared = r.tokens[..r.prompt_len]
                    .iter()
                    .zip(&request.tokens)
                    .take_while(|(a, b)| a == b)
                    .count();
                // Shared full blocks beyond those already computed (and so cached).
                shared / block > computed / block
            })
    }

    /// Adds `n` tokens of request `id` (whose blocks are in place) to the step.
    fn schedule(
        &mut self,
        id: RequestId,
        n: usize,
        copies: Vec<BlockCopy>,
        step: &mut Builder,
    ) -> Result<(), SchedulerError> {
        let request = self
            .requests
            .get_mut(&id)
            .ok_or(SchedulerError::UnknownRequest { request_id: id })?;
        let start = request.num_computed;
        let end = start + n;
        request.num_computed = end;
        step.plan.seqs.push(ScheduledSeq {
            request_id: id,
            seq_id: request.seq,
            start_position: start,
            token_ids: request.tokens[start..end].to_vec(),
            slots: self.kv.slots(request.seq, start, end)?,
            block_table: self.kv.blocks(request.seq)?.to_vec(),
            samples: end == request.tokens.len(),
            drafts: 0,
        });
        step.plan.copies.extend(copies);
        step.budget -= n;
        Ok(())
    }

    /// Applies the runner's results for the plan in flight: appends sampled tokens, offers
    /// newly full blocks to the prefix cache, and retires finished requests, freeing their
    /// blocks. Validates everything before changing anything, so a bad commit leaves the plan
    /// in flight.
    pub fn commit(&mut self, results: &[StepResult]) -> Result<Vec<Finished>, SchedulerError> {
        let in_flight = self
            .in_flight
            .as_ref()
            .ok_or(SchedulerError::NoPlanPending)?;
        let by_id: HashMap<RequestId, &StepResult> =
            results.iter().map(|r| (r.request_id, r)).collect();
        for result in results {
            let entry = in_flight
                .iter()
                .find(|f| f.request_id == result.request_id)
                .ok_or(SchedulerError::NotInPlan {
                    request_id: result.request_id,
                })?;
            let got = result.token.is_some();
            if got != entry.samples {
                let request_id = result.request_id;
                return Err(SchedulerError::TokenMismatch {
                    request_id,
                    expected: entry.samples,
                    got,
                });
            }
            if result.accepted > entry.drafts.len() {
                return Err(SchedulerError::AcceptedBeyondDrafts {
                    request_id: result.request_id,
                    accepted: result.accepted,
                    drafts: entry.drafts.len(),
                });
            }
        }
        // Cancelled requests need no result; every live one does.
        if let Some(missing) = in_flight.iter().find(|f| {
            self.requests.contains_key(&f.request_id) && !by_id.contains_key(&f.request_id)
        }) {
            return Err(SchedulerError::MissingResult {
                request_id: missing.request_id,
            });
        }
        let in_flight = self.in_flight.take().unwrap_or_default();
        let mut finished = Vec::new();
        for entry in in_flight {
            if let Some(result) = by_id.get(&entry.request_id) {
                finished.extend(self.apply(result, &entry.drafts)?);
            }
        }
        Ok(finished)
    }

    fn apply(
        &mut self,
        result: &StepResult,
        drafts: &[u32],
    ) -> Result<Option<Finished>, SchedulerError> {
        let id = result.request_id;
        let Some(request) = self.requests.get_mut(&id) else {
            // Cancelled after the plan went out.
            return Ok(None);
        };
        if let Some(token) = result.token {
            request.tokens.extend_from_slice(&drafts[..result.accepted]);
            request.tokens.push(token);
        }
        if !drafts.is_empty() {
            // KV stands for the decoded token and the accepted drafts; the rejected drafts'
            // slots are written over by the next step.
            request.num_computed = request.tokens.len() - 1;
            let max = request.drafts.as_ref().map_or(0, |d| d.max_draft);
            request.draft_len = if result.accepted == drafts.len() {
                (2 * drafts.len()).max(request.draft_len).min(max)
            } else {
                result.accepted + 1
            };
        }
        self.kv
            .cache_full_blocks(request.seq, &request.tokens, request.num_computed)?;
        let reason = if result.token.is_some() && result.stop {
            FinishReason::Stop
        } else if request.num_output() >= request.max_new_tokens {
            FinishReason::Length
        } else {
            return Ok(None);
        };
        let output = request.tokens[request.prompt_len..].to_vec();
        if let Some(tag) = &request.keep_prefix {
            self.kv.pin(request.seq, tag, request.prompt_len)?;
        }
        self.cancel(id)?;
        Ok(Some(Finished {
            request_id: id,
            reason,
            output,
        }))
    }

    fn request(&self, id: RequestId) -> Result<&Request, SchedulerError> {
        self.requests
            .get(&id)
            .ok_or(SchedulerError::UnknownRequest { request_id: id })
    }
}
