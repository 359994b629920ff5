//! The gRPC services, one file each. Handlers validate through `convert`, fail through
//! `status`, and record every call through `rpc`.

pub mod databases;
pub mod inference;
pub mod subtasks;
pub mod text2sql;

use std::pin::Pin;

use tokio_stream::Stream;

/// The stream type of every server-streaming RPC.
pub type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, tonic::Status>> + Send>>;
