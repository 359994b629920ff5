//! `quorum`: the command-line entry point.

mod model_source;

use std::io::Write;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use quorum_models::{
    BertEmbedder, DecoderModel, MatmulPolicy, cosine, greedy_generate, parse_device,
};
use quorum_weights::{ChatMessage, load_checkpoint};

use crate::model_source::ModelDirs;

#[derive(Parser, Debug)]
#[command(name = "quorum", version, about = "Text-to-SQL inference server")]
struct Cli {
    /// Device to run on: cpu, cuda or cuda:N.
    #[arg(long, global = true, default_value = "cpu", env = "QUORUM_DEVICE")]
    device: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Greedy completion of a prompt by a decoder model; prints the completion.
    Generate {
        /// A GGUF file, a Hugging Face directory, a hub id in the local cache, or a default
        /// model's short name (qwen2.5-coder-0.5b, smollm2-135m, qwen2.5-coder-1.5b).
        #[arg(long, default_value = "qwen2.5-coder-0.5b")]
        model: String,
        #[arg(long)]
        prompt: String,
        /// Wrap the prompt as one user message in the model's chat template.
        #[arg(long)]
        chat: bool,
        #[arg(long, default_value_t = 128)]
        max_tokens: usize,
        /// Use only candle's quantized matmul (no int8 prefill GEMM); results are identical,
        /// prefill is slower. For comparisons.
        #[arg(long, default_value_t = false)]
        no_int8_prefill: bool,
        /// Print prefill and decode speed to stderr.
        #[arg(long)]
        stats: bool,
    },
    /// Sentence embeddings: prints each vector, or with --similarity the cosine matrix.
    Embed {
        #[arg(long, default_value = "all-minilm-l6-v2")]
        model: String,
        #[arg(long)]
        similarity: bool,
        #[arg(required = true)]
        texts: Vec<String>,
    },
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The chain of causes, without a backtrace: this is for the person at the terminal.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let dirs = ModelDirs::from_env();
    match cli.command {
        Command::Generate {
            model,
            prompt,
            chat,
            max_tokens,
            no_int8_prefill,
            stats,
        } => {
            let args = GenerateArgs {
                model,
                prompt,
                chat,
                max_tokens,
                no_int8_prefill,
                stats,
            };
            generate(&dirs, &cli.device, &args)
        }
        Command::Embed {
            model,
            similarity,
            texts,
        } => embed(&dirs, &cli.device, &model, similarity, &texts),
    }
}

struct GenerateArgs {
    model: String,
    prompt: String,
    chat: bool,
    max_tokens: usize,
    no_int8_prefill: bool,
    stats: bool,
}

fn generate(dirs: &ModelDirs, device: &str, args: &GenerateArgs) -> Result<()> {
    let device = parse_device(device)?;
    let path = dirs.resolve(&args.model)?;
    let ckpt = load_checkpoint(&path, &device, candle_core::DType::F32)
        .with_context(|| format!("loading {}", path.display()))?;
    let policy = if args.no_int8_prefill {
        MatmulPolicy::QuantizedOnly
    } else {
        MatmulPolicy::Int8Prefill { min_rows: 2 }
    };
    let model = DecoderModel::load(&ckpt, &device, policy)?;
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
            if let Ok(text) = ckpt.tokenizer.decode(&generated, true) {
                if text.len() > printed && !text.ends_with('\u{fffd}') {
                    let _ = stdout.write_all(text[printed..].as_bytes());
                    let _ = stdout.flush();
                    printed = text.len();
                }
            }
        },
    )?;
    let text = ckpt
        .tokenizer
        .decode(&generated, true)
        .map_err(|e| anyhow::anyhow!("decoding: {e}"))?;
    if text.len() > printed {
        stdout.write_all(text[printed..].as_bytes())?;
    }
    writeln!(stdout)?;
    if args.stats {
        eprintln!(
            "prompt {} tokens, prefill {:.1} tok/s; {} new tokens, decode {:.1} tok/s",
            prompt_ids.len(),
            prompt_ids.len() as f64 / out.prefill_secs,
            out.tokens.len(),
            out.tokens.len().saturating_sub(1) as f64 / out.decode_secs.max(1e-9),
        );
    }
    Ok(())
}

fn embed(
    dirs: &ModelDirs,
    device: &str,
    model: &str,
    similarity: bool,
    texts: &[String],
) -> Result<()> {
    let device = parse_device(device)?;
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
