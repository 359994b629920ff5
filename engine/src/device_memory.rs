//! The KV cache sized from a GPU's free memory (`gpu_memory_fraction`) rather than a fixed
//! number of bytes: once the model's weights and adapters are on the device, the cache takes
//! that share of what is free, less a reserve for a step's activations. A model whose cache
//! would not hold one sequence of its maximum length does not fit, and says so at start-up.

use candle_core::Device;
use quorum_models::DecoderConfig;

/// A `gpu_memory_fraction` that is not a share.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("gpu_memory_fraction must be in (0, 1], not {0}")]
pub struct FractionOutOfRange(pub f64);

/// `gpu_memory_fraction` is a share: in (0, 1].
pub fn check_fraction(fraction: f64) -> Result<(), FractionOutOfRange> {
    if fraction > 0.0 && fraction <= 1.0 {
        Ok(())
    } else {
        Err(FractionOutOfRange(fraction))
    }
}

/// What sizing from free memory needs to know.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceBudget {
    /// Bytes free on the device once the model is loaded.
    pub free: u64,
    /// The share of `free` the model's KV cache and activations may take, in (0, 1].
    pub fraction: f64,
    /// Bytes kept for a step's activations ([`activation_reserve`]).
    pub reserve: u64,
}

impl DeviceBudget {
    /// The bytes left for the KV cache (0 when the reserve takes everything).
    pub fn kv_bytes(&self) -> u64 {
        ((self.free as f64 * self.fraction) as u64).saturating_sub(self.reserve)
    }
}

/// An upper estimate of one step's activations on the device, in bytes: the hidden states and
/// MLP intermediates of `max_batched_tokens` rows, the f32 logits of `max_running` rows, and
/// the scores of one prefill chunk over a full context (the long-chunk attention materializes
/// them), each counted three times over for the copies candle's ops make.
pub fn activation_reserve(
    cfg: &DecoderConfig,
    max_batched_tokens: usize,
    max_running: usize,
    max_model_len: usize,
    element_bytes: usize,
) -> u64 {
    let tokens = max_batched_tokens as u64;
    let element = element_bytes as u64;
    let hidden = tokens * (4 * cfg.hidden_size as u64 + 3 * cfg.intermediate_size as u64) * element;
    let logits = max_running as u64 * cfg.vocab_size as u64 * 4;
    let scores = cfg.num_heads as u64 * tokens * max_model_len as u64 * element;
    3 * (hidden + logits + scores)
}

/// Free bytes on `device`; `None` off CUDA.
pub fn free_bytes(device: &Device) -> candle_core::Result<Option<u64>> {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(d) => {
            let (free, _total) =
                d.cuda_stream().context().mem_get_info().map_err(|e| {
                    candle_core::Error::Msg(format!("reading free device memory: {e}"))
                })?;
            Ok(Some(free as u64))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_takes_its_share_of_free_memory_less_the_reserve() {
        let gib = 1u64 << 30;
        let budget = DeviceBudget {
            free: 60 * gib,
            fraction: 0.9,
            reserve: 4 * gib,
        };
        assert_eq!(budget.kv_bytes(), 50 * gib);
        let starved = DeviceBudget {
            reserve: 60 * gib,
            ..budget
        };
        assert_eq!(starved.kv_bytes(), 0);
    }

    #[test]
    fn the_reserve_grows_with_the_batch_and_the_context() {
        let cfg = DecoderConfig {
            arch: quorum_models::DecoderArch::Qwen2,
            vocab_size: 152_064,
            hidden_size: 3584,
            intermediate_size: 18_944,
            num_layers: 28,
            num_heads: 28,
            num_kv_heads: 4,
            head_dim: 128,
            rope_theta: 1e6,
            rms_norm_eps: 1e-6,
            max_position: 32_768,
            rope_interleaved: false,
        };
        let base = activation_reserve(&cfg, 2048, 64, 4096, 2);
        // The 7B at 2,048 batched tokens over 4,096 positions in bf16: about 3 GiB.
        assert!((2u64 << 30..5u64 << 30).contains(&base), "{base}");
        assert!(activation_reserve(&cfg, 4096, 64, 4096, 2) > base);
        assert!(activation_reserve(&cfg, 2048, 64, 8192, 2) > base);
    }
}
