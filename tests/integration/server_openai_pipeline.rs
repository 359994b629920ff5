//! The pipeline behind OpenAI's chat completions, over a real socket: model `quorum-sql` is
//! listed, answers a question over the database a system line or the `database` field names
//! with the SQL and a result table (the whole answer in `quorum`), streams as chat chunks, and
//! refuses a request without a database, a `database` for another model and an unknown one.

use crate::server_support::{TestConfig, TestServer, http_request};

async fn post(server: &TestServer, path: &str, body: &str) -> (u16, String) {
    let addr = server.server.metrics_addr.expect("HTTP port");
    let method = if body.is_empty() { "GET" } else { "POST" };
    let reply = http_request(addr, method, path, &[], body.as_bytes()).await;
    (reply.status, reply.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_pipeline_answers_chat_completions_as_model_quorum_sql() {
    let server = TestServer::start(TestConfig::default()).await;
    let (status, models) = post(&server, "/v1/models", "").await;
    assert_eq!(status, 200);
    assert!(models.contains(r#""id":"quorum-sql""#), "{models}");

    let ask = r#"{"model": "quorum-sql", "messages": [
        {"role": "system", "content": "database: concert_singer\nA singer's age is in years."},
        {"role": "user", "content": "How many singers are there?"}]}"#;
    let (status, body) = post(&server, "/v1/chat/completions", ask).await;
    assert_eq!(status, 200, "{body}");
    let reply: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let content = reply["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    let sql = reply["quorum"]["sql"]
        .as_str()
        .expect("the whole answer rides along");
    assert!(
        content.starts_with("```sql\n") && content.contains(sql.trim()),
        "{content}"
    );
    assert_eq!(reply["object"], "chat.completion");
    assert_eq!(reply["model"], "quorum-sql");
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");

    let streamed = r#"{"model": "quorum-sql", "database": "concert_singer", "stream": true,
        "messages": [{"role": "user", "content": "How many singers are there?"}]}"#;
    let (status, body) = post(&server, "/v1/chat/completions", streamed).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("chat.completion.chunk") && body.contains("```sql"),
        "{body}"
    );
    // Chunked transfer framing sits between the events: `[DONE]` is the last event.
    assert!(body.contains(r#""quorum":"#), "{body}");
    let done = body.find("data: [DONE]").expect("[DONE]");
    assert!(
        !body[done..].contains("data: {"),
        "nothing after [DONE]: {body}"
    );

    let (status, body) = post(
        &server,
        "/v1/chat/completions",
        r#"{"model": "quorum-sql", "messages": [{"role": "user", "content": "How many singers?"}]}"#,
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.contains(r#""param":"database""#), "{body}");
    let (status, _) = post(
        &server,
        "/v1/chat/completions",
        r#"{"model": "smol", "database": "concert_singer", "messages": [{"role": "user", "content": "hi"}]}"#,
    )
    .await;
    assert_eq!(status, 400);
    let (status, body) = post(
        &server,
        "/v1/chat/completions",
        r#"{"model": "quorum-sql", "database": "no_such_db", "messages": [{"role": "user", "content": "hi"}]}"#,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    server.server.shutdown();
}
