//! The benchmarking paper's sub-tasks besides text-to-SQL itself, each on its own: schema
//! linking (`link`), SQL debugging with its error taxonomy (`debug`, `taxonomy`), SQL
//! optimization timed on the database (`optimize`), and SQL-to-text with the semantic
//! consistency check (`explain`).
//!
//! Like the pipeline, these are plain synchronous functions over the model traits of
//! [`crate::model`]: the server implements the traits with its engines, the tests with
//! scripted fakes. Every SQL a sub-task runs goes through a [`Session`] of the database's
//! backend, so the sandbox's guards hold here as in the pipeline.

pub mod debug;
pub mod explain;
pub mod link;
pub mod optimize;
pub mod taxonomy;

use crate::backend::Session;
use crate::database::DatabaseHandle;
use crate::model::{Generation, GenerationRequest, Generator, PromptMessages, Sampling};
use crate::prompt::simple_ddl;
use crate::run_error::RunError;
use crate::sandbox::{ExecError, Limits};
use crate::schema::Schema;

/// The generator a sub-task asks, by its configured name, and how long answers may be.
#[derive(Clone, Copy)]
pub struct Asker<'a> {
    pub generator: &'a dyn Generator,
    /// The configured generator (model plus optional adapter) the requests name.
    pub name: &'a str,
    pub max_new_tokens: usize,
}

impl std::fmt::Debug for Asker<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker")
            .field("name", &self.name)
            .field("max_new_tokens", &self.max_new_tokens)
            .finish_non_exhaustive()
    }
}

impl Asker<'_> {
    /// A greedy request for `prompt`, its answer started with `answer_prefix` and ended before
    /// the first of `stop`.
    pub(crate) fn request(
        &self,
        prompt: String,
        answer_prefix: Option<&str>,
        stop: &[&str],
    ) -> GenerationRequest {
        GenerationRequest {
            generator: self.name.to_owned(),
            prompt: PromptMessages {
                system: None,
                user: prompt,
                answer_prefix: answer_prefix.map(str::to_owned),
            },
            sampling: Sampling {
                max_new_tokens: self.max_new_tokens,
                ..Sampling::default()
            },
            stop: stop.iter().map(|s| (*s).to_owned()).collect(),
            grammar: None,
            // The prompts quote the query the answer reworks; the engine drafts from them.
            draft_hint: None,
            keep_prefix: None,
        }
    }

    /// Runs `requests` as one batch; a failed call fails the sub-task (each call is needed).
    pub(crate) fn run(
        &self,
        stage: &'static str,
        requests: &[GenerationRequest],
    ) -> Result<Vec<Generation>, RunError> {
        let outputs = self.generator.generate_batch(requests);
        if outputs.len() != requests.len() {
            return Err(RunError::BatchSize {
                expected: requests.len(),
                got: outputs.len(),
            });
        }
        outputs
            .into_iter()
            .map(|r| r.map_err(|source| RunError::Model { stage, source }))
            .collect()
    }
}

/// Opens a guarded session on `db` for a sub-task's executions.
pub(crate) fn open_session(
    db: &DatabaseHandle,
    limits: Limits,
) -> Result<Box<dyn Session>, RunError> {
    db.backend
        .open_session(limits)
        .map_err(|source| RunError::Database {
            db_id: db.db_id.clone(),
            source,
        })
}

/// A database that stopped answering fails the sub-task; any other execution error is an
/// outcome to report.
pub(crate) fn unavailable(db: &DatabaseHandle, error: &ExecError) -> Option<RunError> {
    matches!(error, ExecError::Unavailable { .. }).then(|| RunError::Database {
        db_id: db.db_id.clone(),
        source: error.clone(),
    })
}

/// The schema as the benchmarking paper's sub-task prompts show it: one `# table(col,…)` line
/// per table (SimpleDDL), then, when asked, one line per foreign key.
pub(crate) fn schema_lines(schema: &Schema, foreign_keys: bool) -> String {
    let mut text: String = schema
        .tables
        .iter()
        .map(|t| format!("# {}\n", simple_ddl(t, ",")))
        .collect();
    if foreign_keys && !schema.foreign_keys.is_empty() {
        text.push_str("# Foreign keys:\n");
        for fk in &schema.foreign_keys {
            text.push_str(&format!(
                "# {}({}) REFERENCES {}({})\n",
                fk.from_table, fk.from_column, fk.to_table, fk.to_column
            ));
        }
    }
    text
}

/// Case-insensitive, whitespace-insensitive equality of two SQL texts (a "rewrite" that only
/// changes spacing or case is no rewrite).
pub(crate) fn same_text(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .trim_end_matches(';')
            .trim()
            .to_lowercase()
    };
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::fixture::schema;

    #[test]
    fn schema_lines_with_and_without_keys() {
        let schema = schema("concert_singer");
        let plain = schema_lines(&schema, false);
        assert!(
            plain.starts_with("# stadium(Stadium_ID,Location,"),
            "{plain}"
        );
        assert!(!plain.contains("REFERENCES"));
        let keyed = schema_lines(&schema, true);
        assert!(
            keyed.contains("# singer_in_concert(Singer_ID) REFERENCES singer(Singer_ID)"),
            "{keyed}"
        );
    }

    #[test]
    fn same_text_ignores_spacing_case_and_semicolon() {
        assert!(same_text("SELECT a  FROM t;", "select a from t"));
        assert!(!same_text("SELECT a FROM t", "SELECT b FROM t"));
    }
}
