//! The decoder's forward pass on the CPU, over plain token-major f32 rows.
//!
//! On the CPU every candle op allocates a tensor and hands its work to candle's thread pool,
//! while our kernels (int8 GEMM, attention) run on rayon's: a decode step of a 24-layer model
//! ran about 400 such ops, and the hand-offs between the two pools cost as much as the matmuls.
//! Here the layer runs on one buffer per activation: the projections call the int8 GEMM on the
//! slices, attention gets token-major rows (no transposes), and norms, rotary, SiLU and the
//! residual adds are loops over the rows. Every operation repeats the arithmetic of the candle
//! op it replaces (same operations, same order, no fused multiply-add), so this path and
//! [`DecoderModel::forward_portable`] give bit-identical logits (tested on the real models).

use candle_core::{DType, Tensor};
use rayon::prelude::*;

use crate::attention::{Attention, AttentionRows};
use crate::batch::BatchLayout;
use crate::decoder::{DecoderLayer, DecoderModel};
use crate::error::ModelResult;
use crate::linear::Linear;
use crate::lora::{LoraWeights, Proj};
use crate::row_ops::{add_into, silu_mul};

/// Rows of one chunk per LoRA work item: enough to amortize handing the item to a thread,
/// few enough that a prefill chunk spreads over every core.
const LORA_ROW_BLOCK: usize = 8;

impl DecoderModel {
    /// [`DecoderModel::forward`] on the CPU (f32): see the module docs.
    pub(crate) fn forward_cpu(
        &self,
        tokens: &[u32],
        batch: &BatchLayout,
        attention: &mut dyn Attention,
    ) -> ModelResult<Tensor> {
        let cfg = self.config();
        let h = cfg.hidden_size;
        let positions = batch.positions();
        let mut x = self.token_rows(tokens)?;
        for (i, layer) in self.layers().iter().enumerate() {
            self.layer_cpu(i, layer, &mut x, &positions, batch, attention)?;
        }
        let rows = batch.logit_rows();
        if rows.is_empty() {
            return Ok(Tensor::zeros(
                (0, cfg.vocab_size),
                DType::F32,
                self.device(),
            )?);
        }
        let mut last = Vec::with_capacity(rows.len() * h);
        for &r in &rows {
            last.extend_from_slice(&x[r as usize * h..(r as usize + 1) * h]);
        }
        let last = self.final_norm().forward_rows(&last);
        let logits = self.lm_head().forward_rows(&last, rows.len())?;
        Ok(Tensor::from_vec(
            logits,
            (rows.len(), cfg.vocab_size),
            self.device(),
        )?)
    }

    fn layer_cpu(
        &self,
        index: usize,
        layer: &DecoderLayer,
        x: &mut [f32],
        positions: &[u32],
        batch: &BatchLayout,
        attention: &mut dyn Attention,
    ) -> ModelResult<()> {
        let cfg = self.config();
        let n = positions.len();
        let proj = |linear: &Linear, which: Proj, input: &[f32]| -> ModelResult<Vec<f32>> {
            let mut y = linear.forward_rows(input, n)?;
            self.adapt_rows(index, which, input, &mut y, batch);
            Ok(y)
        };
        let h = layer.input_norm.forward_rows(x);
        let mut q = proj(&layer.q_proj, Proj::Q, &h)?;
        let mut k = proj(&layer.k_proj, Proj::K, &h)?;
        let v = proj(&layer.v_proj, Proj::V, &h)?;
        self.rotary().apply_rows(&mut q, positions, cfg.num_heads);
        self.rotary()
            .apply_rows(&mut k, positions, cfg.num_kv_heads);
        let attn = attention.attend_rows(
            index,
            batch,
            AttentionRows {
                q: &q,
                k: &k,
                v: &v,
                num_heads: cfg.num_heads,
                num_kv_heads: cfg.num_kv_heads,
                head_dim: cfg.head_dim,
            },
        )?;
        add_into(x, &proj(&layer.o_proj, Proj::O, &attn)?);
        let h = layer.post_attention_norm.forward_rows(x);
        let mut gate = proj(&layer.gate_proj, Proj::Gate, &h)?;
        let up = proj(&layer.up_proj, Proj::Up, &h)?;
        silu_mul(&mut gate, &up, cfg.intermediate_size);
        add_into(x, &proj(&layer.down_proj, Proj::Down, &gate)?);
        Ok(())
    }

    /// Adds each chunk's LoRA delta to its rows of `y`, the output of projection `which` of
    /// layer `index` on `x` (as `with_adapters` does on tensors). Rows are independent, so
    /// blocks of them run on rayon's threads: the delta of a row is the same on any thread.
    fn adapt_rows(&self, index: usize, which: Proj, x: &[f32], y: &mut [f32], batch: &BatchLayout) {
        let n = batch.n_tokens();
        if n == 0 {
            return;
        }
        let (fan_in, fan_out) = (x.len() / n, y.len() / n);
        // Disjoint blocks of adapted rows: (adapter, input rows, output rows).
        let mut blocks: Vec<(&LoraWeights, &[f32], &mut [f32])> = Vec::new();
        let mut rest = y;
        let mut row = 0;
        for c in &batch.chunks {
            let Some(adapter) = c.adapter.map(|a| &self.adapters()[a]) else {
                continue;
            };
            if !adapter.adapts(index, which) {
                continue;
            }
            let (_, tail) = std::mem::take(&mut rest).split_at_mut((c.offset - row) * fan_out);
            let (rows, tail) = tail.split_at_mut(c.len * fan_out);
            rest = tail;
            row = c.offset + c.len;
            let inputs = &x[c.offset * fan_in..row * fan_in];
            for (xs, ys) in inputs
                .chunks(LORA_ROW_BLOCK * fan_in)
                .zip(rows.chunks_mut(LORA_ROW_BLOCK * fan_out))
            {
                blocks.push((adapter, xs, ys));
            }
        }
        if blocks.len() > 1 {
            blocks
                .into_par_iter()
                .for_each(|(adapter, xs, ys)| adapter.apply_rows(index, which, xs, ys));
        } else {
            for (adapter, xs, ys) in blocks {
                adapter.apply_rows(index, which, xs, ys);
            }
        }
    }
}
