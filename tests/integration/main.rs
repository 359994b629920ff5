//! One integration test binary (fast to link): real models against their references.

mod dense_parity;
mod embedder;
mod engine;
mod gguf_parity;
mod tokenizer;
mod weights_errors;
