//! The gRPC services, one file each. Handlers validate through `convert`, fail through
//! `status`, and record every call through `rpc`.

pub mod databases;
pub mod inference;
pub mod subtasks;
pub mod text2sql;

use std::pin::Pin;
use std::time::Instant;

use quorum_sql::run_error::RunError;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::Stream;
use tonic::{Code, Status};

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
/// request's deadline passes or the server shuts down. A run that stopped because its model
/// calls were cancelled is reported as why they were.
pub(crate) async fn join_run<T>(
    state: &AppState,
    ctx: &RpcContext,
    handle: JoinHandle<Result<T, RunError>>,
) -> Result<T, ServiceError> {
    let outcome = tokio::select! {
        joined = handle => joined,
        _ = tokio::time::sleep_until(ctx.deadline.into()) => return Err(ServiceError::DeadlineExceeded),
        _ = state.cancel_all.cancelled() => return Err(interrupted(state, ctx)),
    };
    match outcome {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) if e.is_cancelled() => Err(interrupted(state, ctx)),
        Ok(Err(e)) => Err(e.into()),
        Err(join) => Err(ServiceError::internal(format!("run task: {join}"))),
    }
}

/// Sends a streaming run's progress messages as they come (`message` picks and converts them),
/// then its answer or its error, and returns the code the call ends with: `Cancelled` as soon
/// as the caller has gone.
pub(crate) async fn stream_run<T, E, M>(
    ctx: &RpcContext,
    finish: impl Future<Output = Result<T, ServiceError>>,
    events: &mut mpsc::UnboundedReceiver<E>,
    tx: &mpsc::Sender<Result<M, Status>>,
    message: impl Fn(E) -> Option<M>,
    answer: impl FnOnce(T) -> M,
) -> Code {
    tokio::pin!(finish);
    let result = loop {
        tokio::select! {
            biased;
            Some(event) = events.recv() => {
                if let Some(m) = message(event) {
                    ctx.note_first_message();
                    if tx.send(Ok(m)).await.is_err() {
                        return Code::Cancelled;
                    }
                }
            }
            result = &mut finish => break result,
            _ = tx.closed() => return Code::Cancelled,
        }
    };
    // The run has ended: whatever it reported before returning is already queued.
    while let Ok(event) = events.try_recv() {
        if let Some(m) = message(event) {
            ctx.note_first_message();
            if tx.send(Ok(m)).await.is_err() {
                return Code::Cancelled;
            }
        }
    }
    let (last, code) = match result {
        Ok(done) => {
            ctx.note_first_message();
            (Ok(answer(done)), Code::Ok)
        }
        Err(e) => {
            let code = e.code();
            (Err(Status::from(e)), code)
        }
    };
    if tx.send(last).await.is_err() {
        return Code::Cancelled;
    }
    code
}
