//! Qwen2 and Llama decoders over a packed batch, with attention delegated to an [`Attention`].

use candle_core::{DType, Device, Tensor};
use quorum_weights::{Checkpoint, StoredTensor};

use crate::attention::Attention;
use crate::batch::BatchLayout;
use crate::config::DecoderConfig;
use crate::dtype::check_dtype;
use crate::error::{ModelError, ModelResult};
use crate::linear::{Linear, MatmulPolicy};
use crate::lora::{LoraKernel, LoraWeights, Proj};
use crate::lora_stack::LoraStacks;
use crate::rotary::RotaryEmbedding;
use crate::token_embedding::TokenEmbedding;

#[derive(Debug, Clone)]
pub(crate) struct RmsNorm {
    weight: Tensor,
    /// The weight on the host, for [`RmsNorm::forward_rows`].
    weight_rows: Vec<f32>,
    eps: f32,
}

impl RmsNorm {
    fn load(
        ckpt: &Checkpoint,
        name: &str,
        size: usize,
        eps: f64,
        dtype: DType,
    ) -> ModelResult<Self> {
        let weight = ckpt
            .tensors
            .get_checked(name, &[size])?
            .to_dense()?
            .to_dtype(dtype)?;
        Ok(Self {
            weight_rows: weight.to_dtype(DType::F32)?.to_vec1::<f32>()?,
            weight,
            eps: eps as f32,
        })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        candle_nn::ops::rms_norm(x, &self.weight, self.eps)
    }

    /// `(residual + delta, the norm of that sum)`: one fused kernel on a CUDA device with
    /// Quorum's kernels (`kernels`), candle's add and norm elsewhere.
    fn add_forward(
        &self,
        delta: &Tensor,
        residual: &Tensor,
        kernels: bool,
    ) -> candle_core::Result<(Tensor, Tensor)> {
        #[cfg(feature = "cuda")]
        if kernels {
            let (sum, out) = quorum_kernels::cuda::device::add_rms_norm(
                delta,
                Some(residual),
                &self.weight,
                self.eps,
            )?;
            let sum = sum.ok_or_else(|| candle_core::Error::Msg("no residual sum".into()))?;
            return Ok((sum, out));
        }
        #[cfg(not(feature = "cuda"))]
        let _ = kernels;
        let sum = (delta + residual)?;
        let out = self.forward(&sum)?;
        Ok((sum, out))
    }

    /// [`Self::forward`] on host rows, bit for bit.
    pub(crate) fn forward_rows(&self, x: &[f32]) -> Vec<f32> {
        crate::row_ops::rms_norm_rows(x, &self.weight_rows, self.eps)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct DecoderLayer {
    pub(crate) input_norm: RmsNorm,
    pub(crate) q_proj: Linear,
    pub(crate) k_proj: Linear,
    pub(crate) v_proj: Linear,
    pub(crate) o_proj: Linear,
    pub(crate) post_attention_norm: RmsNorm,
    pub(crate) gate_proj: Linear,
    pub(crate) up_proj: Linear,
    pub(crate) down_proj: Linear,
}

impl DecoderLayer {
    fn load(
        ckpt: &Checkpoint,
        cfg: &DecoderConfig,
        i: usize,
        opts: &LoadOptions,
    ) -> ModelResult<Self> {
        let p = format!("model.layers.{i}");
        let (h, q_out, kv_out) = (
            cfg.hidden_size,
            cfg.num_heads * cfg.head_dim,
            cfg.num_kv_heads * cfg.head_dim,
        );
        let lin = |name: &str, shape| {
            Linear::load(
                &ckpt.tensors,
                &format!("{p}.{name}"),
                shape,
                opts.policy,
                opts.dtype,
            )
        };
        let norm = |name: &str| {
            RmsNorm::load(
                ckpt,
                &format!("{p}.{name}.weight"),
                h,
                cfg.rms_norm_eps,
                opts.dtype,
            )
        };
        Ok(Self {
            input_norm: norm("input_layernorm")?,
            q_proj: lin("self_attn.q_proj", (q_out, h))?,
            k_proj: lin("self_attn.k_proj", (kv_out, h))?,
            v_proj: lin("self_attn.v_proj", (kv_out, h))?,
            o_proj: lin("self_attn.o_proj", (h, q_out))?,
            post_attention_norm: norm("post_attention_layernorm")?,
            gate_proj: lin("mlp.gate_proj", (cfg.intermediate_size, h))?,
            up_proj: lin("mlp.up_proj", (cfg.intermediate_size, h))?,
            down_proj: lin("mlp.down_proj", (h, cfg.intermediate_size))?,
        })
    }
}

/// How to materialize the weights.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    pub policy: MatmulPolicy,
    /// Activation dtype (f32 on CPU).
    pub dtype: DType,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            policy: MatmulPolicy::QuantizedOnly,
            dtype: DType::F32,
        }
    }
}

#[derive(Debug, Clone)]
pub struct DecoderModel {
    config: DecoderConfig,
    embed_tokens: TokenEmbedding,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    lm_head: Linear,
    rotary: RotaryEmbedding,
    device: Device,
    dtype: DType,
    /// LoRA adapters a chunk can name ([`crate::ChunkLayout::adapter`]).
    adapters: Vec<LoraWeights>,
    /// The vector width of the adapters' row loops, from the int8 GEMM's path.
    lora_kernel: LoraKernel,
    /// On a CUDA device, the adapters stacked per projection on the device (their deltas never
    /// cross to the host); empty elsewhere.
    lora_stacks: LoraStacks,
    /// Every projection sums in a fixed order whatever the batch ([`Self::make_batch_invariant`]).
    batch_invariant: bool,
}

impl DecoderModel {
    /// Loads the decoder computing in f32, the only dtype of the CPU path.
    pub fn load(ckpt: &Checkpoint, device: &Device, policy: MatmulPolicy) -> ModelResult<Self> {
        Self::load_with(
            ckpt,
            device,
            LoadOptions {
                policy,
                dtype: DType::F32,
            },
        )
    }

    /// Loads the decoder with its weights and activations in `opts.dtype`: f32 anywhere, bf16
    /// or f16 on a GPU (half the bytes a decode step reads).
    pub fn load_with(ckpt: &Checkpoint, device: &Device, opts: LoadOptions) -> ModelResult<Self> {
        let config = DecoderConfig::from_checkpoint(ckpt)?;
        check_dtype(device.is_cpu(), opts.dtype)?;
        let embed = ckpt.tensors.get_checked(
            "model.embed_tokens.weight",
            &[config.vocab_size, config.hidden_size],
        )?;
        let embed_tokens = TokenEmbedding::load(embed, opts.dtype, device)?;
        let layers = (0..config.num_layers)
            .map(|i| DecoderLayer::load(ckpt, &config, i, &opts))
            .collect::<ModelResult<Vec<_>>>()?;
        // Tied embeddings: no `lm_head.weight`, the output projection reuses the embedding matrix
        // (quantized, as candle's GGUF models do).
        let head: &StoredTensor = if ckpt.tensors.contains("lm_head.weight") {
            ckpt.tensors
                .get_checked("lm_head.weight", &[config.vocab_size, config.hidden_size])?
        } else {
            embed
        };
        // The output projection sees one row per sequence; with many sequences in a decode step
        // the int8 GEMM reads its 136M weights once instead of once per row.
        let lm_head = Linear::from_stored(head, None, opts.policy, opts.dtype)?;
        let rotary = RotaryEmbedding::new(
            config.head_dim,
            config.rope_theta,
            config.max_position,
            config.rope_interleaved,
            device,
        )?;
        Ok(Self {
            norm: RmsNorm::load(
                ckpt,
                "model.norm.weight",
                config.hidden_size,
                config.rms_norm_eps,
                opts.dtype,
            )?,
            embed_tokens,
            layers,
            lm_head,
            rotary,
            device: device.clone(),
            dtype: opts.dtype,
            config,
            adapters: Vec::new(),
            lora_kernel: LoraKernel::for_path(opts.policy.int8_path()),
            lora_stacks: LoraStacks::default(),
            batch_invariant: false,
        })
    }

    /// Makes a row's logits independent of the other rows of its step on a CUDA device: every
    /// projection, the output head included, through Quorum's fixed-order matmul (the norms,
    /// rotary, attention, adapter and sampling kernels already work row by row). Attention
    /// must then take every chunk through the paged kernel ([`Self::is_batch_invariant`] tells
    /// the engine). On the CPU it changes nothing: that path is batch-invariant by
    /// construction. A quantized projection on the device is an error naming it.
    pub fn make_batch_invariant(&mut self) -> ModelResult<()> {
        if self.device.is_cuda() {
            let mut projections: Vec<(String, &mut Linear)> = Vec::new();
            for (i, layer) in self.layers.iter_mut().enumerate() {
                let p = format!("model.layers.{i}");
                projections.extend([
                    (format!("{p}.self_attn.q_proj"), &mut layer.q_proj),
                    (format!("{p}.self_attn.k_proj"), &mut layer.k_proj),
                    (format!("{p}.self_attn.v_proj"), &mut layer.v_proj),
                    (format!("{p}.self_attn.o_proj"), &mut layer.o_proj),
                    (format!("{p}.mlp.gate_proj"), &mut layer.gate_proj),
                    (format!("{p}.mlp.up_proj"), &mut layer.up_proj),
                    (format!("{p}.mlp.down_proj"), &mut layer.down_proj),
                ]);
            }
            projections.push(("lm_head".to_owned(), &mut self.lm_head));
            for (name, linear) in projections {
                linear
                    .use_fixed_order()
                    .map_err(|detail| ModelError::BatchInvariance {
                        layer: name,
                        detail,
                    })?;
            }
        }
        self.batch_invariant = true;
        Ok(())
    }

    /// Whether [`Self::make_batch_invariant`] was called.
    pub fn is_batch_invariant(&self) -> bool {
        self.batch_invariant
    }

    /// Restacks the adapters on a CUDA device after one was added or removed. On failure no
    /// stack is left, so a step that uses an adapter fails rather than reading stale indices.
    fn restack_adapters(&mut self) -> ModelResult<()> {
        if self.device.is_cuda() {
            self.lora_stacks = LoraStacks::default();
            self.lora_stacks = LoraStacks::build(
                &self.adapters,
                self.config.num_layers,
                &self.device,
                self.dtype,
            )?;
        }
        Ok(())
    }

    /// Makes `adapter` available to chunks; returns its index. Its shapes are checked here.
    pub fn add_adapter(&mut self, adapter: &quorum_weights::LoraAdapter) -> ModelResult<usize> {
        if self.adapters.iter().any(|a| a.name() == adapter.name) {
            return Err(ModelError::Adapter {
                adapter: adapter.name.clone(),
                detail: "an adapter of that name is already loaded".into(),
            });
        }
        self.adapters
            .push(LoraWeights::new(adapter, &self.config, self.lora_kernel)?);
        if let Err(e) = self.restack_adapters() {
            self.adapters.pop();
            return Err(e);
        }
        Ok(self.adapters.len() - 1)
    }

    /// Removes the adapter called `name`; returns the index it had. Later adapters move down one
    /// index, so callers holding indices must shift theirs. An error means the adapter was
    /// removed but the others could not be restacked on the device (see
    /// [`Self::restack_adapters`]); the indices still shift.
    pub fn remove_adapter(&mut self, name: &str) -> ModelResult<Option<usize>> {
        let Some(index) = self.adapters.iter().position(|a| a.name() == name) else {
            return Ok(None);
        };
        self.adapters.remove(index);
        self.restack_adapters()?;
        Ok(Some(index))
    }

    /// The loaded adapters, by index.
    pub fn adapters(&self) -> &[LoraWeights] {
        &self.adapters
    }

    pub fn config(&self) -> &DecoderConfig {
        &self.config
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The embedding rows of `tokens` on the host, row-major f32.
    pub(crate) fn token_rows(&self, tokens: &[u32]) -> ModelResult<Vec<f32>> {
        Ok(self.embed_tokens.lookup_rows(tokens)?)
    }

    pub(crate) fn layers(&self) -> &[DecoderLayer] {
        &self.layers
    }

    pub(crate) fn final_norm(&self) -> &RmsNorm {
        &self.norm
    }

    pub(crate) fn lm_head(&self) -> &Linear {
        &self.lm_head
    }

    pub(crate) fn rotary(&self) -> &RotaryEmbedding {
        &self.rotary
    }

    /// Runs the packed batch and returns logits `[rows, vocab]` for the chunks that want them, in
    /// chunk order. On the CPU (f32) over plain rows (`cpu_forward`), elsewhere with candle ops
    /// ([`Self::forward_portable`]); both give the same numbers.
    pub fn forward(
        &self,
        tokens: &[u32],
        batch: &BatchLayout,
        attention: &mut dyn Attention,
    ) -> ModelResult<Tensor> {
        if self.device.is_cpu() && self.dtype == DType::F32 {
            self.check_batch(tokens, batch)?;
            return self.forward_cpu(tokens, batch, attention);
        }
        self.forward_portable(tokens, batch, attention)
    }

    /// [`Self::forward`] with candle ops on any device: the path off the CPU, and the reference
    /// the CPU path is tested against.
    pub fn forward_portable(
        &self,
        tokens: &[u32],
        batch: &BatchLayout,
        attention: &mut dyn Attention,
    ) -> ModelResult<Tensor> {
        self.check_batch(tokens, batch)?;
        let n = tokens.len();
        let positions = Tensor::from_vec(batch.positions(), n, &self.device)?;
        let mut x = self.embed_tokens.lookup(tokens, &self.device)?;
        let row_adapters = self.row_adapters(batch)?;
        let step = StepInputs {
            positions: &positions,
            batch,
            row_adapters: row_adapters.as_ref(),
            kernels: self.device.is_cuda() && quorum_kernels::cuda::enabled(),
        };
        // Each layer hands its MLP output to the next, which adds it to the residual stream in
        // the same kernel as its input norm.
        let mut delta: Option<Tensor> = None;
        for (i, layer) in self.layers.iter().enumerate() {
            let (residual, mlp) =
                self.layer_forward(i, layer, &x, delta.as_ref(), &step, attention)?;
            (x, delta) = (residual, Some(mlp));
        }
        if let Some(d) = delta {
            x = (d + x)?;
        }
        let rows = batch.logit_rows();
        if rows.is_empty() {
            // Only non-final prefill chunks: their KV is stored, no logits are needed.
            return Ok(Tensor::zeros(
                (0, self.config.vocab_size),
                DType::F32,
                &self.device,
            )?);
        }
        let rows = Tensor::from_vec(rows.clone(), rows.len(), &self.device)?;
        let x = self.norm.forward(&x.index_select(&rows, 0)?)?;
        Ok(self.lm_head.forward(&x)?.to_dtype(DType::F32)?)
    }

    /// The batch fits the model: positions within its context, adapters loaded.
    fn check_batch(&self, tokens: &[u32], batch: &BatchLayout) -> ModelResult<()> {
        batch.validate(tokens.len())?;
        if let Some(c) = batch
            .chunks
            .iter()
            .find(|c| c.context_len() > self.rotary.max_position())
        {
            return Err(ModelError::Batch {
                detail: format!(
                    "sequence {} reaches position {}, beyond the model's {} positions",
                    c.seq_slot,
                    c.context_len(),
                    self.rotary.max_position()
                ),
            });
        }
        if let Some(c) = batch
            .chunks
            .iter()
            .find(|c| c.adapter.is_some_and(|a| a >= self.adapters.len()))
        {
            return Err(ModelError::Batch {
                detail: format!(
                    "sequence {} names adapter {:?}, but {} are loaded",
                    c.seq_slot,
                    c.adapter,
                    self.adapters.len()
                ),
            });
        }
        Ok(())
    }

    /// On a CUDA device running Quorum's kernels, with adapters in the batch: each token row's
    /// adapter index (i32, -1 for none), uploaded once for every layer's projections. `None`
    /// sends the deltas through the host row loops.
    fn row_adapters(&self, batch: &BatchLayout) -> ModelResult<Option<Tensor>> {
        let on_device = self.device.is_cuda() && quorum_kernels::cuda::enabled();
        if !on_device || batch.chunks.iter().all(|c| c.adapter.is_none()) {
            return Ok(None);
        }
        let mut ids = vec![-1i32; batch.n_tokens()];
        for c in &batch.chunks {
            if let Some(a) = c.adapter {
                ids[c.offset..c.offset + c.len].fill(a as i32);
            }
        }
        let n = ids.len();
        Ok(Some(Tensor::from_vec(ids, n, &self.device)?))
    }

    /// One decoder layer over the residual stream `x` plus the previous layer's MLP output
    /// `delta` (none before the first layer): returns the stream after attention and this
    /// layer's MLP output, which the caller adds.
    fn layer_forward(
        &self,
        index: usize,
        layer: &DecoderLayer,
        x: &Tensor,
        delta: Option<&Tensor>,
        step: &StepInputs<'_>,
        attention: &mut dyn Attention,
    ) -> ModelResult<(Tensor, Tensor)> {
        let (positions, batch) = (step.positions, step.batch);
        let cfg = &self.config;
        let n = x.dim(0)?;
        let (x, h) = match delta {
            Some(d) => layer.input_norm.add_forward(d, x, step.kernels)?,
            None => (x.clone(), layer.input_norm.forward(x)?),
        };
        // [tokens, heads*dim] -> [heads, tokens, dim]
        let heads = |t: Tensor, nh: usize| -> candle_core::Result<Tensor> {
            t.reshape((n, nh, cfg.head_dim))?
                .transpose(0, 1)?
                .contiguous()
        };
        let proj = |linear: &Linear, which: Proj, input: &Tensor| -> ModelResult<Tensor> {
            let y = linear.forward(input)?;
            let [y]: [Tensor; 1] = self
                .with_adapters(index, &[which], input, vec![y], step)?
                .try_into()
                .expect("one projection, one output");
            Ok(y)
        };
        // Projections of one input go together: one launch for all of them where the device
        // allows it (`Linear::forward_group`), and one pair for their adapters' deltas.
        let projs = |group: &[(&Linear, Proj)], input: &Tensor| -> ModelResult<Vec<Tensor>> {
            let linears: Vec<&Linear> = group.iter().map(|(l, _)| *l).collect();
            let which: Vec<Proj> = group.iter().map(|(_, p)| *p).collect();
            let ys = Linear::forward_group(&linears, input)?;
            self.with_adapters(index, &which, input, ys, step)
        };
        let qkv = projs(
            &[
                (&layer.q_proj, Proj::Q),
                (&layer.k_proj, Proj::K),
                (&layer.v_proj, Proj::V),
            ],
            &h,
        )?;
        let [q, k, v]: [Tensor; 3] = qkv.try_into().expect("three projections, three outputs");
        let fused = if step.kernels {
            let token_major = |t: &Tensor, nh: usize| t.reshape((n, nh, cfg.head_dim));
            let qkv = [
                &token_major(&q, cfg.num_heads)?,
                &token_major(&k, cfg.num_kv_heads)?,
                &token_major(&v, cfg.num_kv_heads)?,
            ];
            attention.attend_unrotated(index, batch, qkv, positions, &self.rotary)
        } else {
            None
        };
        let attn = match fused {
            Some(attn) => attn?,
            None => {
                let q = self.rotary.apply(&heads(q, cfg.num_heads)?, positions)?;
                let k = self.rotary.apply(&heads(k, cfg.num_kv_heads)?, positions)?;
                let v = heads(v, cfg.num_kv_heads)?;
                attention.attend(index, batch, &q, &k, &v)?
            }
        };
        let o = proj(&layer.o_proj, Proj::O, &attn)?;
        let (x, h) = layer
            .post_attention_norm
            .add_forward(&o, &x, step.kernels)?;
        let gate_up = projs(
            &[(&layer.gate_proj, Proj::Gate), (&layer.up_proj, Proj::Up)],
            &h,
        )?;
        let [gate, up]: [Tensor; 2] = gate_up.try_into().expect("two projections, two outputs");
        let mlp = proj(
            &layer.down_proj,
            Proj::Down,
            &silu_mul(&gate, &up, step.kernels)?,
        )?;
        Ok((x, mlp))
    }

    /// Adds the LoRA delta of each chunk's adapter to its rows of `ys[g]`, the output of
    /// projection `which[g]` of layer `index` on `x` (projections of one input). Free for a
    /// projection no chunk's adapter touches.
    fn with_adapters(
        &self,
        index: usize,
        which: &[Proj],
        x: &Tensor,
        ys: Vec<Tensor>,
        step: &StepInputs<'_>,
    ) -> ModelResult<Vec<Tensor>> {
        let batch = step.batch;
        let touches = |p: Proj| {
            batch
                .chunks
                .iter()
                .any(|c| c.adapter.is_some_and(|a| self.adapters[a].adapts(index, p)))
        };
        let touched: Vec<usize> = (0..which.len()).filter(|&g| touches(which[g])).collect();
        if touched.is_empty() {
            return Ok(ys);
        }
        if step.row_adapters.is_some() {
            return self.with_device_adapters(index, which, &touched, x, ys, step.row_adapters);
        }
        let xs = x.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        ys.into_iter()
            .enumerate()
            .map(|(g, y)| {
                if !touched.contains(&g) {
                    return Ok(y);
                }
                let mut rows = y.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
                for c in &batch.chunks {
                    if let Some(a) = c.adapter {
                        let span = c.offset..c.offset + c.len;
                        self.adapters[a].apply(index, which[g], &xs, &mut rows, span);
                    }
                }
                Ok(Tensor::from_vec(rows, y.shape(), y.device())?.to_dtype(y.dtype())?)
            })
            .collect()
    }

    /// [`Self::with_adapters`] on a CUDA device: the batched multi-LoRA kernels over the
    /// adapters' device stacks, each `ys[g]` of `touched` updated in place, one launch pair
    /// for all the touched projections whose stacks share a rank (every one, when the adapters
    /// have one rank throughout).
    #[cfg(feature = "cuda")]
    fn with_device_adapters(
        &self,
        index: usize,
        which: &[Proj],
        touched: &[usize],
        x: &Tensor,
        ys: Vec<Tensor>,
        row_adapters: Option<&Tensor>,
    ) -> ModelResult<Vec<Tensor>> {
        use quorum_kernels::cuda::device::{LoraStack, LoraTarget, lora_bgmv};

        let missing = |what: String| ModelError::Batch {
            detail: format!("layer {index}: {what}"),
        };
        let ids = row_adapters.ok_or_else(|| missing("no adapter index per row".into()))?;
        let ys = ys
            .into_iter()
            .map(|y| y.contiguous())
            .collect::<candle_core::Result<Vec<_>>>()?;
        let mut rest = touched
            .iter()
            .map(|&g| {
                self.lora_stacks
                    .get(index, which[g])
                    .map(|s| (g, s))
                    .ok_or_else(|| {
                        missing(format!(
                            "{:?}'s adapters are not stacked on the device",
                            which[g]
                        ))
                    })
            })
            .collect::<ModelResult<Vec<_>>>()?;
        while let Some(&(_, first)) = rest.first() {
            let rank = first.a.dim(1)?;
            let (same, other): (Vec<_>, Vec<_>) = rest
                .into_iter()
                .partition(|(_, s)| s.a.dim(1).is_ok_and(|r| r == rank));
            let targets: Vec<LoraTarget<'_>> = same
                .iter()
                .map(|&(g, s)| LoraTarget {
                    y: &ys[g],
                    stack: LoraStack {
                        a: &s.a,
                        b_t: &s.b_t,
                        scales: &s.scales,
                    },
                })
                .collect();
            lora_bgmv(x, &targets, ids)?;
            rest = other;
        }
        Ok(ys)
    }

    #[cfg(not(feature = "cuda"))]
    fn with_device_adapters(
        &self,
        _index: usize,
        _which: &[Proj],
        _touched: &[usize],
        _x: &Tensor,
        _ys: Vec<Tensor>,
        _row_adapters: Option<&Tensor>,
    ) -> ModelResult<Vec<Tensor>> {
        Err(ModelError::Batch {
            detail: "a CUDA device in a build without the `cuda` feature".into(),
        })
    }

    /// The activation dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
}

/// `silu(gate) * up`: one kernel on a CUDA device with Quorum's kernels (`kernels`).
fn silu_mul(gate: &Tensor, up: &Tensor, kernels: bool) -> candle_core::Result<Tensor> {
    #[cfg(feature = "cuda")]
    if kernels {
        return quorum_kernels::cuda::device::silu_mul(gate, up);
    }
    #[cfg(not(feature = "cuda"))]
    let _ = kernels;
    candle_nn::ops::silu(gate)? * up
}

/// What every layer of one forward pass shares.
struct StepInputs<'a> {
    /// `[tokens]` u32
    positions: &'a Tensor,
    batch: &'a BatchLayout,
    /// See [`DecoderModel::row_adapters`].
    row_adapters: Option<&'a Tensor>,
    /// Whether the step runs Quorum's CUDA kernels (`quorum_kernels::cuda::enabled` on a
    /// CUDA device) rather than candle's ops.
    kernels: bool,
}
