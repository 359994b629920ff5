//! `x ⊙ f` for a factor that takes no gradient: a rotary table, a norm's weight.
//!
//! candle's backward pass of a product computes the gradient of both operands, each into a
//! zeroed accumulator: for a factor as large as the activations, three passes and a buffer
//! that nothing reads. This op's backward is the one product the input's gradient needs. It runs on
//! the CPU and on a GPU through the device's own elementwise kernel.

use candle_core::backend::BackendStorage;
use candle_core::op::Mul;
use candle_core::{CpuStorage, CudaStorage, CustomOp1, Layout, Shape, Storage, Tensor};

use crate::op_input::{cpu, cuda};

/// A factor broadcast to the shape of what it multiplies.
#[derive(Debug, Clone)]
pub struct FrozenFactor {
    factor: Tensor,
}

impl FrozenFactor {
    pub fn new(factor: Tensor) -> Self {
        Self { factor }
    }

    /// `x ⊙ factor`, the factor broadcast to `x`'s shape; gradients flow to `x` only.
    pub fn apply(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.apply_op1(self.clone())
    }

    /// `storage ⊙ factor` on whichever backend `pick` takes the factor's storage from, the
    /// factor broadcast to `layout`'s shape (a view: nothing is copied).
    fn product<S: BackendStorage>(
        &self,
        pick: for<'s> fn(&'s Storage) -> Option<&'s S>,
        storage: &S,
        layout: &Layout,
    ) -> candle_core::Result<(S, Shape)> {
        let factor = self.factor.broadcast_as(layout.shape())?;
        let (factor_storage, factor_layout) = factor.storage_and_layout();
        let Some(factor_storage) = pick(&factor_storage) else {
            candle_core::bail!("frozen-factor: the factor is not on the input's device");
        };
        let product = storage.binary_impl::<Mul>(factor_storage, layout, factor_layout)?;
        Ok((product, layout.shape().clone()))
    }
}

impl CustomOp1 for FrozenFactor {
    fn name(&self) -> &'static str {
        "frozen-factor"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.product(cpu, storage, layout)
    }

    fn cuda_fwd(
        &self,
        storage: &CudaStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        self.product(cuda, storage, layout)
    }

    fn bwd(
        &self,
        _arg: &Tensor,
        _res: &Tensor,
        grad_res: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(grad_res.broadcast_mul(&self.factor)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op_test_support::{assert_same_gradients, values};

    /// A `[3, 5, 4]` input by a `[5, 4]` factor, against candle's broadcast product; the
    /// factor gets no gradient.
    #[test]
    fn output_and_gradient_equal_a_broadcast_product() -> candle_core::Result<()> {
        let x = values(&[3, 5, 4], 1)?;
        let factor = values(&[5, 4], 2)?.as_tensor().detach();
        let op = FrozenFactor::new(factor.clone());
        assert_same_gradients(
            &[&x],
            || op.apply(x.as_tensor()),
            || x.as_tensor().broadcast_mul(&factor),
        )?;
        let grads = op.apply(x.as_tensor())?.sum_all()?.backward()?;
        assert!(grads.get(&factor).is_none(), "the factor got a gradient");
        Ok(())
    }

    /// A transposed (strided) input is read through its layout.
    #[test]
    fn a_strided_input_is_read_through_its_layout() -> candle_core::Result<()> {
        let x = values(&[4, 6], 3)?.as_tensor().t()?;
        let factor = values(&[6, 4], 4)?.as_tensor().detach();
        let product = FrozenFactor::new(factor.clone()).apply(&x)?;
        assert_eq!(product.to_vec2::<f32>()?, (x * factor)?.to_vec2::<f32>()?);
        Ok(())
    }
}
