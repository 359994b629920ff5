//! The cloneable handle callers hold, and engine start-up.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};

use candle_core::Device;
use quorum_kernels::{KvLayout, PagedKvStore};
use quorum_models::{DecoderModel, LoadOptions};
use quorum_weights::ChatTemplate;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::block_pool::blocks_for_budget;
use crate::config::EngineConfig;
use crate::device_kv::DeviceKvStore;
use crate::engine_error::EngineError;
use crate::grammar::{GrammarCompiler, GrammarError};
use crate::ids::RequestId;
use crate::logits_constraint::LogitsConstraint;
use crate::request::{EngineEvent, GenerateRequest};
use crate::runner::{KvMemory, Runner};
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::shared::{Command, Shared};
use crate::stats::EngineStats;
use crate::step_pacer::StepPacer;

/// What the handle knows about the model.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub name: String,
    pub device: String,
    pub vocab_size: usize,
    pub max_model_len: usize,
    pub eos_token_ids: Vec<u32>,
    /// The CPU kernel path its matmuls run with (`Candle` when the int8 GEMM is off); `None`
    /// off the CPU.
    pub cpu_path: Option<quorum_models::CpuPath>,
    /// The KV cache's size in bytes (every block of the pool) and the dtype its blocks hold.
    pub kv_cache_bytes: u64,
    pub kv_dtype: candle_core::DType,
}

#[derive(Clone)]
pub struct EngineHandle {
    commands: SyncSender<Command>,
    shared: Arc<Shared>,
    tokenizer: Arc<tokenizers::Tokenizer>,
    chat_template: Option<Arc<ChatTemplate>>,
    info: Arc<ModelInfo>,
    /// Built on the first request with a grammar: describing a 150k-token vocabulary to the
    /// grammar engine takes about a second that servers never asked for a grammar need not pay.
    grammars: Arc<OnceLock<Result<GrammarCompiler, GrammarError>>>,
}

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineHandle")
            .field("model", &self.info.name)
            .finish()
    }
}

impl EngineHandle {
    /// Queues a request. Fails fast (never blocks) when the engine is full, the prompt cannot
    /// fit, or the parameters are invalid. Dropping the receiver cancels the request: its
    /// blocks are freed at the next step.
    pub fn submit(
        &self,
        req: GenerateRequest,
    ) -> Result<UnboundedReceiver<EngineEvent>, EngineError> {
        if self.shared.shutting_down.load(Ordering::Acquire) {
            return Err(EngineError::ShuttingDown);
        }
        req.params.validate()?;
        req.params.validate_for_vocab(self.info.vocab_size)?;
        if req.prompt_tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        if let Some(adapter) = &req.adapter
            && !self.shared.adapters().contains(adapter)
        {
            return Err(EngineError::UnknownAdapter {
                adapter: adapter.clone(),
            });
        }
        let max_new = req.params.max_new_tokens as usize;
        if req.prompt_tokens.len() + max_new > self.info.max_model_len {
            return Err(EngineError::PromptTooLong {
                n_tokens: req.prompt_tokens.len(),
                max_new_tokens: max_new,
                max: self.info.max_model_len,
            });
        }
        let n = req.params.n.max(1) as usize;
        let mut constraints = match &req.grammar {
            None => Vec::new(),
            Some(grammar) => {
                let compiler = self.grammar_compiler()?;
                (0..n)
                    .map(|_| {
                        compiler
                            .constraint(grammar)
                            .map(|c| Some(Box::new(c) as Box<dyn LogitsConstraint>))
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        let pending = self.shared.pending.fetch_add(n, Ordering::AcqRel);
        if pending + n > self.shared.limit {
            self.shared.release(n);
            return Err(EngineError::QueueFull {
                pending,
                limit: self.shared.limit,
            });
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        for choice in 0..n as u32 {
            let id = RequestId(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
            let cmd = Command::Add {
                id,
                choice,
                request: Box::new(req.clone()),
                constraint: constraints.get_mut(choice as usize).and_then(Option::take),
                tx: tx.clone(),
            };
            match self.commands.try_send(cmd) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    self.shared.release(n - choice as usize);
                    return Err(EngineError::QueueFull {
                        pending,
                        limit: self.shared.limit,
                    });
                }
                Err(TrySendError::Disconnected(_)) => {
                    self.shared.release(n - choice as usize);
                    return Err(EngineError::ShuttingDown);
                }
            }
        }
        Ok(rx)
    }

    /// The LoRA adapters requests may name now, in load order.
    pub fn adapters(&self) -> Vec<String> {
        self.shared.adapters()
    }

    /// Reads the PEFT adapter in `dir` and makes it available to requests as `name`, between
    /// two engine steps. Blocks while the files are read and until the engine thread took it
    /// (at most one step): call it off async workers. Requests with the name that were refused
    /// before it is loaded stay refused; the prefix cache never serves KV computed under an
    /// earlier adapter of the same name (cache keys name the load, not only the name).
    pub fn load_adapter(&self, name: &str, dir: &Path) -> Result<(), EngineError> {
        if self.shared.adapters().iter().any(|a| a == name) {
            return Err(EngineError::AdapterExists {
                adapter: name.to_owned(),
            });
        }
        let adapter =
            quorum_weights::load_lora_adapter(dir, name, &Device::Cpu, candle_core::DType::F32)
                .map_err(quorum_models::ModelError::from)?;
        self.ask(|reply| Command::LoadAdapter {
            adapter: Box::new(adapter),
            reply,
        })
    }

    /// Removes adapter `name` once no request in flight uses it (else `AdapterInUse`).
    pub fn unload_adapter(&self, name: &str) -> Result<(), EngineError> {
        self.ask(|reply| Command::UnloadAdapter {
            name: name.to_owned(),
            reply,
        })
    }

    /// Sends a command that the engine thread answers, and waits for the answer.
    fn ask(
        &self,
        command: impl FnOnce(SyncSender<Result<(), EngineError>>) -> Command,
    ) -> Result<(), EngineError> {
        if self.shared.shutting_down.load(Ordering::Acquire) {
            return Err(EngineError::ShuttingDown);
        }
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        // Blocking send: an administrative command may wait for room behind queued requests.
        self.commands
            .send(command(reply))
            .map_err(|_| EngineError::ShuttingDown)?;
        answer.recv().map_err(|_| EngineError::ShuttingDown)?
    }

    /// The grammar compiler for this model's tokenizer, built on first use.
    pub fn grammar_compiler(&self) -> Result<&GrammarCompiler, EngineError> {
        self.grammars
            .get_or_init(|| {
                GrammarCompiler::for_tokenizer(
                    self.tokenizer.clone(),
                    self.info.vocab_size,
                    &self.info.eos_token_ids,
                )
            })
            .as_ref()
            .map_err(|e| EngineError::Grammar(e.clone()))
    }

    pub fn tokenizer(&self) -> &Arc<tokenizers::Tokenizer> {
        &self.tokenizer
    }

    pub fn chat_template(&self) -> Option<&ChatTemplate> {
        self.chat_template.as_deref()
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    pub fn model_name(&self) -> &str {
        &self.info.name
    }

    pub fn device(&self) -> String {
        self.info.device.clone()
    }

    pub fn stats(&self) -> EngineStats {
        self.shared.stats().clone()
    }

    /// Stops admitting; the engine finishes in-flight requests (callers cancel by dropping
    /// receivers) and its thread exits once idle.
    pub fn shutdown(&self) {
        self.shared.shutting_down.store(true, Ordering::Release);
        let _ = self.commands.try_send(Command::Shutdown);
    }
}

fn device_label(d: &Device) -> String {
    match d {
        Device::Cpu => "cpu".into(),
        Device::Cuda(_) => "cuda".into(),
        Device::Metal(_) => "metal".into(),
    }
}

/// Loads the checkpoint and starts the engine thread; returns once the model is loaded and has
/// run one warm-up step.
pub fn spawn_engine(
    config: EngineConfig,
    checkpoint_path: &Path,
    device: &Device,
) -> Result<EngineHandle, EngineError> {
    let gguf = quorum_weights::GgufLoadOptions {
        reencode: config.reencode,
    };
    let ckpt = quorum_weights::load_checkpoint_with(checkpoint_path, device, config.dtype, &gguf)
        .map_err(quorum_models::ModelError::from)?;
    let mut model = DecoderModel::load_with(
        &ckpt,
        device,
        LoadOptions {
            policy: config.matmul_policy,
            dtype: config.dtype,
        },
    )?;
    if config.batch_invariant {
        if device.is_cuda() && !quorum_kernels::cuda::enabled() {
            return Err(EngineError::Config {
                detail: format!(
                    "batch_invariant needs Quorum's CUDA kernels, which {} turns off",
                    quorum_kernels::cuda::KERNELS_VAR
                ),
            });
        }
        model.make_batch_invariant()?;
    }
    for (name, dir) in &config.adapters {
        let adapter =
            quorum_weights::load_lora_adapter(dir, name, &Device::Cpu, candle_core::DType::F32)
                .map_err(quorum_models::ModelError::from)?;
        model.add_adapter(&adapter)?;
    }
    let mc = model.config().clone();
    let layout = KvLayout {
        num_layers: mc.num_layers,
        num_blocks: 0,
        block_size: config.block_size,
        num_kv_heads: mc.num_kv_heads,
        head_dim: mc.head_dim,
    };
    // Host blocks hold f32 or f16 whatever the model's dtype; device blocks the model's dtype.
    let kv_on_host = device.is_cpu() && !config.device_kv_on_cpu;
    let kv_dtype = if kv_on_host {
        config.host_kv_dtype
    } else {
        model.dtype()
    };
    let bytes_per_token = layout.bytes_per_token_of(kv_dtype.size_in_bytes());
    let kv_bytes = kv_cache_bytes(&config, &mc, device, bytes_per_token as u64)?;
    let num_blocks = blocks_for_budget(kv_bytes, bytes_per_token as u64, config.block_size)
        .map_err(|e| EngineError::Config {
            detail: e.to_string(),
        })?;
    tracing::info!(
        model = %config.model_name,
        kv_cache_mib = kv_bytes >> 20,
        kv_dtype = ?kv_dtype,
        blocks = num_blocks,
        "KV cache"
    );
    let layout = KvLayout {
        num_blocks: num_blocks as usize,
        ..layout
    };
    // A request larger than the whole KV cache could never run: the handle refuses it at
    // submit (PromptTooLong) instead of leaving it to fail inside the engine.
    let kv_capacity = num_blocks as usize * config.block_size;
    let max_model_len = config.max_model_len.min(mc.max_position).min(kv_capacity);
    let scheduler = Scheduler::new(SchedulerConfig {
        block_size: config.block_size,
        num_blocks,
        max_batched_tokens: config.max_batched_tokens,
        max_running_seqs: config.max_running_seqs,
        // Admission is bounded by the handle (running + waiting); the scheduler's queue must hold
        // every admitted request, including those that arrive before a step admits them.
        max_waiting: config.max_running_seqs + config.max_waiting,
        max_model_len,
        enable_prefix_caching: config.enable_prefix_caching,
        // The share is checked where the configuration is read; the cast rounds down.
        max_pinned_blocks: (f64::from(num_blocks) * config.pinned_prefix_share.clamp(0.0, 1.0))
            as usize,
    })
    .map_err(|e| EngineError::Config {
        detail: e.to_string(),
    })?;
    warm_up(&model)?;
    let limit = config.max_running_seqs + config.max_waiting;
    let shared = Arc::new(Shared {
        stats: Mutex::new(EngineStats {
            kv_blocks_total: num_blocks,
            ..EngineStats::default()
        }),
        pending: AtomicUsize::new(0),
        limit,
        shutting_down: AtomicBool::new(false),
        next_id: AtomicU64::new(1),
        adapters: std::sync::RwLock::new(
            model
                .adapters()
                .iter()
                .map(|a| a.name().to_string())
                .collect(),
        ),
    });
    let tokenizer = Arc::new(ckpt.tokenizer);
    let info = Arc::new(ModelInfo {
        name: config.model_name.clone(),
        device: device_label(device),
        vocab_size: mc.vocab_size,
        max_model_len,
        eos_token_ids: ckpt.eos_token_ids.clone(),
        cpu_path: device.is_cpu().then(|| {
            config
                .matmul_policy
                .int8_path()
                .unwrap_or(quorum_models::CpuPath::Candle)
        }),
        kv_cache_bytes: (bytes_per_token * kv_capacity) as u64,
        kv_dtype,
    });
    let (tx, rx) = std::sync::mpsc::sync_channel(limit.max(1));
    // Off the CPU the blocks stay on the model's device, in its activation dtype.
    let store = if kv_on_host {
        KvMemory::Host(PagedKvStore::with_dtype(layout, kv_dtype).map_err(|e| {
            EngineError::Config {
                detail: e.to_string(),
            }
        })?)
    } else {
        KvMemory::Device(
            DeviceKvStore::new(layout, device, model.dtype()).map_err(|e| EngineError::Config {
                detail: format!("cannot allocate the KV cache on the device: {e}"),
            })?,
        )
    };
    let runner = Runner::new(
        model,
        store,
        scheduler,
        shared.clone(),
        (
            config.model_name.clone(),
            ckpt.eos_token_ids,
            tokenizer.clone(),
        ),
        // The floor lets every running sequence decode in each step.
        StepPacer::new(
            config.target_step,
            config.max_running_seqs,
            config.max_batched_tokens,
        ),
        config.max_draft_tokens,
    );
    std::thread::Builder::new()
        .name(format!("engine-{}", config.model_name))
        .spawn(move || runner.run(rx))
        .map_err(|e| EngineError::Config {
            detail: format!("cannot start the engine thread: {e}"),
        })?;
    Ok(EngineHandle {
        commands: tx,
        shared,
        tokenizer,
        chat_template: ckpt.chat_template.map(Arc::new),
        info,
        grammars: Arc::new(OnceLock::new()),
    })
}

/// One tiny forward pass so the first real request does not pay for lazy initialization.
fn warm_up(model: &DecoderModel) -> Result<(), EngineError> {
    let mut cache = quorum_models::DenseKvCache::new();
    let layout = quorum_models::BatchLayout::from_chunks([(0, 0, 1, true)]);
    model.forward(&[0], &layout, &mut cache)?;
    Ok(())
}

/// The KV cache's bytes: `kv_cache_bytes`, or on a CUDA device with `gpu_memory_fraction` its
/// share of the free memory (see `device_memory`). A model whose share would not hold one
/// sequence of its maximum length is a configuration error naming it and the numbers.
fn kv_cache_bytes(
    config: &EngineConfig,
    mc: &quorum_models::DecoderConfig,
    device: &Device,
    bytes_per_token: u64,
) -> Result<u64, EngineError> {
    let Some(fraction) = config.gpu_memory_fraction else {
        return Ok(config.kv_cache_bytes);
    };
    let err = |detail: String| EngineError::Config { detail };
    crate::device_memory::check_fraction(fraction)
        .map_err(|e| err(format!("model {}: {e}", config.model_name)))?;
    let free = crate::device_memory::free_bytes(device)
        .map_err(|e| err(format!("model {}: {e}", config.model_name)))?
        .ok_or_else(|| {
            err(format!(
                "model {}: gpu_memory_fraction sizes the KV cache on a CUDA device, not on {device:?}",
                config.model_name
            ))
        })?;
    let max_len = config.max_model_len.min(mc.max_position);
    let budget = crate::device_memory::DeviceBudget {
        free,
        fraction,
        reserve: crate::device_memory::activation_reserve(
            mc,
            config.max_batched_tokens,
            config.max_running_seqs,
            max_len,
            config.dtype.size_in_bytes(),
        ),
    };
    let needed = max_len as u64 * bytes_per_token;
    let kv = budget.kv_bytes();
    if kv < needed {
        let mib = |b: u64| b >> 20;
        return Err(err(format!(
            "model {} does not fit: {} MiB free after its weights, {fraction} of it less {} MiB \
             for activations leaves {} MiB for the KV cache, and one sequence of {max_len} \
             tokens needs {} MiB",
            config.model_name,
            mib(free),
            mib(budget.reserve),
            mib(kv),
            mib(needed)
        )));
    }
    Ok(kv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> quorum_models::DecoderConfig {
        quorum_models::DecoderConfig {
            arch: quorum_models::DecoderArch::Qwen2,
            vocab_size: 64,
            hidden_size: 32,
            intermediate_size: 64,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            head_dim: 8,
            rope_theta: 1e4,
            rms_norm_eps: 1e-6,
            max_position: 128,
            rope_interleaved: false,
        }
    }

    #[test]
    fn a_fixed_budget_is_used_as_given_and_a_gpu_share_off_the_gpu_is_an_error() {
        let mut config = EngineConfig::cpu_default("m");
        assert_eq!(
            kv_cache_bytes(&config, &tiny(), &Device::Cpu, 256).unwrap(),
            config.kv_cache_bytes
        );
        config.gpu_memory_fraction = Some(0.5);
        let err = kv_cache_bytes(&config, &tiny(), &Device::Cpu, 256)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("model m") && err.contains("CUDA device"),
            "{err}"
        );
        config.gpu_memory_fraction = Some(1.5);
        let err = kv_cache_bytes(&config, &tiny(), &Device::Cpu, 256)
            .unwrap_err()
            .to_string();
        assert!(err.contains("(0, 1]"), "{err}");
    }
}
