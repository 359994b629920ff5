//! Registrations shared by replicas through `databases.registrations_file`: real servers on
//! loopback ports, one file, gRPC clients.

use quorum_proto::v1 as pb;
use tonic::Code;

use crate::server_support::{TestConfig, TestServer};

fn register(db_id: &str, path: &str) -> pb::RegisterDatabaseRequest {
    pb::RegisterDatabaseRequest {
        db_id: db_id.into(),
        path: path.into(),
        ..Default::default()
    }
}

async fn ids(server: &TestServer) -> Vec<String> {
    server
        .databases()
        .list(pb::ListDatabasesRequest {})
        .await
        .expect("list")
        .into_inner()
        .databases
        .into_iter()
        .map(|d| d.db_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_sharing_a_registrations_file_answer_over_each_others_registrations() {
    let allowed = tempfile::tempdir().expect("tempdir");
    let source = quorum_tests::spider_dir().join("database/pets_1/pets_1.sqlite");
    for name in ["pets_a.sqlite", "pets_b.sqlite"] {
        std::fs::copy(&source, allowed.path().join(name)).expect("copy database");
    }
    let shared = tempfile::tempdir().expect("tempdir");
    let file = shared.path().join("registrations.jsonl");
    let config = || TestConfig {
        allowed_dir: Some(allowed.path().to_path_buf()),
        registrations_file: Some(file.clone()),
        ..TestConfig::default()
    };
    let a = TestServer::start(config()).await;
    let b = TestServer::start(config()).await;

    // Registered through A: B describes it, lists it and answers a question over it.
    a.databases()
        .register(register("pets_a", "pets_a.sqlite"))
        .await
        .expect("register on A");
    let described = b
        .databases()
        .describe(pb::DescribeDatabaseRequest {
            db_id: "pets_a".into(),
        })
        .await
        .expect("B describes A's registration")
        .into_inner();
    assert!(described.tables.iter().any(|t| t.name == "Pets"));
    assert!(ids(&b).await.contains(&"pets_a".to_owned()));
    let answer = b
        .text2sql()
        .generate(pb::Text2SqlRequest {
            question: "How many pets are there?".into(),
            db_id: "pets_a".into(),
            ..Default::default()
        })
        .await
        .expect("B answers over A's registration")
        .into_inner();
    assert!(!answer.sql.is_empty());

    // One id, one database, whichever replica is asked.
    let taken = b
        .databases()
        .register(register("pets_a", "pets_b.sqlite"))
        .await
        .expect_err("the id is taken on A");
    assert_eq!(taken.code(), Code::AlreadyExists);
    // A refusal is not recorded: B still enforces its own checks.
    let outside = b
        .databases()
        .register(register("escape", "/etc/passwd"))
        .await
        .expect_err("outside the allowed directory");
    assert_eq!(outside.code(), Code::PermissionDenied);
    b.databases()
        .register(register("pets_b", "pets_b.sqlite"))
        .await
        .expect("register on B");
    assert!(ids(&a).await.contains(&"pets_b".to_owned()));

    // The file holds the two registrations, and a line another tool damaged is skipped.
    let text = std::fs::read_to_string(&file).expect("registrations file");
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(!text.contains("escape"));
    std::fs::write(&file, format!("{text}not a registration\n")).expect("append a bad line");

    // A replica started later (or restarted) has both.
    a.stop().await;
    let c = TestServer::start(config()).await;
    let listed = ids(&c).await;
    assert!(
        listed.contains(&"pets_a".to_owned()) && listed.contains(&"pets_b".to_owned()),
        "{listed:?}"
    );
    b.stop().await;
    c.stop().await;
}
