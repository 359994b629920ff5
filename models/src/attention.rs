//! The attention interface between a model and whoever owns the KV cache.

use candle_core::{Result, Tensor};

use crate::batch::BatchLayout;
use crate::rotary::RotaryEmbedding;

/// Stores the new keys/values of a packed batch and attends over each sequence's whole context.
///
/// Shapes (head-major): `q` `[num_heads, tokens, head_dim]`, `k`/`v`
/// `[num_kv_heads, tokens, head_dim]`, rotary already applied. Returns `[tokens, num_heads *
/// head_dim]`. Implementations: [`crate::DenseKvCache`] (one growing tensor per sequence and
/// layer) and the engine's paged cache.
pub trait Attention {
    fn attend(
        &mut self,
        layer: usize,
        batch: &BatchLayout,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor>;

    /// [`Attention::attend`] on the CPU decoder's token-major rows: `q` `[tokens, num_heads *
    /// head_dim]`, `k`/`v` `[tokens, num_kv_heads * head_dim]`; returns `[tokens, num_heads *
    /// head_dim]`. The default goes through [`Attention::attend`]'s tensors; a cache that keeps
    /// token-major rows itself (the engine's paged cache) skips the two transposes.
    fn attend_rows(
        &mut self,
        layer: usize,
        batch: &BatchLayout,
        rows: AttentionRows<'_>,
    ) -> Result<Vec<f32>> {
        let tokens = batch.n_tokens();
        let d = rows.head_dim;
        let head_major = |x: &[f32], heads: usize| -> Result<Tensor> {
            Tensor::from_slice(x, (tokens, heads, d), &candle_core::Device::Cpu)?
                .transpose(0, 1)?
                .contiguous()
        };
        let q = head_major(rows.q, rows.num_heads)?;
        let k = head_major(rows.k, rows.num_kv_heads)?;
        let v = head_major(rows.v, rows.num_kv_heads)?;
        self.attend(layer, batch, &q, &k, &v)?
            .flatten_all()?
            .to_vec1::<f32>()
    }

    /// [`Attention::attend`] for a cache that applies the rotary embedding itself as it
    /// stores the keys (one fused kernel on a GPU): token-major `q` `[tokens, num_heads,
    /// head_dim]` and `k`/`v` `[tokens, num_kv_heads, head_dim]`, not yet rotated, with each
    /// token's position (u32). Returns `None` when this cache does not, and the model rotates
    /// and calls [`Attention::attend`].
    fn attend_unrotated(
        &mut self,
        _layer: usize,
        _batch: &BatchLayout,
        _qkv: [&Tensor; 3],
        _positions: &Tensor,
        _rotary: &RotaryEmbedding,
    ) -> Option<Result<Tensor>> {
        None
    }
}

/// One layer's queries, keys and values for [`Attention::attend_rows`], token-major.
#[derive(Debug, Clone, Copy)]
pub struct AttentionRows<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
}

/// Repeats each kv head `n_rep` times so grouped-query heads line up with query heads
/// (query head h reads kv head h / n_rep).
pub fn repeat_kv(x: &Tensor, n_rep: usize) -> Result<Tensor> {
    if n_rep == 1 {
        return Ok(x.clone());
    }
    let (h, s, d) = x.dims3()?;
    x.unsqueeze(1)?
        .broadcast_as((h, n_rep, s, d))?
        .reshape((h * n_rep, s, d))
}

/// Attention of one chunk over its full context: `q` `[num_heads, len, head_dim]` at positions
/// `start..start+len`, `k`/`v` `[num_kv_heads, start+len, head_dim]`; returns `[len, num_heads *
/// head_dim]`. On CPU (f32) it runs the row-wise kernel, whose rows do not depend on chunking or
/// batching; elsewhere the candle-op reference.
pub fn causal_attention(q: &Tensor, k: &Tensor, v: &Tensor, start: usize) -> Result<Tensor> {
    if !(q.device().is_cpu() && q.dtype() == candle_core::DType::F32) {
        return causal_attention_reference(q, k, v, start);
    }
    let (num_heads, len, head_dim) = q.dims3()?;
    let (num_kv_heads, context, _) = k.dims3()?;
    let flat = |t: &Tensor| t.flatten_all()?.to_vec1::<f32>();
    let dims = quorum_kernels::AttentionDims {
        num_heads,
        num_kv_heads,
        head_dim,
        len,
        context,
        start,
    };
    let out = quorum_kernels::causal_attention_rows(&flat(q)?, &flat(k)?, &flat(v)?, dims);
    Tensor::from_vec(out, (len, num_heads * head_dim), q.device())
}

/// Plain attention of one chunk over its full context: `q` `[num_heads, len, head_dim]` at
/// positions `start..start+len`, `k`/`v` `[num_kv_heads, start+len, head_dim]`. Query i sees keys
/// `0..=start+i`. Returns `[len, num_heads * head_dim]`. This is the reference every other
/// attention path is tested against.
pub fn causal_attention_reference(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    start: usize,
) -> Result<Tensor> {
    let (n_heads, len, head_dim) = q.dims3()?;
    let n_kv = k.dim(0)?;
    let ctx = k.dim(1)?;
    let k = repeat_kv(k, n_heads / n_kv)?;
    let v = repeat_kv(v, n_heads / n_kv)?.contiguous()?;
    let scores = (q.matmul(&k.t()?)? / (head_dim as f64).sqrt())?;
    let scores = if len > 1 {
        let mask: Vec<u8> = (0..len)
            .flat_map(|i| (0..ctx).map(move |j| u8::from(j > start + i)))
            .collect();
        let mask = Tensor::from_vec(mask, (len, ctx), q.device())?.broadcast_as(scores.shape())?;
        let neg_inf = Tensor::new(f32::NEG_INFINITY, q.device())?
            .to_dtype(scores.dtype())?
            .broadcast_as(scores.shape())?;
        mask.where_cond(&neg_inf, &scores)?
    } else {
        scores
    };
    let probs = candle_nn::ops::softmax_last_dim(&scores)?;
    probs
        .matmul(&v)?
        .transpose(0, 1)?
        .reshape((len, n_heads * head_dim))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn kernel_matches_candle_reference() {
        let dev = Device::Cpu;
        // (heads, kv heads, dim, len, start): odd shapes, then the real models' shapes.
        for (h, kvh, d, len, start) in [
            (6, 2, 16, 5, 4),
            (9, 3, 64, 37, 0),
            (14, 2, 64, 1, 40),
            (14, 2, 64, 20, 7),
        ] {
            let q = (Tensor::randn(0f32, 1.0, (h, len, d), &dev).unwrap() * 3.0).unwrap();
            let k = (Tensor::randn(0f32, 1.0, (kvh, start + len, d), &dev).unwrap() * 3.0).unwrap();
            let v = Tensor::randn(0f32, 1.0, (kvh, start + len, d), &dev).unwrap();
            let a = causal_attention(&q, &k, &v, start).unwrap();
            let b = causal_attention_reference(&q, &k, &v, start).unwrap();
            let diff = (a - b)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(
                diff < 1e-4,
                "max diff {diff} for {:?}",
                (h, kvh, d, len, start)
            );
        }
    }
}
