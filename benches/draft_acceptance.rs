//! Would a draft model pay? How often a small model's greedy choice is the token the serving
//! model wrote, read from an eval record, and what a step of each costs on this host.
//!
//! For each question of a `quorum eval` record (the default profile's, whose PreSQL the
//! generator writes in RE_p without demonstrations) the PreSQL prompt is rendered again as the
//! pipeline renders it (its token count is checked against the record's), the draft model
//! reads the prompt and the recorded answer in one pass, and its arg-max at each answer
//! position is compared with the answer's token there. Under greedy speculative decoding a
//! draft of k tokens keeps exactly the leading ones that match, so the record gives the tokens
//! each cycle of k drafts would produce. The step costs (the serving model decoding one row
//! and k + 1 rows, the draft model one row) turn that into a predicted speed-up.
//!
//! `quorum-bench-draft-acceptance --records dev300-first60.jsonl --target MODEL --draft MODEL`

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use candle_core::Device;
use clap::Parser;
use quorum_models::{BatchLayout, CpuPath, DecoderModel, DenseKvCache, LoadOptions, MatmulPolicy};
use quorum_sql::database::DatabaseHandle;
use quorum_sql::model::SQL_ANSWER_PREFIX;
use quorum_sql::pipeline::{PromptFormat, generation_messages, generation_prompt};
use quorum_sql::prompt::RepOptions;
use quorum_sql::schema::IntrospectOptions;
use quorum_weights::{Checkpoint, GgufLoadOptions, Reencode, load_checkpoint_with, render_turn};

#[derive(Parser, Debug)]
struct Args {
    /// A `quorum eval` record (JSON lines) of the default profile over Spider.
    #[arg(long)]
    records: PathBuf,
    /// Spider's data directory (its `database/<id>/<id>.sqlite`).
    #[arg(long, default_value = quorum_server::config::shipped::DEFAULT_SPIDER_DIR)]
    data: PathBuf,
    /// The serving model (GGUF file name or path).
    #[arg(long, default_value = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")]
    target: String,
    /// The draft model.
    #[arg(long, default_value = quorum_tests::QWEN_05B)]
    draft: String,
    /// Draft lengths to predict for.
    #[arg(long, value_delimiter = ',', default_value = "2,3,4,6,8")]
    k: Vec<usize>,
    /// Timing repetitions; the median is used.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

/// A model as the CPU engine serves it: the K-quant and Q8_0 GEMMs on this host's path.
fn load(name: &str) -> Result<(Checkpoint, DecoderModel)> {
    let path = quorum_tests::model_path(name);
    let gguf = GgufLoadOptions {
        reencode: Reencode::Kernels,
    };
    let ckpt = load_checkpoint_with(&path, &Device::Cpu, candle_core::DType::F32, &gguf)
        .with_context(|| format!("loading {}", path.display()))?;
    let options = LoadOptions {
        policy: MatmulPolicy::engine(CpuPath::detect()),
        dtype: candle_core::DType::F32,
    };
    let model = DecoderModel::load_with(&ckpt, &Device::Cpu, options)?;
    Ok((ckpt, model))
}

fn encode(ckpt: &Checkpoint, text: &str) -> Result<Vec<u32>> {
    Ok(ckpt
        .tokenizer
        .encode(text, false)
        .map_err(anyhow::Error::msg)?
        .get_ids()
        .to_vec())
}

/// The draft model's arg-max after each of the last `answer + 1` positions of `tokens`.
fn draft_choices(model: &DecoderModel, tokens: &[u32], answer: usize) -> Result<Vec<u32>> {
    let layout = BatchLayout::from_chunks([(0, 0, tokens.len(), true)]).with_drafts([answer]);
    let logits = model.forward(tokens, &layout, &mut DenseKvCache::new())?;
    Ok(logits.argmax(candle_core::D::Minus1)?.to_vec1::<u32>()?)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Seconds of one step of `rows` tokens after a `context`-token prefix (the prefix's KV
/// computed once, outside the timing).
fn step_secs(model: &DecoderModel, context: usize, rows: usize, runs: usize) -> Result<f64> {
    let prompt: Vec<u32> = (0..context as u32).map(|i| 200 + i % 5000).collect();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let mut cache = DenseKvCache::new();
        model.forward(
            &prompt,
            &BatchLayout::from_chunks([(0, 0, context, true)]),
            &mut cache,
        )?;
        let step: Vec<u32> = (0..rows as u32).map(|i| 300 + i).collect();
        let layout = BatchLayout::from_chunks([(0, context, rows, true)]).with_drafts([rows - 1]);
        let start = Instant::now();
        model.forward(&step, &layout, &mut cache)?;
        times.push(start.elapsed().as_secs_f64());
    }
    Ok(median(times))
}

fn main() -> Result<()> {
    // SAFETY: first statement of `main`; no other thread exists yet.
    unsafe { quorum_models::limit_candle_spinning() };
    let args = Args::parse();
    let (draft_ckpt, draft) = load(&args.draft)?;
    let template = draft_ckpt.chat_template.as_ref();
    // Per question: the record's answer tokens and whether the draft chose each.
    let mut matches: Vec<Vec<bool>> = Vec::new();
    let (mut checked, mut prompts_equal) = (0, 0);
    for line in std::fs::read_to_string(&args.records)?.lines() {
        let record: serde_json::Value = serde_json::from_str(line)?;
        let db_id = record["db_id"].as_str().context("db_id")?;
        let question = record["question"].as_str().context("question")?;
        let Some(presql) = record["candidates"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["round"] == "CANDIDATE_ROUND_PRE_SQL"))
        else {
            continue;
        };
        let sql = presql["sql"].as_str().context("sql")?;
        let db_path = args.data.join(format!("database/{db_id}/{db_id}.sqlite"));
        let db = DatabaseHandle::open(&db_path, db_id, IntrospectOptions::default())?;
        let prompt = generation_prompt(
            PromptFormat::Rep,
            RepOptions::default(),
            &db.schema,
            question,
            None,
        );
        let messages = generation_messages(&prompt, true);
        let text = render_turn(
            template,
            messages.system.as_deref(),
            &messages.user,
            messages.answer_prefix.as_deref(),
        )?;
        let prompt_ids = encode(&draft_ckpt, &text)?;
        checked += 1;
        if presql["prompt_tokens"].as_u64() == Some(prompt_ids.len() as u64) {
            prompts_equal += 1;
        }
        // What the model wrote after the answer's start ("SELECT "), and the fence that ended
        // it; the record's SQL is post-processed, so this is the answer up to spacing.
        let start = SQL_ANSWER_PREFIX.trim_start_matches("```sql\n");
        let written = sql.strip_prefix(start).unwrap_or(sql);
        let answer = encode(&draft_ckpt, &format!("{}\n```", written.trim_end()))?;
        if answer.is_empty() {
            continue;
        }
        let tokens = [prompt_ids, answer.clone()].concat();
        let choices = draft_choices(&draft, &tokens, answer.len())?;
        matches.push(
            answer
                .iter()
                .zip(&choices)
                .map(|(wrote, chose)| wrote == chose)
                .collect(),
        );
    }
    let total: usize = matches.iter().map(Vec::len).sum();
    let agreed: usize = matches.iter().flatten().filter(|m| **m).count();
    println!(
        "{}",
        serde_json::json!({
            "questions": matches.len(),
            "prompts_rendered_as_recorded": format!("{prompts_equal}/{checked}"),
            "answer_tokens": total,
            "draft_agrees": agreed as f64 / total.max(1) as f64,
        })
    );

    drop(draft_ckpt);
    let (_, target) = load(&args.target)?;
    let context = 600;
    let target_one = step_secs(&target, context, 1, args.runs)?;
    let draft_one = step_secs(&draft, context, 1, args.runs)?;
    for &k in &args.k {
        // Each cycle: k draft steps, one target step of k + 1 rows, producing the leading
        // matches (up to k) and the target's own token.
        let mut cycles = 0usize;
        for question in &matches {
            let mut at = 0;
            while at < question.len() {
                let kept = question[at..].iter().take(k).take_while(|m| **m).count();
                at += kept + 1;
                cycles += 1;
            }
        }
        let target_k = step_secs(&target, context, k + 1, args.runs)?;
        let with_drafts = cycles as f64 * (k as f64 * draft_one + target_k);
        let alone = total as f64 * target_one;
        println!(
            "{}",
            serde_json::json!({
                "k": k,
                "tokens_per_cycle": total as f64 / cycles.max(1) as f64,
                "target_step_1_row_ms": target_one * 1e3,
                "target_step_rows_ms": target_k * 1e3,
                "draft_step_ms": draft_one * 1e3,
                "predicted_speedup": alone / with_drafts,
            })
        );
    }
    Ok(())
}
