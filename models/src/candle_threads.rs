//! How long candle's own CPU worker threads spin between operations.
//!
//! candle 0.11 runs its quantized matmuls and element-wise ops on a pool of worker threads of
//! its own (its "barrier pool"), beside rayon's pool, which runs our kernels (the int8 GEMM,
//! attention). After each candle op its workers spin up to 25,000 times before parking. On a
//! machine with few cores, that spinning takes the cores our rayon kernels are running on: in
//! a decode step of 16 sequences on 2 cores, 15% of all CPU samples were candle's workers
//! spinning. With a limit of 2,000 the same step ran about 1.4 times faster, and a single
//! stream (where candle's pool does the matmuls) measured within noise (docs/RESULTS.md).

/// The environment variable candle reads once, when it starts its pool.
pub const CANDLE_SPIN_LIMIT_VAR: &str = "CANDLE_BARRIER_POOL_SPIN_LIMIT";
/// The limit Quorum's binaries set when the environment does not choose one.
pub const CANDLE_SPIN_LIMIT: u32 = 2000;

/// Sets candle's spin limit to [`CANDLE_SPIN_LIMIT`] unless the environment already sets one.
///
/// # Safety
/// It changes the process environment: call it first thing in `main`, while no other thread
/// runs (see [`std::env::set_var`]).
pub unsafe fn limit_candle_spinning() {
    if std::env::var_os(CANDLE_SPIN_LIMIT_VAR).is_none() {
        // SAFETY: the caller guarantees that no other thread reads or writes the environment.
        unsafe { std::env::set_var(CANDLE_SPIN_LIMIT_VAR, CANDLE_SPIN_LIMIT.to_string()) };
    }
}
