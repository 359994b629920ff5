//! `quorum`: the command-line entry point.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use quorum_models::{CpuPath, DeviceSpec, align_candle_with, resolve_cpu_path};

mod cli;

use cli::local_model::{
    GenerateArgs, embed, generate, generate_policy, synth_adapter, synth_checkpoint,
};
use cli::serve::{HealthArgs, ServeArgs, health, serve};
use cli::{
    adapter, ask, engine_generate, eval, grammar_coverage, kernel_check, mcp, mysql_load, pg_load,
    reword, subtask, token, train,
};
use quorum_server::model_source::ModelDirs;

#[derive(Parser, Debug)]
#[command(name = "quorum", version, about = "Text-to-SQL inference server")]
struct Cli {
    /// Device to run on: cpu, cuda or cuda:N (default cpu; for `serve`, the config's).
    #[arg(long, global = true, env = "QUORUM_DEVICE")]
    device: Option<DeviceSpec>,
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
    Link(subtask::LinkArgs),
    /// Fixes a failing or wrong SQL, round by round (Text2Sql.DebugStream).
    Debug(subtask::DebugArgs),
    /// Rewrites a SQL to run faster, measured on the database (Text2Sql.OptimizeStream).
    Optimize(subtask::OptimizeArgs),
    /// Says in words what a SQL asks, and checks it against a question (Text2Sql.Explain).
    Explain(subtask::ExplainArgs),
    /// Lists, loads or unloads a running server's LoRA adapters (Inference.LoadAdapter /
    /// UnloadAdapter; needs the server's auth token).
    Adapter(adapter::AdapterArgs),
    /// The MCP server over stdio, for desktop assistants: tools that answer through a running
    /// server (`--server`, `--token`).
    Mcp(mcp::McpArgs),
    /// Makes tokens for a tokens file (`token new --name N --databases 'a,b_*' --rights ask`).
    Token(token::TokenArgs),
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
        #[arg(long, default_value_t = quorum_server::config::resolved::DEFAULT_KV_CACHE_MIB)]
        kv_cache_mib: u64,
        /// With --engine-copies: a PEFT adapter directory (repeatable); copies take no adapter
        /// and each adapter in turn, and each copy must decode what its adapter decodes alone.
        #[arg(long = "adapter")]
        adapters: Vec<PathBuf>,
        /// With --engine-copies: every other copy samples (temperature 0.8, top-p 0.9, one seed
        /// for all of them) while the others decode greedily, so each step mixes rows whose
        /// arg-max is taken where the logits are with rows sampled on the host; each copy must
        /// decode what its kind decodes alone.
        #[arg(long)]
        sampled_copies: bool,
        /// With --engine-copies on a CUDA device: the engine's batch-invariant mode (a copy's
        /// tokens do not depend on how many run beside it; dense weights only).
        #[arg(long)]
        batch_invariant: bool,
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
    /// Writes a PEFT LoRA adapter for a synthetic checkpoint's architecture: every projection of
    /// every layer, seeded random values; for multi-adapter checks where real adapters of that
    /// model do not exist.
    SynthAdapter {
        /// The architecture, as for synth-checkpoint.
        #[arg(long)]
        arch: String,
        /// Directory to write (created if missing).
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 16)]
        rank: usize,
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
    /// Runs Quorum's CUDA kernels on a GPU (--device cuda:N) against their host references,
    /// every kernel in f32 and bf16; exits non-zero if any differs.
    KernelCheck(kernel_check::KernelCheckArgs),
    /// Copies Spider-format SQLite databases into a PostgreSQL server, one schema per id.
    PgLoad(Box<pg_load::PgLoadArgs>),
    /// Copies Spider-format SQLite databases into a MySQL or MariaDB server, one database per id.
    MysqlLoad(Box<mysql_load::MySqlLoadArgs>),
    /// Writes Spider-format SQLite databases as files (one Parquet or CSV file a table, one
    /// folder per id), for `quorum eval --duckdb`.
    #[cfg(feature = "duckdb")]
    FilesWrite(Box<cli::files_write::FilesWriteArgs>),
    /// Writes a question file with its questions reworded as the training data's reworded share
    /// is (other values, schema words by synonyms), for `quorum eval --questions`.
    Reword(Box<reword::RewordArgs>),
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
    let device = cli.device.unwrap_or_default();
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
            adapters,
            batch_invariant,
            sampled_copies,
        } => {
            let dtype = quorum_models::parse_dtype(&dtype).context("--dtype")?;
            if let Some(copies) = &engine_copies {
                anyhow::ensure!(
                    logits_out.is_none(),
                    "--logits-out comes from the greedy loop, not --engine-copies"
                );
                let device = device.open()?;
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
                    adapters: &adapters,
                    batch_invariant,
                    sampled_copies,
                });
            }
            anyhow::ensure!(
                !batch_invariant,
                "--batch-invariant is the engine's mode: give --engine-copies too"
            );
            anyhow::ensure!(
                adapters.is_empty(),
                "--adapter runs copies through the engine: give --engine-copies too"
            );
            anyhow::ensure!(
                !sampled_copies,
                "--sampled-copies runs copies through the engine: give --engine-copies too"
            );
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
            generate(&dirs, device, &args)
        }
        Command::SynthCheckpoint {
            arch,
            out,
            dtype,
            seed,
        } => synth_checkpoint(&arch, &out, &dtype, seed),
        Command::SynthAdapter {
            arch,
            out,
            rank,
            seed,
        } => synth_adapter(&arch, &out, rank, seed),
        Command::Embed {
            model,
            similarity,
            texts,
        } => embed(&dirs, device, &model, similarity, &texts),
        Command::Serve(args) => serve(&dirs, cli.device, cpu_path, args),
        Command::Eval(args) => eval::eval(&dirs, cli.device, cpu_path, *args),
        Command::Train(args) => train::train(&dirs, device, *args),
        Command::PgLoad(args) => pg_load::pg_load(*args),
        Command::MysqlLoad(args) => mysql_load::mysql_load(*args),
        #[cfg(feature = "duckdb")]
        Command::FilesWrite(args) => cli::files_write::files_write(*args),
        Command::Reword(args) => reword::reword_questions(*args),
        Command::KernelCheck(args) => kernel_check::kernel_check(device, &args),
        Command::GrammarCoverage(args) => grammar_coverage::grammar_coverage(&dirs, *args),
        Command::Ask(args) => client_runtime()?.block_on(ask::ask(args)),
        Command::Adapter(args) => client_runtime()?.block_on(adapter::adapter(args)),
        Command::Link(args) => client_runtime()?.block_on(subtask::link(args)),
        Command::Debug(args) => client_runtime()?.block_on(subtask::debug(args)),
        Command::Optimize(args) => client_runtime()?.block_on(subtask::optimize(args)),
        Command::Explain(args) => client_runtime()?.block_on(subtask::explain(args)),
        Command::Health(args) => health(args),
        Command::Token(args) => token::token(args),
        Command::Mcp(args) => client_runtime()?.block_on(mcp::mcp(args)),
    }
}

fn client_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
}
