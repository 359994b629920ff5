//! The engine loop: one OS thread per model turning scheduler plans into forward passes.
//!
//! Each step: take new requests, drop cancelled or expired ones (their blocks are freed before
//! planning), plan, run one packed forward pass over every scheduled token, sample, stream, and
//! commit. A failing request is finished with an error; the loop itself never stops on one.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Instant;

use candle_core::Tensor;
use quorum_kernels::PagedKvStore;
use quorum_models::{BatchLayout, DecoderModel, ModelError};
use tokio::sync::mpsc::UnboundedSender;

use crate::detokenizer::Detokenizer;
use crate::device_attention::DevicePagedAttention;
use crate::device_kv::DeviceKvStore;
use crate::engine_error::{EngineError, StepError};
use crate::ids::RequestId;
use crate::logit_rows::{LogitRow, draws_on_device, logit_rows};
use crate::logits_constraint::LogitsConstraint;
use crate::paged_attention::{PagedAttention, SeqBlocks};
use crate::prefix_cache::CacheKey;
use crate::prompt_lookup::DraftSource;
use crate::request::{EngineEvent, FinishEvent, GenerateRequest, TokenEvent};
use crate::sampler::{DevicePolicy, Sampler};
use crate::scheduler::{NewRequest, Scheduler};
use crate::shared::{Command, Shared};
use crate::step::{StepPlan, StepResult};
use crate::step_pacer::StepPacer;
use crate::stop::{FinishReason, StopChecker};

/// Where the KV blocks live: host vectors that the CPU's attention kernel reads, or tensors on
/// the model's device (a GPU) that never leave it.
pub(crate) enum KvMemory {
    Host(PagedKvStore),
    Device(DeviceKvStore),
}

/// Per-request state the scheduler does not keep.
struct Active {
    choice: u32,
    /// Index of the request's LoRA adapter in the model.
    adapter: Option<usize>,
    tx: UnboundedSender<EngineEvent>,
    sampler: Sampler,
    stop: StopChecker,
    detok: Detokenizer,
    prompt: Vec<u32>,
    generated: Vec<u32>,
    submitted: Instant,
    /// The first engine step that computed the request's tokens: its prefill starts here.
    first_step: Option<Instant>,
    first_token: Option<Instant>,
    last_token: Option<Instant>,
    deadline: Option<Instant>,
    cached_tokens: Option<usize>,
    reason: Option<FinishReason>,
    error: Option<String>,
}

pub(crate) struct Runner {
    pub model: DecoderModel,
    pub store: KvMemory,
    pub scheduler: Scheduler,
    pub shared: Arc<Shared>,
    pub model_name: String,
    pub eos_ids: Vec<u32>,
    pub tokenizer: Arc<tokenizers::Tokenizer>,
    active: HashMap<RequestId, Active>,
    draining: bool,
    pacer: StepPacer,
    /// Prefix-cache identity of each hot-loaded adapter (`name#load`): KV computed under an
    /// unloaded adapter must never be served to a later adapter of the same name. Adapters
    /// loaded at start-up are keyed by their name alone.
    adapter_cache_keys: HashMap<String, String>,
    adapter_loads: u64,
    /// Draft tokens a greedy decode checks per step (0: no speculative decoding).
    max_draft_tokens: usize,
}

impl Runner {
    pub fn new(
        model: DecoderModel,
        store: KvMemory,
        scheduler: Scheduler,
        shared: Arc<Shared>,
        meta: (String, Vec<u32>, Arc<tokenizers::Tokenizer>),
        pacer: StepPacer,
        max_draft_tokens: usize,
    ) -> Self {
        Self {
            model,
            store,
            scheduler,
            shared,
            model_name: meta.0,
            eos_ids: meta.1,
            tokenizer: meta.2,
            active: HashMap::new(),
            draining: false,
            pacer,
            adapter_cache_keys: HashMap::new(),
            adapter_loads: 0,
            max_draft_tokens,
        }
    }

    /// Runs until shut down (or every handle is dropped) and no work is left.
    pub fn run(mut self, commands: Receiver<Command>) {
        loop {
            if !self.intake(&commands) {
                break;
            }
            self.reap();
            if let Err(e) = self.step() {
                tracing::error!(model = %self.model_name, error = %e, "engine step failed");
            }
            self.publish_stats();
        }
        tracing::info!(model = %self.model_name, "engine stopped");
    }

    /// Takes queued commands; blocks when idle. Returns false when the loop should end.
    fn intake(&mut self, commands: &Receiver<Command>) -> bool {
        if !self.scheduler.has_work() {
            if self.draining {
                return false;
            }
            match commands.recv() {
                Ok(cmd) => self.handle(cmd),
                Err(_) => return false,
            }
        }
        loop {
            match commands.try_recv() {
                Ok(cmd) => self.handle(cmd),
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => {
                    self.draining = true;
                    return true;
                }
            }
        }
    }

    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Shutdown => self.draining = true,
            Command::LoadAdapter { adapter, reply } => {
                let _ = reply.send(self.load_adapter(&adapter));
            }
            Command::UnloadAdapter { name, reply } => {
                let _ = reply.send(self.unload_adapter(&name));
            }
            Command::Add {
                id,
                choice,
                request,
                constraint,
                tx,
            } => self.add(id, choice, *request, constraint, tx),
        }
    }

    fn add(
        &mut self,
        id: RequestId,
        choice: u32,
        req: GenerateRequest,
        constraint: Option<Box<dyn LogitsConstraint>>,
        tx: UnboundedSender<EngineEvent>,
    ) {
        // Drafts are checked by sampling each position as a plain decode would, so any sampler
        // gives the same output with them; but a greedy one keeps many more of them than a
        // random one, and a grammar's mask per drafted token costs more than it saves.
        let drafts = (self.max_draft_tokens > 0 && req.params.is_greedy() && constraint.is_none())
            .then(|| DraftSource {
                hint: req.draft_hint.clone(),
                max_draft: self.max_draft_tokens,
            });
        let new = NewRequest {
            id,
            prompt: req.prompt_tokens.clone(),
            max_new_tokens: req.params.max_new_tokens as usize,
            drafts,
            keep_prefix: req.keep_prefix.clone(),
            cache_key: CacheKey::new(
                &self.model_name,
                req.adapter.as_deref().map(|name| {
                    self.adapter_cache_keys
                        .get(name)
                        .map_or(name, String::as_str)
                }),
            ),
        };
        let now = Instant::now();
        let adapter = match &req.adapter {
            None => Ok(None),
            // The handle checked the name; this only fails if the two disagree.
            Some(name) => self
                .model
                .adapters()
                .iter()
                .position(|a| a.name() == name)
                .map(Some)
                .ok_or_else(|| format!("unknown adapter `{name}`")),
        };
        let added = adapter.and_then(|a| {
            self.scheduler
                .add_request(new)
                .map(|()| a)
                .map_err(|e| e.to_string())
        });
        let adapter = match added {
            Ok(a) => a,
            Err(e) => {
                self.shared.release(1);
                let _ = tx.send(EngineEvent::Finished(FinishEvent {
                    choice,
                    reason: FinishReason::Error,
                    text: String::new(),
                    prompt_tokens: req.prompt_tokens.len(),
                    completion_tokens: 0,
                    cached_tokens: 0,
                    ttft: None,
                    total: now.elapsed(),
                    error: Some(e),
                    constrained: None,
                }));
                return;
            }
        };
        let mut sampler = Sampler::for_choice(&req.params, choice);
        if let Some(c) = constraint {
            sampler = sampler.with_constraint(c);
        }
        let active = Active {
            choice,
            adapter,
            sampler,
            stop: StopChecker::new(&req.params, &self.eos_ids, &[]),
            detok: Detokenizer::new(self.tokenizer.clone(), &req.prompt_tokens, true),
            prompt: req.prompt_tokens,
            generated: Vec::new(),
            submitted: now,
            first_step: None,
            first_token: None,
            last_token: None,
            deadline: req.deadline,
            cached_tokens: None,
            reason: None,
            error: None,
            tx,
        };
        self.active.insert(id, active);
    }

    /// Cancels requests whose receiver is gone or whose deadline passed, freeing their blocks
    /// before the next plan.
    fn load_adapter(&mut self, adapter: &quorum_weights::LoraAdapter) -> Result<(), EngineError> {
        if self
            .model
            .adapters()
            .iter()
            .any(|a| a.name() == adapter.name)
        {
            return Err(EngineError::AdapterExists {
                adapter: adapter.name.clone(),
            });
        }
        self.model.add_adapter(adapter)?;
        self.adapter_loads += 1;
        self.adapter_cache_keys.insert(
            adapter.name.clone(),
            format!("{}#{}", adapter.name, self.adapter_loads),
        );
        self.publish_adapters();
        tracing::info!(model = %self.model_name, adapter = %adapter.name, "adapter loaded");
        Ok(())
    }

    /// Refuses while any request (running or waiting) uses the adapter: its sequences hold the
    /// adapter's index, and a request cut off mid-answer would be worse than a retry.
    fn unload_adapter(&mut self, name: &str) -> Result<(), EngineError> {
        let Some(index) = self.model.adapters().iter().position(|a| a.name() == name) else {
            return Err(EngineError::UnknownAdapter {
                adapter: name.to_owned(),
            });
        };
        let users = self
            .active
            .values()
            .filter(|a| a.adapter == Some(index))
            .count();
        if users > 0 {
            return Err(EngineError::AdapterInUse {
                adapter: name.to_owned(),
                requests: users,
            });
        }
        let restacked = self.model.remove_adapter(name);
        for a in self.active.values_mut() {
            if let Some(i) = a.adapter.as_mut()
                && *i > index
            {
                *i -= 1;
            }
        }
        self.adapter_cache_keys.remove(name);
        self.publish_adapters();
        tracing::info!(model = %self.model_name, adapter = %name, "adapter unloaded");
        restacked?;
        Ok(())
    }

    fn publish_adapters(&self) {
        self.shared.set_adapters(
            self.model
                .adapters()
                .iter()
                .map(|a| a.name().to_string())
                .collect(),
        );
    }

    fn reap(&mut self) {
        let now = Instant::now();
        let doomed: Vec<(RequestId, bool)> = self
            .active
            .iter()
            .filter_map(|(id, a)| {
                if a.tx.is_closed() {
                    Some((*id, false))
                } else if a.deadline.is_some_and(|d| now >= d) {
                    Some((*id, true))
                } else {
                    None
                }
            })
            .collect();
        for (id, expired) in doomed {
            if let Err(e) = self.scheduler.cancel(id) {
                tracing::warn!(error = %e, "cancel failed");
            }
            if let Some(mut a) = self.active.remove(&id) {
                let error = expired.then(|| "deadline exceeded".to_string());
                self.finish(&mut a, FinishReason::Cancelled, error);
            }
        }
    }

    fn step(&mut self) -> Result<(), StepError> {
        self.scheduler.set_step_budget(self.pacer.budget());
        let plan = self.scheduler.plan_step()?;
        if plan.is_empty() {
            // Every plan is committed, even an empty one: the scheduler refuses a new plan while
            // one is outstanding (this once stalled the engine after cancellations).
            self.scheduler.commit(&[])?;
            return Ok(());
        }
        for c in &plan.copies {
            let (src, dst) = (c.src.index(), c.dst.index());
            match &mut self.store {
                KvMemory::Host(s) => s.copy_block(src, dst, c.num_tokens)?,
                KvMemory::Device(s) => s
                    .copy_block(src, dst, c.num_tokens)
                    .map_err(StepError::DeviceCopy)?,
            }
        }
        let started = Instant::now();
        let forward = self.forward(&plan);
        let queued = started.elapsed();
        self.pacer.observe(plan.num_tokens(), queued);
        match forward {
            Ok(logits) => {
                let results = self.sample(&plan, logits);
                // On a GPU the pass only queues its kernels and sampling waits for them: a step
                // whose queueing takes about as long as the whole step is bound by the host.
                tracing::debug!(
                    target: "quorum_engine::step_timing",
                    tokens = plan.num_tokens(),
                    seqs = plan.seqs.len(),
                    queued_us = queued.as_micros() as u64,
                    step_us = started.elapsed().as_micros() as u64,
                );
                let finished = self.scheduler.commit(&results)?;
                for f in finished {
                    if let Some(mut a) = self.active.remove(&f.request_id) {
                        let reason = a.reason.unwrap_or(f.reason);
                        let error = a.error.take();
                        self.finish(&mut a, reason, error);
                    }
                }
                Ok(())
            }
            Err(e) => {
                // The whole batch failed: finish every request in it, keep the engine alive.
                for s in &plan.seqs {
                    let _ = self.scheduler.cancel(s.request_id);
                    if let Some(mut a) = self.active.remove(&s.request_id) {
                        self.finish(&mut a, FinishReason::Error, Some(e.to_string()));
                    }
                }
                let results: Vec<StepResult> = Vec::new();
                let _ = self.scheduler.commit(&results);
                Err(e.into())
            }
        }
    }

    fn forward(&mut self, plan: &StepPlan) -> Result<Option<Tensor>, ModelError> {
        let block_size = self.scheduler.config().block_size;
        let mut tokens = Vec::with_capacity(plan.num_tokens());
        let mut chunks = Vec::with_capacity(plan.seqs.len());
        let mut seqs = Vec::with_capacity(plan.seqs.len());
        let mut queued = Vec::new();
        for (i, s) in plan.seqs.iter().enumerate() {
            tokens.extend_from_slice(&s.token_ids);
            chunks.push((i, s.start_position, s.num_tokens(), s.samples));
            seqs.push(SeqBlocks {
                slots: s
                    .slots
                    .iter()
                    .map(|sl| sl.flat(block_size) as usize)
                    .collect(),
                block_table: s.block_table.iter().map(|b| b.index()).collect(),
            });
            if let Some(a) = self.active.get_mut(&s.request_id)
                && a.cached_tokens.is_none()
            {
                // The request's first step: it waited from submission until now.
                a.cached_tokens = Some(s.start_position);
                a.first_step = Some(Instant::now());
                queued.push(a.submitted.elapsed());
            }
        }
        if !queued.is_empty() {
            let mut stats = self.shared.stats();
            queued
                .into_iter()
                .for_each(|d| stats.queue_time.observe_duration(d));
        }
        let adapters = plan
            .seqs
            .iter()
            .map(|s| self.active.get(&s.request_id).and_then(|a| a.adapter));
        let layout = BatchLayout::from_chunks(chunks)
            .with_adapters(adapters)
            .with_drafts(plan.seqs.iter().map(|s| s.drafts));
        let logits = match &mut self.store {
            KvMemory::Host(store) => {
                let mut attn = PagedAttention { store, seqs: &seqs };
                let model = &self.model;
                // The pass runs on one of rayon's workers, so that the kernels' parallel loops
                // start inside the pool (the worker takes its share and the other steals the
                // rest) instead of each loop being handed from this thread to the pool while
                // this thread sleeps: one hand-off a step instead of a few hundred.
                rayon::scope(|_| model.forward(&tokens, &layout, &mut attn))
            }
            KvMemory::Device(store) => {
                let mut attn = DevicePagedAttention::new(store, &seqs)
                    .every_chunk_paged(self.model.is_batch_invariant());
                self.model.forward(&tokens, &layout, &mut attn)
            }
        }?;
        Ok(Some(logits))
    }

    fn sample(&mut self, plan: &StepPlan, logits: Option<Tensor>) -> Vec<StepResult> {
        // Which logit rows are chosen where the logits are, and by what policy: one entry per
        // row, each sampling sequence giving one row per draft token and one before them.
        // Only a device draws sampled or masked rows, so only there does a sampler hand over a
        // draw and its constraint's mask.
        let on_device = logits.as_ref().is_some_and(draws_on_device);
        let vocab = logits
            .as_ref()
            .and_then(|l| l.dims2().ok())
            .map_or(0, |(_, v)| v);
        let draws: Vec<Option<DevicePolicy>> = {
            let mut by_id: HashMap<RequestId, &mut Active> =
                self.active.iter_mut().map(|(id, a)| (*id, a)).collect();
            let mut sampling: Vec<(usize, Option<&mut Active>)> = plan
                .seqs
                .iter()
                .filter(|s| s.samples)
                .map(|s| (s.drafts + 1, by_id.remove(&s.request_id)))
                .collect();
            let policy = |a: &mut Option<&mut Active>| match a {
                // Cancelled: its row is not read.
                None => Some(DevicePolicy::GREEDY),
                Some(a) if on_device => a.sampler.device_policy(&a.generated, vocab),
                Some(a) => a.sampler.is_plain_greedy().then_some(DevicePolicy::GREEDY),
            };
            let masks = sampling
                .iter()
                .filter(|(_, a)| a.as_ref().is_some_and(|a| a.sampler.is_constrained()))
                .count();
            // A grammar mask costs about a millisecond: two or more go in parallel.
            let policies: Vec<Option<DevicePolicy>> = if on_device && masks >= 2 {
                use rayon::prelude::*;
                sampling.par_iter_mut().map(|(_, a)| policy(a)).collect()
            } else {
                sampling.iter_mut().map(|(_, a)| policy(a)).collect()
            };
            // Drafts are only checked for greedy sequences, whose policy draws nothing.
            policies
                .into_iter()
                .zip(&sampling)
                .flat_map(|(p, (rows, _))| std::iter::repeat_n(p, *rows))
                .collect()
        };
        let rows: Vec<LogitRow> = match logits.map(|l| logit_rows(l, &draws)) {
            Some(Ok(rows)) => rows,
            Some(Err(e)) => {
                tracing::error!(error = %e, "reading logits failed");
                Vec::new()
            }
            None => Vec::new(),
        };
        let mut rows = rows.into_iter();
        let now = Instant::now();
        // Pair every sampling sequence with its row and its state. Disjoint borrows of the
        // active map, so that constrained sequences can be sampled on several threads.
        let mut by_id: HashMap<RequestId, &mut Active> =
            self.active.iter_mut().map(|(id, a)| (*id, a)).collect();
        let mut jobs: Vec<SampleJob<'_>> = plan
            .seqs
            .iter()
            .map(|s| {
                // One row per draft token and one before them.
                let job_rows = if s.samples {
                    rows.by_ref().take(s.drafts + 1).collect()
                } else {
                    Vec::new()
                };
                SampleJob {
                    request_id: s.request_id,
                    samples: s.samples,
                    active: if s.samples {
                        by_id.remove(&s.request_id)
                    } else {
                        None
                    },
                    rows: job_rows,
                    drafts: s.draft_tokens(),
                    outcome: None,
                }
            })
            .collect();
        let constrained = jobs
            .iter()
            .filter(|j| {
                j.active
                    .as_ref()
                    .is_some_and(|a| a.sampler.is_constrained())
            })
            .count();
        // A grammar mask costs about a millisecond; two or more of them go in parallel
        // (sampling is per sequence, so the outcome does not depend on the order).
        if constrained >= 2 {
            use rayon::prelude::*;
            jobs.par_iter_mut().for_each(|j| j.run(now));
        } else {
            jobs.iter_mut().for_each(|j| j.run(now));
        }

        let mut results = Vec::with_capacity(jobs.len());
        let mut latencies = Vec::new();
        let (mut drafted, mut accepted_total) = (0u64, 0u64);
        for j in jobs {
            drafted += j.drafts.len() as u64;
            let (token, accepted, stop) = match (j.samples, j.outcome) {
                // Nothing to sample yet (a prefill chunk that does not end the prompt).
                (false, _) => (None, 0, false),
                (true, Some(o)) => {
                    latencies.extend(o.latencies);
                    accepted_total += o.accepted as u64;
                    (Some(o.token), o.accepted, o.stop)
                }
                // Cancelled between plan and commit: the scheduler ignores its result.
                (true, None) => (Some(0), 0, true),
            };
            results.push(StepResult {
                request_id: j.request_id,
                token,
                accepted,
                stop,
            });
        }
        let mut stats = self.shared.stats();
        stats.draft_tokens += drafted;
        stats.draft_tokens_accepted += accepted_total;
        for latency in latencies {
            match latency {
                (true, d) => stats.ttft.observe_duration(d),
                (false, d) => stats.inter_token_latency.observe_duration(d),
            }
        }
        results
    }

    fn finish(&mut self, a: &mut Active, reason: FinishReason, error: Option<String>) {
        // Held-back text of an unmatched stop-string prefix, then any undecodable tail bytes.
        let mut released = a.stop.finish(reason).text;
        if reason != FinishReason::Stop {
            released.push_str(&a.detok.finish().unwrap_or_default());
        }
        let total = a.submitted.elapsed();
        let constrained = a.sampler.constraint_outcome().map(|failure| {
            if let Some(why) = failure {
                tracing::warn!(model = %self.model_name, reason = why, "grammar constraint gave up; the rest was decoded freely");
            }
            failure.is_none()
        });
        let _ = a.tx.send(EngineEvent::Finished(FinishEvent {
            choice: a.choice,
            reason,
            text: released,
            prompt_tokens: a.prompt.len(),
            completion_tokens: a.generated.len(),
            cached_tokens: a.cached_tokens.unwrap_or(0),
            ttft: a.first_token.map(|t| t - a.submitted),
            total,
            error,
            constrained,
        }));
        self.shared.release(1);
        let adapter = a
            .adapter
            .and_then(|i| self.model.adapters().get(i))
            .map_or_else(String::new, |w| w.name().to_owned());
        let mut stats = self.shared.stats();
        stats.requests_finished += 1;
        stats.generation_tokens_total += a.generated.len() as u64;
        stats.prompt_tokens_total += a.prompt.len() as u64;
        stats.prompt_tokens.observe(a.prompt.len() as f64);
        stats.generation_tokens.observe(a.generated.len() as f64);
        // Prefill: from the first step to the first token; decode: from there to the last.
        if let (Some(step), Some(first)) = (a.first_step, a.first_token) {
            stats
                .prefill_time
                .observe_duration(first.saturating_duration_since(step));
            if let Some(last) = a.last_token {
                stats
                    .decode_time
                    .observe_duration(last.saturating_duration_since(first));
            }
        }
        *stats.finished_by_reason.entry(reason.as_str()).or_insert(0) += 1;
        *stats.finished_by_adapter.entry(adapter).or_insert(0) += 1;
    }

    fn publish_stats(&mut self) {
        let s = self.scheduler.stats();
        let mut stats = self.shared.stats();
        stats.running = s.running;
        stats.waiting = s.waiting;
        stats.kv_blocks_used = s.blocks_used;
        stats.kv_blocks_total = s.blocks_total;
        stats.kv_blocks_pinned = s.blocks_pinned;
        stats.prefix_cache_queries = s.prefix_cache.queried_tokens;
        stats.prefix_cache_hits = s.prefix_cache.hit_tokens;
        stats.preemptions = s.preemptions;
        stats.steps += 1;
    }
}

/// One sequence's share of a step's sampling.
struct SampleJob<'a> {
    request_id: RequestId,
    samples: bool,
    active: Option<&'a mut Active>,
    /// Logits: one row per draft token and one before them.
    rows: Vec<LogitRow>,
    /// The draft tokens the step checked.
    drafts: &'a [u32],
    outcome: Option<SampleDone>,
}

struct SampleDone {
    /// The last token sampled.
    token: u32,
    /// Draft tokens sampled before it.
    accepted: usize,
    stop: bool,
    /// (is the first token, time since submit or since the previous token) per token, when
    /// known.
    latencies: Vec<(bool, std::time::Duration)>,
}

impl SampleJob<'_> {
    /// Samples row after row as one decode step after another would: each row saw the drafts
    /// before it as context, so it is the row a plain decode would have computed as long as
    /// those drafts are the tokens sampled. The first token that differs from its draft (or
    /// ends the sequence) is the last one taken.
    fn run(&mut self, now: Instant) {
        let Some(a) = self.active.as_deref_mut() else {
            return;
        };
        let mut latencies = Vec::new();
        let mut rows = std::mem::take(&mut self.rows).into_iter();
        let mut accepted = 0;
        loop {
            match (a.first_token, a.last_token) {
                (None, _) => latencies.push((true, now - a.submitted)),
                (Some(_), Some(p)) => latencies.push((false, now - p)),
                (Some(_), None) => {}
            }
            let (token, stop) = sample_one(a, rows.next(), now);
            let drafted = self.drafts.get(accepted);
            if stop || drafted != Some(&token) {
                self.outcome = Some(SampleDone {
                    token,
                    accepted,
                    stop,
                    latencies,
                });
                return;
            }
            accepted += 1;
        }
    }
}

/// Samples one sequence's next token, streams it, and says whether it stops.
fn sample_one(a: &mut Active, row: Option<LogitRow>, now: Instant) -> (u32, bool) {
    let sampled = match row {
        Some(LogitRow::Values(mut row)) => a.sampler.sample(&mut row, &a.generated, &a.prompt),
        Some(LogitRow::Chosen { token, vocab }) => a.sampler.chosen(token, vocab),
        None => {
            a.reason = Some(FinishReason::Error);
            a.error = Some("no logits for this sequence".into());
            return (0, true);
        }
    };
    match sampled {
        Ok(out) => {
            a.generated.push(out.token);
            a.first_token.get_or_insert(now);
            a.last_token = Some(now);
            let delta = a.detok.step(out.token).unwrap_or_default();
            let step = a.stop.step(out.token, &delta);
            let _ = a.tx.send(EngineEvent::Token(TokenEvent {
                choice: a.choice,
                token_id: out.token,
                text: step.text,
                logprob: out.logprob,
                candidate_logprobs: out.candidate_logprobs,
            }));
            match step.finish {
                Some(FinishReason::Length) => (out.token, false),
                Some(r) => {
                    a.reason = Some(r);
                    (out.token, true)
                }
                None => (out.token, false),
            }
        }
        Err(e) => {
            a.reason = Some(FinishReason::Error);
            a.error = Some(e.to_string());
            (0, true)
        }
    }
}
