//! Per-question scores: execution accuracy (EX), validity (VA), the execution-time ratio behind
//! VES and C-VES, and the schema-linking scores behind R_e, R_s and RES.
//!
//! EX follows one of three benchmarks. Spider (test-suite-sql-eval, the default): both queries
//! run with every DISTINCT removed unless `keep_distinct`, the results compare as bags of rows
//! with any column permutation, and row order counts only when the gold SQL has `order by`.
//! BIRD: both queries run as written and the results compare as sets of rows, column order
//! significant. SQL-Eval (business benchmarks): both run as written and the prediction may
//! return extra columns ([`quorum_sql::compare::sqleval_eq`]). Under each, a question with
//! several acceptable gold queries is right when it matches any of them. In both, a prediction that errors or times out is simply wrong; the sandbox's
//! progress handler really interrupts SQLite at the limit, so a runaway query costs at most the
//! timeout.
//!
//! VES (BIRD) times a correct prediction against its gold query, alternating the two so that
//! drift in machine load affects both alike. Each pair gives a ratio gold_time / pred_time;
//! ratios outside mean ± 3σ are dropped as noise and the rest averaged. The question's reward is
//! the square root of that ratio; see `summary` for the aggregates.
//!
//! Schema linking compares the linked tables with the gold SQL's tables as case-insensitive
//! sets. RES is the benchmarking paper's Retrieval Efficiency Score (its equations 5 and 6):
//! per question `1[T ⊆ T̂] · sqrt(|T| / |T̂|)`, with T the gold tables and T̂ the linked ones, so
//! full recall is required and every extra table costs a little.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use quorum_sql::backend::Session;
use quorum_sql::compare::{bird_eq, order_matters, spider_eq, sqleval_eq};
use quorum_sql::distinct::{DistinctMode, prepare_for_spider_ex};
use quorum_sql::sandbox::{ExecError, Limits, Overflow, QueryResult, Sandbox};
use quorum_sql::timing::time_pair;

/// Which benchmark's notion of "same result" EX uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Semantics {
    #[default]
    Spider,
    Bird,
    /// SQL-Eval's: extra columns allowed, any listed alternative counts.
    #[serde(rename = "sqleval")]
    SqlEval,
}

impl Semantics {
    /// The name `quorum eval --semantics` takes.
    pub fn parse(name: &str) -> Option<Semantics> {
        match name {
            "spider" => Some(Semantics::Spider),
            "bird" => Some(Semantics::Bird),
            "sqleval" => Some(Semantics::SqlEval),
            _ => None,
        }
    }
}

/// BIRD's official number of timing pairs per question for VES.
pub const BIRD_VES_ITERATIONS: usize = 100;

/// How questions are scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoreOptions {
    pub semantics: Semantics,
    /// Spider's `--keep_distinct`: run both queries with their DISTINCT keywords. Ignored under
    /// BIRD semantics, which never removes them.
    pub keep_distinct: bool,
    /// Limits for every execution. Comparisons need complete results, so the default fails on
    /// overflow instead of truncating.
    pub limits: Limits,
    /// Timing pairs per correct question for VES; 0 skips timing (VES is then unavailable).
    pub ves_iterations: usize,
}

impl Default for ScoreOptions {
    /// 10 timing pairs instead of BIRD's 100: the ratio of two short queries is stable after a
    /// few pairs, and 100 makes a Spider dev run spend most of its time re-running correct SQL.
    /// Reported VES numbers should use [`BIRD_VES_ITERATIONS`].
    fn default() -> Self {
        ScoreOptions {
            semantics: Semantics::Spider,
            keep_distinct: false,
            limits: Limits {
                on_overflow: Overflow::Fail,
                ..Limits::default()
            },
            ves_iterations: 10,
        }
    }
}

/// The execution outcome of one prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecScore {
    /// The prediction's result equals the gold result (EX).
    pub ex: bool,
    /// The prediction executed without error (VA).
    pub valid: bool,
    /// Why the prediction did not execute.
    pub error: Option<String>,
    /// Why the gold query did not execute; such a question counts as wrong for every prediction.
    /// With several gold queries and no match, the first one's.
    pub gold_error: Option<String>,
    pub gold_time: Option<Duration>,
    pub pred_time: Option<Duration>,
    /// Mean gold_time / pred_time after outlier removal; only for correct predictions with timing
    /// enabled, and `None` when no timing pair succeeded.
    pub ves_ratio: Option<f64>,
}

/// Scores `pred_sql` against `gold_sql` on the database at `db_path`.
pub fn score_execution(
    gold_sql: &str,
    pred_sql: &str,
    db_path: &Path,
    options: &ScoreOptions,
) -> Result<ExecScore, ExecError> {
    let mut sandbox = Sandbox::open(db_path, options.limits)?;
    Ok(score_in(&mut sandbox, gold_sql, pred_sql, options))
}

/// Scores `pred_sql` against `gold_sql` in an open session (the runner keeps one per
/// database), opened with `options.limits`.
pub fn score_in(
    session: &mut dyn Session,
    gold_sql: &str,
    pred_sql: &str,
    options: &ScoreOptions,
) -> ExecScore {
    score_against_any(session, &[gold_sql], pred_sql, options)
}

/// Scores `pred_sql` against each of `golds` in turn (at least one): right when it matches
/// any. The prediction runs once; the gold timing and VES are those of the first gold query
/// it matches, else of the first gold query.
pub fn score_against_any(
    session: &mut dyn Session,
    golds: &[&str],
    pred_sql: &str,
    options: &ScoreOptions,
) -> ExecScore {
    let pred_run = prepared(pred_sql, options);
    let pred = session.execute(&pred_run);
    let mut first_gold = None;
    let mut matched = None;
    for gold_sql in golds {
        let gold_run = prepared(gold_sql, options);
        let gold = session.execute(&gold_run);
        let ex = match (&gold, &pred) {
            (Ok(g), Ok(p)) => results_equal(g, p, gold_sql, options.semantics),
            _ => false,
        };
        let outcome = (gold_run, gold);
        if ex {
            matched = Some(outcome);
            break;
        }
        if first_gold.is_none() {
            first_gold = Some(outcome);
        }
    }
    let ex = matched.is_some();
    let (gold_run, gold) = matched
        .or(first_gold)
        .expect("score_against_any needs at least one gold query");
    let ves_ratio = if ex {
        ves_ratio(session, &gold_run, &pred_run, options)
    } else {
        None
    };
    ExecScore {
        ex,
        valid: pred.is_ok(),
        error: pred.as_ref().err().map(ToString::to_string),
        gold_error: gold.as_ref().err().map(ToString::to_string),
        gold_time: gold.as_ref().ok().map(|r| r.elapsed),
        pred_time: pred.as_ref().ok().map(|r| r.elapsed),
        ves_ratio,
    }
}

/// The SQL text the benchmark actually executes.
fn prepared(sql: &str, options: &ScoreOptions) -> String {
    match options.semantics {
        Semantics::Spider => {
            let mode = if options.keep_distinct {
                DistinctMode::Keep
            } else {
                DistinctMode::Strip
            };
            prepare_for_spider_ex(sql, mode)
        }
        Semantics::Bird | Semantics::SqlEval => sql.to_owned(),
    }
}

fn results_equal(
    gold: &QueryResult,
    pred: &QueryResult,
    gold_sql: &str,
    semantics: Semantics,
) -> bool {
    // A truncated result (only possible when the caller chose truncation) is a prefix of the
    // real one; equality of prefixes proves nothing, so it never counts as correct.
    if gold.truncated || pred.truncated {
        return false;
    }
    match semantics {
        // The official evaluator tests the original gold text for `order by`.
        Semantics::Spider => spider_eq(&gold.rows, &pred.rows, order_matters(gold_sql)),
        Semantics::Bird => bird_eq(&gold.rows, &pred.rows),
        Semantics::SqlEval => sqleval_eq(&gold.rows, &pred.rows, order_matters(gold_sql)),
    }
}

/// Times `iterations` alternating pred/gold pairs and returns the cleaned mean ratio.
fn ves_ratio(
    session: &mut dyn Session,
    gold: &str,
    pred: &str,
    options: &ScoreOptions,
) -> Option<f64> {
    // A failed timing (a timeout under load) drops the pair rather than the question: the
    // prediction has already been shown correct.
    time_pair(session, gold, pred, options.ves_iterations).map(|t| t.ratio)
}

/// The per-question VES reward for a correct prediction with the given time ratio.
pub fn ves_reward(ratio: f64) -> f64 {
    ratio.sqrt()
}

/// Schema-linking scores of one question.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinkScore {
    /// Linked tables equal the gold tables (R_e).
    pub exact: bool,
    /// Gold tables are a subset of the linked tables (R_s).
    pub subset: bool,
    /// `1[gold ⊆ linked] · sqrt(|gold| / |linked|)` (RES's summand).
    pub res: f64,
}

/// Compares linked tables with gold tables, case-insensitively and ignoring duplicates.
pub fn score_linking<G: AsRef<str>, L: AsRef<str>>(gold: &[G], linked: &[L]) -> LinkScore {
    let gold = lowercase_set(gold);
    let linked = lowercase_set(linked);
    let subset = gold.is_subset(&linked);
    let res = if !subset {
        0.0
    } else if linked.is_empty() {
        // Both empty (a gold query that reads no table, such as `SELECT 1`): nothing was needed
        // and nothing extra was linked, which is a perfect retrieval, not a division by zero.
        1.0
    } else {
        (gold.len() as f64 / linked.len() as f64).sqrt()
    };
    LinkScore {
        exact: gold == linked,
        subset,
        res,
    }
}

fn lowercase_set<S: AsRef<str>>(names: &[S]) -> BTreeSet<String> {
    names.iter().map(|n| n.as_ref().to_lowercase()).collect()
}

#[cfg(test)]
mod tests;
