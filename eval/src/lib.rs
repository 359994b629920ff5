//! The evaluation harness: score predictions against Spider-format gold SQL, keep one JSON line
//! per question so that a long run can be interrupted and resumed, aggregate the lines into the
//! benchmark metrics (overall and per Spider hardness), compare two runs, and export the official
//! evaluator's input files.
//!
//! The harness knows nothing about models: [`runner::run_eval`] takes the predictor as a
//! closure, so the server drives it with the real pipeline and tests with scripted answers.
//!
//! Metric definitions follow text2sql-reference.md ("Execution and comparison", "Schema
//! linking"); each one is documented where it is computed.

pub mod comparison;
pub mod error;
pub mod export;
pub mod metrics;
pub mod record;
pub mod runner;
pub mod select;
pub mod summary;

pub use comparison::{Comparison, Flip, FlipDirection, compare};
pub use error::EvalError;
pub use metrics::{ExecScore, LinkScore, ScoreOptions, Semantics, score_execution, score_linking};
pub use record::{Record, RecordLog, RecordWriter, read_records};
pub use runner::{DatabaseOpener, EvalOptions, Prediction, Predictor, run_eval};
pub use select::{Selection, parse_ids, select_examples};
pub use summary::{Level, LevelSummary, Summary, summarize};

#[cfg(test)]
mod test_db;
