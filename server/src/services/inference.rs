//! `quorum.v1.Inference`: streamed generation, tokenization and the model inventory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_engine::{EngineEvent, GenerateRequest};
use quorum_proto::v1 as pb;
use quorum_proto::v1::inference_server::Inference;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status};
use tracing::Instrument;

use super::ResponseStream;
use crate::auth::Right;
use crate::config::file::Role;
use crate::convert;
use crate::models::LoadedDecoder;
use crate::rpc::RpcContext;
use crate::state::{Admission, AppState, Phase};
use crate::status::ServiceError;

/// Messages buffered per stream. A slow reader holds at most this many deltas before the
/// forwarding task waits; the engine side is unbounded, so this only bounds server memory.
const STREAM_BUFFER: usize = 64;

/// The engine's own deadline trails ours: our timer answers DEADLINE_EXCEEDED and drops the
/// request; the engine's is only a backstop should this task be stuck.
const ENGINE_DEADLINE_SLACK: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct InferenceService {
    pub state: Arc<AppState>,
}

impl InferenceService {
    fn prompt_text(
        decoder: &LoadedDecoder,
        input: Option<&pb::inference_request::Input>,
    ) -> Result<String, ServiceError> {
        use pb::inference_request::Input;
        match input {
            None => Err(ServiceError::invalid("input", "set `prompt` or `chat`")),
            Some(Input::Prompt(p)) if p.is_empty() => {
                Err(ServiceError::invalid("prompt", "must not be empty"))
            }
            Some(Input::Prompt(p)) => Ok(p.clone()),
            Some(Input::Chat(chat)) => decoder.render_chat(&convert::chat_messages(chat)?),
        }
    }

    fn start_generate(
        &self,
        ctx: &RpcContext,
        req: pb::InferenceRequest,
    ) -> Result<ResponseStream<pb::InferenceResponse>, ServiceError> {
        let (admission, models) = self.state.admit()?;
        let decoder = models.decoder(&req.model)?;
        if let Some(adapter) = &req.adapter
            && !decoder.engine.adapters().contains(adapter)
        {
            return Err(ServiceError::NotFound {
                what: "adapter",
                id: adapter.clone(),
            });
        }
        let limits = &self.state.limits;
        let params = convert::sampling_params(req.sampling.as_ref(), limits)?;
        let grammar = convert::grammar(req.sampling.as_ref())?;
        let text = Self::prompt_text(decoder, req.input.as_ref())?;
        let prompt_tokens = decoder.encode(&text, false)?;
        if prompt_tokens.len() > limits.max_prompt_tokens {
            return Err(ServiceError::invalid(
                "prompt",
                format!(
                    "{} tokens exceed the server's limit of {}",
                    prompt_tokens.len(),
                    limits.max_prompt_tokens
                ),
            ));
        }
        let choices = params.n;
        let events = decoder.engine.submit(GenerateRequest {
            draft_hint: Vec::new(),
            keep_prefix: None,
            prompt_tokens,
            params,
            adapter: req.adapter.clone(),
            deadline: Some(ctx.deadline + ENGINE_DEADLINE_SLACK),
            grammar,
        })?;
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let forward = Forward {
            events,
            tx,
            choices,
            ctx: ctx.clone(),
            _admission: admission,
            shutdown: self.state.cancel_all.clone(),
        };
        tokio::spawn(forward.run().instrument(ctx.span.clone()));
        Ok(Box::pin(ReceiverStream::new(rx)))
    }
}

/// Moves engine events to the client until every choice finished, the deadline passed, the
/// server gave up on in-flight work, or the client went away. Returning drops the engine
/// receiver, which cancels whatever is still generating.
struct Forward {
    events: mpsc::UnboundedReceiver<EngineEvent>,
    tx: mpsc::Sender<Result<pb::InferenceResponse, Status>>,
    choices: u32,
    ctx: RpcContext,
    _admission: Admission,
    shutdown: tokio_util::sync::CancellationToken,
}

impl Forward {
    async fn run(mut self) {
        let code = self.pump().await;
        self.ctx.finish(code);
    }

    async fn pump(&mut self) -> Code {
        let mut open = self.choices;
        let deadline = tokio::time::sleep_until(self.ctx.deadline.into());
        tokio::pin!(deadline);
        loop {
            let message = tokio::select! {
                event = self.events.recv() => match event {
                    Some(event) => message(event),
                    None => return self.end(ServiceError::internal("engine closed the stream")).await,
                },
                _ = &mut deadline => return self.end(ServiceError::DeadlineExceeded).await,
                _ = self.shutdown.cancelled() => {
                    let reason = "the server shut down before the request finished".into();
                    return self.end(ServiceError::Unavailable { reason }).await;
                }
                _ = self.tx.closed() => {
                    tracing::info!("client went away; generation cancelled");
                    return Code::Cancelled;
                }
            };
            let finished = message.finish_reason != pb::FinishReason::Unspecified as i32;
            self.ctx.note_first_message();
            if self.tx.send(Ok(message)).await.is_err() {
                return Code::Cancelled;
            }
            if finished {
                open -= 1;
                if open == 0 {
                    return Code::Ok;
                }
            }
        }
    }

    async fn end(&mut self, err: ServiceError) -> Code {
        let code = err.code();
        let _ = self.tx.send(Err(Status::from(err))).await;
        code
    }
}

fn message(event: EngineEvent) -> pb::InferenceResponse {
    match event {
        EngineEvent::Token(t) => pb::InferenceResponse {
            index: t.choice,
            text: t.text,
            token_ids: vec![t.token_id],
            logprobs: t.logprob.into_iter().collect(),
            finish_reason: pb::FinishReason::Unspecified.into(),
            usage: None,
        },
        EngineEvent::Finished(f) => {
            if let Some(error) = &f.error {
                tracing::warn!(%error, "sequence failed in the engine");
            }
            pb::InferenceResponse {
                index: f.choice,
                usage: Some(convert::usage(&f)),
                finish_reason: convert::finish_reason(f.reason).into(),
                text: f.text,
                token_ids: Vec::new(),
                logprobs: Vec::new(),
            }
        }
    }
}

fn tokenize(
    state: &Arc<AppState>,
    req: &pb::TokenizeRequest,
) -> Result<pb::TokenizeResponse, ServiceError> {
    use pb::tokenize_request::Input;
    let (_admission, models) = state.admit()?;
    let decoder = models.decoder(&req.model)?;
    let (text, special) = match &req.input {
        None => return Err(ServiceError::invalid("input", "set `text` or `chat`")),
        Some(Input::Text(t)) => (t.clone(), req.add_special_tokens),
        // A rendered template already spells out its special tokens.
        Some(Input::Chat(c)) => (decoder.render_chat(&convert::chat_messages(c)?)?, false),
    };
    let token_ids = decoder.encode(&text, special)?;
    let tokenizer = decoder.engine.tokenizer();
    let tokens = token_ids
        .iter()
        .map(|&id| tokenizer.id_to_token(id).unwrap_or_default())
        .collect();
    Ok(pb::TokenizeResponse {
        token_ids,
        tokens,
        max_model_len: decoder.engine.info().max_model_len as u32,
    })
}

fn role(r: Role) -> i32 {
    match r {
        Role::Generator => pb::ModelRole::Generator,
        Role::Selector => pb::ModelRole::Selector,
        Role::Embedder => pb::ModelRole::Embedder,
    }
    .into()
}

fn list_models(state: &AppState) -> pb::ListModelsResponse {
    let loaded = state.loaded_models();
    let model_state = match (state.phase(), loaded) {
        (Phase::Draining, _) => pb::ModelState::Draining,
        (_, Some(_)) => pb::ModelState::Ready,
        (_, None) => pb::ModelState::Loading,
    };
    let models = state
        .model_specs
        .iter()
        .map(|spec| {
            let decoder = loaded.and_then(|m| m.decoders.iter().find(|d| d.spec.name == spec.name));
            let stats = decoder.map(|d| d.engine.stats());
            pb::ModelInfo {
                name: spec.name.clone(),
                roles: spec.roles.iter().copied().map(role).collect(),
                device: decoder.map_or_else(|| spec.device.to_string(), |d| d.engine.device()),
                state: model_state.into(),
                source: spec.source.clone(),
                adapters: decoder.map_or_else(
                    || spec.adapters.keys().cloned().collect(),
                    |d| d.engine.adapters(),
                ),
                max_model_len: decoder.map_or(0, |d| d.engine.info().max_model_len as u32),
                cpu_path: decoder
                    .and_then(|d| d.engine.info().cpu_path)
                    .map(|p| p.name().to_owned())
                    .unwrap_or_default(),
                kv_cache_bytes: decoder.map_or(0, |d| d.engine.info().kv_cache_bytes),
                kv_dtype: decoder
                    .map(|d| d.engine.info().kv_dtype.as_str().to_owned())
                    .unwrap_or_default(),
                load: stats.map(|s| pb::EngineLoad {
                    running: s.running as u32,
                    waiting: s.waiting as u32,
                    kv_blocks_used: s.kv_blocks_used as u64,
                    kv_blocks_total: u64::from(s.kv_blocks_total),
                }),
            }
        })
        .collect();
    let runtime = state.pipeline_runtime().ok();
    let generators = runtime.map_or_else(Vec::new, |r| {
        r.served_generators()
            .into_iter()
            .map(|g| pb::PipelineGenerator {
                name: g.name,
                model: g.model,
                format: g.format,
                adapter: g.adapter.unwrap_or_default(),
            })
            .collect()
    });
    let selector = runtime.zip(loaded).map(|(r, m)| {
        let s = r.served_selector(m);
        pb::PipelineSelector {
            model: s.model.unwrap_or_default(),
            adapter: s.adapter.unwrap_or_default(),
            enabled: s.enabled,
        }
    });
    pb::ListModelsResponse {
        models,
        generators,
        selector,
    }
}

/// Runs an adapter administration call off the async workers: it reads files and waits for the
/// engine's next step.
async fn off_workers<R: Send + 'static, T: Send + 'static>(
    state: &Arc<AppState>,
    request: R,
    call: fn(&Arc<AppState>, &R) -> Result<T, ServiceError>,
) -> Result<T, ServiceError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || call(&state, &request))
        .await
        .unwrap_or_else(|e| Err(ServiceError::internal(e)))
}

#[tonic::async_trait]
impl Inference for InferenceService {
    type GenerateStream = ResponseStream<pb::InferenceResponse>;

    async fn generate(
        &self,
        request: Request<pb::InferenceRequest>,
    ) -> Result<Response<Self::GenerateStream>, Status> {
        let ctx = RpcContext::begin(&self.state, "Inference/Generate", &request);
        let started = Instant::now();
        let result = ctx.require(Right::Ask).and_then(|()| {
            let _entered = ctx.span.enter();
            self.start_generate(&ctx, request.into_inner())
        });
        tracing::debug!(parent: &ctx.span, setup_ms = started.elapsed().as_secs_f64() * 1e3, "stream started");
        match result {
            Ok(stream) => Ok(ctx.respond(stream)),
            Err(e) => Err(ctx.fail(e)),
        }
    }

    async fn tokenize(
        &self,
        request: Request<pb::TokenizeRequest>,
    ) -> Result<Response<pb::TokenizeResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Inference/Tokenize", &request);
        ctx.complete(
            ctx.require(Right::Ask)
                .and_then(|()| tokenize(&self.state, request.get_ref())),
        )
    }

    async fn list_models(
        &self,
        request: Request<pb::ListModelsRequest>,
    ) -> Result<Response<pb::ListModelsResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Inference/ListModels", &request);
        ctx.complete(ctx.require(Right::Ask).map(|()| list_models(&self.state)))
    }

    async fn load_adapter(
        &self,
        request: Request<pb::LoadAdapterRequest>,
    ) -> Result<Response<pb::AdapterList>, Status> {
        let ctx = RpcContext::begin(&self.state, "Inference/LoadAdapter", &request);
        if let Err(e) = ctx.require(Right::Adapters) {
            return Err(ctx.fail(e));
        }
        ctx.complete(
            off_workers(
                &self.state,
                request.into_inner(),
                crate::adapter_admin::load,
            )
            .await,
        )
    }

    async fn unload_adapter(
        &self,
        request: Request<pb::UnloadAdapterRequest>,
    ) -> Result<Response<pb::AdapterList>, Status> {
        let ctx = RpcContext::begin(&self.state, "Inference/UnloadAdapter", &request);
        if let Err(e) = ctx.require(Right::Adapters) {
            return Err(ctx.fail(e));
        }
        ctx.complete(
            off_workers(
                &self.state,
                request.into_inner(),
                crate::adapter_admin::unload,
            )
            .await,
        )
    }
}
