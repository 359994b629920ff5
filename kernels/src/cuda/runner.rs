//! A way to run the CUDA kernels on host data: on a GPU (`DeviceRunner`, under the `cuda`
//! feature) or through the CPU emulation (the crate's tests). The checks of [`super::cases`]
//! are written once against this trait and run on both.

use candle_core::{DType, Result};

use super::cases::{
    ArgmaxCase, AttentionCase, LoraCase, MatmulCase, NormCase, PrefillCase, RotaryCase,
    RotaryOutput, SampleCase, SoftmaxCase,
};

pub trait KernelRunner {
    /// Where the kernels run, for reports.
    fn name(&self) -> String;
    /// `(sum, out)` of `add_rms_norm` in `dtype`, read back as f32.
    fn add_rms_norm(&self, case: &NormCase, dtype: DType) -> Result<(Option<Vec<f32>>, Vec<f32>)>;
    fn silu_mul(&self, gate: &[f32], up: &[f32], dtype: DType) -> Result<Vec<f32>>;
    fn rotary_kv_write(&self, case: &RotaryCase, dtype: DType) -> Result<RotaryOutput>;
    fn paged_attention(&self, case: &AttentionCase, dtype: DType) -> Result<Vec<f32>>;
    /// The chunk's rows `[len, heads, head_dim]` by `prefill_attention`.
    fn prefill_attention(&self, case: &PrefillCase, dtype: DType) -> Result<Vec<f32>>;
    /// The scores after `causal_softmax` in place.
    fn causal_softmax(&self, case: &SoftmaxCase, dtype: DType) -> Result<Vec<f32>>;
    /// Each `y` of `group` (projections of one `x`, adapters per row and rank, at most
    /// [`super::launch::LORA_MAX_GROUP`]) after one shrink and one expand launch for them all.
    fn lora(&self, group: &[LoraCase], dtype: DType) -> Result<Vec<Vec<f32>>>;
    /// `x · wᵀ` by `fixed_order_matmul`.
    fn fixed_order_matmul(&self, case: &MatmulCase, dtype: DType) -> Result<Vec<f32>>;
    /// `x · wᵀ` of every case of `group` (one `x`, at most [`super::launch::SKINNY_MAX_ROWS`]
    /// rows and [`super::launch::SKINNY_MAX_WEIGHTS`] weights) in one `skinny_matmul` launch.
    fn skinny_matmul(&self, group: &[MatmulCase], dtype: DType) -> Result<Vec<Vec<f32>>>;
    fn argmax(&self, case: &ArgmaxCase, dtype: DType) -> Result<Vec<u32>>;
    /// Each row's token by `sample` under the case's per-row policies.
    fn sample(&self, case: &SampleCase, dtype: DType) -> Result<Vec<u32>>;
}
