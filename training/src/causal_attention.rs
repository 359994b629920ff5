//! Causal grouped-query attention with a backward pass that recomputes instead of storing.
//!
//! Written with plain candle ops, attention's backward keeps every intermediate of the softmax
//! (scores, masked scores, exponentials, probabilities: several `heads × t × t` f32 tensors per
//! layer) until the whole backward pass has run. At 1,024 tokens that is over 7 GB for a
//! 24-layer model, which ran a 24 GiB machine out of memory. This op saves nothing but its
//! inputs and output: one head at a time, the forward computes the scores, the softmax and the
//! weighted values and drops the `t × t` matrices, and the backward computes them again from
//! `q` and `k` (the memory-efficient attention of FlashAttention's backward, here per head on
//! the CPU, with candle's GEMM for the products). Peak extra memory is a few `t × t` matrices
//! of one head.

use candle_core::{CpuStorage, CustomOp3, D, DType, Device, Layout, Shape, Tensor};
use rayon::prelude::*;

use crate::op_input::contiguous_f32;

/// `softmax(q kᵀ / √d, causal) v` over `q: [heads, t, d]` and `k, v: [kv_heads, t, d]`; each
/// kv head serves `heads / kv_heads` consecutive query heads.
#[derive(Debug, Clone, Copy)]
pub struct CausalAttention;

impl CausalAttention {
    /// Applies the op; gradients flow to `q`, `k` and `v`.
    pub fn forward(q: &Tensor, k: &Tensor, v: &Tensor) -> candle_core::Result<Tensor> {
        let (heads, t, d) = q.dims3()?;
        let (kv_heads, tk, dk) = k.dims3()?;
        if v.dims3()? != (kv_heads, tk, dk) || tk != t || dk != d {
            candle_core::bail!(
                "causal-attention: q {:?}, k {:?}, v {:?} do not fit together",
                q.dims(),
                k.dims(),
                v.dims()
            );
        }
        if kv_heads == 0 || heads % kv_heads != 0 {
            candle_core::bail!(
                "causal-attention: {heads} query heads cannot share {kv_heads} kv heads"
            );
        }
        q.contiguous()?
            .apply_op3(&k.contiguous()?, &v.contiguous()?, CausalAttention)
    }
}

/// The same attention in plain candle ops, on any device, whose gradients candle derives: the
/// op's reference, and the path on devices the op has no kernel for (its backward keeps the
/// `heads × t × t` intermediates). `mask` is [`causal_mask`] of the sequence's length, made once
/// for all the layers.
pub fn plain_causal_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &Tensor,
) -> candle_core::Result<Tensor> {
    let (heads, t, d) = q.dims3()?;
    let kv_heads = k.dim(0)?;
    let group = heads / kv_heads;
    // The query heads that share a kv head are stacked, `[kv_heads, group · t, d]`, so that
    // keys and values are not copied once per query head.
    let q = q.contiguous()?.reshape((kv_heads, group * t, d))?;
    let scores = (q.matmul(&k.t()?)? * (1.0 / (d as f64).sqrt()))?
        .reshape((kv_heads, group, t, t))?
        .broadcast_add(mask)?;
    let max = scores.max_keepdim(D::Minus1)?.detach();
    let e = scores.broadcast_sub(&max)?.exp()?;
    let probs = e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?;
    probs
        .reshape((kv_heads, group * t, t))?
        .matmul(&v.contiguous()?)?
        .reshape((heads, t, d))
}

/// `[t, t]`: 0 where a position may attend (itself and before), -1e30 after it.
pub fn causal_mask(t: usize, device: &Device) -> candle_core::Result<Tensor> {
    let mask: Vec<f32> = (0..t)
        .flat_map(|i| (0..t).map(move |j| if j > i { -1e30 } else { 0.0 }))
        .collect();
    Tensor::from_vec(mask, (t, t), device)
}

/// One head's `[t, d]` slice of a contiguous `[heads, t, d]` tensor.
fn head(x: &Tensor, h: usize) -> candle_core::Result<Tensor> {
    x.get(h)
}

/// `x · yᵀ` for `[t, d]` operands.
fn matmul_t(x: &Tensor, y: &Tensor) -> candle_core::Result<Tensor> {
    x.matmul(&y.t()?)
}

/// The causal softmax of `x yᵀ · scale`, row by row, as a `[t, t]` tensor (zeros above the
/// diagonal).
fn probabilities(q: &Tensor, k: &Tensor, scale: f32) -> candle_core::Result<Tensor> {
    let t = q.dim(0)?;
    let mut p = matmul_t(q, k)?.flatten_all()?.to_vec1::<f32>()?;
    p.par_chunks_mut(t).enumerate().for_each(|(i, row)| {
        let (seen, future) = row.split_at_mut(i + 1);
        let max = seen.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s)) * scale;
        let mut sum = 0f32;
        for s in seen.iter_mut() {
            *s = (*s * scale - max).exp();
            sum += *s;
        }
        let inv = 1.0 / sum;
        seen.iter_mut().for_each(|s| *s *= inv);
        future.fill(0.0);
    });
    Tensor::from_vec(p, (t, t), &Device::Cpu)
}

fn f32_tensor(s: &CpuStorage, l: &Layout) -> candle_core::Result<Tensor> {
    Tensor::from_slice(
        contiguous_f32("causal-attention", s, l)?,
        l.shape(),
        &Device::Cpu,
    )
}

impl CustomOp3 for CausalAttention {
    fn name(&self) -> &'static str {
        "causal-attention"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (q, k, v) = (
            f32_tensor(s1, l1)?,
            f32_tensor(s2, l2)?,
            f32_tensor(s3, l3)?,
        );
        let (heads, t, d) = q.dims3()?;
        let group = heads / k.dim(0)?;
        let scale = 1.0 / (d as f32).sqrt();
        let mut out = Vec::with_capacity(heads * t * d);
        for h in 0..heads {
            let g = h / group;
            let p = probabilities(&head(&q, h)?, &head(&k, g)?, scale)?;
            out.extend(p.matmul(&head(&v, g)?)?.flatten_all()?.to_vec1::<f32>()?);
        }
        Ok((CpuStorage::F32(out), Shape::from((heads, t, d))))
    }

    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        out: &Tensor,
        grad_out: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (q, k, v) = (q.detach(), k.detach(), v.detach());
        let out = out.detach();
        let grad_out = grad_out.detach().to_dtype(DType::F32)?.contiguous()?;
        let (heads, t, d) = q.dims3()?;
        let kv_heads = k.dim(0)?;
        let group = heads / kv_heads;
        let scale = 1.0 / (d as f32).sqrt();
        let mut dq = Vec::with_capacity(heads * t * d);
        let mut dk = Vec::with_capacity(kv_heads);
        let mut dv = Vec::with_capacity(kv_heads);
        for g in 0..kv_heads {
            let (kg, vg) = (head(&k, g)?, head(&v, g)?);
            let mut dk_g = Tensor::zeros((t, d), DType::F32, &Device::Cpu)?;
            let mut dv_g = Tensor::zeros((t, d), DType::F32, &Device::Cpu)?;
            for h in g * group..(g + 1) * group {
                let (qh, do_h) = (head(&q, h)?, head(&grad_out, h)?);
                let p = probabilities(&qh, &kg, scale)?;
                dv_g = (dv_g + p.t()?.matmul(&do_h)?)?;
                // dS = P ∘ (dP − rowsum(dO ∘ O)) · scale, with dP = dO vᵀ.
                let row_dot = (&do_h * head(&out, h)?)?
                    .sum_keepdim(1)?
                    .flatten_all()?
                    .to_vec1::<f32>()?;
                let mut ds = matmul_t(&do_h, &vg)?.flatten_all()?.to_vec1::<f32>()?;
                let p = p.flatten_all()?.to_vec1::<f32>()?;
                ds.par_chunks_mut(t)
                    .zip(p.par_chunks(t))
                    .zip(row_dot.par_iter())
                    .for_each(|((ds, p), &dot)| {
                        for (ds, &p) in ds.iter_mut().zip(p) {
                            *ds = p * (*ds - dot) * scale;
                        }
                    });
                let ds = Tensor::from_vec(ds, (t, t), &Device::Cpu)?;
                dq.extend(ds.matmul(&kg)?.flatten_all()?.to_vec1::<f32>()?);
                dk_g = (dk_g + ds.t()?.matmul(&qh)?)?;
            }
            dk.push(dk_g);
            dv.push(dv_g);
        }
        let dq = Tensor::from_vec(dq, (heads, t, d), &Device::Cpu)?;
        Ok((
            Some(dq),
            Some(Tensor::stack(&dk, 0)?),
            Some(Tensor::stack(&dv, 0)?),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op_test_support::{assert_same_gradients, values};

    /// Outputs and all three gradients equal those candle derives for the plain composition,
    /// with two query heads per kv head and a head size that is not a multiple of eight.
    #[test]
    fn output_and_gradients_equal_the_plain_attention() -> candle_core::Result<()> {
        let (heads, kv_heads, t, d) = (6, 2, 13, 12);
        let q = values(&[heads, t, d], 1)?;
        let k = values(&[kv_heads, t, d], 2)?;
        let v = values(&[kv_heads, t, d], 3)?;
        let (qt, kt, vt) = (q.as_tensor(), k.as_tensor(), v.as_tensor());
        assert_same_gradients(
            &[&q, &k, &v],
            || CausalAttention::forward(qt, kt, vt),
            || plain_causal_attention(qt, kt, vt, &causal_mask(qt.dim(1)?, qt.device())?),
        )?;
        Ok(())
    }

    #[test]
    fn shapes_that_do_not_fit_are_refused() -> candle_core::Result<()> {
        let q = Tensor::zeros((3, 4, 8), DType::F32, &Device::Cpu)?;
        let k = Tensor::zeros((2, 4, 8), DType::F32, &Device::Cpu)?;
        let err = CausalAttention::forward(&q, &k, &k)
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot share"), "{err}");
        let k = Tensor::zeros((1, 5, 8), DType::F32, &Device::Cpu)?;
        let err = CausalAttention::forward(&q, &k, &k)
            .unwrap_err()
            .to_string();
        assert!(err.contains("do not fit"), "{err}");
        Ok(())
    }
}
