//! One decode step's k-quant projections of a GGUF model, read from the file as stored: every
//! Q4_K and Q6_K matrix of its layers (and the output layer, when it has one of its own) against
//! `m` f32 rows, through candle's `QMatMul::forward` (its repacked tiles) and through
//! [`KQuantRows`], which reads the file's blocks with the same arithmetic. Prints the best of
//! `runs` for each and the rate the file's bytes are read at.
//! `cargo run --release -p quorum-kernels --example kquant_rows_step MODEL.gguf [runs] [rows...]`.

use std::sync::Arc;
use std::time::Instant;

use candle_core::quantized::{GgmlDType, QMatMul, gguf_file};
use candle_core::{Device, Module, Tensor};
use quorum_kernels::{CpuPath, KQuantRows};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: MODEL.gguf [runs] [rows...]"))?;
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5);
    let mut row_counts: Vec<usize> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    if row_counts.is_empty() {
        row_counts = vec![1, 2, 4, 8];
    }
    let path = CpuPath::detect();
    let mut file = std::fs::File::open(&model)?;
    let content = gguf_file::Content::read(&mut file)?;
    let mut names: Vec<&String> = content
        .tensor_infos
        .iter()
        .filter(|(name, info)| {
            (name.starts_with("blk.") || name.as_str() == "output.weight")
                && matches!(info.ggml_dtype, GgmlDType::Q4K | GgmlDType::Q6K)
                && info.shape.dims().len() == 2
        })
        .map(|(name, _)| name)
        .collect();
    names.sort();
    let mut weights = Vec::new();
    let mut bytes = 0usize;
    for name in names {
        let q = Arc::new(content.tensor(&mut file, name, &Device::Cpu)?);
        let Some(kq) = KQuantRows::new(&q, path) else {
            continue;
        };
        bytes += q.storage_size_in_bytes();
        weights.push((
            QMatMul::from_arc(q.clone())?,
            kq,
            q.shape().dims()[1],
            q.dtype(),
        ));
    }
    println!(
        "{model}: {} k-quant matrices, {:.0} MB as stored; path {path}, {} rayon threads",
        weights.len(),
        bytes as f64 / 1e6,
        rayon::current_num_threads()
    );
    for &m in &row_counts {
        let xs: Vec<(Tensor, Vec<f32>)> = weights
            .iter()
            .map(|(_, _, k, dtype)| {
                let t = Tensor::randn(0f32, 1.0, (m, *k), &Device::Cpu)?;
                let v = t.flatten_all()?.to_vec1::<f32>()?;
                // The engine pads a single row to two for Q6_K, whose one-row product in
                // candle is another arithmetic than its tiles'.
                let t = if m == 1 && *dtype == GgmlDType::Q6K {
                    Tensor::cat(&[&t, &t.zeros_like()?], 0)?
                } else {
                    t
                };
                Ok((t, v))
            })
            .collect::<anyhow::Result<_>>()?;
        // Both once first, so candle's tiles are packed before anything is timed.
        let (mut candle, mut ours) = (f64::INFINITY, f64::INFINITY);
        for run in 0..=runs {
            let t = Instant::now();
            for ((qm, _, _, _), (x, _)) in weights.iter().zip(&xs) {
                qm.forward(x)?;
            }
            let tc = t.elapsed().as_secs_f64();
            let t = Instant::now();
            for ((_, kq, _, _), (_, x)) in weights.iter().zip(&xs) {
                kq.matmul(x, m)?;
            }
            let to = t.elapsed().as_secs_f64();
            if run > 0 {
                candle = candle.min(tc);
                ours = ours.min(to);
            }
        }
        println!(
            "m={m}: candle {:.1} ms, KQuantRows {:.1} ms ({:.2}x; the file's bytes at {:.1} GB/s)",
            candle * 1e3,
            ours * 1e3,
            candle / ours,
            bytes as f64 / ours / 1e9
        );
    }
    Ok(())
}
