//! Property tests: random workloads driven to completion through `plan_step`/`commit`, with
//! the scheduler's promises checked after every call.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use super::tests::request;
use super::*;
use crate::ids::BlockId;

/// A workload: when each request arrives, its prompt and its output length.
#[derive(Debug, Clone)]
struct Arrival {
    step: usize,
    prompt: Vec<u32>,
    max_new_tokens: usize,
}

/// Prompts drawn from a few shared prefixes plus a random tail, so prefix hits are common.
fn arrival() -> impl Strategy<Value = Arrival> {
    let prefixes = prop_oneof![
        Just(vec![]),
        Just(vec![7u32; 8]),
        Just((0..13).collect::<Vec<u32>>())
    ];
    (
        0usize..24,
        prefixes,
        proptest::collection::vec(0u32..4, 1..8),
        1usize..16,
    )
        .prop_map(|(step, prefix, tail, max_new_tokens)| Arrival {
            step,
            prompt: [prefix, tail].concat(),
            max_new_tokens,
        })
}

fn scheduler_config() -> impl Strategy<Value = SchedulerConfig> {
    (
        prop_oneof![Just(2usize), Just(4)],
        6u32..32,
        1usize..24,
        1usize..6,
        any::<bool>(),
        0usize..40,
    )
        .prop_map(
            |(block_size, num_blocks, max_batched_tokens, max_running_seqs, prefix, pinned)| {
                SchedulerConfig {
                    block_size,
                    num_blocks,
                    max_batched_tokens,
                    max_running_seqs,
                    max_waiting: 64,
                    max_model_len: 64,
                    enable_prefix_caching: prefix,
                    // Up to more than the whole pool: pins must give way to every request.
                    max_pinned_blocks: pinned,
                }
            },
        )
}

/// The token a deterministic (greedy) model samples at output index `i` of request `id`:
/// recomputing after preemption must reproduce the same output.
fn sampled(id: RequestId, i: usize) -> u32 {
    (id.0 as u32).wrapping_mul(31).wrapping_add(i as u32) % 50
}

/// A small deterministic generator for the driver's random choices.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Every block's refcount equals the number of live block tables holding it, and the pool's
/// used count is the number of distinct held blocks: no leak, no block in two places unshared.
fn check_kv(sched: &Scheduler) {
    let mut holders: HashMap<BlockId, u32> = HashMap::new();
    for block in sched.kv.pinned_block_ids() {
        *holders.entry(block).or_default() += 1;
    }
    assert!(sched.kv.pinned_blocks() <= sched.config().max_pinned_blocks);
    for request in sched.requests.values() {
        if let Ok(blocks) = sched.kv.blocks(request.seq) {
            for &b in blocks {
                *holders.entry(b).or_default() += 1;
            }
        }
    }
    let pool = sched.kv.pool();
    for b in 0..pool.num_total() {
        let block = BlockId(b);
        let held = holders.get(&block).copied().unwrap_or(0);
        assert_eq!(pool.refcount(block), Ok(held), "refcount of {block}");
    }
    assert_eq!(pool.num_used(), holders.len());
    for id in &sched.waiting {
        let seq = sched.requests[id].seq;
        assert!(!sched.kv.contains(seq), "waiting {id} holds blocks");
    }
}

/// The per-step promises: budget, running limit, one slot per token, slots from the table.
fn check_plan(sched: &Scheduler, plan: &StepPlan) {
    let cfg = sched.config();
    assert!(plan.num_tokens() <= cfg.max_batched_tokens);
    assert!(plan.seqs.len() <= cfg.max_running_seqs);
    assert!(sched.running.len() <= cfg.max_running_seqs);
    let mut slots = HashSet::new();
    let mut ids = HashSet::new();
    for seq in &plan.seqs {
        assert!(
            ids.insert(seq.request_id),
            "{} scheduled twice",
            seq.request_id
        );
        assert!(seq.num_tokens() > 0);
        assert_eq!(seq.slots.len(), seq.num_tokens());
        if seq.drafts > 0 {
            // Only a decode drafts, and only in a small step.
            assert!(seq.samples);
            assert_eq!(seq.num_tokens() - seq.drafts, 1);
            assert!(plan.num_tokens() <= DRAFT_STEP_TOKENS);
        }
        for (i, slot) in seq.slots.iter().enumerate() {
            let pos = seq.start_position + i;
            assert_eq!(slot.block, seq.block_table[pos / cfg.block_size]);
            assert_eq!(slot.offset as usize, pos % cfg.block_size);
            assert!(
                slots.insert(slot.flat(cfg.block_size)),
                "slot assigned twice"
            );
        }
    }
}

struct Outcome {
    finished: Vec<Finished>,
    cancelled: usize,
    accepted: HashMap<RequestId, usize>,
}

/// Drives the workload: requests arrive on their step, the runner samples `sampled` tokens,
/// stops with probability `stop_per_mille`, and the client cancels with `cancel_per_mille`.
fn drive(
    sched: &mut Scheduler,
    arrivals: &[Arrival],
    seed: u64,
    stop_per_mille: u64,
    cancel_per_mille: u64,
) -> Outcome {
    let mut rng = Rng(seed | 1);
    let mut out = Outcome {
        finished: Vec::new(),
        cancelled: 0,
        accepted: HashMap::new(),
    };
    for step in 0..2000 {
        for (i, a) in arrivals.iter().enumerate().filter(|(_, a)| a.step == step) {
            let id = RequestId(i as u64);
            let mut new = request(i as u64, a.prompt.clone(), a.max_new_tokens);
            // Every other request drafts from a hint that is its true output, so drafts are
            // proposed and (below) kept or rejected at random.
            if i % 2 == 1 {
                let hint = a.prompt.last().copied().into_iter();
                let output = (0..a.max_new_tokens).map(|j| sampled(id, j));
                new.drafts = Some(DraftSource {
                    hint: hint.chain(output).collect(),
                    max_draft: 3,
                });
            }
            // Every third request pins its prompt under one of two tags, replacing the other
            // requests' pins and holding blocks that later requests may need.
            if i % 3 == 0 {
                new.keep_prefix = Some(format!("tag{}", i % 2));
            }
            if sched.add_request(new).is_ok() {
                out.accepted.insert(RequestId(i as u64), a.max_new_tokens);
            }
        }
        let plan = sched.plan_step().expect("plan");
        check_plan(sched, &plan);
        check_kv(sched);
        if rng.below(1000) < cancel_per_mille {
            let live: Vec<RequestId> = sched.requests.keys().copied().collect();
            if !live.is_empty() {
                let victim = live[rng.below(live.len() as u64) as usize];
                assert_eq!(sched.cancel(victim), Ok(true));
                out.cancelled += 1;
                // Cancelling frees the request's blocks at once.
                check_kv(sched);
            }
        }
        let results: Vec<StepResult> = plan
            .seqs
            .iter()
            .map(|s| {
                // Output tokens so far; only read for the final chunk, which reaches past the prompt.
                let num_output = (s.start_position + s.num_tokens() - s.drafts)
                    .saturating_sub(sched_prompt_len(sched, s));
                // Drafts that are the true next tokens may be kept, up to a random cut.
                let right = s
                    .draft_tokens()
                    .iter()
                    .enumerate()
                    .take_while(|(j, d)| **d == sampled(s.request_id, num_output + j))
                    .count();
                let accepted = right.min(rng.below(s.drafts as u64 + 1) as usize);
                StepResult {
                    request_id: s.request_id,
                    accepted,
                    token: s
                        .samples
                        .then(|| sampled(s.request_id, num_output + accepted)),
                    stop: rng.below(1000) < stop_per_mille,
                }
            })
            .collect();
        out.finished.extend(sched.commit(&results).expect("commit"));
        check_kv(sched);
        if step > 12 && !sched.has_work() {
            break;
        }
    }
    out
}

/// Prompt length of a planned sequence (0 if it was cancelled meanwhile; its result is
/// ignored then).
fn sched_prompt_len(sched: &Scheduler, s: &ScheduledSeq) -> usize {
    sched
        .requests
        .get(&s.request_id)
        .map_or(0, |r| r.prompt_len)
}

fn check_outcome(sched: &mut Scheduler, out: &Outcome) {
    assert!(!sched.has_work(), "requests left after the driver loop");
    assert_eq!(out.finished.len() + out.cancelled, out.accepted.len());
    for f in &out.finished {
        let max_new = out.accepted[&f.request_id];
        match f.reason {
            FinishReason::Length => assert_eq!(f.output.len(), max_new),
            FinishReason::Stop => assert!(f.output.len() <= max_new),
            other => panic!("the scheduler finished a request with {other:?}"),
        }
        let expected: Vec<u32> = (0..f.output.len())
            .map(|i| sampled(f.request_id, i))
            .collect();
        assert_eq!(f.output, expected);
    }
    // Once everything is done only pins hold blocks; released, every block is free again.
    let pinned: HashSet<BlockId> = sched.kv.pinned_block_ids().collect();
    assert_eq!(sched.stats().blocks_used, pinned.len());
    while sched.kv.unpin_oldest().expect("unpin") {}
    assert_eq!(sched.stats().blocks_used, 0);
    assert!(sched.kv.pool().num_free() == sched.kv.pool().num_total() as usize);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_workloads_respect_limits_and_all_finish(
        cfg in scheduler_config(),
        arrivals in proptest::collection::vec(arrival(), 1..12),
        seed in any::<u64>(),
        stop in 0u64..100,
        cancel in 0u64..100,
    ) {
        let mut sched = Scheduler::new(cfg).expect("scheduler");
        let out = drive(&mut sched, &arrivals, seed, stop, cancel);
        check_outcome(&mut sched, &out);
    }

    /// Six blocks of two tokens cannot hold four growing requests: preemption must happen,
    /// and every preempted request still produces all its tokens, the same ones.
    #[test]
    fn preempted_requests_complete_with_the_same_tokens(
        prompts in proptest::collection::vec(proptest::collection::vec(0u32..100, 3..6), 4),
        batched in 4usize..16,
    ) {
        let cfg = SchedulerConfig {
            block_size: 2,
            num_blocks: 6,
            max_batched_tokens: batched,
            max_running_seqs: 4,
            max_waiting: 8,
            max_model_len: 12,
            enable_prefix_caching: true,
            max_pinned_blocks: 0,
        };
        let mut sched = Scheduler::new(cfg).expect("scheduler");
        let arrivals: Vec<Arrival> = prompts
            .into_iter()
            .map(|prompt| Arrival { step: 0, max_new_tokens: 12 - prompt.len(), prompt })
            .collect();
        let out = drive(&mut sched, &arrivals, 1, 0, 0);
        check_outcome(&mut sched, &out);
        prop_assert!(sched.stats().preemptions > 0);
        prop_assert_eq!(out.finished.len(), 4);
    }

    /// A request's first step starts right after the full blocks it shares with an earlier
    /// request's prompt, never at its own end.
    #[test]
    fn prefix_hit_skips_exactly_the_cached_full_blocks(
        first in proptest::collection::vec(0u32..2, 1..20),
        second in proptest::collection::vec(0u32..2, 1..20),
        block_size in prop_oneof![Just(2usize), Just(4)],
    ) {
        let cfg = SchedulerConfig { block_size, num_blocks: 32, ..super::tests::config() };
        let mut sched = Scheduler::new(cfg).expect("scheduler");
        sched.add_request(request(1, first.clone(), 1)).expect("add");
        let plan = sched.plan_step().expect("plan");
        let done = StepResult { request_id: RequestId(1), token: Some(99), accepted: 0, stop: false };
        prop_assert_eq!(plan.seqs.len(), 1);
        sched.commit(&[done]).expect("commit");
        sched.add_request(request(2, second.clone(), 1)).expect("add");
        let plan = sched.plan_step().expect("plan");
        let common = first.iter().zip(&second).take_while(|(a, b)| a == b).count();
        let cached_blocks = (common / block_size).min((second.len() - 1) / block_size);
        prop_assert_eq!(plan.seqs[0].start_position, cached_blocks * block_size);
        prop_assert_eq!(plan.seqs[0].num_tokens(), second.len() - cached_blocks * block_size);
        prop_assert_eq!(sched.stats().prefix_cache.hit_blocks, cached_blocks as u64);
    }
}
