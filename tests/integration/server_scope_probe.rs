//! A probe of the token scopes: more than forty attempts, over real sockets, by a token that
//! may ask of `concert_singer` (SQLite) and `pg_concert` (PostgreSQL schema `concert_singer`)
//! only, and by one that may register `team_*` databases only, to reach `pets_1` / `pg_pets`
//! (the same data, another team's) some other way: names differing in case, quoting, paths and
//! patterns, every surface, attached databases, SQL naming another schema on PostgreSQL,
//! registrations pointing at another database's file or schema, tokens sent the wrong way.
//! Every attempt must be refused; the outcomes are printed as a table (and written to
//! `$QUORUM_PROBE_TABLE` when set; docs/RESULTS.md carries it).

use std::fmt::Write as _;

use quorum_proto::v1 as pb;
use quorum_server::auth::tokens_file::{digest_of, hex};
use quorum_server::config::file::RawConfig;

use crate::postgres_support::PgServer;
use crate::server_support::{TestConfig, TestServer, http_request, with_token};

const ASKER: &str = "probe-asker-secret-1";
const REGISTRAR: &str = "probe-registrar-secret-2";

/// `OK`, or the status code and message.
fn outcome<T>(r: Result<tonic::Response<T>, tonic::Status>) -> (bool, String) {
    match r {
        Ok(_) => (true, "OK".into()),
        Err(s) => (false, format!("{:?}: {}", s.code(), s.message())),
    }
}

async fn http(
    server: &TestServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (bool, String) {
    let addr = server.server.metrics_addr.expect("HTTP port");
    let reply = http_request(addr, method, path, headers, body.as_bytes()).await;
    let (status, body) = (reply.status, reply.body.as_str());
    let message = serde_json::from_str::<serde_json::Value>(body.trim())
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.chars().take(120).collect());
    // A stream that fails before it starts answers with the error status; one that started
    // carries an `error` event.
    let failed_stream = body.contains("event: error");
    (
        status == 200 && !failed_stream,
        format!("{status}: {message}"),
    )
}

struct Table {
    rows: Vec<(String, String, String)>,
    leaks: Vec<String>,
}

impl Table {
    fn add(&mut self, surface: &str, attempt: &str, (succeeded, outcome): (bool, String)) {
        if succeeded {
            self.leaks.push(format!("{surface}: {attempt}: {outcome}"));
        }
        let outcome = outcome
            .replace('|', "\\|")
            .replace('\n', " ")
            .replace('\0', "\\0");
        let outcome: String = outcome.chars().take(150).collect();
        self.rows
            .push((surface.into(), attempt.replace('|', "\\|"), outcome));
    }
}

fn tokens_file() -> String {
    format!(
        "[[token]]\nname = \"asker\"\nsha256 = \"{}\"\ndatabases = [\"concert_singer\", \"pg_concert\"]\nrights = [\"ask\"]\n\n\
         [[token]]\nname = \"registrar\"\nsha256 = \"{}\"\ndatabases = [\"team_*\"]\nrights = [\"register\"]\n",
        hex(&digest_of(ASKER)),
        hex(&digest_of(REGISTRAR)),
    )
}

fn optimize(db_id: &str, sql: &str) -> pb::OptimizeRequest {
    pb::OptimizeRequest {
        sql: sql.into(),
        db_id: db_id.into(),
        method: pb::OptimizeMethod::WithSql as i32,
        timing_pairs: Some(1),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_attempts_to_get_around_the_scopes_are_all_refused() {
    let pg = tokio::task::spawn_blocking(|| {
        let pg = PgServer::start();
        pg.load_spider("pets_1");
        pg.load_spider("concert_singer");
        pg
    })
    .await
    .expect("PostgreSQL set up");
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, tokens_file()).expect("tokens");
    let spider_db = quorum_tests::spider_dir().join("database");
    let config = TestConfig {
        tokens_file: Some(tokens),
        allowed_dir: Some(spider_db.clone()),
        ..TestConfig::default()
    };
    let toml = config.toml().replace(
        "[databases]\n",
        "[databases]\npostgres_hosts = [\"127.0.0.1\", \"localhost\"]\n",
    ) + &format!(
        "\n[databases.postgres.pg_concert]\nurl = {url:?}\nschema = \"concert_singer\"\n\
             [databases.postgres.pg_pets]\nurl = {url:?}\nschema = \"pets_1\"\n",
        url = pg.url
    );
    let raw = RawConfig::from_toml_str(&toml).expect("config parses");
    let server = TestServer::start_raw(
        raw,
        std::path::Path::new("/nonexistent"),
        std::time::Duration::from_secs(120),
    )
    .await;
    let mut t = Table {
        rows: Vec::new(),
        leaks: Vec::new(),
    };

    // gRPC, names of the other database written differently.
    for (attempt, db_id) in [
        ("Describe `pets_1`", "pets_1"),
        ("Describe `PETS_1` (case)", "PETS_1"),
        ("Describe `Pets_1` (case)", "Pets_1"),
        ("Describe `\"pets_1\"` (quoted)", "\"pets_1\""),
        ("Describe `pets_1 ` (trailing space)", "pets_1 "),
        ("Describe `pets_1.sqlite`", "pets_1.sqlite"),
        ("Describe `../pets_1` (path)", "../pets_1"),
        (
            "Describe `pets_1/pets_1.sqlite` (path)",
            "pets_1/pets_1.sqlite",
        ),
        (
            "Describe the file's absolute path",
            &spider_db.join("pets_1/pets_1.sqlite").display().to_string(),
        ),
        ("Describe `pets_*` (a pattern as an id)", "pets_*"),
        ("Describe `p\u{435}ts_1` (Cyrillic e)", "p\u{435}ts_1"),
        ("Describe `pets_1\\0` (NUL)", "pets_1\0"),
        ("Describe `pg_pets` (PostgreSQL)", "pg_pets"),
    ] {
        let r = server
            .databases()
            .describe(with_token(
                ASKER,
                pb::DescribeDatabaseRequest {
                    db_id: db_id.into(),
                },
            ))
            .await;
        t.add("gRPC", attempt, outcome(r));
    }
    let q = |db: &str| pb::Text2SqlRequest {
        db_id: db.into(),
        question: "How many pets are there?".into(),
        ..Default::default()
    };
    t.add(
        "gRPC",
        "Text2Sql.Generate on `pets_1`",
        outcome(
            server
                .text2sql()
                .generate(with_token(ASKER, q("pets_1")))
                .await,
        ),
    );
    t.add(
        "gRPC",
        "Text2Sql.GenerateStream on `pg_pets`",
        outcome(
            server
                .text2sql()
                .generate_stream(with_token(ASKER, q("pg_pets")))
                .await,
        ),
    );
    t.add(
        "gRPC",
        "Text2Sql.LinkSchema on `pets_1`",
        outcome(
            server
                .text2sql()
                .link_schema(with_token(
                    ASKER,
                    pb::LinkSchemaRequest {
                        db_id: "pets_1".into(),
                        question: "pets?".into(),
                        ..Default::default()
                    },
                ))
                .await,
        ),
    );
    t.add(
        "gRPC",
        "Text2Sql.Explain on `pets_1`",
        outcome(
            server
                .text2sql()
                .explain(with_token(
                    ASKER,
                    pb::ExplainRequest {
                        db_id: "pets_1".into(),
                        sql: "SELECT 1".into(),
                        ..Default::default()
                    },
                ))
                .await,
        ),
    );
    t.add(
        "gRPC",
        "Text2Sql.Debug on `pets_1`",
        outcome(
            server
                .text2sql()
                .debug(with_token(
                    ASKER,
                    pb::DebugRequest {
                        db_id: "pets_1".into(),
                        question: "pets?".into(),
                        sql: "SELECT 1".into(),
                        ..Default::default()
                    },
                ))
                .await,
        ),
    );
    t.add(
        "gRPC",
        "Text2Sql.Optimize on `pets_1`",
        outcome(
            server
                .text2sql()
                .optimize(with_token(ASKER, optimize("pets_1", "SELECT 1")))
                .await,
        ),
    );

    // SQL run on a database in scope that tries to read the other one.
    let pets_file = spider_db.join("pets_1/pets_1.sqlite").display().to_string();
    for (attempt, sql) in [
        (
            "SQLite: ATTACH the other file",
            format!("ATTACH DATABASE '{pets_file}' AS p"),
        ),
        (
            "SQLite: ATTACH then read, one statement each",
            format!("ATTACH '{pets_file}' AS p; SELECT count(*) FROM p.pets"),
        ),
        (
            "SQLite: read `pets_1.pets` by schema name",
            "SELECT count(*) FROM pets_1.pets".into(),
        ),
        (
            "SQLite: a `file:` URI through ATTACH",
            format!("ATTACH 'file:{pets_file}?mode=ro' AS p"),
        ),
        (
            "SQLite: `readfile()` of the other file",
            format!("SELECT length(readfile('{pets_file}'))"),
        ),
    ] {
        t.add(
            "gRPC Optimize on concert_singer",
            attempt,
            outcome(
                server
                    .text2sql()
                    .optimize(with_token(ASKER, optimize("concert_singer", &sql)))
                    .await,
            ),
        );
    }
    for (attempt, sql) in [
        (
            "PostgreSQL: `pets_1.pets` (another schema)",
            "SELECT count(*) FROM pets_1.pets",
        ),
        (
            "PostgreSQL: `\"pets_1\".\"pets\"` (quoted)",
            "SELECT count(*) FROM \"pets_1\".\"pets\"",
        ),
        (
            "PostgreSQL: `PETS_1.PETS` (case)",
            "SELECT count(*) FROM PETS_1.PETS",
        ),
        (
            "PostgreSQL: another schema in a subquery",
            "SELECT count(*) FROM singer WHERE singer_id IN (SELECT petid FROM pets_1.pets)",
        ),
        (
            "PostgreSQL: another schema in a CTE",
            "WITH p AS (SELECT * FROM pets_1.pets) SELECT count(*) FROM p",
        ),
        (
            "PostgreSQL: `postgres.pets_1.pets` (database-qualified)",
            "SELECT count(*) FROM postgres.pets_1.pets",
        ),
        (
            "PostgreSQL: information_schema.columns",
            "SELECT table_schema, column_name FROM information_schema.columns",
        ),
        (
            "PostgreSQL: pg_stats (sampled values)",
            "SELECT most_common_vals::text FROM pg_stats",
        ),
        (
            "PostgreSQL: set_config('search_path')",
            "SELECT set_config('search_path', 'pets_1', true)",
        ),
        (
            "PostgreSQL: SET search_path, then read",
            "SET search_path = pets_1; SELECT count(*) FROM pets",
        ),
        (
            "PostgreSQL: query_to_xml of the other schema",
            "SELECT query_to_xml('SELECT * FROM pets_1.pets', true, true, '')",
        ),
    ] {
        t.add(
            "gRPC Optimize on pg_concert",
            attempt,
            outcome(
                server
                    .text2sql()
                    .optimize(with_token(ASKER, optimize("pg_concert", sql)))
                    .await,
            ),
        );
    }

    // HTTP, the OpenAI routes and the playground's requests.
    let asker = format!("Bearer {ASKER}");
    let auth = [("Authorization", asker.as_str())];
    for (attempt, path) in [
        ("GET /v1/databases/pets_1", "/v1/databases/pets_1"),
        ("GET /v1/databases/PETS_1", "/v1/databases/PETS_1"),
        (
            "GET /v1/databases/..%2Fpets_1 (encoded path)",
            "/v1/databases/..%2Fpets_1",
        ),
        (
            "GET /v1/databases/concert_singer%2F..%2Fpets_1",
            "/v1/databases/concert_singer%2F..%2Fpets_1",
        ),
        ("GET /v1/databases/pg_pets", "/v1/databases/pg_pets"),
    ] {
        t.add("HTTP", attempt, http(&server, "GET", path, &auth, "").await);
    }
    let sql_body = |field: &str, db: &str| {
        format!(r#"{{"{field}": "{db}", "question": "How many pets are there?"}}"#)
    };
    t.add(
        "HTTP",
        "POST /v1/sql `dbId: pets_1`",
        http(
            &server,
            "POST",
            "/v1/sql",
            &auth,
            &sql_body("dbId", "pets_1"),
        )
        .await,
    );
    t.add(
        "HTTP",
        "POST /v1/sql `db_id: pets_1` (snake_case)",
        http(
            &server,
            "POST",
            "/v1/sql",
            &auth,
            &sql_body("db_id", "pets_1"),
        )
        .await,
    );
    t.add(
        "HTTP",
        "POST /v1/sql?stream=true on pets_1",
        http(
            &server,
            "POST",
            "/v1/sql?stream=true",
            &auth,
            &sql_body("dbId", "pets_1"),
        )
        .await,
    );
    t.add(
        "HTTP",
        "POST /v1/sql naming both `dbId` and `db_id`",
        http(&server, "POST", "/v1/sql", &auth, r#"{"dbId": "concert_singer", "db_id": "pets_1", "question": "How many pets are there?"}"#).await,
    );
    t.add(
        "playground",
        "POST /v1/sql on pets_1 with the playground's header",
        http(
            &server,
            "POST",
            "/v1/sql",
            &[
                ("Authorization", asker.as_str()),
                ("X-Quorum-Client", "playground"),
            ],
            &sql_body("dbId", "pets_1"),
        )
        .await,
    );
    t.add(
        "HTTP",
        "the token in the query string",
        http(
            &server,
            "GET",
            &format!("/v1/databases/concert_singer?access_token={ASKER}"),
            &[],
            "",
        )
        .await,
    );
    t.add(
        "HTTP",
        "the token as Basic credentials",
        http(
            &server,
            "GET",
            "/v1/databases/concert_singer",
            &[("Authorization", &format!("Basic {ASKER}"))],
            "",
        )
        .await,
    );
    t.add(
        "HTTP",
        "the token's SHA-256 instead of the token",
        http(
            &server,
            "GET",
            "/v1/databases/concert_singer",
            &[(
                "Authorization",
                &format!("Bearer {}", hex(&digest_of(ASKER))),
            )],
            "",
        )
        .await,
    );
    t.add(
        "OpenAI",
        "model `quorum-sql` with `database: pets_1`",
        http(&server, "POST", "/v1/chat/completions", &auth, r#"{"model": "quorum-sql", "database": "pets_1", "messages": [{"role": "user", "content": "How many pets?"}]}"#).await,
    );
    t.add(
        "OpenAI",
        "model `quorum-sql`, `database: pg_pets` in a system message",
        http(&server, "POST", "/v1/chat/completions", &auth, r#"{"model": "quorum-sql", "messages": [{"role": "system", "content": "database: pg_pets"}, {"role": "user", "content": "How many pets?"}]}"#).await,
    );
    let registrar = format!("Bearer {REGISTRAR}");
    let reg_auth = [("Authorization", registrar.as_str())];
    let chat = r#"{"model": "smol", "messages": [{"role": "user", "content": "SELECT * FROM pets"}], "max_tokens": 2}"#;
    t.add(
        "OpenAI",
        "POST /v1/chat/completions with a register-only token",
        http(&server, "POST", "/v1/chat/completions", &reg_auth, chat).await,
    );
    t.add(
        "OpenAI",
        "POST /v1/embeddings with a register-only token",
        http(
            &server,
            "POST",
            "/v1/embeddings",
            &reg_auth,
            r#"{"input": "pets"}"#,
        )
        .await,
    );
    t.add(
        "HTTP",
        "POST /v1/sql on team_x with a register-only token",
        http(
            &server,
            "POST",
            "/v1/sql",
            &reg_auth,
            &sql_body("dbId", "team_x"),
        )
        .await,
    );

    // Registrations that would give another team's data a name in scope.
    let register = |db_id: &str, path: &str| pb::RegisterDatabaseRequest {
        db_id: db_id.into(),
        path: path.into(),
        ..Default::default()
    };
    let pg_register = |db_id: &str, url: &str, schema: &str| pb::RegisterDatabaseRequest {
        db_id: db_id.into(),
        postgres: Some(pb::PostgresConnection {
            url: url.into(),
            schema: schema.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let localhost_url = pg.url.replace("127.0.0.1", "localhost");
    for (attempt, request) in [
        (
            "register `team_a` at pets_1's file",
            register("team_a", "pets_1/pets_1.sqlite"),
        ),
        (
            "register `team_b` at pets_1's file by `./` and `..`",
            register("team_b", "./pets_1/../pets_1/pets_1.sqlite"),
        ),
        (
            "register `team_c` at pets_1's absolute path",
            register("team_c", &pets_file),
        ),
        (
            "register `pets_1` itself (an id outside the scope)",
            register("pets_1", "world_1/world_1.sqlite"),
        ),
        (
            "register `team_pg` at schema pets_1",
            pg_register("team_pg", &pg.url, "pets_1"),
        ),
        (
            "register `team_pg2` at schema pets_1 via `localhost`",
            pg_register("team_pg2", &localhost_url, "pets_1"),
        ),
        (
            "register `team_pg3` at schema `PETS_1` (case)",
            pg_register("team_pg3", &pg.url, "PETS_1"),
        ),
    ] {
        t.add(
            "gRPC Register",
            attempt,
            outcome(
                server
                    .databases()
                    .register(with_token(REGISTRAR, request))
                    .await,
            ),
        );
    }
    t.add(
        "gRPC Register",
        "the asker (no register right) registers `concert_copy`",
        outcome(
            server
                .databases()
                .register(with_token(
                    ASKER,
                    register("concert_copy", "world_1/world_1.sqlite"),
                ))
                .await,
        ),
    );
    t.add(
        "gRPC",
        "the asker loads an adapter",
        outcome(
            server
                .inference()
                .load_adapter(with_token(
                    ASKER,
                    pb::LoadAdapterRequest {
                        model: "smol".into(),
                        name: "x".into(),
                        path: "x".into(),
                    },
                ))
                .await,
        ),
    );

    // Lists show only the scope.
    let listed: Vec<String> = server
        .databases()
        .list(with_token(ASKER, pb::ListDatabasesRequest {}))
        .await
        .expect("list")
        .into_inner()
        .databases
        .into_iter()
        .map(|d| d.db_id)
        .collect();
    let (_, http_list) = http(&server, "GET", "/v1/databases", &auth, "").await;
    let mut table = String::from("| # | surface | attempt | outcome |\n|---|---|---|---|\n");
    for (i, (surface, attempt, outcome)) in t.rows.iter().enumerate() {
        let _ = writeln!(table, "| {} | {surface} | {attempt} | {outcome} |", i + 1);
    }
    println!("{table}");
    if let Some(path) = std::env::var_os("QUORUM_PROBE_TABLE") {
        std::fs::write(path, &table).expect("probe table");
    }
    assert!(t.rows.len() >= 40, "{} attempts", t.rows.len());
    assert!(
        t.leaks.is_empty(),
        "attempts that got through:\n{}",
        t.leaks.join("\n")
    );
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, ["concert_singer", "pg_concert"]);
    assert!(!http_list.contains("pets"), "{http_list}");
    server.server.shutdown();
}
