//! What authorization and the audit trail cost a request: the same cheap call (describing a
//! database, over gRPC and over HTTP) against three servers in one process, alternated
//! request by request: one without tokens, one with `server.auth_token`, and one with a tokens
//! file of 20 scoped tokens (the caller's last, so that every entry is compared) writing the
//! audit trail to a file. Prints the median and 90th percentile of each, in microseconds.
//!
//! `cargo run -p quorum-benches --bin quorum-bench-auth -- --requests 2000`

use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Parser;
use quorum_proto::v1 as pb;
use quorum_proto::v1::databases_client::DatabasesClient;
use quorum_server::auth::tokens_file::{digest_of, hex};
use quorum_server::config::file::RawConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;

#[derive(Parser, Debug)]
struct Args {
    /// Requests per server and surface.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
}

const TOKEN: &str = "bench-token-secret";

struct Target {
    name: &'static str,
    token: Option<&'static str>,
    grpc: DatabasesClient<Channel>,
    http: std::net::SocketAddr,
    grpc_us: Vec<f64>,
    http_us: Vec<f64>,
    _server: quorum_server::RunningServer,
}

fn config(server_lines: &str) -> String {
    let model = quorum_tests::model_path(quorum_tests::SMOLLM2);
    let db = quorum_tests::spider_dir().join("database/concert_singer/concert_singer.sqlite");
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\n{server_lines}\n\
         [[models]]\nname = \"smol\"\nsource = {:?}\nroles = [\"generator\"]\n\n\
         [databases]\ndir = \"/nonexistent\"\n[databases.entries]\nconcert_singer = {:?}\n",
        model.display().to_string(),
        db.display().to_string()
    )
}

async fn start(
    name: &'static str,
    token: Option<&'static str>,
    server_lines: &str,
) -> Result<Target> {
    let mut raw = RawConfig::from_toml_str(&config(server_lines))?;
    raw.cpu_path = Some(quorum_tests::cpu_path());
    let resolved = quorum_server::config::resolved::resolve(
        raw,
        &quorum_tests::model_dirs(),
        std::path::Path::new("/nonexistent"),
    )?;
    let server = quorum_server::start(resolved).await?;
    let channel = Channel::from_shared(format!("http://{}", server.addr))?
        .connect()
        .await?;
    Ok(Target {
        name,
        token,
        grpc: DatabasesClient::new(channel),
        http: server.metrics_addr.expect("HTTP port"),
        grpc_us: Vec::new(),
        http_us: Vec::new(),
        _server: server,
    })
}

async fn grpc_once(t: &mut Target) -> Result<Duration> {
    let mut request = tonic::Request::new(pb::DescribeDatabaseRequest {
        db_id: "concert_singer".into(),
    });
    if let Some(token) = t.token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse()?);
    }
    let started = Instant::now();
    t.grpc.describe(request).await?;
    Ok(started.elapsed())
}

async fn http_once(t: &Target) -> Result<Duration> {
    let auth = t
        .token
        .map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    let request = format!(
        "GET /v1/databases/concert_singer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}\r\n"
    );
    let started = Instant::now();
    let mut stream = tokio::net::TcpStream::connect(t.http).await?;
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let elapsed = started.elapsed();
    anyhow::ensure!(
        response.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&response)
    );
    Ok(elapsed)
}

fn summary(values: &mut [f64]) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.9))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let mut tokens = String::new();
    for i in 0..19 {
        tokens += &format!(
            "[[token]]\nname = \"team{i}\"\nsha256 = \"{}\"\ndatabases = [\"team{i}_*\"]\nrights = [\"ask\"]\n",
            hex(&digest_of(&format!("other-secret-{i}")))
        );
    }
    tokens += &format!(
        "[[token]]\nname = \"bench\"\nsha256 = \"{}\"\ndatabases = [\"concert_*\", \"sales\"]\nrights = [\"ask\"]\nrequests_per_minute = 1000000\n",
        hex(&digest_of(TOKEN))
    );
    let tokens_path = dir.path().join("tokens.toml");
    std::fs::write(&tokens_path, tokens)?;
    let audit = dir.path().join("audit.jsonl");
    let mut targets = vec![
        start("no token (loopback)", None, "").await?,
        start(
            "auth_token",
            Some(TOKEN),
            &format!("auth_token = {TOKEN:?}"),
        )
        .await?,
        start(
            "tokens file (20) + audit file",
            Some(TOKEN),
            &format!(
                "tokens_file = {:?}\naudit_log = {:?}",
                tokens_path.display().to_string(),
                audit.display().to_string()
            ),
        )
        .await?,
    ];
    // Warm-up: connections, the first requests' allocations.
    for t in &mut targets {
        for _ in 0..50 {
            grpc_once(t).await?;
            http_once(t).await?;
        }
    }
    for i in 0..args.requests {
        // Each server goes first in turn, so that none pays for its place in the round.
        targets.rotate_left(usize::from(i > 0));
        for t in &mut targets {
            let g = grpc_once(t).await?;
            t.grpc_us.push(g.as_secs_f64() * 1e6);
            let h = http_once(t).await?;
            t.http_us.push(h.as_secs_f64() * 1e6);
        }
    }
    println!(
        "| server | gRPC Describe median | p90 | HTTP GET /v1/databases/{{id}} median | p90 |"
    );
    println!("|---|---|---|---|---|");
    targets.sort_by_key(|t| t.name);
    for t in &mut targets {
        let (gm, g9) = summary(&mut t.grpc_us);
        let (hm, h9) = summary(&mut t.http_us);
        println!(
            "| {} | {gm:.0} µs | {g9:.0} µs | {hm:.0} µs | {h9:.0} µs |",
            t.name
        );
    }
    let lines = std::fs::read_to_string(&audit)?.lines().count();
    println!(
        "\naudit lines written: {lines}; requests per server and surface: {}",
        args.requests
    );
    Ok(())
}
