//! The one-shot model commands: `generate` (a checkpoint's greedy tokens), `embed` and
//! `synth-checkpoint`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use quorum_models::{
    BertEmbedder, CpuPath, DecoderModel, DeviceSpec, MatmulPolicy, cosine, greedy_generate,
};
use quorum_server::model_source::ModelDirs;
use quorum_weights::{ChatMessage, load_checkpoint};

pub struct GenerateArgs {
    pub model: String,
    pub prompt: String,
    pub chat: bool,
    pub cpu_path: CpuPath,
    pub max_tokens: usize,
    pub no_int8_prefill: bool,
    pub stats: bool,
    pub logits_out: Option<PathBuf>,
    pub dtype: candle_core::DType,
}

pub fn synth_checkpoint(arch: &str, out: &std::path::Path, dtype: &str, seed: u64) -> Result<()> {
    let arch = quorum_weights::synthetic_arch(arch)?;
    let dtype = match quorum_models::parse_dtype(dtype).context("--dtype")? {
        candle_core::DType::BF16 => quorum_weights::SyntheticDtype::Bf16,
        candle_core::DType::F32 => quorum_weights::SyntheticDtype::F32,
        other => anyhow::bail!("--dtype: synthetic checkpoints are bf16 or f32, not {other:?}"),
    };
    let start = std::time::Instant::now();
    quorum_weights::write_synthetic_checkpoint(&arch, out, dtype, seed)
        .with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "wrote a synthetic {} checkpoint to {} in {:.1} s",
        arch.name,
        out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

pub fn synth_adapter(arch: &str, out: &std::path::Path, rank: usize, seed: u64) -> Result<()> {
    anyhow::ensure!(rank > 0, "--rank: an adapter has a rank of at least 1");
    let arch = quorum_weights::synthetic_arch(arch)?;
    quorum_weights::write_synthetic_adapter(&arch, out, rank, seed)
        .with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "wrote a synthetic rank-{rank} adapter of {} to {}",
        arch.name,
        out.display()
    );
    Ok(())
}

/// The matmul policy of `quorum generate`: the int8 GEMM from one row unless turned off.
pub fn generate_policy(no_int8_prefill: bool, cpu_path: CpuPath) -> MatmulPolicy {
    if no_int8_prefill {
        MatmulPolicy::QuantizedOnly
    } else {
        MatmulPolicy::Int8Prefill {
            min_rows: 1,
            path: cpu_path,
        }
    }
}

pub fn generate(dirs: &ModelDirs, device_spec: DeviceSpec, args: &GenerateArgs) -> Result<()> {
    let device = device_spec.open()?;
    let path = dirs.resolve(&args.model)?;
    quorum_models::check_dtype(device_spec.is_cpu(), args.dtype)?;
    let ckpt = load_checkpoint(&path, &device, args.dtype)
        .with_context(|| format!("loading {}", path.display()))?;
    let policy = generate_policy(args.no_int8_prefill, args.cpu_path);
    let model = DecoderModel::load_with(
        &ckpt,
        &device,
        quorum_models::LoadOptions {
            policy,
            dtype: args.dtype,
        },
    )?;
    let text = if args.chat {
        let template = ckpt
            .chat_template
            .as_ref()
            .context("--chat: the model has no chat template")?;
        template.render(&[ChatMessage::new("user", &args.prompt)], true)?
    } else {
        args.prompt.clone()
    };
    let enc = ckpt
        .tokenizer
        .encode(text.as_str(), false)
        .map_err(|e| anyhow::anyhow!("tokenizing the prompt: {e}"))?;
    let prompt_ids = enc.get_ids();
    let mut stdout = std::io::stdout().lock();
    let mut generated: Vec<u32> = Vec::new();
    let mut printed = 0;
    let out = greedy_generate(
        &model,
        prompt_ids,
        args.max_tokens,
        &ckpt.eos_token_ids,
        |t| {
            if ckpt.eos_token_ids.contains(&t) {
                return;
            }
            generated.push(t);
            // Decode the whole tail so multi-byte characters split across tokens print whole.
            if let Ok(text) = ckpt.tokenizer.decode(&generated, true)
                && text.len() > printed
                && !text.ends_with('\u{fffd}')
            {
                let _ = stdout.write_all(&text.as_bytes()[printed..]);
                let _ = stdout.flush();
                printed = text.len();
            }
        },
    )?;
    let text = ckpt
        .tokenizer
        .decode(&generated, true)
        .map_err(|e| anyhow::anyhow!("decoding: {e}"))?;
    if text.len() > printed {
        stdout.write_all(&text.as_bytes()[printed..])?;
    }
    writeln!(stdout)?;
    if let Some(path) = &args.logits_out {
        let logits: Vec<f32> = out
            .prompt_logits
            .to_device(&candle_core::Device::Cpu)?
            .flatten_all()?
            .to_vec1()?;
        let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.stats {
        let kernels = match policy.int8_path() {
            _ if !device.is_cpu() => format!("device {device_spec} ({})", args.dtype.as_str()),
            Some(path) => format!("int8 GEMM path {path}"),
            None => "candle's quantized kernels only".to_owned(),
        };
        eprintln!(
            "{kernels}; prompt {} tokens, prefill {:.1} tok/s; {} new tokens, decode {:.1} tok/s",
            prompt_ids.len(),
            prompt_ids.len() as f64 / out.prefill_secs,
            out.tokens.len(),
            out.tokens.len().saturating_sub(1) as f64 / out.decode_secs.max(1e-9),
        );
    }
    Ok(())
}

pub fn embed(
    dirs: &ModelDirs,
    device: DeviceSpec,
    model: &str,
    similarity: bool,
    texts: &[String],
) -> Result<()> {
    let device = device.open()?;
    let path = dirs.resolve(model)?;
    let ckpt = load_checkpoint(&path, &device, candle_core::DType::F32)
        .with_context(|| format!("loading {}", path.display()))?;
    let embedder = BertEmbedder::load(ckpt, &device)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embedder.embed(&refs)?;
    if similarity {
        for i in 0..texts.len() {
            let row: Vec<String> = (0..texts.len())
                .map(|j| {
                    Ok(format!(
                        "{:.4}",
                        cosine(&vectors.get(i)?, &vectors.get(j)?)?
                    ))
                })
                .collect::<Result<_>>()?;
            println!("{}\t{}", row.join("\t"), texts[i]);
        }
    } else {
        for (i, t) in texts.iter().enumerate() {
            let v: Vec<f32> = vectors.get(i)?.to_vec1()?;
            let v: Vec<String> = v.iter().map(|x| format!("{x:.6}")).collect();
            println!("{}\t[{}]", t, v.join(", "));
        }
    }
    Ok(())
}
