//! quorum-kernels: CPU kernels the models need, each with a reference in plain candle ops.
//!
//! - [`PagedKvStore`]: the paged KV cache memory (fixed-size blocks of token slots per layer),
//!   with slot writes, block copies (copy-on-write) and the gather that turns a sequence's block
//!   table into contiguous keys/values. Attention over the gathered context then runs through
//!   candle's matmul, exactly as the dense reference does, so paged and dense attention agree.
//! - [`reference`]: the same operations written with candle tensor ops (`index_select`), device
//!   generic; the CPU kernels are tested against them, and they are the path on CUDA until a
//!   fused kernel lands.
//!
//! The `cuda` feature compiles candle's CUDA backend; nothing here needs a CUDA toolkit without it.

pub mod attention;
mod paged_kv;
pub mod reference;

pub use attention::{AttentionDims, causal_attention_rows};
pub use paged_kv::{KvLayout, PagedKvError, PagedKvStore};
