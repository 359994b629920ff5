//! The loaded models: one engine per decoder (a model with several roles is loaded once) and
//! the embedder, which runs outside the engine because it generates nothing. Also renders
//! the per-model engine metrics.

use std::sync::Arc;

use anyhow::Context;
use quorum_engine::{EngineConfig, EngineHandle, EngineStats, spawn_engine};
use quorum_models::{BertEmbedder, CpuPath, MatmulPolicy};
use quorum_weights::ChatMessage;

use crate::config::file::Role;
use crate::config::resolved::{Limits, ModelSpec};
use crate::metrics::{render_family, render_histogram};
use crate::status::ServiceError;

/// Tokens per KV block: vLLM's default; small blocks waste little memory at the tail of each
/// sequence while keeping block tables short.
const BLOCK_SIZE: usize = 16;

/// A decoder served by an engine.
#[derive(Debug)]
pub struct LoadedDecoder {
    pub spec: ModelSpec,
    pub engine: EngineHandle,
}

impl LoadedDecoder {
    /// Renders chat messages with the model's template, opening the assistant turn.
    pub fn render_chat(&self, messages: &[ChatMessage]) -> Result<String, ServiceError> {
        let template =
            self.engine
                .chat_template()
                .ok_or_else(|| ServiceError::FailedPrecondition {
                    what: format!("a chat template for model `{}`", self.spec.name),
                })?;
        template
            .render(messages, true)
            .map_err(|e| ServiceError::invalid("chat.messages", e.to_string()))
    }

    /// Tokenizes a rendered prompt (the template already holds the special tokens).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, ServiceError> {
        let encoding = self
            .engine
            .tokenizer()
            .encode(text, add_special_tokens)
            .map_err(|e| ServiceError::internal(format!("tokenizer: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }
}

#[derive(Debug)]
pub struct LoadedEmbedder {
    pub spec: ModelSpec,
    pub model: BertEmbedder,
}

/// Every configured model, loaded and warmed.
#[derive(Debug)]
pub struct ModelRegistry {
    /// Decoders in configuration order.
    pub decoders: Vec<Arc<LoadedDecoder>>,
    pub embedder: Option<Arc<LoadedEmbedder>>,
}

impl ModelRegistry {
    /// Loads every model; blocking (minutes for large models), so callers run it off the async
    /// runtime. `spawn_engine` returns after its warm-up step, so a loaded registry is ready.
    pub fn load(specs: &[ModelSpec], limits: &Limits, cpu_path: CpuPath) -> anyhow::Result<Self> {
        let mut decoders = Vec::new();
        let mut embedder = None;
        for spec in specs {
            let device = spec
                .device
                .open()
                .with_context(|| format!("model `{}`: device", spec.name))?;
            let started = std::time::Instant::now();
            if spec.has_role(Role::Embedder) {
                let ckpt =
                    quorum_weights::load_checkpoint(&spec.path, &device, candle_core::DType::F32)
                        .with_context(|| format!("loading embedder `{}`", spec.name))?;
                let model = BertEmbedder::load(ckpt, &device)
                    .with_context(|| format!("loading embedder `{}`", spec.name))?;
                embedder = Some(Arc::new(LoadedEmbedder {
                    spec: spec.clone(),
                    model,
                }));
            } else {
                let engine =
                    spawn_engine(engine_config(spec, limits, cpu_path), &spec.path, &device)
                        .with_context(|| format!("loading model `{}`", spec.name))?;
                decoders.push(Arc::new(LoadedDecoder {
                    spec: spec.clone(),
                    engine,
                }));
            }
            tracing::info!(
                model = %spec.name,
                path = %spec.path.display(),
                device = %spec.device,
                secs = started.elapsed().as_secs_f64(),
                "model loaded"
            );
        }
        Ok(Self { decoders, embedder })
    }

    /// A decoder by name; the empty name is the first generator.
    pub fn decoder(&self, name: &str) -> Result<&Arc<LoadedDecoder>, ServiceError> {
        let found = if name.is_empty() {
            self.decoders
                .iter()
                .find(|d| d.spec.has_role(Role::Generator))
        } else {
            self.decoders.iter().find(|d| d.spec.name == name)
        };
        found.ok_or_else(|| ServiceError::NotFound {
            what: "model",
            id: name.to_owned(),
        })
    }

    pub fn selector(&self) -> Option<&Arc<LoadedDecoder>> {
        self.decoders
            .iter()
            .find(|d| d.spec.has_role(Role::Selector))
    }

    pub fn generators(&self) -> impl Iterator<Item = &Arc<LoadedDecoder>> {
        self.decoders
            .iter()
            .filter(|d| d.spec.has_role(Role::Generator))
    }

    /// Stops admission in every engine; in-flight sequences finish or are cancelled by their
    /// callers.
    pub fn shutdown(&self) {
        for d in &self.decoders {
            d.engine.shutdown();
        }
    }

    /// Engine metrics per model, with vLLM's metric meanings under a `quorum_` prefix.
    pub fn render_metrics(&self, out: &mut String) {
        let stats: Vec<(String, EngineStats)> = self
            .decoders
            .iter()
            .map(|d| (format!("model=\"{}\"", d.spec.name), d.engine.stats()))
            .collect();
        let family = |out: &mut String, name, kind, help, get: &dyn Fn(&EngineStats) -> f64| {
            let samples: Vec<(String, f64)> =
                stats.iter().map(|(l, s)| (l.clone(), get(s))).collect();
            render_family(out, name, kind, help, &samples);
        };
        let paths: Vec<(String, f64)> = self
            .decoders
            .iter()
            .filter_map(|d| {
                let path = d.engine.info().cpu_path?;
                Some((format!("model=\"{}\",path=\"{path}\"", d.spec.name), 1.0))
            })
            .collect();
        let kv_sizes: Vec<(String, f64)> = self
            .decoders
            .iter()
            .map(|d| {
                let info = d.engine.info();
                let labels = format!(
                    "model=\"{}\",dtype=\"{}\"",
                    d.spec.name,
                    info.kv_dtype.as_str()
                );
                (labels, info.kv_cache_bytes as f64)
            })
            .collect();
        render_family(
            out,
            "quorum_engine_kv_cache_bytes",
            "gauge",
            "Bytes of a model's KV block pool, by the dtype its blocks hold.",
            &kv_sizes,
        );
        render_family(
            out,
            "quorum_engine_cpu_path_info",
            "gauge",
            "The CPU kernel path a model's matmuls run with (1 per model).",
            &paths,
        );
        family(
            out,
            "quorum_engine_running",
            "gauge",
            "Sequences being generated.",
            &|s| s.running as f64,
        );
        family(
            out,
            "quorum_engine_waiting",
            "gauge",
            "Sequences waiting for admission.",
            &|s| s.waiting as f64,
        );
        family(
            out,
            "quorum_engine_kv_blocks_used",
            "gauge",
            "KV cache blocks in use.",
            &|s| s.kv_blocks_used as f64,
        );
        family(
            out,
            "quorum_engine_kv_blocks_pinned",
            "gauge",
            "KV cache blocks held by pinned prefixes (databases' schema prompts kept warm).",
            &|s| s.kv_blocks_pinned as f64,
        );
        family(
            out,
            "quorum_engine_kv_usage",
            "gauge",
            "Fraction of KV blocks in use.",
            &|s| s.kv_blocks_used as f64 / f64::from(s.kv_blocks_total.max(1)),
        );
        family(
            out,
            "quorum_engine_prefix_cache_queries_total",
            "counter",
            "Prompt blocks looked up in the prefix cache.",
            &|s| s.prefix_cache_queries as f64,
        );
        family(
            out,
            "quorum_engine_prefix_cache_hits_total",
            "counter",
            "Prompt blocks found in the prefix cache.",
            &|s| s.prefix_cache_hits as f64,
        );
        family(
            out,
            "quorum_engine_prompt_tokens_total",
            "counter",
            "Prompt tokens prefilled.",
            &|s| s.prompt_tokens_total as f64,
        );
        family(
            out,
            "quorum_engine_generation_tokens_total",
            "counter",
            "Tokens generated.",
            &|s| s.generation_tokens_total as f64,
        );
        family(
            out,
            "quorum_engine_preemptions_total",
            "counter",
            "Sequences preempted for lack of KV blocks.",
            &|s| s.preemptions as f64,
        );
        family(
            out,
            "quorum_engine_draft_tokens_total",
            "counter",
            "Draft tokens checked by speculative decoding.",
            &|s| s.draft_tokens as f64,
        );
        family(
            out,
            "quorum_engine_draft_tokens_accepted_total",
            "counter",
            "Draft tokens kept: tokens produced without a step of their own.",
            &|s| s.draft_tokens_accepted as f64,
        );
        family(
            out,
            "quorum_engine_steps_total",
            "counter",
            "Engine steps.",
            &|s| s.steps as f64,
        );
        self.render_latency(out, &stats);
        let label = crate::metrics::label_value;
        let mut reasons = Vec::new();
        let mut adapters = Vec::new();
        for (labels, s) in &stats {
            for (reason, n) in &s.finished_by_reason {
                reasons.push((format!("{labels},reason=\"{reason}\""), *n as f64));
            }
            for (adapter, n) in &s.finished_by_adapter {
                adapters.push((
                    format!("{labels},adapter=\"{}\"", label(adapter)),
                    *n as f64,
                ));
            }
        }
        render_family(
            out,
            "quorum_engine_requests_finished_total",
            "counter",
            "Finished requests by finish reason (stop, length, cancelled, error).",
            &reasons,
        );
        render_family(
            out,
            "quorum_engine_adapter_requests_total",
            "counter",
            "Finished requests by LoRA adapter (empty: the base model).",
            &adapters,
        );
    }

    fn render_latency(&self, out: &mut String, stats: &[(String, EngineStats)]) {
        for (name, help, pick) in [
            (
                "quorum_engine_time_to_first_token_seconds",
                "Time from admission to the first token.",
                (|s: &EngineStats| &s.ttft) as fn(&EngineStats) -> &quorum_engine::Histogram,
            ),
            (
                "quorum_engine_inter_token_latency_seconds",
                "Time between consecutive tokens of a sequence (time per output token).",
                |s: &EngineStats| &s.inter_token_latency,
            ),
            (
                "quorum_engine_queue_time_seconds",
                "Time from submission to a request's first engine step.",
                |s: &EngineStats| &s.queue_time,
            ),
            (
                "quorum_engine_request_prefill_seconds",
                "Time from a request's first engine step to its first token (its prefill).",
                |s: &EngineStats| &s.prefill_time,
            ),
            (
                "quorum_engine_request_decode_seconds",
                "Time from a request's first token to its last (its decode).",
                |s: &EngineStats| &s.decode_time,
            ),
            (
                "quorum_engine_request_prompt_tokens",
                "Prompt tokens of each finished request.",
                |s: &EngineStats| &s.prompt_tokens,
            ),
            (
                "quorum_engine_request_generation_tokens",
                "Tokens generated for each finished request.",
                |s: &EngineStats| &s.generation_tokens,
            ),
        ] {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} histogram\n"));
            for (labels, s) in stats {
                render_histogram(out, name, labels, pick(s));
            }
        }
    }
}

fn engine_config(spec: &ModelSpec, limits: &Limits, cpu_path: CpuPath) -> EngineConfig {
    EngineConfig {
        model_name: spec.name.clone(),
        block_size: BLOCK_SIZE,
        kv_cache_bytes: limits.kv_cache_bytes,
        max_batched_tokens: limits.max_batched_tokens,
        target_step: quorum_engine::DEFAULT_TARGET_STEP,
        max_running_seqs: limits.max_running,
        max_waiting: limits.max_queue,
        max_model_len: spec.max_model_len,
        enable_prefix_caching: true,
        pinned_prefix_share: limits.pinned_prefix_share,
        // The engine's own default: the int8 GEMM for prefill and batched decode, and a row's
        // result independent of what else is batched (greedy answers do not change under load).
        matmul_policy: MatmulPolicy::engine(cpu_path),
        reencode: spec.reencode,
        adapters: spec.adapters.clone(),
        max_draft_tokens: limits.max_draft_tokens,
        dtype: spec.dtype,
        host_kv_dtype: spec.kv_dtype,
        device_kv_on_cpu: false,
        gpu_memory_fraction: spec.gpu_memory_fraction,
        batch_invariant: spec.batch_invariant,
    }
}
