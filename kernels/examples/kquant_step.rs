//! One step of a GGUF model's K-quant matrices (every Q4_K and Q6_K matrix but the token
//! embedding, once each, as a decode step reads them) through the K-quant GEMM on the file's
//! blocks, against the same matrices re-encoded to Q8_0 through the Q8_0 GEMM: the best of
//! `runs` for each row count, and the rate the weights are read at, in all and by format.
//! `cargo run --release -p quorum-kernels --example kquant_step MODEL.gguf [runs] [path] [rows...]`.

use std::time::Instant;

use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use quorum_kernels::{CpuPath, KQuant, PackedKQuant, PackedQ8_0};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: MODEL.gguf [runs] [path] [rows...]"))?;
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5);
    let path = match args.next() {
        Some(name) if name != "auto" => name.parse::<CpuPath>()?,
        _ => CpuPath::detect(),
    };
    let rows: Vec<usize> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    let rows = if rows.is_empty() {
        vec![1, 4, 64]
    } else {
        rows
    };

    let mut file = std::fs::File::open(&model)?;
    let content = gguf_file::Content::read(&mut file)?;
    let mut kquant = Vec::new();
    let mut q8 = Vec::new();
    for name in content.tensor_infos.keys() {
        if name == "token_embd.weight" {
            continue;
        }
        let q = content.tensor(&mut file, name, &Device::Cpu)?;
        if KQuant::of(q.dtype()).is_none() || q.shape().dims().len() != 2 {
            continue;
        }
        kquant.push(PackedKQuant::from_qtensor(&q, path)?);
        let dense = q.dequantize(&Device::Cpu)?;
        q8.push(PackedQ8_0::from_qtensor(
            &QTensor::quantize(&dense, GgmlDType::Q8_0)?,
            path,
        )?);
    }
    let kq_bytes: usize = kquant.iter().map(|w| w.bytes()).sum();
    let q8_bytes: f64 = q8
        .iter()
        .map(|w| (w.n() * w.k()) as f64 * 36.0 / 32.0)
        .sum();
    println!(
        "{path}: {} matrices, K-quant {:.0} MB, Q8_0 copy {:.0} MB",
        kquant.len(),
        kq_bytes as f64 / 1e6,
        q8_bytes / 1e6
    );
    for &m in &rows {
        let xs: Vec<Vec<f32>> = kquant
            .iter()
            .map(|w| {
                (0..m * w.k())
                    .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
                    .collect()
            })
            .collect();
        let (mut best_kq, mut best_q8) = (f64::INFINITY, f64::INFINITY);
        // The same run's time split by format: [Q4_K, Q6_K].
        let mut best_by_kind = [f64::INFINITY; 2];
        for _ in 0..runs {
            let mut by_kind = [0f64; 2];
            let t = Instant::now();
            for (w, x) in kquant.iter().zip(&xs) {
                let tw = Instant::now();
                w.matmul(x, m)?;
                by_kind[(w.kind() == KQuant::Q6K) as usize] += tw.elapsed().as_secs_f64();
            }
            let kq = t.elapsed().as_secs_f64();
            if kq < best_kq {
                best_kq = kq;
                best_by_kind = by_kind;
            }
            let t = Instant::now();
            for (w, x) in q8.iter().zip(&xs) {
                w.matmul(x, m)?;
            }
            best_q8 = best_q8.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{path} rows {m:4}: K-quant {:8.2} ms ({:5.1} GB/s), Q8_0 {:8.2} ms ({:5.1} GB/s), {:.2}x",
            best_kq * 1e3,
            kq_bytes as f64 / best_kq / 1e9,
            best_q8 * 1e3,
            q8_bytes / best_q8 / 1e9,
            best_q8 / best_kq
        );
        for (name, kind, secs) in [
            ("Q4_K", KQuant::Q4K, best_by_kind[0]),
            ("Q6_K", KQuant::Q6K, best_by_kind[1]),
        ] {
            let bytes: usize = kquant
                .iter()
                .filter(|w| w.kind() == kind)
                .map(|w| w.bytes())
                .sum();
            println!(
                "    of which {name}: {:8.2} ms for {:.0} MB ({:5.1} GB/s)",
                secs * 1e3,
                bytes as f64 / 1e6,
                bytes as f64 / secs / 1e9
            );
        }
    }
    Ok(())
}
