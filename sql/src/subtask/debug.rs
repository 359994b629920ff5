//! SQL debugging as a service (the benchmarking paper's section 4.2): given a question, a
//! database and a SQL that fails or returns the wrong result, ask the model for a correct one,
//! round after round, with one of the paper's five amounts of information:
//!
//! 1. regenerate: the plain text-to-SQL prompt again (a baseline: the wrong SQL is not shown);
//! 2. the wrong SQL;
//! 3. the wrong SQL and the system error (or only "the result is wrong");
//! 4. the wrong SQL and every error detail (the result error's type from [`taxonomy`]);
//! 5. as 4, with an explanation of each type.
//!
//! What counts as fixed depends on what the caller knows. With a reference SQL (a gold query)
//! each SQL is diagnosed against the reference's result, and debugging stops at the first
//! correct one. Without one, only errors can be seen: debugging stops at the first SQL that
//! runs, and a SQL that already runs (and no error was reported for it) is left as it is.
//!
//! [`taxonomy`]: super::taxonomy

use serde::{Deserialize, Serialize};

use super::taxonomy::{ResultError, classify_result_error};
use super::{Asker, open_session, schema_lines, unavailable};
use crate::backend::Session;
use crate::compare::{order_matters, spider_eq};
use crate::database::DatabaseHandle;
use crate::error_hint::explain_error;
use crate::model::{SQL_ANSWER_END, SQL_ANSWER_PREFIX};
use crate::postprocess::postprocess;
use crate::prompt::Template;
use crate::run_error::RunError;
use crate::sandbox::{ExecError, Limits, QueryResult};

/// How much the debugging prompt tells the model, in the paper's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DebugStrategy {
    Regenerate,
    WrongSql,
    SystemError,
    AllErrors,
    Comments,
}

impl DebugStrategy {
    pub const ALL: [DebugStrategy; 5] = [
        Self::Regenerate,
        Self::WrongSql,
        Self::SystemError,
        Self::AllErrors,
        Self::Comments,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Regenerate => "regenerate",
            Self::WrongSql => "wrong_sql",
            Self::SystemError => "system_error",
            Self::AllErrors => "all_errors",
            Self::Comments => "comments",
        }
    }
}

/// The most debugging rounds one request may ask for (the paper finds the gains stop after
/// one or two).
pub const MAX_DEBUG_ROUNDS: usize = 3;

/// The sampling temperature of a round whose prompt is the round before's.
const REPEAT_TEMPERATURE: f32 = 0.8;

/// What is wrong with one SQL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Diagnosis {
    /// It returns the reference's result.
    Correct,
    /// The database refused it (or the caller reported this error for it).
    SystemError { message: String },
    /// It runs, but its result differs from the reference's.
    ResultError { error: ResultError },
    /// It runs; there is no reference to compare with.
    Runs,
}

impl Diagnosis {
    /// A stable label: `correct`, `system_error`, `runs`, or the result error's name.
    pub fn name(&self) -> String {
        match self {
            Self::Correct => "correct".into(),
            Self::SystemError { .. } => "system_error".into(),
            Self::ResultError { error } => error.name(),
            Self::Runs => "runs".into(),
        }
    }

    /// Whether debugging can stop here.
    fn settled(&self, has_reference: bool) -> bool {
        match self {
            Self::Correct => true,
            Self::Runs => !has_reference,
            Self::SystemError { .. } | Self::ResultError { .. } => false,
        }
    }
}

/// One debugging request.
#[derive(Debug, Clone)]
pub struct DebugQuestion<'a> {
    pub question: &'a str,
    pub evidence: Option<&'a str>,
    /// The SQL to fix.
    pub sql: &'a str,
    /// A query whose result is the right one (a gold SQL), when the caller has it.
    pub reference_sql: Option<&'a str>,
    /// An error the caller saw for `sql` (on another engine, say), shown as the system error
    /// of the first round when the SQL runs here.
    pub reported_error: Option<&'a str>,
    pub strategy: DebugStrategy,
    /// 1 to [`MAX_DEBUG_ROUNDS`].
    pub rounds: usize,
}

/// One round: the SQL the model wrote and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebugRound {
    pub sql: String,
    pub diagnosis: Diagnosis,
    pub tokens_generated: usize,
}

/// The outcome of debugging.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebugAnswer {
    /// What was wrong with the given SQL.
    pub initial: Diagnosis,
    /// The rounds that ran, in order (none when the given SQL needed no fix).
    pub rounds: Vec<DebugRound>,
    /// The answer: the last round's SQL, or the given SQL when no round ran.
    pub sql: String,
    /// The answer is correct (with a reference) or runs (without one).
    pub fixed: bool,
}

impl DebugQuestion<'_> {
    /// Refuses a request that cannot be served, before anything runs.
    pub fn check(&self) -> Result<(), RunError> {
        let q = self;
        if !(1..=MAX_DEBUG_ROUNDS).contains(&q.rounds) {
            return Err(RunError::Invalid {
                field: "rounds",
                reason: format!("must be between 1 and {MAX_DEBUG_ROUNDS}"),
            });
        }
        if q.sql.trim().is_empty() {
            return Err(RunError::Invalid {
                field: "sql",
                reason: "must not be empty".into(),
            });
        }
        Ok(())
    }
}

/// Debugs `q` over `db` with the model behind `asker`, reporting each round as it finishes.
pub fn debug_sql(
    asker: &Asker<'_>,
    db: &DatabaseHandle,
    q: &DebugQuestion<'_>,
    limits: Limits,
    on_round: &mut dyn FnMut(&DebugRound),
) -> Result<DebugAnswer, RunError> {
    q.check()?;
    let mut session = open_session(db, limits)?;
    let reference = match q.reference_sql {
        Some(sql) => match session.execute(sql) {
            Ok(result) => Some((sql, result)),
            Err(e) => {
                if let Some(fatal) = unavailable(db, &e) {
                    return Err(fatal);
                }
                return Err(RunError::Invalid {
                    field: "reference_sql",
                    reason: format!("does not run: {e}"),
                });
            }
        },
        None => None,
    };
    let reference = reference.as_ref().map(|(sql, result)| (*sql, result));
    let mut initial = diagnose(session.as_mut(), db, q.sql, reference)?;
    // An error reported from elsewhere counts for a SQL that runs here and is not known to be
    // right.
    if let (Diagnosis::Runs, Some(error)) = (&initial, q.reported_error) {
        initial = Diagnosis::SystemError {
            message: error.to_owned(),
        };
    }
    let has_reference = reference.is_some();
    let mut answer = DebugAnswer {
        fixed: initial.settled(has_reference),
        initial: initial.clone(),
        rounds: Vec::new(),
        sql: q.sql.to_owned(),
    };
    let (mut wrong_sql, mut diagnosis) = (q.sql.to_owned(), initial);
    let mut previous_prompt = String::new();
    for round in 0..q.rounds {
        if diagnosis.settled(has_reference) {
            break;
        }
        let prompt = debug_prompt(db, q, &wrong_sql, &diagnosis);
        // Greedy decoding of the prompt of the round before would write the same SQL again
        // (the model repeated its SQL, or the strategy shows no SQL): sample instead.
        let repeated = prompt == previous_prompt;
        previous_prompt.clone_from(&prompt);
        let mut request = asker.request(prompt, Some(SQL_ANSWER_PREFIX), &[SQL_ANSWER_END]);
        if repeated {
            request.sampling.temperature = REPEAT_TEMPERATURE;
            request.sampling.seed = Some(round as u64);
        }
        let generation = asker
            .run("debugging", std::slice::from_ref(&request))?
            .remove(0);
        let sql = postprocess(&generation.text, true);
        diagnosis = diagnose(session.as_mut(), db, &sql, reference)?;
        let round = DebugRound {
            sql: sql.clone(),
            diagnosis: diagnosis.clone(),
            tokens_generated: generation.tokens_generated,
        };
        on_round(&round);
        answer.rounds.push(round);
        answer.sql = sql.clone();
        answer.fixed = diagnosis.settled(has_reference);
        wrong_sql = sql;
    }
    Ok(answer)
}

/// Runs `sql` and says what is wrong with it, against `reference` (its SQL and result) when
/// given.
pub fn diagnose(
    session: &mut dyn Session,
    db: &DatabaseHandle,
    sql: &str,
    reference: Option<(&str, &QueryResult)>,
) -> Result<Diagnosis, RunError> {
    let result = match session.execute(sql) {
        Ok(result) => result,
        Err(e) => {
            if let Some(fatal) = unavailable(db, &e) {
                return Err(fatal);
            }
            return Ok(Diagnosis::SystemError {
                message: system_message(&e),
            });
        }
    };
    let Some((reference_sql, expected)) = reference else {
        return Ok(Diagnosis::Runs);
    };
    let equal = !result.truncated
        && !expected.truncated
        && spider_eq(&expected.rows, &result.rows, order_matters(reference_sql));
    Ok(if equal {
        Diagnosis::Correct
    } else {
        Diagnosis::ResultError {
            error: classify_result_error(sql, reference_sql, db.dialect()),
        }
    })
}

/// The database's words for an error, without our own prefix.
fn system_message(e: &ExecError) -> String {
    match e {
        ExecError::Syntax { message } | ExecError::Sqlite { message } => message.clone(),
        other => other.to_string(),
    }
}

const DEBUG_INSTRUCTION: &str =
    "Write the correct SQLite SQL query for the question, using the database below";

/// The prompt of one debugging round.
pub fn debug_prompt(
    db: &DatabaseHandle,
    q: &DebugQuestion<'_>,
    wrong_sql: &str,
    diagnosis: &Diagnosis,
) -> String {
    let schema = &db.schema;
    let question = match q.evidence.map(str::trim).filter(|e| !e.is_empty()) {
        Some(evidence) => format!("{} ({evidence})", q.question),
        None => q.question.to_owned(),
    };
    if q.strategy == DebugStrategy::Regenerate {
        return Template::SimpleDdlMdChat.render(schema, &question).text;
    }
    let told = match q.strategy {
        DebugStrategy::WrongSql => ", and the wrong SQL query written for it before",
        _ => ", the wrong SQL query written for it before and what is wrong with it",
    };
    let mut text = format!(
        "### {}{told}.\n### {} SQL tables, with their columns:\n#\n{}#\n### Question: {question}\n### Wrong SQL query:\n{wrong_sql}\n",
        schema.dialect.retarget(DEBUG_INSTRUCTION),
        schema.dialect.name(),
        schema_lines(schema, true),
    );
    if q.strategy >= DebugStrategy::SystemError {
        text.push_str("### Error information:\n");
        text.push_str(&error_information(q.strategy, diagnosis));
        text.push('\n');
    }
    // Every detail: for an error about a name, what the schema says about it (which table has
    // that column, the closest real names), as the pipeline's revision prompt shows.
    if q.strategy >= DebugStrategy::AllErrors
        && let Diagnosis::SystemError { message } = diagnosis
        && let Some(hint) = explain_error(message, schema)
    {
        text.push_str(&hint);
        text.push('\n');
    }
    text.push_str("### Correct SQL query:");
    text
}

/// What the prompt says went wrong, as much as the strategy tells.
fn error_information(strategy: DebugStrategy, diagnosis: &Diagnosis) -> String {
    match diagnosis {
        Diagnosis::SystemError { message } => format!("The database refused the query: {message}"),
        Diagnosis::ResultError { error } => {
            let rough = "The query runs, but its result is wrong.";
            match strategy {
                DebugStrategy::AllErrors => format!("{rough}\n{}", error.label()),
                DebugStrategy::Comments => format!("{rough}\n{}", error.comment()),
                _ => rough.to_owned(),
            }
        }
        Diagnosis::Runs | Diagnosis::Correct => {
            "The query runs, but its result is not what the question asks for.".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::ScriptedGenerator;
    use crate::spider_fixture::concert;
    use crate::subtask::taxonomy::Mismatch;

    fn question<'a>(
        sql: &'a str,
        reference: Option<&'a str>,
        strategy: DebugStrategy,
    ) -> DebugQuestion<'a> {
        DebugQuestion {
            question: "How many singers are from France?",
            evidence: None,
            sql,
            reference_sql: reference,
            reported_error: None,
            strategy,
            rounds: 2,
        }
    }

    const GOLD: &str = "SELECT count(*) FROM singer WHERE country = 'France'";

    #[test]
    fn stops_at_the_first_correct_round() {
        let db = concert();
        // First fix still wrong (all singers), second right.
        let answers = std::sync::Mutex::new(vec![
            "```sql\nSELECT count(*) FROM singer WHERE country = 'France'".to_owned(),
            "```sql\nSELECT count(*) FROM singer".to_owned(),
        ]);
        let generator = ScriptedGenerator::new(move |_| Ok(answers.lock().unwrap().pop().unwrap()));
        let asker = Asker {
            generator: &generator,
            name: "g",
            max_new_tokens: 64,
        };
        let mut seen = Vec::new();
        let mut q = question(
            "SELECT count(*) FROM singers WHERE country = 'France'",
            Some(GOLD),
            DebugStrategy::Comments,
        );
        q.rounds = 3;
        let answer = debug_sql(&asker, &db, &q, Limits::default(), &mut |r| {
            seen.push(r.sql.clone())
        })
        .unwrap();
        assert_eq!(answer.initial.name(), "system_error");
        assert_eq!(answer.rounds.len(), 2, "stopped once correct");
        assert_eq!(answer.rounds[0].diagnosis.name(), "condition_filter");
        assert_eq!(answer.rounds[1].diagnosis, Diagnosis::Correct);
        assert!(answer.fixed);
        assert_eq!(
            answer.sql,
            "SELECT count(*) FROM singer WHERE country = 'France'"
        );
        assert_eq!(seen.len(), 2);
        // The second prompt carried the first round's result error, with its comment.
        let prompts = generator.batches();
        let second = &prompts[1][0].prompt.user;
        assert!(
            second.contains("### Wrong SQL query:\nSELECT count(*) FROM singer\n"),
            "{second}"
        );
        assert!(second.contains("a filter condition is wrong"), "{second}");
    }

    #[test]
    fn each_strategy_tells_more() {
        let db = concert();
        let wrong = "SELECT name FROM singer";
        let diagnosis = Diagnosis::ResultError {
            error: ResultError::Columns(Mismatch::Missing),
        };
        let prompt = |s| debug_prompt(&db, &question(wrong, Some(GOLD), s), wrong, &diagnosis);
        let regenerate = prompt(DebugStrategy::Regenerate);
        assert!(!regenerate.contains(wrong));
        let wrong_sql = prompt(DebugStrategy::WrongSql);
        assert!(wrong_sql.contains(wrong) && !wrong_sql.contains("Error information"));
        let system = prompt(DebugStrategy::SystemError);
        assert!(system.contains("result is wrong") && !system.contains("Column selection"));
        let all = prompt(DebugStrategy::AllErrors);
        assert!(all.contains("Column selection error: missing columns."));
        let comments = prompt(DebugStrategy::Comments);
        assert!(comments.contains("the question asks for more columns"));
        // A name error gets the schema's facts about the name only with every detail.
        let refused = Diagnosis::SystemError {
            message: "no such column: nme".into(),
        };
        let bad = "SELECT nme FROM singer";
        let prompt = |s| debug_prompt(&db, &question(bad, None, s), bad, &refused);
        let system = prompt(DebugStrategy::SystemError);
        assert!(system.contains("The database refused the query: no such column: nme"));
        assert!(!system.contains("No table has"));
        assert!(
            prompt(DebugStrategy::AllErrors).contains("No table has a column named `nme`"),
            "{}",
            prompt(DebugStrategy::AllErrors)
        );
    }

    #[test]
    fn without_a_reference_a_running_sql_is_left_alone() {
        let db = concert();
        let generator =
            ScriptedGenerator::new(|_| Ok("```sql\nSELECT count(*) FROM singer".into()));
        let asker = Asker {
            generator: &generator,
            name: "g",
            max_new_tokens: 64,
        };
        let q = question(
            "SELECT count(*) FROM singer",
            None,
            DebugStrategy::SystemError,
        );
        let answer = debug_sql(&asker, &db, &q, Limits::default(), &mut |_| {}).unwrap();
        assert_eq!(answer.initial, Diagnosis::Runs);
        assert!(answer.rounds.is_empty() && answer.fixed);
        assert!(generator.batches().is_empty(), "no model call");
        // A reported error makes it a system error to fix; the fix that runs ends it.
        let mut reported = q.clone();
        reported.reported_error = Some("relation \"singer\" does not exist");
        let answer = debug_sql(&asker, &db, &reported, Limits::default(), &mut |_| {}).unwrap();
        assert_eq!(answer.initial.name(), "system_error");
        assert_eq!(answer.rounds.len(), 1);
        assert!(answer.fixed);
        assert!(
            generator.batches()[0][0]
                .prompt
                .user
                .contains("relation \"singer\" does not exist")
        );
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
        let mut q = question(
            "SELECT 1",
            Some("SELECT nope FROM singer"),
            DebugStrategy::Regenerate,
        );
        let e = debug_sql(&asker, &db, &q, Limits::default(), &mut |_| {}).unwrap_err();
        assert!(
            matches!(
                e,
                RunError::Invalid {
                    field: "reference_sql",
                    ..
                }
            ),
            "{e}"
        );
        q.reference_sql = None;
        q.rounds = 4;
        let e = debug_sql(&asker, &db, &q, Limits::default(), &mut |_| {}).unwrap_err();
        assert!(
            matches!(
                e,
                RunError::Invalid {
                    field: "rounds",
                    ..
                }
            ),
            "{e}"
        );
    }
}
