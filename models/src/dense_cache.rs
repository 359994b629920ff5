//! A KV cache of one growing tensor per sequence and layer: simple, obviously correct, used by
//! the CLI's single-stream loop, tests and training. The engine uses its paged cache instead.
//!
//! Its default attention is the candle-op one (GEMM + masked softmax), which makes the decoder
//! bit-identical to candle-transformers' models. The engine's row-wise kernel agrees with it to
//! ~1e-6 per layer, but Qwen2.5 amplifies such rounding differences (0.42 in last-position logits
//! of scale 17 on a 10-token prompt, measured), so the two paths are kept apart and tested each
//! against its own reference.

use std::collections::HashMap;

use candle_core::{Result, Tensor};

use crate::attention::{Attention, causal_attention, causal_attention_reference};
use crate::batch::BatchLayout;

#[derive(Debug, Default)]
pub struct DenseKvCache {
    /// seq_slot -> per layer (k, v), each `[num_kv_heads, context, head_dim]`.
    seqs: HashMap<usize, Vec<Option<(Tensor, Tensor)>>>,
    /// Use the row-wise kernel instead of the candle-op attention (GEMM + softmax).
    rowwise_attention: bool,
}

impl DenseKvCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache whose attention is the engine's row-wise kernel (results independent of
    /// chunking), instead of the default candle-op attention that candle-transformers' models
    /// use (bit-identical to them).
    pub fn with_rowwise_attention() -> Self {
        Self {
            rowwise_attention: true,
            ..Self::default()
        }
    }

    /// Drops a sequence's cache.
    pub fn remove(&mut self, seq_slot: usize) {
        self.seqs.remove(&seq_slot);
    }

    /// Number of cached positions of a sequence (layer 0).
    pub fn context_len(&self, seq_slot: usize) -> usize {
        self.seqs
            .get(&seq_slot)
            .and_then(|layers| layers.first().cloned().flatten())
            .map(|(k, _)| k.dim(1).unwrap_or(0))
            .unwrap_or(0)
    }

    fn append(
        &mut self,
        seq_slot: usize,
        layer: usize,
        k: Tensor,
        v: Tensor,
        start: usize,
    ) -> Result<(Tensor, Tensor)> {
        let layers = self.seqs.entry(seq_slot).or_default();
        if layers.len() <= layer {
            layers.resize(layer + 1, None);
        }
        let cached = layers[layer].as_ref().map(|(k, _)| k.dim(1)).transpose()?;
        if cached.unwrap_or(0) != start {
            candle_core::bail!(
                "sequence {seq_slot} layer {layer}: {} cached positions but the chunk starts at {start}",
                cached.unwrap_or(0)
            );
        }
        let (k, v) = match layers[layer].take() {
            Some((ck, cv)) => (Tensor::cat(&[&ck, &k], 1)?, Tensor::cat(&[&cv, &v], 1)?),
            None => (k, v),
        };
        layers[layer] = Some((k.clone(), v.clone()));
        Ok((k, v))
    }
}

impl Attention for DenseKvCache {
    fn attend(
        &mut self,
        layer: usize,
        batch: &BatchLayout,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor> {
        let mut outs = Vec::with_capacity(batch.chunks.len());
        for c in &batch.chunks {
            let kc = k.narrow(1, c.offset, c.len)?.contiguous()?;
            let vc = v.narrow(1, c.offset, c.len)?.contiguous()?;
            let (k_all, v_all) = self.append(c.seq_slot, layer, kc, vc, c.start_position)?;
            let qc = q.narrow(1, c.offset, c.len)?.contiguous()?;
            outs.push(if self.rowwise_attention {
                causal_attention(&qc, &k_all, &v_all, c.start_position)?
            } else {
                causal_attention_reference(&qc, &k_all, &v_all, c.start_position)?
            });
        }
        Tensor::cat(&outs, 0)
    }
}
