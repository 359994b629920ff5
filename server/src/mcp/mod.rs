//! The Model Context Protocol face: assistants and IDEs reach the databases through tools
//! (list and describe the databases, ask a question through the whole pipeline, run a read-only
//! query, explain a query). Over streamable HTTP at `/mcp` on the HTTP port, behind the same
//! bearer token and scopes as every `/v1` route; over stdio with `quorum mcp`, as a client of a
//! running server. Results are plain JSON: cells as numbers, strings and nulls.

pub mod calls;
pub mod json;
pub mod service;

pub use service::QuorumMcp;
