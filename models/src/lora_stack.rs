//! The loaded LoRA adapters stacked per projection for the GPU: one `A` `[adapters, rank, in]`
//! and one `Bᵀ` `[adapters, rank, out]` per adapted (layer, projection), resident on the
//! device in the model's dtype, so that a batch whose rows use different adapters (or none)
//! adds every row's delta in two launches for all the projections of one input
//! (`quorum_kernels::cuda::device::lora_bgmv`) and nothing crosses to the host. Adapters of a
//! smaller rank, or that leave the projection alone, are zero rows of the stack. The stacks are rebuilt when an adapter is added or removed: a
//! hot-loaded adapter is uploaded once, not per step.

use candle_core::{DType, Device, Tensor};

use crate::error::ModelResult;
use crate::lora::{LoraWeights, PROJECTIONS, Proj};

/// One projection's stack on the host, f32.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostStack {
    pub rank: usize,
    pub fan_in: usize,
    pub fan_out: usize,
    /// `[adapters, rank, fan_in]`
    pub a: Vec<f32>,
    /// `[adapters, rank, fan_out]`
    pub b_t: Vec<f32>,
    pub scales: Vec<f32>,
}

/// The stack of projection `proj` of `layer` over `adapters` (in their index order), or `None`
/// when none of them adapts it.
pub(crate) fn host_stack(adapters: &[LoraWeights], layer: usize, proj: Proj) -> Option<HostStack> {
    let pairs: Vec<_> = adapters.iter().map(|a| a.pair(layer, proj)).collect();
    let (fan_in, fan_out) = pairs
        .iter()
        .flatten()
        .map(|p| (p.fan_in(), p.fan_out()))
        .next()?;
    let rank = pairs.iter().flatten().map(|p| p.rank).max()?;
    let n = adapters.len();
    let mut a = vec![0f32; n * rank * fan_in];
    let mut b_t = vec![0f32; n * rank * fan_out];
    for (i, pair) in pairs.iter().enumerate() {
        if let Some(p) = pair {
            a[i * rank * fan_in..][..p.rank * fan_in].copy_from_slice(&p.a);
            b_t[i * rank * fan_out..][..p.rank * fan_out].copy_from_slice(&p.b_t);
        }
    }
    Some(HostStack {
        rank,
        fan_in,
        fan_out,
        a,
        b_t,
        scales: adapters.iter().map(LoraWeights::scale).collect(),
    })
}

/// One projection's stack on the device (read by the CUDA build's forward pass only).
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct DeviceStack {
    pub a: Tensor,
    pub b_t: Tensor,
    /// f32 `[adapters]`
    pub scales: Tensor,
}

/// Every adapted projection's stack on the model's device.
#[derive(Debug, Clone, Default)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct LoraStacks {
    /// `[layer][projection]`
    stacks: Vec<[Option<DeviceStack>; PROJECTIONS.len()]>,
}

impl LoraStacks {
    pub fn build(
        adapters: &[LoraWeights],
        num_layers: usize,
        device: &Device,
        dtype: DType,
    ) -> ModelResult<Self> {
        if adapters.is_empty() {
            return Ok(Self::default());
        }
        let upload = |s: HostStack| -> ModelResult<DeviceStack> {
            let n = s.scales.len();
            Ok(DeviceStack {
                a: Tensor::from_vec(s.a, (n, s.rank, s.fan_in), device)?.to_dtype(dtype)?,
                b_t: Tensor::from_vec(s.b_t, (n, s.rank, s.fan_out), device)?.to_dtype(dtype)?,
                scales: Tensor::from_vec(s.scales, n, device)?,
            })
        };
        let stacks = (0..num_layers)
            .map(|layer| {
                let mut row: [Option<DeviceStack>; PROJECTIONS.len()] = Default::default();
                for (slot, proj) in row.iter_mut().zip(Proj::ALL) {
                    *slot = host_stack(adapters, layer, proj).map(upload).transpose()?;
                }
                Ok(row)
            })
            .collect::<ModelResult<Vec<_>>>()?;
        Ok(Self { stacks })
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn get(&self, layer: usize, proj: Proj) -> Option<&DeviceStack> {
        self.stacks.get(layer)?[proj as usize].as_ref()
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};
    use quorum_weights::{LoraAdapter, LoraAdapterConfig};

    use super::*;
    use crate::config::{DecoderArch, DecoderConfig};
    use crate::lora::LoraKernel;

    fn config() -> DecoderConfig {
        DecoderConfig {
            arch: DecoderArch::Qwen2,
            vocab_size: 32,
            hidden_size: 24,
            intermediate_size: 40,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            head_dim: 6,
            rope_theta: 10_000.0,
            rms_norm_eps: 1e-6,
            max_position: 64,
            rope_interleaved: false,
        }
    }

    fn adapter(
        name: &str,
        rank: usize,
        modules: &[&str],
        cfg: &DecoderConfig,
        seed: f32,
    ) -> LoraWeights {
        let h = cfg.hidden_size;
        let out = |m: &str| match m {
            "self_attn.q_proj" | "self_attn.o_proj" => cfg.num_heads * cfg.head_dim,
            "self_attn.k_proj" | "self_attn.v_proj" => cfg.num_kv_heads * cfg.head_dim,
            _ => cfg.intermediate_size,
        };
        let values = |n: usize, k: f32| -> Vec<f32> {
            (0..n).map(|i| (i as f32 * 0.37 + seed * k).sin()).collect()
        };
        let modules = modules
            .iter()
            .map(|m| {
                let o = out(m);
                let a = Tensor::from_vec(values(rank * h, 1.0), (rank, h), &Device::Cpu).unwrap();
                let b = Tensor::from_vec(values(o * rank, 2.0), (o, rank), &Device::Cpu).unwrap();
                (format!("model.layers.0.{m}"), (a, b))
            })
            .collect();
        let adapter = LoraAdapter {
            name: name.into(),
            config: LoraAdapterConfig {
                r: rank,
                lora_alpha: 2.0 * rank as f64 + seed as f64,
                target_modules: Vec::new(),
                use_rslora: false,
                base_model_name_or_path: None,
                peft_type: None,
            },
            modules,
        };
        LoraWeights::new(&adapter, cfg, LoraKernel::Baseline).unwrap()
    }

    /// The stack, run by the BGMV kernel's reference, gives each row the delta its own adapter's
    /// row loop gives: ranks padded, projections an adapter leaves alone zero, no adapter none.
    #[test]
    fn stacked_deltas_equal_each_adapters_own() {
        let cfg = config();
        let adapters = vec![
            adapter("a", 4, &["self_attn.q_proj", "self_attn.v_proj"], &cfg, 1.0),
            adapter("b", 2, &["self_attn.q_proj"], &cfg, 2.0),
            adapter("c", 3, &["self_attn.v_proj"], &cfg, 3.0),
        ];
        assert!(host_stack(&adapters, 0, Proj::K).is_none());
        assert!(host_stack(&adapters, 1, Proj::Q).is_none());
        for proj in [Proj::Q, Proj::V] {
            let stack = host_stack(&adapters, 0, proj).unwrap();
            assert_eq!(stack.rank, 4);
            let rows: Vec<i32> = vec![0, 1, -1, 2, 0];
            let x: Vec<f32> = (0..rows.len() * stack.fan_in)
                .map(|i| (i as f32 * 0.11).cos())
                .collect();
            let y: Vec<f32> = (0..rows.len() * stack.fan_out)
                .map(|i| (i as f32 * 0.07).sin())
                .collect();
            let case = quorum_kernels::cuda::cases::LoraCase {
                fan_in: stack.fan_in,
                fan_out: stack.fan_out,
                rank: stack.rank,
                x: x.clone(),
                y: y.clone(),
                a: stack.a.clone(),
                b_t: stack.b_t.clone(),
                scales: stack.scales.clone(),
                adapter_of_row: rows.clone(),
            };
            let got = quorum_kernels::cuda::reference::lora(&case);
            let mut want = y.clone();
            for (r, &a) in rows.iter().enumerate() {
                if let Ok(a) = usize::try_from(a) {
                    adapters[a].apply(0, proj, &x, &mut want, r..r + 1);
                }
            }
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                    "{proj:?}: {g} against {w}"
                );
            }
        }
    }
}
