//! GGUF files: metadata, quantized tensors (renamed to Hugging Face names), the embedded
//! tokenizer and chat template.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use rayon::prelude::*;

use crate::chat_template::ChatTemplate;
use crate::checkpoint::{Checkpoint, CheckpointFormat, ModelConfigSource};
use crate::error::{WeightsError, WeightsResult};
use crate::gguf_tokenizer::{end_of_turn_ids, tokenizer_from_gguf};
use crate::store::{StoredTensor, TensorStore};

/// Architectures whose GGUF tensor layout this loader understands.
const SUPPORTED_ARCHITECTURES: &str = "qwen2, llama";

#[derive(Debug, Clone, Default)]
pub struct GgufLoadOptions {
    pub reencode: Reencode,
}

/// Which quantized tensors are re-encoded to Q8_0 when a GGUF file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reencode {
    /// Every tensor as stored.
    None,
    /// Quantizations with no fast CPU kernel in candle (Q5_0, Q5_1, Q4_1). Costs a few seconds
    /// at load and ~1.6x their memory, buys ~10x prefill speed.
    #[default]
    Slow,
    /// Every quantized matrix (K-quants too), so the Q8_0 GEMM (`quorum_kernels::PackedQ8_0`,
    /// candle's arithmetic) runs every layer; a decode step then reads about 1.8 times the
    /// bytes of Q4_K.
    All,
    /// Every quantization that neither of Quorum's int8 GEMMs reads as stored: all but Q8_0,
    /// Q4_K and Q6_K (which `quorum_kernels::PackedKQuant` reads from the file's blocks).
    Kernels,
}

impl std::str::FromStr for Reencode {
    type Err = String;

    /// The setting's spelling in configuration files and flags: `kernels`, `all`, `slow` or
    /// `none`.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "kernels" => Ok(Self::Kernels),
            "all" => Ok(Self::All),
            "slow" => Ok(Self::Slow),
            "none" => Ok(Self::None),
            other => Err(format!(
                "reencode must be kernels, all, slow or none, not `{other}`"
            )),
        }
    }
}

impl Reencode {
    /// A model's setting when its configuration gives none: `Kernels` where Quorum's int8
    /// GEMMs run the model's matmuls (Q8_0, Q4_K and Q6_K as stored, everything else re-encoded
    /// to Q8_0), `Slow` elsewhere (on CUDA, or where candle's kernels run every matmul,
    /// re-encoding more would only cost memory).
    pub fn default_for(int8_gemm_runs: bool) -> Self {
        if int8_gemm_runs {
            Self::Kernels
        } else {
            Self::Slow
        }
    }

    fn applies_to(self, dtype: GgmlDType) -> bool {
        match self {
            Self::None => false,
            Self::Slow => matches!(dtype, GgmlDType::Q5_0 | GgmlDType::Q5_1 | GgmlDType::Q4_1),
            Self::All => !matches!(
                dtype,
                GgmlDType::Q8_0 | GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16
            ),
            Self::Kernels => !matches!(
                dtype,
                GgmlDType::Q8_0
                    | GgmlDType::Q4K
                    | GgmlDType::Q6K
                    | GgmlDType::F32
                    | GgmlDType::F16
                    | GgmlDType::BF16
            ),
        }
    }
}

fn open(path: &Path) -> WeightsResult<(gguf_file::Content, BufReader<File>)> {
    let file = File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => WeightsError::MissingFile {
            path: path.to_path_buf(),
        },
        _ => WeightsError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    })?;
    let file_len = file
        .metadata()
        .map_err(|e| WeightsError::Io {
            path: path.to_path_buf(),
            source: e,
        })?
        .len();
    let mut reader = BufReader::new(file);
    let content =
        gguf_file::Content::read(&mut reader).map_err(|e| classify_read_error(path, e))?;
    check_tensor_extents(path, &content, file_len)?;
    Ok((content, reader))
}

fn classify_read_error(path: &Path, e: candle_core::Error) -> WeightsError {
    let msg = e.to_string();
    if msg.contains("unknown dtype") || msg.contains("unsupported") {
        WeightsError::UnsupportedQuantization {
            name: "(header)".into(),
            dtype: msg,
        }
    } else {
        WeightsError::Corrupt {
            path: path.to_path_buf(),
            detail: msg,
        }
    }
}

/// A truncated download shows up here rather than as a short read in the middle of loading.
fn check_tensor_extents(path: &Path, ct: &gguf_file::Content, file_len: u64) -> WeightsResult<()> {
    for (name, info) in &ct.tensor_infos {
        let elems = info.shape.elem_count();
        let block = info.ggml_dtype.block_size();
        if elems % block != 0 {
            return Err(WeightsError::Corrupt {
                path: path.to_path_buf(),
                detail: format!("tensor `{name}` has {elems} elements, not a multiple of {block}"),
            });
        }
        let bytes = (elems / block * info.ggml_dtype.type_size()) as u64;
        let end = ct.tensor_data_offset + info.offset + bytes;
        if end > file_len {
            return Err(WeightsError::Corrupt {
                path: path.to_path_buf(),
                detail: format!(
                    "tensor `{name}` ends at byte {end} but the file has {file_len} bytes (truncated?)"
                ),
            });
        }
    }
    Ok(())
}

/// Maps a GGUF tensor name to its Hugging Face name; `None` for tensors models do not use.
pub(crate) fn hf_name(gguf_name: &str) -> Option<String> {
    let simple = match gguf_name {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(s) = simple {
        return Some(s.to_string());
    }
    let rest = gguf_name.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, suffix) = rest.rsplit_once('.')?;
    let hf_module = match module {
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf_module}.{suffix}"))
}

fn reencode(name: &str, q: QTensor, mode: Reencode) -> WeightsResult<QTensor> {
    if !mode.applies_to(q.dtype()) {
        return Ok(q);
    }
    let dense = q.dequantize(&Device::Cpu)?;
    QTensor::quantize(&dense, GgmlDType::Q8_0).map_err(|e| WeightsError::UnsupportedQuantization {
        name: name.to_string(),
        dtype: format!("{:?} (re-encoding to Q8_0 failed: {e})", q.dtype()),
    })
}

/// Reads every tensor of the file (on CPU), re-encoding as asked.
fn read_tensors(
    path: &Path,
    ct: &gguf_file::Content,
    reader: &mut BufReader<File>,
    mode: Reencode,
) -> WeightsResult<Vec<(String, QTensor)>> {
    let mut names: Vec<&String> = ct.tensor_infos.keys().collect();
    names.sort();
    let mut raw = Vec::with_capacity(names.len());
    for name in names {
        let q = ct
            .tensor(reader, name, &Device::Cpu)
            .map_err(|e| WeightsError::Corrupt {
                path: path.to_path_buf(),
                detail: format!("tensor `{name}`: {e}"),
            })?;
        raw.push((name.clone(), q));
    }
    if mode == Reencode::None {
        return Ok(raw);
    }
    raw.into_par_iter()
        .map(|(name, q)| {
            let q = reencode(&name, q, mode)?;
            Ok((name, q))
        })
        .collect()
}

fn architecture(path: &Path, ct: &gguf_file::Content) -> WeightsResult<String> {
    let arch = ct
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .ok_or_else(|| WeightsError::Corrupt {
            path: path.to_path_buf(),
            detail: "no `general.architecture` in the metadata".into(),
        })?
        .to_lowercase();
    if !matches!(arch.as_str(), "qwen2" | "llama") {
        return Err(WeightsError::UnknownArchitecture {
            architecture: arch,
            supported: SUPPORTED_ARCHITECTURES,
        });
    }
    Ok(arch)
}

/// Loads a GGUF checkpoint: tensors under Hugging Face names, tokenizer, chat template.
pub fn load_gguf(
    path: &Path,
    device: &Device,
    options: &GgufLoadOptions,
) -> WeightsResult<Checkpoint> {
    let (ct, mut reader) = open(path)?;
    let architecture = architecture(path, &ct)?;
    let tokenizer = tokenizer_from_gguf(&ct.metadata)?;
    let chat_template = match ct.metadata.get("tokenizer.chat_template") {
        Some(v) => Some(ChatTemplate::new(
            v.to_string()
                .map_err(|e| WeightsError::BadMetadata {
                    key: "tokenizer.chat_template".into(),
                    detail: e.to_string(),
                })?
                .clone(),
            special_token(&ct, "tokenizer.ggml.bos_token_id"),
            special_token(&ct, "tokenizer.ggml.eos_token_id"),
        )?),
        None => None,
    };
    let eos_token_ids = end_of_turn_ids(&ct.metadata, &tokenizer);
    let mut tensors = TensorStore::default();
    for (name, q) in read_tensors(path, &ct, &mut reader, options.reencode)? {
        let Some(hf) = hf_name(&name) else {
            tracing::debug!(tensor = %name, "ignoring GGUF tensor with no known role");
            continue;
        };
        let q = if device.is_cpu() {
            q
        } else {
            let dense = q.dequantize(&Device::Cpu)?;
            QTensor::quantize_onto(&dense, q.dtype(), device)?
        };
        tensors.insert(hf, StoredTensor::Quantized(Arc::new(q)));
    }
    Ok(Checkpoint {
        path: path.to_path_buf(),
        format: CheckpointFormat::Gguf,
        // llama.cpp permutes q/k rows of `llama` models into interleaved rotary order.
        rope_interleaved: architecture == "llama",
        architecture,
        config: ModelConfigSource::Gguf(ct.metadata),
        tensors,
        tokenizer,
        chat_template,
        eos_token_ids,
    })
}

fn special_token(ct: &gguf_file::Content, key: &str) -> Option<String> {
    let id = ct.metadata.get(key)?.to_u32().ok()? as usize;
    let tokens = ct.metadata.get("tokenizer.ggml.tokens")?.to_vec().ok()?;
    tokens.get(id)?.to_string().ok().cloned()
}

/// Writes a copy of a GGUF file with tensors re-encoded to Q8_0 as `mode` says (same metadata,
/// same tensor names). Reference implementations loading this file see exactly the weights
/// Quorum runs.
pub fn reencode_gguf_file(src: &Path, dst: &Path, mode: Reencode) -> WeightsResult<PathBuf> {
    let (ct, mut reader) = open(src)?;
    let tensors = read_tensors(src, &ct, &mut reader, mode)?;
    // A per-process temporary name: parallel test processes may race to create the same file.
    let tmp = dst.with_extension(format!("partial.{}", std::process::id()));
    let mut out = File::create(&tmp).map_err(|e| WeightsError::Io {
        path: tmp.clone(),
        source: e,
    })?;
    let metadata: Vec<(&str, &gguf_file::Value)> =
        ct.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut out, &metadata, &tensor_refs)?;
    std::fs::rename(&tmp, dst).map_err(|e| WeightsError::Io {
        path: dst.to_path_buf(),
        source: e,
    })?;
    Ok(dst.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::hf_name;

    #[test]
    fn gguf_names_map_to_hf_names() {
        assert_eq!(
            hf_name("blk.3.attn_q.bias").as_deref(),
            Some("model.layers.3.self_attn.q_proj.bias")
        );
        assert_eq!(
            hf_name("blk.12.ffn_down.weight").as_deref(),
            Some("model.layers.12.mlp.down_proj.weight")
        );
        assert_eq!(hf_name("output.weight").as_deref(), Some("lm_head.weight"));
        assert_eq!(hf_name("rope_freqs.weight"), None);
    }
}
