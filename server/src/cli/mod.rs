//! The binary's subcommands beside `serve`: each file is one command (or a family of them)
//! and its flags; `main.rs` only parses the command line and dispatches.

pub mod adapter;
pub mod ask;
pub mod engine_generate;
pub mod eval;
#[cfg(feature = "duckdb")]
pub mod files_write;
pub mod grammar_coverage;
pub mod kernel_check;
pub mod load_selection;
pub mod local_model;
pub mod mcp;
pub mod mysql_load;
pub mod pg_load;
pub mod reword;
pub mod serve;
pub mod subtask;
pub mod token;
pub mod train;
