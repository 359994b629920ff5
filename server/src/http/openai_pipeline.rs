//! The text-to-SQL pipeline behind OpenAI's chat completions: model `quorum-sql`. Front ends
//! that speak only OpenAI's API (Open WebUI, LiteLLM, LangChain, the `openai` client) get the
//! whole method, not the raw model: the last user message is the question, the database is the
//! request's `database` field (a Quorum extension) or a `database: <id>` line of a system
//! message, and the rest of the system messages is the question's evidence. The reply is the
//! SQL and its result as a Markdown table; the whole answer (candidates, vote, timings, notes)
//! rides in the response's `quorum` field, as `/v1/sql` answers it. With `stream`, the reply
//! comes as one chunk when the run ends. The caller's token and scope apply as everywhere.

use axum::Json;
use axum::http::HeaderMap;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use quorum_proto::v1 as pb;
use quorum_proto::v1::text2_sql_server::Text2Sql;
use serde_json::{Value, json};

use super::openai_stream::unix_now;
use super::sse::Relay;
use super::{ApiError, Http, grpc_request};
use crate::auth::Caller;

/// The model id of the pipeline.
pub const PIPELINE_MODEL: &str = "quorum-sql";
/// Rows of the result shown in the reply (the `quorum` field carries the preview's all).
const TABLE_ROWS: usize = 20;

/// What the pipeline model reads from a chat request.
#[derive(Debug, PartialEq, Eq)]
pub struct PipelineAsk {
    pub database: String,
    pub question: String,
    pub evidence: Option<String>,
}

/// Reads the database, the question and the evidence from the request's parts: `messages`
/// as (role, text) pairs, already checked to be text.
pub fn pipeline_ask(
    database_field: Option<&str>,
    messages: &[(String, String)],
) -> Result<PipelineAsk, ApiError> {
    let mut database = database_field
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::to_owned);
    let mut evidence: Vec<String> = Vec::new();
    for (role, text) in messages {
        if role != "system" {
            continue;
        }
        let mut rest = Vec::new();
        for line in text.lines() {
            match line.trim().split_once(':') {
                Some((key, value)) if key.trim().eq_ignore_ascii_case("database") => {
                    database.get_or_insert_with(|| value.trim().to_owned());
                }
                _ => rest.push(line),
            }
        }
        let rest = rest.join("\n");
        if !rest.trim().is_empty() {
            evidence.push(rest.trim().to_owned());
        }
    }
    let database = database.ok_or_else(|| {
        ApiError::invalid(
            "database",
            format!(
                "model `{PIPELINE_MODEL}` needs a database: send `\"database\": \"<id>\"` or a \
                 system message line `database: <id>` (GET /v1/databases lists them)"
            ),
        )
    })?;
    let question = messages
        .iter()
        .rev()
        .find(|(role, _)| role == "user")
        .map(|(_, text)| text.trim().to_owned())
        .filter(|q| !q.is_empty())
        .ok_or_else(|| ApiError::invalid("messages", "no user message holds a question"))?;
    Ok(PipelineAsk {
        database,
        question,
        evidence: (!evidence.is_empty()).then(|| evidence.join("\n")),
    })
}

/// A cell as the table shows it.
fn cell(value: &pb::Value) -> String {
    use pb::value::Kind;
    let text = match &value.kind {
        None | Some(Kind::Null(_)) => "NULL".to_owned(),
        Some(Kind::Integer(i)) => i.to_string(),
        Some(Kind::Real(r)) => r.to_string(),
        Some(Kind::Text(t)) => t.clone(),
        Some(Kind::Blob(b)) => format!("<{} bytes>", b.len()),
    };
    // A cell must stay in its table cell.
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The reply's text: the SQL, then the result as a Markdown table (or why there is none).
pub fn reply_text(answer: &pb::Text2SqlResponse) -> String {
    let mut text = format!("```sql\n{}\n```\n", answer.sql.trim());
    let Some(preview) = &answer.preview else {
        text.push_str("\nThe query did not run (the answer's candidates say why).\n");
        return text;
    };
    if preview.columns.is_empty() {
        return text;
    }
    text.push('\n');
    text.push_str(&format!(
        "| {} |\n",
        preview
            .columns
            .iter()
            .map(|c| c.replace('|', "\\|"))
            .collect::<Vec<_>>()
            .join(" | ")
    ));
    text.push_str(&format!("|{}\n", "---|".repeat(preview.columns.len())));
    for row in preview.rows.iter().take(TABLE_ROWS) {
        let cells: Vec<String> = row.values.iter().map(cell).collect();
        text.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    let shown = preview.rows.len().min(TABLE_ROWS);
    let total = preview.total_rows as usize;
    let more = if preview.truncated { "+" } else { "" };
    text.push_str(&format!(
        "\n{total}{more} row{}{}\n",
        if total == 1 { "" } else { "s" },
        if shown < total {
            format!(", the first {shown} shown")
        } else {
            String::new()
        }
    ));
    text
}

fn usage(answer: &pb::Text2SqlResponse) -> Value {
    json!({
        "prompt_tokens": 0,
        "completion_tokens": answer.tokens_generated,
        "total_tokens": answer.tokens_generated,
    })
}

fn completion(id: &str, created: u64, answer: &pb::Text2SqlResponse) -> Value {
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": PIPELINE_MODEL,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": reply_text(answer) },
            "logprobs": null,
            "finish_reason": "stop",
        }],
        "usage": usage(answer),
        "quorum": answer,
    })
}

/// Answers a chat completion of the pipeline model.
pub async fn answer(
    http: Http,
    headers: &HeaderMap,
    caller: &Caller,
    ask: PipelineAsk,
    stream: bool,
) -> Result<Response, ApiError> {
    let request = pb::Text2SqlRequest {
        db_id: ask.database,
        question: ask.question,
        evidence: ask.evidence,
        options: None,
    };
    let id = format!("chatcmpl-{}", http.state.new_request_id());
    let created = unix_now();
    let service = http.text2sql();
    if stream {
        let events = service
            .generate_stream(grpc_request(headers, caller, request))
            .await?
            .into_inner();
        let relay = AnswerRelay { id, created };
        return Ok(super::sse::respond(events, relay).into_response());
    }
    let answer = service
        .generate(grpc_request(headers, caller, request))
        .await?
        .into_inner();
    Ok(Json(completion(&id, created, &answer)).into_response())
}

/// Streams the pipeline's answer as chat chunks when it arrives (the stages before it send
/// nothing; the stream's keep-alive comments hold proxies open meanwhile).
struct AnswerRelay {
    id: String,
    created: u64,
}

fn data(value: &Value) -> Event {
    Event::default().data(value.to_string())
}

impl Relay for AnswerRelay {
    type Message = pb::Text2SqlEvent;

    fn message(&mut self, message: pb::Text2SqlEvent) -> Vec<Event> {
        let Some(pb::text2_sql_event::Event::Answer(answer)) = message.event else {
            return Vec::new();
        };
        let chunk = |delta: Value, finish: Value, extra: Option<(&str, Value)>| {
            let mut c = json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": PIPELINE_MODEL,
                "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
            });
            if let Some((key, value)) = extra {
                c[key] = value;
            }
            data(&c)
        };
        vec![
            chunk(
                json!({ "role": "assistant", "content": reply_text(&answer) }),
                Value::Null,
                None,
            ),
            chunk(json!({}), json!("stop"), Some(("quorum", json!(answer)))),
        ]
    }

    fn error(&mut self, status: tonic::Status) -> Vec<Event> {
        vec![data(&ApiError::from(status).body())]
    }

    fn end(self) -> Vec<Event> {
        vec![Event::default().data("[DONE]")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(r, t)| ((*r).to_owned(), (*t).to_owned()))
            .collect()
    }

    #[test]
    fn the_database_comes_from_the_field_or_a_system_line() {
        let from_system = pipeline_ask(
            None,
            &msgs(&[
                ("system", "Database: concert_singer\nAges are in years."),
                ("user", "hi"),
                ("assistant", "..."),
                ("user", "  How many singers?  "),
            ]),
        )
        .expect("asks");
        assert_eq!(
            from_system,
            PipelineAsk {
                database: "concert_singer".into(),
                question: "How many singers?".into(),
                evidence: Some("Ages are in years.".into()),
            }
        );
        let field_wins = pipeline_ask(
            Some("pets_1"),
            &msgs(&[("system", "database: x"), ("user", "q")]),
        )
        .expect("asks");
        assert_eq!(field_wins.database, "pets_1");
        assert_eq!(field_wins.evidence, None);
        let e = pipeline_ask(None, &msgs(&[("user", "q")])).expect_err("no database");
        assert!(
            e.body()["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("database")
        );
        assert!(
            pipeline_ask(Some("a"), &msgs(&[("system", "s")])).is_err(),
            "no question"
        );
    }

    #[test]
    fn the_reply_is_the_sql_and_a_table() {
        let v = |k: pb::value::Kind| pb::Value { kind: Some(k) };
        use pb::value::Kind;
        let answer = pb::Text2SqlResponse {
            sql: "SELECT name, age FROM singer".into(),
            preview: Some(pb::ResultPreview {
                columns: vec!["name".into(), "age".into()],
                rows: vec![
                    pb::Row {
                        values: vec![v(Kind::Text("Joe|Sharp".into())), v(Kind::Integer(52))],
                    },
                    pb::Row {
                        values: vec![v(Kind::Null(true)), v(Kind::Real(1.5))],
                    },
                ],
                total_rows: 2,
                truncated: false,
            }),
            ..Default::default()
        };
        assert_eq!(
            reply_text(&answer),
            "```sql\nSELECT name, age FROM singer\n```\n\n| name | age |\n|---|---|\n| Joe\\|Sharp | 52 |\n| NULL | 1.5 |\n\n2 rows\n"
        );
        let failed = pb::Text2SqlResponse {
            sql: "SELECT x".into(),
            ..Default::default()
        };
        assert!(reply_text(&failed).contains("did not run"));
    }
}
