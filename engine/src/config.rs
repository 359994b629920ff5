use std::collections::BTreeMap;
use std::path::PathBuf;

use quorum_models::{CpuPath, MatmulPolicy};
use quorum_weights::Reencode;

/// Engine settings for one loaded model. Plain data; the server derives it from its config.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Name under which the model is served; also part of the prefix-cache key.
    pub model_name: String,
    /// Tokens per KV block (vLLM uses 16: small blocks waste little, larger ones hash less).
    pub block_size: usize,
    /// Memory for the KV cache; the number of blocks is derived from it.
    pub kv_cache_bytes: u64,
    /// Token budget of one forward pass, shared by decodes and prefill chunks. Larger steps
    /// amortize the weight read; smaller ones bound how long a prefill delays running decodes.
    pub max_batched_tokens: usize,
    pub max_running_seqs: usize,
    /// Requests allowed to wait beyond the running ones; past it, submissions fail fast.
    pub max_waiting: usize,
    /// Prompt plus output limit per request (capped by the model's context).
    pub max_model_len: usize,
    pub enable_prefix_caching: bool,
    pub matmul_policy: MatmulPolicy,
    /// Which quantized GGUF tensors are re-encoded to Q8_0 at load.
    pub reencode: Reencode,
    /// LoRA adapters requests may name: name → PEFT directory (adapter_config.json and
    /// adapter_model.safetensors), loaded at start-up.
    pub adapters: BTreeMap<String, PathBuf>,
}

impl EngineConfig {
    /// Defaults sized for a small model on a CPU host.
    pub fn cpu_default(model_name: &str) -> Self {
        Self {
            model_name: model_name.to_string(),
            block_size: 16,
            kv_cache_bytes: 1 << 30,
            max_batched_tokens: 512,
            max_running_seqs: 32,
            max_waiting: 256,
            max_model_len: 8192,
            enable_prefix_caching: true,
            matmul_policy: MatmulPolicy::engine(CpuPath::detect()),
            reencode: Reencode::Slow,
            adapters: BTreeMap::new(),
        }
    }
}
