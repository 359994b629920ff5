//! A LoRA adapter folded into its base model (`W + scale·B·A` for every adapted projection),
//! written as a Hugging Face model directory (`config.json`, `model.safetensors`, the tokenizer
//! and its chat template) that transformers, vLLM and `quorum --model DIR` load without PEFT.
//! The base may be a GGUF file: its matrices are dequantized first, so the merged model holds
//! the quantized base's values, not the original model's.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use quorum_models::{DecoderArch, DecoderConfig};
use quorum_weights::{Checkpoint, LoraAdapter};

use crate::error::{TrainError, TrainResult};
use crate::lora_params::write_json;

/// What a merge wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeReport {
    /// Tensors in `model.safetensors`.
    pub tensors: usize,
    /// Projections that received the adapter's update.
    pub merged: usize,
}

/// Writes `ckpt` with `adapter` merged into `out`, tensors stored as `dtype`.
pub fn export_merged(
    ckpt: &Checkpoint,
    adapter: &LoraAdapter,
    out: &Path,
    dtype: DType,
) -> TrainResult<MergeReport> {
    let config =
        DecoderConfig::from_checkpoint(ckpt).map_err(|e| TrainError::Model(e.to_string()))?;
    if config.rope_interleaved {
        // llama.cpp stores these q/k rows permuted; PEFT's A and B are in Hugging Face's order.
        return Err(TrainError::Model(
            "GGUF llama checkpoints store q/k rows permuted for interleaved rotary; merge into the model's safetensors checkpoint".into(),
        ));
    }
    let scale = adapter.config.scale();
    let mut tensors: HashMap<String, Tensor> = HashMap::new();
    let mut merged = 0;
    for name in ckpt.tensors.names() {
        if !(name.starts_with("model.") || name.starts_with("lm_head.")) {
            continue;
        }
        let mut weight = ckpt
            .tensors
            .get(name)
            .and_then(|t| t.to_dense())
            .map_err(|e| TrainError::Model(e.to_string()))?
            .to_device(&Device::Cpu)?
            .to_dtype(DType::F32)?;
        if let Some((a, b)) = name
            .strip_suffix(".weight")
            .and_then(|module| adapter.modules.get(module))
        {
            let update = b
                .to_dtype(DType::F32)?
                .matmul(&a.to_dtype(DType::F32)?)?
                .affine(scale, 0.0)?;
            weight = (weight + update)?;
            merged += 1;
        }
        tensors.insert(name.to_owned(), weight.to_dtype(dtype)?.contiguous()?);
    }
    if merged != adapter.modules.len() {
        let missing: Vec<&String> = adapter
            .modules
            .keys()
            .filter(|m| !tensors.contains_key(&format!("{m}.weight")))
            .collect();
        return Err(TrainError::Model(format!(
            "the adapter adapts modules the base does not have: {missing:?}"
        )));
    }
    std::fs::create_dir_all(out).map_err(|e| TrainError::io(out, e))?;
    candle_core::safetensors::save(&tensors, out.join("model.safetensors"))?;
    let tied = !tensors.contains_key("lm_head.weight");
    write_json(
        &out.join("config.json"),
        &hf_config(&config, tied, &ckpt.eos_token_ids, dtype),
    )?;
    let tokenizer_path = out.join("tokenizer.json");
    ckpt.tokenizer
        .save(&tokenizer_path, false)
        .map_err(|e| TrainError::Model(format!("writing the tokenizer: {e}")))?;
    let eos = ckpt
        .eos_token_ids
        .first()
        .and_then(|&id| ckpt.tokenizer.id_to_token(id));
    let mut tokenizer_config = serde_json::json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": config.max_position,
        "eos_token": eos,
    });
    if let Some(template) = &ckpt.chat_template {
        tokenizer_config["chat_template"] = template.source().into();
    }
    write_json(&out.join("tokenizer_config.json"), &tokenizer_config)?;
    write_json(
        &out.join("generation_config.json"),
        &serde_json::json!({ "eos_token_id": ckpt.eos_token_ids }),
    )?;
    Ok(MergeReport {
        tensors: tensors.len(),
        merged,
    })
}

/// transformers' `config.json` for `config`.
fn hf_config(config: &DecoderConfig, tied: bool, eos: &[u32], dtype: DType) -> serde_json::Value {
    let (architecture, model_type) = match config.arch {
        DecoderArch::Qwen2 => ("Qwen2ForCausalLM", "qwen2"),
        DecoderArch::Llama => ("LlamaForCausalLM", "llama"),
    };
    let torch_dtype = match dtype {
        DType::BF16 => "bfloat16",
        DType::F16 => "float16",
        _ => "float32",
    };
    serde_json::json!({
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_kv_heads,
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": config.max_position,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": config.rope_theta,
        "tie_word_embeddings": tied,
        "attention_bias": config.arch == DecoderArch::Qwen2,
        "use_sliding_window": false,
        "eos_token_id": eos.first(),
        "torch_dtype": torch_dtype,
    })
}
