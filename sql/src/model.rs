//! The model-facing side of the crate: the small traits that the server implements with its
//! models (a generator, a selector, a sentence embedder, and the masked-language-model encoder
//! of relevance masking) and tests with scripted fakes, so that this crate stays free of any
//! model, tensor or async runtime code.
//!
//! Calls take whole batches because the engine batches independent sequences: the pipeline
//! submits all round-2 prompts (and all revisions of one round) in one call, and the server is
//! free to run them concurrently.

use serde::{Deserialize, Serialize};

/// The answer's start written for the model (always in revisions, in every generation when
/// configured): a query, not DDL or prose.
pub const SQL_ANSWER_PREFIX: &str = "```sql\nSELECT ";

/// Where an answer started with [`SQL_ANSWER_PREFIX`] ends: the closing fence.
pub const SQL_ANSWER_END: &str = "```";

/// Sampling settings for one generation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// 0 means greedy decoding. PET-SQL's cross-consistency relies on (near-)zero temperature:
    /// diversity comes from different models, not from sampling noise.
    pub temperature: f32,
    pub top_p: f32,
    pub max_new_tokens: usize,
    /// A fixed seed makes sampled runs reproducible; `None` lets the engine choose.
    pub seed: Option<u64>,
}

impl Default for Sampling {
    /// Greedy with room for a long Spider query (the longest gold SQL in dev is ~170 tokens).
    fn default() -> Self {
        Self {
            temperature: 0.0,
            top_p: 1.0,
            max_new_tokens: 256,
            seed: None,
        }
    }
}

/// The messages of one chat turn. The server applies the generator's chat template; the
/// pipeline only knows the text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptMessages {
    pub system: Option<String>,
    pub user: String,
    /// The start of the model's answer, written for it (after the chat template's generation
    /// prompt): ```` ```sql\nSELECT ```` makes a small model answer with a query instead of
    /// DDL or prose. The generation's text starts with it.
    #[serde(default)]
    pub answer_prefix: Option<String>,
}

impl PromptMessages {
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            system: None,
            user: text.into(),
            answer_prefix: None,
        }
    }
}

/// One generation to run: which configured generator, what to say and how to sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationRequest {
    /// The configured generator's name (a model, or a model plus adapter, on the server side).
    pub generator: String,
    pub prompt: PromptMessages,
    pub sampling: Sampling,
    /// Strings that end the answer (the closing fence of an answer started inside one); the
    /// text returned stops before them.
    #[serde(default)]
    pub stop: Vec<String>,
    /// A grammar (llguidance's Lark dialect, [`crate::grammar`]) every token of the answer must
    /// stay inside, the answer prefix included; `None` decodes freely.
    #[serde(default)]
    pub grammar: Option<String>,
    /// Text the answer is likely to repeat (the PreSQL for a FinSQL, the failing query for a
    /// revision): the server's speculative decoding drafts from it. It never changes the
    /// answer, only how fast it comes.
    #[serde(default)]
    pub draft_hint: Option<String>,
    /// Keep the prompt's computed prefix resident under this tag (a database's schema
    /// prompt, warmed before its questions: [`crate::pipeline::Pipeline::warm`]); the server
    /// holds one such prefix per tag, within a memory bound. It never changes the answer.
    #[serde(default)]
    pub keep_prefix: Option<String>,
}

impl GenerationRequest {
    /// Starts the answer for the model inside a SQL code fence (```` ```sql\nSELECT ````) and
    /// ends it at the closing fence.
    pub fn start_sql_answer(&mut self) {
        self.prompt.answer_prefix = Some(SQL_ANSWER_PREFIX.to_owned());
        self.stop = vec![SQL_ANSWER_END.to_owned()];
    }
}

/// A finished generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    pub text: String,
    pub tokens_generated: usize,
    /// Prompt tokens, and how many of them the prefix cache served: what the prefill cost.
    #[serde(default)]
    pub prompt_tokens: usize,
    #[serde(default)]
    pub cached_tokens: usize,
    pub elapsed_ms: f64,
    /// The request's grammar held for every token (false without one, or when the grammar
    /// engine gave up mid-answer and the rest was decoded freely).
    #[serde(default)]
    pub constrained: bool,
}

/// Why a model call produced nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelCallError {
    #[error("unknown model {name:?}")]
    UnknownModel { name: String },
    /// The model cannot take this input (a prompt beyond its context, bad sampling values):
    /// asking again cannot help.
    #[error("model {name:?} cannot take the request: {reason}")]
    InvalidInput { name: String, reason: String },
    /// The generator names an adapter its model does not serve.
    #[error("model {name:?} has no adapter {adapter:?}")]
    UnknownAdapter { name: String, adapter: String },
    /// The model's queue is full: the same call may succeed later.
    #[error("model {name:?} is busy: {reason}")]
    Busy { name: String, reason: String },
    /// The model is shutting down.
    #[error("model {name:?} is shutting down")]
    ShuttingDown { name: String },
    #[error("model call cancelled")]
    Cancelled,
    #[error("model {name:?} failed: {message}")]
    Failed { name: String, message: String },
}

impl ModelCallError {
    /// A stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnknownModel { .. } => "unknown_model",
            Self::InvalidInput { .. } => "invalid_input",
            Self::UnknownAdapter { .. } => "unknown_adapter",
            Self::Busy { .. } => "busy",
            Self::ShuttingDown { .. } => "shutting_down",
            Self::Cancelled => "cancelled",
            Self::Failed { .. } => "failed",
        }
    }
}

/// Text generation. The result has one entry per request, in request order; one request
/// failing does not fail the others.
pub trait Generator: Send + Sync {
    fn generate_batch(
        &self,
        requests: &[GenerationRequest],
    ) -> Vec<Result<Generation, ModelCallError>>;
}

/// Sentence embeddings, one vector per text, all of the same dimension.
pub trait Embedder: Send + Sync {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelCallError>;
}

/// An embedder's answer that breaks the trait's promise: a missing vector would otherwise read
/// as "similar to nothing" and a short one would be compared on its prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the embedder returned {got} vectors of dimension {dim} for {expected} texts (expected dimension {expected_dim})"
)]
pub struct EmbeddingShape {
    pub expected: usize,
    pub got: usize,
    pub dim: usize,
    pub expected_dim: usize,
}

/// The cosine similarity of two embeddings; 0 when either is the zero vector (equally unlike
/// everything rather than NaN).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let denominator = norm(a) * norm(b);
    if denominator == 0.0 {
        0.0
    } else {
        dot / denominator
    }
}

/// Why [`embed_checked`] has no vectors: the call failed, or its answer had the wrong shape.
#[derive(Debug, thiserror::Error)]
pub enum EmbedFailure {
    #[error(transparent)]
    Call(#[from] ModelCallError),
    #[error(transparent)]
    Shape(#[from] EmbeddingShape),
}

impl From<EmbedFailure> for ModelCallError {
    /// A malformed answer is the embedder's failure.
    fn from(failure: EmbedFailure) -> Self {
        match failure {
            EmbedFailure::Call(error) => error,
            EmbedFailure::Shape(shape) => ModelCallError::Failed {
                name: "embedder".to_owned(),
                message: shape.to_string(),
            },
        }
    }
}

/// Calls `embedder` and checks its answer: one vector per text, all of one dimension (and of
/// `expected_dim` when given).
pub fn embed_checked(
    embedder: &dyn Embedder,
    texts: &[&str],
    expected_dim: Option<usize>,
) -> Result<Vec<Vec<f32>>, EmbedFailure> {
    let vectors = embedder.embed(texts)?;
    let want_dim = expected_dim.or_else(|| vectors.first().map(Vec::len));
    let bad_dim = vectors.iter().find(|v| Some(v.len()) != want_dim);
    if vectors.len() != texts.len() || bad_dim.is_some() {
        return Err(EmbeddingShape {
            expected: texts.len(),
            got: vectors.len(),
            dim: bad_dim.map_or(0, Vec::len),
            expected_dim: want_dim.unwrap_or(0),
        }
        .into());
    }
    Ok(vectors)
}

/// A selection model: the log-probability of each label as the answer to `prompt` (XiYan's
/// selector answers with a candidate's label, so scoring the labels directly avoids parsing
/// free text).
pub trait Selector: Send + Sync {
    fn choose(&self, prompt: &str, labels: &[String]) -> Result<Vec<f32>, ModelCallError>;
}

/// Per group, per word, the word's contextual representation.
pub type WordStates = Vec<Vec<Vec<f32>>>;

/// A masked language model's encoder, as the probe needs it.
pub trait ContextEncoder: Send + Sync {
    /// For each entry of `masks`, encodes `[CLS] group0 [SEP] group1 [SEP] …` with every
    /// sub-token of the word at `(group, word)` replaced by the mask token (`None`: nothing
    /// masked), and returns each word's representation (the mean of its sub-tokens' last
    /// hidden states). A word that does not fit the model's length gets an empty vector.
    fn word_states(
        &self,
        groups: &[Vec<String>],
        masks: &[Option<(usize, usize)>],
    ) -> Result<Vec<WordStates>, ModelCallError>;
}
