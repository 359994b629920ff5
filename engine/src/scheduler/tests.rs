//! Unit tests of the scheduler: one behaviour each, on small hand-checked workloads.

use super::*;
use crate::ids::BlockId;

const BS: usize = 4;

pub(super) fn config() -> SchedulerConfig {
    SchedulerConfig {
        block_size: BS,
        num_blocks: 16,
        max_batched_tokens: 32,
        max_running_seqs: 8,
        max_waiting: 8,
        max_model_len: 64,
        enable_prefix_caching: true,
        max_pinned_blocks: 4,
    }
}

pub(super) fn request(id: u64, prompt: Vec<u32>, max_new_tokens: usize) -> NewRequest {
    NewRequest {
        id: RequestId(id),
        prompt,
        max_new_tokens,
        cache_key: CacheKey::new("m", None),
        drafts: None,
        keep_prefix: None,
    }
}

/// The runner's answer to a plan: token 100 + position for every sampling sequence.
fn results(plan: &StepPlan) -> Vec<StepResult> {
    plan.seqs
        .iter()
        .map(|s| StepResult {
            request_id: s.request_id,
            accepted: 0,
            token: s
                .samples
                .then_some(100 + (s.start_position + s.num_tokens()) as u32),
            stop: false,
        })
        .collect()
}

fn step(sched: &mut Scheduler) -> (StepPlan, Vec<Finished>) {
    let plan = sched.plan_step().expect("plan");
    let finished = sched.commit(&results(&plan)).expect("commit");
    (plan, finished)
}

fn summary(plan: &StepPlan) -> Vec<(u64, usize, usize, bool)> {
    plan.seqs
        .iter()
        .map(|s| (s.request_id.0, s.start_position, s.num_tokens(), s.samples))
        .collect()
}

#[test]
fn invalid_requests_are_refused_at_once() {
    let mut sched = Scheduler::new(config()).expect("scheduler");
    let err = |r| sched.clone().add_request(r).expect_err("refused");
    assert_eq!(
        err(request(1, vec![], 4)),
        SchedulerError::EmptyPrompt {
            request_id: RequestId(1)
        }
    );
    assert_eq!(
        err(request(1, vec![1], 0)),
        SchedulerError::NoNewTokens {
            request_id: RequestId(1)
        }
    );
    assert_eq!(
        err(request(1, vec![1; 60], 5)),
        SchedulerError::PromptTooLong {
            n_tokens: 65,
            max: 64
        }
    );
    let mut small = Scheduler::new(SchedulerConfig {
        num_blocks: 2,
        ..config()
    })
    .expect("scheduler");
    assert_eq!(
        small.add_request(request(1, vec![1; 6], 3)),
        Err(SchedulerError::ExceedsKvCapacity {
            n_tokens: 9,
            capacity: 8
        })
    );
    sched.add_request(request(1, vec![1], 1)).expect("accepted");
    assert_eq!(
        sched.add_request(request(1, vec![1], 1)),
        Err(SchedulerError::DuplicateRequest {
            request_id: RequestId(1)
        })
    );
    assert_eq!(
        Scheduler::new(SchedulerConfig {
            max_batched_tokens: 0,
            ..config()
        })
        .err(),
        Some(SchedulerError::InvalidConfig {
            field: "max_batched_tokens"
        })
    );
}

#[test]
fn a_full_waiting_queue_refuses_new_requests() {
    let mut sched = Scheduler::new(SchedulerConfig {
        max_waiting: 2,
        ..config()
    })
    .expect("scheduler");
    sched.add_request(request(1, vec![1], 1)).expect("first");
    sched.add_request(request(2, vec![1], 1)).expect("second");
    let err = sched.add_request(request(3, vec![1], 1)).expect_err("full");
    assert_eq!(err, SchedulerError::QueueFull { max_waiting: 2 });
    assert_eq!(err.kind(), "queue_full");
    // Admission drains the queue and makes room again.
    step(&mut sched);
    sched
        .add_request(request(3, vec![1], 1))
        .expect("room again");
}

#[test]
fn prefill_then_decode_with_slots_from_the_block_table() {
    let mut sched = Scheduler::new(config()).expect("scheduler");
    sched
        .add_request(request(1, (0..6).collect(), 3))
        .expect("add");
    let (plan, _) = step(&mut sched);
    assert_eq!(summary(&plan), vec![(1, 0, 6, true)]);
    let seq = &plan.seqs[0];
    assert_eq!(seq.block_table, vec![BlockId(0), BlockId(1)]);
    let flat: Vec<u64> = seq.slots.iter().map(|s| s.flat(BS)).collect();
    assert_eq!(flat, vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(seq.token_ids, vec![0, 1, 2, 3, 4, 5]);

    let (plan, _) = step(&mut sched);
    assert_eq!(summary(&plan), vec![(1, 6, 1, true)]);
    // The decode computes the token sampled last step.
    assert_eq!(plan.seqs[0].token_ids, vec![106]);
    let (_, finished) = step(&mut sched);
    assert_eq!(
        finished,
        vec![Finished {
            request_id: RequestId(1),
            reason: FinishReason::Length,
            output: vec![106, 107, 108]
        }]
    );
    assert!(!sched.has_work());
    assert_eq!(sched.stats().blocks_used, 0);
}

#[test]
fn long_prompts_are_prefilled_in_chunks_within_the_budget() {
    let mut sched = Scheduler::new(SchedulerConfig {
        max_batched_tokens: 4,
        ..config()
    })
    .expect("s");
    sched
        .add_request(request(1, (0..10).collect(), 2))
        .expect("add");
    let chunks: Vec<_> = (0..3).flat_map(|_| summary(&step(&mut sched).0)).collect();
    assert_eq!(
        chunks,
        vec![(1, 0, 4, false), (1, 4, 4, false), (1, 8, 2, true)]
    );
}

#[test]
fn running_requests_spend_the_budget_before_waiting_ones() {
    let mut sched = Scheduler::new(SchedulerConfig {
        max_batched_tokens: 8,
        ..config()
    })
    .expect("s");
    sched
        .add_request(request(1, (0..6).collect(), 4))
        .expect("add");
    step(&mut sched);
    sched
        .add_request(request(2, (100..120).collect(), 4))
        .expect("add");
    sched
        .add_request(request(3, (0..3).collect(), 4))
        .expect("add");
    // Request 1 decodes, request 2 gets the other 7 tokens, request 3 waits its turn.
    let (plan, _) = step(&mut sched);
    assert_eq!(summary(&plan), vec![(1, 6, 1, true), (2, 0, 7, false)]);
    assert_eq!(sched.stats().waiting, 1);
}

#[test]
fn the_running_limit_holds_back_admission() {
    let mut sched = Scheduler::new(SchedulerConfig {
        max_running_seqs: 2,
        ..config()
    })
    .expect("s");
    for id in 1..=3 {
        sched
            .add_request(request(id, vec![id as u32; 3], 2))
            .expect("add");
    }
    let (plan, _) = step(&mut sched);
    assert_eq!(plan.seqs.len(), 2);
    assert_eq!((sched.stats().running, sched.stats().waiting), (2, 1));
    step(&mut sched);
    // Both finish by length; the third request is admitted in the next step.
    let (plan, _) = step(&mut sched);
    assert_eq!(summary(&plan), vec![(3, 0, 3, true)]);
}

#[test]
fn a_prefix_hit_skips_the_cached_full_blocks() {
    let mut sched = Scheduler::new(config()).expect("scheduler");
    let schema: Vec<u32> = (0..10).collect();
    sched
        .add_request(request(1, schema.clone(), 1))
        .expect("add");
    step(&mut sched);
    // Same schema, another question: the two full schema blocks are reused.
    sched
        .add_request(request(2, [schema.clone(), vec![50, 51]].concat(), 1))
        .expect("add");
    let (plan, _) = step(&mut sched);
    assert_eq!(summary(&plan), vec![(2, 8, 4, true)]);
    assert_eq!(plan.seqs[0].block_table[..2], [BlockId(0), BlockId(1)]);
    // The same prompt again, block-aligned: the last block is recomputed for its logits.
    sched
        .add_request(request(3, schema[..8].to_vec(), 1))
        .expect("add");
    let (plan, _) = step(&mut sched);
    assert_eq!(summary(&plan), vec![(3, 4, 4, true)]);
    let stats = sched.stats().prefix_cache;
    assert_eq!(
        (stats.lookups, stats.hit_blocks, stats.hit_tokens),
        (3, 3, 12)
    );
    assert_eq!(stats.queried_tokens, 30);
}

#[test]
fn a_kept_prefix_outlives_other_prompts_and_gives_way_to_a_request_that_needs_it() {
    // Six blocks, four of which pins may hold.
    let cfg = SchedulerConfig {
        num_blocks: 6,
        ..config()
    };
    let mut sched = Scheduler::new(cfg).expect("scheduler");
    let schema: Vec<u32> = (0..10).collect();
    let mut warm = request(1, schema.clone(), 1);
    warm.keep_prefix = Some("db".into());
    sched.add_request(warm).expect("add");
    step(&mut sched);
    assert_eq!(
        (sched.stats().blocks_pinned, sched.stats().blocks_used),
        (2, 2)
    );
    // Other prompts that take every free block do not evict the pinned two.
    sched
        .add_request(request(2, (100..115).collect(), 1))
        .expect("add");
    step(&mut sched);
    sched
        .add_request(request(3, [schema.clone(), vec![50, 51]].concat(), 1))
        .expect("add");
    let (plan, _) = step(&mut sched);
    assert_eq!(summary(&plan), vec![(3, 8, 4, true)]);
    assert_eq!(plan.seqs[0].block_table[..2], [BlockId(0), BlockId(1)]);
    // A request that needs all six blocks takes the pin back instead of waiting forever.
    sched
        .add_request(request(4, (200..223).collect(), 1))
        .expect("add");
    let (plan, finished) = step(&mut sched);
    assert_eq!(summary(&plan), vec![(4, 0, 23, true)]);
    assert_eq!(finished.len(), 1);
    assert_eq!(sched.stats().blocks_pinned, 0);
    assert_eq!(sched.stats().blocks_used, 0);
}

#[test]
fn memory_pressure_preempts_the_latest_arrival_which_recomputes() {
    // Three blocks: two requests of 4-token prompts fit until both need a second block.
    let cfg = SchedulerConfig {
        num_blocks: 3,
        enable_prefix_caching: false,
        ..config()
    };
    let mut sched = Scheduler::new(cfg).expect("scheduler");
    sched.add_request(request(1, vec![1; 4], 4)).expect("add");
    sched.add_request(request(2, vec![2; 4], 4)).expect("add");
    step(&mut sched);
    // Request 1 takes the third block for its first decode; request 2 then finds none.
    let (plan, _) = step(&mut sched);
    assert_eq!(plan.preempted, vec![RequestId(2)]);
    assert_eq!(summary(&plan), vec![(1, 4, 1, true)]);
    assert_eq!(sched.stats().preemptions, 1);
    assert_eq!(sched.stats().waiting, 1);
    let mut outputs = Vec::new();
    let mut recomputed = false;
    for _ in 0..10 {
        let (plan, finished) = step(&mut sched);
        let recompute = plan
            .seqs
            .iter()
            .find(|s| s.request_id == RequestId(2) && s.start_position == 0);
        if let Some(s) = recompute {
            // The recompute covers the prompt and the token sampled before preemption.
            assert_eq!(s.token_ids, vec![2, 2, 2, 2, 104]);
            recomputed = true;
        }
        outputs.extend(finished);
    }
    assert!(recomputed);
    assert_eq!(outputs.len(), 2);
    assert!(
        outputs
            .iter()
            .all(|f| f.output.len() == 4 && f.reason == FinishReason::Length)
    );
    assert_eq!(sched.stats().blocks_used, 0);
}

#[test]
fn cancel_frees_blocks_immediately_and_ignores_the_late_result() {
    let mut sched = Scheduler::new(config()).expect("scheduler");
    sched
        .add_request(request(1, (0..9).collect(), 4))
        .expect("add");
    sched
        .add_request(request(2, (0..2).collect(), 4))
        .expect("add");
    let plan = sched.plan_step().expect("plan");
    assert_eq!(sched.stats().blocks_used, 4);
    assert_eq!(sched.cancel(RequestId(1)), Ok(true));
    assert_eq!(sched.stats().blocks_used, 1);
    assert_eq!(sched.cancel(RequestId(1)), Ok(false));
    sched
        .commit(&results(&plan))
        .expect("commit ignores the cancelled request");
    let (plan, _) = step(&mut sched);
    assert_eq!(summary(&plan), vec![(2, 2, 1, true)]);
    // A waiting request can be cancelled too.
    sched.add_request(request(3, vec![3], 1)).expect("add");
    assert_eq!(sched.cancel(RequestId(3)), Ok(true));
    assert_eq!(sched.stats().waiting, 0);
}

#[test]
fn stop_ends_a_request_early() {
    let mut sched = Scheduler::new(config()).expect("scheduler");
    sched.add_request(request(1, vec![1, 2], 10)).expect("add");
    sched.plan_step().expect("plan");
    let stop = StepResult {
        request_id: RequestId(1),
        accepted: 0,
        token: Some(7),
        stop: true,
    };
    let finished = sched.commit(&[stop]).expect("commit");
    assert_eq!(
        finished,
        vec![Finished {
            request_id: RequestId(1),
            reason: FinishReason::Stop,
            output: vec![7]
        }]
    );
}

#[test]
fn malformed_commits_are_rejected_and_leave_the_plan_in_flight() {
    let mut sched = Scheduler::new(SchedulerConfig {
        max_batched_tokens: 4,
        ..config()
    })
    .expect("s");
    assert_eq!(sched.commit(&[]), Err(SchedulerError::NoPlanPending));
    sched
        .add_request(request(1, (0..6).collect(), 2))
        .expect("add");
    let plan = sched.plan_step().expect("plan");
    assert_eq!(sched.plan_step(), Err(SchedulerError::PlanPending));
    let with_token = StepResult {
        request_id: RequestId(1),
        accepted: 0,
        token: Some(1),
        stop: false,
    };
    assert_eq!(
        sched.commit(&[with_token]),
        Err(SchedulerError::TokenMismatch {
            request_id: RequestId(1),
            expected: false,
            got: true
        })
    );
    assert_eq!(
        sched.commit(&[]),
        Err(SchedulerError::MissingResult {
            request_id: RequestId(1)
        })
    );
    let stranger = StepResult {
        request_id: RequestId(9),
        accepted: 0,
        token: None,
        stop: false,
    };
    assert_eq!(
        sched.commit(&[stranger]),
        Err(SchedulerError::NotInPlan {
            request_id: RequestId(9)
        })
    );
    sched
        .commit(&results(&plan))
        .expect("the right commit still applies");
}

#[test]
fn a_prompt_being_prefilled_is_computed_once_for_its_twins() {
    let mut sched = Scheduler::new(config()).expect("scheduler");
    // Two samples of one 10-token prompt (two full blocks and a partial one) and an unrelated
    // request behind them.
    let prompt: Vec<u32> = (1..=10).collect();
    sched
        .add_request(request(1, prompt.clone(), 2))
        .expect("add");
    sched.add_request(request(2, prompt, 2)).expect("add");
    sched
        .add_request(request(3, vec![50, 51, 52], 2))
        .expect("add");
    let (first, _) = step(&mut sched);
    // The twin waits; the unrelated request is not held up behind it.
    assert_eq!(summary(&first), [(1, 0, 10, true), (3, 0, 3, true)]);
    let (second, _) = step(&mut sched);
    // Now the twin starts from the cached two blocks and computes only the partial one.
    assert!(
        summary(&second).contains(&(2, 8, 2, true)),
        "{:?}",
        summary(&second)
    );
}

#[test]
fn a_running_prefill_leaves_half_the_step_to_waiting_requests() {
    let mut sched = Scheduler::new(config()).expect("scheduler");
    sched.set_step_budget(16);
    sched
        .add_request(request(1, (0..40).collect(), 1))
        .expect("add");
    // Alone, the long prompt takes the whole budget.
    assert_eq!(summary(&step(&mut sched).0), [(1, 0, 16, false)]);
    sched
        .add_request(request(2, vec![7, 8, 9], 1))
        .expect("add");
    // With a request waiting, it takes half and the short one is admitted beside it.
    assert_eq!(
        summary(&step(&mut sched).0),
        [(1, 16, 8, false), (2, 0, 3, true)]
    );
    // The budget is clamped to `max_batched_tokens`.
    sched.set_step_budget(1000);
    assert_eq!(summary(&step(&mut sched).0), [(1, 24, 16, true)]);
}

fn drafting(id: u64, prompt: Vec<u32>, max_new_tokens: usize, hint: Vec<u32>) -> NewRequest {
    NewRequest {
        drafts: Some(DraftSource { hint, max_draft: 4 }),
        ..request(id, prompt, max_new_tokens)
    }
}

fn answer(plan: &StepPlan, id: u64, token: u32, accepted: usize) -> StepResult {
    assert!(plan.seqs.iter().any(|s| s.request_id.0 == id));
    StepResult {
        request_id: RequestId(id),
        token: Some(token),
        accepted,
        stop: false,
    }
}

#[test]
fn a_decode_checks_drafts_and_keeps_the_accepted_ones() {
    let mut sched = Scheduler::new(config()).expect("scheduler");
    // The hint continues the sampled token 50 with 51 52 53 54 55.
    let hint = vec![7, 50, 51, 52, 53, 54, 55];
    sched
        .add_request(drafting(1, vec![1, 2, 3, 7], 10, hint))
        .expect("add");
    // Prefill: no drafts; the runner samples 50.
    let plan = sched.plan_step().expect("plan");
    assert_eq!(plan.seqs[0].drafts, 0);
    sched.commit(&[answer(&plan, 1, 50, 0)]).expect("commit");
    // Decode of 50 with the hint's next four tokens as drafts, over positions 4..9.
    let plan = sched.plan_step().expect("plan");
    let s = &plan.seqs[0];
    assert_eq!((s.start_position, s.drafts), (4, 4));
    assert_eq!(s.token_ids, vec![50, 51, 52, 53, 54]);
    assert_eq!(s.slots.len(), 5);
    // The runner kept 51 and 52, then sampled 60 where the draft said 53.
    sched.commit(&[answer(&plan, 1, 60, 2)]).expect("commit");
    // KV stands for 50 51 52; the next decode computes 60 at position 7, over the rejected
    // drafts' slots. No hint matches 52 60 and the sequence has no earlier 52 60: no drafts.
    let plan = sched.plan_step().expect("plan");
    let s = &plan.seqs[0];
    assert_eq!(
        (s.start_position, s.token_ids.clone(), s.drafts),
        (7, vec![60], 0)
    );
    let finished = sched.commit(&[answer(&plan, 1, 61, 0)]).expect("commit");
    assert!(finished.is_empty());
    assert_eq!(
        sched.requests[&RequestId(1)].tokens,
        vec![1, 2, 3, 7, 50, 51, 52, 60, 61]
    );
}

#[test]
fn drafts_stay_within_the_output_limit_and_small_steps() {
    // The hint continues the prompt's last token 3 and the first sampled token 50.
    let hint: Vec<u32> = std::iter::once(3).chain(50..80).collect();
    let mut sched = Scheduler::new(config()).expect("scheduler");
    // Three tokens of output allowed: after the first, one decode token and one draft.
    sched
        .add_request(drafting(1, vec![1, 2, 3], 3, hint.clone()))
        .expect("add");
    let plan = sched.plan_step().expect("plan");
    sched.commit(&[answer(&plan, 1, 50, 0)]).expect("commit");
    let plan = sched.plan_step().expect("plan");
    assert_eq!(plan.seqs[0].drafts, 1);
    let finished = sched.commit(&[answer(&plan, 1, 52, 1)]).expect("commit");
    assert_eq!(finished[0].output, vec![50, 51, 52]);
    assert_eq!(finished[0].reason, FinishReason::Length);

    // A step already holding DRAFT_STEP_TOKENS tokens gets no drafts.
    let mut sched = Scheduler::new(SchedulerConfig {
        max_model_len: 128,
        num_blocks: 64,
        ..config()
    })
    .expect("scheduler");
    sched
        .add_request(drafting(1, vec![1, 2, 3], 8, hint))
        .expect("add");
    let plan = sched.plan_step().expect("plan");
    sched.commit(&[answer(&plan, 1, 50, 0)]).expect("commit");
    sched
        .add_request(request(2, (0..DRAFT_STEP_TOKENS as u32).collect(), 4))
        .expect("add");
    let plan = sched.plan_step().expect("plan");
    assert_eq!(plan.seqs.len(), 2);
    assert_eq!(plan.seqs[0].drafts, 0);
}

#[test]
fn a_commit_accepting_more_drafts_than_planned_is_refused() {
    let mut sched = Scheduler::new(config()).expect("scheduler");
    sched
        .add_request(drafting(1, vec![1, 2, 3], 10, vec![3, 50, 51]))
        .expect("add");
    let plan = sched.plan_step().expect("plan");
    sched.commit(&[answer(&plan, 1, 50, 0)]).expect("commit");
    let plan = sched.plan_step().expect("plan");
    assert_eq!(plan.seqs[0].drafts, 1);
    let err = sched
        .commit(&[answer(&plan, 1, 9, 2)])
        .expect_err("refused");
    assert_eq!(err.kind(), "accepted_beyond_drafts");
    // The plan is still in flight; a valid commit goes through.
    sched.commit(&[answer(&plan, 1, 9, 0)]).expect("commit");
}
