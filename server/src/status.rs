//! The one place where failures become gRPC statuses. Every service returns [`ServiceError`];
//! library errors are converted into it here with exhaustive matches, so that a new error
//! variant fails to compile until someone decides its code. Internal details go to the log,
//! never to the caller.

use quorum_engine::EngineError;
use quorum_sql::model::ModelCallError;
use quorum_sql::run_error::RunError;
use quorum_sql::sandbox::ExecError;
use tonic::{Code, Status};

/// gRPC's retry-pushback trailer: a client with a retry policy waits this long before it
/// tries again (gRFC A6) instead of its own backoff.
pub const RETRY_PUSHBACK_HEADER: &str = "grpc-retry-pushback-ms";
/// The pushback sent with RESOURCE_EXHAUSTED. A fixed second: a queue that is full now holds
/// several text-to-SQL runs or generations of seconds each, so sooner is rarely useful.
pub const RETRY_PUSHBACK_MS: u32 = 1000;

/// How a request whose prompt and generation budget overflow the model's context is told so;
/// the HTTP face recognises it to answer OpenAI's `context_length_exceeded`.
pub const CONTEXT_EXCEEDED: &str = "exceed the model's context";

/// Why an RPC failed, in terms a caller can act on.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("invalid `{field}`: {reason}")]
    InvalidArgument { field: String, reason: String },
    #[error("unknown {what} `{id}`")]
    NotFound { what: &'static str, id: String },
    #[error("{what} `{id}` already exists")]
    AlreadyExists { what: &'static str, id: String },
    #[error("permission denied: {reason}")]
    PermissionDenied { reason: String },
    #[error("server busy: {reason}; retry later")]
    ResourceExhausted { reason: String },
    /// A limit that waiting does not lift (unlike a full queue: no retry pushback).
    #[error("limit reached: {reason}")]
    QuotaExceeded { reason: String },
    #[error("deadline exceeded")]
    DeadlineExceeded,
    #[error("cancelled: {reason}")]
    Cancelled { reason: String },
    #[error("unavailable: {reason}")]
    Unavailable { reason: String },
    #[error("missing or invalid bearer token")]
    Unauthenticated,
    #[error("{what} is not configured on this server")]
    FailedPrecondition { what: String },
    #[error("{what} `{id}` is in use: {reason}")]
    InUse {
        what: &'static str,
        id: String,
        reason: String,
    },
    /// The detail is logged, never sent.
    #[error("internal error: {detail}")]
    Internal { detail: String },
}

impl ServiceError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub fn internal(detail: impl std::fmt::Display) -> Self {
        Self::Internal {
            detail: detail.to_string(),
        }
    }

    pub fn code(&self) -> Code {
        match self {
            Self::InvalidArgument { .. } => Code::InvalidArgument,
            Self::NotFound { .. } => Code::NotFound,
            Self::AlreadyExists { .. } => Code::AlreadyExists,
            Self::PermissionDenied { .. } => Code::PermissionDenied,
            Self::ResourceExhausted { .. } | Self::QuotaExceeded { .. } => Code::ResourceExhausted,
            Self::DeadlineExceeded => Code::DeadlineExceeded,
            Self::Cancelled { .. } => Code::Cancelled,
            Self::Unavailable { .. } => Code::Unavailable,
            Self::Unauthenticated => Code::Unauthenticated,
            Self::FailedPrecondition { .. } | Self::InUse { .. } => Code::FailedPrecondition,
            Self::Internal { .. } => Code::Internal,
        }
    }
}

impl From<ServiceError> for Status {
    fn from(err: ServiceError) -> Status {
        let code = err.code();
        match &err {
            ServiceError::Internal { detail } => {
                tracing::error!(%detail, "internal error");
                Status::internal("internal error (details are in the server log)")
            }
            ServiceError::ResourceExhausted { .. } => {
                let mut status = Status::new(code, err.to_string());
                status.metadata_mut().insert(
                    RETRY_PUSHBACK_HEADER,
                    tonic::metadata::MetadataValue::from(RETRY_PUSHBACK_MS),
                );
                status
            }
            _ => Status::new(code, err.to_string()),
        }
    }
}

/// The registrations file shared by replicas cannot be read or written: the storage behind it
/// (a volume) may come back, and nothing was registered.
impl From<std::io::Error> for ServiceError {
    fn from(e: std::io::Error) -> Self {
        tracing::warn!(error = %e, "registrations file");
        Self::Unavailable {
            reason: "the shared registrations file cannot be written".into(),
        }
    }
}

impl From<EngineError> for ServiceError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::QueueFull { .. } => Self::ResourceExhausted {
                reason: err.to_string(),
            },
            EngineError::PromptTooLong {
                n_tokens,
                max_new_tokens,
                max,
            } => Self::invalid(
                "max_tokens",
                format!(
                    "{n_tokens} prompt tokens plus {max_new_tokens} new tokens {CONTEXT_EXCEEDED} \
                     of {max} tokens"
                ),
            ),
            EngineError::EmptyPrompt => Self::invalid("prompt", "must not be empty"),
            EngineError::InvalidParams(e) => {
                Self::invalid(format!("sampling.{}", e.field()), e.to_string())
            }
            EngineError::UnknownAdapter { adapter } => Self::NotFound {
                what: "adapter",
                id: adapter,
            },
            EngineError::AdapterExists { adapter } => Self::AlreadyExists {
                what: "adapter",
                id: adapter,
            },
            EngineError::AdapterInUse { adapter, requests } => Self::InUse {
                what: "adapter",
                id: adapter,
                reason: format!("{requests} request(s) in flight; retry when they end"),
            },
            EngineError::Grammar(e @ quorum_engine::GrammarError::Invalid(_)) => {
                Self::invalid("sampling.constraint", e.to_string())
            }
            EngineError::Grammar(e @ quorum_engine::GrammarError::Unsupported(_)) => {
                Self::FailedPrecondition {
                    what: e.to_string(),
                }
            }
            EngineError::ShuttingDown => Self::Unavailable {
                reason: "the model is shutting down".into(),
            },
            e @ (EngineError::Config { .. } | EngineError::Model(_)) => Self::internal(e),
        }
    }
}

impl From<ModelCallError> for ServiceError {
    fn from(err: ModelCallError) -> Self {
        match err {
            ModelCallError::UnknownModel { name } => Self::NotFound {
                what: "model",
                id: name,
            },
            // The prompt is built from the question, the evidence and the schema; the question
            // is what a caller can change.
            ModelCallError::InvalidInput { name, reason } => Self::invalid(
                "question",
                format!("the prompt for model `{name}`: {reason}"),
            ),
            ModelCallError::UnknownAdapter { adapter, .. } => Self::NotFound {
                what: "adapter",
                id: adapter,
            },
            ModelCallError::Busy { name, reason } => Self::ResourceExhausted {
                reason: format!("model `{name}`: {reason}"),
            },
            ModelCallError::ShuttingDown { name } => Self::Unavailable {
                reason: format!("model `{name}` is shutting down"),
            },
            ModelCallError::Cancelled => Self::Cancelled {
                reason: "the model call was cancelled".into(),
            },
            ModelCallError::Failed { name, message } => {
                Self::internal(format!("model {name}: {message}"))
            }
        }
    }
}

impl From<RunError> for ServiceError {
    fn from(err: RunError) -> Self {
        match err {
            RunError::Config { reason } => Self::invalid("options", reason),
            RunError::Invalid { field, reason } => Self::invalid(field, reason),
            RunError::MissingModel { what } => Self::FailedPrecondition { what: what.into() },
            RunError::Model { source, .. } => source.into(),
            RunError::Database {
                db_id,
                source: source @ ExecError::Unavailable { .. },
            } => Self::Unavailable {
                reason: format!("database {db_id}: {source}"),
            },
            RunError::Database { db_id, source } => {
                Self::internal(format!("database {db_id}: {source}"))
            }
            e @ (RunError::BatchSize { .. } | RunError::Demos { .. }) => Self::internal(e),
        }
    }
}
