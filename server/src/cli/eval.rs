//! `quorum eval`: runs a Spider-format dataset through the pipeline and scores it with the
//! harness in the `quorum-eval` crate.
//!
//! The questions always go through `Text2Sql.Generate` over gRPC: to `--server` when given,
//! else to a server this command starts in-process on a loopback port. One path for both means
//! the numbers measure exactly what a client of a deployed server gets, and every pipeline
//! switch is a request option (see `PipelineOptions` in text2sql.proto), so an ablation is one
//! flag away. Several questions are in flight at once (`--concurrency`) so the engines batch.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use quorum_eval::{
    EvalOptions, Prediction, RecordWriter, ScoreOptions, Selection, Semantics, compare,
    export::export_official, parse_ids, read_records, run_eval, select_examples,
};
use quorum_models::CpuPath;
use quorum_proto::v1 as pb;
use quorum_sql::dataset::{Example, load_examples, load_slices_if_present};
use quorum_sql::dialect::Dialect;
use quorum_sql::pipeline::PipelineKnobs;
use serde_json::json;

use quorum_eval::DatabaseOpener;
use quorum_mysql::{MySqlDatabase, MySqlSource};
use quorum_postgres::{PgDatabase, PgSource};
use quorum_server::config::file::{Overrides, RawConfig};
use quorum_server::config::profile::Profile;
use quorum_server::config::resolved::DuckDbFiles;
use quorum_server::model_source::ModelDirs;
use quorum_sql::schema::IntrospectOptions;
use std::sync::Arc;

/// KV cache of the in-process server unless the config sets one: room for 8 questions' worth
/// of sequences of the 0.5B model without preemption.
const EVAL_KV_CACHE_MIB: u64 = 4096;

#[derive(clap::Args, Debug)]
pub struct EvalArgs {
    /// Spider-format data directory: the question file, `database/`, `slices.json` and
    /// `train.json` (the demonstration pool of the in-process server).
    #[arg(long, env = "QUORUM_SPIDER_DIR", default_value = quorum_server::config::shipped::DEFAULT_SPIDER_DIR)]
    pub data: PathBuf,
    /// Question file, relative to --data unless absolute: Spider's format, or BIRD's (gold SQL
    /// in `SQL`, and `evidence`, which is sent with each question).
    #[arg(long, default_value = "dev.json")]
    pub questions: PathBuf,
    /// The databases' directory (`<id>/<id>.sqlite`), relative to --data unless absolute;
    /// BIRD's is `dev_databases`.
    #[arg(long, default_value = "database")]
    pub database_dir: PathBuf,
    /// A slice of slices.json (smoke10, dev100, usable, ...).
    #[arg(long)]
    pub slice: Option<String>,
    /// Only these question indices: `3,5,10-20`.
    #[arg(long)]
    pub ids: Option<String>,
    /// At most this many questions (the first of the selection).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Results, one JSON line per question; running again resumes it. A Markdown summary is
    /// written beside it (`.md`).
    #[arg(long, required_unless_present = "compare")]
    pub out: Option<PathBuf>,
    /// Questions in flight at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Ask a running server (e.g. http://127.0.0.1:50051) instead of starting one in-process.
    #[arg(long)]
    pub server: Option<String>,
    /// Configuration of the in-process server (default: the default models).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The in-process server's shipped set of models when the configuration lists none:
    /// `default`, `small` or `accurate` (as `quorum serve --profile`).
    #[arg(long, env = "QUORUM_PROFILE", value_enum, conflicts_with = "server")]
    pub profile: Option<Profile>,
    /// Seconds one question may take (the gRPC deadline).
    #[arg(long, default_value_t = 900)]
    pub question_timeout_secs: u64,
    /// Predict each question's gold query (in the databases' dialect): checks the harness and
    /// the databases, needs no model (the official evaluator's gold-vs-gold check).
    #[arg(long)]
    pub predict_gold: bool,
    /// Serve and score the databases from this PostgreSQL server instead of the SQLite files:
    /// one schema per database id, as `quorum pg-load` writes them. Gold queries are rewritten
    /// for PostgreSQL where SQLite's habits differ (string quotes, `LIKE`).
    #[arg(long, env = "QUORUM_EVAL_POSTGRES", conflicts_with = "mysql")]
    pub postgres: Option<String>,
    /// Serve and score the databases from this MySQL or MariaDB server instead of the SQLite
    /// files (`mysql://user:password@host:port`): one database per id, as `quorum mysql-load`
    /// writes them. Spider's gold queries run unchanged.
    #[arg(long, env = "QUORUM_EVAL_MYSQL", conflicts_with = "duckdb")]
    pub mysql: Option<String>,
    /// Serve and score the databases from files through DuckDB instead of the SQLite files:
    /// `DIR/<db_id>/` holds one Parquet or CSV file per table, as `quorum files-write` writes
    /// them (builds with the `duckdb` feature). Gold queries are rewritten as for PostgreSQL.
    #[arg(long, env = "QUORUM_EVAL_DUCKDB", conflicts_with = "postgres")]
    pub duckdb: Option<PathBuf>,

    /// The pipeline's knobs, sent as the requests' options (unset: the server's setting).
    #[command(flatten)]
    pub knobs: PipelineKnobs,
    /// Round-2 generators by name, comma-separated (the first also writes the PreSQL).
    #[arg(long, value_delimiter = ',')]
    pub generators: Vec<String>,

    /// Keep DISTINCT when comparing results (the Spider evaluator strips it by default).
    #[arg(long)]
    pub keep_distinct: bool,
    /// Result comparison: spider (bag of rows, column permutations), bird (set of rows), or
    /// sqleval (SQL-Eval's: the prediction may return extra columns). Under each, a question
    /// file's `alternatives` (SQL-Eval's acceptable golds) all count as right.
    #[arg(long, default_value = "spider")]
    pub semantics: String,
    /// The gold queries are written for the databases served (a PostgreSQL benchmark's, such
    /// as business-pg): run them unchanged instead of translating Spider's SQLite gold.
    #[arg(long)]
    pub gold_as_written: bool,
    /// Register each database's distinct question evidence as its notes (Databases.AddNote)
    /// and ask without evidence: what a team's notes do where users no longer repeat them.
    #[arg(long)]
    pub notes_from_evidence: bool,
    /// Warm each asked database's schema prompts before the first question and keep them
    /// resident (what a server does for the databases a team configured or registered), and
    /// print what that took; without it the in-process server keeps nothing resident, so every
    /// database's first question computes its schema prompt.
    #[arg(long, conflicts_with = "server")]
    pub warm_databases: bool,
    /// Timing pairs per correct question for VES.
    #[arg(long)]
    pub ves_iterations: Option<usize>,

    /// Print two results files side by side instead of running (per metric, per hardness,
    /// and the questions that flipped).
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub compare: Option<Vec<PathBuf>>,
    /// Score given answers instead of asking a server: a JSON-lines file of
    /// `{"index": N, "sql": "..."}` (index into the question file). For other systems'
    /// outputs, and for reading out one stage of an earlier run.
    #[arg(long, conflicts_with = "server")]
    pub predictions: Option<PathBuf>,
    /// Also write the official evaluator's input (gold.sql, pred.sql) into this directory.
    #[arg(long)]
    pub export: Option<PathBuf>,
}

impl EvalArgs {
    fn options(&self) -> Result<pb::PipelineOptions> {
        // The server checks the bounds too; checking here refuses a bad flag before a run
        // instead of recording every question as refused.
        let mut scratch = quorum_sql::pipeline::PipelineConfig::new(Vec::new());
        self.knobs
            .apply(&mut scratch)
            .map_err(|e| anyhow::anyhow!("--{}: {}", e.knob.replace('_', "-"), e.reason))?;
        let mut options = quorum_server::convert::options(&self.knobs);
        options.generators = self.generators.clone();
        // The harness reads no rows back from the answers unless asked to.
        options.preview_rows = options.preview_rows.or(Some(0));
        Ok(options)
    }

    fn score_options(&self) -> Result<ScoreOptions> {
        let Some(semantics) = Semantics::parse(&self.semantics) else {
            bail!(
                "--semantics: `{}` is not spider, bird or sqleval",
                self.semantics
            );
        };
        let mut score = ScoreOptions {
            semantics,
            keep_distinct: self.keep_distinct,
            ..ScoreOptions::default()
        };
        if let Some(n) = self.ves_iterations {
            score.ves_iterations = n;
        }
        Ok(score)
    }

    fn under_data(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.data.join(path)
        }
    }
}

pub fn eval(
    dirs: &ModelDirs,
    device: Option<quorum_models::DeviceSpec>,
    cpu_path: CpuPath,
    args: EvalArgs,
) -> Result<()> {
    if let Some(pair) = &args.compare {
        let a = read_records(&pair[0])?.records;
        let b = read_records(&pair[1])?.records;
        println!("A = {}\nB = {}\n", pair[0].display(), pair[1].display());
        print!("{}", compare(&a, &b).to_markdown());
        return Ok(());
    }
    let out = args.out.clone().context("--out is required")?;
    // Opened once here so that an output the run cannot append to fails before models load.
    RecordWriter::open(&out)?;
    let examples = load_examples(&args.under_data(&args.questions))?;
    let slices = load_slices_if_present(&args.data.join("slices.json"))?;
    let selection = Selection {
        slice: args.slice.clone(),
        ids: args.ids.as_deref().map(parse_ids).transpose()?,
        limit: args.limit,
    };
    let chosen = select_examples(&examples, &slices, &selection)?;
    let opener = args.postgres.clone().map(|url| {
        let open = move |db_id: &str| {
            let bare = IntrospectOptions {
                sample_rows: 0,
                distinct_examples: 0,
            };
            PgDatabase::connect(PgSource::new(url.clone(), db_id))
                .and_then(|db| db.into_handle(db_id, bare))
                .map_err(|e| e.to_string())
        };
        Arc::new(open) as Arc<DatabaseOpener>
    });
    let opener = opener.or_else(|| {
        args.mysql.clone().map(|url| {
            let open = move |db_id: &str| {
                let bare = IntrospectOptions {
                    sample_rows: 0,
                    distinct_examples: 0,
                };
                MySqlDatabase::connect(MySqlSource::new(url.clone(), Some(db_id.to_owned())))
                    .and_then(|db| db.into_handle(db_id, bare))
                    .map_err(|e| e.to_string())
            };
            Arc::new(open) as Arc<DatabaseOpener>
        })
    });
    let opener = opener.or_else(|| {
        args.duckdb.clone().map(|dir| {
            let open = move |db_id: &str| {
                let files = DuckDbFiles {
                    path: dir.join(db_id),
                    max_memory_mib: None,
                    threads: None,
                };
                quorum_server::databases::open_files(db_id, &files).map_err(|e| format!("{e:#}"))
            };
            Arc::new(open) as Arc<DatabaseOpener>
        })
    });
    let options = EvalOptions {
        database_dir: args.under_data(&args.database_dir),
        opener,
        gold_as_written: args.gold_as_written,
        score: args.score_options()?,
        concurrency: args.concurrency.max(1),
    };
    if args.predict_gold {
        let dialect = if args.gold_as_written {
            Dialect::Sqlite
        } else if args.postgres.is_some() {
            Dialect::Postgres
        } else if args.duckdb.is_some() {
            Dialect::DuckDb
        } else if args.mysql.is_some() {
            Dialect::MySql
        } else {
            Dialect::Sqlite
        };
        let predictor = |_: usize, example: &Example| {
            Prediction::sql(quorum_sql::rules::translate::sqlite_gold_for(
                dialect,
                &example.query,
            ))
        };
        let summary = run_eval(&chosen, &predictor, &out, &options, &mut |_, _| {})?;
        let markdown = summary.to_markdown();
        std::fs::write(out.with_extension("md"), &markdown)?;
        println!("{markdown}");
        return Ok(());
    }
    if let Some(path) = &args.predictions {
        let given = read_predictions(path)?;
        let predictor = |index: usize, _: &Example| {
            Prediction::sql(given.get(&index).cloned().unwrap_or_default())
        };
        let summary = run_eval(&chosen, &predictor, &out, &options, &mut |_, _| {})?;
        let markdown = summary.to_markdown();
        std::fs::write(out.with_extension("md"), &markdown)?;
        println!("{markdown}");
        return Ok(());
    }
    let request_options = args.options()?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let db_ids: std::collections::BTreeSet<String> =
        chosen.iter().map(|(_, e)| e.db_id.clone()).collect();
    let (channel, embedded) = runtime.block_on(connect(dirs, device, cpu_path, &args, &db_ids))?;
    if args.warm_databases {
        let server = embedded
            .as_ref()
            .context("--warm-databases needs the in-process server")?;
        let handles = db_ids
            .iter()
            .map(|id| server.state.databases.get(id).map(|db| db.handle))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let started = Instant::now();
        let (mut prompt_tokens, mut cached_tokens) = (0, 0);
        for (db_id, warmed) in
            quorum_server::prefix_warming::warm(&server.state, runtime.handle(), &handles)
        {
            let report = warmed.map_err(|e| anyhow::anyhow!("warming {db_id}: {e}"))?;
            prompt_tokens += report.prompt_tokens;
            cached_tokens += report.cached_tokens;
        }
        eprintln!(
            "quorum eval: {} databases' schema prompts warmed in {:.1} s ({prompt_tokens} prompt \
             tokens, {cached_tokens} of them already cached)",
            handles.len(),
            started.elapsed().as_secs_f64()
        );
    }
    if args.notes_from_evidence {
        let added = runtime.block_on(notes_from_evidence(&channel, &chosen))?;
        eprintln!(
            "quorum eval: {added} notes registered from the questions' evidence; questions go without it"
        );
    }
    let client = pb::text2_sql_client::Text2SqlClient::new(channel);
    let timeout = Duration::from_secs(args.question_timeout_secs);
    let handle = runtime.handle().clone();
    let predictor = |_: usize, example: &Example| {
        let mut client = client.clone();
        let evidence = if args.notes_from_evidence {
            None
        } else {
            example.evidence().map(str::to_owned)
        };
        let mut request = tonic::Request::new(pb::Text2SqlRequest {
            question: example.question.clone(),
            db_id: example.db_id.clone(),
            evidence,
            options: Some(request_options.clone()),
        });
        request.set_timeout(timeout);
        let started = Instant::now();
        let result = handle.block_on(client.generate(request));
        prediction(result.map(tonic::Response::into_inner), started)
    };

    let bar = ProgressBar::new(chosen.len() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {pos}/{len} questions, {elapsed} elapsed, eta {eta}",
        )
        .expect("a valid progress template"),
    );
    let started = Instant::now();
    let summary = run_eval(&chosen, &predictor, &out, &options, &mut |done, _| {
        bar.set_position(done as u64)
    })?;
    bar.finish();
    let markdown = summary.to_markdown();
    let md_path = out.with_extension("md");
    std::fs::write(&md_path, &markdown)
        .with_context(|| format!("writing {}", md_path.display()))?;
    println!("{markdown}");
    println!(
        "{} questions in {:.0} s; records {}, summary {}",
        chosen.len(),
        started.elapsed().as_secs_f64(),
        out.display(),
        md_path.display()
    );
    if let Some(dir) = &args.export {
        let records = read_records(&out)?.records;
        let (gold, pred) = export_official(&records, dir)?;
        println!("official format: {} {}", gold.display(), pred.display());
    }
    if let Some(server) = embedded {
        server.shutdown();
        runtime.block_on(server.wait())?;
    }
    Ok(())
}

/// Registers each database's distinct evidence as its notes; returns how many were added.
async fn notes_from_evidence(
    channel: &tonic::transport::Channel,
    chosen: &[(usize, Example)],
) -> Result<usize> {
    let mut client = pb::databases_client::DatabasesClient::new(channel.clone());
    let mut seen = std::collections::BTreeSet::new();
    for (_, example) in chosen {
        let Some(evidence) = example.evidence().filter(|e| !e.trim().is_empty()) else {
            continue;
        };
        if seen.insert((example.db_id.clone(), evidence.trim().to_owned())) {
            client
                .add_note(pb::AddNoteRequest {
                    db_id: example.db_id.clone(),
                    text: evidence.to_owned(),
                })
                .await
                .with_context(|| format!("adding a note to {}", example.db_id))?;
        }
    }
    Ok(seen.len())
}

/// A channel to the server named by --server, or to one started here.
async fn connect(
    dirs: &ModelDirs,
    device: Option<quorum_models::DeviceSpec>,
    cpu_path: CpuPath,
    args: &EvalArgs,
    db_ids: &std::collections::BTreeSet<String>,
) -> Result<(
    tonic::transport::Channel,
    Option<quorum_server::RunningServer>,
)> {
    // Models load at start-up: a server that is still loading is waited for.
    let wait = Duration::from_secs(1800);
    if let Some(url) = &args.server {
        return Ok((super::ask::wait_ready(url, None, wait).await?, None));
    }
    let mut raw = match &args.config {
        Some(path) => RawConfig::from_file(path)?,
        None => RawConfig::default(),
    };
    raw.apply(Overrides {
        listen: Some("127.0.0.1:0".into()),
        metrics_listen: Some(String::new()),
        auth_token: Some(String::new()),
        device,
        database_dir: Some(args.under_data(&args.database_dir)),
        cpu_path: Some(cpu_path),
        profile: args.profile,
        ..Overrides::default()
    });
    // The train pool of the same data directory gives the demonstrations, when the config has
    // an embedder to retrieve them with (no models listed means the defaults, which have one).
    let has_embedder = raw.models.is_empty()
        || raw.models.iter().any(|m| {
            m.roles
                .contains(&quorum_server::config::file::Role::Embedder)
        });
    if raw.pipeline.setup.demos_file.is_none() && has_embedder {
        raw.pipeline.setup.demos_file = Some(args.data.join("train.json"));
        raw.pipeline.setup.demos_database_dir = Some(args.data.join("database"));
    }
    if let Some(url) = &args.postgres {
        for db_id in db_ids {
            raw.databases.postgres.insert(
                db_id.clone(),
                quorum_server::config::file::RawPostgres {
                    url: url.clone(),
                    schema: Some(db_id.clone()),
                    password_file: None,
                    max_connections: Some(args.concurrency.max(1) as u32 + 1),
                },
            );
        }
    }
    if let Some(url) = &args.mysql {
        for db_id in db_ids {
            raw.databases.mysql.insert(
                db_id.clone(),
                quorum_server::config::file::RawMySql {
                    url: url.clone(),
                    database: Some(db_id.clone()),
                    password_file: None,
                    max_connections: Some(args.concurrency.max(1) as u32 + 1),
                },
            );
        }
    }
    if let Some(dir) = &args.duckdb {
        for db_id in db_ids {
            raw.databases.duckdb.insert(
                db_id.clone(),
                quorum_server::config::file::RawDuckDb {
                    path: dir.join(db_id),
                    max_memory_mib: None,
                    threads: None,
                },
            );
        }
    }
    let limits = &mut raw.limits;
    limits.request_timeout_secs = Some(args.question_timeout_secs as f64);
    if !args.warm_databases {
        // Nothing warmed at start-up either, so that a run measures cold first questions.
        limits.pinned_prefix_share = Some(0.0);
    }
    // Several questions in flight, each with several sequences of a few thousand tokens: more
    // room than the serving default so that the scheduler need not preempt (by arithmetic;
    // preemptions were not counted).
    limits.kv_cache_mib = Some(limits.kv_cache_mib.unwrap_or(EVAL_KV_CACHE_MIB));
    let needed = args.concurrency.max(1);
    limits.max_concurrent_text2sql = Some(limits.max_concurrent_text2sql.unwrap_or(8).max(needed));
    let default_db_dir = args.under_data(&args.database_dir);
    let config = quorum_server::config::resolved::resolve(raw, dirs, &default_db_dir)?;
    let mut server = quorum_server::start(config).await?;
    let url = format!("http://{}", server.addr);
    eprintln!("quorum eval: in-process server on {url}, loading models");
    // A server whose models fail to load stops: report its error instead of waiting for
    // readiness that will never come.
    let channel = tokio::select! {
        ready = super::ask::wait_ready(&url, None, wait) => ready?,
        stopped = server.stopped() => {
            stopped?;
            anyhow::bail!("the in-process server stopped before it was ready");
        }
    };
    Ok((channel, Some(server)))
}

/// The harness's view of one answer. A failed call is recorded as an empty prediction with
/// the status, so the question counts as wrong and the run goes on.
fn prediction(result: Result<pb::Text2SqlResponse, tonic::Status>, started: Instant) -> Prediction {
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    let response = match result {
        Ok(r) => r,
        Err(status) => {
            return Prediction {
                votes: json!({
                    "rpc_error": format!("{:?}: {}", status.code(), status.message())
                }),
                latency_ms,
                ..Prediction::default()
            };
        }
    };
    let candidates: Vec<serde_json::Value> = response.candidates.iter().map(candidate).collect();
    let votes = response.vote.as_ref().map_or(serde_json::Value::Null, vote);
    let stage_ms = response
        .timings
        .as_ref()
        .map_or(serde_json::Value::Null, stage_ms);
    Prediction {
        sql: response.sql.clone(),
        linked_tables: response.linked_tables.as_ref().map(|l| l.tables.clone()),
        candidates: serde_json::Value::Array(candidates),
        votes,
        stage_ms,
        matched_values: matched_values(&response.matched_values),
        term_hints: term_hints(&response.term_hints),
        evidence_set_aside: response.evidence_set_aside.clone(),
        filtered_tables: response.schema_filter.as_ref().map(|f| f.tables.clone()),
        latency_ms,
        tokens: u64::from(response.tokens_generated),
    }
}

/// `[[word, target, similarity], ...]`, or null when none was told.
fn term_hints(hints: &[pb::TermHint]) -> serde_json::Value {
    if hints.is_empty() {
        return serde_json::Value::Null;
    }
    hints
        .iter()
        .map(|h| json!([h.word, h.target, h.similarity]))
        .collect()
}

/// `[[table, column, value, score], ...]`, or null when none was shown.
fn matched_values(values: &[pb::MatchedValue]) -> serde_json::Value {
    if values.is_empty() {
        return serde_json::Value::Null;
    }
    values
        .iter()
        .map(|m| json!([m.table, m.column, m.value, m.score]))
        .collect()
}

fn stage_ms(t: &pb::StageTimings) -> serde_json::Value {
    json!({
        "retrieval": t.retrieval_ms,
        "round1": t.round1_ms,
        "linking": t.linking_ms,
        "round2": t.round2_ms,
        "revision": t.revision_ms,
        "execution": t.execution_ms,
        "vote": t.vote_ms,
        "selection": t.selection_ms,
        "total": t.total_ms,
    })
}

fn candidate(c: &pb::Candidate) -> serde_json::Value {
    let outcome = match &c.outcome {
        Some(pb::candidate::Outcome::Ok(ok)) => {
            json!({"ok": {"rows": ok.rows, "signature": ok.result_signature}})
        }
        Some(pb::candidate::Outcome::Error(e)) => {
            json!({"error": {"kind": e.kind, "message": e.message}})
        }
        None => serde_json::Value::Null,
    };
    json!({
        "id": c.id,
        "model": c.model,
        "round": c.round().as_str_name(),
        "sql": c.sql,
        "outcome": outcome,
        "revised_from": c.revised_from,
        "repaired_from": c.repaired_from,
        "rewritten_by": c.rewritten_by,
        "tokens": c.tokens_generated,
        "prompt_tokens": c.prompt_tokens,
        "cached_tokens": c.cached_tokens,
        "constrained": c.constrained,
    })
}

fn vote(v: &pb::Vote) -> serde_json::Value {
    let clusters: Vec<&Vec<u32>> = v.clusters.iter().map(|c| &c.candidate_ids).collect();
    let selector = v.selector.as_ref().map(|s| {
        json!({
            "labels": s.labels, "shown": s.shown, "logprobs": s.logprobs,
            "chosen": s.chosen, "error": s.error,
        })
    });
    json!({
        "mode": v.mode().as_str_name(),
        "voters": v.voters,
        "clusters": clusters,
        "winner": v.winner,
        "split": v.split,
        "all_failed": v.all_failed,
        "selector": selector,
    })
}

/// `{"index": N, "sql": "..."}` lines.
fn read_predictions(path: &Path) -> Result<std::collections::HashMap<usize, String>> {
    #[derive(serde::Deserialize)]
    struct Line {
        index: usize,
        sql: String,
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            let line: Line = serde_json::from_str(l).with_context(|| {
                format!("{}:{}: not {{\"index\", \"sql\"}}", path.display(), n + 1)
            })?;
            Ok((line.index, line.sql))
        })
        .collect()
}
