//! A BERT encoder used as a sentence embedder (all-MiniLM-L6-v2): mean pooling over tokens, then
//! L2 normalization, as sentence-transformers does.
//!
//! Sentences are encoded one at a time (no padding), so no attention mask is needed and a
//! sentence's embedding never depends on what else was in the call.

use candle_core::{DType, Device, Tensor};
use candle_nn::LayerNorm;
use quorum_weights::{Checkpoint, ModelConfigSource, TensorStore};

use crate::error::{ModelError, ModelResult};

#[derive(Debug, Clone)]
struct BertConfig {
    hidden: usize,
    heads: usize,
    layers: usize,
    intermediate: usize,
    eps: f64,
    max_position: usize,
}

#[derive(Debug, Clone)]
struct Dense {
    weight: Tensor,
    bias: Tensor,
}

impl Dense {
    fn load(store: &TensorStore, prefix: &str, out: usize, inp: usize) -> ModelResult<Self> {
        Ok(Self {
            weight: store
                .get_checked(&format!("{prefix}.weight"), &[out, inp])?
                .to_dense()?,
            bias: store
                .get_checked(&format!("{prefix}.bias"), &[out])?
                .to_dense()?,
        })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.matmul(&self.weight.t()?)?.broadcast_add(&self.bias)
    }
}

fn layer_norm(store: &TensorStore, prefix: &str, size: usize, eps: f64) -> ModelResult<LayerNorm> {
    Ok(LayerNorm::new(
        store
            .get_checked(&format!("{prefix}.weight"), &[size])?
            .to_dense()?,
        store
            .get_checked(&format!("{prefix}.bias"), &[size])?
            .to_dense()?,
        eps,
    ))
}

#[derive(Debug, Clone)]
struct BertLayer {
    query: Dense,
    key: Dense,
    value: Dense,
    attn_out: Dense,
    attn_norm: LayerNorm,
    intermediate: Dense,
    output: Dense,
    out_norm: LayerNorm,
}

#[derive(Debug, Clone)]
pub struct BertEmbedder {
    cfg: BertConfig,
    word: Tensor,
    position: Tensor,
    token_type: Tensor,
    embed_norm: LayerNorm,
    layers: Vec<BertLayer>,
    tokenizer: tokenizers::Tokenizer,
    device: Device,
}

fn json_usize(cfg: &serde_json::Value, key: &str) -> ModelResult<usize> {
    cfg.get(key)
        .and_then(|v| v.as_u64())
        .map(|v| v as usize)
        .ok_or_else(|| ModelError::Config {
            detail: format!("config.json has no integer `{key}`"),
        })
}

impl BertEmbedder {
    pub fn load(ckpt: Checkpoint, device: &Device) -> ModelResult<Self> {
        let ModelConfigSource::HfConfig(cfg) = &ckpt.config else {
            return Err(ModelError::Config {
                detail: "a BERT embedder needs a Hugging Face directory".into(),
            });
        };
        if ckpt.architecture != "bert" {
            return Err(ModelError::Config {
                detail: format!("`{}` is not a BERT checkpoint", ckpt.architecture),
            });
        }
        let c = BertConfig {
            hidden: json_usize(cfg, "hidden_size")?,
            heads: json_usize(cfg, "num_attention_heads")?,
            layers: json_usize(cfg, "num_hidden_layers")?,
            intermediate: json_usize(cfg, "intermediate_size")?,
            eps: cfg
                .get("layer_norm_eps")
                .and_then(|v| v.as_f64())
                .unwrap_or(1e-12),
            max_position: json_usize(cfg, "max_position_embeddings")?,
        };
        let s = &ckpt.tensors;
        // Some exports prefix every name with `bert.`.
        let root = if s.contains("bert.embeddings.word_embeddings.weight") {
            "bert."
        } else {
            ""
        };
        let e = |n: &str| -> ModelResult<Tensor> {
            Ok(s.get(&format!("{root}embeddings.{n}.weight"))?.to_dense()?)
        };
        let layers = (0..c.layers)
            .map(|i| Self::load_layer(s, &format!("{root}encoder.layer.{i}"), &c))
            .collect::<ModelResult<Vec<_>>>()?;
        let mut tokenizer = ckpt.tokenizer;
        // One sentence at a time: padding would only add masked positions.
        tokenizer.with_padding(None);
        Ok(Self {
            word: e("word_embeddings")?,
            position: e("position_embeddings")?,
            token_type: e("token_type_embeddings")?,
            embed_norm: layer_norm(s, &format!("{root}embeddings.LayerNorm"), c.hidden, c.eps)?,
            layers,
            tokenizer,
            device: device.clone(),
            cfg: c,
        })
    }

    fn load_layer(s: &TensorStore, p: &str, c: &BertConfig) -> ModelResult<BertLayer> {
        let h = c.hidden;
        Ok(BertLayer {
            query: Dense::load(s, &format!("{p}.attention.self.query"), h, h)?,
            key: Dense::load(s, &format!("{p}.attention.self.key"), h, h)?,
            value: Dense::load(s, &format!("{p}.attention.self.value"), h, h)?,
            attn_out: Dense::load(s, &format!("{p}.attention.output.dense"), h, h)?,
            attn_norm: layer_norm(s, &format!("{p}.attention.output.LayerNorm"), h, c.eps)?,
            intermediate: Dense::load(s, &format!("{p}.intermediate.dense"), c.intermediate, h)?,
            output: Dense::load(s, &format!("{p}.output.dense"), h, c.intermediate)?,
            out_norm: layer_norm(s, &format!("{p}.output.LayerNorm"), h, c.eps)?,
        })
    }

    pub fn dim(&self) -> usize {
        self.cfg.hidden
    }

    pub fn tokenizer(&self) -> &tokenizers::Tokenizer {
        &self.tokenizer
    }

    /// The most tokens a sentence may have; [`BertEmbedder::encode`] cuts longer ones.
    pub fn max_tokens(&self) -> usize {
        self.cfg.max_position
    }

    /// Token ids of a sentence as the model sees them ([CLS] ... [SEP], truncated).
    pub fn encode(&self, text: &str) -> ModelResult<Vec<u32>> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| ModelError::Config {
                detail: format!("tokenizer: {e}"),
            })?;
        let mut ids = enc.get_ids().to_vec();
        ids.truncate(self.cfg.max_position);
        Ok(ids)
    }

    /// Unit-length sentence embeddings `[n, dim]`.
    pub fn embed(&self, texts: &[&str]) -> ModelResult<Tensor> {
        let rows = texts
            .iter()
            .map(|t| self.embed_ids(&self.encode(t)?))
            .collect::<ModelResult<Vec<_>>>()?;
        Ok(Tensor::stack(&rows, 0)?)
    }

    /// Mean-pooled, L2-normalized embedding `[dim]` of one tokenized sentence.
    pub fn embed_ids(&self, ids: &[u32]) -> ModelResult<Tensor> {
        let hidden = self.hidden_states(ids)?;
        let mean = hidden.mean(0)?;
        let norm = mean.sqr()?.sum_all()?.sqrt()?;
        Ok(mean.broadcast_div(&norm)?)
    }

    /// For each entry of `masks`, the sequence `[CLS] group0 [SEP] group1 [SEP] …` with every
    /// sub-token of the word at that (group, word) replaced by `[MASK]` (`None`: nothing masked);
    /// returns, per mask, group and word, the mean of the word's last hidden states (empty for a
    /// word cut off at the model's length). The de-semanticization paper's relevance probe compares
    /// these with and without each question word masked. Words are tokenized once.
    pub fn word_states(
        &self,
        groups: &[Vec<String>],
        masks: &[Option<(usize, usize)>],
    ) -> ModelResult<Vec<Vec<Vec<Vec<f32>>>>> {
        let special = |t: &str| {
            self.tokenizer
                .token_to_id(t)
                .ok_or_else(|| ModelError::Config {
                    detail: format!("the tokenizer has no {t} token"),
                })
        };
        let (cls, sep, mask_id) = (special("[CLS]")?, special("[SEP]")?, special("[MASK]")?);
        let mut ids = vec![cls];
        let mut spans: Vec<Vec<std::ops::Range<usize>>> = Vec::with_capacity(groups.len());
        for words in groups {
            let mut group_spans = Vec::with_capacity(words.len());
            for word in words {
                let enc = self.tokenizer.encode(word.as_str(), false).map_err(|e| {
                    ModelError::Config {
                        detail: format!("tokenizer: {e}"),
                    }
                })?;
                let start = ids.len();
                ids.extend_from_slice(enc.get_ids());
                group_spans.push(start..ids.len());
            }
            ids.push(sep);
            spans.push(group_spans);
        }
        ids.truncate(self.cfg.max_position);
        masks
            .iter()
            .map(|mask| {
                let mut masked = ids.clone();
                if let Some(span) = mask.and_then(|(g, w)| spans.get(g)?.get(w)) {
                    let end = span.end.min(masked.len());
                    masked[span.start.min(end)..end].fill(mask_id);
                }
                let hidden = self.hidden_states(&masked)?.to_vec2::<f32>()?;
                Ok(spans
                    .iter()
                    .map(|group| {
                        group
                            .iter()
                            .map(|span| self.mean_over(&hidden, span))
                            .collect()
                    })
                    .collect())
            })
            .collect()
    }

    /// The mean of `hidden[span]`; empty when the span is empty or was cut off.
    fn mean_over(&self, hidden: &[Vec<f32>], span: &std::ops::Range<usize>) -> Vec<f32> {
        if span.is_empty() || span.end > hidden.len() {
            return Vec::new();
        }
        let mut mean = vec![0f32; self.cfg.hidden];
        for row in &hidden[span.clone()] {
            for (m, x) in mean.iter_mut().zip(row) {
                *m += x;
            }
        }
        let n = span.len() as f32;
        mean.iter_mut().for_each(|m| *m /= n);
        mean
    }

    /// Last hidden states `[tokens, dim]`.
    pub fn hidden_states(&self, ids: &[u32]) -> ModelResult<Tensor> {
        let n = ids.len();
        let ids_t = Tensor::from_slice(ids, n, &self.device)?;
        let pos = Tensor::arange(0u32, n as u32, &self.device)?;
        let types = Tensor::zeros(n, DType::U32, &self.device)?;
        let x = ((self.word.index_select(&ids_t, 0)? + self.position.index_select(&pos, 0)?)?
            + self.token_type.index_select(&types, 0)?)?;
        let mut x = candle_nn::Module::forward(&self.embed_norm, &x)?;
        for layer in &self.layers {
            x = self.layer_forward(layer, &x)?;
        }
        Ok(x)
    }

    fn layer_forward(&self, l: &BertLayer, x: &Tensor) -> ModelResult<Tensor> {
        let n = x.dim(0)?;
        let hd = self.cfg.hidden / self.cfg.heads;
        let split = |t: Tensor| {
            t.reshape((n, self.cfg.heads, hd))?
                .transpose(0, 1)?
                .contiguous()
        };
        let q = split(l.query.forward(x)?)?;
        let k = split(l.key.forward(x)?)?;
        let v = split(l.value.forward(x)?)?;
        let scores = (q.matmul(&k.t()?)? / (hd as f64).sqrt())?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let ctx = probs
            .matmul(&v)?
            .transpose(0, 1)?
            .reshape((n, self.cfg.hidden))?;
        let x = candle_nn::Module::forward(&l.attn_norm, &(l.attn_out.forward(&ctx)? + x)?)?;
        let inter = l.intermediate.forward(&x)?.gelu_erf()?;
        let out = candle_nn::Module::forward(&l.out_norm, &(l.output.forward(&inter)? + &x)?)?;
        Ok(out)
    }
}

/// Cosine similarity of two unit vectors (their dot product).
pub fn cosine(a: &Tensor, b: &Tensor) -> ModelResult<f32> {
    Ok((a * b)?.sum_all()?.to_scalar::<f32>()?)
}
