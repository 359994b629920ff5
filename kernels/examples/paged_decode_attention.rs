//! Time of one decode step's attention, every layer, read from the paged KV cache as the
//! engine reads it: one query row per layer over a context whose keys and values (all layers
//! together) are larger than the last-level cache, so each step reads them from memory, as a
//! decode step does after its weights have passed through the cache. Defaults are
//! Qwen2.5-Coder-1.5B's shapes (28 layers, 12 query heads, 2 kv heads, 128 dims) over the
//! runtime bench's 1,219-token prompt. Prints the best and the median step of `runs`.
//! `cargo run -p quorum-kernels --example paged_decode_attention [runs [layers heads kv_heads
//! head_dim context]]`

use std::time::Instant;

use quorum_kernels::{KvLayout, PagedChunk, PagedKvStore};

/// Tokens per block, as the engine's default.
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
    let runs = args.first().copied().unwrap_or(30);
    let (layers, heads, kv_heads, d, context) = match args[..] {
        [_, layers, heads, kv_heads, d, context] => (layers, heads, kv_heads, d, context),
        [] | [_] => (28, 12, 2, 128, 1220),
        _ => anyhow::bail!("give runs, or runs layers heads kv_heads head_dim context"),
    };
    let layout = KvLayout {
        num_layers: layers,
        num_blocks: context.div_ceil(BLOCK_SIZE),
        block_size: BLOCK_SIZE,
        num_kv_heads: kv_heads,
        head_dim: d,
    };
    let mut store = PagedKvStore::new(layout);
    let slots: Vec<usize> = (0..context).collect();
    let width = context * layout.token_width();
    for layer in 0..layers {
        let seed = 2 * layer as u32;
        store.write(
            layer,
            &slots,
            &values(width, seed + 1),
            &values(width, seed + 2),
        )?;
    }
    let table: Vec<usize> = (0..layout.num_blocks).collect();
    let chunk = PagedChunk {
        offset: 0,
        len: 1,
        start: context - 1,
        block_table: &table,
    };
    let q = values(heads * d, 7);
    let mut steps = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        for layer in 0..layers {
            std::hint::black_box(store.attend(layer, &q, heads, 1, &[chunk])?);
        }
        steps.push(t.elapsed().as_secs_f64());
    }
    steps.sort_by(f64::total_cmp);
    let mb = (2 * layers * width * 4) as f64 / 1e6;
    println!(
        "{layers} layers over {context} positions ({mb:.0} MB of keys and values): best {:.2} ms, median {:.2} ms a step ({:.1} GB/s at the median)",
        steps[0] * 1e3,
        steps[steps.len() / 2] * 1e3,
        mb / 1e3 / steps[steps.len() / 2]
    );
    Ok(())
}
