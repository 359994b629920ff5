//! Errors of the evaluation harness. Per-question failures (a prediction that does not run, a
//! gold query that fails) are results, recorded in the question's line; these errors are the
//! failures that make a run meaningless or impossible: unreadable files, missing databases, a
//! corrupted results file, a bad selection.

use std::path::PathBuf;

use quorum_sql::sandbox::ExecError;
use quorum_sql::schema::SchemaError;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot access {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} line {line} is not a valid record: {source}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("cannot encode the record of question {index}: {source}")]
    Encode {
        index: usize,
        source: serde_json::Error,
    },
    #[error("cannot open database {db_id} at {path}: {source}")]
    Database {
        db_id: String,
        path: PathBuf,
        source: ExecError,
    },
    /// Boxed: introspection errors are large and rare, and every `Result` of the harness would
    /// otherwise carry their size.
    #[error("cannot introspect database {db_id}: {source}")]
    Schema {
        db_id: String,
        source: Box<SchemaError>,
    },
    #[error(
        "{path} is compressed and a run appends to its results file: write to a .jsonl file \
         (compress it once the run is finished)"
    )]
    CompressedOutput { path: PathBuf },
    #[error("no slice named {name:?} (known: {known})")]
    UnknownSlice { name: String, known: String },
    #[error("question id {id} is out of range (the file has {len} questions)")]
    IdOutOfRange { id: usize, len: usize },
    #[error("cannot read the id list {text:?}: expected numbers and ranges like 3,7,10-12")]
    BadIds { text: String },
}

impl EvalError {
    /// A stable label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            EvalError::Io { .. } => "io",
            EvalError::Corrupt { .. } => "corrupt",
            EvalError::Encode { .. } => "encode",
            EvalError::Database { .. } => "database",
            EvalError::Schema { .. } => "schema",
            EvalError::CompressedOutput { .. } => "compressed_output",
            EvalError::UnknownSlice { .. } => "unknown_slice",
            EvalError::IdOutOfRange { .. } => "id_out_of_range",
            EvalError::BadIds { .. } => "bad_ids",
        }
    }
}
