//! A KV cache of one growing tensor per sequence and layer: simple, obviously correct, used by
//! tests, references and training. The engine uses its paged cache instead.

use std::collections::HashMap;

use candle_core::{Result, Tensor};

use crate::attention::{Attention, causal_attention};
use crate::batch::BatchLayout;

#[derive(Debug, Default)]
pub struct DenseKvCache {
    /// seq_slot -> per layer (k, v), each `[num_kv_heads, context, head_dim]`.
    seqs: HashMap<usize, Vec<Option<(Tensor, Tensor)>>>,
}

impl DenseKvCache {
    pub fn new() -> Self {
        Self::default()
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
            outs.push(causal_attention(&qc, &k_all, &v_all, c.start_position)?);
        }
        Tensor::cat(&outs, 0)
    }
}
