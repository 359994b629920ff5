//! `quorum train`: supervised LoRA fine-tuning of a generator on Spider-format training data,
//! rendered in the prompt format it will serve. Writes a PEFT adapter directory that
//! `[[models.adapters]]` in the server's config loads.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use candle_core::{DType, Device};
use indicatif::{ProgressBar, ProgressStyle};
use quorum_models::DeviceSpec;
use quorum_server::model_source::ModelDirs;
use quorum_sql::dataset::SpiderDataset;
use quorum_sql::pipeline::PromptFormat;
use quorum_sql::prompt::PROMPT_FORMAT_VERSION;
use quorum_training::{
    ALL_PROJECTIONS, AdamWConfig, ExampleOptions, LoraDecoder, LoraSpec, LrSchedule, PromptCodec,
    SelectionAccuracy, SelectorExampleOptions, SelectorRecord, SplitCase, SplitCases, StepReport,
    TrainConfig, TrainKernels, Trainer, TrainingExample, build_examples, build_selector_examples,
    score_case, selection_accuracy, split_cases,
};
use quorum_weights::load_checkpoint;
use rand::SeedableRng;
use rand::seq::SliceRandom;

#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// The base model: a GGUF file, a Hugging Face directory or a default model's short name.
    #[arg(long, default_value = "qwen2.5-coder-0.5b")]
    pub model: String,
    /// Spider-format data directory with `train.json` and `database/`. Only train.json is
    /// read: dev questions never enter training.
    #[arg(long, env = "QUORUM_SPIDER_DIR", default_value = quorum_server::config::shipped::DEFAULT_SPIDER_DIR)]
    pub data: PathBuf,
    /// What the adapter learns: `generator` (write the gold SQL for a question) or `selector`
    /// (pick the right result group among the pipeline's candidates, from `--candidates`).
    #[arg(long, value_enum, default_value_t = TrainTask::Generator)]
    pub task: TrainTask,
    /// The prompt format the adapter will serve: rep, m_schema or simple_ddl (generators only).
    #[arg(long, default_value = "rep")]
    pub format: String,
    /// The prompt format of the examples that show only the gold query's tables
    /// (`--linked-share`), when round 2 serves the adapter in another format than round 1:
    /// `--format rep --linked-format simple_ddl` trains the default profile's two calls, the
    /// RE_p PreSQL over the whole schema and the SimpleDDL FinSQL over the linked tables.
    /// Unset: `--format`.
    #[arg(long)]
    pub linked_format: Option<String>,
    /// `--task selector`: the pipeline's answers to train.json questions, as `quorum eval
    /// --questions train.json --out FILE` writes them. Every record is checked against
    /// train.json, so dev questions cannot enter.
    #[arg(long)]
    pub candidates: Option<PathBuf>,
    /// `--task selector`: where no result group of a record is right, show the gold query as
    /// one more group and train to pick it.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub add_gold: bool,
    /// `--task selector`: examples per record (at most one per shown group), each with the
    /// right group under another label.
    #[arg(long, default_value_t = 1)]
    pub selector_orders: usize,
    /// `--task selector`: share of the records' databases held out of training. Their split
    /// votes are scored by the base model before training and by the adapter after it, and
    /// compared with the majority vote at several `selector_vote_weight`s (printed, and
    /// written to `validation.jsonl` and the adapter's card).
    #[arg(long, default_value_t = 0.0)]
    pub holdout_share: f64,
    /// Where the PEFT adapter is written (adapter_config.json, adapter_model.safetensors,
    /// quorum_adapter.json, train-log.jsonl): what a profile serves and a card documents.
    #[arg(long)]
    pub out: PathBuf,
    /// Where the resumable state is kept (the matrices, the optimizer's moments, the step):
    /// training state, never served, so never inside `--out`, where it would be copied and
    /// committed with the adapter. Default: `$XDG_CACHE_HOME/quorum/train-state/<--out as one
    /// name>` (`~/.cache` without `XDG_CACHE_HOME`).
    #[arg(long)]
    pub state: Option<PathBuf>,
    #[arg(long, default_value_t = 16)]
    pub rank: usize,
    #[arg(long, default_value_t = 32.0)]
    pub alpha: f64,
    #[arg(long, default_value_t = 0.05)]
    pub dropout: f32,
    /// Projections to adapt, comma-separated (default: all seven).
    #[arg(long, value_delimiter = ',')]
    pub targets: Option<Vec<String>>,
    /// Peak learning rate.
    #[arg(long, default_value_t = 2e-4)]
    pub lr: f64,
    #[arg(long, default_value_t = 10)]
    pub warmup_steps: u64,
    /// Optimizer steps.
    #[arg(long, default_value_t = 100)]
    pub steps: u64,
    /// Sequences per optimizer step.
    #[arg(long, default_value_t = 8)]
    pub grad_accumulation: usize,
    #[arg(long, default_value_t = 1.0)]
    pub max_grad_norm: f64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Longest example kept (prompt and answer, tokens). What a sequence keeps for its
    /// backward pass grows linearly with its length: the 0.5B model with one 768-token
    /// sequence peaks at 7.3 GiB resident, with a 1,024-token one at 8.9 GiB; a whole run at
    /// 768 peaked at 11.0 GiB (docs/history/2026-11-26.md).
    #[arg(long, default_value_t = 768)]
    pub max_tokens: usize,
    /// Share of examples that show only the gold query's tables, as round 2 does.
    #[arg(long, default_value_t = 0.5)]
    pub linked_share: f64,
    /// Share of the questions also trained reworded: a value the question names replaced by
    /// another of its column (in the gold query too), schema words by synonyms. 0: none.
    #[arg(long, default_value_t = 0.0)]
    pub augment_share: f64,
    /// Use at most this many train.json questions (a seeded sample).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Save a resumable checkpoint every this many steps (0: only at the end).
    #[arg(long, default_value_t = 25)]
    pub checkpoint_every: u64,
    /// Continue from the state in `--state` (same data and configuration).
    #[arg(long)]
    pub resume: bool,
    /// Start from this PEFT adapter's matrices instead of a fresh initialization (the same
    /// rank, alpha and targets): a finished adapter trained on new data, with a new optimizer
    /// and schedule. With held-out split votes, they are scored with it before training.
    #[arg(long, conflicts_with = "resume")]
    pub init_adapter: Option<PathBuf>,
    /// Stop after the first step that ends this many minutes into this run, with a checkpoint
    /// and the adapter of that step written; `--resume` goes on from there. For a run longer
    /// than the time a machine is free.
    #[arg(long)]
    pub stop_after_minutes: Option<f64>,
    /// Also write the token ids of every micro-batch, in training order, to this JSONL file
    /// (to run the same sequences through another trainer).
    #[arg(long)]
    pub write_sequences: Option<PathBuf>,
    /// The stored type of the exported adapter: f32, bf16 (half the size) or f16.
    #[arg(long, default_value = "f32")]
    pub adapter_dtype: String,
    /// Train nothing: merge the adapter already in `--out` into the base model and write a
    /// Hugging Face model directory here (safetensors, config, tokenizer) that loads without
    /// PEFT.
    #[arg(long)]
    pub export_merged: Option<PathBuf>,
    /// The stored type of the merged model: f32, bf16 or f16.
    #[arg(long, default_value = "bf16")]
    pub merged_dtype: String,
}

/// What an adapter is trained to do.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainTask {
    Generator,
    Selector,
}

/// `--state`, or the run's directory under the user's cache, named after `--out`'s absolute path
/// so that two runs never share one.
fn state_dir(args: &TrainArgs) -> Result<PathBuf> {
    if let Some(dir) = &args.state {
        return Ok(dir.clone());
    }
    let out = std::path::absolute(&args.out)
        .with_context(|| format!("resolving --out {}", args.out.display()))?;
    let name: String = out
        .to_string_lossy()
        .trim_matches('/')
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let cache = match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
        (Some(cache), _) if !cache.is_empty() => PathBuf::from(cache),
        (_, Some(home)) if !home.is_empty() => PathBuf::from(home).join(".cache"),
        _ => bail!("no --state given, and neither XDG_CACHE_HOME nor HOME says where a cache is"),
    };
    Ok(cache.join("quorum/train-state").join(name))
}

fn parse_dtype(flag: &str, value: &str) -> Result<DType> {
    quorum_models::parse_dtype(value).with_context(|| format!("--{flag}"))
}

/// `--export-merged`: the adapter in `args.out` folded into the base.
fn export_merged(dirs: &ModelDirs, args: &TrainArgs, dir: &Path) -> Result<()> {
    let dtype = parse_dtype("merged-dtype", &args.merged_dtype)?;
    let model_path = dirs.resolve(&args.model)?;
    let started = Instant::now();
    let ckpt = load_checkpoint(&model_path, &Device::Cpu, DType::F32)
        .with_context(|| format!("loading {}", model_path.display()))?;
    let adapter = quorum_weights::load_lora_adapter(&args.out, "adapter", &Device::Cpu, DType::F32)
        .with_context(|| format!("loading the adapter in {}", args.out.display()))?;
    let report = quorum_training::export_merged(&ckpt, &adapter, dir, dtype)?;
    eprintln!(
        "quorum train: {} of {} tensors merged with {} into {} in {:.1} s",
        report.merged,
        report.tensors,
        args.out.display(),
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

pub fn train(dirs: &ModelDirs, device: DeviceSpec, args: TrainArgs) -> Result<()> {
    // The hand-written training ops have CPU kernels; on a GPU the decoder runs plain candle
    // ops (more memory, the same arithmetic).
    let device = device.open()?;
    let kernels = if device.is_cpu() {
        TrainKernels::Fused
    } else {
        TrainKernels::Plain
    };
    if let Some(dir) = &args.export_merged {
        return export_merged(dirs, &args, dir);
    }
    let checkpoint_dir = state_dir(&args)?;
    if args.resume && !checkpoint_dir.is_dir() {
        bail!(
            "--resume: no training state in {} (give the run's --state)",
            checkpoint_dir.display()
        );
    }
    eprintln!(
        "quorum train: resumable state in {}",
        checkpoint_dir.display()
    );
    let format = PromptFormat::from_name(&args.format).map_err(anyhow::Error::msg)?;
    let linked_format = match &args.linked_format {
        Some(name) => PromptFormat::from_name(name).map_err(anyhow::Error::msg)?,
        None => format,
    };
    if !(0.0..=1.0).contains(&args.augment_share) {
        bail!(
            "--augment-share must be between 0 and 1, not {}",
            args.augment_share
        );
    }
    let adapter_dtype = parse_dtype("adapter-dtype", &args.adapter_dtype)?;
    let model_path = dirs.resolve(&args.model)?;
    let ckpt = load_checkpoint(&model_path, &Device::Cpu, DType::F32)
        .with_context(|| format!("loading {}", model_path.display()))?;
    let end_token = *ckpt
        .eos_token_ids
        .first()
        .context("the checkpoint names no end-of-sequence token")?;
    let dataset = SpiderDataset::new(&args.data);
    let codec = PromptCodec {
        tokenizer: &ckpt.tokenizer,
        chat_template: ckpt.chat_template.as_ref(),
        end_token,
    };
    let mut held_out = SplitCases::default();
    let (examples, stats, prompt) = match args.task {
        TrainTask::Generator => {
            let mut questions = dataset.train().context("reading train.json")?;
            if let Some(limit) = args.limit {
                let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
                questions.shuffle(&mut rng);
                questions.truncate(limit);
            }
            let options = ExampleOptions {
                format,
                linked_format,
                max_tokens: args.max_tokens,
                linked_share: args.linked_share,
                augment_share: args.augment_share,
                seed: args.seed,
            };
            let (examples, stats) = build_examples(&dataset, &questions, codec, &options)?;
            let prompt = if linked_format == format {
                format.name().to_owned()
            } else {
                // Round 1's format over the whole schema, then round 2's over the linked tables.
                format!("{}+{}", format.name(), linked_format.name())
            };
            (examples, serde_json::to_value(stats)?, prompt)
        }
        TrainTask::Selector => {
            let (examples, stats, cases) = selector_examples(&dataset, codec, &args)?;
            held_out = cases;
            (examples, stats, "selection".to_owned())
        }
    };
    eprintln!("quorum train: {} examples ({stats})", examples.len());
    let started = Instant::now();
    let model = LoraDecoder::load_with(&ckpt, &device, kernels)?;
    eprintln!(
        "quorum train: base model dequantized in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let config = TrainConfig {
        lora: LoraSpec {
            rank: args.rank,
            alpha: args.alpha,
            dropout: args.dropout,
            targets: args
                .targets
                .clone()
                .unwrap_or_else(|| ALL_PROJECTIONS.iter().map(|s| s.to_string()).collect()),
        },
        optimizer: AdamWConfig::default(),
        schedule: LrSchedule {
            peak: args.lr,
            warmup_steps: args.warmup_steps,
            total_steps: args.steps,
            final_fraction: 0.1,
        },
        grad_accumulation: args.grad_accumulation,
        max_grad_norm: args.max_grad_norm,
        seed: args.seed,
    };
    let mut trainer = if args.resume {
        Trainer::resume(&model, &examples, config.clone(), &checkpoint_dir)?
    } else {
        Trainer::new(&model, &examples, config.clone())?
    };
    if let Some(dir) = &args.init_adapter {
        trainer
            .lora()
            .load_peft(dir)
            .with_context(|| format!("starting from {}", dir.display()))?;
        eprintln!(
            "quorum train: starting from the adapter in {}",
            dir.display()
        );
    }
    let start = match &args.init_adapter {
        Some(dir) => format!("the starting adapter ({})", dir.display()),
        None => "the base model".to_owned(),
    };
    let start_scores = if held_out.cases.is_empty() {
        Vec::new()
    } else {
        eprintln!(
            "quorum train: scoring {} held-out split votes with {start}",
            held_out.cases.len()
        );
        let lora = args.init_adapter.is_some().then(|| trainer.lora());
        score_cases(&model, lora, &held_out.cases)?
    };
    eprintln!(
        "quorum train: {} trainable parameters, {} steps of {} sequences",
        trainer.lora().num_parameters(),
        args.steps,
        args.grad_accumulation
    );
    std::fs::create_dir_all(&args.out)?;
    let log_path = args.out.join("train-log.jsonl");
    if args.resume {
        set_aside_steps_after(&log_path, trainer.steps_done())?;
    }
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    let save_adapter = |trainer: &Trainer<'_>,
                        last: Option<StepReport>,
                        validation: Option<serde_json::Value>|
     -> Result<()> {
        let card = serde_json::json!({
            "base_model": args.model,
            "base_file": model_path.file_name().map(|f| f.to_string_lossy().into_owned()),
            "task": format!("{:?}", args.task).to_lowercase(),
            "prompt_format": prompt,
            "prompt_format_version": PROMPT_FORMAT_VERSION,
            "answer_prefix": (args.task == TrainTask::Generator)
                .then_some(quorum_sql::model::SQL_ANSWER_PREFIX),
            "data": "Spider train.json (Yu et al., 2018; CC BY-SA 4.0)",
            "candidates": args.candidates,
            "init_adapter": args.init_adapter,
            "examples": examples.len(),
            "example_stats": stats,
            "config": config,
            "max_tokens": args.max_tokens,
            "limit": args.limit,
            "augment_share": args.augment_share,
            "steps": trainer.steps_done(),
            "last_step": last,
            "validation": validation,
            "command": std::env::args().collect::<Vec<_>>().join(" "),
        });
        trainer
            .lora()
            .save_peft(&args.out, &args.model, &card, adapter_dtype)
            .with_context(|| format!("writing the adapter to {}", args.out.display()))
    };
    let bar = ProgressBar::new(args.steps);
    bar.set_position(trainer.steps_done());
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30} {pos}/{len} steps {msg}, {elapsed} elapsed, eta {eta}",
        )
        .expect("a valid progress template"),
    );
    if let Some(path) = &args.write_sequences {
        write_sequences(&mut trainer, args.steps, path)?;
    }
    let run_started = Instant::now();
    let (mut tokens, mut last) = (0usize, None::<StepReport>);
    while trainer.steps_done() < args.steps {
        let report = trainer.step()?;
        tokens += report.tokens;
        let tok_s = tokens as f64 / run_started.elapsed().as_secs_f64();
        let mut line = serde_json::to_value(report)?;
        line["tokens_per_s"] = serde_json::json!(tok_s);
        line["elapsed_s"] = serde_json::json!(run_started.elapsed().as_secs_f64());
        writeln!(log, "{line}")?;
        bar.set_message(format!("loss {:.3}, {:.0} tok/s", report.loss, tok_s));
        bar.inc(1);
        let every = args.checkpoint_every;
        let out_of_time = args
            .stop_after_minutes
            .is_some_and(|m| run_started.elapsed().as_secs_f64() >= m * 60.0);
        let checkpoint = every > 0 && report.step % every == 0;
        if (checkpoint || out_of_time) && report.step < args.steps {
            trainer.save(&checkpoint_dir)?;
            // The adapter as of this checkpoint, so that a long run can be evaluated (and
            // served) while it goes on; its card says which step it is.
            save_adapter(&trainer, Some(report), None)?;
        }
        last = Some(report);
        if out_of_time && report.step < args.steps {
            bar.finish();
            eprintln!(
                "quorum train: stopped after step {} of {} ({}); --resume goes on from here",
                report.step,
                args.steps,
                display_rate(tokens, run_started)
            );
            return Ok(());
        }
    }
    bar.finish();
    trainer.save(&checkpoint_dir)?;
    let validation = if held_out.cases.is_empty() {
        None
    } else {
        let trained = score_cases(&model, Some(trainer.lora()), &held_out.cases)?;
        Some(write_validation(
            &args.out,
            &held_out,
            &start,
            &start_scores,
            &trained,
        )?)
    };
    save_adapter(&trainer, last, validation)?;
    eprintln!(
        "quorum train: adapter written to {} ({})",
        args.out.display(),
        display_rate(tokens, run_started)
    );
    Ok(())
}

/// Writes the token ids of every micro-batch of the run, in training order, one JSON object
/// per line (`tokens`, `answer_start`): the input of `scripts/bench-train-torch.py`.
fn write_sequences(trainer: &mut Trainer<'_>, steps: u64, path: &Path) -> Result<()> {
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    let micro_batches = steps * trainer.config().grad_accumulation as u64;
    for index in 0..micro_batches {
        let example = trainer.example_at(index);
        let line = serde_json::json!({
            "tokens": example.tokens,
            "answer_start": example.answer_start,
        });
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

fn display_rate(tokens: usize, since: Instant) -> String {
    let s = since.elapsed().as_secs_f64();
    format!(
        "{tokens} tokens in {s:.0} s, {:.1} tok/s",
        tokens as f64 / s
    )
}

/// The vote weights the held-out split votes are scored at.
const VALIDATION_WEIGHTS: [f32; 7] = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 4.0];

/// Each held-out split vote's label log-probabilities, with `lora` or the bare base.
fn score_cases(
    model: &LoraDecoder,
    lora: Option<&quorum_training::LoraParams>,
    cases: &[SplitCase],
) -> Result<Vec<Vec<f32>>> {
    let bar = ProgressBar::new(cases.len() as u64);
    let scores = cases
        .iter()
        .map(|case| {
            let scores = score_case(model, lora, case);
            bar.inc(1);
            scores
        })
        .collect::<Result<Vec<_>, _>>()?;
    bar.finish_and_clear();
    Ok(scores)
}

/// Writes `validation.jsonl` (one line per held-out split vote) and prints how the run's
/// starting point (`start`: the base model, or the adapter it started from) and the trained
/// adapter do against the majority vote; returns the summary for the card.
fn write_validation(
    out: &Path,
    held_out: &SplitCases,
    start: &str,
    at_start: &[Vec<f32>],
    trained: &[Vec<f32>],
) -> Result<serde_json::Value> {
    let cases = &held_out.cases;
    let path = out.join("validation.jsonl");
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?,
    );
    for ((case, at_start), trained) in cases.iter().zip(at_start).zip(trained) {
        let line = serde_json::json!({
            "db_id": case.db_id,
            "question": case.question,
            "right": case.right,
            "votes": case.votes,
            "start_logprobs": at_start,
            "logprobs": trained,
        });
        writeln!(file, "{line}")?;
    }
    file.flush()?;
    let at_start = selection_accuracy(cases, at_start, &VALIDATION_WEIGHTS);
    let trained = selection_accuracy(cases, trained, &VALIDATION_WEIGHTS);
    let show = |name: &str, acc: &SelectionAccuracy| {
        let weighed: Vec<String> = acc
            .weighed
            .iter()
            .map(|(w, right)| format!("{w}: {right}"))
            .collect();
        eprintln!(
            "quorum train: held-out split votes, {name}: {} cases, {} with a right group; \
             majority right {}; right by vote weight {}",
            acc.cases,
            acc.reachable,
            acc.majority,
            weighed.join(", ")
        );
    };
    show(start, &at_start);
    show("adapter", &trained);
    Ok(serde_json::json!({
        "split_records": held_out.split_records,
        "not_judged": held_out.unjudged,
        "fewer_than_two_groups": held_out.too_few_groups,
        "start": start,
        "at_start": at_start,
        "adapter": trained,
    }))
}

/// `--task selector`: the selector's examples from the pipeline's answers in `--candidates`,
/// and the split votes of the held-out databases' records.
fn selector_examples(
    dataset: &SpiderDataset,
    codec: PromptCodec<'_>,
    args: &TrainArgs,
) -> Result<(Vec<TrainingExample>, serde_json::Value, SplitCases)> {
    let path = args.candidates.as_ref().context(
        "--task selector needs --candidates (a `quorum eval --questions train.json` output)",
    )?;
    let train = dataset.train().context("reading train.json")?;
    let mut records = read_selector_records(path, &train)?;
    if let Some(limit) = args.limit {
        let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
        records.shuffle(&mut rng);
        records.truncate(limit);
    }
    if !(0.0..1.0).contains(&args.holdout_share) {
        bail!("--holdout-share must be at least 0 and below 1");
    }
    let held_out_dbs = held_out_databases(&records, args.holdout_share, args.seed);
    let (held_out, records): (Vec<SelectorRecord>, Vec<SelectorRecord>) = records
        .into_iter()
        .partition(|r| held_out_dbs.contains(&r.db_id));
    let defaults = quorum_sql::pipeline::PipelineConfig::new(Vec::new()).selector;
    let split = split_cases(
        dataset,
        &held_out,
        codec,
        defaults.max_groups,
        defaults.preview_rows,
    )?;
    if !held_out.is_empty() {
        eprintln!(
            "quorum train: {} databases held out ({} records, {} split votes: {} to score, \
             {} not judged because the database or the gold query failed, {} with fewer than \
             two groups that run)",
            held_out_dbs.len(),
            held_out.len(),
            split.split_records,
            split.cases.len(),
            split.unjudged,
            split.too_few_groups
        );
    }
    let options = SelectorExampleOptions {
        max_groups: defaults.max_groups,
        preview_rows: defaults.preview_rows,
        max_tokens: args.max_tokens,
        add_gold: args.add_gold,
        orders: args.selector_orders,
        seed: args.seed,
    };
    let (examples, stats) = build_selector_examples(dataset, &records, codec, &options)?;
    Ok((examples, serde_json::to_value(stats)?, split))
}

/// A seeded sample of the records' databases, `share` of them (rounded), held out of training.
fn held_out_databases(
    records: &[SelectorRecord],
    share: f64,
    seed: u64,
) -> std::collections::BTreeSet<String> {
    let mut dbs: Vec<&str> = records.iter().map(|r| r.db_id.as_str()).collect();
    dbs.sort_unstable();
    dbs.dedup();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    dbs.shuffle(&mut rng);
    let n = (dbs.len() as f64 * share).round() as usize;
    dbs.into_iter().take(n).map(str::to_owned).collect()
}

/// One line of a `quorum eval` output, the parts the selector learns from.
#[derive(serde::Deserialize)]
struct EvalLine {
    index: usize,
    db_id: String,
    question: String,
    gold: String,
    #[serde(default)]
    linked_tables: Option<Vec<String>>,
    /// `None` for a question the server did not answer (its `votes` then hold only the
    /// `rpc_error`): there is nothing to learn from it.
    #[serde(default)]
    candidates: Option<Vec<EvalCandidate>>,
    #[serde(default)]
    votes: Option<EvalVotes>,
}

#[derive(serde::Deserialize)]
struct EvalCandidate {
    id: usize,
    sql: String,
}

#[derive(serde::Deserialize)]
struct EvalVotes {
    /// Absent only beside an `rpc_error`, on a question that was not answered.
    #[serde(default)]
    clusters: Option<Vec<Vec<usize>>>,
    #[serde(default)]
    split: bool,
}

/// The records of an eval output over train.json; a line whose question is not train.json's
/// question at that index is refused, so no dev question can be trained on. Questions the
/// server did not answer (a deadline, a cancelled call) are left out, and counted.
fn read_selector_records(
    path: &Path,
    train: &[quorum_sql::dataset::Example],
) -> Result<Vec<SelectorRecord>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut records = Vec::new();
    let mut unanswered = 0;
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let at = || format!("{} line {}", path.display(), n + 1);
        let line: EvalLine = serde_json::from_str(line).with_context(at)?;
        let source = train.get(line.index);
        if source.is_none_or(|q| q.question != line.question || q.db_id != line.db_id) {
            bail!(
                "{}: question {} is not train.json's question {}: selector data must come \
                 from `quorum eval --questions train.json`",
                at(),
                line.index,
                line.index
            );
        }
        let Some(candidates) = &line.candidates else {
            unanswered += 1;
            continue;
        };
        let sql_of = |id: usize| {
            candidates
                .iter()
                .find(|c| c.id == id)
                .map(|c| c.sql.clone())
                .with_context(|| {
                    format!("{}: the vote names candidate {id}, which is missing", at())
                })
        };
        let (clusters, split): (&[Vec<usize>], bool) = match &line.votes {
            None => (&[], false),
            Some(v) => (
                v.clusters.as_deref().with_context(|| {
                    format!("{}: an answered question's vote has no clusters", at())
                })?,
                v.split,
            ),
        };
        let groups = clusters
            .iter()
            .filter_map(|c| c.first().copied())
            .map(sql_of)
            .collect::<Result<Vec<_>>>()?;
        let votes = clusters.iter().map(Vec::len).collect();
        records.push(SelectorRecord {
            db_id: line.db_id,
            question: line.question,
            gold: line.gold,
            linked_tables: line.linked_tables.unwrap_or_default(),
            groups,
            votes,
            split,
        });
    }
    if unanswered > 0 {
        eprintln!(
            "quorum train: {unanswered} questions of {} were not answered (no candidates); \
             left out",
            path.display()
        );
    }
    Ok(records)
}

/// On a resumed run: the log's lines for steps after `steps_done` (run after the checkpoint
/// and lost with the process) move to `train-log.superseded.jsonl`, where they stay to be
/// compared with the same steps run again.
fn set_aside_steps_after(log_path: &Path, steps_done: u64) -> Result<()> {
    let text = match std::fs::read_to_string(log_path) {
        Ok(text) => text,
        // A run killed before its first step wrote no log.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", log_path.display())),
    };
    let (mut kept, mut superseded) = (String::new(), String::new());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let step = serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v["step"].as_u64());
        let target = if step.is_some_and(|s| s > steps_done) {
            &mut superseded
        } else {
            &mut kept
        };
        target.push_str(line);
        target.push('\n');
    }
    if superseded.is_empty() {
        return Ok(());
    }
    let aside = log_path.with_file_name("train-log.superseded.jsonl");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&aside)
        .with_context(|| format!("opening {}", aside.display()))?;
    file.write_all(superseded.as_bytes())?;
    std::fs::write(log_path, kept).with_context(|| format!("rewriting {}", log_path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quorum_sql::dataset::Example;

    #[test]
    fn a_resumed_log_sets_aside_the_steps_run_again() {
        let dir = std::env::temp_dir().join(format!("quorum-train-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("train-log.jsonl");
        let lines: Vec<String> = (1..=7)
            .map(|s| format!("{{\"step\":{s},\"loss\":0.{s}}}"))
            .collect();
        std::fs::write(&log, lines.join("\n") + "\n").unwrap();
        super::set_aside_steps_after(&log, 5).unwrap();
        let kept = std::fs::read_to_string(&log).unwrap();
        let aside = std::fs::read_to_string(dir.join("train-log.superseded.jsonl")).unwrap();
        assert_eq!(kept, lines[..5].join("\n") + "\n");
        assert_eq!(aside, lines[5..].join("\n") + "\n");
        // Nothing after the checkpoint: nothing moves.
        super::set_aside_steps_after(&log, 5).unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), kept);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn train_question(db_id: &str, question: &str) -> Example {
        Example {
            db_id: db_id.into(),
            question: question.into(),
            query: "SELECT 1".into(),
            evidence: None,
            alternatives: Vec::new(),
            category: None,
        }
    }

    fn line(index: usize, db_id: &str, question: &str) -> String {
        serde_json::json!({
            "index": index,
            "db_id": db_id,
            "question": question,
            "gold": "SELECT 1",
            "linked_tables": ["t"],
            "candidates": [
                {"id": 0, "sql": "SELECT a FROM t"},
                {"id": 1, "sql": "SELECT b FROM t"},
                {"id": 2, "sql": "SELECT a FROM t "},
            ],
            "votes": {"clusters": [[0, 2], [1]], "split": true},
        })
        .to_string()
    }

    #[test]
    fn selector_records_take_each_groups_first_sql_and_refuse_questions_not_in_train() {
        let train = vec![train_question("a", "q0"), train_question("b", "q1")];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eval.jsonl");
        // A question the server did not answer, as `quorum eval` records it: left out.
        let unanswered = serde_json::json!({
            "index": 0, "db_id": "a", "question": "q0", "gold": "SELECT 1",
            "linked_tables": [], "candidates": null,
            "votes": {"rpc_error": "DeadlineExceeded: deadline exceeded"},
        });
        std::fs::write(
            &path,
            format!(
                "{}\n\n{}\n{unanswered}\n",
                line(1, "b", "q1"),
                line(0, "a", "q0")
            ),
        )
        .unwrap();
        let records = read_selector_records(&path, &train).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].db_id, "b");
        assert_eq!(records[0].groups, ["SELECT a FROM t", "SELECT b FROM t"]);
        assert_eq!(records[0].linked_tables, ["t"]);
        assert_eq!(
            (records[0].votes.as_slice(), records[0].split),
            ([2, 1].as_slice(), true)
        );
        // A dev question at an index train.json has for another question.
        std::fs::write(&path, line(0, "a", "How many singers do we have?")).unwrap();
        let err = read_selector_records(&path, &train)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not train.json's question 0"), "{err}");
        std::fs::write(&path, line(7, "a", "q0")).unwrap();
        assert!(read_selector_records(&path, &train).is_err());
        // An answered question whose vote lost its clusters is refused, not read as no groups.
        let mut broken: serde_json::Value = serde_json::from_str(&line(0, "a", "q0")).unwrap();
        broken["votes"] = serde_json::json!({"split": false});
        std::fs::write(&path, broken.to_string()).unwrap();
        let err = format!("{:#}", read_selector_records(&path, &train).unwrap_err());
        assert!(err.contains("has no clusters"), "{err}");
    }
}
