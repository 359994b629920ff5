//! Time of causal attention alone (the best of many runs, so that a busy shared machine
//! disturbs it least) on Qwen2.5-Coder-0.5B's head shapes (14 query heads, 2 kv heads, 64
//! dims) for a prefill chunk and a decode row over a Spider-sized context, or on the shapes
//! given: `cargo run -p quorum-kernels --example attention_throughput [runs [heads kv_heads
//! head_dim context [layers]]]` (Qwen2.5-Coder-1.5B over a business schema's prompt: `20 12 2
//! 128 2500`). The kernel is the one this CPU runs (`RowKernel::detect`).
//!
//! Then a whole decode step's attention as the engine reads it from the paged KV cache: one
//! query row in each of `layers` layers (default 28, the 1.5B's), whose keys and values
//! together outgrow the last-level cache at a 1,000-token context, so that each step reads
//! them from memory as a decode step does after its weights have passed through the cache;
//! the best and the median step, for one sequence and for eight, with f32 and f16 blocks; and
//! a 256-row prefill chunk's attention over every layer from the same blocks.

use std::time::Instant;

use candle_core::DType;
use quorum_kernels::{AttentionDims, KvLayout, PagedChunk, PagedKvStore, causal_attention_rows};

/// Tokens per block of the paged cache, as the engine's default.
const BLOCK_SIZE: usize = 16;

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
    let (heads, kv_heads, d, context, layers) = match args[..] {
        [_, heads, kv_heads, d, context] => (heads, kv_heads, d, context, 28),
        [_, heads, kv_heads, d, context, layers] => (heads, kv_heads, d, context, layers),
        [] | [_] => (14, 2, 64, 1024, 28),
        _ => anyhow::bail!("give runs, or runs heads kv_heads head_dim context [layers]"),
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
    paged_decode_step(runs, (layers, heads, kv_heads, d, context))
}

/// One decode step's attention over every layer of a paged cache (see the module docs), for
/// one sequence and for eight decoding together, and one prefill chunk of 256 rows, with f32
/// and with f16 blocks, the two element types' steps interleaved so that both see the machine
/// alike.
fn paged_decode_step(
    runs: usize,
    (layers, heads, kv_heads, d, context): (usize, usize, usize, usize, usize),
) -> anyhow::Result<()> {
    // (sequences, query rows of each): one decode row, eight decode rows, a prefill chunk.
    for (sequences, rows) in [(1, 1), (8, 1), (1, 256.min(context))] {
        let layout = KvLayout {
            num_layers: layers,
            num_blocks: sequences * context.div_ceil(BLOCK_SIZE),
            block_size: BLOCK_SIZE,
            num_kv_heads: kv_heads,
            head_dim: d,
        };
        let width = layout.num_blocks * BLOCK_SIZE * layout.token_width();
        let slots: Vec<usize> = (0..layout.num_blocks * BLOCK_SIZE).collect();
        let mut stores = Vec::new();
        for dtype in [DType::F32, DType::F16] {
            let mut store = PagedKvStore::with_dtype(layout, dtype)?;
            for layer in 0..layers {
                let seed = 2 * layer as u32 + 10;
                store.write(
                    layer,
                    &slots,
                    &values(width, seed),
                    &values(width, seed + 1),
                )?;
            }
            stores.push(store);
        }
        let per_sequence = context.div_ceil(BLOCK_SIZE);
        let tables: Vec<Vec<usize>> = (0..sequences)
            .map(|s| (s * per_sequence..(s + 1) * per_sequence).collect())
            .collect();
        let chunks: Vec<PagedChunk<'_>> = tables
            .iter()
            .enumerate()
            .map(|(s, table)| PagedChunk {
                offset: s * rows,
                len: rows,
                start: context - rows,
                block_table: table,
            })
            .collect();
        let tokens = sequences * rows;
        let q = values(heads * d * tokens, 7);
        let mut steps = vec![Vec::with_capacity(runs); stores.len()];
        for _ in 0..runs {
            for (store, steps) in stores.iter().zip(&mut steps) {
                let t = Instant::now();
                for layer in 0..layers {
                    std::hint::black_box(store.attend(layer, &q, heads, tokens, &chunks)?);
                }
                steps.push(t.elapsed().as_secs_f64());
            }
        }
        for (store, steps) in stores.iter().zip(&mut steps) {
            steps.sort_by(f64::total_cmp);
            let bytes = store.dtype().size_in_bytes();
            let mb = (2 * layers * sequences * context * layout.token_width() * bytes) as f64 / 1e6;
            let what = if rows == 1 {
                "decode step"
            } else {
                "prefill chunk"
            };
            println!(
                "paged {what}, {sequences} sequence(s) of {rows} row(s), {:?} blocks, {layers} layers over {context} positions ({mb:.0} MB of keys and values): best {:.2} ms, median {:.2} ms",
                store.dtype(),
                steps[0] * 1e3,
                steps[steps.len() / 2] * 1e3,
            );
        }
    }
    Ok(())
}
