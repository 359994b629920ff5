//! Sampling options, chat messages and finish events.

use quorum_engine::{FinishEvent, FinishReason, Grammar, GrammarSpec, SamplingParams};
use quorum_proto::v1 as pb;
use quorum_weights::ChatMessage;

use crate::config::resolved::Limits;
use crate::status::ServiceError;

/// A budget that fits a long SQL query; callers wanting more say so.
const DEFAULT_MAX_TOKENS: u32 = 256;

/// Builds and validates engine sampling parameters. Unset options are greedy decoding, so an
/// API call without options is deterministic.
pub fn sampling_params(
    options: Option<&pb::SamplingOptions>,
    limits: &Limits,
) -> Result<SamplingParams, ServiceError> {
    let default = pb::SamplingOptions::default();
    let o = options.unwrap_or(&default);
    let cap = limits.max_new_tokens.unwrap_or(u32::MAX);
    let max_tokens = o.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS.min(cap));
    if max_tokens == 0 {
        return Err(ServiceError::invalid(
            "sampling.max_tokens",
            "must be at least 1",
        ));
    }
    // Beyond an operator's cap the request is refused here; otherwise the engine refuses a
    // prompt plus `max_tokens` that overflows the model's context.
    if max_tokens > cap {
        return Err(ServiceError::invalid(
            "sampling.max_tokens",
            format!("must be in 1..={cap} (the server's `limits.max_new_tokens`)"),
        ));
    }
    let n = o.n.unwrap_or(1);
    if n == 0 || n > limits.max_n {
        return Err(ServiceError::invalid(
            "sampling.n",
            format!("must be in 1..={}", limits.max_n),
        ));
    }
    if o.stop.iter().any(String::is_empty) {
        return Err(ServiceError::invalid(
            "sampling.stop",
            "stop strings must not be empty",
        ));
    }
    let params = SamplingParams {
        temperature: o.temperature.unwrap_or(0.0),
        top_k: o.top_k.unwrap_or(0),
        top_p: o.top_p.unwrap_or(1.0),
        seed: o.seed,
        repetition_penalty: o.repetition_penalty.unwrap_or(1.0),
        max_new_tokens: max_tokens,
        stop_token_ids: o.stop_token_ids.clone(),
        stop_strings: o.stop.clone(),
        logprobs: o.logprobs,
        candidate_token_ids: Vec::new(),
        n,
        ignore_eos: o.ignore_eos,
    };
    params.validate().map_err(|e| {
        ServiceError::invalid(
            format!("sampling.{}", proto_field(e.field())),
            e.to_string(),
        )
    })?;
    Ok(params)
}

/// Largest structured-output constraint accepted: compiling is linear in the grammar's size,
/// and a schema grammar of a large database is tens of KiB.
const MAX_CONSTRAINT_BYTES: usize = 256 * 1024;

/// The request's structured-output constraint, if any; compiled (and refused) by the engine.
pub fn grammar(options: Option<&pb::SamplingOptions>) -> Result<Option<Grammar>, ServiceError> {
    use pb::sampling_options::Constraint;
    let Some(constraint) = options.and_then(|o| o.constraint.as_ref()) else {
        return Ok(None);
    };
    let (text, spec): (&String, fn(String) -> GrammarSpec) = match constraint {
        Constraint::LarkGrammar(t) => (t, GrammarSpec::Lark),
        Constraint::Regex(t) => (t, GrammarSpec::Regex),
        Constraint::JsonSchema(t) => (t, GrammarSpec::JsonSchema),
    };
    if text.is_empty() || text.len() > MAX_CONSTRAINT_BYTES {
        return Err(ServiceError::invalid(
            "sampling.constraint",
            format!("must be 1 to {MAX_CONSTRAINT_BYTES} bytes"),
        ));
    }
    Ok(Some(Grammar::new(spec(text.clone()))))
}

/// The engine's field names where the API spells them differently.
fn proto_field(engine_field: &'static str) -> &'static str {
    match engine_field {
        "max_new_tokens" => "max_tokens",
        "stop_strings" => "stop",
        other => other,
    }
}

pub fn chat_messages(chat: &pb::ChatMessages) -> Result<Vec<ChatMessage>, ServiceError> {
    if chat.messages.is_empty() {
        return Err(ServiceError::invalid(
            "chat.messages",
            "at least one message is required",
        ));
    }
    chat.messages
        .iter()
        .enumerate()
        .map(|(i, m)| match m.role.as_str() {
            "system" | "user" | "assistant" => Ok(ChatMessage::new(&m.role, &m.content)),
            other => Err(ServiceError::invalid(
                format!("chat.messages[{i}].role"),
                format!("must be system, user or assistant, got `{other}`"),
            )),
        })
        .collect()
}

pub fn finish_reason(r: FinishReason) -> pb::FinishReason {
    match r {
        FinishReason::Stop => pb::FinishReason::Stop,
        FinishReason::Length => pb::FinishReason::Length,
        FinishReason::Cancelled => pb::FinishReason::Cancelled,
        FinishReason::Error => pb::FinishReason::Error,
    }
}

pub fn usage(f: &FinishEvent) -> pb::Usage {
    pb::Usage {
        prompt_tokens: f.prompt_tokens as u32,
        completion_tokens: f.completion_tokens as u32,
        cached_tokens: f.cached_tokens as u32,
        ttft_ms: f.ttft.map_or(0.0, |d| d.as_secs_f64() * 1e3),
        total_ms: f.total.as_secs_f64() * 1e3,
    }
}
