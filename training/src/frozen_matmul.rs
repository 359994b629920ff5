//! `x · Wᵀ + b` for a weight and bias that are not trained.
//!
//! candle's backward pass computes the gradient of both operands of every matmul, tracked or
//! not: a frozen projection would cost a second GEMM and a weight-sized buffer per use in every
//! backward step (for a 0.5B model, about as much as the useful backward itself). This op takes
//! the weight out of the graph: its forward is the matmul, its backward only `g · W`, the
//! gradient of the input. It runs on the CPU and on a GPU, where its forward is the device's
//! GEMM.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CudaStorage, CustomOp1, Layout, Shape, Storage, Tensor};
use rayon::prelude::*;

use crate::op_input::contiguous_f32;

/// A frozen `[out, in]` weight, and optionally an `[out]` bias, applied to `[rows, in]`
/// activations.
#[derive(Debug, Clone)]
pub struct FrozenMatmul {
    weight: Tensor,
    bias: Option<Tensor>,
}

impl FrozenMatmul {
    /// `weight` is `[out, in]`, f32.
    pub fn new(weight: Tensor) -> candle_core::Result<Self> {
        Ok(Self {
            weight: weight.contiguous()?,
            bias: None,
        })
    }

    /// With a frozen `[out]` bias added to every row: in the op's forward pass, not as a
    /// separate broadcast (one pass fewer over the output, forward and backward).
    pub fn with_bias(weight: Tensor, bias: Tensor) -> candle_core::Result<Self> {
        let (out, _) = weight.dims2()?;
        if bias.dims1()? != out {
            candle_core::bail!(
                "frozen-matmul: a bias of {:?} for {out} outputs",
                bias.shape()
            );
        }
        Ok(Self {
            weight: weight.contiguous()?,
            bias: Some(bias.contiguous()?),
        })
    }

    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// `x · Wᵀ (+ b)` for `x` of shape `[rows, in]`; gradients flow to `x` only.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let x = x.contiguous()?;
        if x.device().is_cpu() {
            return x.apply_op1(self.clone());
        }
        // Off the CPU the op is the device's GEMM alone and the bias a broadcast add (whose
        // backward is a sum over the rows, small beside the GEMM).
        let product = x.apply_op1(Self {
            weight: self.weight.clone(),
            bias: None,
        })?;
        match &self.bias {
            Some(bias) => product.broadcast_add(bias),
            None => Ok(product),
        }
    }

    /// `(rows, inputs, outputs)` of a product of an input laid out as `layout` with the weight
    /// laid out as `weight_layout`.
    fn dims(layout: &Layout, weight_layout: &Layout) -> candle_core::Result<(usize, usize, usize)> {
        let (rows, inputs) = layout.shape().dims2()?;
        let (outputs, weight_inputs) = weight_layout.shape().dims2()?;
        if weight_inputs != inputs {
            candle_core::bail!(
                "frozen-matmul: [{rows}, {inputs}] input for a [{outputs}, {weight_inputs}] weight"
            );
        }
        Ok((rows, inputs, outputs))
    }
}

impl CustomOp1 for FrozenMatmul {
    fn name(&self) -> &'static str {
        "frozen-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        // The product runs on the two storages as they are: wrapping the input in a tensor
        // and reading the result back out would copy both, activations the size of a layer.
        contiguous_f32("frozen-matmul", storage, layout)?;
        let (weight, weight_layout) = self.weight.storage_and_layout();
        let Storage::Cpu(weight) = &*weight else {
            candle_core::bail!("frozen-matmul: the weight is not on the CPU");
        };
        let (rows, inputs, outputs) = Self::dims(layout, weight_layout)?;
        let transposed = weight_layout.transpose(0, 1)?;
        let mut y = storage.matmul(weight, (1, rows, outputs, inputs), layout, &transposed)?;
        if let Some(bias) = &self.bias {
            let (bias, bias_layout) = bias.storage_and_layout();
            let (Storage::Cpu(bias), CpuStorage::F32(y)) = (&*bias, &mut y) else {
                candle_core::bail!("frozen-matmul: the bias is not f32 on the CPU");
            };
            let bias = contiguous_f32("frozen-matmul", bias, bias_layout)?;
            y.par_chunks_mut(outputs).for_each(|row| {
                row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
            });
        }
        Ok((y, Shape::from((rows, outputs))))
    }

    /// The device's GEMM; [`FrozenMatmul::forward`] adds the bias outside the op.
    fn cuda_fwd(
        &self,
        storage: &CudaStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        if self.bias.is_some() {
            candle_core::bail!("frozen-matmul: on a GPU the bias is added outside the op");
        }
        let (weight, weight_layout) = self.weight.storage_and_layout();
        let Storage::Cuda(weight) = &*weight else {
            candle_core::bail!("frozen-matmul: the weight is not on the input's GPU");
        };
        let (rows, inputs, outputs) = Self::dims(layout, weight_layout)?;
        let transposed = weight_layout.transpose(0, 1)?;
        let product = storage.matmul(weight, (1, rows, outputs, inputs), layout, &transposed)?;
        Ok((product, Shape::from((rows, outputs))))
    }

    fn bwd(
        &self,
        _arg: &Tensor,
        _res: &Tensor,
        grad_res: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(grad_res.matmul(&self.weight)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use candle_core::Var;

    /// A `[3, 4]` weight, a `[2, 4]` input and a `[2, 3]` output weighting `c`.
    fn fixture() -> candle_core::Result<(Tensor, Tensor, Tensor)> {
        let dev = Device::Cpu;
        let w = Tensor::arange(0f32, 12.0, &dev)?
            .reshape((3, 4))?
            .affine(0.1, -0.5)?;
        let x = Tensor::arange(0f32, 8.0, &dev)?
            .reshape((2, 4))?
            .affine(0.3, 0.1)?;
        let c = Tensor::arange(0f32, 6.0, &dev)?.reshape((2, 3))?;
        Ok((w, x, c))
    }

    /// The forward product of `frozen` and its input gradient, checked against `plain` and
    /// `c · W` (the gradient of `sum(y * c)`, whatever the bias).
    fn check(
        frozen: &FrozenMatmul,
        w: &Tensor,
        x0: &Tensor,
        c: &Tensor,
        plain: &Tensor,
    ) -> candle_core::Result<()> {
        let x = Var::from_tensor(x0)?;
        let y = frozen.forward(x.as_tensor())?;
        assert_eq!(y.to_vec2::<f32>()?, plain.to_vec2::<f32>()?);
        let grads = (y * c)?.sum_all()?.backward()?;
        let gx = grads.get(x.as_tensor()).expect("gradient of x");
        assert_eq!(gx.to_vec2::<f32>()?, c.matmul(w)?.to_vec2::<f32>()?);
        Ok(())
    }

    #[test]
    fn forward_and_input_gradient_equal_a_plain_matmul() -> candle_core::Result<()> {
        let (w, x, c) = fixture()?;
        let plain = x.matmul(&w.t()?)?;
        check(&FrozenMatmul::new(w.clone())?, &w, &x, &c, &plain)
    }

    #[test]
    fn the_bias_is_added_to_every_row_and_passes_no_gradient() -> candle_core::Result<()> {
        let (w, x, c) = fixture()?;
        let b = Tensor::new(&[0.25f32, -1.5, 3.0], &Device::Cpu)?;
        let plain = x.matmul(&w.t()?)?.broadcast_add(&b)?;
        check(&FrozenMatmul::with_bias(w.clone(), b)?, &w, &x, &c, &plain)?;
        let short = Tensor::new(&[1f32, 2.0], &Device::Cpu)?;
        assert!(FrozenMatmul::with_bias(w, short).is_err());
        Ok(())
    }
}
