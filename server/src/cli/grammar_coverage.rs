//! `quorum grammar-coverage`: does the schema grammar of constrained decoding accept every gold
//! query of a Spider-format dataset on its own database? Prints the share accepted and each
//! reject with the reason, and with `--tokenizer-of MODEL` also what the masks cost when the
//! gold queries are fed through that model's tokenizer one token at a time.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use quorum_engine::{Grammar, GrammarCompiler, GrammarSpec, LogitsConstraint};
use quorum_sql::dataset::{TablesEntry, database_path, load_examples, load_tables};
use quorum_sql::grammar::schema_grammar;
use quorum_sql::model::SQL_ANSWER_PREFIX;
use quorum_sql::schema::{Column, IntrospectOptions, Schema, Table};

use quorum_server::model_source::ModelDirs;

#[derive(clap::Args, Debug)]
pub struct GrammarCoverageArgs {
    /// Spider-format data directory (question files and `database/`).
    #[arg(long, env = "QUORUM_SPIDER_DIR", default_value = quorum_server::config::shipped::DEFAULT_SPIDER_DIR)]
    pub data: PathBuf,
    /// Question files under --data whose gold queries are checked.
    #[arg(long, value_delimiter = ',', default_value = "train.json,dev.json")]
    pub questions: Vec<PathBuf>,
    /// Also time the masks: feed each gold query (after the pipeline's answer start) through
    /// this decoder's tokenizer under its database's grammar.
    #[arg(long)]
    pub tokenizer_of: Option<String>,
    /// With --tokenizer-of: how many gold queries to time (the first N of the files).
    #[arg(long, default_value_t = 300)]
    pub timed: usize,
    /// Write every reject (file, index, database, query, reason) here as JSON lines.
    #[arg(long)]
    pub rejects: Option<PathBuf>,
}

pub fn grammar_coverage(dirs: &ModelDirs, args: GrammarCoverageArgs) -> Result<()> {
    let checker = GrammarCompiler::for_bytes()?;
    let db_dir = args.data.join("database");
    // A database file missing from the data directory (Spider's train and dev name three that
    // this copy lacks) falls back to tables.json's description of its tables and columns.
    let described: HashMap<String, TablesEntry> = load_tables(&args.data.join("tables.json"))
        .map(|entries| entries.into_iter().map(|t| (t.db_id.clone(), t)).collect())
        .unwrap_or_default();
    let mut from_tables_json = 0usize;
    let mut grammars: HashMap<String, Option<String>> = HashMap::new();
    let mut grammar_of = |db_id: &str| -> Option<String> {
        grammars
            .entry(db_id.to_owned())
            .or_insert_with(|| {
                let path = database_path(&db_dir, db_id);
                let options = IntrospectOptions {
                    sample_rows: 0,
                    distinct_examples: 0,
                };
                let schema = if path.exists() {
                    Schema::from_sqlite(&path, db_id, options).ok()
                } else {
                    described.get(db_id).map(|t| {
                        from_tables_json += 1;
                        schema_of(t)
                    })
                };
                schema.map(|s| schema_grammar(&s, s.dialect))
            })
            .clone()
    };

    let mut rejects_out = match &args.rejects {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let (mut total, mut accepted, mut missing_db) = (0usize, 0usize, 0usize);
    let mut all = Vec::new();
    let started = Instant::now();
    for file in &args.questions {
        let path = args.data.join(file);
        let examples = load_examples(&path)?;
        let (mut file_total, mut file_ok) = (0usize, 0usize);
        for (i, ex) in examples.iter().enumerate() {
            let Some(grammar) = grammar_of(&ex.db_id) else {
                missing_db += 1;
                continue;
            };
            total += 1;
            file_total += 1;
            let g = Grammar::new(GrammarSpec::Lark(grammar.clone()));
            match checker.check(&g, ex.query.trim()) {
                Ok(()) => {
                    accepted += 1;
                    file_ok += 1;
                }
                Err(reason) => {
                    println!(
                        "reject {}#{i} [{}] {}\n    {reason}",
                        file.display(),
                        ex.db_id,
                        ex.query
                    );
                    if let Some(w) = rejects_out.as_mut() {
                        use std::io::Write;
                        let line = serde_json::json!({
                            "file": file.display().to_string(), "index": i,
                            "db_id": ex.db_id, "query": ex.query, "reason": reason.to_string(),
                        });
                        writeln!(w, "{line}")?;
                    }
                }
            }
            all.push((ex.db_id.clone(), ex.query.clone(), grammar));
        }
        println!(
            "{}: {file_ok}/{file_total} accepted ({:.2}%)",
            file.display(),
            100.0 * file_ok as f64 / file_total.max(1) as f64
        );
    }
    println!(
        "all: {accepted}/{total} accepted ({:.2}%), {} queries skipped (database unknown), {} grammars ({} from tables.json), {:.1} s",
        100.0 * accepted as f64 / total.max(1) as f64,
        missing_db,
        grammars.len(),
        from_tables_json,
        started.elapsed().as_secs_f64()
    );

    if let Some(model) = &args.tokenizer_of {
        time_masks(dirs, model, &all[..args.timed.min(all.len())])?;
    }
    Ok(())
}

/// A schema with tables.json's original names (no rows, types as declared there).
fn schema_of(entry: &TablesEntry) -> Schema {
    let tables = entry
        .table_names_original
        .iter()
        .enumerate()
        .map(|(i, name)| Table {
            name: name.clone(),
            columns: entry
                .column_names_original
                .iter()
                .zip(&entry.column_types)
                .filter(|((t, _), _)| usize::try_from(*t).ok() == Some(i))
                .map(|((_, c), ty)| Column {
                    name: c.clone(),
                    declared_type: ty.clone(),
                    primary_key: false,
                    comment: None,
                    examples: vec![],
                })
                .collect(),
            primary_key: vec![],
            rows: vec![],
        })
        .collect();
    Schema {
        db_id: entry.db_id.clone(),
        tables,
        foreign_keys: vec![],
        dialect: Default::default(),
    }
}

/// Feeds gold queries through a model's tokenizer under their grammars and reports the time of
/// each mask (the work constrained decoding adds per generated token).
fn time_masks(dirs: &ModelDirs, model: &str, queries: &[(String, String, String)]) -> Result<()> {
    let path = dirs.resolve(model)?;
    let ckpt =
        quorum_weights::load_checkpoint(&path, &candle_core::Device::Cpu, candle_core::DType::F32)?;
    let vocab = ckpt.tokenizer.get_vocab_size(true);
    let tokenizer = Arc::new(ckpt.tokenizer);
    let build = Instant::now();
    let compiler = GrammarCompiler::for_tokenizer(tokenizer.clone(), vocab, &ckpt.eos_token_ids)?;
    println!(
        "token environment for {model}: {:.2} s",
        build.elapsed().as_secs_f64()
    );
    let mut first_compile = Vec::new();
    let mut masks: Vec<Duration> = Vec::new();
    let mut off_grammar = 0usize;
    let mut failed = 0usize;
    let mut logits = vec![0.0f32; vocab];
    for (db_id, query, grammar) in queries {
        let g = Grammar::new(GrammarSpec::Lark(grammar.clone())).after(SQL_ANSWER_PREFIX);
        let t = Instant::now();
        let mut constraint = compiler.constraint(&g)?;
        first_compile.push(t.elapsed());
        // The answer as the pipeline's generator writes it: after the prefix, the rest of the
        // query and the closing fence.
        let rest = query.trim();
        let rest = rest
            .get(..6)
            .filter(|s| s.eq_ignore_ascii_case("select"))
            .map_or(rest, |_| rest[6..].trim_start());
        let ids = tokenizer
            .encode(format!("{rest}\n```"), false)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for &id in ids.get_ids() {
            logits.fill(0.0);
            constraint.mask(&[], &mut logits);
            if !logits.get(id as usize).is_some_and(|l| l.is_finite()) {
                off_grammar += 1;
                println!("  token {id} of [{db_id}] {query} is outside the mask");
                break;
            }
            constraint.commit(id);
        }
        if let Some(why) = constraint.failure() {
            failed += 1;
            if failed <= 3 {
                println!(
                    "  the grammar engine gave up on [{db_id}] {query}: {}",
                    why.lines().next().unwrap_or_default()
                );
            }
        }
        masks.extend_from_slice(constraint.mask_times());
    }
    masks.sort();
    first_compile.sort();
    let q = |v: &[Duration], p: f64| -> f64 {
        v.get(((v.len() as f64 - 1.0) * p).round() as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    println!(
        "masks: {} over {} queries; median {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms; {} queries left the mask, the engine gave up on {}",
        masks.len(),
        queries.len(),
        q(&masks, 0.5),
        q(&masks, 0.9),
        q(&masks, 0.99),
        q(&masks, 1.0),
        off_grammar,
        failed
    );
    println!(
        "constraint start (compile or cache hit): median {:.3} ms, max {:.3} ms",
        q(&first_compile, 0.5),
        q(&first_compile, 1.0)
    );
    Ok(())
}
