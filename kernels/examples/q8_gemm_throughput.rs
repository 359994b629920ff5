//! Throughput of the int8 GEMM alone (GMAC/s, the best of many runs, so that a busy shared
//! machine disturbs it least) on Qwen2.5-Coder-0.5B's MLP and output-layer shapes at decode and
//! prefill row counts: `cargo run -p quorum-kernels --example q8_gemm_throughput [runs] [path]`.

use std::time::Instant;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use quorum_kernels::{CpuPath, PackedQ8_0};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(20);
    let path = match args.next() {
        Some(name) => name.parse::<CpuPath>()?,
        None => CpuPath::detect(),
    };
    // The MLP's shapes stay in the last-level cache between runs; the output layer (136 MB of
    // Q8_0) does not, so it is read from memory as every weight is in a decode step.
    for (k, n, rows) in [
        (896, 4864, &[1, 16, 512][..]),
        (4864, 896, &[1, 16, 512]),
        (896, 151_936, &[1, 16]),
    ] {
        let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu)?;
        let packed = PackedQ8_0::from_qtensor(&QTensor::quantize(&w, GgmlDType::Q8_0)?, path)?;
        for &m in rows {
            let x = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu)?
                .flatten_all()?
                .to_vec1::<f32>()?;
            // Timed on one of rayon's workers, as the engine calls the GEMM (a call from
            // outside the pool adds a hand-off to it and back).
            let best = rayon::scope(|_| {
                let mut best = f64::INFINITY;
                for _ in 0..runs {
                    let t = Instant::now();
                    packed.matmul(&x, m)?;
                    best = best.min(t.elapsed().as_secs_f64());
                }
                anyhow::Ok(best)
            })?;
            let gmac = (m * k * n) as f64 / best / 1e9;
            println!(
                "{path} m={m:4} k={k} n={n}: {:.3} ms, {gmac:.1} GMAC/s",
                best * 1e3
            );
        }
    }
    Ok(())
}
