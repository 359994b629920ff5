//! The OpenAI-compatible endpoints that generate: `/v1/models`, `/v1/chat/completions` and
//! `/v1/completions`, as the OpenAI API defines them and vLLM serves them, so that the OpenAI
//! clients and the tools built on them (LiteLLM, LangChain, Open WebUI) talk to Quorum's models
//! unchanged. Each request becomes an `Inference.Generate` call.
//!
//! Where the two differ, OpenAI's meaning wins: an unset `temperature` samples at 1 (gRPC's
//! default is greedy). A LoRA adapter is a model of its own, named by the adapter's name (or
//! `model:adapter` where two models have an adapter of that name), as vLLM lists them. vLLM's
//! extra sampling fields `top_k`, `repetition_penalty`, `ignore_eos`, `guided_regex`,
//! `guided_json` and `guided_grammar` are accepted too. `model` is required. What Quorum does
//! not do is refused with 400 and the field named, never ignored: tools, non-zero presence or
//! frequency penalties, top log-probabilities, `echo`, `suffix`, `best_of`, and any field it
//! does not know (`unknown_parameter`); fields it has no part for are accepted at their
//! defaults only (`check_other_fields`). `max_tokens` may reach the model's context (its
//! `max_model_len`) unless the operator caps it. Model `quorum-sql` is the text-to-SQL pipeline
//! rather than a model (`openai_pipeline.rs`).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use quorum_proto::v1 as pb;
use quorum_proto::v1::inference_server::Inference;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openai_pipeline::{self, PIPELINE_MODEL, pipeline_ask};
use super::openai_stream::{self, Flavor, unix_now};
use super::{ApiError, Http, grpc_request};
use crate::auth::Caller;
use crate::config::file::Role;

/// `stop`: one string or several.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

/// `response_format`: `text`, `json_object`, or `json_schema` with the schema.
#[derive(Debug, Deserialize)]
struct ResponseFormat {
    #[serde(rename = "type")]
    kind: String,
    json_schema: Option<JsonSchemaFormat>,
}

#[derive(Debug, Deserialize)]
struct JsonSchemaFormat {
    schema: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
}

/// The sampling fields chat and text completions share.
#[derive(Debug, Default, Deserialize)]
struct Sampling {
    temperature: Option<f32>,
    top_p: Option<f32>,
    n: Option<u32>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    stop: Option<Stop>,
    seed: Option<u64>,
    presence_penalty: Option<f32>,
    frequency_penalty: Option<f32>,
    response_format: Option<ResponseFormat>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    // vLLM's extensions.
    top_k: Option<i64>,
    repetition_penalty: Option<f32>,
    ignore_eos: Option<bool>,
    guided_regex: Option<String>,
    guided_json: Option<Value>,
    guided_grammar: Option<String>,
}

impl Sampling {
    fn streams(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    /// The gRPC sampling options; `logprobs` asks for each token's log-probability.
    fn options(&self, logprobs: bool) -> Result<pb::SamplingOptions, ApiError> {
        for (field, value) in [
            ("presence_penalty", self.presence_penalty),
            ("frequency_penalty", self.frequency_penalty),
        ] {
            if value.is_some_and(|v| v != 0.0) {
                return Err(ApiError::invalid(
                    field,
                    "not supported (use `repetition_penalty`)",
                ));
            }
        }
        let stop = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        };
        let top_k = match self.top_k {
            None => None,
            // vLLM writes "no top-k" as -1; gRPC as 0.
            Some(k) if k <= 0 => Some(0),
            Some(k) => Some(u32::try_from(k).map_err(|_| ApiError::invalid("top_k", "too large"))?),
        };
        Ok(pb::SamplingOptions {
            temperature: Some(self.temperature.unwrap_or(1.0)),
            top_k,
            top_p: self.top_p,
            seed: self.seed,
            repetition_penalty: self.repetition_penalty,
            max_tokens: self.max_completion_tokens.or(self.max_tokens),
            stop,
            stop_token_ids: Vec::new(),
            logprobs,
            n: self.n,
            ignore_eos: self.ignore_eos.unwrap_or(false),
            constraint: self.constraint()?,
        })
    }

    /// The structured-output constraint: `response_format` or one of vLLM's `guided_*` fields.
    fn constraint(&self) -> Result<Option<pb::sampling_options::Constraint>, ApiError> {
        use pb::sampling_options::Constraint;
        let mut found: Vec<(&str, Constraint)> = Vec::new();
        if let Some(format) = &self.response_format {
            match format.kind.as_str() {
                "text" => {}
                "json_object" => {
                    found.push((
                        "response_format",
                        Constraint::JsonSchema(r#"{"type":"object"}"#.into()),
                    ));
                }
                "json_schema" => {
                    let schema = format
                        .json_schema
                        .as_ref()
                        .and_then(|s| s.schema.as_ref())
                        .ok_or_else(|| {
                            ApiError::invalid("response_format.json_schema.schema", "missing")
                        })?;
                    found.push((
                        "response_format",
                        Constraint::JsonSchema(schema.to_string()),
                    ));
                }
                other => {
                    return Err(ApiError::invalid(
                        "response_format.type",
                        format!("`{other}` is not text, json_object or json_schema"),
                    ));
                }
            }
        }
        if let Some(regex) = &self.guided_regex {
            found.push(("guided_regex", Constraint::Regex(regex.clone())));
        }
        if let Some(schema) = &self.guided_json {
            let text = match schema {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            found.push(("guided_json", Constraint::JsonSchema(text)));
        }
        if let Some(grammar) = &self.guided_grammar {
            found.push(("guided_grammar", Constraint::LarkGrammar(grammar.clone())));
        }
        match found.len() {
            0 | 1 => Ok(found.pop().map(|(_, c)| c)),
            _ => Err(ApiError::invalid(
                found[1].0,
                format!("only one constraint at a time (also given: {})", found[0].0),
            )),
        }
    }
}

/// A chat message's content: a string, or parts of which only text is supported.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    content: Option<Content>,
}

#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    model: String,
    messages: Vec<Message>,
    #[serde(flatten)]
    sampling: Sampling,
    logprobs: Option<bool>,
    top_logprobs: Option<u32>,
    tools: Option<Vec<Value>>,
    /// Quorum's extension: the database the pipeline model answers over.
    database: Option<String>,
    /// Every other field, checked by [`check_other_fields`]; last, so that it holds only what
    /// the fields above did not take.
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Prompt {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    model: String,
    prompt: Prompt,
    #[serde(flatten)]
    sampling: Sampling,
    logprobs: Option<u32>,
    echo: Option<bool>,
    suffix: Option<String>,
    best_of: Option<u32>,
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

/// The fields of OpenAI's API that Quorum has no part for but honours at their defaults (which
/// are what it does anyway), and the value each may take. Any other field, or one of these
/// with another value, is refused with `unknown_parameter` or `invalid_value`, never dropped.
fn check_other_fields(other: &serde_json::Map<String, Value>) -> Result<(), ApiError> {
    for (name, value) in other {
        let honoured = match name.as_str() {
            // The end user, for the server's log: always honoured.
            "user" | "safety_identifier" => {
                if let Some(user) = value.as_str() {
                    tracing::info!(user, "request for an end user");
                }
                value.is_string()
            }
            // Quorum stores no completions.
            "store" => value == &Value::Bool(false),
            // One tier of service.
            "service_tier" => matches!(value.as_str(), Some("auto" | "default")),
            // Without tools there is no tool to choose or to call in parallel.
            "tool_choice" => matches!(value.as_str(), Some("none" | "auto")),
            "parallel_tool_calls" => value.is_boolean(),
            "modalities" => value == &serde_json::json!(["text"]),
            "logit_bias" => value.as_object().is_some_and(serde_json::Map::is_empty),
            _ => return Err(ApiError::unknown_field(name)),
        };
        if !honoured && !value.is_null() {
            return Err(ApiError::invalid(
                name,
                format!("only its default is supported, not {value}"),
            ));
        }
    }
    Ok(())
}

/// The model (and adapter) a request's `model` names: a model, an adapter by its name, or
/// `model:adapter`. While the models load, the name goes on as given (the call then answers
/// UNAVAILABLE).
fn resolve_model(http: &Http, name: &str) -> Result<(String, Option<String>), ApiError> {
    if name.is_empty() {
        return Err(ApiError::invalid(
            "model",
            "must name a model (GET /v1/models lists them)",
        ));
    }
    let Some(models) = http.state.loaded_models() else {
        return Ok((name.to_owned(), None));
    };
    if models.decoders.iter().any(|d| d.spec.name == name) {
        return Ok((name.to_owned(), None));
    }
    if let Some((model, adapter)) = name.split_once(':')
        && let Some(d) = models.decoders.iter().find(|d| d.spec.name == model)
        && d.engine.adapters().iter().any(|a| a == adapter)
    {
        return Ok((model.to_owned(), Some(adapter.to_owned())));
    }
    let owners: Vec<&str> = models
        .decoders
        .iter()
        .filter(|d| d.engine.adapters().iter().any(|a| a == name))
        .map(|d| d.spec.name.as_str())
        .collect();
    match owners.as_slice() {
        [model] => Ok(((*model).to_owned(), Some(name.to_owned()))),
        [] if models
            .embedder
            .as_ref()
            .is_some_and(|e| e.spec.name == name) =>
        {
            Err(ApiError::invalid(
                "model",
                format!("`{name}` is an embedder: use /v1/embeddings"),
            ))
        }
        [] => Err(ApiError::not_found(format!(
            "unknown model `{name}` (GET /v1/models lists them)"
        ))
        .with_code("model_not_found")),
        several => Err(ApiError::invalid(
            "model",
            format!(
                "adapter `{name}` belongs to several models; name one as {}",
                several
                    .iter()
                    .map(|m| format!("`{m}:{name}`"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        )),
    }
}

fn chat_messages(messages: &[Message]) -> Result<pb::ChatMessages, ApiError> {
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            other => {
                return Err(ApiError::invalid(
                    &format!("messages[{i}].role"),
                    format!("`{other}` is not supported (system, developer, user, assistant)"),
                ));
            }
        };
        let content = match &m.content {
            Some(Content::Text(t)) => t.clone(),
            Some(Content::Parts(parts)) => {
                let mut text = String::new();
                for (j, part) in parts.iter().enumerate() {
                    match (part.kind.as_str(), &part.text) {
                        ("text", Some(t)) => text.push_str(t),
                        (kind, _) => {
                            return Err(ApiError::invalid(
                                &format!("messages[{i}].content[{j}]"),
                                format!("only text parts are supported, not `{kind}`"),
                            ));
                        }
                    }
                }
                text
            }
            None => {
                return Err(ApiError::invalid(
                    &format!("messages[{i}].content"),
                    "missing",
                ));
            }
        };
        out.push(pb::ChatMessage {
            role: role.to_owned(),
            content,
        });
    }
    Ok(pb::ChatMessages { messages: out })
}

pub async fn chat_completions(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Json<ChatRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    check_other_fields(&req.other)?;
    if req.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err(ApiError::invalid("tools", "tool calls are not supported"));
    }
    if req.model == PIPELINE_MODEL {
        if req.logprobs == Some(true) || req.sampling.n.is_some_and(|n| n > 1) {
            return Err(ApiError::invalid(
                "model",
                format!("`{PIPELINE_MODEL}` answers once, without log-probabilities"),
            ));
        }
        let messages: Vec<(String, String)> = chat_messages(&req.messages)?
            .messages
            .into_iter()
            .map(|m| (m.role, m.content))
            .collect();
        let ask = pipeline_ask(req.database.as_deref(), &messages)?;
        return openai_pipeline::answer(http, &headers, &caller, ask, req.sampling.streams()).await;
    }
    if req.database.is_some() {
        return Err(ApiError::invalid(
            "database",
            format!("only model `{PIPELINE_MODEL}` answers over a database"),
        ));
    }
    if req.top_logprobs.is_some_and(|k| k > 0) {
        return Err(ApiError::invalid("top_logprobs", "not supported"));
    }
    let logprobs = req.logprobs.unwrap_or(false);
    let (model, adapter) = resolve_model(&http, &req.model)?;
    let grpc = pb::InferenceRequest {
        model,
        input: Some(pb::inference_request::Input::Chat(chat_messages(
            &req.messages,
        )?)),
        sampling: Some(req.sampling.options(logprobs)?),
        adapter,
    };
    generate(
        http,
        &headers,
        &caller,
        grpc,
        Flavor::Chat,
        &req.model,
        &req.sampling,
    )
    .await
}

pub async fn completions(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Json<CompletionRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    check_other_fields(&req.other)?;
    if req.echo.unwrap_or(false) {
        return Err(ApiError::invalid("echo", "not supported"));
    }
    if req.suffix.as_ref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::invalid("suffix", "not supported"));
    }
    if req.best_of.is_some_and(|b| b > 1) {
        return Err(ApiError::invalid("best_of", "not supported (use `n`)"));
    }
    if req.logprobs.is_some_and(|k| k > 0) {
        return Err(ApiError::invalid(
            "logprobs",
            "top log-probabilities are not supported (0 gives each token's)",
        ));
    }
    let prompt = match req.prompt {
        Prompt::One(p) => p,
        Prompt::Many(mut v) if v.len() == 1 => v.remove(0),
        Prompt::Many(_) => {
            return Err(ApiError::invalid(
                "prompt",
                "one prompt per request (send several requests)",
            ));
        }
    };
    let (model, adapter) = resolve_model(&http, &req.model)?;
    let grpc = pb::InferenceRequest {
        model,
        input: Some(pb::inference_request::Input::Prompt(prompt)),
        sampling: Some(req.sampling.options(req.logprobs.is_some())?),
        adapter,
    };
    generate(
        http,
        &headers,
        &caller,
        grpc,
        Flavor::Text,
        &req.model,
        &req.sampling,
    )
    .await
}

/// Calls `Inference.Generate` and answers with the whole completion or, with `stream`, its
/// chunks as server-sent events.
async fn generate(
    http: Http,
    headers: &HeaderMap,
    caller: &Caller,
    grpc: pb::InferenceRequest,
    flavor: Flavor,
    model_name: &str,
    sampling: &Sampling,
) -> Result<Response, ApiError> {
    let stream = http
        .inference()
        .generate(grpc_request(headers, caller, grpc))
        .await?
        .into_inner();
    let request_id = http.state.new_request_id();
    let shape = openai_stream::Shape {
        flavor,
        id: format!("{}-{request_id}", flavor.id_prefix()),
        model: model_name.to_owned(),
        created: unix_now(),
    };
    if sampling.streams() {
        let relay = openai_stream::ChunkRelay::new(shape, sampling.include_usage());
        Ok(super::sse::respond(stream, relay).into_response())
    } else {
        Ok(Json(openai_stream::collect(shape, stream).await?).into_response())
    }
}

/// `GET /v1/models`: the decoders, their adapters (each a model of its own whose `parent` is
/// its base), the embedder and the pipeline's model.
pub async fn list_models(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let data = model_cards(&http, &caller, &headers).await?;
    Ok(Json(json!({ "object": "list", "data": data })))
}

/// `GET /v1/models/{id}`: one of [`list_models`]' entries, or 404.
pub async fn retrieve_model(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    model_cards(&http, &caller, &headers)
        .await?
        .into_iter()
        .find(|card| card["id"] == id.as_str())
        .map(Json)
        .ok_or_else(|| {
            ApiError::not_found(format!("the model `{id}` does not exist"))
                .with_code("model_not_found")
        })
}

/// Every model the server answers for, as OpenAI's model objects.
async fn model_cards(
    http: &Http,
    caller: &Caller,
    headers: &HeaderMap,
) -> Result<Vec<Value>, ApiError> {
    let listed = http
        .inference()
        .list_models(grpc_request(headers, caller, pb::ListModelsRequest {}))
        .await?
        .into_inner();
    let created = unix_now();
    let mut data = Vec::new();
    let adapter_owners = |adapter: &str| {
        listed
            .models
            .iter()
            .filter(|m| m.adapters.iter().any(|a| a == adapter))
            .count()
    };
    for m in &listed.models {
        let embedder = m.roles.contains(&(pb::ModelRole::Embedder as i32));
        let roles: Vec<&str> = m
            .roles
            .iter()
            .filter_map(|r| pb::ModelRole::try_from(*r).ok())
            .map(|r| match r {
                pb::ModelRole::Generator => Role::Generator.name(),
                pb::ModelRole::Selector => Role::Selector.name(),
                pb::ModelRole::Embedder => Role::Embedder.name(),
                pb::ModelRole::Unspecified => "unspecified",
            })
            .collect();
        data.push(json!({
            "id": m.name,
            "object": "model",
            "created": created,
            "owned_by": "quorum",
            "root": m.source,
            "parent": null,
            "max_model_len": (!embedder).then_some(m.max_model_len),
            "roles": roles,
        }));
        for adapter in &m.adapters {
            let id = if adapter_owners(adapter) > 1 {
                format!("{}:{adapter}", m.name)
            } else {
                adapter.clone()
            };
            data.push(json!({
                "id": id,
                "object": "model",
                "created": created,
                "owned_by": "quorum",
                "root": m.source,
                "parent": m.name,
                "max_model_len": m.max_model_len,
                "roles": ["adapter"],
            }));
        }
    }
    data.push(json!({
        "id": PIPELINE_MODEL,
        "object": "model",
        "created": created,
        "owned_by": "quorum",
        "root": PIPELINE_MODEL,
        "parent": null,
        "max_model_len": null,
        "roles": ["text2sql"],
    }));
    Ok(data)
}
