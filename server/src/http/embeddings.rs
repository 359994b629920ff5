//! `POST /v1/embeddings`: sentence embeddings from the embedder model (all-MiniLM-L6-v2 by
//! default), in OpenAI's shape. Vectors are unit length, as the demonstration retrieval uses
//! them. `encoding_format` `base64` (what the official Python client asks for unless told
//! otherwise) sends each vector as little-endian f32 bytes. An input longer than the model reads
//! (its tokenizer's truncation length, else its context) is refused with its index named, not
//! cut short without a word.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, Http};
use crate::auth::{Caller, Right};
use crate::rpc::RpcContext;
use crate::status::ServiceError;

/// OpenAI's own limit on inputs per request.
const MAX_INPUTS: usize = 2048;

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Input {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsRequest {
    model: String,
    input: Input,
    encoding_format: Option<String>,
    dimensions: Option<usize>,
    /// The end user, for the server's log.
    user: Option<String>,
}

pub async fn embeddings(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Json<EmbeddingsRequest>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(req) = body?;
    let metadata = tonic::metadata::MetadataMap::from_headers(headers);
    let ctx = RpcContext::begin_with(&http.state, "Embeddings", &metadata, caller);
    let result = match ctx.require(Right::Ask) {
        Ok(()) => embed(&http, req).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(value) => {
            ctx.finish(tonic::Code::Ok);
            Ok(Json(value))
        }
        Err(e) => Err(ApiError::from(ctx.fail(e))),
    }
}

async fn embed(http: &Http, req: EmbeddingsRequest) -> Result<Value, ServiceError> {
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ServiceError::invalid(
                "encoding_format",
                format!("`{other}` is not float or base64"),
            ));
        }
    };
    let inputs = match req.input {
        Input::One(s) => vec![s],
        Input::Many(v) => v,
    };
    if inputs.is_empty() || inputs.len() > MAX_INPUTS {
        return Err(ServiceError::invalid(
            "input",
            format!("give 1 to {MAX_INPUTS} strings"),
        ));
    }
    let (admission, models) = http.state.admit()?;
    let embedder = models
        .embedder
        .clone()
        .ok_or_else(|| ServiceError::FailedPrecondition {
            what: "an embedder model".into(),
        })?;
    if let Some(user) = &req.user {
        tracing::info!(user, "request for an end user");
    }
    if req.model != embedder.spec.name {
        return Err(ServiceError::NotFound {
            what: "embedding model",
            id: req.model,
        });
    }
    let dim = embedder.model.dim();
    if req.dimensions.is_some_and(|d| d != dim) {
        return Err(ServiceError::invalid(
            "dimensions",
            format!("this model's vectors have {dim} dimensions"),
        ));
    }
    let name = embedder.spec.name.clone();
    // The forward passes block: keep them off the async workers.
    let (vectors, tokens) = tokio::task::spawn_blocking(move || {
        let _admission = admission;
        let model = &embedder.model;
        let mut tokens = 0;
        let mut vectors = Vec::with_capacity(inputs.len());
        // The tokenizer may cut a sentence itself (MiniLM's at 128 tokens): that is the limit.
        let limit = model
            .tokenizer()
            .get_truncation()
            .map_or(model.max_tokens(), |t| t.max_length.min(model.max_tokens()));
        for (i, text) in inputs.iter().enumerate() {
            let encoding = model
                .tokenizer()
                .encode(text.as_str(), true)
                .map_err(|e| ServiceError::internal(format!("tokenizer: {e}")))?;
            let ids = encoding.get_ids().to_vec();
            if ids.len() > limit || !encoding.get_overflowing().is_empty() {
                return Err(ServiceError::invalid(
                    format!("input[{i}]"),
                    format!("longer than the model's {limit} tokens"),
                ));
            }
            tokens += ids.len();
            let vector = model
                .embed_ids(&ids)
                .and_then(|t| Ok(t.to_vec1::<f32>()?))
                .map_err(ServiceError::internal)?;
            vectors.push(vector);
        }
        Ok((vectors, tokens))
    })
    .await
    .map_err(ServiceError::internal)??;
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({ "object": "embedding", "index": i, "embedding": embedding })
        })
        .collect();
    Ok(json!({
        "object": "list",
        "data": data,
        "model": name,
        "usage": { "prompt_tokens": tokens, "total_tokens": tokens },
    }))
}
