//! Rotary position embedding with per-token positions (a packed batch has no single offset).

use candle_core::{DType, Device, Result, Tensor};

#[derive(Debug, Clone)]
pub struct RotaryEmbedding {
    cos: Tensor,
    sin: Tensor,
    interleaved: bool,
}

impl RotaryEmbedding {
    /// Tables for positions `0..max_position`. Frequencies are computed in f32 as llama.cpp and
    /// candle's GGUF models do, so cached tables agree bit for bit with those references.
    pub fn new(
        head_dim: usize,
        theta: f32,
        max_position: usize,
        interleaved: bool,
        device: &Device,
    ) -> Result<Self> {
        let freqs: Vec<f32> = (0..head_dim)
            .step_by(2)
            .map(|i| 1f32 / theta.powf(i as f32 / head_dim as f32))
            .collect();
        let half = freqs.len();
        let mut angles = Vec::with_capacity(max_position * half);
        for p in 0..max_position {
            angles.extend(freqs.iter().map(|f| p as f32 * f));
        }
        let angles = Tensor::from_vec(angles, (max_position, half), device)?;
        Ok(Self {
            cos: angles.cos()?,
            sin: angles.sin()?,
            interleaved,
        })
    }

    pub fn max_position(&self) -> usize {
        self.cos.dim(0).unwrap_or(0)
    }

    /// `x`: `[heads, tokens, head_dim]`, `positions`: `[tokens]` (u32).
    pub fn apply(&self, x: &Tensor, positions: &Tensor) -> Result<Tensor> {
        let cos = self.cos.index_select(positions, 0)?;
        let sin = self.sin.index_select(positions, 0)?;
        let x = x.unsqueeze(0)?.contiguous()?;
        let dtype = x.dtype();
        let (cos, sin) = if dtype == DType::F32 {
            (cos, sin)
        } else {
            (cos.to_dtype(dtype)?, sin.to_dtype(dtype)?)
        };
        let y = if self.interleaved {
            candle_nn::rotary_emb::rope_i(&x, &cos, &sin)?
        } else {
            candle_nn::rotary_emb::rope(&x, &cos, &sin)?
        };
        y.squeeze(0)
    }
}
