//! What can go wrong while training, by kind.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("invalid training configuration: `{field}` {detail}")]
    InvalidConfig { field: &'static str, detail: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("training data: {0}")]
    Data(String),
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    #[error("model: {0}")]
    Model(String),
    #[error(transparent)]
    Tensor(#[from] candle_core::Error),
}

impl TrainError {
    pub(crate) fn invalid(field: &'static str, detail: impl Into<String>) -> Self {
        Self::InvalidConfig {
            field,
            detail: detail.into(),
        }
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_owned(),
            source,
        }
    }
}

pub type TrainResult<T> = Result<T, TrainError>;
