//! The continuous-batching engine on real models: batching invariance (alone, batched, chunked,
//! preempted, prefix-cached, speculative, and paged vs dense attention) and cancellation.

use std::time::{Duration, Instant};

use candle_core::{DType, Device};
use quorum_engine::{
    EngineConfig, EngineEvent, EngineHandle, FinishReason, GenerateRequest, SamplingParams,
    spawn_engine,
};
use quorum_models::{DecoderModel, DenseKvCache, MatmulPolicy, greedy_generate_with_cache};
use quorum_tests::{QWEN_05B, SMOLLM2, model_path};
use quorum_weights::{ChatMessage, GgufLoadOptions, Reencode, load_checkpoint_with};

const QUESTIONS: &[&str] = &[
    "How many singers do we have?",
    "List the names of all stadiums with capacity above 5000, ordered by name.",
    "What is the average age of singers from France?",
    "Which concert had the most singers? Show its name and year.",
    "Count the pets owned by students older than 20.",
    "Find the first name of the youngest student.",
    "Show all countries and the number of singers from each.",
    "What are the names of the stadiums that did not host any concert in 2014?",
];

fn engine(model: &str, tweak: impl FnOnce(&mut EngineConfig)) -> EngineHandle {
    let mut cfg = quorum_tests::engine_config(model);
    cfg.kv_cache_bytes = 256 << 20;
    tweak(&mut cfg);
    spawn_engine(cfg, &model_path(model), &Device::Cpu).expect("engine starts")
}

fn prompt(h: &EngineHandle, q: &str) -> Vec<u32> {
    let text = h
        .chat_template()
        .expect("chat template")
        .render(&[ChatMessage::new("user", q)], true)
        .expect("render");
    h.tokenizer()
        .encode(text.as_str(), false)
        .expect("encode")
        .get_ids()
        .to_vec()
}

fn greedy(max_new: u32) -> SamplingParams {
    // No stop tokens beyond the model's: compare the full greedy continuation.
    SamplingParams {
        max_new_tokens: max_new,
        ..SamplingParams::greedy()
    }
}

fn request(tokens: Vec<u32>, max_new: u32) -> GenerateRequest {
    GenerateRequest {
        draft_hint: Vec::new(),
        keep_prefix: None,
        prompt_tokens: tokens,
        params: greedy(max_new),
        adapter: None,
        deadline: None,
        grammar: None,
    }
}

/// `request`, generating past the end-of-sequence token: a request that is still running when
/// a test acts on it (a fast CPU finished these questions' answers first).
fn long_request(tokens: Vec<u32>, max_new: u32) -> GenerateRequest {
    let mut req = request(tokens, max_new);
    req.params.ignore_eos = true;
    req
}

/// Drains a stream: (tokens, finish event).
fn collect(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<EngineEvent>,
) -> (Vec<u32>, quorum_engine::FinishEvent) {
    let mut tokens = Vec::new();
    loop {
        match rx.blocking_recv().expect("stream ends with Finished") {
            EngineEvent::Token(t) => tokens.push(t.token_id),
            EngineEvent::Finished(f) => return (tokens, f),
        }
    }
}

fn run_all(h: &EngineHandle, prompts: &[Vec<u32>], max_new: u32) -> Vec<Vec<u32>> {
    let rxs: Vec<_> = prompts
        .iter()
        .map(|p| h.submit(request(p.clone(), max_new)).expect("submit"))
        .collect();
    rxs.into_iter().map(|rx| collect(rx).0).collect()
}

fn check_invariance(model: &str, max_new: u32, reencode: Reencode, kv: DType) {
    let base = engine(model, |c| {
        c.reencode = reencode;
        c.host_kv_dtype = kv;
    });
    assert_eq!(base.info().kv_dtype, kv);
    let prompts: Vec<Vec<u32>> = QUESTIONS.iter().map(|q| prompt(&base, q)).collect();
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| run_all(&base, std::slice::from_ref(p), max_new).remove(0))
        .collect();

    // Paged attention in the engine equals the dense-cache greedy loop (on the engine's
    // kernels: the K-quant GEMM's arithmetic is not candle's), whose cache holds f32: with f16
    // blocks the engine computes over rounded keys and values, which
    // `f16_blocks_attend_as_f32_blocks_holding_the_rounded_values` checks kernel by kernel.
    let ckpt = load_checkpoint_with(
        &model_path(model),
        &Device::Cpu,
        candle_core::DType::F32,
        &GgufLoadOptions { reencode },
    )
    .expect("load");
    let dense = DecoderModel::load(
        &ckpt,
        &Device::Cpu,
        MatmulPolicy::engine(quorum_tests::cpu_path()),
    )
    .expect("model");
    let dense_compared = if kv == DType::F32 { 3 } else { 0 };
    for (p, a) in prompts.iter().zip(&alone).take(dense_compared) {
        let cache = DenseKvCache::with_rowwise_attention();
        let g = greedy_generate_with_cache(
            &dense,
            cache,
            p,
            (max_new as usize, &ckpt.eos_token_ids),
            |_| {},
        )
        .expect("greedy");
        assert_eq!(
            &g.tokens, a,
            "{model}: paged engine differs from the dense greedy loop"
        );
    }

    let batched = run_all(&base, &prompts, max_new);
    assert_eq!(
        batched, alone,
        "{model}: batched with 7 others differs from alone"
    );

    // The default checks prompt-lookup drafts; without them every output is the same.
    let plain = engine(model, |c| {
        c.reencode = reencode;
        c.host_kv_dtype = kv;
        c.max_draft_tokens = 0;
    });
    assert_eq!(
        run_all(&plain, &prompts, max_new),
        alone,
        "{model}: speculative decoding changed the output"
    );
    assert!(
        base.stats().draft_tokens > 0,
        "{model}: no draft was ever checked"
    );
    assert_eq!(plain.stats().draft_tokens, 0);

    // Prefix-cache hit: the same prompt again reuses its cached blocks and gives the same tokens.
    let (again, fin) = collect(
        base.submit(request(prompts[1].clone(), max_new))
            .expect("submit"),
    );
    assert!(
        fin.cached_tokens >= 16,
        "{model}: expected a prefix-cache hit, got {} cached tokens",
        fin.cached_tokens
    );
    assert_eq!(
        again, alone[1],
        "{model}: prefix-cache hit changed the output"
    );

    let chunked = engine(model, |c| {
        c.max_batched_tokens = 7;
        c.reencode = reencode;
        c.host_kv_dtype = kv;
    });
    assert_eq!(
        run_all(&chunked, &prompts, max_new),
        alone,
        "{model}: chunked prefill differs"
    );

    // So few blocks that 8 sequences cannot all stay resident: preemption by recompute.
    let per_token = ckpt_bytes_per_token(&ckpt, kv);
    // Room for about two prompts: admitted sequences run out of blocks as they decode, and the
    // scheduler must preempt (and later recompute) the latest arrival.
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let tight = engine(model, |c| {
        c.block_size = 16;
        c.kv_cache_bytes = (per_token * (2 * longest + 8)) as u64;
        c.enable_prefix_caching = false;
        c.reencode = reencode;
        c.host_kv_dtype = kv;
    });
    assert_eq!(
        run_all(&tight, &prompts, max_new),
        alone,
        "{model}: preemption changed the output"
    );
    assert!(
        tight.stats().preemptions > 0,
        "{model}: the tight cache never preempted"
    );
}

/// The KV blocks in device tensors with the batched candle-op attention (the path GPUs take),
/// forced on the CPU on a small random f32 model, whose dense weights do not amplify the last
/// bits in which candle's attention differs from the CPU kernel (a quantized model's int8
/// activations do): batched, chunked into short pieces, prefix-cached and preempted, every
/// prompt decodes the tokens the CPU's paged kernel gives it alone.
#[test]
fn device_kv_blocks_give_the_host_kernels_tokens() {
    use rand::{Rng, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    crate::random_decoder::write_checkpoint(dir.path(), "qwen2", 11);
    let start = |tweak: &dyn Fn(&mut EngineConfig)| {
        let mut cfg = quorum_tests::engine_config("random");
        cfg.kv_cache_bytes = 64 << 20;
        tweak(&mut cfg);
        spawn_engine(cfg, dir.path(), &Device::Cpu).expect("engine starts")
    };
    // Lengths on both sides of the batched pass's 32-token limit; ids above the EOS id (1).
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let prompts: Vec<Vec<u32>> = [3usize, 9, 17, 33, 40, 55, 70, 21]
        .iter()
        .map(|&n| (0..n).map(|_| rng.random_range(2..96u32)).collect())
        .collect();
    let max_new = 40;
    let host = start(&|_| {});
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| run_all(&host, std::slice::from_ref(p), max_new).remove(0))
        .collect();
    assert!(
        alone.iter().any(|t| t.len() > 20),
        "the outputs are long enough to check"
    );
    let device = start(&|c| c.device_kv_on_cpu = true);
    assert_eq!(
        run_all(&device, &prompts, max_new),
        alone,
        "device blocks, batched"
    );
    let (again, fin) = collect(
        device
            .submit(request(prompts[5].clone(), max_new))
            .expect("submit"),
    );
    assert!(fin.cached_tokens >= 16, "no prefix-cache hit");
    assert_eq!(again, alone[5], "device blocks, prefix-cache hit");
    // The batch-invariant mode takes every chunk, however long, through the row-by-row pass.
    let row_by_row = start(&|c| {
        c.device_kv_on_cpu = true;
        c.batch_invariant = true;
    });
    assert_eq!(
        run_all(&row_by_row, &prompts, max_new),
        alone,
        "device blocks, every chunk row by row"
    );
    let chunked = start(&|c| {
        c.device_kv_on_cpu = true;
        c.max_batched_tokens = 7;
    });
    assert_eq!(
        run_all(&chunked, &prompts, max_new),
        alone,
        "device blocks, chunked prefill"
    );
    let per_token = 2 * crate::random_decoder::LAYERS * crate::random_decoder::HIDDEN
        / crate::random_decoder::HEADS
        * crate::random_decoder::KV_HEADS
        * 4;
    let tight = start(&|c| {
        c.device_kv_on_cpu = true;
        c.block_size = 16;
        c.kv_cache_bytes = (per_token * (2 * 70 + 8)) as u64;
        c.enable_prefix_caching = false;
    });
    assert_eq!(
        run_all(&tight, &prompts, max_new),
        alone,
        "device blocks, preempted"
    );
    assert!(
        tight.stats().preemptions > 0,
        "the tight cache never preempted"
    );
}

fn ckpt_bytes_per_token(ckpt: &quorum_weights::Checkpoint, kv: DType) -> usize {
    let cfg = quorum_models::DecoderConfig::from_checkpoint(ckpt).expect("config");
    2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * kv.size_in_bytes()
}

#[test]
fn smollm2_batching_invariance() {
    check_invariance(SMOLLM2, 24, Reencode::Slow, DType::F32);
}

#[test]
fn qwen_batching_invariance() {
    check_invariance(QWEN_05B, 16, Reencode::Slow, DType::F32);
}

/// Every matrix Q8_0, so the Q8_0 GEMM runs every layer.
#[test]
fn qwen_batching_invariance_all_q8_0() {
    check_invariance(QWEN_05B, 16, Reencode::All, DType::F32);
}

/// The server's default for GGUF models on the CPU: Q4_K and Q6_K read as stored by the
/// K-quant GEMM (the 0.5B's down projections), the rest re-encoded to Q8_0.
#[test]
fn qwen_batching_invariance_kernels() {
    check_invariance(QWEN_05B, 16, Reencode::Kernels, DType::F32);
}

/// The same with the KV cache in f16 blocks: batched, speculative, prefix-cached, chunked and
/// preempted, each request's tokens are the ones it gets alone.
#[test]
fn qwen_batching_invariance_f16_kv() {
    check_invariance(QWEN_05B, 16, Reencode::Kernels, DType::F16);
}

/// A step whose rows mix plain greedy sequences with sampled ones: the greedy rows' arg-max is
/// taken where the logits are and only the sampled rows are handed over whole. Each request,
/// greedy or seeded, must get the tokens it gets alone.
#[test]
fn greedy_and_sampled_requests_in_one_step_get_what_they_get_alone() {
    let h = engine(SMOLLM2, |_| {});
    let prompts: Vec<Vec<u32>> = QUESTIONS.iter().map(|q| prompt(&h, q)).collect();
    let sampled = |p: &Vec<u32>, seed: u64| {
        let mut req = long_request(p.clone(), 16);
        req.params.temperature = 0.8;
        req.params.top_p = 0.9;
        req.params.seed = Some(seed);
        req
    };
    let requests = |i: usize, p: &Vec<u32>| match i % 2 {
        0 => long_request(p.clone(), 16),
        _ => sampled(p, i as u64),
    };
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| collect(h.submit(requests(i, p)).expect("submit")).0)
        .collect();
    let rxs: Vec<_> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| h.submit(requests(i, p)).expect("submit"))
        .collect();
    let together: Vec<Vec<u32>> = rxs.into_iter().map(|rx| collect(rx).0).collect();
    assert!(
        prompts.len() >= 2,
        "at least one greedy and one sampled request"
    );
    for (i, (a, t)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(a.len(), 16, "request {i} ran its 16 tokens");
        assert_eq!(
            a,
            t,
            "request {i} ({}) changed in a mixed step",
            ["greedy", "sampled"][i % 2]
        );
    }
}

/// Text-to-SQL prompts whose answers copy names from the schema in the prompt.
const SQL_QUESTIONS: &[&str] = &[
    "How many singers do we have?",
    "Show the name and country of every singer older than 30, oldest first.",
    "What is the average age of singers from each country?",
    "List the names of stadiums that hosted a concert in 2014 and their capacity.",
];

fn sql_prompt(h: &EngineHandle, q: &str) -> Vec<u32> {
    prompt(
        h,
        &format!(
            "CREATE TABLE singer (singer_id int, name text, country text, age int);\n\
             CREATE TABLE stadium (stadium_id int, name text, capacity int);\n\
             CREATE TABLE concert (concert_id int, concert_name text, stadium_id int, year int);\n\
             Write one SQLite query for: {q}"
        ),
    )
}

fn run_hinted(
    h: &EngineHandle,
    prompts: &[Vec<u32>],
    hints: &[Vec<u32>],
    max_new: u32,
) -> Vec<Vec<u32>> {
    let rxs: Vec<_> = prompts
        .iter()
        .zip(hints)
        .map(|(p, hint)| {
            let mut r = request(p.clone(), max_new);
            r.draft_hint = hint.clone();
            h.submit(r).expect("submit")
        })
        .collect();
    rxs.into_iter().map(|rx| collect(rx).0).collect()
}

/// Speculative decoding by prompt lookup gives every greedy sequence the tokens it gets without
/// it, batched, whatever the hint: the answer itself (nearly every draft kept), another
/// question's answer (most rejected) or none. And a good hint saves steps.
#[test]
fn drafts_change_no_output_and_a_good_hint_saves_steps() {
    let max_new = 48;
    let plain = engine(QWEN_05B, |c| c.max_draft_tokens = 0);
    let prompts: Vec<Vec<u32>> = SQL_QUESTIONS
        .iter()
        .map(|q| sql_prompt(&plain, q))
        .collect();
    let reference = run_all(&plain, &prompts, max_new);
    let steps_plain = plain.stats().steps;

    let none: Vec<Vec<u32>> = vec![Vec::new(); prompts.len()];
    let mut wrong = reference.clone();
    wrong.rotate_left(1);
    for (name, hints) in [
        ("no hint", &none),
        ("another answer", &wrong),
        ("the answer", &reference),
    ] {
        let spec = engine(QWEN_05B, |c| c.max_draft_tokens = 8);
        assert_eq!(
            run_hinted(&spec, &prompts, hints, max_new),
            reference,
            "drafts with {name} as the hint changed the output"
        );
        let stats = spec.stats();
        eprintln!(
            "{name}: {} of {} drafts kept, {} steps (without drafts {steps_plain})",
            stats.draft_tokens_accepted, stats.draft_tokens, stats.steps
        );
        if name == "the answer" {
            let generated: usize = reference.iter().map(Vec::len).sum();
            assert!(
                stats.draft_tokens_accepted as usize * 2 >= generated,
                "the answer as the hint kept only {} drafts of {generated} tokens",
                stats.draft_tokens_accepted
            );
            assert!(stats.steps < steps_plain, "a good hint saved no step");
        }
    }
}

/// The instant each event of a stream arrives, read on a thread of its own.
fn timed(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<EngineEvent>,
) -> std::thread::JoinHandle<Vec<(Instant, EngineEvent)>> {
    std::thread::spawn(move || {
        let mut events = Vec::new();
        while let Some(e) = rx.blocking_recv() {
            let done = matches!(e, EngineEvent::Finished(_));
            events.push((Instant::now(), e));
            if done {
                break;
            }
        }
        events
    })
}

#[test]
fn a_long_prompt_does_not_hold_back_short_requests() {
    // The server's step budget: one step could take the whole long prompt.
    let h = engine(SMOLLM2, |c| c.max_batched_tokens = 2048);
    let long = prompt(&h, &"hello ".repeat(2040));
    assert!(long.len() > 2000, "{} tokens", long.len());
    let long_rx = timed(h.submit(request(long, 64)).expect("submit"));
    let shorts: Vec<_> = QUESTIONS[..4]
        .iter()
        .map(|q| timed(h.submit(request(prompt(&h, q), 1)).expect("submit")))
        .collect();
    let long_events = long_rx.join().expect("long stream");
    let first_long_token = long_events
        .iter()
        .find(|(_, e)| matches!(e, EngineEvent::Token(_)))
        .map(|(at, _)| *at)
        .expect("the long request generates");
    let steps_to_first_long_token = h.stats().steps;
    for short in shorts {
        let events = short.join().expect("short stream");
        let (finished_at, last) = events.last().expect("events");
        assert!(matches!(last, EngineEvent::Finished(_)));
        assert!(
            *finished_at < first_long_token,
            "a short request finished only after the long prompt's prefill \
             ({steps_to_first_long_token} steps by the end)"
        );
    }
}

#[test]
fn cancelling_a_stream_frees_its_blocks_within_a_step() {
    let h = engine(SMOLLM2, |_| {});
    let p = prompt(&h, QUESTIONS[1]);
    let mut rx = h.submit(long_request(p, 400)).expect("submit");
    for _ in 0..3 {
        assert!(matches!(rx.blocking_recv(), Some(EngineEvent::Token(_))));
    }
    assert!(h.stats().kv_blocks_used > 0);
    let steps_at_cancel = h.stats().steps;
    drop(rx);
    let start = Instant::now();
    loop {
        let s = h.stats();
        if s.kv_blocks_used == 0 && s.running == 0 {
            assert!(
                s.steps <= steps_at_cancel + 2,
                "blocks freed only after {} steps",
                s.steps - steps_at_cancel
            );
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "blocks never freed: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn admission_fails_fast_and_bad_requests_are_rejected() {
    let h = engine(SMOLLM2, |c| {
        c.max_running_seqs = 1;
        c.max_waiting = 1;
    });
    let p = prompt(&h, QUESTIONS[0]);
    let _a = h.submit(long_request(p.clone(), 200)).expect("first");
    let _b = h
        .submit(long_request(p.clone(), 200))
        .expect("second waits");
    let err = h
        .submit(request(p.clone(), 200))
        .expect_err("third is refused");
    assert_eq!(err.kind(), "queue_full");
    assert_eq!(
        h.submit(request(vec![], 4)).expect_err("empty").kind(),
        "empty_prompt"
    );
    let long = vec![1u32; h.info().max_model_len];
    assert_eq!(
        h.submit(request(long, 4)).expect_err("too long").kind(),
        "prompt_too_long"
    );
    let bad = GenerateRequest {
        draft_hint: Vec::new(),
        keep_prefix: None,
        params: SamplingParams {
            temperature: -1.0,
            ..greedy(4)
        },
        ..request(p, 4)
    };
    assert_eq!(
        h.submit(bad).expect_err("bad temperature").kind(),
        "invalid_params"
    );
}

#[test]
fn a_request_larger_than_the_kv_cache_is_refused_at_submit() {
    // 2 MiB of KV holds a few hundred SmolLM2 tokens, far below its context.
    let h = engine(SMOLLM2, |c| c.kv_cache_bytes = 2 << 20);
    let capacity = h.stats().kv_blocks_total as usize * 16;
    assert_eq!(h.info().max_model_len, capacity);
    let err = h
        .submit(request(vec![1u32; capacity - 2], 4))
        .expect_err("beyond the cache");
    assert_eq!(err.kind(), "prompt_too_long");
    let (tokens, fin) = collect(h.submit(request(vec![1u32; 8], 4)).expect("fits"));
    assert!(!tokens.is_empty() && fin.error.is_none(), "{fin:?}");
}

#[test]
fn deadline_cancels_with_a_reason() {
    let h = engine(SMOLLM2, |_| {});
    let p = prompt(&h, QUESTIONS[2]);
    let req = GenerateRequest {
        draft_hint: Vec::new(),
        keep_prefix: None,
        deadline: Some(Instant::now() + Duration::from_millis(150)),
        ..long_request(p, 2000)
    };
    let (_, fin) = collect(h.submit(req).expect("submit"));
    assert_eq!(fin.reason, FinishReason::Cancelled);
    assert_eq!(fin.error.as_deref(), Some("deadline exceeded"));
}

#[test]
fn engine_keeps_serving_after_cancelling_running_and_waiting_requests() {
    let h = engine(SMOLLM2, |c| {
        c.max_running_seqs = 1;
        c.max_waiting = 1;
    });
    let p = prompt(&h, QUESTIONS[0]);
    let mut a = h.submit(long_request(p.clone(), 400)).expect("running");
    let b = h.submit(long_request(p.clone(), 400)).expect("waiting");
    assert!(matches!(a.blocking_recv(), Some(EngineEvent::Token(_))));
    assert_eq!(
        h.submit(request(p.clone(), 4)).expect_err("full").kind(),
        "queue_full"
    );
    drop(a);
    drop(b);
    let start = Instant::now();
    // `requests_finished` is bumped after a request's admission slot is released; the
    // running/waiting gauges are published once per step and can lag the first token.
    while h.stats().requests_finished < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "cancelled requests never left"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let (tokens, fin) = collect(h.submit(request(p, 4)).expect("admitted after the cancels"));
    assert_eq!(tokens.len(), 4, "{fin:?}");
}
