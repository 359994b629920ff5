#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Weights(#[from] quorum_weights::WeightsError),
    #[error("model config: {detail}")]
    Config { detail: String },
    #[error("device `{spec}`: {detail}")]
    Device { spec: String, detail: String },
    #[error("batch: {detail}")]
    Batch { detail: String },
    #[error("adapter `{adapter}`: {detail}")]
    Adapter { adapter: String, detail: String },
    #[error("batch-invariant mode: `{layer}`: {detail}")]
    BatchInvariance { layer: String, detail: String },
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

impl ModelError {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Weights(e) => e.kind(),
            Self::Config { .. } => "config",
            Self::Device { .. } => "device",
            Self::Batch { .. } => "batch",
            Self::Adapter { .. } => "adapter",
            Self::BatchInvariance { .. } => "config",
            Self::Candle(_) => "candle",
        }
    }
}

pub type ModelResult<T> = Result<T, ModelError>;
