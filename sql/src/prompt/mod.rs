//! Prompt renderers, one file per format family: the twelve zero-shot templates of the
//! benchmarking paper's appendix, its eight evaluated ones among them (`template`), PET-SQL's
//! reference-enhanced representation (`rep`), and XiYan's M-Schema with its generator prompt
//! (`mschema`, `xiyan`).
//!
//! Renderers return the text of the user message only; wrapping it in a model's chat template
//! happens later, in the code that knows the model. Training and serving both render through
//! this module, so a change to any output must bump [`PROMPT_FORMAT_VERSION`].

pub mod mschema;
mod notes;
pub mod rep;
pub mod template;
pub mod xiyan;

use serde::{Deserialize, Serialize};

pub use mschema::render_mschema;
pub use rep::{RepOptions, render_rep};
pub use template::Template;
pub use xiyan::render_xiyan;

/// Version of every format rendered here. Adapters record it at training time and the server
/// refuses an adapter trained on another version: a prompt that differs by one byte is a
/// different input distribution. (The column descriptions of `notes` leave it as it is: they
/// add nothing for a database without descriptions, and every adapter was trained on Spider's
/// SQLite databases, which have none.)
pub const PROMPT_FORMAT_VERSION: &str = "quorum-prompt-1";

/// A rendered user message and how its end shapes the completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    pub text: String,
    /// The text ends with `### SQL:` (possibly followed by a space): a model may answer with a
    /// bare continuation such as `count(*) FROM singer`, which post-processing completes with
    /// `SELECT `.
    pub ends_with_sql_marker: bool,
    /// The text ends with `SELECT` (the "Complete" templates): the completion continues the
    /// statement, so post-processing must put `SELECT ` back in front.
    pub ends_with_select: bool,
}

impl Prompt {
    /// Whether post-processing should prepend `SELECT ` to a completion that lacks it.
    pub fn completion_may_lack_select(&self) -> bool {
        self.ends_with_sql_marker || self.ends_with_select
    }
}

/// A few-shot demonstration: a question and its gold SQL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Demo {
    pub question: String,
    pub sql: String,
}

impl Demo {
    pub fn new(question: impl Into<String>, sql: impl Into<String>) -> Self {
        Self {
            question: question.into(),
            sql: sql.into(),
        }
    }
}

/// `name(c1,c2,…)` with the column separator a format wants: the benchmarking paper's
/// SimpleDDL writes `,`, PET-SQL's code writes `, `.
pub(crate) fn simple_ddl(table: &crate::schema::Table, separator: &str) -> String {
    let columns: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
    format!("{}({})", table.name, columns.join(separator))
}

/// SimpleDDL lines in the Markdown formats: `# t(…);` for every table but the last, which ends
/// with `.`, each followed by a newline.
pub(crate) fn simple_ddl_md_lines(schema: &crate::schema::Schema, separator: &str) -> String {
    let lines: Vec<String> = schema
        .tables
        .iter()
        .map(|t| format!("# {}", simple_ddl(t, separator)))
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!("{}.\n", lines.join(";\n"))
}

#[cfg(test)]
pub(crate) mod fixture {
    use crate::schema::{IntrospectOptions, Schema};
    use crate::spider_fixture::spider_db;

    pub(crate) fn schema(db_id: &str) -> Schema {
        Schema::from_sqlite(&spider_db(db_id), db_id, IntrospectOptions::default())
            .expect("Spider database introspects")
    }
}
