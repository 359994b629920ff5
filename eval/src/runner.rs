//! The evaluation loop: ask the predictor for each question not yet in the results file, score
//! the answer, append its record, and summarize the whole file at the end.
//!
//! The predictor is a closure so that this crate stays free of model code: the server passes
//! the real pipeline, tests pass scripted answers. Databases are opened once per run (one
//! sandbox and one schema per database) because a Spider run asks each database dozens of
//! questions.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::EvalError;
use crate::metrics::{ScoreOptions, score_against_any};
use crate::record::{Record, RecordWriter, read_records};
use crate::summary::{Summary, summarize};
use quorum_sql::backend::Session;
use quorum_sql::database::DatabaseHandle;
use quorum_sql::dataset::{Example, database_path};
use quorum_sql::dialect::Dialect;
use quorum_sql::hardness::hardness;
use quorum_sql::linking::tables::link_tables;
use quorum_sql::rules::translate::sqlite_gold_for;
use quorum_sql::sandbox::{ExecError, Sandbox};
use quorum_sql::schema::{IntrospectOptions, Schema};

/// What the predictor answers for one question.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prediction {
    pub sql: String,
    /// Tables the pipeline linked; `None` when it does no schema linking.
    pub linked_tables: Option<Vec<String>>,
    /// Pipeline details kept verbatim in the record.
    pub candidates: serde_json::Value,
    pub votes: serde_json::Value,
    /// Wall time per pipeline stage, kept verbatim in the record.
    pub stage_ms: serde_json::Value,
    /// Stored values the prompts showed (value retrieval), kept verbatim in the record.
    pub matched_values: serde_json::Value,
    /// The term hints the prompts were told, kept verbatim in the record.
    pub term_hints: serde_json::Value,
    /// The evidence's statements the prompts were not told, kept verbatim in the record.
    pub evidence_set_aside: Vec<String>,
    /// The tables the schema filter showed; `None` when the schema was shown whole.
    pub filtered_tables: Option<Vec<String>>,
    pub latency_ms: f64,
    pub tokens: u64,
}

impl Prediction {
    /// A bare SQL answer with no pipeline details.
    pub fn sql(sql: impl Into<String>) -> Prediction {
        Prediction {
            sql: sql.into(),
            ..Prediction::default()
        }
    }
}

/// Opens a database by id for scoring, wherever it is served from (a PostgreSQL copy, say);
/// the schema may be bare (linking needs table names only).
pub type DatabaseOpener = dyn Fn(&str) -> Result<DatabaseHandle, String> + Send + Sync;

/// Where the databases are, how to score, and how many questions are in flight at once.
#[derive(Clone)]
pub struct EvalOptions {
    /// Spider layout: `<database_dir>/<db_id>/<db_id>.sqlite`.
    pub database_dir: PathBuf,
    /// Databases from elsewhere instead of the SQLite files; gold queries are read in the
    /// database's dialect ([`sqlite_gold_for`]) unless
    /// `gold_as_written`.
    pub opener: Option<Arc<DatabaseOpener>>,
    /// The gold queries are already in the databases' dialect (a PostgreSQL benchmark's
    /// are): they run as written.
    pub gold_as_written: bool,
    pub score: ScoreOptions,
    /// Questions asked at once (at least 1). Several in flight let the engine batch them;
    /// with greedy decoding and batch-invariant kernels the answers do not depend on it.
    pub concurrency: usize,
}

/// A predictor: asked from several threads at once when `concurrency > 1`.
/// It gets the question's index in the question file and the question.
pub type Predictor<'p> = dyn Fn(usize, &Example) -> Prediction + Sync + 'p;

/// Evaluates `examples` (index into the question file, question) with `predictor`, appending one
/// record per question to `out` and skipping the indices `out` already holds. Records are
/// appended as answers arrive (in completion order: the index is the key), so an interrupted
/// run keeps every finished question. `progress` is called with (finished, total) after each
/// question, and once at the start with the questions already finished. Returns the summary of
/// every record in `out`, earlier runs' included.
pub fn run_eval(
    examples: &[(usize, Example)],
    predictor: &Predictor<'_>,
    out: &Path,
    options: &EvalOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary, EvalError> {
    let finished: std::collections::HashSet<usize> = read_records(out)?.finished().collect();
    let todo: Vec<&(usize, Example)> = examples
        .iter()
        .filter(|(i, _)| !finished.contains(i))
        .collect();
    let total = examples.len();
    let mut done = total - todo.len();
    progress(done, total);
    let mut writer = RecordWriter::open(out)?;
    let mut databases = Databases::new(options);
    let next = AtomicUsize::new(0);
    let workers = options.concurrency.clamp(1, todo.len().max(1));
    std::thread::scope(|scope| -> Result<(), EvalError> {
        let (tx, rx) = std::sync::mpsc::channel::<(usize, Prediction)>();
        for _ in 0..workers {
            let tx = tx.clone();
            let (todo, next) = (&todo, &next);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((index, example)) = todo.get(i) else {
                        break;
                    };
                    if tx.send((i, predictor(*index, example))).is_err() {
                        break; // scoring failed; the run is over
                    }
                }
            });
        }
        drop(tx);
        // Scoring stays on this thread: it owns the databases and the writer.
        for (i, prediction) in rx {
            let (index, example) = todo[i];
            let record = match score_question(*index, example, prediction, &mut databases, options)
            {
                Ok(r) => r,
                Err(e) => {
                    // Stop handing out questions; workers finish the one they hold.
                    next.store(todo.len(), Ordering::Relaxed);
                    return Err(e);
                }
            };
            writer.append(&record)?;
            done += 1;
            progress(done, total);
        }
        Ok(())
    })?;
    Ok(summarize(&read_records(out)?.records))
}

/// Scores one answer and builds its record.
fn score_question(
    index: usize,
    example: &Example,
    prediction: Prediction,
    databases: &mut Databases,
    options: &EvalOptions,
) -> Result<Record, EvalError> {
    let db = databases.get(&example.db_id)?;
    let golds: Vec<String> = example
        .golds()
        .into_iter()
        .map(|gold| {
            if options.gold_as_written {
                gold.to_owned()
            } else {
                sqlite_gold_for(db.dialect, gold)
            }
        })
        .collect();
    let golds: Vec<&str> = golds.iter().map(String::as_str).collect();
    let exec = score_against_any(db.session.as_mut(), &golds, &prediction.sql, &options.score);
    let gold_tables = link_tables(&example.query, &db.schema).tables;
    // A run without schema linking is scored on the tables its answer reads, which is what
    // linking that answer as a PreSQL would give.
    let linked_tables = match &prediction.linked_tables {
        Some(tables) => tables.clone(),
        None => link_tables(&prediction.sql, &db.schema).tables,
    };
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    Ok(Record {
        index,
        db_id: example.db_id.clone(),
        question: example.question.clone(),
        gold: example.query.clone(),
        prediction: prediction.sql,
        hardness: hardness(&example.query),
        category: example.category.clone(),
        ex: exec.ex,
        valid: exec.valid,
        error: exec.error,
        gold_error: exec.gold_error,
        gold_ms: exec.gold_time.map(ms),
        pred_ms: exec.pred_time.map(ms),
        ves_ratio: exec.ves_ratio,
        linked_tables: Some(linked_tables),
        gold_tables,
        candidates: prediction.candidates,
        votes: prediction.votes,
        stage_ms: prediction.stage_ms,
        matched_values: prediction.matched_values,
        term_hints: prediction.term_hints,
        evidence_set_aside: prediction.evidence_set_aside,
        filtered_tables: prediction.filtered_tables,
        latency_ms: prediction.latency_ms,
        tokens_generated: prediction.tokens,
    })
}

/// One database's session and schema.
struct Database {
    session: Box<dyn Session>,
    schema: Schema,
    dialect: Dialect,
}

/// Databases opened on first use and kept for the run.
struct Databases {
    dir: PathBuf,
    score: ScoreOptions,
    opener: Option<Arc<DatabaseOpener>>,
    open: HashMap<String, Database>,
}

impl Databases {
    fn new(options: &EvalOptions) -> Databases {
        Databases {
            dir: options.database_dir.clone(),
            score: options.score,
            opener: options.opener.clone(),
            open: HashMap::new(),
        }
    }

    fn get(&mut self, db_id: &str) -> Result<&mut Database, EvalError> {
        match self.open.entry(db_id.to_owned()) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => {
                let db = match &self.opener {
                    None => open_database(&self.dir, db_id, self.score)?,
                    Some(open) => open_elsewhere(open.as_ref(), db_id, self.score)?,
                };
                Ok(e.insert(db))
            }
        }
    }
}

/// A database that cannot be opened fails the run instead of scoring its questions as wrong:
/// it is a setup mistake, and a run of zeros would hide it.
fn open_database(dir: &Path, db_id: &str, score: ScoreOptions) -> Result<Database, EvalError> {
    let path = database_path(dir, db_id);
    let sandbox = Sandbox::open(&path, score.limits).map_err(|source| EvalError::Database {
        db_id: db_id.to_owned(),
        path: path.clone(),
        source,
    })?;
    // Only table names are needed for linking: no sampled rows or values.
    let bare = IntrospectOptions {
        sample_rows: 0,
        distinct_examples: 0,
    };
    let schema = Schema::from_sqlite(&path, db_id, bare).map_err(|source| EvalError::Schema {
        db_id: db_id.to_owned(),
        source: Box::new(source),
    })?;
    Ok(Database {
        session: Box::new(sandbox),
        schema,
        dialect: Dialect::Sqlite,
    })
}

fn open_elsewhere(
    open: &DatabaseOpener,
    db_id: &str,
    score: ScoreOptions,
) -> Result<Database, EvalError> {
    let failed = |message: String| EvalError::Database {
        db_id: db_id.to_owned(),
        path: PathBuf::new(),
        source: ExecError::Unavailable { message },
    };
    let handle = open(db_id).map_err(failed)?;
    let session = handle
        .backend
        .open_session(score.limits)
        .map_err(|e| failed(e.to_string()))?;
    Ok(Database {
        session,
        dialect: handle.dialect(),
        schema: handle.schema,
    })
}

#[cfg(test)]
mod tests;
