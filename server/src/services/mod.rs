//! The gRPC services, one file each. Handlers validate through `convert`, fail through
//! `status`, and record every call through `rpc`.

pub mod databases;
pub mod inference;
pub mod subtasks;
pub mod text2sql;

use std::pin::Pin;
use std::time::Instant;

use tokio::task::JoinHandle;
use tokio_stream::Stream;

use crate::rpc::RpcContext;
use crate::state::AppState;
use crate::status::ServiceError;

/// The stream type of every server-streaming RPC.
pub type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, tonic::Status>> + Send>>;

/// Why a run ended before its answer, from the caller's point of view.
fn interrupted(state: &AppState, ctx: &RpcContext) -> ServiceError {
    if state.cancel_all.is_cancelled() {
        ServiceError::Unavailable {
            reason: "the server shut down before the request finished".into(),
        }
    } else if Instant::now() >= ctx.deadline {
        ServiceError::DeadlineExceeded
    } else {
        ServiceError::Cancelled {
            reason: "the run was cancelled".into(),
        }
    }
}

/// Waits for a run on a blocking thread (a text-to-SQL run, a sub-task) until it ends, the
/// request's deadline passes or the server shuts down. `cancelled` tells a run that stopped
/// because its model calls were cancelled, which is reported as why they were.
pub(crate) async fn join_run<T, E: Into<ServiceError>>(
    state: &AppState,
    ctx: &RpcContext,
    handle: JoinHandle<Result<T, E>>,
    cancelled: impl Fn(&E) -> bool,
) -> Result<T, ServiceError> {
    let outcome = tokio::select! {
        joined = handle => joined,
        _ = tokio::time::sleep_until(ctx.deadline.into()) => return Err(ServiceError::DeadlineExceeded),
        _ = state.cancel_all.cancelled() => return Err(interrupted(state, ctx)),
    };
    match outcome {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) if cancelled(&e) => Err(interrupted(state, ctx)),
        Ok(Err(e)) => Err(e.into()),
        Err(join) => Err(ServiceError::internal(format!("run task: {join}"))),
    }
}
