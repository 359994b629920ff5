//! A frozen projection with its adapter, `x · Wᵀ + b + (m ⊙ x) · Aᵀ · (s·B)ᵀ`, as one op.
//!
//! Written with candle ops, an adapted projection is about a dozen tensors in the graph: the
//! frozen product, the bias, the dropout product, two small GEMMs, the scaled B and the sum.
//! candle's backward then fills a zeroed accumulator for every operand of each, and computes
//! gradients nothing reads (the mask's). This op keeps three tensors in the graph, `x`, `A`
//! and `B`, and its backward computes the five products the gradients need. Its forward is
//! written once over candle's backend primitives (GEMM, elementwise product and sum, affine),
//! so it runs on the CPU and on a GPU without a kernel of its own.

use candle_core::backend::BackendStorage;
use candle_core::op::{Add, Mul};
use candle_core::{CpuStorage, CudaStorage, CustomOp3, Layout, Shape, Storage, Tensor};

use crate::frozen_matmul::FrozenMatmul;
use crate::op_input::{cpu, cuda};

/// The frozen weight and bias of one projection, its dropout mask for this sequence (values 0
/// and `1 / (1 - p)`, or none) and the adapter's scale.
#[derive(Debug, Clone)]
pub struct LoraProjection {
    frozen: FrozenMatmul,
    mask: Option<Tensor>,
    scale: f64,
}

/// A storage and the layout it is read through.
type Operand<'a, S> = (&'a S, &'a Layout);

impl LoraProjection {
    pub fn new(frozen: &FrozenMatmul, mask: Option<Tensor>, scale: f64) -> Self {
        Self {
            frozen: frozen.clone(),
            mask,
            scale,
        }
    }

    /// The projection of `x` (`[rows, in]`) with the adapter `a` (`[rank, in]`) and `b`
    /// (`[out, rank]`); gradients flow to all three.
    pub fn forward(&self, x: &Tensor, a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
        let (rows, inputs) = x.dims2()?;
        let (rank, a_inputs) = a.dims2()?;
        let (outputs, b_rank) = b.dims2()?;
        let (w_outputs, w_inputs) = self.frozen.weight().dims2()?;
        if a_inputs != inputs || w_inputs != inputs || b_rank != rank || w_outputs != outputs {
            candle_core::bail!(
                "lora-projection: [{rows}, {inputs}] input, A {:?}, B {:?}, weight {:?}",
                a.dims(),
                b.dims(),
                self.frozen.weight().dims()
            );
        }
        if let Some(mask) = &self.mask
            && mask.dims() != x.dims()
        {
            candle_core::bail!(
                "lora-projection: a {:?} mask for {:?}",
                mask.dims(),
                x.dims()
            );
        }
        x.contiguous()?
            .apply_op3(&a.contiguous()?, &b.contiguous()?, self.clone())
    }

    /// The forward pass on whichever backend `pick` takes storages from.
    fn run<S: BackendStorage>(
        &self,
        pick: for<'s> fn(&'s Storage) -> Option<&'s S>,
        x: Operand<'_, S>,
        a: Operand<'_, S>,
        b: Operand<'_, S>,
    ) -> candle_core::Result<(S, Shape)> {
        let missing = || candle_core::Error::Msg("lora-projection: operands on two devices".into());
        let (rows, inputs) = x.1.shape().dims2()?;
        let (rank, _) = a.1.shape().dims2()?;
        let (outputs, _) = b.1.shape().dims2()?;
        let dense = |shape: (usize, usize)| Layout::contiguous(shape);

        let (weight, weight_layout) = self.frozen.weight().storage_and_layout();
        let weight = pick(&weight).ok_or_else(missing)?;
        let mut y = x.0.matmul(
            weight,
            (1, rows, outputs, inputs),
            x.1,
            &weight_layout.transpose(0, 1)?,
        )?;
        if let Some(bias) = self.frozen.bias() {
            let (bias, bias_layout) = bias.storage_and_layout();
            let bias = pick(&bias).ok_or_else(missing)?;
            let across_rows = bias_layout.broadcast_as((rows, outputs))?;
            y = y.binary_impl::<Add>(bias, &dense((rows, outputs)), &across_rows)?;
        }

        let dropped = match &self.mask {
            Some(mask) => {
                let (mask, mask_layout) = mask.storage_and_layout();
                let mask = pick(&mask).ok_or_else(missing)?;
                Some(x.0.binary_impl::<Mul>(mask, x.1, mask_layout)?)
            }
            None => None,
        };
        let (input, input_layout) = match &dropped {
            Some(dropped) => (dropped, dense((rows, inputs))),
            None => (x.0, x.1.clone()),
        };
        let down = input.matmul(
            a.0,
            (1, rows, rank, inputs),
            &input_layout,
            &a.1.transpose(0, 1)?,
        )?;
        // The scale goes on B (`out × rank`), as the plain composition applies it.
        let scaled_b = b.0.affine(b.1, self.scale, 0.0)?;
        let up = down.matmul(
            &scaled_b,
            (1, rows, outputs, rank),
            &dense((rows, rank)),
            &dense((outputs, rank)).transpose(0, 1)?,
        )?;
        let y = y.binary_impl::<Add>(&up, &dense((rows, outputs)), &dense((rows, outputs)))?;
        Ok((y, Shape::from((rows, outputs))))
    }
}

impl CustomOp3 for LoraProjection {
    fn name(&self) -> &'static str {
        "lora-projection"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        x_layout: &Layout,
        a: &CpuStorage,
        a_layout: &Layout,
        b: &CpuStorage,
        b_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.run(cpu, (x, x_layout), (a, a_layout), (b, b_layout))
    }

    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        x_layout: &Layout,
        a: &CudaStorage,
        a_layout: &Layout,
        b: &CudaStorage,
        b_layout: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        self.run(cuda, (x, x_layout), (a, a_layout), (b, b_layout))
    }

    /// With `g` the output's gradient, `x' = m ⊙ x`, `u = x' · Aᵀ` and `v = g · (s·B)`:
    /// `dx = g · W + m ⊙ (v · A)`, `dA = vᵀ · x'` and `dB = s · gᵀ · u`.
    fn bwd(
        &self,
        x: &Tensor,
        a: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        // Nothing computed here is part of the graph.
        let (x, a, b) = (x.detach(), a.detach(), b.detach());
        let dropped = match &self.mask {
            Some(mask) => (&x * mask)?,
            None => x.clone(),
        };
        let v = g.matmul(&(&b * self.scale)?)?;
        let through_adapter = v.matmul(&a)?;
        let through_adapter = match &self.mask {
            Some(mask) => (through_adapter * mask)?,
            None => through_adapter,
        };
        let dx = (g.matmul(self.frozen.weight())? + through_adapter)?;
        let da = v.t()?.matmul(&dropped)?;
        let u = dropped.matmul(&a.t()?)?;
        let db = (g.t()?.matmul(&u)? * self.scale)?;
        Ok((Some(dx), Some(da), Some(db)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op_test_support::{assert_same_gradients, values};
    use candle_core::Var;

    /// The plain composition the op replaces: frozen product and bias, the dropout product,
    /// then the adapter with its scale on B.
    fn plain(
        frozen: &FrozenMatmul,
        mask: Option<&Tensor>,
        scale: f64,
        x: &Tensor,
        a: &Tensor,
        b: &Tensor,
    ) -> candle_core::Result<Tensor> {
        let mut y = x.matmul(&frozen.weight().t()?)?;
        if let Some(bias) = frozen.bias() {
            y = y.broadcast_add(bias)?;
        }
        let input = match mask {
            Some(mask) => (x * mask)?,
            None => x.clone(),
        };
        y + input.matmul(&a.t()?)?.matmul(&(b * scale)?.t()?)?
    }

    /// Output and the gradients of x, A and B against candle's own derivation of the plain
    /// composition, with and without a mask and a bias, for odd sizes.
    #[test]
    fn output_and_gradients_equal_the_plain_composition() -> candle_core::Result<()> {
        let (rows, inputs, outputs, rank) = (7, 12, 9, 3);
        let x = values(&[rows, inputs], 1)?;
        let a = values(&[rank, inputs], 2)?;
        let b = values(&[outputs, rank], 3)?;
        let weight = values(&[outputs, inputs], 4)?.as_tensor().detach();
        let bias = values(&[outputs], 5)?.as_tensor().detach();
        let mask = values(&[rows, inputs], 6)?
            .as_tensor()
            .detach()
            .ge(0.0)?
            .to_dtype(candle_core::DType::F32)?
            .affine(1.25, 0.0)?;
        for frozen in [
            FrozenMatmul::new(weight.clone())?,
            FrozenMatmul::with_bias(weight.clone(), bias.clone())?,
        ] {
            for mask in [None, Some(mask.clone())] {
                let op = LoraProjection::new(&frozen, mask.clone(), 2.5);
                let (xt, at, bt) = (x.as_tensor(), a.as_tensor(), b.as_tensor());
                assert_same_gradients(
                    &[&x, &a, &b],
                    || op.forward(xt, at, bt),
                    || plain(&frozen, mask.as_ref(), 2.5, xt, at, bt),
                )?;
            }
        }
        Ok(())
    }

    #[test]
    fn operands_that_do_not_fit_are_refused() -> candle_core::Result<()> {
        let frozen = FrozenMatmul::new(values(&[4, 6], 1)?.as_tensor().detach())?;
        let x = values(&[2, 6], 2)?;
        let a = Var::zeros((3, 6), candle_core::DType::F32, &candle_core::Device::Cpu)?;
        let wrong_b = Var::zeros((5, 3), candle_core::DType::F32, &candle_core::Device::Cpu)?;
        let op = LoraProjection::new(&frozen, None, 1.0);
        assert!(op.forward(x.as_tensor(), &a, &wrong_b).is_err());
        let short_mask = Some(values(&[1, 6], 3)?.as_tensor().detach());
        let b = Var::zeros((4, 3), candle_core::DType::F32, &candle_core::Device::Cpu)?;
        let op = LoraProjection::new(&frozen, short_mask, 1.0);
        assert!(op.forward(x.as_tensor(), &a, &b).is_err());
        Ok(())
    }
}
