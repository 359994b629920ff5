//! GMAC/s of the K-quant GEMM and of the Q8_0 GEMM on the same weight (random, Q4_K and
//! Q6_K, re-encoded to Q8_0 for the latter), best of `runs`, for a few row counts; and the
//! time of the activations' quantization alone (a 16-column weight, where the product is
//! nothing).
//! `cargo run --release -p quorum-kernels --example kquant_gemm_throughput [runs] [path] [n] [k]`.

use std::time::Instant;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use quorum_kernels::{CpuPath, PackedKQuant, PackedQ8_0};

fn best(runs: usize, mut f: impl FnMut()) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(10);
    let path = match args.next() {
        Some(name) if name != "auto" => name.parse::<CpuPath>()?,
        _ => CpuPath::detect(),
    };
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(8960);
    let k: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1536);
    let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu)?;
    let narrow = Tensor::randn(0f32, 1.0, (16, k), &Device::Cpu)?;
    for dtype in [GgmlDType::Q4K, GgmlDType::Q6K] {
        let q = QTensor::quantize(&w, dtype)?;
        let kq = PackedKQuant::from_qtensor(&q, path)?;
        let q8 = PackedQ8_0::from_qtensor(
            &QTensor::quantize(&q.dequantize(&Device::Cpu)?, GgmlDType::Q8_0)?,
            path,
        )?;
        let kq_narrow = PackedKQuant::from_qtensor(&QTensor::quantize(&narrow, dtype)?, path)?;
        for m in [1usize, 16, 128] {
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
                .collect();
            let macs = (m * n * k) as f64;
            let t_kq = best(runs, || {
                kq.matmul(&x, m).expect("kquant");
            });
            let t_q8 = best(runs, || {
                q8.matmul(&x, m).expect("q8_0");
            });
            let t_quant = best(runs, || {
                kq_narrow.matmul(&x, m).expect("narrow");
            });
            println!(
                "{path} {dtype:?} {m:4} x {k} -> {n}: K-quant {:6.1} GMAC/s ({:7.3} ms, of which quantizing about {:6.3} ms), Q8_0 {:6.1} GMAC/s ({:7.3} ms)",
                macs / t_kq / 1e9,
                t_kq * 1e3,
                t_quant * 1e3,
                macs / t_q8 / 1e9,
                t_q8 * 1e3
            );
        }
    }
    Ok(())
}
