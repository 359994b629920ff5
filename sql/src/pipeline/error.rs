//! Why a pipeline could not be built or could not answer. Failures of single candidates are
//! not errors: they are recorded in the answer and outvoted or revised.

use crate::demo_index::DemoIndexError;
use crate::model::ModelCallError;
use crate::sandbox::ExecError;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("invalid pipeline configuration: {reason}")]
    Config { reason: String },
    /// The configuration asks for a model the pipeline was not given.
    #[error("{what} is not available")]
    MissingModel { what: &'static str },
    #[error("the {stage} model call failed: {source}")]
    Model {
        stage: &'static str,
        source: ModelCallError,
    },
    #[error("the generator answered {got} results for {expected} requests")]
    BatchSize { expected: usize, got: usize },
    #[error("demo retrieval failed: {source}")]
    Demos { source: DemoIndexError },
    #[error("cannot open database {db_id}: {source}")]
    Database { db_id: String, source: ExecError },
}

impl PipelineError {
    /// A stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Config { .. } => "config",
            Self::MissingModel { .. } => "missing_model",
            Self::Model { .. } => "model",
            Self::BatchSize { .. } => "batch_size",
            Self::Demos { .. } => "demos",
            Self::Database { .. } => "database",
        }
    }
}
