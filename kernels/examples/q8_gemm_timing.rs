//! Quick timing of `PackedQ8_0::matmul` against candle's `QMatMul::forward` in one process:
//! `cargo run -p quorum-kernels --example q8_gemm_timing [m] [runs] [path]`.

use std::time::Instant;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use quorum_kernels::{CpuPath, PackedQ8_0};

fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[runs / 2]
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let m: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1219);
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(7);
    // The kernel path to time (default: the fastest this CPU has). candle computes as on this
    // CPU, so results match it only where the path reproduces the same arithmetic.
    let path = match args.next() {
        Some(name) => name.parse::<CpuPath>()?,
        None => CpuPath::detect(),
    };
    // Qwen2.5-Coder-0.5B's projections: gate/up, q/o, k/v, down, and the output projection.
    for (k, n) in [
        (896, 4864),
        (896, 896),
        (896, 128),
        (4864, 896),
        (896, 151936),
    ] {
        let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu)?;
        let q = QTensor::quantize(&w, GgmlDType::Q8_0)?;
        let packed = PackedQ8_0::from_qtensor(&q, path)?;
        let qmm = QMatMul::from_qtensor(q)?;
        let x = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu)?;
        let xs = x.flatten_all()?.to_vec1::<f32>()?;
        let ours = packed.matmul(&xs, m)?;
        let theirs = qmm.forward(&x)?.flatten_all()?.to_vec1::<f32>()?;
        let same = ours
            .iter()
            .zip(&theirs)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        let t_candle = median_ms(runs, || {
            qmm.forward(&x).expect("candle");
        });
        let t_ours = median_ms(runs, || {
            packed.matmul(&xs, m).expect("ours");
        });
        println!(
            "m={m} k={k} n={n}: candle {t_candle:.2} ms, ours {t_ours:.2} ms, {:.2}x, \
             bit-identical: {same} (path {path}, candle {})",
            t_candle / t_ours,
            if CpuPath::detect().candle_repacks_q8_0(n, k) {
                "repacked"
            } else {
                "generic"
            }
        );
    }
    Ok(())
}
