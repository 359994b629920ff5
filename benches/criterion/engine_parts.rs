//! Criterion micro-benchmarks of the two parts that decide how well batching pays on the CPU:
//!
//! - `matmul`: one projection of Qwen2.5-Coder-0.5B (layer 0's MLP gate, 896 → 4864, and its
//!   down projection) at 1, 4 and 16 rows, with the weights as the engine loads them by default
//!   (`Reencode::Slow`) and with every matrix re-encoded to Q8_0 (the server's CPU default). Rows are decode steps of concurrent requests:
//!   elements/s is rows/s, so a flat time per call from 1 to 16 rows is perfect batching.
//! - `scheduler`: planning and committing 64 decode steps of 16 running requests (pure
//!   bookkeeping, to show it costs nothing next to the forward pass).
//!
//! `cargo bench --profile dev -p quorum-benches --bench engine_parts` (needs
//! `scripts/fetch-models.sh`; the default bench profile is a 20-minute release build here).

use candle_core::{DType, Device, Tensor};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use quorum_engine::{CacheKey, NewRequest, RequestId, Scheduler, SchedulerConfig, StepResult};
use quorum_models::{CpuPath, Linear, MatmulPolicy};
use quorum_tests::{QWEN_05B, all_q8_0_copy, model_path};
use quorum_weights::{StoredTensor, load_checkpoint};

/// The engine's policy (`MatmulPolicy::engine`, one row and up through the int8 GEMM) with
/// `min_rows` rows before the int8 GEMM takes over.
fn policy(min_rows: usize) -> MatmulPolicy {
    MatmulPolicy::BatchInvariant {
        min_rows,
        path: CpuPath::detect(),
    }
}

const PROJECTIONS: &[(&str, (usize, usize))] = &[
    ("model.layers.0.mlp.gate_proj", (4864, 896)),
    ("model.layers.0.mlp.down_proj", (896, 4864)),
];

fn matmul(c: &mut Criterion) {
    let files = [
        ("as_loaded", model_path(QWEN_05B)),
        (
            "all_q8_0",
            all_q8_0_copy(QWEN_05B).expect("re-encode a Q8_0 copy"),
        ),
    ];
    let mut group = c.benchmark_group("matmul");
    group.sample_size(20);
    for (label, path) in &files {
        let ckpt = load_checkpoint(path, &Device::Cpu, DType::F32).expect("load checkpoint");
        for (name, shape) in PROJECTIONS {
            let stored = ckpt.tensors.get(&format!("{name}.weight")).expect("weight");
            let dtype = match stored {
                StoredTensor::Quantized(q) => format!("{:?}", q.dtype()),
                StoredTensor::Dense(t) => format!("{:?}", t.dtype()),
            };
            let linear =
                Linear::load(&ckpt.tensors, name, *shape, policy(1), DType::F32).expect("linear");
            let short = name.rsplit('.').next().unwrap_or(name);
            // One row through candle's kernel, as the engine did before single rows took the
            // int8 GEMM.
            let candle_row =
                Linear::load(&ckpt.tensors, name, *shape, policy(2), DType::F32).expect("linear");
            let x = Tensor::randn(0f32, 1.0, (1, shape.1), &Device::Cpu).expect("input");
            group.throughput(Throughput::Elements(1));
            group.bench_with_input(
                BenchmarkId::new(format!("{label}/{short}/{dtype}/candle_row"), 1),
                &x,
                |b, x| b.iter(|| candle_row.forward(x).expect("forward")),
            );
            for rows in [1usize, 4, 16] {
                let x = Tensor::randn(0f32, 1.0, (rows, shape.1), &Device::Cpu).expect("input");
                group.throughput(Throughput::Elements(rows as u64));
                group.bench_with_input(
                    BenchmarkId::new(format!("{label}/{short}/{dtype}"), rows),
                    &x,
                    |b, x| b.iter(|| linear.forward(x).expect("forward")),
                );
            }
        }
    }
    group.finish();
}

/// Decode steps measured per iteration (each iteration starts from a fresh, prefilled scheduler).
const DECODE_STEPS: usize = 64;

/// One plan + commit; returns (sequences, tokens) of the step.
fn step(sched: &mut Scheduler) -> (usize, usize) {
    let plan = sched.plan_step().expect("plan");
    let results: Vec<StepResult> = plan
        .seqs
        .iter()
        .map(|s| StepResult {
            request_id: s.request_id,
            token: s.samples.then_some(7),
            accepted: 0,
            stop: false,
        })
        .collect();
    sched.commit(&results).expect("commit");
    (plan.seqs.len(), plan.num_tokens())
}

/// 16 requests with 512-token prompts, prefilled, then 64 decode steps.
fn prefilled_scheduler() -> Scheduler {
    let config = SchedulerConfig {
        block_size: 16,
        num_blocks: 1024,
        max_batched_tokens: 2048,
        max_running_seqs: 16,
        max_waiting: 64,
        max_model_len: 4096,
        enable_prefix_caching: true,
        max_pinned_blocks: 0,
    };
    let mut sched = Scheduler::new(config).expect("scheduler");
    for id in 0..16u64 {
        let prompt = (0..512).map(|t| (id * 1000 + t) as u32).collect();
        sched
            .add_request(NewRequest {
                id: RequestId(id),
                prompt,
                max_new_tokens: 1024,
                cache_key: CacheKey::new("bench", None),
                drafts: None,
                keep_prefix: None,
            })
            .expect("add");
    }
    // Prefill everything first, so that each measured step is a pure decode step.
    while step(&mut sched) != (16, 16) {}
    sched
}

fn scheduler(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduler");
    group.throughput(Throughput::Elements((16 * DECODE_STEPS) as u64));
    group.bench_function("decode_steps_16_running", |b| {
        b.iter_batched_ref(
            prefilled_scheduler,
            |sched| {
                for _ in 0..DECODE_STEPS {
                    step(sched);
                }
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, matmul, scheduler);
criterion_main!(benches);
