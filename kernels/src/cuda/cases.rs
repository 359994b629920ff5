//! The inputs the kernels are checked on: odd shapes (dimensions that are not multiples of a
//! warp or a block, grouped-query heads, contexts split across partitions, rows without an
//! adapter, ties), deterministic values, and their rounding to the dtype a check runs in.

use candle_core::DType;

use super::sampling::{SamplingRows, mask_words};

/// A value as it reads back after being stored as `dtype`.
pub fn round_to(dtype: DType, x: f32) -> f32 {
    match dtype {
        DType::BF16 => half::bf16::from_f32(x).to_f32(),
        DType::F16 => half::f16::from_f32(x).to_f32(),
        _ => x,
    }
}

/// Deterministic values in [-1, 1): a 64-bit LCG, so every run checks the same inputs.
pub struct Values(u64);

impl Values {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1))
    }

    pub fn next_value(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn take(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next_value() * scale).collect()
    }
}

fn rounded(dtype: DType, v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| round_to(dtype, x)).collect()
}

#[derive(Debug, Clone)]
pub struct NormCase {
    pub hidden: usize,
    /// `[rows, hidden]`
    pub x: Vec<f32>,
    pub residual: Option<Vec<f32>>,
    pub weight: Vec<f32>,
    pub eps: f32,
}

impl NormCase {
    pub fn rows(&self) -> usize {
        self.x.len() / self.hidden
    }

    /// The case with every input the kernel reads in `dtype` rounded to it.
    pub fn rounded(&self, dtype: DType) -> Self {
        Self {
            x: rounded(dtype, &self.x),
            residual: self.residual.as_ref().map(|r| rounded(dtype, r)),
            weight: rounded(dtype, &self.weight),
            ..self.clone()
        }
    }
}

#[derive(Debug, Clone)]
pub struct RotaryCase {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// `[tokens, heads, head_dim]`
    pub q: Vec<f32>,
    /// `[tokens, kv_heads, head_dim]`
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    /// `[max_position, head_dim / 2]`, f32 whatever the dtype.
    pub cos: Vec<f32>,
    pub sin: Vec<f32>,
    pub positions: Vec<u32>,
    pub slots: Vec<u32>,
    /// `[slots, kv_heads * head_dim]`, as they were before the write.
    pub k_cache: Vec<f32>,
    pub v_cache: Vec<f32>,
    pub interleaved: bool,
}

impl RotaryCase {
    /// The case with every input the kernel reads in `dtype` rounded to it.
    pub fn rounded(&self, dtype: DType) -> Self {
        Self {
            q: rounded(dtype, &self.q),
            k: rounded(dtype, &self.k),
            v: rounded(dtype, &self.v),
            k_cache: rounded(dtype, &self.k_cache),
            v_cache: rounded(dtype, &self.v_cache),
            ..self.clone()
        }
    }
}

/// What `rotary_kv_write` leaves: the rotated queries and both caches.
#[derive(Debug, Clone)]
pub struct RotaryOutput {
    pub q: Vec<f32>,
    pub k_cache: Vec<f32>,
    pub v_cache: Vec<f32>,
}

#[derive(Debug, Clone)]
pub struct AttentionCase {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub block_size: usize,
    /// `[rows, heads, head_dim]`
    pub q: Vec<f32>,
    /// `[slots, kv_heads * head_dim]`
    pub k_cache: Vec<f32>,
    pub v_cache: Vec<f32>,
    /// Per sequence, its blocks in position order.
    pub block_tables: Vec<Vec<u32>>,
    pub seq_of_row: Vec<u32>,
    /// Keys each row sees: its position + 1.
    pub context_lens: Vec<u32>,
    pub scale: f32,
}

impl AttentionCase {
    pub fn max_context(&self) -> usize {
        self.context_lens.iter().copied().max().unwrap_or(0) as usize
    }

    /// The block tables as one `[seqs, max_blocks]` array, padded with block 0.
    pub fn flat_tables(&self) -> (Vec<u32>, usize) {
        let max_blocks = self.block_tables.iter().map(Vec::len).max().unwrap_or(1);
        let flat = self
            .block_tables
            .iter()
            .flat_map(|t| {
                t.iter()
                    .copied()
                    .chain(std::iter::repeat(0))
                    .take(max_blocks)
            })
            .collect();
        (flat, max_blocks)
    }

    /// The case with every input the kernel reads in `dtype` rounded to it.
    pub fn rounded(&self, dtype: DType) -> Self {
        Self {
            q: rounded(dtype, &self.q),
            k_cache: rounded(dtype, &self.k_cache),
            v_cache: rounded(dtype, &self.v_cache),
            ..self.clone()
        }
    }
}

/// A prefill chunk: one sequence's rows `start..start + len` attending over its whole context
/// through its block table. It is an [`AttentionCase`] whose rows are the chunk's, so the
/// paged-attention reference is its reference.
#[derive(Debug, Clone)]
pub struct PrefillCase {
    /// One sequence; row `i` is at position `start + i` and sees `start + i + 1` keys.
    pub attention: AttentionCase,
    pub start: usize,
}

impl PrefillCase {
    /// The chunk's rows (its new tokens).
    pub fn rows(&self) -> usize {
        self.attention.seq_of_row.len()
    }

    /// The slots of the context's keys `0..start + len`, in position order.
    pub fn context_slots(&self) -> Vec<u32> {
        let a = &self.attention;
        (0..self.start + self.rows())
            .map(|p| {
                a.block_tables[0][p / a.block_size] * a.block_size as u32
                    + (p % a.block_size) as u32
            })
            .collect()
    }

    /// The case with every input the kernel reads in `dtype` rounded to it.
    pub fn rounded(&self, dtype: DType) -> Self {
        Self {
            attention: self.attention.rounded(dtype),
            start: self.start,
        }
    }
}

#[derive(Debug, Clone)]
pub struct LoraCase {
    pub fan_in: usize,
    pub fan_out: usize,
    /// The stack's rank; smaller adapters are zero-padded to it.
    pub rank: usize,
    /// `[rows, fan_in]`
    pub x: Vec<f32>,
    /// `[rows, fan_out]`: the base projection's output.
    pub y: Vec<f32>,
    /// `[adapters, rank, fan_in]`
    pub a: Vec<f32>,
    /// `[adapters, rank, fan_out]`
    pub b_t: Vec<f32>,
    pub scales: Vec<f32>,
    /// Negative: no adapter.
    pub adapter_of_row: Vec<i32>,
}

impl LoraCase {
    /// The case with every input the kernel reads in `dtype` rounded to it.
    pub fn rounded(&self, dtype: DType) -> Self {
        Self {
            x: rounded(dtype, &self.x),
            y: rounded(dtype, &self.y),
            a: rounded(dtype, &self.a),
            b_t: rounded(dtype, &self.b_t),
            ..self.clone()
        }
    }
}

/// A prefill chunk's attention scores `[groups * len, context]`: row `r` is query `r % len`, at
/// position `start + r % len`.
#[derive(Debug, Clone)]
pub struct SoftmaxCase {
    pub len: usize,
    pub context: usize,
    pub start: usize,
    pub scores: Vec<f32>,
}

impl SoftmaxCase {
    /// The case with every input the kernel reads in `dtype` rounded to it.
    pub fn rounded(&self, dtype: DType) -> Self {
        Self {
            scores: rounded(dtype, &self.scores),
            ..self.clone()
        }
    }
}

#[derive(Debug, Clone)]
pub struct ArgmaxCase {
    pub vocab: usize,
    /// `[rows, vocab]`
    pub logits: Vec<f32>,
}

impl ArgmaxCase {
    /// The case with every input the kernel reads in `dtype` rounded to it.
    pub fn rounded(&self, dtype: DType) -> Self {
        Self {
            logits: rounded(dtype, &self.logits),
            ..self.clone()
        }
    }
}

#[derive(Debug, Clone)]
pub struct SampleCase {
    pub vocab: usize,
    /// `[rows, vocab]`
    pub logits: Vec<f32>,
    pub policies: SamplingRows,
}

impl SampleCase {
    pub fn rows(&self) -> usize {
        self.logits.len() / self.vocab
    }

    /// The case with every input the kernel reads in `dtype` rounded to it.
    pub fn rounded(&self, dtype: DType) -> Self {
        Self {
            logits: rounded(dtype, &self.logits),
            ..self.clone()
        }
    }
}

pub fn norm_cases() -> Vec<(&'static str, NormCase)> {
    let mut v = Values::new(1);
    let (rows, hidden) = (3, 1_000);
    let with_residual = NormCase {
        hidden,
        x: v.take(rows * hidden, 2.0),
        residual: Some(v.take(rows * hidden, 2.0)),
        weight: v.take(hidden, 1.5),
        eps: 1e-6,
    };
    let alone = NormCase {
        residual: None,
        hidden: 37,
        x: v.take(2 * 37, 3.0),
        weight: v.take(37, 1.0),
        eps: 1e-5,
    };
    vec![
        ("residual, 3 x 1000", with_residual),
        ("alone, 2 x 37", alone),
    ]
}

pub fn activation_case() -> (Vec<f32>, Vec<f32>) {
    let mut v = Values::new(2);
    let n = 3 * 1_000 + 7;
    (v.take(n, 6.0), v.take(n, 2.0))
}

pub fn rotary_cases() -> Vec<(&'static str, RotaryCase)> {
    let (heads, kv_heads, head_dim, tokens, max_position) = (6, 2, 18, 5, 40);
    let half = head_dim / 2;
    let mut cos = Vec::new();
    let mut sin = Vec::new();
    for p in 0..max_position {
        for i in 0..half {
            let angle = p as f32 / 10_000f32.powf(2.0 * i as f32 / head_dim as f32);
            cos.push(angle.cos());
            sin.push(angle.sin());
        }
    }
    let num_slots = 12;
    let width = kv_heads * head_dim;
    [false, true]
        .into_iter()
        .map(|interleaved| {
            let mut v = Values::new(3 + interleaved as u64);
            let case = RotaryCase {
                heads,
                kv_heads,
                head_dim,
                q: v.take(tokens * heads * head_dim, 1.0),
                k: v.take(tokens * width, 1.0),
                v: v.take(tokens * width, 1.0),
                cos: cos.clone(),
                sin: sin.clone(),
                positions: vec![0, 7, 39, 12, 13],
                slots: vec![11, 0, 5, 6, 2],
                k_cache: v.take(num_slots * width, 1.0),
                v_cache: v.take(num_slots * width, 1.0),
                interleaved,
            };
            let name = if interleaved {
                "interleaved pairs"
            } else {
                "half-split pairs"
            };
            (name, case)
        })
        .collect()
}

/// Three sequences scattered over the blocks: one of a single key, one of 37, one of 600 (two
/// partitions), with decode rows and a short tail of three rows on the long one. Small enough
/// for the CPU emulation, which runs every thread of a block as an OS thread.
pub fn attention_case() -> AttentionCase {
    let (heads, kv_heads, head_dim, block_size) = (4, 2, 40, 16);
    let contexts = [1usize, 37, 600];
    let blocks_needed: Vec<usize> = contexts.iter().map(|c| c.div_ceil(block_size)).collect();
    let total_blocks: usize = blocks_needed.iter().sum::<usize>() + 3;
    // Hand out blocks in a scrambled order, so no table is contiguous.
    let mut order: Vec<u32> = (0..total_blocks as u32).collect();
    order.reverse();
    order.rotate_left(2);
    let mut next = order.into_iter();
    let block_tables: Vec<Vec<u32>> = blocks_needed
        .iter()
        .map(|&n| next.by_ref().take(n).collect())
        .collect();
    let seq_of_row = vec![0, 1, 2, 2, 2];
    let context_lens = vec![1, 37, 598, 599, 600];
    let rows = seq_of_row.len();
    let width = kv_heads * head_dim;
    let mut v = Values::new(5);
    AttentionCase {
        heads,
        kv_heads,
        head_dim,
        block_size,
        q: v.take(rows * heads * head_dim, 3.0),
        k_cache: v.take(total_blocks * block_size * width, 1.0),
        v_cache: v.take(total_blocks * block_size * width, 1.0),
        block_tables,
        seq_of_row,
        context_lens,
        scale: 1.0 / (head_dim as f32).sqrt(),
    }
}

/// A chunk of 40 rows after 45 cached keys (two row blocks, the second partial; a prefix that
/// ends inside a key tile), and a whole 33-token prompt; 4 query heads on 2 key/value heads,
/// blocks handed out in a scrambled order.
pub fn prefill_cases() -> Vec<(&'static str, PrefillCase)> {
    let chunk = |start: usize, len: usize, head_dim: usize, seed: u64| {
        let (heads, kv_heads, block_size) = (4, 2, 16);
        let context = start + len;
        let blocks = context.div_ceil(block_size);
        let total_blocks = blocks + 3;
        let mut order: Vec<u32> = (0..total_blocks as u32).collect();
        order.reverse();
        order.rotate_left(1);
        let width = kv_heads * head_dim;
        let mut v = Values::new(seed);
        PrefillCase {
            attention: AttentionCase {
                heads,
                kv_heads,
                head_dim,
                block_size,
                q: v.take(len * heads * head_dim, 3.0),
                k_cache: v.take(total_blocks * block_size * width, 1.0),
                v_cache: v.take(total_blocks * block_size * width, 1.0),
                block_tables: vec![order[..blocks].to_vec()],
                seq_of_row: vec![0; len],
                context_lens: (1..=len).map(|i| (start + i) as u32).collect(),
                scale: 1.0 / (head_dim as f32).sqrt(),
            },
            start,
        }
    };
    vec![
        (
            "40 rows after 45 cached keys, dim 48",
            chunk(45, 40, 48, 11),
        ),
        ("a 33-token prompt, dim 64", chunk(0, 33, 64, 12)),
    ]
}

/// LoRA deltas as `lora_bgmv` adds them, one projection alone or a group of one input's: three
/// adapters (the third of rank 4, zero-padded to the stack's 6), rows of each and one without.
/// Alone, 300 outputs (past one block); grouped as a layer's q, k and v, 300, 20 and 530 outputs
/// (2, 1 and 3 blocks, so the expand's blocks change projection twice), each with its own
/// adapters and scales.
pub fn lora_cases() -> Vec<(&'static str, Vec<LoraCase>)> {
    let (rows, fan_in, rank, adapters) = (5, 70, 6, 3);
    let mut v = Values::new(6);
    let x = v.take(rows * fan_in, 1.0);
    let adapter_of_row = vec![0, -1, 2, 1, 0];
    let mut projection = |fan_out: usize, scales: Vec<f32>| {
        let mut a = v.take(adapters * rank * fan_in, 0.5);
        for r in 4..rank {
            a[(2 * rank + r) * fan_in..][..fan_in].fill(0.0);
        }
        LoraCase {
            fan_in,
            fan_out,
            rank,
            x: x.clone(),
            y: v.take(rows * fan_out, 1.0),
            a,
            b_t: v.take(adapters * rank * fan_out, 0.5),
            scales,
            adapter_of_row: adapter_of_row.clone(),
        }
    };
    let alone = vec![projection(300, vec![2.0, 0.5, 1.25])];
    let group = vec![
        projection(300, vec![2.0, 0.5, 1.25]),
        projection(20, vec![1.0, 3.0, 0.25]),
        projection(530, vec![0.75, 1.5, 2.5]),
    ];
    vec![
        ("one projection: 3 adapters and none, rank 6", alone),
        (
            "q, k and v in one launch: 300, 20 and 530 outputs, scales of their own",
            group,
        ),
    ]
}

/// A chunk after a cached prefix (3 groups of 7 queries over 300 keys: more keys than a block
/// has threads), and a whole prompt of 5 (fewer keys than a warp).
pub fn softmax_cases() -> Vec<(&'static str, SoftmaxCase)> {
    let mut v = Values::new(9);
    let (len, start) = (7, 293);
    let after_prefix = SoftmaxCase {
        len,
        context: start + len,
        start,
        scores: v.take(3 * len * (start + len), 6.0),
    };
    let whole_prompt = SoftmaxCase {
        len: 5,
        context: 5,
        start: 0,
        scores: v.take(2 * 5 * 5, 6.0),
    };
    vec![
        ("7 queries after 293 cached keys, 3 groups", after_prefix),
        ("a 5-token prompt, 2 groups", whole_prompt),
    ]
}

#[derive(Debug, Clone)]
pub struct MatmulCase {
    pub rows: usize,
    pub fan_in: usize,
    pub fan_out: usize,
    /// `[rows, fan_in]`
    pub x: Vec<f32>,
    /// `[fan_out, fan_in]`
    pub w: Vec<f32>,
}

impl MatmulCase {
    /// `x` in [-1, 1] and `w` in [-0.5, 0.5], drawn from `v`.
    fn drawn(v: &mut Values, rows: usize, fan_in: usize, fan_out: usize) -> Self {
        Self {
            rows,
            fan_in,
            fan_out,
            x: v.take(rows * fan_in, 1.0),
            w: v.take(fan_out * fan_in, 0.5),
        }
    }

    /// The case with every input the kernel reads in `dtype` rounded to it.
    pub fn rounded(&self, dtype: DType) -> Self {
        Self {
            x: rounded(dtype, &self.x),
            w: rounded(dtype, &self.w),
            ..self.clone()
        }
    }

    /// The first `rows` rows alone.
    pub fn first_rows(&self, rows: usize) -> Self {
        Self {
            rows,
            x: self.x[..rows * self.fan_in].to_vec(),
            ..self.clone()
        }
    }
}

/// Rows, inputs and outputs that are not multiples of a tile or of the inputs a tile reads at
/// once: 70 rows (two row tiles), 100 inputs, 130 outputs (three output tiles); and one row,
/// as a decode step has.
pub fn matmul_cases() -> Vec<(&'static str, MatmulCase)> {
    let mut v = Values::new(10);
    let mut case = |rows, fan_in, fan_out| MatmulCase::drawn(&mut v, rows, fan_in, fan_out);
    vec![
        ("70 rows, 100 inputs, 130 outputs", case(70, 100, 130)),
        ("1 row, 37 inputs, 65 outputs", case(1, 37, 65)),
    ]
}

/// Groups of weights sharing their rows, as `skinny_matmul` multiplies them in one launch (a decode
/// step's q, k and v at small batch): 8 rows (its most) over 1,096 inputs, 137 packs of 8 bf16 or
/// 274 of 4 f32, so each lane goes round its unrolled group of 4 x 32 packs more than once and
/// ends in a partial group, times weights of 37, 5 and 9 outputs (warps of one block fall on two
/// weights, and the last block's are partly idle); one row over 72 inputs (9 packs: most lanes
/// read nothing) times one weight of 5 outputs.
pub fn skinny_cases() -> Vec<(&'static str, Vec<MatmulCase>)> {
    let mut v = Values::new(11);
    let mut group = |rows, fan_in, outs: &[usize]| -> Vec<MatmulCase> {
        let x = v.take(rows * fan_in, 1.0);
        outs.iter()
            .map(|&fan_out| MatmulCase {
                rows,
                fan_in,
                fan_out,
                x: x.clone(),
                w: v.take(fan_out * fan_in, 0.5),
            })
            .collect()
    };
    vec![
        (
            "8 rows, 1,096 inputs, weights of 37, 5 and 9 outputs",
            group(8, 1_096, &[37, 5, 9]),
        ),
        (
            "1 row, 72 inputs, one weight of 5 outputs",
            group(1, 72, &[5]),
        ),
    ]
}

/// A row with a tie for the maximum (the lower id wins) and an infinity (never chosen), a row
/// of -inf but one NaN (no token), and a row whose maximum is the last id.
pub fn argmax_case() -> ArgmaxCase {
    let vocab = 1_001;
    let mut v = Values::new(7);
    let mut logits = v.take(3 * vocab, 4.0);
    logits[700] = 9.0;
    logits[300] = 9.0;
    logits[500] = f32::INFINITY;
    let second = &mut logits[vocab..2 * vocab];
    second.fill(f32::NEG_INFINITY);
    second[10] = f32::NAN;
    logits[3 * vocab - 1] = 10.0;
    ArgmaxCase { vocab, logits }
}

/// One row per policy over 1,001 tokens: plain temperature; top-k 5 whose boundary falls inside
/// a tie (the lower ids kept); top-k with top-p; top-p under an allowed-token bitset that also
/// allows an infinity and a NaN (never drawn); greedy under a bitset with a tie (the lower id);
/// a bitset whose only token has a logit of -inf (no token); a bitset of one token. The top-p
/// values and the draws are approximate here: the checks move them to the middle of the
/// interval they fall in (`reference::with_margins`).
pub fn sample_policies_case() -> SampleCase {
    let vocab = 1_001;
    let rows = 7;
    let mut v = Values::new(11);
    let mut logits = v.take(rows * vocab, 4.0);
    let row = |r: usize, id: usize| r * vocab + id;
    for id in [100, 200, 300, 400] {
        logits[row(1, id)] = 9.0;
    }
    for id in [50, 60, 70] {
        logits[row(1, id)] = 8.0;
    }
    let words = mask_words(vocab);
    let mut masks = vec![0u32; 4 * words];
    let mut allow = |mask: usize, id: usize| masks[mask * words + id / 32] |= 1 << (id % 32);
    for id in (0..vocab).step_by(7).chain([1_000]) {
        allow(0, id);
    }
    logits[row(3, 49)] = f32::INFINITY;
    logits[row(3, 56)] = f32::NAN;
    for id in [14, 21, 28, 35] {
        allow(1, id);
    }
    logits[row(4, 14)] = 7.5;
    logits[row(4, 21)] = 7.5;
    allow(2, 3);
    logits[row(5, 3)] = f32::NEG_INFINITY;
    allow(3, 999);
    SampleCase {
        vocab,
        logits,
        policies: SamplingRows {
            temperatures: vec![0.7, 1.0, 0.8, 1.2, 0.0, 0.9, 1.3],
            top_ks: vec![0, 5, 60, 0, 0, 0, 0],
            top_ps: vec![1.0, 1.0, 0.7, 0.9, 1.0, 1.0, 1.0],
            uniforms: vec![0.37, 0.93, 0.55, 0.1, 0.5, 0.5, 0.5],
            masks,
            mask_of_row: vec![-1, -1, -1, 0, 1, 2, 3],
        },
    }
}

/// One row of 37 tokens (30 allowed, top-k 12, top-p about 0.85, temperature 0.9): the checks
/// draw at both ends of every kept token's interval of [0, 1) (`reference::at_interval_ends`).
pub fn sample_distribution_case() -> SampleCase {
    let vocab = 37;
    let mut mask = 0u64;
    for id in (0..vocab).filter(|id| id % 5 != 2) {
        mask |= 1 << id;
    }
    SampleCase {
        vocab,
        logits: Values::new(12).take(vocab, 3.0),
        policies: SamplingRows {
            temperatures: vec![0.9],
            top_ks: vec![12],
            top_ps: vec![0.85],
            uniforms: vec![0.5],
            masks: vec![mask as u32, (mask >> 32) as u32],
            mask_of_row: vec![0],
        },
    }
}
