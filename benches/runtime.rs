//! Single-stream prefill and decode speed of Quorum's decoder against candle-transformers'
//! reference GGUF model on the same weights, measured side by side in one process.
//!
//! `cargo run --release -p quorum-benches --bin quorum-bench-runtime -- --runs 3`
//! Prints one JSON object per configuration and a summary with ratios to the reference.

use std::time::Instant;

use anyhow::Result;
use candle_core::Device;
use clap::Parser;
use quorum_models::{DecoderModel, MatmulPolicy, greedy_generate};
use quorum_tests::{
    QWEN_05B, ReferenceModel, all_q8_0_copy, long_schema_prompt, model_path, reencoded_copy,
};
use quorum_weights::{ChatMessage, Reencode, load_checkpoint};

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value = QWEN_05B)]
    model: String,
    /// Repetitions; the median is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[arg(long, default_value_t = 64)]
    new_tokens: usize,
    /// Write the prompt's token ids (JSON) here and exit: for benchmarking other runtimes
    /// (`benches/llamacpp_bench.py`) on exactly the same input.
    #[arg(long)]
    write_prompt_ids: Option<std::path::PathBuf>,
    /// Run a copy with every quantized matrix re-encoded to Q8_0 (the int8 GEMM's format).
    #[arg(long)]
    all_q8_0: bool,
    /// CPU kernel path: auto, avx512vnni, avxvnni, avx2 or candle (candle is switched to match).
    #[arg(long, default_value = "auto")]
    cpu_path: String,
    /// Only the engine (no reference or greedy loops): for profiling the serving path.
    #[arg(long)]
    engine_only: bool,
    /// The engine without speculative decoding by prompt lookup: every token a step of its own,
    /// as llama.cpp decodes by default.
    #[arg(long)]
    no_drafts: bool,
    /// Which quantized matrices the engine re-encodes to Q8_0 at load (`kernels`, `all`,
    /// `slow` or `none`, as a model's `reencode` setting); default: as the server decides for
    /// this path.
    #[arg(long)]
    reencode: Option<String>,
}

#[derive(Debug, Clone, Copy)]
struct Speed {
    prefill_tps: f64,
    decode_tps: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn summarize(name: &str, runs: &[Speed], prompt_len: usize) -> Speed {
    summarize_with(name, runs, prompt_len, serde_json::Map::new())
}

/// [`summarize`] with more fields on the line.
fn summarize_with(
    name: &str,
    runs: &[Speed],
    prompt_len: usize,
    extra: serde_json::Map<String, serde_json::Value>,
) -> Speed {
    let s = Speed {
        prefill_tps: median(runs.iter().map(|r| r.prefill_tps).collect()),
        decode_tps: median(runs.iter().map(|r| r.decode_tps).collect()),
    };
    let mut line = serde_json::json!({"config": name, "prompt_tokens": prompt_len,
        "runs": runs.len(), "prefill_tok_s": s.prefill_tps, "decode_tok_s": s.decode_tps});
    line.as_object_mut().expect("an object").extend(extra);
    println!("{line}");
    s
}

fn main() -> Result<()> {
    // SAFETY: first statement of `main`; no other thread exists yet.
    unsafe { quorum_models::limit_candle_spinning() };
    let args = Args::parse();
    // SAFETY: no other thread has started.
    let cpu_path = unsafe { quorum_tests::bench_cpu_path(&args.cpu_path)? };
    let path = if args.all_q8_0 {
        all_q8_0_copy(&args.model)?
    } else {
        model_path(&args.model)
    };
    let ckpt = load_checkpoint(&path, &Device::Cpu, candle_core::DType::F32)?;
    let template = ckpt.chat_template.as_ref().expect("chat template");
    let text = template.render(&[ChatMessage::new("user", &long_schema_prompt())], true)?;
    let ids = ckpt
        .tokenizer
        .encode(text.as_str(), false)
        .map_err(anyhow::Error::msg)?;
    let ids = ids.get_ids().to_vec();
    if let Some(out) = &args.write_prompt_ids {
        std::fs::write(out, serde_json::to_string(&ids)?)?;
        return Ok(());
    }
    let n = args.new_tokens;

    // Prefix caching off: every run must prefill the whole prompt, not hit the previous run's
    // blocks. The weights as the server loads them on this path (every matrix in Q8_0 where
    // the int8 GEMM runs).
    let engine_config = quorum_engine::EngineConfig {
        enable_prefix_caching: false,
        matmul_policy: MatmulPolicy::engine(cpu_path),
        reencode: match args.reencode.as_deref() {
            Some(value) => value.parse().map_err(anyhow::Error::msg)?,
            None => Reencode::default_for(cpu_path.has_int8_gemm()),
        },
        max_draft_tokens: if args.no_drafts {
            0
        } else {
            quorum_engine::DEFAULT_MAX_DRAFT_TOKENS
        },
        ..quorum_engine::EngineConfig::cpu_default("qwen")
    };
    let engine = quorum_engine::spawn_engine(engine_config, &path, &Device::Cpu)?;
    if args.engine_only {
        let runs = (0..args.runs)
            .map(|_| engine_speed(&engine, &ids, n))
            .collect::<Result<Vec<_>>>()?;
        // How far speculative decoding got: the drafts checked and kept, and the engine's
        // steps (prefill chunks included), over all runs.
        let stats = engine.stats();
        let extra = serde_json::json!({"steps": stats.steps, "draft_tokens": stats.draft_tokens,
            "draft_tokens_accepted": stats.draft_tokens_accepted});
        let extra = extra.as_object().expect("an object").clone();
        summarize_with(engine_name(args.no_drafts), &runs, ids.len(), extra);
        return Ok(());
    }
    let mut reference = ReferenceModel::load(&if args.all_q8_0 {
        path.clone()
    } else {
        reencoded_copy(&args.model)?
    })?;
    let quantized = DecoderModel::load(&ckpt, &Device::Cpu, MatmulPolicy::QuantizedOnly)?;
    let int8 = DecoderModel::load(
        &ckpt,
        &Device::Cpu,
        MatmulPolicy::Int8Prefill {
            min_rows: 1,
            path: cpu_path,
        },
    )?;
    let (mut r_ref, mut r_q, mut r_d, mut r_e) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Interleave configurations so that machine noise hits all of them alike.
    for _ in 0..args.runs {
        let t = Instant::now();
        let (toks, _, prefill) = reference.greedy_timed(&ids, n)?;
        let total = t.elapsed().as_secs_f64();
        r_ref.push(Speed {
            prefill_tps: ids.len() as f64 / prefill,
            decode_tps: (toks.len() - 1) as f64 / (total - prefill),
        });
        for (model, out) in [(&quantized, &mut r_q), (&int8, &mut r_d)] {
            let g = greedy_generate(model, &ids, n, &[], |_| {})?;
            out.push(Speed {
                prefill_tps: ids.len() as f64 / g.prefill_secs,
                decode_tps: (g.tokens.len() - 1) as f64 / g.decode_secs,
            });
        }
        r_e.push(engine_speed(&engine, &ids, n)?);
    }
    let base = summarize("candle-transformers quantized reference", &r_ref, ids.len());
    let q = summarize("quorum quantized", &r_q, ids.len());
    let d = summarize("quorum int8-prefill (default)", &r_d, ids.len());
    let e = summarize(engine_name(args.no_drafts), &r_e, ids.len());
    for (name, s) in [
        ("quorum quantized", q),
        ("quorum int8-prefill (default)", d),
        ("quorum engine", e),
    ] {
        println!(
            "{name}: prefill {:.2}x, decode {:.2}x the reference",
            s.prefill_tps / base.prefill_tps,
            s.decode_tps / base.decode_tps
        );
    }
    Ok(())
}

fn engine_name(no_drafts: bool) -> &'static str {
    if no_drafts {
        "quorum engine (paged, row-wise attention, no drafts)"
    } else {
        "quorum engine (paged, row-wise attention)"
    }
}

/// One request through the engine: prefill speed from its time to first token, decode speed from
/// the rest. Exactly `n` tokens, as the other runtimes here decode.
fn engine_speed(engine: &quorum_engine::EngineHandle, ids: &[u32], n: usize) -> Result<Speed> {
    let params = quorum_engine::SamplingParams {
        max_new_tokens: n as u32,
        ignore_eos: true,
        ..quorum_engine::SamplingParams::greedy()
    };
    let req = quorum_engine::GenerateRequest {
        draft_hint: Vec::new(),
        keep_prefix: None,
        prompt_tokens: ids.to_vec(),
        params,
        adapter: None,
        deadline: None,
        grammar: None,
    };
    let mut rx = engine.submit(req)?;
    loop {
        if let Some(quorum_engine::EngineEvent::Finished(f)) = rx.blocking_recv() {
            let ttft = f.ttft.unwrap_or_default().as_secs_f64();
            return Ok(Speed {
                prefill_tps: ids.len() as f64 / ttft,
                decode_tps: f.completion_tokens.saturating_sub(1) as f64
                    / (f.total.as_secs_f64() - ttft),
            });
        }
    }
}
