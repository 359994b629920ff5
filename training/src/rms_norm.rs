//! RMS normalization by a frozen weight, as one op with its own backward pass.
//!
//! Written with candle ops, `x / rms(x) · w` is seven passes over the activations forward and
//! about twice that backward, each into a freshly allocated tensor, mostly on one thread; in a
//! training step these small ops took about as long as the GEMMs they sit between. This op is
//! one parallel pass each way. The weight is frozen (LoRA trains the projections only), so
//! the backward pass gives the input's gradient alone.

use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp1, Device, Layout, Shape, Tensor};
use rayon::prelude::*;

use crate::frozen_factor::FrozenFactor;
use crate::op_input::contiguous_f32;

/// `x / sqrt(mean(x²) + eps) · w` over the last dimension.
#[derive(Debug, Clone)]
pub struct RmsNorm {
    weight: Arc<[f32]>,
    /// The weight as given (on its device), for [`RmsNorm::plain`].
    weight_tensor: Tensor,
    eps: f32,
}

impl RmsNorm {
    pub fn new(weight: &Tensor, eps: f64) -> candle_core::Result<Self> {
        Ok(Self {
            weight: weight.flatten_all()?.to_vec1::<f32>()?.into(),
            weight_tensor: weight.clone(),
            eps: eps as f32,
        })
    }

    /// Normalizes each row of `x` (`[.., n]` with `n` the weight's length); gradients flow to
    /// `x` only.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        if x.dim(candle_core::D::Minus1)? != self.weight.len() {
            candle_core::bail!(
                "rms-norm: rows of {:?} against a weight of {}",
                x.dims(),
                self.weight.len()
            );
        }
        x.contiguous()?.apply_op1(self.clone())
    }

    /// The same normalization in plain candle ops, on any device (the op's reference).
    pub fn plain(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let r = (x.sqr()?.mean_keepdim(candle_core::D::Minus1)? + self.eps as f64)?
            .sqrt()?
            .recip()?;
        FrozenFactor::new(self.weight_tensor.clone()).apply(&x.broadcast_mul(&r)?)
    }

    /// `1 / sqrt(mean(row²) + eps)`.
    fn inverse_rms(&self, row: &[f32]) -> f32 {
        let mean_square = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
        1.0 / (mean_square + self.eps).sqrt()
    }
}

impl CustomOp1 for RmsNorm {
    fn name(&self) -> &'static str {
        "rms-norm"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous_f32("rms-norm", s, l)?;
        let n = self.weight.len();
        let mut y = vec![0f32; x.len()];
        y.par_chunks_mut(n).zip(x.par_chunks(n)).for_each(|(y, x)| {
            let r = self.inverse_rms(x);
            for ((y, &x), &w) in y.iter_mut().zip(x).zip(self.weight.iter()) {
                *y = x * r * w;
            }
        });
        Ok((CpuStorage::F32(y), l.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        // With r = 1/rms(x): dx = r · (w ∘ g) − x · r³ · Σ(w ∘ g ∘ x) / n.
        let shape = x.shape().clone();
        let x = x.detach().flatten_all()?.to_vec1::<f32>()?;
        let g = grad.detach().flatten_all()?.to_vec1::<f32>()?;
        let n = self.weight.len();
        let mut dx = vec![0f32; x.len()];
        dx.par_chunks_mut(n)
            .zip(x.par_chunks(n).zip(g.par_chunks(n)))
            .for_each(|(dx, (x, g))| {
                let r = self.inverse_rms(x);
                let wgx: f32 = x
                    .iter()
                    .zip(g)
                    .zip(self.weight.iter())
                    .map(|((x, g), w)| w * g * x)
                    .sum();
                let c = r * r * r * wgx / n as f32;
                for (((dx, &x), &g), &w) in dx.iter_mut().zip(x).zip(g).zip(self.weight.iter()) {
                    *dx = r * w * g - x * c;
                }
            });
        Ok(Some(Tensor::from_vec(dx, shape, &Device::Cpu)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op_test_support::{assert_same_gradients, values};

    #[test]
    fn output_and_gradient_equal_the_plain_ops() -> candle_core::Result<()> {
        let x = values(&[7, 19], 1)?;
        let w = values(&[19], 2)?.as_tensor().detach();
        let eps = 1e-6;
        let norm = RmsNorm::new(&w, eps)?;
        let xt = x.as_tensor();
        assert_same_gradients(&[&x], || norm.forward(xt), || norm.plain(xt))
    }

    #[test]
    fn a_row_of_another_width_is_refused() -> candle_core::Result<()> {
        let norm = RmsNorm::new(
            &Tensor::ones(4, candle_core::DType::F32, &Device::Cpu)?,
            1e-6,
        )?;
        let x = Tensor::ones((2, 5), candle_core::DType::F32, &Device::Cpu)?;
        assert!(norm.forward(&x).is_err());
        Ok(())
    }
}
