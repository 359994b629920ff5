//! `quorum generate --engine-copies N[,M...]`: the prompt through the serving engine instead of
//! the greedy loop, N copies at once (then M, on the same loaded engine). Every copy must decode
//! the same tokens (they share one prompt), and the first copy's completion is printed like the
//! greedy loop's, so the two can be compared on any device: on a GPU this is the check that the
//! engine's KV blocks and batched attention on the device agree with the CPU, and with
//! `--stats` it gives the engine's aggregate decode rate at N streams without a gRPC server in
//! the way. With `--adapter DIR` (repeatable) copy `i` uses adapter `i mod (adapters + 1)`, 0
//! being none; with `--sampled-copies` every other copy samples (one seed for all of them) while
//! the rest decode greedily. Each kind of copy first decodes alone, then every copy of the mixed
//! batch must decode what its kind decoded alone.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use candle_core::{DType, Device};
use quorum_engine::{
    EngineConfig, EngineEvent, GenerateRequest, SamplingParams, TokenEvent, spawn_engine,
};
use quorum_models::MatmulPolicy;
use quorum_weights::ChatMessage;

pub struct EngineGenerate<'a> {
    pub path: &'a Path,
    pub device: &'a Device,
    pub policy: MatmulPolicy,
    pub prompt: &'a str,
    pub chat: bool,
    pub max_tokens: usize,
    /// Copies per run; one run after the other on the same engine.
    pub copies: &'a [usize],
    pub kv_cache_mib: u64,
    pub dtype: DType,
    pub stats: bool,
    /// PEFT adapters the copies take in turn, after a copy with none.
    pub adapters: &'a [PathBuf],
    /// The engine's batch-invariant mode.
    pub batch_invariant: bool,
    /// Every other copy samples instead of decoding greedily.
    pub sampled_copies: bool,
}

/// The temperature, nucleus and seed of the sampling copies: enough to leave the greedy path.
const SAMPLED_TEMPERATURE: f32 = 0.8;
const SAMPLED_TOP_P: f32 = 0.9;
const SAMPLED_SEED: u64 = 1;

/// What one kind of copy asks for; copy `i` is of kind `i mod kinds.len()`.
struct Kind {
    adapter: Option<String>,
    sampled: bool,
}

/// The kinds of copies: greedy with no adapter first, then each adapter in turn, or a sampling
/// copy.
fn kinds(args: &EngineGenerate) -> Vec<Kind> {
    let plain = Kind {
        adapter: None,
        sampled: false,
    };
    let adapters = (1..=args.adapters.len()).map(|k| Kind {
        adapter: Some(format!("adapter-{k}")),
        sampled: false,
    });
    let sampled = args.sampled_copies.then_some(Kind {
        adapter: None,
        sampled: true,
    });
    std::iter::once(plain)
        .chain(adapters)
        .chain(sampled)
        .collect()
}

fn params(kind: &Kind, max_tokens: usize) -> SamplingParams {
    let greedy = SamplingParams {
        max_new_tokens: max_tokens as u32,
        ..SamplingParams::greedy()
    };
    match kind.sampled {
        false => greedy,
        true => SamplingParams {
            temperature: SAMPLED_TEMPERATURE,
            top_p: SAMPLED_TOP_P,
            seed: Some(SAMPLED_SEED),
            ..greedy
        },
    }
}

/// One copy's outcome.
struct Copy {
    tokens: Vec<u32>,
    ttft_s: f64,
    error: Option<String>,
}

pub fn run(args: &EngineGenerate) -> Result<()> {
    let most = args.copies.iter().copied().max().unwrap_or(0);
    if args.copies.contains(&0) || most == 0 {
        bail!("--engine-copies: every count must be at least 1");
    }
    if args.sampled_copies && !args.adapters.is_empty() {
        bail!("--sampled-copies and --adapter each make their own kinds of copies: give one");
    }
    let kinds = kinds(args);
    let config = EngineConfig {
        matmul_policy: args.policy,
        kv_cache_bytes: args.kv_cache_mib << 20,
        max_running_seqs: most,
        max_waiting: most,
        // Room for every copy's decode row and a prompt chunk in one step.
        max_batched_tokens: 2048.max(most),
        dtype: args.dtype,
        batch_invariant: args.batch_invariant,
        ..EngineConfig::cpu_default("generate")
    };
    let engine = spawn_engine(config, args.path, args.device)
        .with_context(|| format!("starting an engine on {}", args.path.display()))?;
    let text = if args.chat {
        let template = engine
            .chat_template()
            .context("--chat: the model has no chat template")?;
        template.render(&[ChatMessage::new("user", args.prompt)], true)?
    } else {
        args.prompt.to_owned()
    };
    let prompt_tokens = engine
        .tokenizer()
        .encode(text.as_str(), false)
        .map_err(|e| anyhow::anyhow!("tokenizing the prompt: {e}"))?
        .get_ids()
        .to_vec();
    for (k, dir) in args.adapters.iter().enumerate() {
        engine
            .load_adapter(&format!("adapter-{}", k + 1), dir)
            .with_context(|| format!("loading the adapter in {}", dir.display()))?;
    }
    if args.stats {
        warm_up(&engine, &prompt_tokens, args)?;
    }
    // What each kind of copy decodes alone, when there are several kinds; otherwise the first
    // run's first copy is the reference.
    let mut alone: Vec<Vec<u32>> = Vec::new();
    if kinds.len() > 1 {
        for kind in &kinds {
            let one = std::slice::from_ref(kind);
            let copy = run_copies(&engine, &prompt_tokens, 1, args, "", one)?;
            alone.push(copy.into_iter().next().expect("one copy").tokens);
        }
    }
    let mut first_text = None;
    let mut disagreements = Vec::new();
    for &n in args.copies {
        let copies = run_copies(&engine, &prompt_tokens, n, args, "", &kinds)?;
        let first = &copies[0];
        if first_text.is_none() {
            let text = engine
                .tokenizer()
                .decode(&first.tokens, true)
                .map_err(|e| anyhow::anyhow!("decoding: {e}"))?;
            writeln!(std::io::stdout().lock(), "{text}")?;
            first_text = Some(first.tokens.clone());
        }
        let same = copies
            .iter()
            .enumerate()
            .filter(|(i, c)| match alone.get(i % kinds.len()) {
                Some(reference) => &c.tokens == reference,
                None => Some(&c.tokens) == first_text.as_ref(),
            })
            .count();
        if same != n {
            disagreements.push(format!("{same} of {n}"));
        }
    }
    engine.shutdown();
    if !disagreements.is_empty() {
        let reference = if kinds.len() == 1 {
            "the first run's first copy"
        } else {
            "their kind of copy alone"
        };
        bail!(
            "copies decoded other tokens than {reference}: only {} did",
            disagreements.join(", ")
        );
    }
    Ok(())
}

/// Before timed runs: one copy of a prompt as long as the timed one but differing in its first
/// token (so no prefix-cache block of it is reused), a few tokens long. A process's first step
/// on a GPU also loads kernel modules and sets up the matrix library for each new shape; the
/// PyTorch baseline warms up the same way before it times. Its own line is printed too.
fn warm_up(
    engine: &quorum_engine::EngineHandle,
    prompt_tokens: &[u32],
    args: &EngineGenerate,
) -> Result<()> {
    let mut other = prompt_tokens.to_vec();
    if let Some(first) = other.first_mut() {
        let vocab = engine.tokenizer().get_vocab_size(true).max(2) as u32;
        *first = (*first + 1) % vocab;
    }
    let short = EngineGenerate {
        max_tokens: args.max_tokens.min(4),
        ..*args
    };
    let kinds = kinds(args);
    run_copies(engine, &other, 1, &short, "warm-up: ", &kinds[..1]).map(|_| ())
}

/// Submits `n` copies of the prompt at once, copy `i` of kind `i mod kinds.len()`, and waits
/// for all of them.
fn run_copies(
    engine: &quorum_engine::EngineHandle,
    prompt_tokens: &[u32],
    n: usize,
    args: &EngineGenerate,
    label: &str,
    kinds: &[Kind],
) -> Result<Vec<Copy>> {
    let eos = &engine.info().eos_token_ids;
    let start = Instant::now();
    let receivers = (0..n)
        .map(|i| {
            let kind = &kinds[i % kinds.len()];
            engine.submit(GenerateRequest {
                prompt_tokens: prompt_tokens.to_vec(),
                params: params(kind, args.max_tokens),
                adapter: kind.adapter.clone(),
                deadline: None,
                grammar: None,
                draft_hint: Vec::new(),
                keep_prefix: None,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let copies: Vec<Copy> = receivers
        .into_iter()
        .map(|mut rx| {
            let mut tokens = Vec::new();
            loop {
                match rx.blocking_recv() {
                    Some(EngineEvent::Token(TokenEvent { token_id, .. })) => {
                        if !eos.contains(&token_id) {
                            tokens.push(token_id);
                        }
                    }
                    Some(EngineEvent::Finished(f)) => {
                        return Copy {
                            tokens,
                            ttft_s: f.ttft.map_or(0.0, |t| t.as_secs_f64()),
                            error: f.error,
                        };
                    }
                    None => {
                        return Copy {
                            tokens,
                            ttft_s: 0.0,
                            error: Some("the engine dropped the request".into()),
                        };
                    }
                }
            }
        })
        .collect();
    let wall = start.elapsed().as_secs_f64();
    if let Some(e) = copies.iter().find_map(|c| c.error.as_ref()) {
        bail!("a copy failed: {e}");
    }
    if args.stats {
        // The decode phase of copies submitted together: tokens after each copy's first, over
        // the time after the last first token.
        let last_first = copies.iter().map(|c| c.ttft_s).fold(0.0, f64::max);
        let decoded: usize = copies
            .iter()
            .map(|c| c.tokens.len().saturating_sub(1))
            .sum();
        // Copies of one kind against the first copy of theirs.
        let same = copies
            .iter()
            .enumerate()
            .filter(|(i, c)| c.tokens == copies[i % kinds.len()].tokens)
            .count();
        eprintln!(
            "{label}engine on {} ({}): {n} copies, {same} decoded the same tokens; prompt {} tokens, \
             last first token at {last_first:.3} s; {decoded} tokens after the first, aggregate \
             decode {:.1} tok/s; wall {wall:.2} s",
            engine.device(),
            args.dtype.as_str(),
            prompt_tokens.len(),
            decoded as f64 / (wall - last_first).max(1e-9),
        );
    }
    Ok(copies)
}
