//! SQL optimization as a service (the benchmarking paper's section 4.3): rewrite a correct SQL
//! so that it runs faster, and keep a rewrite only when the database shows it is both right and
//! faster.
//!
//! The model is asked with one of the paper's prompts: two-stage rewriting shown the SQL alone,
//! the SQL with the schema and the question, or either of those after a few worked rewrites
//! (with or without the reason each is faster); or, in one stage, asked for the most efficient
//! SQL for the question directly. Each rewrite is run: it must return the original's result
//! (as a bag of rows, in order when the original orders), and it is then timed against the
//! original the way VES times a prediction ([`crate::timing`]: alternating pairs, outliers
//! dropped). Only a rewrite at least `min_speedup` times faster on average, and faster in at
//! least three pairs of four, is kept; the answer is the fastest kept rewrite, else the
//! original.

use serde::{Deserialize, Serialize};

use super::{Asker, open_session, same_text, schema_lines, unavailable};
use crate::compare::{order_matters, spider_eq};
use crate::database::DatabaseHandle;
use crate::model::{SQL_ANSWER_END, SQL_ANSWER_PREFIX, Sampling};
use crate::postprocess::postprocess;
use crate::run_error::RunError;
use crate::sandbox::{Limits, QueryResult};
use crate::timing::time_pair;

/// The paper's optimization prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptimizeMethod {
    /// Two-stage, shown only the SQL.
    WithSql,
    /// Two-stage, shown the SQL, the schema and the question.
    WithContext,
    /// As `WithContext`, after worked rewrites.
    FewShot,
    /// As `FewShot`, each worked rewrite with the reason it is faster.
    FewShotComments,
    /// One stage: the most efficient SQL for the question, written directly.
    Direct,
}

impl OptimizeMethod {
    pub const ALL: [OptimizeMethod; 5] = [
        Self::WithSql,
        Self::WithContext,
        Self::FewShot,
        Self::FewShotComments,
        Self::Direct,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::WithSql => "with_sql",
            Self::WithContext => "with_context",
            Self::FewShot => "few_shot",
            Self::FewShotComments => "few_shot_comments",
            Self::Direct => "direct",
        }
    }

    fn needs_question(self) -> bool {
        !matches!(self, Self::WithSql)
    }
}

/// The most rewrites one request may sample.
pub const MAX_REWRITES: usize = 8;

/// One optimization request.
#[derive(Debug, Clone)]
pub struct OptimizeQuestion<'a> {
    /// The question the SQL answers (needed by every method but `WithSql`).
    pub question: Option<&'a str>,
    pub sql: &'a str,
    pub method: OptimizeMethod,
    /// Rewrites to ask for, 1 (greedy) to [`MAX_REWRITES`] (sampled, seeded).
    pub rewrites: usize,
    /// Timing pairs per rewrite that returns the right result.
    pub timing_pairs: usize,
    /// How much faster (original time / rewrite time) a rewrite must be to be kept.
    pub min_speedup: f64,
}

/// What happened to one rewrite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RewriteVerdict {
    /// Faster by at least the asked factor, with the same result.
    Kept,
    /// Same result, not fast enough.
    NotFaster,
    /// The same SQL text as the original.
    Unchanged,
    /// Another result than the original's.
    DifferentResult,
    /// The database refused it.
    Failed { message: String },
}

/// One rewrite and its measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rewrite {
    pub sql: String,
    pub verdict: RewriteVerdict,
    /// Mean original/rewrite time ratio over the timing pairs (above 1: faster).
    pub speedup: Option<f64>,
    /// Median times over the timing pairs, in milliseconds.
    pub original_ms: Option<f64>,
    pub rewrite_ms: Option<f64>,
    pub timing_pairs: usize,
    /// Timing pairs in which the rewrite ran faster than the original.
    pub faster_pairs: usize,
    pub tokens_generated: usize,
}

/// The outcome of optimization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptimizeAnswer {
    /// The fastest kept rewrite, else the original.
    pub sql: String,
    /// Index of the chosen rewrite in `rewrites`; `None` when the original stands.
    pub chosen: Option<usize>,
    pub rewrites: Vec<Rewrite>,
    /// The original's median time in one run before any rewrite, in milliseconds.
    pub original_ms: f64,
}

impl OptimizeQuestion<'_> {
    /// Refuses a request that cannot be served, before anything runs.
    pub fn check(&self) -> Result<(), RunError> {
        let q = self;
        let invalid = |field: &'static str, reason: String| RunError::Invalid { field, reason };
        if q.sql.trim().is_empty() {
            return Err(invalid("sql", "must not be empty".into()));
        }
        if !(1..=MAX_REWRITES).contains(&q.rewrites) {
            return Err(invalid(
                "rewrites",
                format!("must be between 1 and {MAX_REWRITES}"),
            ));
        }
        if !(q.min_speedup.is_finite() && q.min_speedup >= 1.0) {
            return Err(invalid("min_speedup", "must be at least 1".into()));
        }
        if q.timing_pairs == 0 {
            return Err(invalid("timing_pairs", "must be at least 1".into()));
        }
        if q.method.needs_question() && q.question().is_none() {
            return Err(invalid(
                "question",
                format!("the {} method needs the question", q.method.name()),
            ));
        }
        Ok(())
    }

    fn question(&self) -> Option<&str> {
        self.question.map(str::trim).filter(|s| !s.is_empty())
    }
}

/// Optimizes `q.sql` over `db` with the model behind `asker`, reporting each measured rewrite.
pub fn optimize_sql(
    asker: &Asker<'_>,
    db: &DatabaseHandle,
    q: &OptimizeQuestion<'_>,
    limits: Limits,
    on_rewrite: &mut dyn FnMut(&Rewrite),
) -> Result<OptimizeAnswer, RunError> {
    q.check()?;
    let invalid = |field: &'static str, reason: String| RunError::Invalid { field, reason };
    let question = q.question();
    let mut session = open_session(db, limits)?;
    let original = match session.execute(q.sql) {
        Ok(result) => result,
        Err(e) => {
            return Err(unavailable(db, &e).unwrap_or_else(|| {
                invalid(
                    "sql",
                    format!("does not run, so there is nothing to optimize: {e}"),
                )
            }));
        }
    };
    let prompt = optimize_prompt(db, q.method, q.sql, question.unwrap_or(""));
    let requests: Vec<_> = (0..q.rewrites)
        .map(|i| {
            let mut request =
                asker.request(prompt.clone(), Some(SQL_ANSWER_PREFIX), &[SQL_ANSWER_END]);
            if q.rewrites > 1 {
                // Several greedy answers would be one answer several times.
                request.sampling = Sampling {
                    temperature: 0.7,
                    top_p: 0.95,
                    seed: Some(i as u64),
                    ..request.sampling
                };
            }
            request
        })
        .collect();
    let generations = asker.run("optimization", &requests)?;
    let mut rewrites = Vec::with_capacity(generations.len());
    for generation in generations {
        let sql = postprocess(&generation.text, true);
        let rewrite = measure(
            session.as_mut(),
            db,
            q,
            &original,
            sql,
            generation.tokens_generated,
        )?;
        on_rewrite(&rewrite);
        rewrites.push(rewrite);
    }
    let chosen = rewrites
        .iter()
        .enumerate()
        .filter(|(_, r)| r.verdict == RewriteVerdict::Kept)
        .max_by(|a, b| {
            a.1.speedup
                .unwrap_or(0.0)
                .total_cmp(&b.1.speedup.unwrap_or(0.0))
        })
        .map(|(i, _)| i);
    Ok(OptimizeAnswer {
        sql: chosen.map_or_else(|| q.sql.to_owned(), |i| rewrites[i].sql.clone()),
        chosen,
        rewrites,
        original_ms: original.elapsed.as_secs_f64() * 1e3,
    })
}

fn measure(
    session: &mut dyn crate::backend::Session,
    db: &DatabaseHandle,
    q: &OptimizeQuestion<'_>,
    original: &QueryResult,
    sql: String,
    tokens_generated: usize,
) -> Result<Rewrite, RunError> {
    let mut rewrite = Rewrite {
        sql,
        verdict: RewriteVerdict::Unchanged,
        speedup: None,
        original_ms: None,
        rewrite_ms: None,
        timing_pairs: 0,
        faster_pairs: 0,
        tokens_generated,
    };
    if same_text(&rewrite.sql, q.sql) {
        return Ok(rewrite);
    }
    let result = match session.execute(&rewrite.sql) {
        Ok(result) => result,
        Err(e) => {
            if let Some(fatal) = unavailable(db, &e) {
                return Err(fatal);
            }
            rewrite.verdict = RewriteVerdict::Failed {
                message: e.to_string(),
            };
            return Ok(rewrite);
        }
    };
    let same = !result.truncated
        && !original.truncated
        && spider_eq(&original.rows, &result.rows, order_matters(q.sql));
    if !same {
        rewrite.verdict = RewriteVerdict::DifferentResult;
        return Ok(rewrite);
    }
    rewrite.verdict = RewriteVerdict::NotFaster;
    if let Some(timing) = time_pair(session, q.sql, &rewrite.sql, q.timing_pairs) {
        rewrite.speedup = Some(timing.ratio);
        rewrite.original_ms = Some(timing.baseline_ms);
        rewrite.rewrite_ms = Some(timing.candidate_ms);
        rewrite.timing_pairs = timing.pairs;
        rewrite.faster_pairs = timing.candidate_faster;
        // Faster on average, and in most pairs: on queries of microseconds one slow run of
        // the original can lift the mean ratio past the bar by itself.
        let mostly_faster = 4 * timing.candidate_faster >= 3 * timing.pairs;
        if timing.ratio >= q.min_speedup && mostly_faster {
            rewrite.verdict = RewriteVerdict::Kept;
        }
    }
    Ok(rewrite)
}

const REWRITE_INSTRUCTION: &str = "### Rewrite the SQLite SQL query below so that it runs faster and returns exactly the same result. Reply with the SQL query only, without any explanation.";
const DIRECT_INSTRUCTION: &str = "### Answer the question with the most efficient SQLite SQL query: of the queries that return the right result, the one that runs fastest. Reply with the SQL query only, without any explanation.";

/// A worked rewrite over an example schema, and why it is faster.
struct Example {
    question: &'static str,
    sql: &'static str,
    rewrite: &'static str,
    reason: &'static str,
}

const EXAMPLES: [Example; 3] = [
    Example {
        question: "Which employees work in a department in Boston?",
        sql: "SELECT name FROM employee WHERE dept_id IN (SELECT id FROM department WHERE city = 'Boston')",
        rewrite: "SELECT e.name FROM employee AS e JOIN department AS d ON e.dept_id = d.id WHERE d.city = 'Boston'",
        reason: "department.id is the key, so the join returns the same rows, and the database can use the key's index instead of first building the subquery's list.",
    },
    Example {
        question: "How many different countries do the customers come from?",
        sql: "SELECT count(*) FROM (SELECT DISTINCT country FROM customer)",
        rewrite: "SELECT count(DISTINCT country) FROM customer",
        reason: "counting the distinct values directly avoids writing the subquery's rows to a temporary table.",
    },
    Example {
        question: "What are the names of the products that have been ordered?",
        sql: "SELECT DISTINCT p.name FROM product AS p JOIN order_item AS o ON p.id = o.product_id",
        rewrite: "SELECT p.name FROM product AS p WHERE EXISTS (SELECT 1 FROM order_item AS o WHERE o.product_id = p.id)",
        reason: "EXISTS stops at the first matching order item, where the join reads every one and DISTINCT then removes the repeats (product names are unique here).",
    },
];

/// The prompt of `method` for `sql` (and the question) over `db`.
pub fn optimize_prompt(
    db: &DatabaseHandle,
    method: OptimizeMethod,
    sql: &str,
    question: &str,
) -> String {
    let schema = &db.schema;
    let dialect = schema.dialect;
    let tables = || {
        format!(
            "### {} SQL tables, with their columns:\n#\n{}#\n",
            dialect.name(),
            schema_lines(schema, true)
        )
    };
    match method {
        OptimizeMethod::Direct => format!(
            "{}\n{}### Question: {question}\n### SQL:",
            dialect.retarget(DIRECT_INSTRUCTION),
            tables()
        ),
        OptimizeMethod::WithSql => format!(
            "{}\n### SQL query:\n{sql}\n### Faster SQL query:",
            dialect.retarget(REWRITE_INSTRUCTION)
        ),
        OptimizeMethod::WithContext | OptimizeMethod::FewShot | OptimizeMethod::FewShotComments => {
            let mut text = dialect.retarget(REWRITE_INSTRUCTION);
            text.push('\n');
            if method != OptimizeMethod::WithContext {
                text.push_str("### Examples of such rewrites:\n#\n");
                for example in &EXAMPLES {
                    text.push_str(&format!(
                        "# Question: {}\n# SQL query: {}\n# Faster SQL query: {}\n",
                        example.question, example.sql, example.rewrite
                    ));
                    if method == OptimizeMethod::FewShotComments {
                        text.push_str(&format!("# Why: {}\n", example.reason));
                    }
                    text.push_str("#\n");
                }
            }
            text.push_str(&tables());
            text.push_str(&format!(
                "### Question: {question}\n### SQL query:\n{sql}\n### Faster SQL query:"
            ));
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::ScriptedGenerator;
    use crate::spider_fixture::concert;

    fn question(method: OptimizeMethod, rewrites: usize) -> OptimizeQuestion<'static> {
        OptimizeQuestion {
            question: Some("How many different countries do singers come from?"),
            sql: "SELECT count(*) FROM (SELECT DISTINCT country FROM singer)",
            method,
            rewrites,
            timing_pairs: 5,
            // Any timing passes: the test checks the plumbing, not the clock.
            min_speedup: 1.0,
        }
    }

    #[test]
    fn rewrites_are_checked_then_timed() {
        let db = concert();
        let answers = [
            "```sql\nSELECT count(DISTINCT country) FROM singer",
            "```sql\nSELECT count(country) FROM singer",
            "```sql\nSELECT count(*) FROM (SELECT DISTINCT country FROM singer)",
            "```sql\nSELECT count(DISTINCT nation) FROM singer",
        ];
        let generator = ScriptedGenerator::new(move |r| {
            Ok(answers[r.sampling.seed.unwrap() as usize].to_owned())
        });
        let asker = Asker {
            generator: &generator,
            name: "g",
            max_new_tokens: 64,
        };
        let mut seen = 0;
        let answer = optimize_sql(
            &asker,
            &db,
            &question(OptimizeMethod::FewShotComments, 4),
            Limits::default(),
            &mut |_| seen += 1,
        )
        .unwrap();
        assert_eq!(seen, 4);
        let verdicts: Vec<_> = answer.rewrites.iter().map(|r| r.verdict.clone()).collect();
        assert!(matches!(
            verdicts[0],
            RewriteVerdict::Kept | RewriteVerdict::NotFaster
        ));
        assert_eq!(verdicts[1], RewriteVerdict::DifferentResult);
        assert_eq!(verdicts[2], RewriteVerdict::Unchanged);
        assert!(matches!(verdicts[3], RewriteVerdict::Failed { .. }));
        assert_eq!(answer.rewrites[0].timing_pairs, 5);
        assert!(answer.rewrites[0].speedup.unwrap() > 0.0);
        // min_speedup 1.0 keeps the valid rewrite whenever it is not slower.
        if answer.rewrites[0].verdict == RewriteVerdict::Kept {
            assert_eq!(answer.chosen, Some(0));
            assert_eq!(answer.sql, "SELECT count(DISTINCT country) FROM singer");
        } else {
            assert_eq!(answer.sql, question(OptimizeMethod::FewShot, 1).sql);
        }
        assert_eq!(generator.batches()[0].len(), 4, "one batch");
    }

    #[test]
    fn prompts_differ_by_method() {
        let db = concert();
        let sql = "SELECT name FROM singer";
        let p = |m| optimize_prompt(&db, m, sql, "Names of singers?");
        assert!(!p(OptimizeMethod::WithSql).contains("singer_in_concert"));
        assert!(p(OptimizeMethod::WithContext).contains("singer_in_concert"));
        assert!(!p(OptimizeMethod::WithContext).contains("Boston"));
        assert!(
            p(OptimizeMethod::FewShot).contains("Boston")
                && !p(OptimizeMethod::FewShot).contains("# Why:")
        );
        assert!(p(OptimizeMethod::FewShotComments).contains("# Why:"));
        let direct = p(OptimizeMethod::Direct);
        assert!(direct.contains("most efficient") && !direct.contains(sql));
    }

    #[test]
    fn bad_requests_are_refused() {
        let db = concert();
        let generator = ScriptedGenerator::new(|_| Ok(String::new()));
        let asker = Asker {
            generator: &generator,
            name: "g",
            max_new_tokens: 64,
        };
        let mut q = question(OptimizeMethod::Direct, 1);
        q.sql = "SELECT nope FROM singer";
        let e = optimize_sql(&asker, &db, &q, Limits::default(), &mut |_| {}).unwrap_err();
        assert!(matches!(e, RunError::Invalid { field: "sql", .. }), "{e}");
        let mut q = question(OptimizeMethod::Direct, 9);
        let e = optimize_sql(&asker, &db, &q, Limits::default(), &mut |_| {}).unwrap_err();
        assert!(
            matches!(
                e,
                RunError::Invalid {
                    field: "rewrites",
                    ..
                }
            ),
            "{e}"
        );
        q.rewrites = 1;
        q.question = None;
        let e = optimize_sql(&asker, &db, &q, Limits::default(), &mut |_| {}).unwrap_err();
        assert!(
            matches!(
                e,
                RunError::Invalid {
                    field: "question",
                    ..
                }
            ),
            "{e}"
        );
        q.method = OptimizeMethod::WithSql;
        q.min_speedup = 0.5;
        let e = optimize_sql(&asker, &db, &q, Limits::default(), &mut |_| {}).unwrap_err();
        assert!(
            matches!(
                e,
                RunError::Invalid {
                    field: "min_speedup",
                    ..
                }
            ),
            "{e}"
        );
        assert!(generator.batches().is_empty());
    }
}
