//! One integration test binary (fast to link): real models against their references.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

mod constrained;
mod cpu_forward;
mod dense_parity;
mod duckdb_gold;
mod duckdb_keys;
mod duckdb_safety;
mod embedder;
mod engine;
mod gguf_parity;
mod gold_comparison;
mod lora;
mod mysql_gold;
mod mysql_safety;
mod mysql_support;
mod mysql_tls;
mod note_recall;
mod postgres_gold;
mod postgres_safety;
mod postgres_support;
mod postgres_tls;
mod random_decoder;
mod relevance;
mod server_duckdb;
mod server_inference;
mod server_lifecycle;
mod server_mcp;
mod server_mysql;
mod server_notes;
mod server_openai_pipeline;
mod server_postgres;
mod server_profiles;
mod server_registrations;
mod server_scope_probe;
mod server_scopes;
mod server_smoke;
mod server_subtasks;
mod server_support;
mod server_text2sql;
mod server_tls;
mod server_warming;
mod synthetic;
mod tls_support;
mod tokenizer;
mod training;
mod value_index;
mod weights_errors;
