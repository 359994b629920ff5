//! Time and peak memory of one training micro-batch (forward and backward) by sequence length.
//!
//! `cargo run -p quorum-training --example train_step_memory -- MODEL LEN...` loads the base
//! model as `quorum train` does, attaches a rank-16 adapter on all seven projections, and for
//! each length (run in the order given, so give them ascending) computes the answer loss of a
//! fixed token sequence whose last 64 tokens are the answer, then its gradients. It prints the
//! seconds of each and the process's peak resident memory after it (`VmHWM`): with ascending
//! lengths, the peak after a length is that length's.

use std::path::PathBuf;
use std::time::Instant;

use candle_core::{DType, Device};
use quorum_training::{ALL_PROJECTIONS, LoraDecoder, LoraParams, LoraSpec};

fn peak_rss_gib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / (1024.0 * 1024.0))
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let model_path = PathBuf::from(
        args.next()
            .ok_or_else(|| anyhow::anyhow!("usage: train_step_memory MODEL LEN [LEN...]"))?,
    );
    let lengths: Vec<usize> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    let ckpt = quorum_weights::load_checkpoint(&model_path, &Device::Cpu, DType::F32)?;
    let model = LoraDecoder::load(&ckpt)?;
    drop(ckpt);
    let spec = LoraSpec {
        rank: 16,
        alpha: 32.0,
        dropout: 0.0,
        targets: ALL_PROJECTIONS.iter().map(|p| p.to_string()).collect(),
    };
    let lora = LoraParams::init(model.config(), spec, 0)?;
    println!("model loaded: peak RSS {:.2} GiB", peak_rss_gib());
    let vocab = model.config().vocab_size as u32;
    for len in lengths {
        // Ordinary token ids (not special tokens), varied so attention is not uniform.
        let tokens: Vec<u32> = (0..len as u32)
            .map(|i| 1000 + i.wrapping_mul(7919) % (vocab.min(100_000) - 1000))
            .collect();
        let answer_start = len.saturating_sub(64).max(1);
        let started = Instant::now();
        let loss = model.answer_loss(Some(&lora), &tokens, answer_start, None)?;
        let forward = started.elapsed().as_secs_f64();
        let grads = loss.backward()?;
        let total = started.elapsed().as_secs_f64();
        drop(grads);
        println!(
            "{len} tokens: loss {:.4}, forward {forward:.2} s, forward+backward {total:.2} s ({:.1} tok/s), peak RSS {:.2} GiB",
            loss.to_scalar::<f32>()?,
            len as f64 / total,
            peak_rss_gib()
        );
    }
    Ok(())
}
