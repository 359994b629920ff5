//! quorum-kernels: CPU kernels the models need, each with a reference in plain candle ops.
//!
//! - [`PagedKvStore`]: the paged KV cache memory (fixed-size blocks of token slots per layer),
//!   with slot writes, block copies (copy-on-write) and the gather that turns a sequence's block
//!   table into contiguous keys/values, and [`PagedKvStore::attend`], which attends a whole
//!   packed batch straight from the blocks with the same per-row arithmetic as
//!   [`causal_attention_rows`], so paged and dense attention agree bit for bit.
//! - [`reference`]: the same operations written with candle tensor ops (`index_select`), device
//!   generic; the CPU kernels are tested against them, and they are the path on CUDA until a
//!   fused kernel lands.
//! - [`PackedQ8_0`]: a Q8_0 × f32 matmul for prefill and batched decode (an int8 GEMM with an
//!   AVX-512 VNNI, an AVX-VNNI and an AVX2 path, [`CpuPath`]) whose results are bit-identical
//!   to candle's `QMatMul::forward` on the CPU, so greedy decoding stays token-identical with
//!   candle's reference models; a scalar version of candle's arithmetic is its reference.
//! - [`PackedKQuant`]: a Q4_K / Q6_K × f32 matmul reading the file's blocks as stored (about
//!   half the bytes of a Q8_0 copy, which is what a decode step pays for), with its own integer
//!   arithmetic, the same on every path and for every row count, and a scalar reference.
//!
//! - [`cuda`]: Quorum's CUDA kernels (fused norm, activation, rotary with the KV write, paged
//!   attention, batched multi-LoRA, greedy sampling), their references and checks; the tests
//!   run them through a CPU emulation, `quorum kernel-check` on a GPU.
//!
//! The `cuda` feature compiles candle's CUDA backend and the kernels to PTX (nvcc); without it
//! nothing here needs a CUDA toolkit.

pub mod attention;
mod cpu_path;
pub mod cuda;
mod gemm_split;
mod kquant_gemm;
mod kv_element;
mod paged_attention;
mod paged_kv;
mod q8_gemm;
pub mod reference;
#[cfg(test)]
mod test_rng;

pub use attention::{AttentionDims, causal_attention_rows};
pub use cpu_path::{CpuPath, UnknownCpuPath};
pub use kquant_gemm::{KQ_BLOCK, KQuant, KQuantGemmError, PackedKQuant};
pub use kv_element::KvElement;
pub use paged_attention::PagedChunk;
pub use paged_kv::{KvLayout, PagedKvError, PagedKvStore};
pub use q8_gemm::{PackedQ8_0, Q8_0_BLOCK, Q8GemmError};
