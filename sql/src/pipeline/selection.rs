//! XiYan's candidate selection for split votes: candidates are grouped by execution result
//! (the vote's clusters), each group is shown once as `Candidate {label}` with its SQL and
//! first rows, and the selection model's log-probability for each label decides, weighed
//! against the group's votes when `selector.vote_weight` is above zero
//! ([`crate::vote::weighed_choice`]).

use super::answer::SelectorReport;
use crate::model::Selector;
use crate::prompt::render_mschema;
use crate::sandbox::QueryResult;
use crate::schema::Schema;
use crate::value::Value;
use crate::vote::weighed_choice;

const LABELS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// The most groups a prompt can label.
pub const MAX_LABELS: usize = LABELS.len();

/// One result group shown to the selector.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a> {
    pub candidate: usize,
    pub sql: &'a str,
    pub result: &'a QueryResult,
    /// Candidates in the group (the prompt does not show it; the choice may weigh it).
    pub votes: usize,
}

/// What the selector is asked about.
#[derive(Debug, Clone, Copy)]
pub struct SelectionInput<'a> {
    pub schema: &'a Schema,
    pub question: &'a str,
    pub evidence: Option<&'a str>,
    pub shown: &'a [Shown<'a>],
    pub preview_rows: usize,
}

/// Asks the selector; a failed call is reported and leaves the choice to the vote.
pub(crate) fn select(
    selector: &dyn Selector,
    input: SelectionInput<'_>,
    vote_weight: f32,
) -> SelectorReport {
    let labels = selection_labels(input.shown.len());
    let prompt = render_selection(input, &labels);
    let shown = input.shown.iter().map(|s| s.candidate).collect();
    match selector.choose(&prompt, &labels) {
        Ok(logprobs) if logprobs.len() == labels.len() => {
            let votes: Vec<usize> = input.shown.iter().map(|s| s.votes).collect();
            let best = weighed_choice(&logprobs, &votes, vote_weight);
            SelectorReport {
                chosen: Some(input.shown[best].candidate),
                labels,
                shown,
                logprobs,
                error: None,
            }
        }
        Ok(logprobs) => SelectorReport {
            error: Some(format!(
                "selector scored {} labels, expected {}",
                logprobs.len(),
                labels.len()
            )),
            labels,
            shown,
            logprobs,
            chosen: None,
        },
        Err(e) => SelectorReport {
            labels,
            shown,
            logprobs: Vec::new(),
            chosen: None,
            error: Some(e.to_string()),
        },
    }
}

/// The labels of `n` shown groups, in order: `A`, `B`, ... (at most [`MAX_LABELS`]).
pub fn selection_labels(n: usize) -> Vec<String> {
    LABELS.chars().take(n).map(String::from).collect()
}

/// XiYan's selection prompt (its paper, appendix E). The selector answers with one label;
/// `quorum train --task selector` trains on this same text.
pub fn render_selection(input: SelectionInput<'_>, labels: &[String]) -> String {
    let mut text = format!(
        "You are a {dialect} expert. Regarding the Question, there are {n} candidate SQL along with their Execution result in the database (showing the first {rows} rows).\nYou need to compare these candidates and analyze the differences among the various candidate SQL. Based on the provided Database Schema, Evidence, and Question, select the correct and reasonable result.\n\n【Database Schema】\n{schema}\n\n【Evidence】\n{evidence}\n\n【Question】\n{question}\n=====\n",
        dialect = input.schema.dialect.name(),
        n = input.shown.len(),
        rows = input.preview_rows,
        schema = render_mschema(input.schema),
        evidence = input.evidence.unwrap_or(""),
        question = input.question,
    );
    for (label, shown) in labels.iter().zip(input.shown) {
        text.push_str(&format!(
            "\nCandidate {label}\n【SQL】\n{}\n【Execution result】\n{}\n",
            shown.sql,
            python_rows(shown.result, input.preview_rows)
        ));
    }
    let quoted: Vec<String> = labels.iter().map(|l| format!("\"{l}\"")).collect();
    text.push_str(&format!(
        "\nPlease output the selected candidate as {}.",
        quoted.join(" or ")
    ));
    text
}

/// Rows as Python prints a list of tuples, the form XiYan's selector was trained on.
fn python_rows(result: &QueryResult, max_rows: usize) -> String {
    let rows: Vec<String> = result
        .rows
        .iter()
        .take(max_rows)
        .map(|row| {
            let cells: Vec<String> = row.iter().map(python_value).collect();
            match cells.len() {
                1 => format!("({},)", cells[0]),
                _ => format!("({})", cells.join(", ")),
            }
        })
        .collect();
    format!("[{}]", rows.join(", "))
}

fn python_value(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Integer(i) => i.to_string(),
        // `{:?}` keeps the `.0` of integral floats, as Python's repr does.
        Value::Real(r) => format!("{r:?}"),
        Value::Text(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::Blob(b) => {
            let hex: String = b.iter().map(|byte| format!("\\x{byte:02x}")).collect();
            format!("b'{hex}'")
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use expect_test::expect;

    use super::*;
    use crate::prompt::fixture::schema;

    #[test]
    fn selection_prompt_concert_singer() {
        let schema = schema("concert_singer").restrict_to(&["concert"]);
        let count = |n| QueryResult {
            columns: vec!["count(*)".into()],
            rows: vec![vec![Value::Integer(n)]],
            truncated: false,
            elapsed: Duration::ZERO,
        };
        let (six, two) = (count(6), count(2));
        let shown = [
            Shown {
                candidate: 0,
                sql: "SELECT count(*) FROM concert",
                result: &six,
                votes: 2,
            },
            Shown {
                candidate: 3,
                sql: "SELECT count(*) FROM concert WHERE Year = 2014",
                result: &two,
                votes: 1,
            },
        ];
        let input = SelectionInput {
            schema: &schema,
            question: "How many concerts are there?",
            evidence: None,
            shown: &shown,
            preview_rows: 10,
        };
        let text = render_selection(input, &["A".to_owned(), "B".to_owned()]);
        expect![[r#"
            You are a SQLite expert. Regarding the Question, there are 2 candidate SQL along with their Execution result in the database (showing the first 10 rows).
            You need to compare these candidates and analyze the differences among the various candidate SQL. Based on the provided Database Schema, Evidence, and Question, select the correct and reasonable result.

            【Database Schema】
            【DB_ID】 concert_singer
            【Schema】
            # Table: concert
            [
            (concert_ID:INT, Primary Key, Examples: [1, 2, 3]),
            (concert_Name:TEXT, Examples: [Auditions, Super bootcamp, Home Visits]),
            (Theme:TEXT, Examples: [Free choice, Free choice 2, Bleeding Love]),
            (Stadium_ID:TEXT, Examples: [1, 2, 10]),
            (Year:TEXT, Examples: [2014, 2015])
            ]

            【Evidence】


            【Question】
            How many concerts are there?
            =====

            Candidate A
            【SQL】
            SELECT count(*) FROM concert
            【Execution result】
            [(6,)]

            Candidate B
            【SQL】
            SELECT count(*) FROM concert WHERE Year = 2014
            【Execution result】
            [(2,)]

            Please output the selected candidate as "A" or "B"."#]].assert_eq(&text);
    }

    #[test]
    fn rows_print_like_python() {
        let result = QueryResult {
            columns: vec!["a".into(), "b".into()],
            rows: vec![
                vec![Value::Null, Value::Text("it's".into())],
                vec![Value::Real(2.0), Value::Integer(3)],
            ],
            truncated: false,
            elapsed: Duration::ZERO,
        };
        assert_eq!(python_rows(&result, 10), "[(None, 'it\\'s'), (2.0, 3)]");
        assert_eq!(python_rows(&result, 1), "[(None, 'it\\'s')]");
        let single = QueryResult {
            rows: vec![vec![Value::Integer(6)]],
            ..result
        };
        assert_eq!(python_rows(&single, 10), "[(6,)]");
    }
}
