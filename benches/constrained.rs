//! The cost of schema-constrained decoding: 16 text-to-SQL requests decoded together, each
//! under its database's grammar, against the same 16 decoded freely, in interleaved rounds on
//! one engine (prefix cache warm, so the rounds time decoding rather than prefill).
//!
//! `cargo run -p quorum-benches --bin quorum-bench-constrained -- --rounds 3`

use std::time::Instant;

use anyhow::{Context, Result};
use candle_core::Device;
use clap::Parser;
use quorum_benches::{decode_phase, finish};
use quorum_engine::{
    EngineConfig, EngineHandle, FinishEvent, GenerateRequest, Grammar, GrammarSpec, SamplingParams,
    spawn_engine,
};
use quorum_models::MatmulPolicy;
use quorum_sql::dataset::{SpiderDataset, database_path};
use quorum_sql::grammar::schema_grammar;
use quorum_sql::model::SQL_ANSWER_PREFIX;
use quorum_sql::pipeline::{PromptFormat, generation_prompt};
use quorum_sql::prompt::RepOptions;
use quorum_sql::schema::{IntrospectOptions, Schema};
use quorum_tests::{QWEN_05B, model_path, spider_dir};

#[derive(Parser, Debug)]
struct Args {
    /// Requests decoded together: the first N questions of the dev100 slice.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    #[arg(long, default_value_t = 64)]
    new_tokens: u32,
    /// Rounds of (free, constrained), alternating which goes first.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// CPU kernel path: auto, avx512vnni, avxvnni, avx2 or candle.
    #[arg(long, default_value = "auto")]
    cpu_path: String,
}

struct Ask {
    tokens: Vec<u32>,
    grammar: Grammar,
}

fn asks(h: &EngineHandle, n: usize) -> Result<Vec<Ask>> {
    let data = SpiderDataset::new(spider_dir());
    let dev = data.dev()?;
    let slices = data.slices()?;
    let dev100 = slices.get("dev100").context("no dev100 slice")?;
    dev100
        .iter()
        .take(n)
        .map(|&i| {
            let ex = &dev[i];
            let path = database_path(&data.database_dir(), &ex.db_id);
            let schema = Schema::from_sqlite(&path, &ex.db_id, IntrospectOptions::default())?;
            let prompt = generation_prompt(
                PromptFormat::SimpleDdl,
                RepOptions::default(),
                &schema,
                &ex.question,
                None,
            );
            let text = quorum_weights::render_turn(
                h.chat_template(),
                None,
                &prompt.text,
                Some(SQL_ANSWER_PREFIX),
            )?;
            let tokens = h
                .tokenizer()
                .encode(text.as_str(), false)
                .map_err(anyhow::Error::msg)?
                .get_ids()
                .to_vec();
            let grammar = Grammar::new(GrammarSpec::Lark(schema_grammar(&schema, schema.dialect)))
                .after(SQL_ANSWER_PREFIX);
            Ok(Ask { tokens, grammar })
        })
        .collect()
}

/// Decode-phase tokens per second of one batch of requests, and the tokens decoded.
fn run(h: &EngineHandle, asks: &[Ask], new_tokens: u32, constrained: bool) -> Result<(f64, usize)> {
    let t = Instant::now();
    let rxs: Vec<_> = asks
        .iter()
        .map(|a| {
            h.submit(GenerateRequest {
                draft_hint: Vec::new(),
                keep_prefix: None,
                prompt_tokens: a.tokens.clone(),
                params: SamplingParams {
                    max_new_tokens: new_tokens,
                    stop_strings: vec!["```".into()],
                    ..SamplingParams::greedy()
                },
                adapter: None,
                deadline: None,
                grammar: constrained.then(|| a.grammar.clone()),
            })
        })
        .collect::<Result<_, _>>()?;
    let fins: Vec<FinishEvent> = rxs.into_iter().map(finish).collect();
    Ok(decode_phase(&fins, t.elapsed().as_secs_f64()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<()> {
    // SAFETY: first statement of `main`; no other thread exists yet.
    unsafe { quorum_models::limit_candle_spinning() };
    let args = Args::parse();
    // SAFETY: no other thread has started.
    let cpu_path = unsafe { quorum_tests::bench_cpu_path(&args.cpu_path)? };
    let config = EngineConfig {
        matmul_policy: MatmulPolicy::engine(cpu_path),
        ..EngineConfig::cpu_default("qwen")
    };
    let h = spawn_engine(config, &model_path(QWEN_05B), &Device::Cpu)?;
    let asks = asks(&h, args.concurrency)?;
    // Warm-up: fills the prefix cache with every prompt and builds the grammar compiler and
    // its cache, so the timed rounds compare decoding only.
    run(&h, &asks, 2, true)?;
    let (mut free, mut constrained) = (Vec::new(), Vec::new());
    for round in 0..args.rounds {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for c in order {
            let (rate, decoded) = run(&h, &asks, args.new_tokens, c)?;
            println!(
                "{}",
                serde_json::json!({"round": round, "constrained": c, "decode_tok_s": rate, "decoded_tokens": decoded})
            );
            if c {
                constrained.push(rate);
            } else {
                free.push(rate);
            }
        }
    }
    let (f, c) = (median(free), median(constrained));
    println!(
        "{}",
        serde_json::json!({
            "concurrency": args.concurrency, "cpu_path": cpu_path.name(),
            "free_decode_tok_s_median": f, "constrained_decode_tok_s_median": c,
            "constrained_over_free": c / f,
        })
    );
    Ok(())
}
