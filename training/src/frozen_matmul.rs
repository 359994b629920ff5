//! `x · Wᵀ` for a weight that is not trained.
//!
//! candle's backward pass computes the gradient of both operands of every matmul, tracked or
//! not: a frozen projection would cost a second GEMM and a weight-sized buffer per use in every
//! backward step (for a 0.5B model, about as much as the useful backward itself). This op takes
//! the weight out of the graph: its forward is the matmul, its backward only `g · W`, the
//! gradient of the input.

use candle_core::{CpuStorage, CustomOp1, Device, Layout, Shape, Tensor};

use crate::op_input::contiguous_f32;

/// A frozen `[out, in]` weight applied to `[rows, in]` activations.
#[derive(Debug, Clone)]
pub struct FrozenMatmul {
    weight: Tensor,
}

impl FrozenMatmul {
    /// `weight` is `[out, in]`, f32, on the CPU.
    pub fn new(weight: Tensor) -> candle_core::Result<Self> {
        Ok(Self {
            weight: weight.contiguous()?,
        })
    }

    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// `x · Wᵀ` for `x` of shape `[rows, in]`; gradients flow to `x` only.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.contiguous()?.apply_op1(self.clone())
    }

    /// The same product as a plain candle matmul, on any device. candle's backward then also
    /// computes the weight's gradient, a weight-sized GEMM whose result is dropped: the cost
    /// of having no kernel for this op on the device.
    pub fn plain(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.matmul(&self.weight.t()?)
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
        let x = contiguous_f32("frozen-matmul", storage, layout)?;
        let x = Tensor::from_slice(x, layout.shape(), &Device::Cpu)?;
        let y = x.matmul(&self.weight.t()?)?;
        let shape = y.shape().clone();
        Ok((CpuStorage::F32(y.flatten_all()?.to_vec1::<f32>()?), shape))
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
    use candle_core::Var;

    #[test]
    fn forward_and_input_gradient_equal_a_plain_matmul() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let w = Tensor::arange(0f32, 12.0, &dev)?
            .reshape((3, 4))?
            .affine(0.1, -0.5)?;
        let x0 = Tensor::arange(0f32, 8.0, &dev)?
            .reshape((2, 4))?
            .affine(0.3, 0.1)?;
        let x = Var::from_tensor(&x0)?;
        let frozen = FrozenMatmul::new(w.clone())?;
        let y = frozen.forward(x.as_tensor())?;
        let plain = x0.matmul(&w.t()?)?;
        assert_eq!(y.to_vec2::<f32>()?, plain.to_vec2::<f32>()?);
        // d(sum(y * c))/dx = c · W
        let c = Tensor::arange(0f32, 6.0, &dev)?.reshape((2, 3))?;
        let grads = (y * &c)?.sum_all()?.backward()?;
        let gx = grads.get(x.as_tensor()).expect("gradient of x");
        assert_eq!(gx.to_vec2::<f32>()?, c.matmul(&w)?.to_vec2::<f32>()?);
        Ok(())
    }
}
