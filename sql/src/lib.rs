//! quorum-sql: everything about SQL and databases that the text-to-SQL method needs, with no model
//! code: schema introspection, prompt rendering, the execution sandbox, result comparison with
//! Spider semantics, Spider hardness, SQL skeletons, schema linking and voting.
//!
//! Deterministic by design: no candle, tokio or tonic. The pipeline reaches models through a
//! small trait that the server implements with the engine.

pub mod aggregate;
pub mod backend;
pub mod compare;
pub mod database;
pub mod dataset;
pub mod defect;
pub mod demo_index;
pub mod dialect;
pub mod distinct;
pub mod error_hint;
pub mod evidence_filter;
#[cfg(test)]
mod fakes;
mod fingerprint;
pub mod grammar;
pub mod hardness;
pub mod inferred_keys;
pub mod lexer;
pub mod linking;
pub mod model;
pub mod pipeline;
pub mod postprocess;
pub mod prompt;
pub mod reads_only;
pub mod rules;
pub mod run_error;
pub mod sandbox;
pub mod schema;
#[cfg(test)]
mod spider_fixture;
pub mod sqlite_copy;
pub mod subtask;
pub mod table_order;
pub mod timing;
pub mod value;
pub mod vote;
pub mod words;
