//! Continuous batching on Qwen2.5-Coder-0.5B: aggregate decode throughput at 16 concurrent
//! requests vs one stream, time to first token with a cached schema prefix vs cold, and 16
//! concurrent requests through the engine vs the same 16 run one after another through
//! candle-transformers' reference loop (the baseline a user would otherwise write). With
//! `--drafts`, instead: one revision-shaped request (its answer mostly repeats the query its
//! prompt quotes, which is also its hint) decoded with speculative decoding and without.
//!
//! `cargo run -p quorum-benches --bin quorum-bench-engine`

use std::time::Instant;

use anyhow::Result;
use candle_core::Device;
use clap::Parser;
use quorum_benches::{decode_phase, finish};
use quorum_engine::{
    EngineConfig, EngineHandle, FinishEvent, GenerateRequest, SamplingParams, spawn_engine,
};
use quorum_models::MatmulPolicy;
use quorum_tests::{
    QWEN_05B, ReferenceModel, all_q8_0_copy, long_schema_prompt, model_path, reencoded_copy,
};
use quorum_weights::ChatMessage;

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    #[arg(long, default_value_t = 64)]
    new_tokens: u32,
    /// Skip the (slow) sequential reference baseline.
    #[arg(long)]
    no_reference: bool,
    /// Run a copy with every quantized matrix re-encoded to Q8_0 (the int8 GEMM's format).
    #[arg(long)]
    all_q8_0: bool,
    /// Rows from which Q8_0 projections take the int8 GEMM (the engine takes it from one row).
    #[arg(long, default_value_t = 1)]
    int8_min_rows: usize,
    /// Let requests end at the model's end-of-sequence token. By default every request decodes
    /// exactly `--new-tokens` tokens (as vLLM's benchmarks do with `ignore_eos`), so that the
    /// concurrent phase really runs `--concurrency` sequences per step until the end.
    #[arg(long)]
    stop_at_eos: bool,
    /// CPU kernel path: auto, avx512vnni, avxvnni, avx2 or candle (candle is switched to match).
    #[arg(long, default_value = "auto")]
    cpu_path: String,
    /// Only the speculative-decoding comparison (module docs), this many rounds.
    #[arg(long)]
    drafts: Option<usize>,
    /// Turn prompt-lookup drafts off: with them the single stream checks several tokens per
    /// step, so the 16-way/single ratio then measures drafting as well as batching.
    #[arg(long)]
    no_drafts: bool,
}

/// A failing query of Spider's `concert_singer` and the revision prompt that quotes it.
const FAILING_SQL: &str = "SELECT T2.Name, T2.Country, T2.Age FROM singer_in_concert AS T1 JOIN singer AS T2 ON T1.Singer_ID = T2.Singer_ID JOIN concert AS T3 ON T1.concert_ID = T3.concert_ID WHERE T3.Year = 2014 AND T2.Is_male = 'F' ORDER BY T2.Age DESC";

fn revision_prompt() -> String {
    format!(
        "CREATE TABLE singer (Singer_ID int, Name text, Country text, Song_Name text, Age int, Is_male bool);\n\
         CREATE TABLE concert (concert_ID int, concert_Name text, Theme text, Stadium_ID text, Year text);\n\
         CREATE TABLE singer_in_concert (concert_ID int, Singer_ID text);\n\
         Question: the name, country and age of the female singers who sang in a 2014 concert, oldest first.\n\
         This query fails with `no such column: T2.Is_male`:\n{FAILING_SQL}\n\
         Write the corrected query only."
    )
}

/// The `--drafts` comparison: `rounds` interleaved runs of the same greedy request on an engine
/// with drafts and one without; prints the medians.
fn compare_drafts(
    path: &std::path::Path,
    cpu_path: quorum_models::CpuPath,
    rounds: usize,
    new_tokens: u32,
) -> Result<()> {
    let engine = |max_draft_tokens| {
        spawn_engine(
            EngineConfig {
                matmul_policy: MatmulPolicy::engine(cpu_path),
                max_draft_tokens,
                // No prefix cache: every round computes the prompt, as a new revision would.
                enable_prefix_caching: false,
                ..EngineConfig::cpu_default("qwen")
            },
            path,
            &Device::Cpu,
        )
    };
    let (with, without) = (engine(quorum_engine::DEFAULT_MAX_DRAFT_TOKENS)?, engine(0)?);
    let prompt = chat(&with, &revision_prompt());
    let hint = with
        .tokenizer()
        .encode(FAILING_SQL, false)
        .map_err(anyhow::Error::msg)?
        .get_ids()
        .to_vec();
    let run = |h: &EngineHandle| -> Result<(f64, usize)> {
        let mut r = request(prompt.clone(), new_tokens, false);
        r.draft_hint = hint.clone();
        let f = finish(h.submit(r)?);
        let decode = (f.total - f.ttft.unwrap_or_default()).as_secs_f64();
        Ok((decode, f.completion_tokens))
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut tokens = 0;
    for _ in 0..rounds {
        let (t, n) = run(&with)?;
        a.push(t);
        tokens = n;
        b.push(run(&without)?.0);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (da, db) = (median(&mut a), median(&mut b));
    let stats = with.stats();
    println!(
        "{}",
        serde_json::json!({
            "tokens": tokens, "rounds": rounds,
            "decode_s_with_drafts": da, "decode_s_without": db, "speedup": db / da,
            "drafts_checked": stats.draft_tokens, "drafts_kept": stats.draft_tokens_accepted,
        })
    );
    Ok(())
}

const QUESTIONS: &[&str] = &[
    "How many singers do we have?",
    "List all stadium names ordered by capacity.",
    "What is the average age of singers from France?",
    "Which year had the most concerts?",
    "Show the names of students older than 20.",
    "Count the pets of each type.",
    "Find the youngest teacher's name.",
    "List the countries with more than two singers.",
    "What is the total capacity of all stadiums?",
    "Show employees hired after 2010.",
    "Which department has the highest budget?",
    "List the cities and their populations.",
    "How many flights depart from Aberdeen?",
    "Find the most expensive product.",
    "What are the names of the orchestras founded after 2003?",
    "Count the documents per template.",
];

fn chat(h: &EngineHandle, text: &str) -> Vec<u32> {
    let t = h
        .chat_template()
        .expect("template")
        .render(&[ChatMessage::new("user", text)], true)
        .expect("render");
    h.tokenizer()
        .encode(t.as_str(), false)
        .expect("encode")
        .get_ids()
        .to_vec()
}

fn request(tokens: Vec<u32>, n: u32, ignore_eos: bool) -> GenerateRequest {
    GenerateRequest {
        draft_hint: Vec::new(),
        keep_prefix: None,
        prompt_tokens: tokens,
        params: SamplingParams {
            max_new_tokens: n,
            ignore_eos,
            ..SamplingParams::greedy()
        },
        adapter: None,
        deadline: None,
        grammar: None,
    }
}

fn main() -> Result<()> {
    // SAFETY: first statement of `main`; no other thread exists yet.
    unsafe { quorum_models::limit_candle_spinning() };
    let args = Args::parse();
    // SAFETY: no other thread has started.
    let cpu_path = unsafe { quorum_tests::bench_cpu_path(&args.cpu_path)? };
    let path = if args.all_q8_0 {
        all_q8_0_copy(QWEN_05B)?
    } else {
        model_path(QWEN_05B)
    };
    if let Some(rounds) = args.drafts {
        return compare_drafts(&path, cpu_path, rounds, args.new_tokens);
    }
    let mut config = EngineConfig {
        matmul_policy: MatmulPolicy::BatchInvariant {
            min_rows: args.int8_min_rows,
            path: cpu_path,
        },
        ..EngineConfig::cpu_default("qwen")
    };
    if args.no_drafts {
        config.max_draft_tokens = 0;
    }
    let h = spawn_engine(config, &path, &Device::Cpu)?;
    let ignore_eos = !args.stop_at_eos;
    let prompts: Vec<Vec<u32>> = QUESTIONS
        .iter()
        .cycle()
        .take(args.concurrency)
        .map(|q| chat(&h, q))
        .collect();

    // Single stream.
    let f = finish(h.submit(request(prompts[0].clone(), args.new_tokens, ignore_eos))?);
    let single_decode =
        (f.completion_tokens - 1) as f64 / (f.total - f.ttft.unwrap_or_default()).as_secs_f64();

    // N concurrent.
    let t = Instant::now();
    let rxs: Vec<_> = prompts
        .iter()
        .map(|p| h.submit(request(p.clone(), args.new_tokens, ignore_eos)))
        .collect::<Result<_, _>>()?;
    let fins: Vec<FinishEvent> = rxs.into_iter().map(finish).collect();
    let wall = t.elapsed().as_secs_f64();
    let generated: usize = fins.iter().map(|f| f.completion_tokens).sum();
    let aggregate = generated as f64 / wall;
    let (decode_aggregate, _) = decode_phase(&fins, wall);

    // Prefix cache: the same RE_p schema prompt with two different questions.
    let schema = long_schema_prompt();
    let cut = schema.rfind("### Question:").unwrap_or(schema.len());
    let ask = |q: &str| format!("{}### Question: {q}\n### SQL:", &schema[..cut]);
    let cold = finish(h.submit(request(
        chat(&h, &ask("How many students are enrolled?")),
        1,
        ignore_eos,
    ))?);
    let warm_prompt = chat(&h, &ask("List the names of all courses."));
    let warm = finish(h.submit(request(warm_prompt.clone(), 1, ignore_eos))?);
    let cold_ttft = cold.ttft.unwrap_or_default().as_secs_f64();
    let warm_ttft = warm.ttft.unwrap_or_default().as_secs_f64();

    println!(
        "{}",
        serde_json::json!({
            "single_stream_decode_tok_s": single_decode,
            "concurrency": args.concurrency, "drafts": !args.no_drafts, "ignore_eos": ignore_eos, "generated_tokens": generated, "wall_s": wall,
            "aggregate_tok_s": aggregate, "aggregate_over_single": aggregate / single_decode,
        "decode_phase_tok_s": decode_aggregate, "decode_phase_over_single": decode_aggregate / single_decode,
            "prefix_prompt_tokens": warm_prompt.len(), "prefix_cached_tokens": warm.cached_tokens,
            "cold_ttft_s": cold_ttft, "warm_ttft_s": warm_ttft, "warm_over_cold": warm_ttft / cold_ttft,
        })
    );

    if !args.no_reference {
        let mut reference = ReferenceModel::load(&if args.all_q8_0 {
            path.clone()
        } else {
            reencoded_copy(QWEN_05B)?
        })?;
        let stop = if ignore_eos {
            Vec::new()
        } else {
            h.info().eos_token_ids.clone()
        };
        let t = Instant::now();
        let mut ref_tokens = 0;
        for p in &prompts {
            let (toks, _) = reference.greedy(p, args.new_tokens as usize, &stop)?;
            ref_tokens += toks.len();
        }
        let ref_wall = t.elapsed().as_secs_f64();
        println!(
            "{}",
            serde_json::json!({
                "reference_sequential_wall_s": ref_wall, "reference_tokens": ref_tokens,
                "engine_concurrent_wall_s": wall, "engine_tokens": generated,
                "wall_clock_ratio": ref_wall / wall,
            })
        );
    }
    Ok(())
}
