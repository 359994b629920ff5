use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use candle_core::DType;
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
    /// How long one step should last: the engine sizes each step's token budget (at most
    /// `max_batched_tokens`) from the measured cost of a token, so cancellations, deadlines and
    /// new requests are seen about this often on any hardware.
    pub target_step: Duration,
    pub max_running_seqs: usize,
    /// Requests allowed to wait beyond the running ones; past it, submissions fail fast.
    pub max_waiting: usize,
    /// Prompt plus output limit per request (capped by the model's context).
    pub max_model_len: usize,
    pub enable_prefix_caching: bool,
    /// The share of the KV cache's blocks that pinned prefixes ([`crate::GenerateRequest`]'s
    /// `keep_prefix`) may hold together; 0 pins nothing.
    pub pinned_prefix_share: f64,
    pub matmul_policy: MatmulPolicy,
    /// Which quantized GGUF tensors are re-encoded to Q8_0 at load.
    pub reencode: Reencode,
    /// LoRA adapters requests may name: name → PEFT directory (adapter_config.json and
    /// adapter_model.safetensors), loaded at start-up.
    pub adapters: BTreeMap<String, PathBuf>,
    /// Draft tokens a greedy, unconstrained decode checks per step (speculative decoding by
    /// prompt lookup, [`crate::prompt_lookup`]); 0 turns it off. Outputs are the same either
    /// way; only the number of steps changes.
    pub max_draft_tokens: usize,
    /// The dtype of the weights, activations and KV cache: f32 on the CPU; bf16 or f16 on a GPU
    /// halve the bytes each step reads ([`quorum_models::check_dtype`]).
    pub dtype: DType,
    /// What the KV cache holds where its blocks are in host memory (the CPU's cache): f32, or
    /// f16 at half the bytes each decode step reads of it ([`quorum_kernels::KvElement`]).
    /// A device's blocks hold the model's dtype.
    pub host_kv_dtype: DType,
    /// Keep the KV blocks in device tensors and attend with candle ops even on the CPU: the
    /// path every GPU takes (off the CPU the blocks are always there), forced here so that tests
    /// can run it where no GPU is.
    pub device_kv_on_cpu: bool,
    /// On a CUDA device: size the KV cache as this share of the memory free once the model is
    /// loaded, less a reserve for activations (`device_memory`), instead of `kv_cache_bytes`.
    pub gpu_memory_fraction: Option<f64>,
    /// On a CUDA device: a request's tokens do not depend on what else is batched with it, as
    /// on the CPU (whose path always is): every projection through Quorum's fixed-order matmul
    /// and every chunk's attention through the paged kernel, at a cost in speed
    /// (docs/RESULTS.md). Needs dense weights and Quorum's kernels; refused at start-up
    /// otherwise.
    pub batch_invariant: bool,
}

/// Two seconds: a short request waits at most about that long behind a long prompt, and an
/// abandoned request stops costing compute within about that long. Shorter steps cost prefill
/// speed on slow CPUs (smaller chunks; at 1 s about 10% on a two-core AVX2 host, docs/RESULTS.md).
pub const DEFAULT_TARGET_STEP: Duration = Duration::from_secs(2);

/// Draft tokens per decode step by default. Answers are the same with any value; on two
/// AVX-512 cores the default pipeline's latency was the same with 8 and with 0 (within 2%, at
/// one and at four questions in flight, docs/RESULTS.md): there most of a question's time is
/// prefill, and a draft row costs about a fifth of a one-row decode step. Where decoding
/// dominates they pay: one revision-shaped request, whose answer repeats the query its prompt
/// quotes, decoded 128 tokens 1.2x faster (`quorum-bench-engine --drafts`).
pub const DEFAULT_MAX_DRAFT_TOKENS: usize = 8;

/// Half the KV cache for pinned schema prompts: at the default 2 GiB the 1.5B keeps about
/// 18,000 tokens of them (four 40-column business databases' round-1 and revision prompts, or
/// a dozen Spider-sized ones). Pins never cost a request its memory (they are released before
/// anyone is preempted), so the bound only says how much of the cache they may keep from
/// other, unpinned prefixes.
pub const DEFAULT_PINNED_PREFIX_SHARE: f64 = 0.5;

impl EngineConfig {
    /// Defaults sized for a small model on a CPU host.
    pub fn cpu_default(model_name: &str) -> Self {
        Self {
            model_name: model_name.to_string(),
            block_size: 16,
            kv_cache_bytes: 1 << 30,
            max_batched_tokens: 512,
            target_step: DEFAULT_TARGET_STEP,
            max_running_seqs: 32,
            max_waiting: 256,
            max_model_len: 8192,
            enable_prefix_caching: true,
            pinned_prefix_share: DEFAULT_PINNED_PREFIX_SHARE,
            matmul_policy: MatmulPolicy::engine(CpuPath::detect()),
            reencode: Reencode::Slow,
            adapters: BTreeMap::new(),
            max_draft_tokens: DEFAULT_MAX_DRAFT_TOKENS,
            dtype: DType::F32,
            host_kv_dtype: DType::F32,
            device_kv_on_cpu: false,
            gpu_memory_fraction: None,
            batch_invariant: false,
        }
    }
}
