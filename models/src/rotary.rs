//! Rotary position embedding with per-token positions (a packed batch has no single offset).

use candle_core::{DType, Device, Result, Tensor};

#[derive(Debug, Clone)]
pub struct RotaryEmbedding {
    cos: Tensor,
    sin: Tensor,
    /// The same tables on the host (`[max_position][head_dim / 2]`), for [`Self::apply_rows`].
    cos_rows: Vec<f32>,
    sin_rows: Vec<f32>,
    half: usize,
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
        let (cos, sin) = (angles.cos()?, angles.sin()?);
        let host = |t: &Tensor| t.flatten_all()?.to_device(&Device::Cpu)?.to_vec1::<f32>();
        Ok(Self {
            cos_rows: host(&cos)?,
            sin_rows: host(&sin)?,
            half,
            cos,
            sin,
            interleaved,
        })
    }

    /// Rotates token-major rows in place: `x` holds `positions.len()` rows of `heads` vectors of
    /// `2 * half` values. The arithmetic is candle's `rope`/`rope_i` (`x0 cos - x1 sin`,
    /// `x0 sin + x1 cos`, unfused), so [`Self::apply`] and this agree bit for bit.
    pub fn apply_rows(&self, x: &mut [f32], positions: &[u32], heads: usize) {
        let (half, d) = (self.half, 2 * self.half);
        for (row, &p) in x.chunks_exact_mut(heads * d).zip(positions) {
            let cos = &self.cos_rows[p as usize * half..(p as usize + 1) * half];
            let sin = &self.sin_rows[p as usize * half..(p as usize + 1) * half];
            for head in row.chunks_exact_mut(d) {
                for i in 0..half {
                    let (a, b) = if self.interleaved {
                        (2 * i, 2 * i + 1)
                    } else {
                        (i, i + half)
                    };
                    let (x0, x1) = (head[a], head[b]);
                    head[a] = x0 * cos[i] - x1 * sin[i];
                    head[b] = x0 * sin[i] + x1 * cos[i];
                }
            }
        }
    }

    /// The tables `[max_position, head_dim / 2]` (f32, on the model's device) and whether the
    /// pairs are interleaved, for a kernel that rotates by itself.
    pub fn tables(&self) -> (&Tensor, &Tensor, bool) {
        (&self.cos, &self.sin, self.interleaved)
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
