//! A Qwen2/Llama decoder with a frozen base and trainable LoRA pairs, written with candle ops
//! that have gradients, over one sequence at a time.
//!
//! The serving decoder (`quorum_models::DecoderModel`) runs quantized weights through int8
//! kernels that have no backward pass; training dequantizes the base to f32 once and runs each
//! projection without an adapter through [`FrozenMatmul`], which passes gradients to its input
//! only, and each adapted one through [`LoraProjection`]. The
//! computation is the serving decoder's (tested against it: same logits within float
//! tolerance, the adapter included), so what is trained here is what is served.

use candle_core::{D, DType, Device, Tensor};
use quorum_models::{DecoderArch, DecoderConfig};
use quorum_weights::Checkpoint;

use crate::causal_attention::{CausalAttention, causal_mask, plain_causal_attention};
use crate::dropout;
use crate::error::{TrainError, TrainResult};
use crate::frozen_matmul::FrozenMatmul;
use crate::lora_params::{LoraParams, module_name};
use crate::lora_projection::LoraProjection;
use crate::rms_norm::RmsNorm;
use crate::rotary::Rotary;
use crate::swiglu::SwiGlu;

#[derive(Debug)]
struct FrozenLayer {
    input_norm: RmsNorm,
    post_attention_norm: RmsNorm,
    /// q, k, v, o, gate, up, down, in [`crate::ALL_PROJECTIONS`] order; q, k and v carry
    /// their biases (Qwen2).
    projections: [FrozenMatmul; 7],
}

/// The frozen base model.
#[derive(Debug)]
pub struct LoraDecoder {
    config: DecoderConfig,
    embed: Tensor,
    layers: Vec<FrozenLayer>,
    norm: RmsNorm,
    head: FrozenMatmul,
    rotary: Rotary,
    device: Device,
    kernels: TrainKernels,
}

/// How a [`LoraDecoder`] computes its steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainKernels {
    /// The hand-written ops with their own backward passes (CPU only): attention's memory
    /// linear in the sequence length, one pass per elementwise step.
    Fused,
    /// Plain candle ops for the norms, rotary, attention and SwiGLU, on any device (the path on
    /// a GPU, where those ops have no kernels): more memory and more passes, the same
    /// arithmetic within float tolerance. The projections run as [`FrozenMatmul`] and
    /// [`LoraProjection`] on every device.
    Plain,
}

/// Dropout on the adapters' inputs for one forward pass; `None` evaluates without it.
pub type Dropout<'a> = Option<(f32, &'a mut rand::rngs::StdRng)>;

fn dense(ckpt: &Checkpoint, name: &str, device: &Device) -> TrainResult<Tensor> {
    let t = ckpt
        .tensors
        .get(name)
        .map_err(|e| TrainError::Model(e.to_string()))?
        .to_dense()
        .map_err(|e| TrainError::Model(e.to_string()))?;
    Ok(t.to_dtype(DType::F32)?.to_device(device)?.contiguous()?)
}

impl LoraDecoder {
    /// Dequantizes `ckpt` into f32 matrices on the CPU, with the fused kernels.
    pub fn load(ckpt: &Checkpoint) -> TrainResult<Self> {
        Self::load_with(ckpt, &Device::Cpu, TrainKernels::Fused)
    }

    /// Dequantizes `ckpt` into f32 matrices on `device`; [`TrainKernels::Fused`] needs the CPU.
    pub fn load_with(
        ckpt: &Checkpoint,
        device: &Device,
        kernels: TrainKernels,
    ) -> TrainResult<Self> {
        if kernels == TrainKernels::Fused && !device.is_cpu() {
            return Err(TrainError::Model(
                "the fused training kernels run on the CPU only; use the plain ones on a GPU"
                    .into(),
            ));
        }
        let dense = |name: &str| dense(ckpt, name, device);
        let config =
            DecoderConfig::from_checkpoint(ckpt).map_err(|e| TrainError::Model(e.to_string()))?;
        if config.rope_interleaved {
            // The adapter's q/k rows would be in llama.cpp's permuted order and PEFT expects
            // Hugging Face's: train on the safetensors checkpoint of such a model instead.
            return Err(TrainError::Model(
                "GGUF llama checkpoints store q/k rows permuted for interleaved rotary; train on the model's safetensors checkpoint".into(),
            ));
        }
        let embed = dense("model.embed_tokens.weight")?;
        let head = if ckpt.tensors.contains("lm_head.weight") {
            dense("lm_head.weight")?
        } else {
            embed.clone()
        };
        let mut layers = Vec::with_capacity(config.num_layers);
        for i in 0..config.num_layers {
            let p = |proj: &str| -> TrainResult<FrozenMatmul> {
                let weight = dense(&format!("{}.weight", module_name(i, proj)))?;
                Ok(FrozenMatmul::new(weight)?)
            };
            let biased = |proj: &str| -> TrainResult<FrozenMatmul> {
                let weight = dense(&format!("{}.weight", module_name(i, proj)))?;
                Ok(match config.arch {
                    DecoderArch::Qwen2 => FrozenMatmul::with_bias(
                        weight,
                        dense(&format!("{}.bias", module_name(i, proj)))?,
                    )?,
                    DecoderArch::Llama => FrozenMatmul::new(weight)?,
                })
            };
            let norm = |name: &str| -> TrainResult<RmsNorm> {
                Ok(RmsNorm::new(
                    &dense(&format!("model.layers.{i}.{name}.weight"))?,
                    config.rms_norm_eps,
                )?)
            };
            layers.push(FrozenLayer {
                input_norm: norm("input_layernorm")?,
                post_attention_norm: norm("post_attention_layernorm")?,
                projections: [
                    biased("q_proj")?,
                    biased("k_proj")?,
                    biased("v_proj")?,
                    p("o_proj")?,
                    p("gate_proj")?,
                    p("up_proj")?,
                    p("down_proj")?,
                ],
            });
        }
        let (cos, sin) = rotary_tables(&config)?;
        Ok(Self {
            norm: RmsNorm::new(&dense("model.norm.weight")?, config.rms_norm_eps)?,
            head: FrozenMatmul::new(head)?,
            embed,
            layers,
            rotary: Rotary::new(&cos.to_device(device)?, &sin.to_device(device)?)?,
            device: device.clone(),
            kernels,
            config,
        })
    }

    pub fn config(&self) -> &DecoderConfig {
        &self.config
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Logits `[rows, vocab]` for the positions in `rows` of `tokens` (each predicts the token
    /// after it).
    pub fn logits(
        &self,
        lora: Option<&LoraParams>,
        tokens: &[u32],
        rows: std::ops::Range<usize>,
        dropout: Dropout<'_>,
    ) -> TrainResult<Tensor> {
        if tokens.is_empty() || rows.is_empty() || rows.end > tokens.len() {
            return Err(TrainError::Data(format!(
                "rows {rows:?} of a {}-token sequence",
                tokens.len()
            )));
        }
        if tokens.len() > self.config.max_position {
            return Err(TrainError::Data(format!(
                "{} tokens exceed the model's {} positions",
                tokens.len(),
                self.config.max_position
            )));
        }
        let hidden = self.hidden_states(lora, tokens, dropout)?;
        let picked = hidden.narrow(0, rows.start, rows.len())?;
        self.frozen(&self.head, &picked)
    }

    /// Mean cross-entropy of the answer: `tokens[answer_start..]` predicted from what precedes
    /// each. The prompt's positions get no logits at all (the output projection is a quarter
    /// of a small model's compute).
    pub fn answer_loss(
        &self,
        lora: Option<&LoraParams>,
        tokens: &[u32],
        answer_start: usize,
        dropout: Dropout<'_>,
    ) -> TrainResult<Tensor> {
        if answer_start == 0 || answer_start >= tokens.len() {
            return Err(TrainError::Data(format!(
                "answer starts at {answer_start} of {} tokens",
                tokens.len()
            )));
        }
        let logits = self.logits(lora, tokens, answer_start - 1..tokens.len() - 1, dropout)?;
        let targets = Tensor::new(&tokens[answer_start..], &self.device)?.unsqueeze(1)?;
        let max = logits.max_keepdim(D::Minus1)?.detach();
        let shifted = logits.broadcast_sub(&max)?;
        let log_z = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
        let log_probs = shifted.broadcast_sub(&log_z)?;
        let picked = log_probs.gather(&targets, 1)?;
        Ok(picked.mean_all()?.neg()?)
    }

    fn hidden_states(
        &self,
        lora: Option<&LoraParams>,
        tokens: &[u32],
        mut dropout: Dropout<'_>,
    ) -> TrainResult<Tensor> {
        if let Some((_, rng)) = &mut dropout {
            dropout::seed_device(&self.device, rng)?;
        }
        let ids = Tensor::new(tokens, &self.device)?;
        let mut x = self.embed.index_select(&ids, 0)?;
        let mask = match self.kernels {
            TrainKernels::Fused => None,
            TrainKernels::Plain => Some(causal_mask(tokens.len(), &self.device)?),
        };
        for (i, layer) in self.layers.iter().enumerate() {
            let project = |x: &Tensor, k: usize, dropout: &mut Dropout<'_>| {
                self.project(lora, i, k, layer, x, dropout)
            };
            let h = self.norm(&layer.input_norm, &x)?;
            let q = project(&h, 0, &mut dropout)?;
            let k = project(&h, 1, &mut dropout)?;
            let v = project(&h, 2, &mut dropout)?;
            let attn = self.attention(&q, &k, &v, mask.as_ref())?;
            x = (x + project(&attn, 3, &mut dropout)?)?;
            let h = self.norm(&layer.post_attention_norm, &x)?;
            let gate = project(&h, 4, &mut dropout)?;
            let up = project(&h, 5, &mut dropout)?;
            let act = match self.kernels {
                TrainKernels::Fused => SwiGlu::forward(&gate, &up)?,
                TrainKernels::Plain => SwiGlu::plain(&gate, &up)?,
            };
            x = (x + project(&act, 6, &mut dropout)?)?;
        }
        self.norm(&self.norm, &x)
    }

    fn norm(&self, norm: &RmsNorm, x: &Tensor) -> TrainResult<Tensor> {
        Ok(match self.kernels {
            TrainKernels::Fused => norm.forward(x)?,
            TrainKernels::Plain => norm.plain(x)?,
        })
    }

    fn frozen(&self, weight: &FrozenMatmul, x: &Tensor) -> TrainResult<Tensor> {
        Ok(weight.forward(x)?)
    }

    /// Causal grouped-query attention over `[t, heads·head_dim]` projections; the plain kernels
    /// take the sequence's causal mask.
    fn attention(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
    ) -> TrainResult<Tensor> {
        let t = q.dim(0)?;
        let cfg = &self.config;
        let (nh, nkv, hd) = (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim);
        let heads = |x: &Tensor, n: usize| -> TrainResult<Tensor> {
            Ok(x.reshape((t, n, hd))?.transpose(0, 1)?.contiguous()?)
        };
        let (q, k, v) = (heads(q, nh)?, heads(k, nkv)?, heads(v, nkv)?);
        let out = match mask {
            None => {
                CausalAttention::forward(&self.rotary.forward(&q)?, &self.rotary.forward(&k)?, &v)?
            }
            Some(mask) => {
                plain_causal_attention(&self.rotary.plain(&q)?, &self.rotary.plain(&k)?, &v, mask)?
            }
        };
        Ok(out.transpose(0, 1)?.reshape((t, nh * hd))?)
    }

    /// Projection `k` of layer `i` (frozen weight and bias, then the adapter's `scale · B(A x)`).
    fn project(
        &self,
        lora: Option<&LoraParams>,
        i: usize,
        k: usize,
        layer: &FrozenLayer,
        x: &Tensor,
        dropout: &mut Dropout<'_>,
    ) -> TrainResult<Tensor> {
        let frozen = &layer.projections[k];
        let name = module_name(i, crate::ALL_PROJECTIONS[k]);
        let (Some(lora), Some(pair)) = (lora, lora.and_then(|l| l.get(&name))) else {
            return self.frozen(frozen, x);
        };
        let mask = match dropout {
            Some((p, rng)) if *p > 0.0 => Some(dropout::mask(x, *p, rng)?),
            _ => None,
        };
        let projection = LoraProjection::new(frozen, mask, lora.spec().scale());
        Ok(projection.forward(x, pair.a.as_tensor(), pair.b.as_tensor())?)
    }
}

/// `[max_position, head_dim/2]` cos and sin of each position times each frequency.
fn rotary_tables(cfg: &DecoderConfig) -> TrainResult<(Tensor, Tensor)> {
    let half = cfg.head_dim / 2;
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| 1.0 / cfg.rope_theta.powf(2.0 * i as f32 / cfg.head_dim as f32))
        .collect();
    let inv_freq = Tensor::from_vec(inv_freq, (1, half), &Device::Cpu)?;
    let positions = Tensor::arange(0u32, cfg.max_position as u32, &Device::Cpu)?
        .to_dtype(DType::F32)?
        .reshape((cfg.max_position, 1))?;
    let angles = positions.broadcast_mul(&inv_freq)?;
    Ok((angles.cos()?, angles.sin()?))
}
