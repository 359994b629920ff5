//! The text-to-SQL pipeline's model traits implemented with the engines: the pipeline is
//! synchronous and runs on a blocking thread; each call here submits to the engines and waits
//! on the async runtime. One instance per request carries that request's cancellation and
//! deadline, so a client that goes away stops its model work at the next engine step.

use std::sync::Arc;
use std::time::Instant;

use quorum_engine::{
    EngineError, EngineEvent, FinishReason, GenerateRequest, Grammar, GrammarSpec, SamplingParams,
};
use quorum_sql::model::{ContextEncoder, WordStates};
use quorum_sql::model::{
    Embedder, Generation, GenerationRequest, Generator, ModelCallError, PromptMessages, Selector,
};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::models::{LoadedDecoder, LoadedEmbedder, ModelRegistry};

/// What bounds one request's model calls.
#[derive(Debug, Clone)]
pub struct CallScope {
    pub runtime: tokio::runtime::Handle,
    pub cancel: CancellationToken,
    pub deadline: Instant,
}

impl CallScope {
    /// Waits for `fut` unless the request is cancelled or its deadline passes first.
    fn wait<T>(&self, fut: impl Future<Output = T>) -> Result<T, ModelCallError> {
        self.runtime.block_on(async {
            tokio::select! {
                out = fut => Ok(out),
                _ = self.cancel.cancelled() => Err(ModelCallError::Cancelled),
                _ = tokio::time::sleep_until(self.deadline.into()) => Err(ModelCallError::Cancelled),
            }
        })
    }
}

/// Renders a pipeline prompt with the decoder's chat template ([`quorum_weights::render_turn`],
/// the same rendering the trainer builds its examples with).
fn render(decoder: &LoadedDecoder, prompt: &PromptMessages) -> Result<String, ModelCallError> {
    quorum_weights::render_turn(
        decoder.engine.chat_template(),
        prompt.system.as_deref(),
        &prompt.user,
        prompt.answer_prefix.as_deref(),
    )
    .map_err(|e| failed(decoder, e.to_string()))
}

fn failed(decoder: &LoadedDecoder, message: String) -> ModelCallError {
    ModelCallError::Failed {
        name: decoder.spec.name.clone(),
        message,
    }
}

fn submit_error(decoder: &LoadedDecoder, err: EngineError) -> ModelCallError {
    let name = decoder.spec.name.clone();
    match err {
        EngineError::QueueFull { .. } => ModelCallError::Busy {
            name,
            reason: err.to_string(),
        },
        EngineError::PromptTooLong { .. }
        | EngineError::Grammar(_)
        | EngineError::EmptyPrompt
        | EngineError::InvalidParams(_) => ModelCallError::InvalidInput {
            name,
            reason: err.to_string(),
        },
        EngineError::UnknownAdapter { adapter } => ModelCallError::UnknownAdapter { name, adapter },
        EngineError::ShuttingDown => ModelCallError::ShuttingDown { name },
        // Administrative answers; a submit never gets them.
        EngineError::Config { .. }
        | EngineError::Model(_)
        | EngineError::AdapterExists { .. }
        | EngineError::AdapterInUse { .. } => ModelCallError::Failed {
            name,
            message: err.to_string(),
        },
    }
}

fn submit(
    decoder: &LoadedDecoder,
    prompt: &PromptMessages,
    params: SamplingParams,
    adapter: Option<String>,
    deadline: Instant,
    (grammar, draft_hint, keep_prefix): (Option<Grammar>, Option<&str>, Option<&str>),
) -> Result<UnboundedReceiver<EngineEvent>, ModelCallError> {
    let text = render(decoder, prompt)?;
    let prompt_tokens = decoder
        .encode(&text, false)
        .map_err(|e| failed(decoder, e.to_string()))?;
    let draft_hint = match draft_hint {
        Some(hint) => decoder
            .encode(hint, false)
            .map_err(|e| failed(decoder, e.to_string()))?,
        None => Vec::new(),
    };
    let request = GenerateRequest {
        prompt_tokens,
        params,
        adapter,
        deadline: Some(deadline),
        grammar,
        draft_hint,
        keep_prefix: keep_prefix.map(str::to_owned),
    };
    decoder
        .engine
        .submit(request)
        .map_err(|e| submit_error(decoder, e))
}

/// Reads one choice to its end.
async fn collect(
    mut rx: UnboundedReceiver<EngineEvent>,
    name: String,
    started: Instant,
) -> Result<Generation, ModelCallError> {
    let mut text = String::new();
    while let Some(event) = rx.recv().await {
        match event {
            EngineEvent::Token(t) => text.push_str(&t.text),
            EngineEvent::Finished(f) => {
                text.push_str(&f.text);
                return match f.reason {
                    FinishReason::Stop | FinishReason::Length => Ok(Generation {
                        text,
                        tokens_generated: f.completion_tokens,
                        prompt_tokens: f.prompt_tokens,
                        cached_tokens: f.cached_tokens,
                        elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
                        constrained: f.constrained == Some(true),
                    }),
                    FinishReason::Cancelled => Err(ModelCallError::Cancelled),
                    FinishReason::Error => Err(ModelCallError::Failed {
                        name,
                        message: f.error.unwrap_or_else(|| "engine error".into()),
                    }),
                };
            }
        }
    }
    Err(ModelCallError::Failed {
        name,
        message: "the engine stopped without finishing the request".into(),
    })
}

/// The loaded model, and optionally one of its LoRA adapters, that runs a generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratorTarget {
    pub model: String,
    pub adapter: Option<String>,
}

/// Generators backed by the engines.
#[derive(Debug, Clone)]
pub struct EngineGenerator {
    pub models: Arc<ModelRegistry>,
    /// Generator name → model and adapter (several generators may share one model).
    pub routes: Arc<std::collections::HashMap<String, GeneratorTarget>>,
    pub scope: CallScope,
}

impl Generator for EngineGenerator {
    fn generate_batch(
        &self,
        requests: &[GenerationRequest],
    ) -> Vec<Result<Generation, ModelCallError>> {
        let started = Instant::now();
        // Submit everything before waiting on anything, so the engines batch the requests.
        let submitted: Vec<Result<(String, UnboundedReceiver<EngineEvent>), ModelCallError>> =
            requests
                .iter()
                .map(|r| {
                    let unknown = || ModelCallError::UnknownModel {
                        name: r.generator.clone(),
                    };
                    let target = self.routes.get(&r.generator).ok_or_else(unknown)?;
                    let decoder = self.models.decoder(&target.model).map_err(|_| unknown())?;
                    let params = SamplingParams {
                        temperature: r.sampling.temperature,
                        top_p: r.sampling.top_p,
                        seed: r.sampling.seed,
                        max_new_tokens: r.sampling.max_new_tokens as u32,
                        stop_strings: r.stop.clone(),
                        ..SamplingParams::greedy()
                    };
                    // The grammar describes the whole answer; the prefix the prompt wrote for
                    // the model is its start.
                    let grammar = r.grammar.as_ref().map(|g| {
                        Grammar::new(GrammarSpec::Lark(g.clone()))
                            .after(r.prompt.answer_prefix.clone().unwrap_or_default())
                    });
                    let rx = submit(
                        decoder,
                        &r.prompt,
                        params,
                        target.adapter.clone(),
                        self.scope.deadline,
                        (grammar, r.draft_hint.as_deref(), r.keep_prefix.as_deref()),
                    )?;
                    Ok((decoder.spec.name.clone(), rx))
                })
                .collect();
        submitted
            .into_iter()
            .zip(requests)
            .map(|(s, r)| {
                let (name, rx) = s?;
                let mut generation = self.scope.wait(collect(rx, name, started))??;
                // The answer as the model "wrote" it, the prefix included.
                if let Some(prefix) = &r.prompt.answer_prefix {
                    generation.text.insert_str(0, prefix);
                }
                Ok(generation)
            })
            .collect()
    }
}

/// The selection model: one decoding step, reading the labels' log-probabilities.
#[derive(Debug, Clone)]
pub struct EngineSelector {
    pub decoder: Arc<LoadedDecoder>,
    /// The LoRA adapter the choice runs with (`pipeline.selector_adapter`), if any.
    pub adapter: Option<String>,
    pub scope: CallScope,
}

impl EngineSelector {
    fn label_tokens(&self, labels: &[String]) -> Result<Vec<u32>, ModelCallError> {
        labels
            .iter()
            .map(|label| {
                let ids = self
                    .decoder
                    .encode(label, false)
                    .map_err(|e| failed(&self.decoder, e.to_string()))?;
                // The answer's first token decides; labels are single letters, one token each
                // in every tokenizer we serve.
                ids.first()
                    .copied()
                    .ok_or_else(|| failed(&self.decoder, format!("label {label:?} is empty")))
            })
            .collect()
    }
}

impl Selector for EngineSelector {
    fn choose(&self, prompt: &str, labels: &[String]) -> Result<Vec<f32>, ModelCallError> {
        let tokens = self.label_tokens(labels)?;
        let params = SamplingParams {
            max_new_tokens: 1,
            candidate_token_ids: tokens.clone(),
            ..SamplingParams::greedy()
        };
        let mut rx = submit(
            &self.decoder,
            &PromptMessages::user(prompt),
            params,
            self.adapter.clone(),
            self.scope.deadline,
            (None, None, None),
        )?;
        let first = self.scope.wait(async {
            while let Some(event) = rx.recv().await {
                if let EngineEvent::Token(t) = event {
                    return Some(t.candidate_logprobs);
                }
            }
            None
        })?;
        let scores = first.ok_or_else(|| failed(&self.decoder, "no token was generated".into()))?;
        Ok(tokens
            .iter()
            .map(|id| {
                scores
                    .iter()
                    .find(|(t, _)| t == id)
                    .map_or(f32::NEG_INFINITY, |(_, lp)| *lp)
            })
            .collect())
    }
}

/// Sentence embeddings for demonstration retrieval (runs on the calling thread: MiniLM embeds
/// a question in milliseconds, not worth a queue).
#[derive(Debug, Clone)]
pub struct BertSentenceEmbedder {
    pub model: Arc<LoadedEmbedder>,
}

impl Embedder for BertSentenceEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelCallError> {
        let fail = |e: String| ModelCallError::Failed {
            name: self.model.spec.name.clone(),
            message: e,
        };
        let vectors = self
            .model
            .model
            .embed(texts)
            .map_err(|e| fail(e.to_string()))?;
        vectors.to_vec2::<f32>().map_err(|e| fail(e.to_string()))
    }
}

impl ContextEncoder for BertSentenceEmbedder {
    fn word_states(
        &self,
        groups: &[Vec<String>],
        masks: &[Option<(usize, usize)>],
    ) -> Result<Vec<WordStates>, ModelCallError> {
        self.model
            .model
            .word_states(groups, masks)
            .map_err(|e| ModelCallError::Failed {
                name: self.model.spec.name.clone(),
                message: e.to_string(),
            })
    }
}
