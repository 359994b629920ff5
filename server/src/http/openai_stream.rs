//! `Inference.Generate`'s message stream in OpenAI's shapes: gathered into one completion, or
//! forwarded as `chat.completion.chunk` / `text_completion` chunks over server-sent events,
//! ending with `data: [DONE]`. A failure after the stream began is sent as an `error` object
//! (what vLLM does), since the status line has gone out.

use axum::response::sse::Event;
use quorum_proto::v1 as pb;
use serde_json::{Value, json};
use tokio_stream::StreamExt;

/// Seconds since the epoch, OpenAI's `created`.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

use super::ApiError;
use super::sse::Relay;
use crate::services::ResponseStream;

/// Which OpenAI endpoint the stream answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Chat,
    Text,
}

impl Flavor {
    pub fn id_prefix(self) -> &'static str {
        match self {
            Self::Chat => "chatcmpl",
            Self::Text => "cmpl",
        }
    }

    fn object(self, chunk: bool) -> &'static str {
        match (self, chunk) {
            (Self::Chat, false) => "chat.completion",
            (Self::Chat, true) => "chat.completion.chunk",
            (Self::Text, _) => "text_completion",
        }
    }
}

/// What every response and chunk of one request carries.
#[derive(Debug, Clone)]
pub struct Shape {
    pub flavor: Flavor,
    pub id: String,
    pub model: String,
    pub created: u64,
}

/// OpenAI's finish reason for a gRPC one; `None` while the choice goes on.
fn finish_reason(reason: i32) -> Option<&'static str> {
    match pb::FinishReason::try_from(reason).unwrap_or(pb::FinishReason::Unspecified) {
        pb::FinishReason::Unspecified => None,
        pb::FinishReason::Stop => Some("stop"),
        pb::FinishReason::Length => Some("length"),
        pb::FinishReason::Cancelled => Some("abort"),
        pb::FinishReason::Error => Some("error"),
    }
}

/// One choice as it is gathered.
#[derive(Debug, Default)]
struct Choice {
    text: String,
    /// Each generated piece of text with its token's log-probability.
    logprobs: Vec<(String, f32)>,
    finish: Option<&'static str>,
}

/// Token counts over all choices: the prompt once, the completions summed.
#[derive(Debug, Default)]
struct UsageSum {
    prompt: u32,
    completion: u32,
    cached: u32,
}

impl UsageSum {
    fn add(&mut self, u: &pb::Usage) {
        self.prompt = self.prompt.max(u.prompt_tokens);
        self.cached = self.cached.max(u.cached_tokens);
        self.completion += u.completion_tokens;
    }

    fn json(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
            "prompt_tokens_details": { "cached_tokens": self.cached },
        })
    }
}

/// A choice's log-probabilities in the endpoint's shape.
fn logprobs_json(flavor: Flavor, pieces: &[(String, f32)]) -> Value {
    match flavor {
        Flavor::Chat => json!({
            "content": pieces
                .iter()
                .map(|(token, logprob)| json!({
                    "token": token,
                    "logprob": logprob,
                    "bytes": token.as_bytes(),
                    "top_logprobs": [],
                }))
                .collect::<Vec<_>>(),
        }),
        Flavor::Text => {
            let mut offset = 0;
            let mut offsets = Vec::with_capacity(pieces.len());
            for (token, _) in pieces {
                offsets.push(offset);
                offset += token.chars().count();
            }
            json!({
                "tokens": pieces.iter().map(|(t, _)| t).collect::<Vec<_>>(),
                "token_logprobs": pieces.iter().map(|(_, l)| l).collect::<Vec<_>>(),
                "top_logprobs": null,
                "text_offset": offsets,
            })
        }
    }
}

/// The pieces of one message that carry log-probabilities (one token each).
fn pieces(message: &pb::InferenceResponse) -> Vec<(String, f32)> {
    message
        .logprobs
        .iter()
        .map(|&lp| (message.text.clone(), lp))
        .collect()
}

/// Reads the whole stream and answers with one completion.
pub async fn collect(
    shape: Shape,
    mut stream: ResponseStream<pb::InferenceResponse>,
) -> Result<Value, ApiError> {
    let mut choices: Vec<Choice> = Vec::new();
    let mut usage = UsageSum::default();
    let mut wants_logprobs = false;
    while let Some(message) = stream.next().await {
        let message = message?;
        let index = message.index as usize;
        if choices.len() <= index {
            choices.resize_with(index + 1, Choice::default);
        }
        let choice = &mut choices[index];
        choice.text.push_str(&message.text);
        if !message.logprobs.is_empty() {
            wants_logprobs = true;
            choice.logprobs.extend(pieces(&message));
        }
        if let Some(reason) = finish_reason(message.finish_reason) {
            choice.finish = Some(reason);
        }
        if let Some(u) = &message.usage {
            usage.add(u);
        }
    }
    let choices: Vec<Value> = choices
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let logprobs = wants_logprobs.then(|| logprobs_json(shape.flavor, &c.logprobs));
            match shape.flavor {
                Flavor::Chat => json!({
                    "index": i,
                    "message": { "role": "assistant", "content": c.text },
                    "logprobs": logprobs,
                    "finish_reason": c.finish,
                }),
                Flavor::Text => json!({
                    "index": i,
                    "text": c.text,
                    "logprobs": logprobs,
                    "finish_reason": c.finish,
                }),
            }
        })
        .collect();
    Ok(json!({
        "id": shape.id,
        "object": shape.flavor.object(false),
        "created": shape.created,
        "model": shape.model,
        "choices": choices,
        "usage": usage.json(),
    }))
}

/// A chunk with the given choices (and usage, in the last one when asked for).
fn chunk(shape: &Shape, choices: Vec<Value>, usage: Option<Value>) -> Value {
    let mut value = json!({
        "id": shape.id,
        "object": shape.flavor.object(true),
        "created": shape.created,
        "model": shape.model,
        "choices": choices,
    });
    if let Some(u) = usage {
        value["usage"] = u;
    }
    value
}

/// One message of the gRPC stream as a chunk's choice. A chat choice's first chunk also
/// carries the assistant role.
fn chunk_choice(flavor: Flavor, message: &pb::InferenceResponse, first: bool) -> Value {
    let finish = finish_reason(message.finish_reason);
    let logprobs = (!message.logprobs.is_empty()).then(|| logprobs_json(flavor, &pieces(message)));
    match flavor {
        Flavor::Chat => {
            let mut delta = json!({ "content": message.text });
            if first {
                delta["role"] = json!("assistant");
            }
            json!({
                "index": message.index,
                "delta": delta,
                "logprobs": logprobs,
                "finish_reason": finish,
            })
        }
        Flavor::Text => json!({
            "index": message.index,
            "text": message.text,
            "logprobs": logprobs,
            "finish_reason": finish,
        }),
    }
}

/// Streams a completion's chunks, then the usage when asked for, then `[DONE]`.
pub struct ChunkRelay {
    pub shape: Shape,
    pub include_usage: bool,
    started: Vec<bool>,
    usage: UsageSum,
}

impl ChunkRelay {
    pub fn new(shape: Shape, include_usage: bool) -> Self {
        Self {
            shape,
            include_usage,
            started: Vec::new(),
            usage: UsageSum::default(),
        }
    }
}

fn data(value: &Value) -> Event {
    Event::default().data(value.to_string())
}

impl Relay for ChunkRelay {
    type Message = pb::InferenceResponse;

    fn message(&mut self, message: pb::InferenceResponse) -> Vec<Event> {
        let index = message.index as usize;
        if self.started.len() <= index {
            self.started.resize(index + 1, false);
        }
        let first = !std::mem::replace(&mut self.started[index], true);
        if let Some(u) = &message.usage {
            self.usage.add(u);
        }
        let choice = chunk_choice(self.shape.flavor, &message, first);
        vec![data(&chunk(&self.shape, vec![choice], None))]
    }

    fn error(&mut self, status: tonic::Status) -> Vec<Event> {
        vec![data(&ApiError::from(status).body())]
    }

    fn end(self) -> Vec<Event> {
        let mut events = Vec::new();
        if self.include_usage {
            events.push(data(&chunk(
                &self.shape,
                Vec::new(),
                Some(self.usage.json()),
            )));
        }
        events.push(Event::default().data("[DONE]"));
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(index: u32, text: &str, finish: pb::FinishReason) -> pb::InferenceResponse {
        pb::InferenceResponse {
            index,
            text: text.to_owned(),
            token_ids: vec![1],
            logprobs: vec![-0.5],
            finish_reason: finish as i32,
            usage: (finish != pb::FinishReason::Unspecified).then_some(pb::Usage {
                prompt_tokens: 7,
                completion_tokens: 2,
                cached_tokens: 0,
                ttft_ms: 1.0,
                total_ms: 2.0,
            }),
        }
    }

    fn shape(flavor: Flavor) -> Shape {
        Shape {
            flavor,
            id: "x".into(),
            model: "m".into(),
            created: 0,
        }
    }

    #[tokio::test]
    async fn choices_are_gathered_with_their_usage() {
        let messages = vec![
            Ok(message(0, "SELECT", pb::FinishReason::Unspecified)),
            Ok(message(1, "no", pb::FinishReason::Stop)),
            Ok(message(0, " 1", pb::FinishReason::Length)),
        ];
        let stream: ResponseStream<pb::InferenceResponse> = Box::pin(tokio_stream::iter(messages));
        let value = collect(shape(Flavor::Chat), stream)
            .await
            .expect("collects");
        assert_eq!(value["choices"][0]["message"]["content"], "SELECT 1");
        assert_eq!(value["choices"][0]["finish_reason"], "length");
        assert_eq!(value["choices"][1]["finish_reason"], "stop");
        assert_eq!(value["usage"]["prompt_tokens"], 7);
        assert_eq!(value["usage"]["completion_tokens"], 4);
        assert_eq!(value["choices"][0]["logprobs"]["content"][1]["token"], " 1");
    }

    #[tokio::test]
    async fn an_error_in_the_stream_fails_the_whole_completion() {
        let messages = vec![
            Ok(message(0, "SELECT", pb::FinishReason::Unspecified)),
            Err(tonic::Status::deadline_exceeded("deadline exceeded")),
        ];
        let stream: ResponseStream<pb::InferenceResponse> = Box::pin(tokio_stream::iter(messages));
        let err = collect(shape(Flavor::Text), stream)
            .await
            .expect_err("fails");
        assert_eq!(err.status.as_u16(), 504);
    }

    #[test]
    fn text_logprobs_carry_offsets() {
        let value = logprobs_json(
            Flavor::Text,
            &[("ab".to_owned(), -1.0), ("c".to_owned(), -2.0)],
        );
        assert_eq!(value["text_offset"], json!([0, 2]));
        assert_eq!(value["tokens"], json!(["ab", "c"]));
    }
}
