//! Synthetic checkpoints: Hugging Face model directories with the exact tensor names and shapes of
//! a real architecture and seeded random values. They stand in for real weights where those
//! cannot travel (a GPU machine reached through a 64 MiB link): speed depends only on shapes, and
//! agreement between two devices only needs both to load the same bytes.
//!
//! The tokenizer is byte-level BPE with no merges (each UTF-8 byte one token), the chat tokens
//! `<|im_start|>`, `<|im_end|>` and `<|endoftext|>`, and filler tokens up to the vocabulary size,
//! so any text round-trips and prompts of a given length are easy to build.

use std::borrow::Cow;
use std::path::Path;

use rayon::prelude::*;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

use crate::error::{WeightsError, WeightsResult};

/// The shapes of one released model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyntheticArch {
    pub name: &'static str,
    /// `model_type` of config.json.
    pub model_type: &'static str,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub vocab_size: usize,
    pub tie_embeddings: bool,
    /// Qwen2 has biases on the q, k and v projections; Llama has none.
    pub qkv_bias: bool,
    pub rope_theta: f64,
    pub rms_norm_eps: f64,
    pub max_position: usize,
}

/// The architectures `quorum synth-checkpoint` can write, by the name of the model they copy.
pub const SYNTHETIC_ARCHS: &[SyntheticArch] = &[
    SyntheticArch {
        name: "qwen2.5-coder-0.5b",
        model_type: "qwen2",
        hidden_size: 896,
        intermediate_size: 4864,
        num_layers: 24,
        num_heads: 14,
        num_kv_heads: 2,
        vocab_size: 151_936,
        tie_embeddings: true,
        qkv_bias: true,
        rope_theta: 1_000_000.0,
        rms_norm_eps: 1e-6,
        max_position: 32_768,
    },
    SyntheticArch {
        name: "qwen2.5-coder-1.5b",
        model_type: "qwen2",
        hidden_size: 1536,
        intermediate_size: 8960,
        num_layers: 28,
        num_heads: 12,
        num_kv_heads: 2,
        vocab_size: 151_936,
        tie_embeddings: true,
        qkv_bias: true,
        rope_theta: 1_000_000.0,
        rms_norm_eps: 1e-6,
        max_position: 32_768,
    },
    SyntheticArch {
        name: "qwen2.5-coder-7b",
        model_type: "qwen2",
        hidden_size: 3584,
        intermediate_size: 18_944,
        num_layers: 28,
        num_heads: 28,
        num_kv_heads: 4,
        vocab_size: 152_064,
        tie_embeddings: false,
        qkv_bias: true,
        rope_theta: 1_000_000.0,
        rms_norm_eps: 1e-6,
        max_position: 32_768,
    },
    SyntheticArch {
        name: "smollm2-135m",
        model_type: "llama",
        hidden_size: 576,
        intermediate_size: 1536,
        num_layers: 30,
        num_heads: 9,
        num_kv_heads: 3,
        vocab_size: 49_152,
        tie_embeddings: true,
        qkv_bias: false,
        rope_theta: 100_000.0,
        rms_norm_eps: 1e-5,
        max_position: 8192,
    },
];

/// The names of [`SYNTHETIC_ARCHS`], for error messages (a test keeps the two in step).
const SYNTHETIC_ARCH_NAMES: &str =
    "qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, qwen2.5-coder-7b, smollm2-135m";

/// The architecture named `name`, or an error listing the known names.
pub fn synthetic_arch(name: &str) -> WeightsResult<SyntheticArch> {
    SYNTHETIC_ARCHS
        .iter()
        .find(|a| a.name == name)
        .copied()
        .ok_or_else(|| WeightsError::UnknownArchitecture {
            architecture: name.to_string(),
            supported: SYNTHETIC_ARCH_NAMES,
        })
}

/// How the weights are stored on disk (activations are the loader's business).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyntheticDtype {
    F32,
    Bf16,
}

impl SyntheticDtype {
    fn bytes(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::Bf16 => 2,
        }
    }
}

/// Standard deviation of the random matrices: that of the released models' initialisation, so
/// activations keep realistic magnitudes through the layers.
const WEIGHT_STD: f32 = 0.02;
/// Values are drawn in blocks so each block has its own stream and blocks fill in parallel.
const BLOCK: usize = 1 << 20;

/// One tensor's name, shape and how its values are drawn; data is made when written.
struct LazyTensor {
    shape: Vec<usize>,
    dtype: SyntheticDtype,
    fill: Fill,
    seed: u64,
}

#[derive(Clone, Copy)]
enum Fill {
    /// Uniform with standard deviation [`WEIGHT_STD`].
    Random,
    /// Every value 1.0 (norm weights).
    Ones,
}

impl LazyTensor {
    fn len(&self) -> usize {
        self.shape.iter().product()
    }

    fn bytes(&self) -> Vec<u8> {
        let n = self.len();
        let width = self.dtype.bytes();
        let mut out = vec![0u8; n * width];
        out.par_chunks_mut(BLOCK * width)
            .enumerate()
            .for_each(|(block, bytes)| {
                let mut rng = SplitMix64(self.seed ^ (block as u64).wrapping_mul(0x9E37_79B9));
                // Uniform on [-a, a] has standard deviation a / sqrt(3).
                let a = WEIGHT_STD * 3f32.sqrt();
                for value in bytes.chunks_exact_mut(width) {
                    let v = match self.fill {
                        Fill::Ones => 1.0,
                        Fill::Random => (rng.unit() * 2.0 - 1.0) * a,
                    };
                    match self.dtype {
                        SyntheticDtype::F32 => value.copy_from_slice(&v.to_le_bytes()),
                        SyntheticDtype::Bf16 => {
                            value.copy_from_slice(&half::bf16::from_f32(v).to_le_bytes())
                        }
                    }
                }
            });
        out
    }
}

impl safetensors::View for &LazyTensor {
    fn dtype(&self) -> safetensors::Dtype {
        match self.dtype {
            SyntheticDtype::F32 => safetensors::Dtype::F32,
            SyntheticDtype::Bf16 => safetensors::Dtype::BF16,
        }
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Owned(self.bytes())
    }
    fn data_len(&self) -> usize {
        self.len() * self.dtype.bytes()
    }
}

/// A small, fast, seedable generator; statistical quality is irrelevant for random weights.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform on [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// FNV-1a of a tensor name mixed with the seed: every tensor gets its own stream, independent of
/// the order in which tensors are written.
fn tensor_seed(seed: u64, name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325 ^ seed, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Every tensor of `arch` under its Hugging Face name.
fn tensors(arch: &SyntheticArch, dtype: SyntheticDtype, seed: u64) -> Vec<(String, LazyTensor)> {
    let (h, i) = (arch.hidden_size, arch.intermediate_size);
    let head_dim = h / arch.num_heads;
    let (q, kv) = (arch.num_heads * head_dim, arch.num_kv_heads * head_dim);
    let mut specs: Vec<(String, Vec<usize>, Fill)> = vec![
        (
            "model.embed_tokens.weight".into(),
            vec![arch.vocab_size, h],
            Fill::Random,
        ),
        ("model.norm.weight".into(), vec![h], Fill::Ones),
    ];
    if !arch.tie_embeddings {
        specs.push((
            "lm_head.weight".into(),
            vec![arch.vocab_size, h],
            Fill::Random,
        ));
    }
    // Each layer's tensors, by name under `model.layers.{l}`.
    let mut layer: Vec<(&str, Vec<usize>, Fill)> = vec![
        ("input_layernorm.weight", vec![h], Fill::Ones),
        ("post_attention_layernorm.weight", vec![h], Fill::Ones),
        ("self_attn.q_proj.weight", vec![q, h], Fill::Random),
        ("self_attn.k_proj.weight", vec![kv, h], Fill::Random),
        ("self_attn.v_proj.weight", vec![kv, h], Fill::Random),
        ("self_attn.o_proj.weight", vec![h, q], Fill::Random),
        ("mlp.gate_proj.weight", vec![i, h], Fill::Random),
        ("mlp.up_proj.weight", vec![i, h], Fill::Random),
        ("mlp.down_proj.weight", vec![h, i], Fill::Random),
    ];
    if arch.qkv_bias {
        layer.extend([
            ("self_attn.q_proj.bias", vec![q], Fill::Random),
            ("self_attn.k_proj.bias", vec![kv], Fill::Random),
            ("self_attn.v_proj.bias", vec![kv], Fill::Random),
        ]);
    }
    for l in 0..arch.num_layers {
        specs.extend(
            layer.iter().map(|(name, shape, fill)| {
                (format!("model.layers.{l}.{name}"), shape.clone(), *fill)
            }),
        );
    }
    specs
        .into_iter()
        .map(|(name, shape, fill)| {
            let seed = tensor_seed(seed, &name);
            (
                name,
                LazyTensor {
                    shape,
                    dtype,
                    fill,
                    seed,
                },
            )
        })
        .collect()
}

/// The chat tokens, right after the 256 byte tokens.
const SPECIAL_TOKENS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/// Byte-level BPE over single bytes, the chat tokens, and fillers up to `vocab_size`.
fn tokenizer(vocab_size: usize) -> WeightsResult<Tokenizer> {
    let mut bytes: Vec<char> = ByteLevel::alphabet().into_iter().collect();
    bytes.sort_unstable();
    let mut names: Vec<String> = bytes.iter().map(char::to_string).collect();
    names.extend(SPECIAL_TOKENS.iter().map(|t| t.to_string()));
    names.extend((names.len()..vocab_size).map(|id| format!("<|filler_{id}|>")));
    let vocab: tokenizers::models::bpe::Vocab = names
        .into_iter()
        .enumerate()
        .map(|(id, name)| (name, id as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, Vec::new())
        .build()
        .map_err(|e| WeightsError::Tokenizer {
            detail: e.to_string(),
        })?;
    let mut tok = Tokenizer::new(bpe);
    tok.with_pre_tokenizer(Some(ByteLevel::new(false, false, false)));
    tok.with_decoder(Some(ByteLevelDecoder::new(false, false, false)));
    tok.add_special_tokens(
        SPECIAL_TOKENS
            .iter()
            .map(|t| AddedToken::from(*t, true))
            .collect::<Vec<_>>(),
    )
    .map_err(|e| WeightsError::Tokenizer {
        detail: e.to_string(),
    })?;
    Ok(tok)
}

/// A ChatML template, as the Qwen2.5 models use.
const CHAT_TEMPLATE: &str = "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

fn write_json(path: &Path, value: &serde_json::Value) -> WeightsResult<()> {
    let text = serde_json::to_string_pretty(value).expect("JSON values serialize");
    std::fs::write(path, text).map_err(|e| WeightsError::Io {
        path: path.to_path_buf(),
        source: e,
    })
}

fn create_dir(dir: &Path) -> WeightsResult<()> {
    std::fs::create_dir_all(dir).map_err(|e| WeightsError::Io {
        path: dir.to_path_buf(),
        source: e,
    })
}

fn write_safetensors(
    path: std::path::PathBuf,
    tensors: &[(String, LazyTensor)],
) -> WeightsResult<()> {
    safetensors::serialize_to_file(
        tensors.iter().map(|(name, t)| (name.as_str(), t)),
        None,
        &path,
    )
    .map_err(|e| WeightsError::Corrupt {
        path,
        detail: format!("writing: {e}"),
    })
}

/// Writes config.json, tokenizer.json, tokenizer_config.json and model.safetensors for `arch`
/// into `dir` (created if missing). The same `seed` gives the same bytes.
pub fn write_synthetic_checkpoint(
    arch: &SyntheticArch,
    dir: &Path,
    dtype: SyntheticDtype,
    seed: u64,
) -> WeightsResult<()> {
    create_dir(dir)?;
    let tok = tokenizer(arch.vocab_size)?;
    let end_of_turn = tok.token_to_id("<|im_end|>").expect("special token added");
    let end_of_text = tok
        .token_to_id("<|endoftext|>")
        .expect("special token added");
    let tok_path = dir.join("tokenizer.json");
    tok.save(&tok_path, false)
        .map_err(|e| WeightsError::Tokenizer {
            detail: format!("{}: {e}", tok_path.display()),
        })?;
    write_json(
        &dir.join("tokenizer_config.json"),
        &serde_json::json!({
            "chat_template": CHAT_TEMPLATE,
            "eos_token": "<|im_end|>",
            "bos_token": null,
        }),
    )?;
    let architecture = match arch.model_type {
        "llama" => "LlamaForCausalLM",
        _ => "Qwen2ForCausalLM",
    };
    write_json(
        &dir.join("config.json"),
        &serde_json::json!({
            "architectures": [architecture],
            "model_type": arch.model_type,
            "hidden_size": arch.hidden_size,
            "intermediate_size": arch.intermediate_size,
            "num_hidden_layers": arch.num_layers,
            "num_attention_heads": arch.num_heads,
            "num_key_value_heads": arch.num_kv_heads,
            "vocab_size": arch.vocab_size,
            "tie_word_embeddings": arch.tie_embeddings,
            "rope_theta": arch.rope_theta,
            "rms_norm_eps": arch.rms_norm_eps,
            "max_position_embeddings": arch.max_position,
            "hidden_act": "silu",
            "attention_bias": arch.qkv_bias,
            "bos_token_id": end_of_text,
            "eos_token_id": end_of_turn,
            "torch_dtype": match dtype {
                SyntheticDtype::F32 => "float32",
                SyntheticDtype::Bf16 => "bfloat16",
            },
            "quorum_synthetic": { "arch": arch.name, "seed": seed },
        }),
    )?;
    write_safetensors(dir.join("model.safetensors"), &tensors(arch, dtype, seed))
}

/// A synthetic adapter changes every projection of every layer.
const ADAPTED: [&str; 7] = crate::DECODER_PROJECTIONS;

/// Writes a PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors, f32)
/// of rank `rank` for `arch` into `dir`: every projection of every layer, seeded random `A`
/// and `B` (PEFT would start `B` at zero, which makes no delta), `lora_alpha = 2 * rank`. For
/// multi-adapter checks on a synthetic checkpoint; the same `seed` gives the same bytes.
pub fn write_synthetic_adapter(
    arch: &SyntheticArch,
    dir: &Path,
    rank: usize,
    seed: u64,
) -> WeightsResult<()> {
    create_dir(dir)?;
    write_json(
        &dir.join("adapter_config.json"),
        &serde_json::json!({
            "peft_type": "LORA",
            "r": rank,
            "lora_alpha": 2 * rank,
            "target_modules": ADAPTED.map(|m| m.rsplit('.').next().unwrap_or(m)),
            "base_model_name_or_path": arch.name,
        }),
    )?;
    let (h, i) = (arch.hidden_size, arch.intermediate_size);
    let head_dim = h / arch.num_heads;
    let (q, kv) = (arch.num_heads * head_dim, arch.num_kv_heads * head_dim);
    let fans = [(h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h)];
    let mut specs = Vec::new();
    for l in 0..arch.num_layers {
        for (module, (fan_in, fan_out)) in ADAPTED.iter().zip(fans) {
            let name = format!("base_model.model.model.layers.{l}.{module}");
            specs.push((format!("{name}.lora_A.weight"), vec![rank, fan_in]));
            specs.push((format!("{name}.lora_B.weight"), vec![fan_out, rank]));
        }
    }
    let tensors: Vec<(String, LazyTensor)> = specs
        .into_iter()
        .map(|(name, shape)| {
            let seed = tensor_seed(seed, &name);
            let t = LazyTensor {
                shape,
                dtype: SyntheticDtype::F32,
                fill: Fill::Random,
                seed,
            };
            (name, t)
        })
        .collect();
    write_safetensors(dir.join("adapter_model.safetensors"), &tensors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synthetic_adapter_loads_with_every_projection_of_every_layer() {
        let arch = smallest();
        let dir = tempfile::tempdir().expect("temp dir");
        write_synthetic_adapter(&arch, dir.path(), 4, 3).expect("written");
        let adapter = crate::load_lora_adapter(
            dir.path(),
            "syn",
            &candle_core::Device::Cpu,
            candle_core::DType::F32,
        )
        .expect("PEFT directory loads");
        assert_eq!(adapter.config.r, 4);
        assert_eq!(adapter.modules.len(), arch.num_layers * ADAPTED.len());
        let (a, b) = &adapter.modules["model.layers.0.mlp.down_proj"];
        assert_eq!(a.dims(), &[4, arch.intermediate_size]);
        assert_eq!(b.dims(), &[arch.hidden_size, 4]);
    }

    fn smallest() -> SyntheticArch {
        synthetic_arch("smollm2-135m").expect("known")
    }

    #[test]
    fn unknown_names_are_refused_with_the_known_ones() {
        let err = synthetic_arch("gpt-5").unwrap_err().to_string();
        assert!(err.contains("qwen2.5-coder-7b"), "{err}");
        let listed: Vec<&str> = SYNTHETIC_ARCH_NAMES.split(", ").collect();
        let known: Vec<&str> = SYNTHETIC_ARCHS.iter().map(|a| a.name).collect();
        assert_eq!(
            listed, known,
            "the error lists exactly the known architectures"
        );
    }

    #[test]
    fn the_same_seed_writes_the_same_bytes_and_another_seed_does_not() {
        let arch = smallest();
        let a = tensors(&arch, SyntheticDtype::Bf16, 7);
        let b = tensors(&arch, SyntheticDtype::Bf16, 7);
        let c = tensors(&arch, SyntheticDtype::Bf16, 8);
        let q = |t: &[(String, LazyTensor)]| {
            let (_, q) = t
                .iter()
                .find(|(name, _)| name == "model.layers.0.self_attn.q_proj.weight")
                .expect("a query projection");
            q.bytes()
        };
        assert_eq!(q(&a), q(&b));
        assert_ne!(q(&a), q(&c));
    }

    #[test]
    fn random_values_have_the_intended_spread() {
        let t = LazyTensor {
            shape: vec![1000, 300],
            dtype: SyntheticDtype::F32,
            fill: Fill::Random,
            seed: 1,
        };
        let v: Vec<f32> = t
            .bytes()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        let mean = v.iter().sum::<f32>() / v.len() as f32;
        let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / v.len() as f32).sqrt();
        assert!(mean.abs() < 1e-3, "mean {mean}");
        assert!((std - WEIGHT_STD).abs() < 1e-3, "std {std}");
    }

    #[test]
    fn the_tokenizer_round_trips_text_and_has_the_vocabulary_size() {
        let tok = tokenizer(smallest().vocab_size).expect("tokenizer");
        assert_eq!(tok.get_vocab_size(true), smallest().vocab_size);
        let text = "<|im_start|>user\nSELECT «x» FROM t;<|im_end|>";
        let enc = tok.encode(text, false).expect("encode");
        assert_eq!(
            enc.get_ids()[0],
            tok.token_to_id("<|im_start|>").expect("special")
        );
        assert_eq!(tok.decode(enc.get_ids(), false).expect("decode"), text);
    }
}
