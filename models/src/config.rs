//! Decoder hyper-parameters, read from GGUF metadata or a Hugging Face config.json.

use candle_core::quantized::gguf_file::Value;
use quorum_weights::{Checkpoint, ModelConfigSource};
use std::collections::HashMap;

use crate::error::{ModelError, ModelResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecoderArch {
    /// Qwen2 / Qwen2.5(-Coder): biases on q/k/v.
    Qwen2,
    /// Llama family (SmolLM2, CodeLlama, SQLCoder): no biases.
    Llama,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DecoderConfig {
    pub arch: DecoderArch,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub rope_theta: f32,
    pub rms_norm_eps: f64,
    pub max_position: usize,
    /// True for GGUF llama files, whose q/k rows are permuted to pair adjacent rotary dims.
    pub rope_interleaved: bool,
}

fn cfg_err(detail: impl Into<String>) -> ModelError {
    ModelError::Config {
        detail: detail.into(),
    }
}

fn gguf_u(md: &HashMap<String, Value>, key: &str) -> ModelResult<usize> {
    md.get(key)
        .ok_or_else(|| cfg_err(format!("GGUF metadata has no `{key}`")))?
        .to_u32()
        .map(|v| v as usize)
        .map_err(|e| cfg_err(format!("`{key}`: {e}")))
}

fn json_u(cfg: &serde_json::Value, key: &str) -> ModelResult<usize> {
    cfg.get(key)
        .and_then(|v| v.as_u64())
        .map(|v| v as usize)
        .ok_or_else(|| cfg_err(format!("config.json has no integer `{key}`")))
}

fn arch_of(name: &str) -> ModelResult<DecoderArch> {
    match name {
        "qwen2" => Ok(DecoderArch::Qwen2),
        "llama" => Ok(DecoderArch::Llama),
        other => Err(cfg_err(format!("`{other}` is not a decoder architecture"))),
    }
}

impl DecoderConfig {
    pub fn from_checkpoint(ckpt: &Checkpoint) -> ModelResult<Self> {
        let arch = arch_of(&ckpt.architecture)?;
        let vocab_size = ckpt.tensors.get("model.embed_tokens.weight")?.dims()[0];
        match &ckpt.config {
            ModelConfigSource::Gguf(md) => {
                Self::from_gguf(arch, md, vocab_size, ckpt.rope_interleaved)
            }
            ModelConfigSource::HfConfig(cfg) => Self::from_hf(arch, cfg, vocab_size),
        }
    }

    fn from_gguf(
        arch: DecoderArch,
        md: &HashMap<String, Value>,
        vocab_size: usize,
        rope_interleaved: bool,
    ) -> ModelResult<Self> {
        let p = match arch {
            DecoderArch::Qwen2 => "qwen2",
            DecoderArch::Llama => "llama",
        };
        let hidden_size = gguf_u(md, &format!("{p}.embedding_length"))?;
        let num_heads = gguf_u(md, &format!("{p}.attention.head_count"))?;
        let head_dim =
            gguf_u(md, &format!("{p}.rope.dimension_count")).unwrap_or(hidden_size / num_heads);
        let rms_key = format!("{p}.attention.layer_norm_rms_epsilon");
        Ok(Self {
            arch,
            vocab_size,
            hidden_size,
            intermediate_size: gguf_u(md, &format!("{p}.feed_forward_length"))?,
            num_layers: gguf_u(md, &format!("{p}.block_count"))?,
            num_heads,
            num_kv_heads: gguf_u(md, &format!("{p}.attention.head_count_kv"))?,
            head_dim,
            rope_theta: md
                .get(&format!("{p}.rope.freq_base"))
                .and_then(|v| v.to_f32().ok())
                .unwrap_or(10_000.0),
            rms_norm_eps: md
                .get(&rms_key)
                .and_then(|v| v.to_f32().ok())
                .ok_or_else(|| cfg_err(format!("GGUF metadata has no `{rms_key}`")))?
                as f64,
            max_position: gguf_u(md, &format!("{p}.context_length"))?,
            rope_interleaved,
        })
    }

    fn from_hf(arch: DecoderArch, cfg: &serde_json::Value, vocab_size: usize) -> ModelResult<Self> {
        let hidden_size = json_u(cfg, "hidden_size")?;
        let num_heads = json_u(cfg, "num_attention_heads")?;
        Ok(Self {
            arch,
            vocab_size,
            hidden_size,
            intermediate_size: json_u(cfg, "intermediate_size")?,
            num_layers: json_u(cfg, "num_hidden_layers")?,
            num_heads,
            num_kv_heads: json_u(cfg, "num_key_value_heads").unwrap_or(num_heads),
            head_dim: json_u(cfg, "head_dim").unwrap_or(hidden_size / num_heads),
            rope_theta: cfg
                .get("rope_theta")
                .and_then(|v| v.as_f64())
                .unwrap_or(10_000.0) as f32,
            rms_norm_eps: cfg
                .get("rms_norm_eps")
                .and_then(|v| v.as_f64())
                .ok_or_else(|| cfg_err("config.json has no `rms_norm_eps`"))?,
            max_position: json_u(cfg, "max_position_embeddings")?,
            rope_interleaved: false,
        })
    }
}
