use std::path::PathBuf;

/// Everything that can go wrong while reading a checkpoint, with enough detail for the caller to
/// act on (which file, which tensor, which shape).
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    #[error("file not found: {path}")]
    MissingFile { path: PathBuf },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is truncated or corrupt: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error("tensor `{name}` is missing from the checkpoint")]
    MissingTensor { name: String },
    #[error("tensor `{name}` has shape {actual:?}, expected {expected:?}")]
    ShapeMismatch {
        name: String,
        expected: Vec<usize>,
        actual: Vec<usize>,
    },
    #[error("unknown architecture `{architecture}` (supported: {supported})")]
    UnknownArchitecture {
        architecture: String,
        supported: &'static str,
    },
    #[error("unsupported quantization {dtype} for tensor `{name}`")]
    UnsupportedQuantization { name: String, dtype: String },
    #[error("unsupported tensor dtype {dtype} for `{name}` (expected f32, f16 or bf16)")]
    UnsupportedDtype { name: String, dtype: String },
    #[error("bad metadata `{key}`: {detail}")]
    BadMetadata { key: String, detail: String },
    #[error("tokenizer: {detail}")]
    Tokenizer { detail: String },
    #[error("chat template: {detail}")]
    ChatTemplate { detail: String },
    #[error("hub repository `{repo_id}` is not in the hub cache at {cache} (no {missing})")]
    NotInHubCache {
        repo_id: String,
        cache: PathBuf,
        /// The first file the loader needs that the cached snapshot lacks.
        missing: String,
    },
    #[error("downloading hub repository `{repo_id}` from {endpoint}: {detail}")]
    HubDownload {
        repo_id: String,
        endpoint: String,
        detail: String,
    },
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

impl WeightsError {
    /// A short stable label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::MissingFile { .. } => "missing_file",
            Self::Io { .. } => "io",
            Self::Corrupt { .. } => "corrupt",
            Self::MissingTensor { .. } => "missing_tensor",
            Self::ShapeMismatch { .. } => "shape_mismatch",
            Self::UnknownArchitecture { .. } => "unknown_architecture",
            Self::UnsupportedQuantization { .. } => "unsupported_quantization",
            Self::UnsupportedDtype { .. } => "unsupported_dtype",
            Self::BadMetadata { .. } => "bad_metadata",
            Self::Tokenizer { .. } => "tokenizer",
            Self::ChatTemplate { .. } => "chat_template",
            Self::NotInHubCache { .. } => "not_in_hub_cache",
            Self::HubDownload { .. } => "hub_download",
            Self::Candle(_) => "candle",
        }
    }
}

pub type WeightsResult<T> = Result<T, WeightsError>;
