//! TLS: the server speaks gRPC over TLS with a configured certificate, and a client that does
//! not use TLS gets nowhere.

use std::path::PathBuf;
use std::process::Command;

use quorum_proto::v1 as pb;
use quorum_proto::v1::databases_client::DatabasesClient;

use crate::server_support::{TestConfig, TestServer};

/// A throwaway CA and a certificate for `localhost` signed by it, made with the openssl CLI.
/// Returns (CA certificate, server certificate, server key).
fn certificates(dir: &std::path::Path) -> (PathBuf, PathBuf, PathBuf) {
    let path = |name: &str| dir.join(name);
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=quorum test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    std::fs::write(
        path("san.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .expect("extensions file");
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "san.ext",
        "-out",
        "server.pem",
    ]);
    (path("ca.pem"), path("server.pem"), path("server.key"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_and_plaintext_gets_nothing() {
    let dir = std::env::temp_dir().join(format!("quorum-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (ca, cert, key) = certificates(&dir);
    let server = TestServer::start(TestConfig {
        tls: Some((cert, key)),
        tls_ca: Some(ca),
        ..TestConfig::default()
    })
    .await;
    let listed = server
        .databases()
        .list(pb::ListDatabasesRequest {})
        .await
        .expect("Databases.List over TLS")
        .into_inner();
    assert!(listed.databases.iter().any(|d| d.db_id == "concert_singer"));

    let plain = tonic::transport::Channel::from_shared(format!(
        "http://127.0.0.1:{}",
        server.server.addr.port()
    ))
    .expect("uri")
    .connect()
    .await;
    if let Ok(channel) = plain {
        let err = DatabasesClient::new(channel)
            .list(pb::ListDatabasesRequest {})
            .await
            .expect_err("plaintext is refused");
        assert_ne!(err.code(), tonic::Code::Ok);
    }
    server.stop().await;
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
