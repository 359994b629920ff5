//! Rotary position embedding (Hugging Face's `rotate_half` pairing) as one op with its own
//! backward pass.
//!
//! In candle ops the rotation is two concatenations, a negation, two broadcast products and a
//! sum, forward and again backward. A rotation's gradient is the rotation by the opposite
//! angle, so one parallel pass does each direction.

use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp1, D, Device, Layout, Shape, Tensor};
use rayon::prelude::*;

use crate::frozen_factor::FrozenFactor;
use crate::op_input::contiguous_f32;

/// Rotates `[heads, t, head_dim]` rows by their position `0..t`: the pair
/// `(x[i], x[i + half])` by the angle of position and frequency `i`.
#[derive(Debug, Clone)]
pub struct Rotary {
    /// `[max_position, half]` cos and sin tables.
    cos: Arc<[f32]>,
    sin: Arc<[f32]>,
    half: usize,
    /// For [`Rotary::plain`], on the tables' device: `[max_position, head_dim]` tables of
    /// `cos | cos` and `-sin | sin`, so that a rotation is `x · cos + swap(x) · signed_sin`.
    tables: (Tensor, Tensor),
}

impl Rotary {
    /// `cos` and `sin` are `[max_position, head_dim / 2]`.
    pub fn new(cos: &Tensor, sin: &Tensor) -> candle_core::Result<Self> {
        let (_, half) = cos.dims2()?;
        if sin.dims() != cos.dims() {
            candle_core::bail!(
                "rotary: cos {:?} and sin {:?} tables",
                cos.dims(),
                sin.dims()
            );
        }
        Ok(Self {
            cos: cos.flatten_all()?.to_vec1::<f32>()?.into(),
            sin: sin.flatten_all()?.to_vec1::<f32>()?.into(),
            half,
            tables: (
                Tensor::cat(&[cos, cos], D::Minus1)?,
                Tensor::cat(&[&sin.neg()?, sin], D::Minus1)?,
            ),
        })
    }

    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let (_, t, d) = x.dims3()?;
        if d != 2 * self.half || t * self.half > self.cos.len() {
            candle_core::bail!(
                "rotary: {:?} against tables of {} positions and {} frequencies",
                x.dims(),
                self.cos.len() / self.half.max(1),
                self.half
            );
        }
        x.contiguous()?.apply_op1(self.clone())
    }

    /// The same rotation in plain candle ops, on any device (the op's reference).
    pub fn plain(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let t = x.dim(1)?;
        let cos = FrozenFactor::new(self.tables.0.narrow(0, 0, t)?);
        let signed_sin = FrozenFactor::new(self.tables.1.narrow(0, 0, t)?);
        let x1 = x.narrow(D::Minus1, 0, self.half)?;
        let x2 = x.narrow(D::Minus1, self.half, self.half)?;
        let swapped = Tensor::cat(&[&x2, &x1], D::Minus1)?;
        cos.apply(x)? + signed_sin.apply(&swapped)?
    }

    /// Rotates every row of `x` (`[heads, t, 2·half]`, flattened) by `sign ×` its angles.
    fn rotate(&self, x: &[f32], t: usize, sign: f32) -> Vec<f32> {
        let (half, d) = (self.half, 2 * self.half);
        let mut y = vec![0f32; x.len()];
        y.par_chunks_mut(d)
            .zip(x.par_chunks(d))
            .enumerate()
            .for_each(|(row, (y, x))| {
                let position = row % t;
                let cos = &self.cos[position * half..(position + 1) * half];
                let sin = &self.sin[position * half..(position + 1) * half];
                let (y1, y2) = y.split_at_mut(half);
                let (x1, x2) = x.split_at(half);
                for i in 0..half {
                    let s = sign * sin[i];
                    y1[i] = x1[i] * cos[i] - x2[i] * s;
                    y2[i] = x2[i] * cos[i] + x1[i] * s;
                }
            });
        y
    }
}

impl CustomOp1 for Rotary {
    fn name(&self) -> &'static str {
        "rotary"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (_, t, _) = l.shape().dims3()?;
        let y = self.rotate(contiguous_f32("rotary", s, l)?, t, 1.0);
        Ok((CpuStorage::F32(y), l.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let (_, t, _) = x.dims3()?;
        let g = grad.detach().flatten_all()?.to_vec1::<f32>()?;
        let dx = self.rotate(&g, t, -1.0);
        Ok(Some(Tensor::from_vec(dx, x.shape(), &Device::Cpu)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op_test_support::{assert_same_gradients, values};

    #[test]
    fn output_and_gradient_equal_the_plain_ops() -> candle_core::Result<()> {
        let (heads, t, half, max_position) = (3, 5, 6, 9);
        let angles = values(&[max_position, half], 1)?.as_tensor().detach();
        let (cos, sin) = (angles.cos()?, angles.sin()?);
        let rotary = Rotary::new(&cos, &sin)?;
        let x = values(&[heads, t, 2 * half], 2)?;
        let xt = x.as_tensor();
        assert_same_gradients(&[&x], || rotary.forward(xt), || rotary.plain(xt))
    }
}
