//! Generation prompts for each configured format, and the revision prompt.
//!
//! Revision follows the de-semanticization paper's fallback (show the full schema again, since a
//! failure often means linking dropped a table) combined with the benchmarking study's
//! self-debugging (show the failed SQL and the database's error message, the most useful feedback
//! in the benchmarking paper). Its text is XiYan's refiner prompt over M-Schema, whatever format
//! the generator used in round 2: one revision format keeps the number of prompt formats a model
//! must know small.

use std::borrow::Cow;

use super::config::PromptFormat;
use crate::error_hint::explain_error;
use crate::linking::value_index::ValueMatch;
use crate::model::{PromptMessages, SQL_ANSWER_PREFIX};
use crate::prompt::{Demo, Prompt, RepOptions, Template, render_mschema, render_rep, render_xiyan};
use crate::schema::Schema;
use crate::value::Value;

/// What one generation prompt is about.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask<'a> {
    pub question: &'a str,
    /// BIRD-style hints; Spider has none.
    pub evidence: Option<&'a str>,
    /// Stored values the question names (value retrieval).
    pub values: &'a [ValueMatch],
}

impl Ask<'_> {
    /// Formats without an evidence slot or column examples get the evidence and the matched
    /// values after the question, on its line: the hint must reach the model, and the question
    /// line is where such formats put intent. Values are written `table.column = 'value'`, so
    /// each is shown with its column.
    fn question_line(&self, schema: &Schema) -> String {
        let mut hints = Vec::new();
        if let Some(evidence) = self.evidence.filter(|e| !e.trim().is_empty()) {
            hints.push(evidence.trim().to_owned());
        }
        let values: Vec<String> = shown_values(self.values, schema)
            .map(|m| format!("{}.{} = {}", m.table, m.column, sql_string(&m.value)))
            .collect();
        if !values.is_empty() {
            hints.push(format!("values in the database: {}", values.join(", ")));
        }
        match hints.is_empty() {
            true => self.question.to_owned(),
            false => format!("{} ({})", self.question, hints.join("; ")),
        }
    }
}

/// The matches whose table and column `schema` shows.
fn shown_values<'v>(
    values: &'v [ValueMatch],
    schema: &'v Schema,
) -> impl Iterator<Item = &'v ValueMatch> {
    values.iter().filter(|m| {
        schema
            .table(&m.table)
            .is_some_and(|t| t.column(&m.column).is_some())
    })
}

fn sql_string(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// `schema` with each matched value first among its column's examples, where M-Schema shows
/// them beside the column.
fn with_matched_examples<'s>(schema: &'s Schema, values: &[ValueMatch]) -> Cow<'s, Schema> {
    if shown_values(values, schema).next().is_none() {
        return Cow::Borrowed(schema);
    }
    let mut schema = schema.clone();
    for m in values.iter().rev() {
        let column = schema
            .tables
            .iter_mut()
            .find(|t| t.name == m.table)
            .and_then(|t| t.columns.iter_mut().find(|c| c.name == m.column));
        if let Some(column) = column {
            let value = Value::Text(m.value.clone());
            column.examples.retain(|e| *e != value);
            column.examples.insert(0, value);
        }
    }
    Cow::Owned(schema)
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
        PromptFormat::Rep => render_rep(schema, &ask.question_line(schema), demos, rep),
        PromptFormat::MSchema => render_xiyan(
            &with_matched_examples(schema, ask.values),
            ask.question,
            ask.evidence.unwrap_or(""),
        ),
        PromptFormat::SimpleDdl => {
            Template::SimpleDdlMdChat.render(schema, &ask.question_line(schema))
        }
        PromptFormat::Template(template) => template.render(schema, &ask.question_line(schema)),
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
    let ask = Ask {
        question,
        evidence,
        values: &[],
    };
    render_generation(format, rep, schema, ask, &[])
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
        schema = render_mschema(&with_matched_examples(schema, ask.values)),
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
            values: &[],
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
            values: &[],
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
            values: &[],
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
            values: &[],
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

    #[test]
    fn matched_values_are_shown_beside_their_columns_in_every_format() {
        let schema = crate::prompt::fixture::schema("concert_singer");
        let values = [
            ValueMatch {
                table: "singer".into(),
                column: "Country".into(),
                value: "Netherlands".into(),
                score: 1.0,
            },
            ValueMatch {
                table: "nowhere".into(),
                column: "x".into(),
                value: "gone".into(),
                score: 1.0,
            },
        ];
        let ask = Ask {
            question: "Which singers are from the netherlands?",
            evidence: None,
            values: &values,
        };
        for format in [PromptFormat::Rep, PromptFormat::SimpleDdl] {
            let text = render_generation(format, RepOptions::default(), &schema, ask, &[]).text;
            assert!(
                text.contains(
                    "netherlands? (values in the database: singer.Country = 'Netherlands')"
                ),
                "{format:?}: {text}"
            );
            assert!(
                !text.contains("gone"),
                "a table the schema lacks is not shown"
            );
        }
        let mschema = render_generation(
            PromptFormat::MSchema,
            RepOptions::default(),
            &schema,
            ask,
            &[],
        );
        assert!(
            mschema
                .text
                .contains("(Country:TEXT, Examples: [Netherlands"),
            "{}",
            mschema.text
        );
        let revision = render_revision(&schema, ask, "SELECT 1", &Feedback::Empty).text;
        assert!(revision.contains("Examples: [Netherlands"), "{revision}");
        // Without matches every prompt is what it was.
        let plain = Ask { values: &[], ..ask };
        let text = render_generation(
            PromptFormat::Rep,
            RepOptions::default(),
            &schema,
            plain,
            &[],
        );
        assert!(!text.text.contains("values in the database"));
    }
}
