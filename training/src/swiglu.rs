//! The gated MLP's activation, `silu(gate) · up`, as one op with its own backward pass.
//!
//! In candle ops, SiLU and the product are several passes over `[t, intermediate]` tensors
//! (the largest activations of the model) each way; this op is one parallel pass each way.

use candle_core::{CpuStorage, CustomOp2, Device, Layout, Shape, Tensor};
use rayon::prelude::*;

use crate::op_input::contiguous_f32;

#[derive(Debug, Clone, Copy)]
pub struct SwiGlu;

impl SwiGlu {
    /// `silu(gate) · up` for tensors of one shape; gradients flow to both.
    pub fn forward(gate: &Tensor, up: &Tensor) -> candle_core::Result<Tensor> {
        if gate.dims() != up.dims() {
            candle_core::bail!("swiglu: gate {:?} and up {:?}", gate.dims(), up.dims());
        }
        gate.contiguous()?.apply_op2(&up.contiguous()?, SwiGlu)
    }

    /// The same activation in plain candle ops, on any device (the op's reference).
    pub fn plain(gate: &Tensor, up: &Tensor) -> candle_core::Result<Tensor> {
        gate.silu()? * up
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Parallel chunks long enough that a thread's share is worth its hand-off.
const CHUNK: usize = 4096;

impl CustomOp2 for SwiGlu {
    fn name(&self) -> &'static str {
        "swiglu"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (gate, up) = (
            contiguous_f32("swiglu", s1, l1)?,
            contiguous_f32("swiglu", s2, l2)?,
        );
        let mut y = vec![0f32; gate.len()];
        y.par_chunks_mut(CHUNK)
            .zip(gate.par_chunks(CHUNK).zip(up.par_chunks(CHUNK)))
            .for_each(|(y, (gate, up))| {
                for ((y, &g), &u) in y.iter_mut().zip(gate).zip(up) {
                    *y = g * sigmoid(g) * u;
                }
            });
        Ok((CpuStorage::F32(y), l1.shape().clone()))
    }

    fn bwd(
        &self,
        gate: &Tensor,
        up: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        // d silu(g)/dg = σ(g) · (1 + g · (1 − σ(g))).
        let shape = gate.shape().clone();
        let g = gate.detach().flatten_all()?.to_vec1::<f32>()?;
        let u = up.detach().flatten_all()?.to_vec1::<f32>()?;
        let dy = grad.detach().flatten_all()?.to_vec1::<f32>()?;
        let mut d_gate = vec![0f32; g.len()];
        let mut d_up = vec![0f32; g.len()];
        d_gate
            .par_chunks_mut(CHUNK)
            .zip(d_up.par_chunks_mut(CHUNK))
            .zip(
                g.par_chunks(CHUNK)
                    .zip(u.par_chunks(CHUNK))
                    .zip(dy.par_chunks(CHUNK)),
            )
            .for_each(|((d_gate, d_up), ((g, u), dy))| {
                for i in 0..g.len() {
                    let s = sigmoid(g[i]);
                    d_up[i] = dy[i] * g[i] * s;
                    d_gate[i] = dy[i] * u[i] * s * (1.0 + g[i] * (1.0 - s));
                }
            });
        Ok((
            Some(Tensor::from_vec(d_gate, shape.clone(), &Device::Cpu)?),
            Some(Tensor::from_vec(d_up, shape, &Device::Cpu)?),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op_test_support::{assert_same_gradients, values};

    #[test]
    fn output_and_gradients_equal_the_plain_ops() -> candle_core::Result<()> {
        // More elements than one parallel chunk, and not a multiple of it.
        let gate = values(&[3, 3001], 1)?;
        let up = values(&[3, 3001], 2)?;
        let (g, u) = (gate.as_tensor(), up.as_tensor());
        assert_same_gradients(
            &[&gate, &up],
            || SwiGlu::forward(g, u),
            || SwiGlu::plain(g, u),
        )
    }
}
