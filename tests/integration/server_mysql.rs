//! MySQL over gRPC, against a real MariaDB started by `scripts/mariadb-server.sh`: a database
//! from the configuration, reached as the read-only user docs/DEPLOY.md describes with its
//! password in a file, is listed with its dialect and a location without the password,
//! described with its keys, and answered over with Qwen2.5-Coder-0.5B (the answer's query ran
//! on MariaDB and found Spider's 6 singers); a database registered at run time with a named
//! password is served, and registrations without credentials, with an unknown password name,
//! of a missing database, on a host the server does not allow or naming a file on the server
//! are refused with a clear status.

use std::time::Duration;

use mysql::prelude::Queryable;
use quorum_proto::v1 as pb;
use quorum_server::config::file::RawConfig;
use quorum_tests::{QWEN_05B, model_path};
use tonic::Code;

use crate::mysql_support::MariaDbServer;
use crate::server_support::TestServer;

const READER_PASSWORD: &str = "reader-secret-51c9";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_databases_are_listed_described_and_answered_over_grpc() {
    // The sync MySQL client: set up off the async workers.
    let maria = tokio::task::spawn_blocking(|| {
        let maria = MariaDbServer::start();
        maria.load_spider("concert_singer");
        maria.load_spider("pets_1");
        maria
            .admin()
            .query_drop(format!(
                "CREATE USER 'quorum_reader'@'127.0.0.1' IDENTIFIED BY '{READER_PASSWORD}'; \
                 GRANT SELECT ON concert_singer.* TO 'quorum_reader'@'127.0.0.1'; \
                 GRANT SELECT ON pets_1.* TO 'quorum_reader'@'127.0.0.1'"
            ))
            .expect("read-only user");
        maria
    })
    .await
    .expect("MariaDB set up");
    let port = maria.url.rsplit(':').next().expect("a port").to_owned();
    let reader_url = format!("mysql://quorum_reader@127.0.0.1:{port}/concert_singer");
    let secrets = tempfile::tempdir().expect("secrets dir");
    let password_file = secrets.path().join("reader-password");
    std::fs::write(&password_file, format!("{READER_PASSWORD}\n")).expect("secret");
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
mysql_hosts = ["127.0.0.1"]

[databases.mysql_passwords]
reader = {password_file:?}

[databases.mysql.concert_my]
url = {reader_url:?}
password_file = {password_file:?}

[pipeline]
round2 = false
revision = false
max_new_tokens = 96
"#,
        model = model_path(QWEN_05B).display().to_string(),
        password_file = password_file.display().to_string(),
    );
    let raw = RawConfig::from_toml_str(&toml).expect("config parses");
    let server = TestServer::start_raw(
        raw,
        std::path::Path::new("/nonexistent"),
        Duration::from_secs(300),
    )
    .await;
    let mut databases = server.databases();
    let listed = databases
        .list(pb::ListDatabasesRequest {})
        .await
        .expect("list")
        .into_inner()
        .databases;
    let concert = listed
        .iter()
        .find(|d| d.db_id == "concert_my")
        .expect("concert_my");
    assert_eq!(concert.dialect, "MySQL");
    assert_eq!(concert.table_count, 4);
    assert!(
        concert.location.contains("quorum_reader@127.0.0.1"),
        "{}",
        concert.location
    );
    assert!(!concert.location.contains(READER_PASSWORD));
    let described = databases
        .describe(pb::DescribeDatabaseRequest {
            db_id: "concert_my".into(),
        })
        .await
        .expect("describe")
        .into_inner();
    let mut names: Vec<&str> = described.tables.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["concert", "singer", "singer_in_concert", "stadium"]);
    assert!(!described.foreign_keys.is_empty());

    // Registration at run time: a named password, then the ways it can go wrong.
    let register =
        |db_id: &str, url: &str, database: &str, password_name: &str| pb::RegisterDatabaseRequest {
            db_id: db_id.into(),
            path: String::new(),
            postgres: None,
            mysql: Some(pb::MySqlConnection {
                url: url.into(),
                database: database.into(),
                password_name: password_name.into(),
            }),
        };
    let base = format!("mysql://quorum_reader@127.0.0.1:{port}");
    let added = databases
        .register(register("pets_my", &base, "pets_1", "reader"))
        .await
        .expect("registers")
        .into_inner()
        .database
        .expect("summary");
    assert_eq!((added.dialect.as_str(), added.table_count), ("MySQL", 3));
    for (db_id, url, database, password, code, says) in [
        (
            "no_password",
            base.clone(),
            "pets_1",
            "",
            Code::InvalidArgument,
            "credentials",
        ),
        (
            "unknown_password",
            base.clone(),
            "pets_1",
            "nope",
            Code::InvalidArgument,
            "password",
        ),
        (
            "no_such_db",
            base.clone(),
            "nope",
            "reader",
            Code::InvalidArgument,
            "does not exist",
        ),
        (
            "other_host",
            format!("mysql://quorum_reader@localhost:{port}"),
            "pets_1",
            "reader",
            Code::PermissionDenied,
            "allowed hosts",
        ),
        (
            "server_file",
            format!("{base}?root_cert_path=/etc/passwd"),
            "pets_1",
            "reader",
            Code::PermissionDenied,
            "file",
        ),
    ] {
        let e = databases
            .register(register(db_id, &url, database, password))
            .await
            .expect_err(db_id);
        assert_eq!(e.code(), code, "{db_id}: {e:?}");
        assert!(e.message().contains(says), "{db_id}: {}", e.message());
        assert!(!e.message().contains(READER_PASSWORD));
    }

    let answer = server
        .text2sql()
        .generate(pb::Text2SqlRequest {
            question: "How many singers do we have?".into(),
            db_id: "concert_my".into(),
            evidence: None,
            options: None,
        })
        .await
        .expect("an answer")
        .into_inner();
    println!("concert_my: {}", answer.sql);
    let chosen = &answer.candidates[answer.chosen_candidate as usize];
    assert!(
        matches!(chosen.outcome, Some(pb::candidate::Outcome::Ok(_))),
        "{chosen:?}"
    );
    let preview = answer.preview.as_ref().expect("executed rows");
    assert_eq!(preview.rows.len(), 1);
    assert!(
        format!("{:?}", preview.rows[0]).contains('6'),
        "{preview:?}"
    );
    drop(maria);
}
