//! The MCP server over streamable HTTP at `/mcp`, spoken as a client speaks it (JSON-RPC over
//! POST, answers as JSON or server-sent events, the session id header): initialize, the tool
//! list, every tool, a write refused by the run-query tool with the database unchanged, a
//! database outside the token's scope unknown, and no call without a token.

use quorum_server::auth::tokens_file::{digest_of, hex};
use serde_json::{Value, json};

use crate::server_support::{TestConfig, TestServer, http_request};

const TOKEN: &str = "mcp-concert-secret";

struct Reply {
    status: u16,
    session: Option<String>,
    /// The JSON-RPC messages of the body (one JSON body, or each `data:` event).
    messages: Vec<Value>,
}

async fn post(
    server: &TestServer,
    token: Option<&str>,
    session: Option<&str>,
    body: &Value,
) -> Reply {
    let addr = server.server.metrics_addr.expect("HTTP port");
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    if let Some(a) = &auth {
        headers.push(("Authorization", a));
    }
    if let Some(s) = session {
        headers.push(("Mcp-Session-Id", s));
    }
    let reply = http_request(addr, "POST", "/mcp", &headers, body.to_string().as_bytes()).await;
    let status = reply.status;
    let rest = reply.body.as_str();
    let session = reply
        .headers
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id"))
        })
        .map(|(_, v)| v.trim().to_owned());
    // Whatever the framing (chunked or not, JSON or events), each message is one JSON object
    // on a line of its own or after `data:`.
    let messages = rest
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("data:").map_or(l, str::trim);
            l.starts_with('{')
                .then(|| serde_json::from_str::<Value>(l).ok())
                .flatten()
        })
        .collect();
    Reply {
        status,
        session,
        messages,
    }
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// The result of the message answering `id`.
fn result(reply: &Reply, id: u64) -> Value {
    reply
        .messages
        .iter()
        .find(|m| m["id"] == json!(id))
        .unwrap_or_else(|| panic!("no answer to {id}: {:?}", reply.messages))["result"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_tools_answer_over_streamable_http_behind_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "[[token]]\nname = \"concert\"\nsha256 = \"{}\"\ndatabases = [\"concert_singer\"]\nrights = [\"ask\"]\n",
            hex(&digest_of(TOKEN))
        ),
    )
    .expect("tokens");
    let server = TestServer::start(TestConfig {
        tokens_file: Some(tokens),
        ..TestConfig::default()
    })
    .await;
    let init = request(
        1,
        "initialize",
        json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "test", "version": "1" } }),
    );
    let refused = post(&server, None, None, &init).await;
    assert_eq!(refused.status, 401, "no token, no MCP");

    let started = post(&server, Some(TOKEN), None, &init).await;
    assert_eq!(started.status, 200, "{:?}", started.messages);
    let info = result(&started, 1);
    assert_eq!(info["serverInfo"]["name"], "quorum");
    let session = started.session.clone();
    let s = session.as_deref();
    let done = post(
        &server,
        Some(TOKEN),
        s,
        &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
    )
    .await;
    assert!(done.status == 202 || done.status == 200, "{}", done.status);

    let listed = result(
        &post(
            &server,
            Some(TOKEN),
            s,
            &request(2, "tools/list", json!({})),
        )
        .await,
        2,
    );
    let mut names: Vec<&str> = listed["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "ask",
            "describe_database",
            "explain_query",
            "list_databases",
            "run_query"
        ]
    );

    let call = |id: u64, name: &str, arguments: Value| {
        request(
            id,
            "tools/call",
            json!({ "name": name, "arguments": arguments }),
        )
    };
    let dbs = result(
        &post(
            &server,
            Some(TOKEN),
            s,
            &call(3, "list_databases", json!({})),
        )
        .await,
        3,
    );
    assert_eq!(
        dbs["structuredContent"]["databases"],
        json!([{ "db_id": "concert_singer", "dialect": "SQLite", "tables": 4 }])
    );

    let described = result(
        &post(
            &server,
            Some(TOKEN),
            s,
            &call(4, "describe_database", json!({ "db_id": "concert_singer" })),
        )
        .await,
        4,
    );
    let tables = described["structuredContent"]["tables"]
        .as_array()
        .expect("tables");
    assert!(tables.iter().any(|t| t["name"] == "singer"), "{described}");

    let ran = result(
        &post(
            &server,
            Some(TOKEN),
            s,
            &call(
                5,
                "run_query",
                json!({ "db_id": "concert_singer", "sql": "SELECT count(*) AS n FROM singer" }),
            ),
        )
        .await,
        5,
    );
    assert_eq!(
        ran["structuredContent"]["rows"],
        json!([[6]]),
        "cells are plain JSON numbers: {ran}"
    );
    assert_eq!(ran["structuredContent"]["columns"], json!(["n"]));

    let file = quorum_tests::spider_dir().join("database/concert_singer/concert_singer.sqlite");
    let before = std::fs::read(&file).expect("database");
    for (id, sql) in [
        (6, "DELETE FROM singer"),
        (7, "DROP TABLE singer"),
        (8, "ATTACH DATABASE '/tmp/x.db' AS x"),
    ] {
        let refused = result(
            &post(
                &server,
                Some(TOKEN),
                s,
                &call(
                    id,
                    "run_query",
                    json!({ "db_id": "concert_singer", "sql": sql }),
                ),
            )
            .await,
            id,
        );
        assert_eq!(refused["isError"], true, "{sql}: {refused}");
        assert!(
            refused["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .starts_with("INVALID_ARGUMENT"),
            "{refused}"
        );
    }
    assert_eq!(
        std::fs::read(&file).expect("database"),
        before,
        "nothing was written"
    );

    let other = result(
        &post(
            &server,
            Some(TOKEN),
            s,
            &call(9, "describe_database", json!({ "db_id": "pets_1" })),
        )
        .await,
        9,
    );
    assert_eq!(other["isError"], true);
    assert!(
        other["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("unknown database `pets_1`"),
        "{other}"
    );

    let asked = result(
        &post(
            &server,
            Some(TOKEN),
            s,
            &call(
                10,
                "ask",
                json!({ "db_id": "concert_singer", "question": "How many singers do we have?" }),
            ),
        )
        .await,
        10,
    );
    let answer = &asked["structuredContent"];
    assert!(
        answer["sql"].as_str().is_some_and(|q| !q.is_empty()),
        "{asked}"
    );
    assert!(
        answer["why"]["candidates"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{asked}"
    );

    let explained = result(
        &post(
            &server,
            Some(TOKEN),
            s,
            &call(
                11,
                "explain_query",
                json!({ "db_id": "concert_singer", "sql": "SELECT count(*) FROM singer" }),
            ),
        )
        .await,
        11,
    );
    assert!(
        explained["structuredContent"]["explanation"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{explained}"
    );
    server.server.shutdown();
}
