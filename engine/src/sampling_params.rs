//! Per-request sampling parameters and their validation.
//!
//! The parameters arrive from clients (through the server's proto conversion) and from the SQL
//! pipeline, so they are plain serde data; `validate` runs once at admission so that the sampler
//! and the stop checker can trust them and never fail on a bad value mid-generation.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Default generation budget. A text-to-SQL answer is rarely longer than a few hundred tokens;
/// a larger default would let a runaway generation hold KV blocks for longer before `Length`.
pub const DEFAULT_MAX_NEW_TOKENS: u32 = 512;

/// Upper bound on `n`. Each choice is a separate sequence holding its own KV blocks, so a
/// request asking for hundreds of choices could starve every other request; self-consistency
/// voting needs far fewer than this.
pub const MAX_N: u32 = 64;

/// Upper bound on the number of stop strings. Every decoded delta is searched for each of them,
/// so the count bounds per-token CPU work.
pub const MAX_STOP_STRINGS: usize = 16;

/// A rejected sampling parameter, naming the field so that the client can fix its request.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SamplingParamsError {
    #[error("invalid sampling parameter `{field}`: {reason}")]
    InvalidParam { field: &'static str, reason: String },
}

impl SamplingParamsError {
    /// A stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            SamplingParamsError::InvalidParam { .. } => "invalid_param",
        }
    }

    /// The offending field's name.
    pub fn field(&self) -> &'static str {
        match self {
            SamplingParamsError::InvalidParam { field, .. } => field,
        }
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> SamplingParamsError {
    SamplingParamsError::InvalidParam {
        field,
        reason: reason.into(),
    }
}

/// How to pick the next token and when to stop.
///
/// Disabled filters use neutral values rather than `Option`s (`top_k == 0`, `top_p == 1.0`,
/// `repetition_penalty == 1.0`) because that is how every client API spells them, and the
/// sampler can skip a filter with one comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingParams {
    /// Softmax temperature; `0.0` means greedy decoding (argmax).
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; `0` disables the filter.
    pub top_k: u32,
    /// Keep the smallest set of most likely tokens whose probability mass reaches `top_p`;
    /// `1.0` disables the filter.
    pub top_p: f32,
    /// Seed for the per-sequence RNG; `None` draws a random seed, so runs are not reproducible.
    pub seed: Option<u64>,
    /// Hugging Face style repetition penalty over prompt and generated tokens; `1.0` disables it.
    pub repetition_penalty: f32,
    /// Generation stops with `FinishReason::Length` after this many new tokens.
    pub max_new_tokens: u32,
    /// Extra token ids that end generation, on top of the model's end-of-sequence tokens.
    pub stop_token_ids: Vec<u32>,
    /// Strings that end generation; the returned text excludes the matched stop string.
    pub stop_strings: Vec<String>,
    /// Report the log-probability of every chosen token.
    pub logprobs: bool,
    /// Token ids whose log-probabilities are reported at every step, whatever is chosen: the
    /// selector model reads its verdict from the probabilities of a fixed answer set.
    pub candidate_token_ids: Vec<u32>,
    /// Number of independent choices to generate for the prompt.
    pub n: u32,
    /// Keep generating past the model's end-of-sequence and the chat template's end-of-turn
    /// tokens, until `max_new_tokens` or a requested stop: benchmarks use it so that every
    /// request decodes the same number of tokens (vLLM spells it the same way).
    pub ignore_eos: bool,
}

impl Default for SamplingParams {
    /// Plain multinomial sampling at temperature 1 with no filters, the usual API default.
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: None,
            repetition_penalty: 1.0,
            max_new_tokens: DEFAULT_MAX_NEW_TOKENS,
            stop_token_ids: Vec::new(),
            stop_strings: Vec::new(),
            logprobs: false,
            candidate_token_ids: Vec::new(),
            n: 1,
            ignore_eos: false,
        }
    }
}

impl SamplingParams {
    /// Greedy decoding with otherwise default settings: the deterministic mode used for the
    /// first-round SQL answer and for batching-invariance tests.
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            ..SamplingParams::default()
        }
    }

    /// True when the sampler takes the argmax instead of drawing from the distribution.
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }

    /// Checks every field that does not depend on the model; returns the first offending field.
    pub fn validate(&self) -> Result<(), SamplingParamsError> {
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(invalid(
                "temperature",
                format!(
                    "must be a finite number >= 0 (0 means greedy), got {}",
                    self.temperature
                ),
            ));
        }
        // NaN fails both comparisons, so it is rejected here too.
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(invalid(
                "top_p",
                format!("must be in (0, 1] (1 disables it), got {}", self.top_p),
            ));
        }
        if !self.repetition_penalty.is_finite() || self.repetition_penalty <= 0.0 {
            return Err(invalid(
                "repetition_penalty",
                format!(
                    "must be a finite number > 0 (1 disables it), got {}",
                    self.repetition_penalty
                ),
            ));
        }
        if self.max_new_tokens == 0 {
            return Err(invalid("max_new_tokens", "must be at least 1"));
        }
        if self.n == 0 || self.n > MAX_N {
            return Err(invalid(
                "n",
                format!("must be between 1 and {MAX_N}, got {}", self.n),
            ));
        }
        self.validate_stop_strings()
    }

    fn validate_stop_strings(&self) -> Result<(), SamplingParamsError> {
        if self.stop_strings.len() > MAX_STOP_STRINGS {
            return Err(invalid(
                "stop_strings",
                format!(
                    "at most {MAX_STOP_STRINGS} stop strings are allowed, got {}",
                    self.stop_strings.len()
                ),
            ));
        }
        // An empty stop string would match before the first character and end every generation
        // with no output, which is never what a client means.
        if let Some(i) = self.stop_strings.iter().position(String::is_empty) {
            return Err(invalid("stop_strings", format!("stop string {i} is empty")));
        }
        Ok(())
    }

    /// Checks the token ids against the model's vocabulary size, which is only known once the
    /// request is routed to a model.
    pub fn validate_for_vocab(&self, vocab_size: usize) -> Result<(), SamplingParamsError> {
        self.validate()?;
        let out_of_range = |ids: &[u32]| {
            ids.iter()
                .copied()
                .find(|&id| usize::try_from(id).map_or(true, |id| id >= vocab_size))
        };
        if let Some(id) = out_of_range(&self.stop_token_ids) {
            return Err(invalid(
                "stop_token_ids",
                format!("token id {id} is outside the vocabulary of {vocab_size} tokens"),
            ));
        }
        if let Some(id) = out_of_range(&self.candidate_token_ids) {
            return Err(invalid(
                "candidate_token_ids",
                format!("token id {id} is outside the vocabulary of {vocab_size} tokens"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(p: &SamplingParams) -> &'static str {
        p.validate().expect_err("params should be rejected").field()
    }

    #[test]
    fn defaults_and_greedy_are_valid() {
        assert_eq!(SamplingParams::default().validate(), Ok(()));
        let g = SamplingParams::greedy();
        assert_eq!(g.validate(), Ok(()));
        assert!(g.is_greedy());
        assert!(!SamplingParams::default().is_greedy());
    }

    #[test]
    fn temperature_must_be_finite_and_non_negative() {
        for t in [-0.1, f32::NAN, f32::INFINITY] {
            let p = SamplingParams {
                temperature: t,
                ..SamplingParams::default()
            };
            assert_eq!(field_of(&p), "temperature", "temperature {t}");
        }
    }

    #[test]
    fn top_p_must_be_in_half_open_unit_interval() {
        for top_p in [0.0, -0.5, 1.01, f32::NAN] {
            let p = SamplingParams {
                top_p,
                ..SamplingParams::default()
            };
            assert_eq!(field_of(&p), "top_p", "top_p {top_p}");
        }
        let p = SamplingParams {
            top_p: 1.0,
            top_k: 0,
            ..SamplingParams::default()
        };
        assert_eq!(p.validate(), Ok(()));
    }

    #[test]
    fn other_fields_are_named_in_errors() {
        let cases: Vec<(SamplingParams, &str)> = vec![
            (
                SamplingParams {
                    repetition_penalty: 0.0,
                    ..SamplingParams::default()
                },
                "repetition_penalty",
            ),
            (
                SamplingParams {
                    max_new_tokens: 0,
                    ..SamplingParams::default()
                },
                "max_new_tokens",
            ),
            (
                SamplingParams {
                    n: 0,
                    ..SamplingParams::default()
                },
                "n",
            ),
            (
                SamplingParams {
                    n: MAX_N + 1,
                    ..SamplingParams::default()
                },
                "n",
            ),
            (
                SamplingParams {
                    stop_strings: vec!["ok".into(), String::new()],
                    ..SamplingParams::default()
                },
                "stop_strings",
            ),
        ];
        for (p, field) in cases {
            assert_eq!(field_of(&p), field);
        }
    }

    #[test]
    fn error_message_names_field_and_value() {
        let p = SamplingParams {
            top_p: 1.5,
            ..SamplingParams::default()
        };
        let msg = p.validate().expect_err("rejected").to_string();
        assert!(msg.contains("`top_p`"), "{msg}");
        assert!(msg.contains("1.5"), "{msg}");
        assert_eq!(p.validate().expect_err("rejected").kind(), "invalid_param");
    }

    #[test]
    fn token_ids_are_checked_against_the_vocabulary() {
        let p = SamplingParams {
            candidate_token_ids: vec![1, 2, 10],
            ..SamplingParams::greedy()
        };
        assert_eq!(p.validate_for_vocab(11), Ok(()));
        let err = p.validate_for_vocab(10).expect_err("10 is out of range");
        assert_eq!(err.field(), "candidate_token_ids");
        let p = SamplingParams {
            stop_token_ids: vec![99],
            ..SamplingParams::greedy()
        };
        assert_eq!(
            p.validate_for_vocab(50).expect_err("rejected").field(),
            "stop_token_ids"
        );
    }

    #[test]
    fn serde_fills_defaults_and_rejects_unknown_fields() {
        let p: SamplingParams =
            serde_json::from_str(r#"{"temperature": 0.0, "stop_strings": [";"]}"#)
                .expect("valid json");
        assert!(p.is_greedy());
        assert_eq!(p.stop_strings, vec![";".to_string()]);
        assert_eq!(p.max_new_tokens, DEFAULT_MAX_NEW_TOKENS);
        assert_eq!(p.n, 1);
        let back: SamplingParams =
            serde_json::from_str(&serde_json::to_string(&p).expect("serializes"))
                .expect("round trips");
        assert_eq!(back, p);
        assert!(serde_json::from_str::<SamplingParams>(r#"{"temprature": 1.0}"#).is_err());
    }
}
