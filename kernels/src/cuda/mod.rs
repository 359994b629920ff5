//! Quorum's own CUDA kernels (the sources are in `kernels/cuda/`), with their launch shapes,
//! host references and checks ([`check`]):
//!
//! - `add_rms_norm`: RMSNorm fused with the residual add before it;
//! - `silu_mul`: the gated MLP's activation;
//! - `rotary_kv_write`: rotary embedding fused with the write of keys and values into the
//!   paged cache;
//! - `paged_attention` (+ `_reduce`): attention of query rows straight from the cache blocks
//!   through their block tables, grouped-query heads, long contexts split (flash-decoding);
//! - `prefill_attention`: a prefill chunk's causal attention over its cached prefix and itself,
//!   read in place from the paged cache, the scores kept on chip (flash attention; tensor cores
//!   in bf16);
//! - `causal_softmax`: a prefill chunk's attention scores to probabilities in place, the causal
//!   mask worked out from each row's position;
//! - `fixed_order_matmul`: `x · wᵀ` with each output summed in input order by one thread, so a
//!   row's result does not depend on the batch (the batch-invariant mode's projections);
//! - `skinny_matmul`: `x · wᵀ` for at most 8 rows and up to three weights of the same `x` in one
//!   launch (a decode step's q/k/v or gate/up at small batch), a warp streaming each weight row
//!   once in 16-byte packs for all rows;
//! - `lora_shrink` / `lora_expand`: batched multi-LoRA (BGMV), each row its own adapter or none;
//! - `argmax`: greedy sampling on the device;
//! - `sample`: temperature, top-k, top-p and allowed-token bitsets on the device, each row its
//!   own policy ([`sampling::SamplingRows`]) and the host's uniform draw.
//!
//! `build.rs` compiles them to PTX under the `cuda` feature ([`device`] launches them on candle
//! tensors) and, on every build, for the CPU through `cuda/cpu_emulation.h`: the tests run the
//! very kernel code in that emulation against [`reference`], on the cases of [`cases`] ([`check`]);
//! `quorum kernel-check` runs the same cases on a GPU.

pub mod cases;
pub mod check;
#[cfg(feature = "cuda")]
pub mod device;
#[cfg(feature = "cuda")]
mod device_runner;
#[cfg(test)]
mod emulated;
pub mod launch;
pub mod reference;
pub mod runner;
pub mod sampling;

#[cfg(feature = "cuda")]
pub use device_runner::DeviceRunner;
pub use runner::KernelRunner;

/// The environment variable that turns Quorum's kernels off on CUDA devices (`0` or `off`):
/// candle's ops then do the same work, for comparisons.
pub const KERNELS_VAR: &str = "QUORUM_CUDA_KERNELS";

/// Whether a CUDA device runs Quorum's kernels (the default) rather than candle's ops where
/// both exist. Read once per process.
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| !turned_off(KERNELS_VAR))
}

/// Whether the environment variable `var` says `0`, `off` or `false`.
fn turned_off(var: &str) -> bool {
    matches!(
        std::env::var(var).as_deref().map(str::trim),
        Ok("0" | "off" | "false")
    )
}

/// The environment variable that keeps long prefill chunks on the two-product path (cuBLAS's
/// products around `causal_softmax`) instead of `prefill_attention` (`0` or `off`), for
/// comparisons.
pub const PREFILL_KERNEL_VAR: &str = "QUORUM_PREFILL_KERNEL";

/// Whether long prefill chunks attend through `prefill_attention` (the default) where Quorum's
/// kernels run; the engine also keeps the two-product path for a head dimension the kernel does
/// not take ([`launch::prefill_attention`]). Read once per process.
pub fn prefill_kernel_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| enabled() && !turned_off(PREFILL_KERNEL_VAR))
}

/// The environment variable that keeps every dense projection on cuBLAS (`0` or `off`) instead
/// of `skinny_matmul` for steps of at most [`launch::SKINNY_MAX_ROWS`] rows, for comparisons.
pub const SKINNY_KERNEL_VAR: &str = "QUORUM_SKINNY_KERNEL";

/// Whether dense projections of a few rows run `skinny_matmul` (the default) where Quorum's
/// kernels run and [`launch::skinny_matmul_takes`] the shape. Read once per process.
pub fn skinny_kernel_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| enabled() && !turned_off(SKINNY_KERNEL_VAR))
}
