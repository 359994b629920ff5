//! What each CUDA kernel computes, written plainly on the host in f32: the references the
//! kernels are checked against, in the CPU emulation (tests) and on a GPU (`quorum
//! kernel-check`). Inputs are the cases of [`super::cases`], already rounded to the dtype the
//! kernel runs in; `dtype` only marks where the kernel itself rounds an intermediate.

use candle_core::DType;

use super::cases::{
    ArgmaxCase, AttentionCase, LoraCase, MatmulCase, NormCase, RotaryCase, RotaryOutput,
    SampleCase, SoftmaxCase, round_to,
};

/// `(sum, out)`: the residual stream `x + residual` (stored in `dtype`) and its RMSNorm.
pub fn add_rms_norm(case: &NormCase, dtype: DType) -> (Option<Vec<f32>>, Vec<f32>) {
    let sum: Option<Vec<f32>> = case.residual.as_ref().map(|r| {
        case.x
            .iter()
            .zip(r)
            .map(|(a, b)| round_to(dtype, a + b))
            .collect()
    });
    let input = sum.as_deref().unwrap_or(&case.x);
    let out = input
        .chunks_exact(case.hidden)
        .flat_map(|row| {
            let mean = row.iter().map(|v| v * v).sum::<f32>() / case.hidden as f32;
            let inv_rms = 1.0 / (mean + case.eps).sqrt();
            row.iter()
                .zip(&case.weight)
                .map(move |(v, w)| v * inv_rms * w)
        })
        .collect();
    (sum, out)
}

pub fn silu_mul(gate: &[f32], up: &[f32]) -> Vec<f32> {
    gate.iter()
        .zip(up)
        .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
        .collect()
}

/// The rotated queries and the caches after the write.
pub fn rotary_kv_write(case: &RotaryCase) -> RotaryOutput {
    let (hd, half) = (case.head_dim, case.head_dim / 2);
    let width = case.kv_heads * hd;
    let rotate = |x: &[f32], position: u32, out: &mut [f32]| {
        let cos = &case.cos[position as usize * half..][..half];
        let sin = &case.sin[position as usize * half..][..half];
        for i in 0..half {
            let (a, b) = if case.interleaved {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + half)
            };
            out[a] = x[a] * cos[i] - x[b] * sin[i];
            out[b] = x[a] * sin[i] + x[b] * cos[i];
        }
    };
    let mut q = case.q.clone();
    let (mut k_cache, mut v_cache) = (case.k_cache.clone(), case.v_cache.clone());
    for (t, (&position, &slot)) in case.positions.iter().zip(&case.slots).enumerate() {
        for h in 0..case.heads {
            let at = (t * case.heads + h) * hd;
            rotate(&case.q[at..at + hd], position, &mut q[at..at + hd]);
        }
        let slot = slot as usize;
        for h in 0..case.kv_heads {
            let src = t * width + h * hd;
            let dst = slot * width + h * hd;
            rotate(
                &case.k[src..src + hd],
                position,
                &mut k_cache[dst..dst + hd],
            );
        }
        v_cache[slot * width..(slot + 1) * width]
            .copy_from_slice(&case.v[t * width..(t + 1) * width]);
    }
    RotaryOutput {
        q,
        k_cache,
        v_cache,
    }
}

/// Softmax attention of each query row over its sequence's first `context_lens[row]` keys,
/// gathered through the block table; `[rows, heads, head_dim]`.
pub fn paged_attention(case: &AttentionCase) -> Vec<f32> {
    let (hd, heads) = (case.head_dim, case.heads);
    let group = heads / case.kv_heads;
    let width = case.kv_heads * hd;
    let mut out = vec![0f32; case.seq_of_row.len() * heads * hd];
    for (row, (&seq, &context)) in case.seq_of_row.iter().zip(&case.context_lens).enumerate() {
        let table = &case.block_tables[seq as usize];
        let slot =
            |p: usize| table[p / case.block_size] as usize * case.block_size + p % case.block_size;
        for h in 0..heads {
            let q = &case.q[(row * heads + h) * hd..][..hd];
            let kv = (h / group) * hd;
            let scores: Vec<f32> = (0..context as usize)
                .map(|p| {
                    let key = &case.k_cache[slot(p) * width + kv..][..hd];
                    q.iter().zip(key).map(|(a, b)| a * case.scale * b).sum()
                })
                .collect();
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let weights: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f32 = weights.iter().sum();
            let o = &mut out[(row * heads + h) * hd..][..hd];
            for (p, w) in weights.iter().enumerate() {
                let value = &case.v_cache[slot(p) * width + kv..][..hd];
                for (o, v) in o.iter_mut().zip(value) {
                    *o += w / total * v;
                }
            }
        }
    }
    out
}

/// `y + scale[a] · B_a (A_a x)` for rows with an adapter `a`, `y` for the others.
pub fn lora(case: &LoraCase) -> Vec<f32> {
    let (fan_in, fan_out, rank) = (case.fan_in, case.fan_out, case.rank);
    let mut y = case.y.clone();
    for (row, &adapter) in case.adapter_of_row.iter().enumerate() {
        let Ok(adapter) = usize::try_from(adapter) else {
            continue;
        };
        let x = &case.x[row * fan_in..][..fan_in];
        let t: Vec<f32> = (0..rank)
            .map(|r| {
                let a = &case.a[(adapter * rank + r) * fan_in..][..fan_in];
                a.iter().zip(x).map(|(a, x)| a * x).sum()
            })
            .collect();
        for o in 0..fan_out {
            let delta: f32 = (0..rank)
                .map(|r| t[r] * case.b_t[(adapter * rank + r) * fan_out + o])
                .sum();
            y[row * fan_out + o] += case.scales[adapter] * delta;
        }
    }
    y
}

/// Each row's softmax over the keys its query sees (`p <= start + r % len`), 0 after them.
pub fn causal_softmax(case: &SoftmaxCase) -> Vec<f32> {
    let mut out = Vec::with_capacity(case.scores.len());
    for (r, row) in case.scores.chunks_exact(case.context).enumerate() {
        let seen = (case.start + r % case.len + 1).min(case.context);
        let max = row[..seen]
            .iter()
            .fold(f64::NEG_INFINITY, |m, &s| m.max(f64::from(s)));
        let total: f64 = row[..seen]
            .iter()
            .map(|&s| (f64::from(s) - max).exp())
            .sum();
        out.extend(row.iter().enumerate().map(|(p, &s)| {
            if p < seen {
                ((f64::from(s) - max).exp() / total) as f32
            } else {
                0.0
            }
        }));
    }
    out
}

/// `x · wᵀ`, summed in f64.
pub fn matmul(case: &MatmulCase) -> Vec<f32> {
    let mut y = Vec::with_capacity(case.rows * case.fan_out);
    for row in case.x.chunks_exact(case.fan_in) {
        for w in case.w.chunks_exact(case.fan_in) {
            let dot: f64 = row
                .iter()
                .zip(w)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum();
            y.push(dot as f32);
        }
    }
    y
}

/// Each row's arg-max over its finite logits, the lowest id among equal maxima; [`NO_TOKEN`]
/// for a row with no finite logit (the host sampler's rule).
pub fn argmax(case: &ArgmaxCase) -> Vec<u32> {
    case.logits
        .chunks_exact(case.vocab)
        .map(|row| {
            let mut best: Option<(usize, f32)> = None;
            for (i, &v) in row.iter().enumerate() {
                if v.is_finite() && best.is_none_or(|(_, b)| v > b) {
                    best = Some((i, v));
                }
            }
            best.map_or(NO_TOKEN, |(i, _)| i as u32)
        })
        .collect()
}

/// What the arg-max kernel writes for a row with no finite logit.
pub const NO_TOKEN: u32 = u32::MAX;

/// Row `r`'s logits.
fn sample_row(case: &SampleCase, r: usize) -> &[f32] {
    &case.logits[r * case.vocab..(r + 1) * case.vocab]
}

/// Row `r`'s allowed tokens (finite, passing its bitset) after top-k: heaviest first, ties to
/// the lower id, each with its weight `exp((logit - max) / temperature)` (in f32, as the
/// kernel computes it). Empty for a greedy row.
fn top_k_heaviest_first(case: &SampleCase, r: usize) -> Vec<(u32, f64)> {
    let p = &case.policies;
    let temperature = p.temperatures[r];
    let mut allowed: Vec<(u32, f32)> = sample_row(case, r)
        .iter()
        .enumerate()
        .filter(|&(i, v)| v.is_finite() && p.allows(r, i, case.vocab))
        .map(|(i, &v)| (i as u32, v))
        .collect();
    if temperature == 0.0 || allowed.is_empty() {
        return Vec::new();
    }
    allowed.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let k = p.top_ks[r] as usize;
    if k > 0 {
        allowed.truncate(k);
    }
    let max = allowed[0].1;
    allowed
        .into_iter()
        .map(|(id, v)| (id, f64::from(((v - max) / temperature).exp())))
        .collect()
}

/// How many of the heaviest-first tokens top-p keeps: the shortest prefix whose weight reaches
/// `top_p` of the whole.
fn nucleus_len(order: &[(u32, f64)], top_p: f32) -> usize {
    if top_p >= 1.0 {
        return order.len();
    }
    let target = f64::from(top_p) * order.iter().map(|t| t.1).sum::<f64>();
    let mut reached = 0.0;
    for (n, t) in order.iter().enumerate() {
        reached += t.1;
        if reached >= target {
            return n + 1;
        }
    }
    order.len()
}

/// The tokens row `r` draws from, in id order, with their weights: its allowed tokens, top-k,
/// then top-p. Empty for a greedy row or one with no allowed token.
pub fn kept(case: &SampleCase, r: usize) -> Vec<(u32, f64)> {
    let mut order = top_k_heaviest_first(case, r);
    order.truncate(nucleus_len(&order, case.policies.top_ps[r]));
    order.sort_by_key(|t| t.0);
    order
}

/// Each row's token: greedy rows the arg-max of their allowed tokens (the lowest id among
/// equals); sampled rows the first kept token, in id order, whose running weight exceeds the
/// row's uniform draw times the kept weight; [`NO_TOKEN`] for a row with nothing allowed.
pub fn sample(case: &SampleCase) -> Vec<u32> {
    let p = &case.policies;
    (0..case.rows())
        .map(|r| {
            if p.temperatures[r] == 0.0 {
                let mut best: Option<(usize, f32)> = None;
                for (i, &v) in sample_row(case, r).iter().enumerate() {
                    if v.is_finite()
                        && p.allows(r, i, case.vocab)
                        && best.is_none_or(|(_, b)| v > b)
                    {
                        best = Some((i, v));
                    }
                }
                return best.map_or(NO_TOKEN, |(i, _)| i as u32);
            }
            let kept = kept(case, r);
            let total: f64 = kept.iter().map(|t| t.1).sum();
            let target = p.uniforms[r] * total;
            let mut running = 0.0;
            kept.iter()
                .find(|t| {
                    running += t.1;
                    running > target
                })
                .or(kept.last())
                .map_or(NO_TOKEN, |t| t.0)
        })
        .collect()
}

/// The case with each sampled row's top-p (below 1) moved to the middle of the step where it
/// falls, between the cumulative weights of two consecutive heaviest-first tokens: a kernel
/// that sums in another order then keeps the same tokens.
pub fn centered_top_p(case: &SampleCase) -> SampleCase {
    let mut case = case.clone();
    for r in 0..case.rows() {
        let top_p = case.policies.top_ps[r];
        let order = top_k_heaviest_first(&case, r);
        if top_p >= 1.0 || order.len() < 2 {
            continue;
        }
        let n = nucleus_len(&order, top_p).min(order.len() - 1);
        let total: f64 = order.iter().map(|t| t.1).sum();
        let below: f64 = order[..n - 1].iter().map(|t| t.1).sum();
        let at = below + order[n - 1].1;
        case.policies.top_ps[r] = ((below + at) / 2.0 / total) as f32;
    }
    case
}

/// The case with each sampled row's draw moved to the middle of the kept token it selects, so
/// that a kernel summing the weights in another order selects the same one.
pub fn centered_draws(case: &SampleCase) -> SampleCase {
    let mut case = case.clone();
    for r in 0..case.rows() {
        let kept = kept(&case, r);
        let total: f64 = kept.iter().map(|t| t.1).sum();
        if kept.is_empty() {
            continue;
        }
        let target = case.policies.uniforms[r] * total;
        let i = kept
            .iter()
            .scan(0.0, |end, t| {
                *end += t.1;
                Some(*end)
            })
            .position(|end| end > target)
            .unwrap_or(kept.len() - 1);
        let below: f64 = kept[..i].iter().map(|t| t.1).sum();
        case.policies.uniforms[r] = (below + kept[i].1 / 2.0) / total;
    }
    case
}

/// Copies of `rows` of `case` drawing at both ends of kept tokens' intervals of [0, 1) (a
/// thousandth of the width inside): every kept token's, or the `most` heaviest ones' when a row
/// keeps more. With the token each copy must draw. A kernel that draws them so has the kept
/// distribution, to a thousandth of each interval.
pub fn at_interval_ends(case: &SampleCase, rows: &[usize], most: usize) -> (SampleCase, Vec<u32>) {
    let p = &case.policies;
    let mut copies = SampleCase {
        vocab: case.vocab,
        logits: Vec::new(),
        policies: super::sampling::SamplingRows {
            masks: p.masks.clone(),
            ..Default::default()
        },
    };
    let mut want = Vec::new();
    for &r in rows {
        let kept = kept(case, r);
        let total: f64 = kept.iter().map(|t| t.1).sum();
        let mut heaviest: Vec<f64> = kept.iter().map(|t| t.1).collect();
        heaviest.sort_by(|a, b| b.total_cmp(a));
        let lightest_drawn = heaviest.get(most.saturating_sub(1)).copied().unwrap_or(0.0);
        let mut below = 0.0;
        for &(id, w) in &kept {
            if w >= lightest_drawn {
                for inside in [w / 1000.0, w * 0.999] {
                    let c = &mut copies.policies;
                    copies
                        .logits
                        .extend_from_slice(&case.logits[r * case.vocab..(r + 1) * case.vocab]);
                    c.temperatures.push(p.temperatures[r]);
                    c.top_ks.push(p.top_ks[r]);
                    c.top_ps.push(p.top_ps[r]);
                    c.uniforms.push((below + inside) / total);
                    c.mask_of_row.push(p.mask_of_row[r]);
                    want.push(id);
                }
            }
            below += w;
        }
    }
    (copies, want)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::cases::argmax_case;

    #[test]
    fn the_argmax_reference_keeps_the_host_samplers_rule() {
        assert_eq!(argmax(&argmax_case()), vec![300, NO_TOKEN, 1_000]);
    }
}
