//! quorum-models: the networks. Qwen2 and Llama decoders (one implementation: they differ only in
//! flags), and a BERT sentence embedder.
//!
//! The decoder keeps no state between calls: the KV cache lives behind the [`Attention`] trait,
//! which the engine implements with its paged block pool and tests implement with
//! [`DenseKvCache`]. A forward pass takes a packed batch of variable-length chunks with explicit
//! positions ([`BatchLayout`]), so one call can mix prefill chunks and decode tokens of many
//! sequences.

mod attention;
mod batch;
mod bert;
mod candle_threads;
mod config;
mod cpu_forward;
mod cpu_path;
mod decoder;
mod dense_cache;
mod device;
mod dtype;
mod error;
mod greedy;
mod int8_weight;
mod linear;
mod lora;
mod lora_stack;
mod rotary;
mod row_ops;
mod token_embedding;

pub use attention::{Attention, AttentionRows, causal_attention, causal_attention_reference};
pub use batch::{BatchLayout, ChunkLayout};
pub use bert::{BertEmbedder, cosine};
pub use candle_threads::{CANDLE_SPIN_LIMIT, CANDLE_SPIN_LIMIT_VAR, limit_candle_spinning};
pub use config::{DecoderArch, DecoderConfig};
pub use cpu_path::{
    CANDLE_FORCE_AVX2_VAR, CANDLE_FORCE_AVXVNNI_VAR, align_candle_with, resolve_cpu_path,
};
pub use decoder::{DecoderModel, LoadOptions};
pub use dense_cache::DenseKvCache;
pub use device::DeviceSpec;
pub use dtype::{check_dtype, parse_dtype};
pub use error::{ModelError, ModelResult};
pub use greedy::{GreedyOutput, greedy_generate, greedy_generate_with_cache};
pub use linear::{Linear, MatmulPolicy};
pub use lora::{LoraKernel, LoraWeights};
pub use quorum_kernels::CpuPath;
pub use rotary::RotaryEmbedding;
