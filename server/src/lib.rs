//! quorum-server: the `quorum` binary's library half — configuration, the gRPC services over
//! the engines and the text-to-SQL pipeline, health, metrics and the server lifecycle. A
//! library so that integration tests can run the real server in-process.

pub mod adapter_admin;
pub mod audit;
pub mod auth;
pub mod client;
pub mod config;
pub mod convert;
pub mod databases;
pub mod db_id;
pub mod health;
pub mod http;
pub mod mcp;
pub mod metrics;
pub mod model_source;
pub mod models;
pub mod note_retrieval;
pub mod notes;
pub mod pipeline_models;
pub mod pipeline_runtime;
pub mod prefix_warming;
pub mod registration_log;
pub mod rpc;
pub mod run_queue;
pub mod server;
pub mod services;
pub mod state;
pub mod status;

pub use server::{RunningServer, start};
