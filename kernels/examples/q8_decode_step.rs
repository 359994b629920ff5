//! One decode step's projections of Qwen2.5-Coder-0.5B (24 layers, one row) over distinct
//! weights, so that each comes from memory as in a real step (403 MB, more than any cache):
//! the time of each projection kind, the best of `runs`, and the rate its weights are read at.
//! With `fused`, q/k/v and gate/up are each packed as one weight (one call instead of three and
//! two). `cargo run -p quorum-kernels --example q8_decode_step [runs] [path] [fused]`.

use std::time::Instant;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use quorum_kernels::{CpuPath, PackedQ8_0};

/// Bytes the packed layouts store for 32 weights: 32 values and the scale as f32.
const BYTES_PER_32: f64 = 36.0;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(10);
    let path = match args.next() {
        Some(name) => name.parse::<CpuPath>()?,
        None => CpuPath::detect(),
    };
    let fused = args.next().is_some_and(|a| a == "fused");
    let shapes: Vec<(&str, usize, usize)> = if fused {
        vec![
            ("qkv", 896, 1152),
            ("o", 896, 896),
            ("gate_up", 896, 9728),
            ("down", 4864, 896),
        ]
    } else {
        vec![
            ("q", 896, 896),
            ("k", 896, 128),
            ("v", 896, 128),
            ("o", 896, 896),
            ("gate", 896, 4864),
            ("up", 896, 4864),
            ("down", 4864, 896),
        ]
    };
    let mut layers = Vec::new();
    for _ in 0..24 {
        let mut ws = Vec::new();
        for &(_, k, n) in &shapes {
            let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu)?;
            ws.push(PackedQ8_0::from_qtensor(
                &QTensor::quantize(&w, GgmlDType::Q8_0)?,
                path,
            )?);
        }
        layers.push(ws);
    }
    let xs: Vec<Vec<f32>> = shapes
        .iter()
        .map(|&(_, k, _)| Tensor::randn(0f32, 1.0, k, &Device::Cpu)?.to_vec1::<f32>())
        .collect::<Result<_, _>>()?;
    let mut per = vec![f64::INFINITY; shapes.len()];
    let mut best_total = f64::INFINITY;
    rayon::scope(|_| -> anyhow::Result<()> {
        for _ in 0..runs {
            let mut t_kind = vec![0f64; shapes.len()];
            let t0 = Instant::now();
            for ws in &layers {
                for (j, w) in ws.iter().enumerate() {
                    let t = Instant::now();
                    w.matmul(&xs[j], 1)?;
                    t_kind[j] += t.elapsed().as_secs_f64();
                }
            }
            best_total = best_total.min(t0.elapsed().as_secs_f64());
            for (p, t) in per.iter_mut().zip(t_kind) {
                *p = p.min(t);
            }
        }
        Ok(())
    })?;
    let mut bytes_all = 0f64;
    for (j, &(name, k, n)) in shapes.iter().enumerate() {
        let bytes = 24.0 * (n * k) as f64 * BYTES_PER_32 / 32.0;
        bytes_all += bytes;
        println!(
            "{path} {name:8} {:7.3} ms for 24 layers, {:5.1} GB/s, {:6.1} us a call",
            per[j] * 1e3,
            bytes / per[j] / 1e9,
            per[j] / 24.0 * 1e6
        );
    }
    println!(
        "{path} total {:.3} ms, {:.1} GB/s",
        best_total * 1e3,
        bytes_all / best_total / 1e9
    );
    Ok(())
}
