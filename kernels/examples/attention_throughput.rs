//! Time of causal attention alone (the best of many runs, so that a busy shared machine
//! disturbs it least) on Qwen2.5-Coder-0.5B's head shapes (14 query heads, 2 kv heads, 64
//! dims) for a prefill chunk and a decode row over a Spider-sized context, or on the shapes
//! given: `cargo run -p quorum-kernels --example attention_throughput [runs [heads kv_heads
//! head_dim context]]` (Qwen2.5-Coder-1.5B over a business schema's prompt: `20 12 2 128
//! 2500`). The kernel is the one this CPU runs (`RowKernel::detect`).

use std::time::Instant;

use quorum_kernels::{AttentionDims, causal_attention_rows};

fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let runs = args.first().copied().unwrap_or(20);
    let (heads, kv_heads, d, context) = match args[..] {
        [_, heads, kv_heads, d, context] => (heads, kv_heads, d, context),
        [] | [_] => (14, 2, 64, 1024),
        _ => anyhow::bail!("give runs, or runs heads kv_heads head_dim context"),
    };
    let k = values(kv_heads * context * d, 2);
    let v = values(kv_heads * context * d, 3);
    for (what, len) in [
        ("prefill chunk of 256", 256.min(context)),
        ("decode row", 1),
    ] {
        let dims = AttentionDims {
            num_heads: heads,
            num_kv_heads: kv_heads,
            head_dim: d,
            len,
            context,
            start: context - len,
        };
        let q = values(heads * len * d, 1);
        let mut best = f64::INFINITY;
        for _ in 0..runs {
            let t = Instant::now();
            std::hint::black_box(causal_attention_rows(&q, &k, &v, dims));
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{what} over {context} positions: {:.3} ms per layer",
            best * 1e3
        );
    }
    Ok(())
}
