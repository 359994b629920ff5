//! `quorum serve` with a shipped profile, started from a directory outside the checkout,
//! through the binary:
//! - installed as `PREFIX/bin/quorum` beside `PREFIX/share/quorum/adapters` (what
//!   `scripts/install.sh` lays out), it serves the shipped adapters from there: the small
//!   profile, which runs all of them, puts each on its voter and asks the trained selector on
//!   split votes (`ListModels`, `/metrics`), and the log names the adapters by absolute path;
//! - pointed at a directory without them (`--adapters-dir`), the default profile refuses to
//!   start, naming the selector's adapter that is missing and where it looked.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use quorum_proto::v1 as pb;
use quorum_proto::v1::inference_client::InferenceClient;

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn spider_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("QUORUM_SPIDER_DIR") {
        return PathBuf::from(d);
    }
    checkout().join("../shared/data/spider")
}

fn free_addr() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// The binary, started from `cwd` with none of the variables that name the adapters.
fn quorum(binary: &Path, cwd: &Path) -> Command {
    let mut cmd = Command::new(binary);
    cmd.current_dir(cwd)
        .env_remove("QUORUM_ADAPTERS_DIR")
        .env_remove("QUORUM_HOME")
        .env_remove("QUORUM_CONFIG")
        .env_remove("QUORUM_AUTH_TOKEN")
        .env_remove("QUORUM_DATABASE_DIR");
    cmd
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_missing_shipped_adapter_stops_the_start_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("no-adapters");
    std::fs::create_dir_all(&empty).unwrap();
    let output = quorum(Path::new(env!("CARGO_BIN_EXE_quorum")), dir.path())
        .args(["serve", "--listen", &free_addr(), "--metrics-listen", ""])
        .arg("--adapters-dir")
        .arg(&empty)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started without its adapters");
    assert!(stderr.contains("`select-s2`"), "{stderr}");
    assert!(stderr.contains(&empty.display().to_string()), "{stderr}");
    assert!(stderr.contains("QUORUM_HOME"), "{stderr}");
}

#[test]
fn an_installed_binary_serves_the_shipped_adapters_from_its_prefix() {
    let dir = tempfile::tempdir().unwrap();
    // PREFIX/bin/quorum and PREFIX/share/quorum/adapters, as scripts/install.sh lays them out.
    let prefix = dir.path().join("prefix");
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::fs::create_dir_all(prefix.join("share/quorum")).unwrap();
    let binary = prefix.join("bin/quorum");
    std::fs::copy(env!("CARGO_BIN_EXE_quorum"), &binary).unwrap();
    std::os::unix::fs::symlink(
        checkout().join("adapters").canonicalize().unwrap(),
        prefix.join("share/quorum/adapters"),
    )
    .unwrap();
    // One database, in a directory without train.json: no demonstration index to build.
    let databases = dir.path().join("databases/concert_singer");
    std::fs::create_dir_all(&databases).unwrap();
    std::fs::copy(
        spider_dir().join("database/concert_singer/concert_singer.sqlite"),
        databases.join("concert_singer.sqlite"),
    )
    .unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let (addr, metrics) = (free_addr(), free_addr());
    let log = dir.path().join("server.log");
    let _server = Server(
        quorum(&binary, &elsewhere)
            .args(["serve", "--listen", &addr, "--metrics-listen", &metrics])
            .args(["--profile", "small", "--database-dir"])
            .arg(dir.path().join("databases"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listed = runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            assert!(
                Instant::now() < deadline,
                "{}",
                std::fs::read_to_string(&log).unwrap()
            );
            if let Ok(mut client) = InferenceClient::connect(format!("http://{addr}")).await
                && let Ok(listed) = client.list_models(pb::ListModelsRequest {}).await
                && listed.get_ref().selector.is_some()
            {
                break listed.into_inner();
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    let adapters: Vec<(&str, &str)> = listed
        .generators
        .iter()
        .map(|g| (g.name.as_str(), g.adapter.as_str()))
        .collect();
    assert_eq!(
        adapters,
        [
            ("qwen-rep", "rep-s2"),
            ("qwen-mschema", "mschema-s2"),
            ("qwen-ddl", "")
        ]
    );
    let selector = listed.selector.unwrap();
    assert_eq!(
        (selector.adapter.as_str(), selector.enabled),
        ("select-s1", true)
    );
    let log_text = std::fs::read_to_string(&log).unwrap();
    let shipped = prefix.join("share/quorum/adapters/coder-rep-s2");
    assert!(
        log_text.contains(&shipped.display().to_string()),
        "{log_text}"
    );
    let scrape = runtime.block_on(async {
        let stream = tokio::net::TcpStream::connect(&metrics).await.unwrap();
        http_get(stream, "/metrics").await
    });
    assert!(
        scrape.contains(r#"quorum_pipeline_selector_info{model="qwen2.5-coder-0.5b",adapter="select-s1",enabled="true"} 1"#),
        "{scrape}"
    );
}

/// A plain HTTP/1.1 GET, read to the end (the server closes after the response).
async fn http_get(mut stream: tokio::net::TcpStream, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).await.unwrap();
    body
}
