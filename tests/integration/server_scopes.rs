//! Tokens with scopes, over real sockets: a token for one database cannot list, describe, ask
//! or run anything on another through gRPC, HTTP, the OpenAI routes or the playground's
//! requests; rights are enforced (registering, adapters); a registration cannot give a second
//! name to another team's file; quotas refuse with RESOURCE_EXHAUSTED / 429; a token removed
//! from the file stops working without a restart; and the audit trail names every caller
//! without writing a secret.

use std::path::Path;
use std::time::{Duration, Instant};

use quorum_proto::v1 as pb;
use tonic::Code;

use crate::server_support::{TestConfig, TestServer, http_request, with_token};

const CONCERT: &str = "secret-concert-7f3a";
const REGISTRAR: &str = "secret-registrar-91c2";
const LIMITED: &str = "secret-limited-55de";
const OPS: &str = "secret-ops-0b11";

/// The tokens file: `concert` asks of concert_singer only; `registrar` registers `team_*`
/// databases and asks nothing; `limited` asks of concert_singer, one run at a time and six
/// requests a minute; `ops` loads adapters only.
fn tokens_file(with_concert: bool) -> String {
    let entry = |name: &str, secret: &str, rest: &str| {
        format!(
            "[[token]]\nname = \"{name}\"\nsha256 = \"{}\"\n{rest}\n",
            quorum_server::auth::tokens_file::hex(&quorum_server::auth::tokens_file::digest_of(
                secret
            ))
        )
    };
    let mut text = String::new();
    if with_concert {
        text += &entry(
            "concert",
            CONCERT,
            "databases = [\"concert_singer\"]\nrights = [\"ask\"]",
        );
    }
    text += &entry(
        "registrar",
        REGISTRAR,
        "databases = [\"team_*\"]\nrights = [\"register\"]",
    );
    text += &entry(
        "limited",
        LIMITED,
        "databases = [\"concert_singer\"]\nrights = [\"ask\"]\nmax_concurrent_runs = 1\n\
         requests_per_minute = 6",
    );
    text += &entry("ops", OPS, "databases = [\"*\"]\nrights = [\"adapters\"]");
    text
}

fn question(db_id: &str) -> pb::Text2SqlRequest {
    pb::Text2SqlRequest {
        db_id: db_id.into(),
        question: "How many singers are there?".into(),
        ..Default::default()
    }
}

/// One HTTP/1.1 request to the server's HTTP port: the status code and the body.
async fn http(
    server: &TestServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let addr = server.server.metrics_addr.expect("HTTP port");
    http_at(addr, method, path, headers, body).await
}

async fn http_at(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let reply = http_request(addr, method, path, headers, body.as_bytes()).await;
    (reply.status, reply.body)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The names `Databases.List` shows a token.
async fn listed(server: &TestServer, token: &str) -> Vec<String> {
    let mut names: Vec<String> = server
        .databases()
        .list(with_token(token, pb::ListDatabasesRequest {}))
        .await
        .expect("listed")
        .into_inner()
        .databases
        .into_iter()
        .map(|d| d.db_id)
        .collect();
    names.sort();
    names
}

fn audit_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .expect("audit trail")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each audit line is JSON"))
        .collect()
}

fn has_line(lines: &[serde_json::Value], want: &[(&str, &str)]) -> bool {
    lines
        .iter()
        .any(|l| want.iter().all(|(k, v)| l[*k].as_str() == Some(*v)))
}

/// The next message of a server stream.
async fn next_message<T>(stream: &mut tonic::Streaming<T>) -> Option<T> {
    stream.message().await.expect("stream message")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_reaches_only_its_databases_and_rights_on_every_surface() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, tokens_file(true)).expect("tokens file");
    let audit = dir.path().join("audit.jsonl");
    let server = TestServer::start(TestConfig {
        tokens_file: Some(tokens.clone()),
        audit_log: Some(audit.clone()),
        allowed_dir: Some(quorum_tests::spider_dir().join("database")),
        ..TestConfig::default()
    })
    .await;

    // Without a token, or with a wrong one: UNAUTHENTICATED / 401.
    let e = server
        .databases()
        .list(pb::ListDatabasesRequest {})
        .await
        .expect_err("no token");
    assert_eq!(e.code(), Code::Unauthenticated);
    let (status, _) = http(
        &server,
        "GET",
        "/v1/databases",
        &[("Authorization", "Bearer nope")],
        "",
    )
    .await;
    assert_eq!(status, 401);

    // gRPC: the concert token lists, describes and asks of concert_singer only; pets_1 is as
    // unknown as a database that does not exist, and so is a differently written name.
    assert_eq!(listed(&server, CONCERT).await, ["concert_singer"]);
    // Where a database lives is for admins: a team's token sees no path.
    let summaries = server
        .databases()
        .list(with_token(CONCERT, pb::ListDatabasesRequest {}))
        .await
        .expect("listed")
        .into_inner()
        .databases;
    assert!(
        summaries.iter().all(|d| d.location.is_empty()),
        "{summaries:?}"
    );
    let unknown = server
        .databases()
        .describe(with_token(
            CONCERT,
            pb::DescribeDatabaseRequest {
                db_id: "no_such_db".into(),
            },
        ))
        .await
        .expect_err("unknown");
    for db_id in [
        "pets_1",
        "Concert_Singer",
        "concert_singer.sqlite",
        "../pets_1",
    ] {
        let e = server
            .databases()
            .describe(with_token(
                CONCERT,
                pb::DescribeDatabaseRequest {
                    db_id: db_id.into(),
                },
            ))
            .await
            .expect_err(db_id);
        assert_eq!(e.code(), Code::NotFound, "{db_id}: {}", e.message());
        assert_eq!(
            e.message(),
            unknown.message().replace("no_such_db", db_id),
            "out of scope reads exactly as unknown"
        );
    }
    server
        .databases()
        .describe(with_token(
            CONCERT,
            pb::DescribeDatabaseRequest {
                db_id: "concert_singer".into(),
            },
        ))
        .await
        .expect("in scope");
    let e = server
        .text2sql()
        .generate(with_token(CONCERT, question("pets_1")))
        .await
        .expect_err("out of scope");
    assert_eq!(e.code(), Code::NotFound, "{}", e.message());
    let e = server
        .text2sql()
        .explain(with_token(
            CONCERT,
            pb::ExplainRequest {
                db_id: "pets_1".into(),
                sql: "SELECT count(*) FROM Pets".into(),
                ..Default::default()
            },
        ))
        .await
        .expect_err("a sub-task out of scope");
    assert_eq!(e.code(), Code::NotFound, "{}", e.message());
    let answer = server
        .text2sql()
        .generate(with_token(CONCERT, question("concert_singer")))
        .await
        .expect("in scope")
        .into_inner();
    assert!(!answer.sql.is_empty());

    // Rights: the concert token registers nothing and loads no adapter.
    let e = server
        .databases()
        .register(with_token(
            CONCERT,
            pb::RegisterDatabaseRequest {
                db_id: "concert_copy".into(),
                path: "pets_1/pets_1.sqlite".into(),
                ..Default::default()
            },
        ))
        .await
        .expect_err("no register right");
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(e.message().contains("`register`"), "{}", e.message());
    let e = server
        .inference()
        .load_adapter(with_token(
            CONCERT,
            pb::LoadAdapterRequest {
                model: "smol".into(),
                name: "x".into(),
                path: "x".into(),
            },
        ))
        .await
        .expect_err("no adapters right");
    assert_eq!(e.code(), Code::PermissionDenied);
    // The ops token may load adapters but asks nothing.
    let e = server
        .text2sql()
        .generate(with_token(OPS, question("concert_singer")))
        .await
        .expect_err("no ask right");
    assert_eq!(e.code(), Code::PermissionDenied);

    // HTTP: the same rules on /v1/databases and /v1/sql, and from the playground's requests.
    let auth = bearer(CONCERT);
    let (status, body) = http(
        &server,
        "GET",
        "/v1/databases",
        &[("Authorization", &auth)],
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("concert_singer") && !body.contains("pets_1"),
        "{body}"
    );
    let (status, _) = http(
        &server,
        "GET",
        "/v1/databases/pets_1",
        &[("Authorization", &auth)],
        "",
    )
    .await;
    assert_eq!(status, 404);
    let ask_pets = r#"{"dbId": "pets_1", "question": "How many pets are there?"}"#;
    let (status, body) = http(
        &server,
        "POST",
        "/v1/sql",
        &[("Authorization", &auth)],
        ask_pets,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = http(
        &server,
        "POST",
        "/v1/sql",
        &[("Authorization", &auth), ("X-Quorum-Client", "playground")],
        ask_pets,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    // The OpenAI routes need the ask right.
    let registrar = bearer(REGISTRAR);
    let (status, body) = http(
        &server,
        "GET",
        "/v1/models",
        &[("Authorization", &registrar)],
        "",
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let chat =
        r#"{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}"#;
    let (status, _) = http(
        &server,
        "POST",
        "/v1/chat/completions",
        &[("Authorization", &registrar)],
        chat,
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = http(
        &server,
        "GET",
        "/v1/models",
        &[("Authorization", &auth)],
        "",
    )
    .await;
    assert_eq!(status, 200);

    // Registration: only ids in scope, and never a second name for another team's file.
    let register = |db_id: &str, path: &str| {
        with_token(
            REGISTRAR,
            pb::RegisterDatabaseRequest {
                db_id: db_id.into(),
                path: path.into(),
                ..Default::default()
            },
        )
    };
    let e = server
        .databases()
        .register(register("pets_copy", "world_1/world_1.sqlite"))
        .await
        .expect_err("id out of scope");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    for path in [
        "concert_singer/concert_singer.sqlite",
        "pets_1/./pets_1.sqlite",
    ] {
        let e = server
            .databases()
            .register(register("team_a", path))
            .await
            .expect_err(path);
        assert_eq!(e.code(), Code::PermissionDenied, "{path}: {}", e.message());
        assert!(
            !e.message().contains("pets_1") && !e.message().contains("concert"),
            "{}",
            e.message()
        );
    }
    server
        .databases()
        .register(register("team_world", "world_1/world_1.sqlite"))
        .await
        .expect("a file nobody serves, under an id in scope");
    assert_eq!(listed(&server, REGISTRAR).await, ["team_world"]);
    assert_eq!(listed(&server, CONCERT).await, ["concert_singer"]);

    // Quotas: one run at a time, six requests a minute.
    let mut first = server
        .text2sql()
        .generate_stream(with_token(LIMITED, question("concert_singer")))
        .await
        .expect("first run")
        .into_inner();
    next_message(&mut first).await.expect("the run has started");
    let e = server
        .text2sql()
        .generate(with_token(LIMITED, question("concert_singer")))
        .await
        .expect_err("a second run at once");
    assert_eq!(e.code(), Code::ResourceExhausted, "{}", e.message());
    while next_message(&mut first).await.is_some() {}
    let limited = bearer(LIMITED);
    let mut refused = None;
    for i in 0..8 {
        let (status, _) = http(
            &server,
            "GET",
            "/v1/databases",
            &[("Authorization", &limited)],
            "",
        )
        .await;
        if status == 429 {
            refused = Some(i);
            break;
        }
        assert_eq!(status, 200);
    }
    // Two requests were counted above (the stream and the refused run), so the fifth list
    // of the minute is the seventh request.
    assert_eq!(
        refused,
        Some(4),
        "the minute's allowance ran out where expected"
    );

    // The scrape port serves metrics and probes, and no API even to a good token.
    let scrape = server.server.scrape_addr.expect("scrape port");
    let (status, body) = http_at(scrape, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200);
    assert!(body.contains("quorum_tokens_loaded{} 4"), "{body}");
    assert_eq!(http_at(scrape, "GET", "/ready", &[], "").await.0, 200);
    for path in ["/v1/databases", "/v1/models", "/"] {
        let (status, _) = http_at(scrape, "GET", path, &[("Authorization", &auth)], "").await;
        assert_eq!(status, 404, "{path} on the scrape port");
    }

    // Revoking: the concert token stops working once its entry leaves the file.
    std::fs::write(&tokens, tokens_file(false)).expect("rewrite");
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let r = server
            .databases()
            .list(with_token(CONCERT, pb::ListDatabasesRequest {}))
            .await;
        match r {
            Err(e) if e.code() == Code::Unauthenticated => break,
            _ => {
                assert!(Instant::now() < until, "a revoked token still works");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    assert!(
        listed(&server, REGISTRAR).await == ["team_world"],
        "others keep working"
    );

    // The audit trail names each caller, surface, database and outcome, and holds no secret.
    let lines = audit_lines(&audit);
    for want in [
        &[
            ("token", "concert"),
            ("method", "Text2Sql/Generate"),
            ("database", "pets_1"),
            ("outcome", "NOT_FOUND"),
            ("surface", "grpc"),
        ][..],
        &[
            ("token", "concert"),
            ("method", "Text2Sql/Generate"),
            ("database", "concert_singer"),
            ("outcome", "OK"),
        ],
        &[
            ("token", "concert"),
            ("surface", "http"),
            ("database", "pets_1"),
            ("outcome", "NOT_FOUND"),
        ],
        &[
            ("token", "concert"),
            ("surface", "playground"),
            ("database", "pets_1"),
        ],
        &[
            ("token", "registrar"),
            ("surface", "openai"),
            ("outcome", "PERMISSION_DENIED"),
        ],
        &[
            ("token", "registrar"),
            ("method", "Databases/Register"),
            ("database", "team_world"),
            ("outcome", "OK"),
        ],
        &[("token", "limited"), ("outcome", "RESOURCE_EXHAUSTED")],
        &[("method", "authenticate"), ("outcome", "UNAUTHENTICATED")],
    ] {
        assert!(has_line(&lines, want), "no audit line with {want:?}");
    }
    let answered = lines
        .iter()
        .find(|l| {
            l["database"] == "concert_singer"
                && l["method"] == "Text2Sql/Generate"
                && l["outcome"] == "OK"
        })
        .expect("the answered question");
    assert_eq!(answered["sql"].as_str(), Some(answer.sql.as_str()));
    assert_eq!(answered["question"], "How many singers are there?");
    assert!(answered["latency_ms"].as_f64().expect("latency") > 0.0);
    let text = std::fs::read_to_string(&audit).expect("audit");
    for secret in [CONCERT, REGISTRAR, LIMITED, OPS] {
        assert!(!text.contains(secret), "a secret reached the audit trail");
    }
    server.server.shutdown();
}
