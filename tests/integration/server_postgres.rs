//! PostgreSQL over gRPC, against a real server started by `scripts/pg-server.sh`: a database
//! from the configuration and one registered at run time are listed, described and answered
//! over with Qwen2.5-Coder-0.5B, through a read-only role; bad credentials, a host the server
//! does not allow, an unreachable server and a server that goes away in the middle of a
//! request (between its two rounds) each get a clear status, and the server keeps serving
//! once PostgreSQL is back.

use std::time::Duration;

use quorum_proto::v1 as pb;
use quorum_server::config::file::RawConfig;
use quorum_tests::{QWEN_05B, model_path};
use tonic::Code;

use crate::postgres_support::PgServer;
use crate::server_support::TestServer;

const READER_PASSWORD: &str = "reader-secret-7f3a";

fn ask(db_id: &str, text: &str) -> pb::Text2SqlRequest {
    pb::Text2SqlRequest {
        question: text.into(),
        db_id: db_id.into(),
        evidence: None,
        options: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_databases_are_served_registered_and_survive_outages() {
    // The sync PostgreSQL client runs its own runtime: set up off the async workers.
    let pg = tokio::task::spawn_blocking(|| {
        let pg = PgServer::start();
        pg.load_spider("pets_1");
        pg.load_spider("concert_singer");
        // The role the documentation tells operators to create: it can read, nothing else.
        pg.client()
            .batch_execute(&format!(
                "CREATE ROLE quorum_reader LOGIN PASSWORD '{READER_PASSWORD}'; \
                 GRANT USAGE ON SCHEMA pets_1, concert_singer TO quorum_reader; \
                 GRANT SELECT ON ALL TABLES IN SCHEMA pets_1, concert_singer TO quorum_reader"
            ))
            .expect("read-only role");
        pg
    })
    .await
    .expect("PostgreSQL set up");
    let port = pg
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let reader_url = format!("postgresql://quorum_reader@127.0.0.1:{port}/postgres");
    let secrets = tempfile::tempdir().expect("secrets dir");
    let password_file = secrets.path().join("reader-password");
    std::fs::write(&password_file, format!("{READER_PASSWORD}\n")).expect("secret");

    let registrations = secrets.path().join("registrations.jsonl");
    let toml = format!(
        r#"
[server]
listen = "127.0.0.1:0"
metrics_listen = ""

[limits]
request_timeout_secs = 300
max_new_tokens = 128

[[models]]
name = "coder"
source = {model:?}
roles = ["generator"]
format = "rep"

[databases]
dir = "/nonexistent"
postgres_hosts = ["127.0.0.1"]
registrations_file = {registrations:?}

[databases.postgres.pets_pg]
url = {reader_url:?}
schema = "pets_1"
password_file = {password_file:?}

[databases.postgres_passwords]
reader = {password_file:?}

[pipeline]
round2 = false
revision = false
max_new_tokens = 96
"#,
        model = model_path(QWEN_05B).display().to_string(),
        password_file = password_file.display().to_string(),
        registrations = registrations.display().to_string(),
    );
    let raw = RawConfig::from_toml_str(&toml).expect("config parses");
    let server = TestServer::start_raw(
        raw,
        std::path::Path::new("/nonexistent"),
        Duration::from_secs(300),
    )
    .await;
    let mut databases = server.databases();

    // The configured database: listed with its dialect and a location without the password.
    let listed = databases
        .list(pb::ListDatabasesRequest {})
        .await
        .expect("list")
        .into_inner()
        .databases;
    let pets = listed
        .iter()
        .find(|d| d.db_id == "pets_pg")
        .expect("pets_pg");
    assert_eq!(pets.dialect, "PostgreSQL");
    assert_eq!(pets.table_count, 3);
    assert!(
        pets.location.contains("quorum_reader@127.0.0.1"),
        "{}",
        pets.location
    );
    assert!(!pets.location.contains(READER_PASSWORD));
    let described = databases
        .describe(pb::DescribeDatabaseRequest {
            db_id: "pets_pg".into(),
        })
        .await
        .expect("describe")
        .into_inner();
    let names: Vec<&str> = described.tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["student", "has_pet", "pets"]);
    assert!(!described.foreign_keys.is_empty());

    // Registration: a named password, then the ways it can go wrong.
    let register =
        |db_id: &str, url: &str, schema: &str, password_name: &str| pb::RegisterDatabaseRequest {
            db_id: db_id.into(),
            path: String::new(),
            postgres: Some(pb::PostgresConnection {
                url: url.into(),
                schema: schema.into(),
                password_name: password_name.into(),
            }),
            mysql: None,
        };
    let added = databases
        .register(register(
            "concert_pg",
            &reader_url,
            "concert_singer",
            "reader",
        ))
        .await
        .expect("registers")
        .into_inner()
        .database
        .expect("summary");
    assert_eq!(
        (added.dialect.as_str(), added.table_count),
        ("PostgreSQL", 4)
    );
    let wrong_password = format!("postgresql://quorum_reader:nope@127.0.0.1:{port}/postgres");
    let e = databases
        .register(register("bad_creds", &wrong_password, "concert_singer", ""))
        .await
        .expect_err("wrong password");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("credentials"), "{}", e.message());
    assert!(!e.message().contains("nope"));
    let e = databases
        .register(register(
            "far",
            "postgresql://quorum_reader@10.1.2.3:5432/postgres",
            "public",
            "reader",
        ))
        .await
        .expect_err("host not allowed");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let e = databases
        .register(register(
            "closed",
            "postgresql://quorum_reader@127.0.0.1:1/postgres",
            "public",
            "reader",
        ))
        .await
        .expect_err("nothing listens");
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    let e = databases
        .register(register("noschema", &reader_url, "atlantis", "reader"))
        .await
        .expect_err("no such schema");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let e = databases
        .register(register("nopass", &reader_url, "pets_1", "unknown"))
        .await
        .expect_err("unknown password name");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let e = databases
        .register(register(
            "rootfile",
            &format!("{reader_url}?sslmode=verify-full&sslrootcert=/etc/passwd"),
            "pets_1",
            "reader",
        ))
        .await
        .expect_err("a file named by the client");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("sslrootcert"), "{}", e.message());

    // The registration went to the shared file by its password's name, never the password;
    // the refused ones did not. A second server on the same file serves it.
    let recorded = std::fs::read_to_string(&registrations).expect("registrations file");
    assert_eq!(recorded.lines().count(), 1, "{recorded}");
    assert!(recorded.contains("concert_pg") && recorded.contains("\"password_name\":\"reader\""));
    assert!(!recorded.contains(READER_PASSWORD));
    let replica = TestServer::start_raw(
        RawConfig::from_toml_str(&toml).expect("config parses"),
        std::path::Path::new("/nonexistent"),
        Duration::from_secs(300),
    )
    .await;
    let seen = replica
        .databases()
        .describe(pb::DescribeDatabaseRequest {
            db_id: "concert_pg".into(),
        })
        .await
        .expect("the replica reads the registration")
        .into_inner();
    assert_eq!(seen.origin, pb::DatabaseOrigin::Registered as i32);
    assert_eq!(seen.tables.len(), 4);
    replica.stop().await;

    // A question answered on PostgreSQL, with its evidence.
    let mut text2sql = server.text2sql();
    let answer = text2sql
        .generate(ask("concert_pg", "How many singers do we have?"))
        .await
        .expect("an answer")
        .into_inner();
    println!("concert_pg: {}", answer.sql);
    let chosen = &answer.candidates[answer.chosen_candidate as usize];
    assert!(
        matches!(chosen.outcome, Some(pb::candidate::Outcome::Ok(_))),
        "{chosen:?}"
    );
    let preview = answer.preview.as_ref().expect("executed rows");
    assert_eq!(preview.rows.len(), 1);

    // PostgreSQL goes away in the middle of a request: UNAVAILABLE, not a vote over errors.
    // The request runs round 2 as well, and PostgreSQL stops once the PreSQL has executed on
    // it (the stream's first event), so round 2's query meets a stopped server: stopping after
    // a fixed delay instead raced the whole request once the engine got faster.
    let mut racing = server.text2sql();
    let mut request = ask(
        "pets_pg",
        "What is the average weight of the pets of each type?",
    );
    request.options = Some(pb::PipelineOptions {
        round2: Some(true),
        ..Default::default()
    });
    let mut during = racing
        .generate_stream(request)
        .await
        .expect("the stream starts")
        .into_inner();
    let first = during.message().await.expect("the PreSQL event");
    assert!(
        matches!(
            first.as_ref().and_then(|e| e.event.as_ref()),
            Some(pb::text2_sql_event::Event::PreSql(_))
        ),
        "{first:?}"
    );
    tokio::task::spawn_blocking({
        let pg_stop = pg.stop_handle();
        move || pg_stop()
    })
    .await
    .expect("stopped");
    let e = loop {
        match during.message().await {
            Ok(Some(pb::Text2SqlEvent {
                event: Some(pb::text2_sql_event::Event::Answer(answer)),
            })) => panic!("answered after the database went away: {answer:?}"),
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended without an answer or a status"),
            Err(e) => break e,
        }
    };
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    assert!(!e.message().contains(READER_PASSWORD));
    // And while it is down.
    let e = text2sql
        .generate(ask("pets_pg", "How many pets are there?"))
        .await
        .expect_err("down");
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    // Back up: the same server answers again.
    let pg = tokio::task::spawn_blocking(move || {
        let mut pg = pg;
        pg.restart();
        pg
    })
    .await
    .expect("restarted");
    let again = text2sql
        .generate(ask("concert_pg", "How many singers do we have?"))
        .await
        .expect("answers after the outage")
        .into_inner();
    assert!(again.preview.is_some(), "{again:?}");
    server.stop().await;
    tokio::task::spawn_blocking(move || drop(pg))
        .await
        .expect("stopped");
}
