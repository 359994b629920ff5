//! `quorum`: the command-line entry point.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use quorum_models::{
    BertEmbedder, CpuPath, DecoderModel, MatmulPolicy, align_candle_with, cosine, greedy_generate,
    parse_device, resolve_cpu_path,
};
use quorum_weights::{ChatMessage, load_checkpoint};

mod adapter_cli;
mod ask;
mod engine_generate;
mod eval;
mod grammar_coverage;
mod pg_load;
mod subtask_cli;
mod train;

use quorum_server::model_source::ModelDirs;
use quorum_server::{Overrides, RawConfig};
use tonic_health::pb::health_check_response::ServingStatus;

#[derive(Parser, Debug)]
#[command(name = "quorum", version, about = "Text-to-SQL inference server")]
struct Cli {
    /// Device to run on: cpu, cuda or cuda:N (default cpu; for `serve`, the config's).
    #[arg(long, global = true, env = "QUORUM_DEVICE")]
    device: Option<String>,
    /// CPU kernel path: auto (the fastest this CPU supports), avx512vnni, avxvnni, avx2 or
    /// candle (candle's own kernels for every matmul). Forcing a slower path is for tests and
    /// benchmarks; candle's kernels are switched to match.
    #[arg(long, global = true, env = "QUORUM_CPU_PATH", default_value = "auto")]
    cpu_path: String,
    /// Download a hub model (`org/name`, or `org/name:FILE` for one GGUF file) that is missing
    /// from the hub cache, from HF_ENDPOINT (default https://huggingface.co), sending HF_TOKEN
    /// when set. Without it, models are resolved offline and nothing is downloaded.
    #[arg(
        long,
        global = true,
        env = "QUORUM_DOWNLOAD",
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    download: bool,
    /// The directory holding the shipped LoRA adapters the default configuration serves (also
    /// QUORUM_ADAPTERS_DIR). Unset: `$QUORUM_HOME/adapters`, then `share/quorum/adapters` beside
    /// the binary's directory, then the checkout the binary was built from.
    #[arg(long, global = true)]
    adapters_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Ask a running server one question (Text2Sql.Generate); waits until it is ready.
    Ask(ask::AskArgs),
    /// Links a question to the tables a query needs (Text2Sql.LinkSchema).
    Link(subtask_cli::LinkArgs),
    /// Fixes a failing or wrong SQL, round by round (Text2Sql.DebugStream).
    Debug(subtask_cli::DebugArgs),
    /// Rewrites a SQL to run faster, measured on the database (Text2Sql.OptimizeStream).
    Optimize(subtask_cli::OptimizeArgs),
    /// Says in words what a SQL asks, and checks it against a question (Text2Sql.Explain).
    Explain(subtask_cli::ExplainArgs),
    /// Lists, loads or unloads a running server's LoRA adapters (Inference.LoadAdapter /
    /// UnloadAdapter; needs the server's auth token).
    Adapter(adapter_cli::AdapterArgs),
    /// Checks a running server's gRPC health once: exits 0 when SERVING, 1 otherwise (the
    /// container HEALTHCHECK).
    Health(HealthArgs),
    /// Greedy completion of a prompt by a decoder model; prints the completion.
    Generate {
        /// A GGUF file, a Hugging Face directory, a hub id (`org/name`, or `org/name:FILE` for
        /// one GGUF file of a repository) in the local hub cache (or downloaded with
        /// --download), or a default model's short name (qwen2.5-coder-0.5b, smollm2-135m,
        /// qwen2.5-coder-1.5b).
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
        /// Write the logits after the prompt (f32, little-endian, one per vocabulary entry) to
        /// this file: for comparing devices and kernel paths on the same checkpoint.
        #[arg(long)]
        logits_out: Option<PathBuf>,
        /// Run the prompt through the serving engine (continuous batching, paged KV cache)
        /// instead of the greedy loop, this many copies at once (`1,64`: one run of each, on
        /// the same engine): prints the first copy's completion, fails unless every copy decoded
        /// the same tokens, and with --stats gives each run's aggregate decode rate.
        #[arg(long, value_delimiter = ',')]
        engine_copies: Option<Vec<usize>>,
        /// Weights and activations: f32, or bf16/f16 on a GPU.
        #[arg(long, default_value = "f32")]
        dtype: String,
        /// The engine's KV cache with --engine-copies.
        #[arg(long, default_value_t = quorum_server::config::DEFAULT_KV_CACHE_MIB)]
        kv_cache_mib: u64,
    },
    /// Writes a Hugging Face model directory with the exact tensor shapes of a released model
    /// and seeded random values, with a byte-level tokenizer: for speed and device-agreement
    /// checks where the real weights cannot be copied.
    SynthCheckpoint {
        /// qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, qwen2.5-coder-7b or smollm2-135m.
        #[arg(long)]
        arch: String,
        /// Directory to write (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// How the weights are stored: bf16 or f32.
        #[arg(long, default_value = "bf16")]
        dtype: String,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Serves the gRPC API (Text2Sql, Inference, Databases, health, reflection) and
    /// Prometheus metrics. With no config: the default models over Spider's dev databases.
    Serve(ServeArgs),
    /// Runs a Spider-format dataset through the pipeline and scores it (EX, VA, VES, R_e/R_s,
    /// by hardness); resumable; `--compare A B` prints two runs side by side.
    Eval(Box<eval::EvalArgs>),
    /// Checks the schema grammars of constrained decoding against a dataset's gold queries
    /// (share accepted, each reject with its reason) and, with --tokenizer-of, times the masks.
    GrammarCoverage(Box<grammar_coverage::GrammarCoverageArgs>),
    /// Copies Spider-format SQLite databases into a PostgreSQL server, one schema per id.
    PgLoad(Box<pg_load::PgLoadArgs>),
    /// Fine-tunes a LoRA adapter of a generator on Spider-format training data, in the prompt
    /// format it will serve; writes a PEFT adapter directory.
    Train(Box<train::TrainArgs>),
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

/// `quorum serve` flags; each also reads an environment variable, and both win over the file.
#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// TOML configuration file (models by role, databases, pipeline, limits).
    #[arg(long, env = "QUORUM_CONFIG")]
    config: Option<PathBuf>,
    /// gRPC address (default 127.0.0.1:50051).
    #[arg(long, env = "QUORUM_LISTEN")]
    listen: Option<String>,
    /// Prometheus metrics address (default 127.0.0.1:9464; empty disables).
    #[arg(long, env = "QUORUM_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    /// Require `authorization: Bearer <token>` on the Quorum services.
    #[arg(long, env = "QUORUM_AUTH_TOKEN", hide_env_values = true)]
    auth_token: Option<String>,
    /// Directory scanned for SQLite databases (default: Spider's dev databases).
    #[arg(long, env = "QUORUM_DATABASE_DIR")]
    database_dir: Option<PathBuf>,
    /// Serve over TLS with this PEM certificate chain (with --tls-key).
    #[arg(long, env = "QUORUM_TLS_CERT")]
    tls_cert: Option<PathBuf>,
    /// The certificate's PEM private key.
    #[arg(long, env = "QUORUM_TLS_KEY")]
    tls_key: Option<PathBuf>,
}

fn main() -> std::process::ExitCode {
    // SAFETY: first statement of `main`; no other thread exists yet.
    unsafe { quorum_models::limit_candle_spinning() };
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
    let cli = Cli::parse();
    // A server logs its lifecycle (loading, ready, draining) by default; the one-shot commands
    // print their own output and log only errors unless RUST_LOG asks for more.
    let default_level = match cli.command {
        Command::Serve(_) => tracing_subscriber::filter::LevelFilter::INFO,
        _ => tracing_subscriber::filter::LevelFilter::ERROR,
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::builder()
                .with_default_directive(default_level.into())
                .from_env_lossy(),
        )
        .with_writer(std::io::stderr)
        .init();
    let requested = match cli.cpu_path.trim() {
        "" | "auto" => None,
        name => Some(name.parse::<CpuPath>()?),
    };
    let cpu_path = resolve_cpu_path(requested)?;
    // SAFETY: no other thread has started yet (the subscriber and clap start none), and candle
    // has run no quantized matmul.
    unsafe { align_candle_with(cpu_path) };
    tracing::info!(%cpu_path, "CPU kernel path");
    let mut dirs = ModelDirs::from_env(cli.adapters_dir.clone());
    if cli.download {
        dirs.hub_download = Some(quorum_server::model_source::hub_download_from_env());
    }
    let device = cli.device.clone().unwrap_or_else(|| "cpu".to_owned());
    match cli.command {
        Command::Generate {
            model,
            prompt,
            chat,
            max_tokens,
            no_int8_prefill,
            stats,
            logits_out,
            engine_copies,
            kv_cache_mib,
            dtype,
        } => {
            let dtype = quorum_models::parse_dtype(&dtype).context("--dtype")?;
            if let Some(copies) = &engine_copies {
                anyhow::ensure!(
                    logits_out.is_none(),
                    "--logits-out comes from the greedy loop, not --engine-copies"
                );
                let device = parse_device(&device)?;
                let path = dirs.resolve(&model)?;
                return engine_generate::run(&engine_generate::EngineGenerate {
                    path: &path,
                    device: &device,
                    policy: generate_policy(no_int8_prefill, cpu_path),
                    prompt: &prompt,
                    chat,
                    max_tokens,
                    copies,
                    kv_cache_mib,
                    dtype,
                    stats,
                });
            }
            let args = GenerateArgs {
                model,
                prompt,
                chat,
                cpu_path,
                max_tokens,
                no_int8_prefill,
                stats,
                logits_out,
                dtype,
            };
            generate(&dirs, &device, &args)
        }
        Command::SynthCheckpoint {
            arch,
            out,
            dtype,
            seed,
        } => synth_checkpoint(&arch, &out, &dtype, seed),
        Command::Embed {
            model,
            similarity,
            texts,
        } => embed(&dirs, &device, &model, similarity, &texts),
        Command::Serve(args) => serve(&dirs, cli.device, cpu_path, args),
        Command::Eval(args) => eval::eval(&dirs, cli.device, cpu_path, *args),
        Command::Train(args) => train::train(&dirs, &device, *args),
        Command::PgLoad(args) => pg_load::pg_load(*args),
        Command::GrammarCoverage(args) => grammar_coverage::grammar_coverage(&dirs, *args),
        Command::Ask(args) => client_runtime()?.block_on(ask::ask(args)),
        Command::Adapter(args) => client_runtime()?.block_on(adapter_cli::adapter(args)),
        Command::Link(args) => client_runtime()?.block_on(subtask_cli::link(args)),
        Command::Debug(args) => client_runtime()?.block_on(subtask_cli::debug(args)),
        Command::Optimize(args) => client_runtime()?.block_on(subtask_cli::optimize(args)),
        Command::Explain(args) => client_runtime()?.block_on(subtask_cli::explain(args)),
        Command::Health(args) => health(args),
    }
}

fn client_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
}

#[derive(clap::Args, Debug)]
struct HealthArgs {
    /// Server address.
    #[arg(long, default_value = "http://127.0.0.1:50051", env = "QUORUM_SERVER")]
    server: String,
    /// The health entry: "" (default) is readiness, "liveness" is liveness.
    #[arg(long, default_value = "")]
    service: String,
    /// PEM certificate to trust for an https:// server.
    #[arg(long, env = "QUORUM_CA_CERT")]
    ca_cert: Option<PathBuf>,
    /// Give up (unhealthy) after this long.
    #[arg(long, default_value_t = 3.0)]
    timeout_secs: f64,
}

fn health(args: HealthArgs) -> Result<()> {
    let endpoint = quorum_server::client::endpoint(&args.server, args.ca_cert.as_deref())?;
    let timeout = Duration::try_from_secs_f64(args.timeout_secs)
        .map_err(|_| anyhow::anyhow!("--timeout-secs must be a positive number of seconds"))?;
    let status = tokio::runtime::Runtime::new()
        .context("starting the async runtime")?
        .block_on(quorum_server::client::check_once(
            endpoint,
            &args.service,
            timeout,
        ))?;
    println!("{}", status.as_str_name());
    if status != ServingStatus::Serving {
        std::process::exit(1);
    }
    Ok(())
}

fn serve(
    dirs: &ModelDirs,
    device: Option<String>,
    cpu_path: CpuPath,
    args: ServeArgs,
) -> Result<()> {
    let mut raw = match &args.config {
        Some(path) => RawConfig::from_file(path)?,
        None => RawConfig::default(),
    };
    raw.apply(Overrides {
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        auth_token: args.auth_token,
        device,
        database_dir: args.database_dir,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        cpu_path: Some(cpu_path),
    });
    let spider = std::env::var_os("QUORUM_SPIDER_DIR").map(PathBuf::from);
    let default_db_dir = quorum_server::config::default_database_dir(spider);
    let config = quorum_server::config::resolve(raw, dirs, &default_db_dir)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let mut server = quorum_server::start(config).await?;
        eprintln!("quorum: serving gRPC on {}", server.addr);
        if let Some(m) = server.metrics_addr {
            eprintln!("quorum: metrics on http://{m}/metrics");
        }
        let drain = server.shutdown_token();
        tokio::select! {
            signal = shutdown_signal() => {
                signal?;
                eprintln!("quorum: shutting down (in-flight requests finish first)");
                drain.cancel();
            }
            // The server also stops by itself when loading fails.
            result = server.stopped() => return result,
        }
        server.stopped().await
    })
}

/// SIGTERM (what orchestrators send) or ctrl-c.
async fn shutdown_signal() -> Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => Ok(()),
            r = tokio::signal::ctrl_c() => Ok(r?),
        }
    }
    #[cfg(not(unix))]
    {
        Ok(tokio::signal::ctrl_c().await?)
    }
}

struct GenerateArgs {
    model: String,
    prompt: String,
    chat: bool,
    cpu_path: CpuPath,
    max_tokens: usize,
    no_int8_prefill: bool,
    stats: bool,
    logits_out: Option<PathBuf>,
    dtype: candle_core::DType,
}

fn synth_checkpoint(arch: &str, out: &std::path::Path, dtype: &str, seed: u64) -> Result<()> {
    let arch = quorum_weights::synthetic_arch(arch)?;
    let dtype = match dtype {
        "bf16" => quorum_weights::SyntheticDtype::Bf16,
        "f32" => quorum_weights::SyntheticDtype::F32,
        other => anyhow::bail!("--dtype: `{other}` is not bf16 or f32"),
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

/// The matmul policy of `quorum generate`: the int8 GEMM from one row unless turned off.
fn generate_policy(no_int8_prefill: bool, cpu_path: CpuPath) -> MatmulPolicy {
    if no_int8_prefill {
        MatmulPolicy::QuantizedOnly
    } else {
        MatmulPolicy::Int8Prefill {
            min_rows: 1,
            path: cpu_path,
        }
    }
}

fn generate(dirs: &ModelDirs, device_name: &str, args: &GenerateArgs) -> Result<()> {
    let device = parse_device(device_name)?;
    let path = dirs.resolve(&args.model)?;
    quorum_models::check_dtype(&device, args.dtype)?;
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
            _ if !device.is_cpu() => format!("device {device_name} ({})", args.dtype.as_str()),
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
