//! Hugging Face model directories: config.json, tokenizer.json, tokenizer_config.json (chat
//! template), and single or sharded safetensors in f32/f16/bf16.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};

use crate::chat_template::ChatTemplate;
use crate::checkpoint::{Checkpoint, CheckpointFormat, ModelConfigSource};
use crate::error::{WeightsError, WeightsResult};
use crate::store::{StoredTensor, TensorStore};

const SUPPORTED_ARCHITECTURES: &str = "qwen2, llama, bert";

pub(crate) fn read_file(path: &Path) -> WeightsResult<Vec<u8>> {
    std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => WeightsError::MissingFile {
            path: path.to_path_buf(),
        },
        _ => WeightsError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    })
}

pub(crate) fn read_json(path: &Path) -> WeightsResult<serde_json::Value> {
    let bytes = read_file(path)?;
    serde_json::from_slice(&bytes).map_err(|e| WeightsError::Corrupt {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// The shard files a `model.safetensors.index.json` at `index` names, each once, in name order.
pub(crate) fn safetensors_shards(index: &Path) -> WeightsResult<BTreeSet<String>> {
    let json = read_json(index)?;
    let map = json
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| WeightsError::Corrupt {
            path: index.to_path_buf(),
            detail: "no `weight_map` object".into(),
        })?;
    Ok(map
        .values()
        .filter_map(|v| v.as_str())
        .map(str::to_owned)
        .collect())
}

/// The safetensors files of a directory: the shards named by `model.safetensors.index.json`, or
/// the single `model.safetensors`.
fn safetensors_files(dir: &Path) -> WeightsResult<Vec<PathBuf>> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        let shards = safetensors_shards(&index)?;
        return Ok(shards.into_iter().map(|s| dir.join(s)).collect());
    }
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    Err(WeightsError::MissingFile { path: single })
}

fn candle_dtype(name: &str, dtype: safetensors::Dtype) -> WeightsResult<DType> {
    match dtype {
        safetensors::Dtype::F32 => Ok(DType::F32),
        safetensors::Dtype::F16 => Ok(DType::F16),
        safetensors::Dtype::BF16 => Ok(DType::BF16),
        other => Err(WeightsError::UnsupportedDtype {
            name: name.to_string(),
            dtype: format!("{other:?}"),
        }),
    }
}

/// Reads one safetensors file into `store`, converting every tensor to `dtype` on `device`.
pub(crate) fn load_safetensors_into(
    path: &Path,
    device: &Device,
    dtype: DType,
    store: &mut TensorStore,
) -> WeightsResult<()> {
    let bytes = read_file(path)?;
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| WeightsError::Corrupt {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    for (name, view) in st.tensors() {
        // Integer tensors in checkpoints are buffers (BERT's `position_ids`), not weights.
        if matches!(
            view.dtype(),
            safetensors::Dtype::I64 | safetensors::Dtype::I32 | safetensors::Dtype::U8
        ) {
            continue;
        }
        let src_dtype = candle_dtype(&name, view.dtype())?;
        let t = Tensor::from_raw_buffer(view.data(), src_dtype, view.shape(), &Device::Cpu)?;
        // On a GPU, copy the stored bytes and convert there: half the transfer of a bf16
        // checkpoint read as f32, and the conversion runs on the device.
        let t = if device.is_cpu() {
            t.to_dtype(dtype)?
        } else {
            t.to_device(device)?.to_dtype(dtype)?
        };
        store.insert(name, StoredTensor::Dense(t));
    }
    Ok(())
}

fn architecture(config: &serde_json::Value, path: &Path) -> WeightsResult<String> {
    let model_type = config
        .get("model_type")
        .and_then(|v| v.as_str())
        .ok_or_else(|| WeightsError::Corrupt {
            path: path.join("config.json"),
            detail: "no `model_type`".into(),
        })?
        .to_lowercase();
    if !matches!(model_type.as_str(), "qwen2" | "llama" | "bert") {
        return Err(WeightsError::UnknownArchitecture {
            architecture: model_type,
            supported: SUPPORTED_ARCHITECTURES,
        });
    }
    Ok(model_type)
}

/// The chat template and its special tokens from tokenizer_config.json, when present.
fn chat_template(dir: &Path) -> WeightsResult<Option<ChatTemplate>> {
    let path = dir.join("tokenizer_config.json");
    if !path.is_file() {
        return Ok(None);
    }
    let cfg = read_json(&path)?;
    let Some(src) = cfg.get("chat_template").and_then(|v| v.as_str()) else {
        return Ok(None);
    };
    let token = |key: &str| {
        cfg.get(key).and_then(|v| {
            v.as_str()
                .map(str::to_string)
                .or_else(|| v.get("content")?.as_str().map(str::to_string))
        })
    };
    Ok(Some(ChatTemplate::new(
        src.to_string(),
        token("bos_token"),
        token("eos_token"),
    )?))
}

/// EOS ids from config.json / generation_config.json (a number or a list) plus the tokenizer's
/// chat end tokens.
fn eos_ids(dir: &Path, config: &serde_json::Value, tok: &tokenizers::Tokenizer) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut collect = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::Number(n)) => ids.extend(n.as_u64().map(|x| x as u32)),
        Some(serde_json::Value::Array(a)) => {
            ids.extend(a.iter().filter_map(|x| x.as_u64()).map(|x| x as u32))
        }
        _ => {}
    };
    collect(config.get("eos_token_id"));
    if let Ok(gen_cfg) = read_json(&dir.join("generation_config.json")) {
        collect(gen_cfg.get("eos_token_id"));
    }
    for t in [
        "<|im_end|>",
        "<|endoftext|>",
        "<|eot_id|>",
        "<|end_of_text|>",
    ] {
        ids.extend(tok.token_to_id(t));
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Loads a Hugging Face model directory; dense tensors are converted to `dtype`.
pub fn load_hf_dir(dir: &Path, device: &Device, dtype: DType) -> WeightsResult<Checkpoint> {
    let config = read_json(&dir.join("config.json"))?;
    let architecture = architecture(&config, dir)?;
    let tok_path = dir.join("tokenizer.json");
    if !tok_path.is_file() {
        return Err(WeightsError::MissingFile { path: tok_path });
    }
    let tokenizer =
        tokenizers::Tokenizer::from_file(&tok_path).map_err(|e| WeightsError::Tokenizer {
            detail: format!("{}: {e}", tok_path.display()),
        })?;
    let mut tensors = TensorStore::default();
    for file in safetensors_files(dir)? {
        load_safetensors_into(&file, device, dtype, &mut tensors)?;
    }
    Ok(Checkpoint {
        path: dir.to_path_buf(),
        format: CheckpointFormat::Safetensors,
        eos_token_ids: eos_ids(dir, &config, &tokenizer),
        chat_template: chat_template(dir)?,
        architecture,
        config: ModelConfigSource::HfConfig(config),
        tensors,
        tokenizer,
        rope_interleaved: false,
    })
}
