//! Why a text-to-SQL run or a sub-task could not answer, or a pipeline could not be built.
//! Failures of single candidates are not errors: a wrong or failing SQL is recorded in the
//! answer and outvoted, revised or reported.

use crate::demo_index::DemoIndexError;
use crate::model::ModelCallError;
use crate::sandbox::ExecError;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("invalid pipeline configuration: {reason}")]
    Config { reason: String },
    /// The request cannot be served as given (a SQL that must run does not, a field out of
    /// range); asking again cannot help.
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
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
    #[error("database {db_id}: {source}")]
    Database { db_id: String, source: ExecError },
}

impl RunError {
    /// A stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Config { .. } => "config",
            Self::Invalid { .. } => "invalid",
            Self::MissingModel { .. } => "missing_model",
            Self::Model { .. } => "model",
            Self::BatchSize { .. } => "batch_size",
            Self::Demos { .. } => "demos",
            Self::Database { .. } => "database",
        }
    }

    /// Whether the run stopped because its model calls were cancelled (the caller left, the
    /// deadline passed, the server is shutting down).
    pub fn is_cancelled(&self) -> bool {
        matches!(
            self,
            Self::Model {
                source: ModelCallError::Cancelled,
                ..
            }
        )
    }
}
