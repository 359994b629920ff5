//! One integration test binary (fast to link): real models against their references.

mod gguf_parity;
mod tokenizer;
