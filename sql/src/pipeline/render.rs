//! Generation prompts for each configured format, and the revision prompt.
//!
//! Revision follows seed 1's fallback (show the full schema again, since a failure often
//! means linking dropped a table) combined with seed 2's self-debugging (show the failed SQL
//! and the database's error message, the most useful feedback in the benchmarking paper).
//! Its text is XiYan's refiner prompt over M-Schema, whatever format the generator used in
//! round 2: one revision format keeps the number of prompt formats a model must know small.

use super::config::PromptFormat;
use crate::error_hint::explain_error;
use crate::model::{PromptMessages, SQL_ANSWER_PREFIX};
use crate::prompt::{Demo, Prompt, RepOptions, Template, render_mschema, render_rep, render_xiyan};
use crate::schema::Schema;

/// What one generation prompt is about.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask<'a> {
    pub question: &'a str,
    /// BIRD-style hints; Spider has none.
    pub evidence: Option<&'a str>,
}

impl Ask<'_> {
    /// Formats without an evidence slot get the evidence after the question, on its line:
    /// the hint must reach the model, and the question line is where such formats put intent.
    fn question_line(&self) -> String {
        match self.evidence.filter(|e| !e.trim().is_empty()) {
            Some(evidence) => format!("{} ({})", self.question, evidence.trim()),
            None => self.question.to_owned(),
        }
    }
}

/// Renders the generation prompt of `format` over `schema`. Only RE_p carries demos; the
/// zero-shot formats ignore them.
pub(crate) fn render_generation(
    format: PromptFormat,
    rep: RepOptions,
    schema: &Schema,
    ask: Ask<'_>,
    demos: &[Demo],
) -> Prompt {
    match format {
        PromptFormat::Rep => render_rep(schema, &ask.question_line(), demos, rep),
        PromptFormat::MSchema => render_xiyan(schema, ask.question, ask.evidence.unwrap_or("")),
        PromptFormat::SimpleDdl => Template::SimpleDdlMdChat.render(schema, &ask.question_line()),
        PromptFormat::Template(template) => template.render(schema, &ask.question_line()),
    }
}

/// A generation prompt as a generator sees it, for code outside the pipeline that must ask
/// exactly what the pipeline asks (the trainer builds its examples with this): the prompt of
/// `format` over `schema` for `question` (and BIRD-style `evidence`), without demonstrations.
pub fn generation_prompt(
    format: PromptFormat,
    rep: RepOptions,
    schema: &Schema,
    question: &str,
    evidence: Option<&str>,
) -> Prompt {
    render_generation(format, rep, schema, Ask { question, evidence }, &[])
}

/// The chat messages of a generation prompt; with `answer_prefix` the answer is started for the
/// model with [`SQL_ANSWER_PREFIX`].
pub fn generation_messages(prompt: &Prompt, answer_prefix: bool) -> PromptMessages {
    let mut messages = PromptMessages::user(prompt.text.clone());
    if answer_prefix {
        messages.answer_prefix = Some(SQL_ANSWER_PREFIX.to_owned());
    }
    messages
}

/// Why a candidate is sent back for revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Feedback {
    /// The database (or the sandbox) refused it with this message.
    Error(String),
    /// It ran and returned no rows.
    Empty,
}

const REVISE_ERROR: &str = "You are a SQLite expert. There is a SQL query generated based on the following Database Schema description and the potential Evidence to respond to the Question. However, executing this SQL has resulted in an error, and you need to fix it based on the error message. Utilize your knowledge of SQLite to generate the correct SQL.";
const REVISE_EMPTY: &str = "You are a SQLite expert. There is a SQL query generated based on the following Database Schema description and the potential Evidence to respond to the Question. However, executing this SQL returned no rows, which suggests a wrong value, join or condition; check it against the schema and fix it if needed. Utilize your knowledge of SQLite to generate the correct SQL.";

/// The revision prompt: full schema, evidence, question, the failed SQL, what happened and,
/// for errors about names, what the schema says about them ([`explain_error`]). The answer
/// is started for the model with [`SQL_ANSWER_PREFIX`].
pub(crate) fn render_revision(
    schema: &Schema,
    ask: Ask<'_>,
    sql: &str,
    feedback: &Feedback,
) -> Prompt {
    let (instruction, result) = match feedback {
        Feedback::Error(message) => (schema.dialect.retarget(REVISE_ERROR), message.clone()),
        Feedback::Empty => (schema.dialect.retarget(REVISE_EMPTY), "[]".to_owned()),
    };
    let hint = match feedback {
        Feedback::Error(message) => explain_error(message, schema)
            .map(|h| format!("\n\n【Hint】\n{h}"))
            .unwrap_or_default(),
        Feedback::Empty => String::new(),
    };
    let text = format!(
        "{instruction}\n\n【Database Schema】\n{schema}\n\n【Evidence】\n{evidence}\n\n【Question】\n{question}\n\n【SQL】\n```sql\n{sql}\n```\n\n【Execution result】\n{result}{hint}\n\nWrite the corrected SQL query.",
        schema = render_mschema(schema),
        evidence = ask.evidence.unwrap_or(""),
        question = ask.question,
    );
    Prompt {
        text,
        ends_with_sql_marker: false,
        ends_with_select: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::fixture::schema;

    #[test]
    fn evidence_reaches_every_format() {
        let schema = schema("concert_singer");
        let ask = Ask {
            question: "How many singers?",
            evidence: Some("singer refers to singer table"),
        };
        for format in [
            PromptFormat::Rep,
            PromptFormat::MSchema,
            PromptFormat::SimpleDdl,
            PromptFormat::Template(Template::DdlMdChat),
        ] {
            let prompt = render_generation(format, RepOptions::default(), &schema, ask, &[]);
            assert!(
                prompt.text.contains("singer refers to singer table"),
                "{format:?}"
            );
        }
        let plain = Ask {
            question: "How many singers?",
            evidence: None,
        };
        let prompt = render_generation(
            PromptFormat::Rep,
            RepOptions::default(),
            &schema,
            plain,
            &[],
        );
        assert!(
            prompt
                .text
                .ends_with("### Question: How many singers?\n### SQL: ")
        );
    }

    #[test]
    fn only_rep_shows_demos() {
        let schema = schema("concert_singer");
        let ask = Ask {
            question: "How many singers?",
            evidence: None,
        };
        let demos = [Demo::new("How many pets?", "SELECT count(*) FROM pets")];
        let rep = render_generation(
            PromptFormat::Rep,
            RepOptions::default(),
            &schema,
            ask,
            &demos,
        );
        assert!(rep.text.contains("How many pets?"));
        let ddl = render_generation(
            PromptFormat::SimpleDdl,
            RepOptions::default(),
            &schema,
            ask,
            &demos,
        );
        assert!(!ddl.text.contains("How many pets?"));
    }

    #[test]
    fn revision_prompt_shows_sql_and_error() {
        let schema = schema("concert_singer");
        let ask = Ask {
            question: "How many singers?",
            evidence: None,
        };
        let error = Feedback::Error("no such column: nme".into());
        let prompt = render_revision(&schema, ask, "SELECT nme FROM singer", &error);
        assert!(prompt.text.contains("```sql\nSELECT nme FROM singer\n```"));
        assert!(
            prompt
                .text
                .contains("【Execution result】\nno such column: nme")
        );
        assert!(prompt.text.contains("# Table: stadium"), "full schema");
        assert!(prompt.text.ends_with("Write the corrected SQL query."));
        let unknown = Feedback::Error("no such column: Song_Name".into());
        let hinted = render_revision(&schema, ask, "SELECT Song_Name FROM stadium", &unknown);
        assert!(
            hinted
                .text
                .contains("【Hint】\n`Song_Name` is a column of singer"),
            "{}",
            hinted.text
        );
        let empty = render_revision(&schema, ask, "SELECT 1", &Feedback::Empty);
        assert!(empty.text.contains("returned no rows"));
    }
}
