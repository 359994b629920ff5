//! Files over gRPC: a folder of Parquet files and a folder of CSV files written from Spider's
//! `concert_singer`, configured as databases, are listed with DuckDB's dialect, described with
//! their tables and answered over with Qwen2.5-Coder-0.5B (the answer's query ran through
//! DuckDB and found Spider's 6 singers).

use std::time::Duration;

use quorum_duckdb::load::{TableFormat, write_sqlite_as_files};
use quorum_proto::v1 as pb;
use quorum_server::config::file::RawConfig;
use quorum_tests::{QWEN_05B, model_path, spider_dir};
use tonic::Code;

use crate::server_support::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn file_databases_are_listed_described_and_answered_over_grpc() {
    let files = tempfile::tempdir().expect("files dir");
    let sqlite = spider_dir().join("database/concert_singer/concert_singer.sqlite");
    let parquet = files.path().join("concert_parquet");
    let csv = files.path().join("concert_csv");
    write_sqlite_as_files(&sqlite, &parquet, TableFormat::Parquet).expect("parquet written");
    write_sqlite_as_files(&sqlite, &csv, TableFormat::Csv).expect("csv written");
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
allowed_dir = {allowed:?}

[databases.duckdb.concert_parquet]
path = {parquet:?}

[databases.duckdb.concert_csv]
path = {csv:?}
threads = 1
max_memory_mib = 256

[pipeline]
round2 = false
revision = false
max_new_tokens = 96
"#,
        model = model_path(QWEN_05B).display().to_string(),
        parquet = parquet.display().to_string(),
        csv = csv.display().to_string(),
        allowed = files.path().display().to_string(),
    );
    let raw = RawConfig::from_toml_str(&toml).expect("config parses");
    let server = TestServer::start_raw(
        raw,
        std::path::Path::new("/nonexistent"),
        Duration::from_secs(300),
    )
    .await;
    let mut databases = server.databases();
    // Registration at run time, under the allowed directory only.
    let register = |db_id: &str, path: &str| pb::RegisterDatabaseRequest {
        db_id: db_id.into(),
        path: path.into(),
        postgres: None,
        mysql: None,
    };
    let added = databases
        .register(register("concert_files", "concert_parquet"))
        .await
        .expect("registers")
        .into_inner()
        .database
        .expect("summary");
    assert_eq!((added.dialect.as_str(), added.table_count), ("DuckDB", 4));
    let linked = files.path().join("linked");
    std::fs::create_dir(&linked).expect("folder");
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret.csv"), "token\nhunter2\n").expect("secret");
    std::os::unix::fs::symlink(outside.path().join("secret.csv"), linked.join("secret.csv"))
        .expect("link");
    let unreadable = files.path().join("unreadable");
    std::fs::create_dir(&unreadable).expect("folder");
    std::fs::write(unreadable.join("notes.txt"), "nothing").expect("txt");
    let outside_path = outside.path().join("secret.csv").display().to_string();
    for (db_id, path, code, says) in [
        (
            "linked",
            "linked",
            Code::PermissionDenied,
            "outside the allowed directory",
        ),
        (
            "outside",
            outside_path.as_str(),
            Code::PermissionDenied,
            "outside the allowed directory",
        ),
        ("unreadable", "unreadable", Code::InvalidArgument, "no .csv"),
    ] {
        let e = databases
            .register(register(db_id, path))
            .await
            .expect_err(db_id);
        assert_eq!(e.code(), code, "{db_id}: {e:?}");
        assert!(e.message().contains(says), "{db_id}: {}", e.message());
    }

    let listed = databases
        .list(pb::ListDatabasesRequest {})
        .await
        .expect("list")
        .into_inner()
        .databases;
    for db_id in ["concert_parquet", "concert_csv", "concert_files"] {
        let db = listed.iter().find(|d| d.db_id == db_id).expect(db_id);
        assert_eq!(
            (db.dialect.as_str(), db.table_count),
            ("DuckDB", 4),
            "{db_id}"
        );
        let described = databases
            .describe(pb::DescribeDatabaseRequest {
                db_id: db_id.into(),
            })
            .await
            .expect("describe")
            .into_inner();
        let names: Vec<&str> = described.tables.iter().map(|t| t.name.as_str()).collect();
        // A folder's files come in name order; a table follows those it references.
        assert_eq!(
            names,
            ["singer", "stadium", "concert", "singer_in_concert"],
            "{db_id}"
        );
        let answer = server
            .text2sql()
            .generate(pb::Text2SqlRequest {
                question: "How many singers do we have?".into(),
                db_id: db_id.into(),
                evidence: None,
                options: None,
            })
            .await
            .expect("an answer")
            .into_inner();
        println!("{db_id}: {}", answer.sql);
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
    }
}
