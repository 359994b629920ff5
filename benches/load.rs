//! Load generator for `quorum serve`: a fixed number of streaming Inference.Generate requests
//! from a fixed number of concurrent clients, over loopback. Every request must end with a
//! response or a clear status; none may be lost or hang (each has a deadline, the whole run a
//! time bound). Reports throughput and latency percentiles as JSON.
//!
//! `scripts/load-test.sh` starts a server and runs this against it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Parser;
use quorum_proto::v1 as pb;
use tokio::sync::Mutex;

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    server: String,
    /// The model to ask (a configured model's name); empty: the server's default.
    #[arg(long, default_value = "")]
    model: String,
    #[arg(long, default_value_t = 200)]
    requests: usize,
    #[arg(long, default_value_t = 32)]
    clients: usize,
    #[arg(long, default_value_t = 32)]
    max_tokens: u32,
    /// Deadline of each request (grpc-timeout).
    #[arg(long, default_value_t = 600)]
    request_timeout_secs: u64,
    /// Bound on the whole run.
    #[arg(long, default_value_t = 1500)]
    run_timeout_secs: u64,
}

const QUESTIONS: &[&str] = &[
    "Write a SQLite query counting the rows of table singer.",
    "Write a SQLite query listing stadium names ordered by capacity.",
    "Write a SQLite query for the average age of singers from France.",
    "Write a SQLite query for the year with the most concerts.",
    "Write a SQLite query listing students older than 20.",
    "Write a SQLite query counting pets per type.",
    "Write a SQLite query finding the youngest teacher.",
    "Write a SQLite query for the total capacity of all stadiums.",
];

#[derive(Debug, Clone)]
struct Outcome {
    code: String,
    latency: f64,
    ttft_ms: f64,
    tokens: u32,
}

async fn one(
    client: &mut pb::inference_client::InferenceClient<tonic::transport::Channel>,
    i: usize,
    args: &Args,
) -> Outcome {
    let start = Instant::now();
    let mut req = tonic::Request::new(pb::InferenceRequest {
        model: args.model.clone(),
        input: Some(pb::inference_request::Input::Chat(pb::ChatMessages {
            messages: vec![pb::ChatMessage {
                role: "user".into(),
                content: QUESTIONS[i % QUESTIONS.len()].into(),
            }],
        })),
        sampling: Some(pb::SamplingOptions {
            temperature: Some(0.0),
            max_tokens: Some(args.max_tokens),
            ..Default::default()
        }),
        adapter: None,
    });
    req.set_timeout(Duration::from_secs(args.request_timeout_secs));
    let fail = |s: tonic::Status, start: Instant| Outcome {
        code: format!("{:?}", s.code()),
        latency: start.elapsed().as_secs_f64(),
        ttft_ms: 0.0,
        tokens: 0,
    };
    let mut stream = match client.generate(req).await {
        Ok(r) => r.into_inner(),
        Err(s) => return fail(s, start),
    };
    loop {
        match stream.message().await {
            Ok(Some(m)) => {
                if let Some(u) = m.usage {
                    return Outcome {
                        code: "Ok".into(),
                        latency: start.elapsed().as_secs_f64(),
                        ttft_ms: u.ttft_ms,
                        tokens: u.completion_tokens,
                    };
                }
            }
            Ok(None) => {
                return Outcome {
                    code: "EndedWithoutUsage".into(),
                    latency: start.elapsed().as_secs_f64(),
                    ttft_ms: 0.0,
                    tokens: 0,
                };
            }
            Err(s) => return fail(s, start),
        }
    }
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Arc::new(Args::parse());
    let channel = tonic::transport::Endpoint::from_shared(args.server.clone())?
        .connect()
        .await?;
    let next = Arc::new(AtomicUsize::new(0));
    let results = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.clients {
        let (args, next, results) = (args.clone(), next.clone(), results.clone());
        let mut client = pb::inference_client::InferenceClient::new(channel.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= args.requests {
                    break;
                }
                let o = one(&mut client, i, &args).await;
                results.lock().await.push(o);
            }
        }));
    }
    let all = futures_join(tasks);
    if tokio::time::timeout(Duration::from_secs(args.run_timeout_secs), all)
        .await
        .is_err()
    {
        bail!("the run did not finish within {} s", args.run_timeout_secs);
    }
    let wall = start.elapsed().as_secs_f64();
    let results = results.lock().await.clone();
    let ok: Vec<&Outcome> = results.iter().filter(|o| o.code == "Ok").collect();
    let mut codes = std::collections::BTreeMap::new();
    for o in &results {
        *codes.entry(o.code.clone()).or_insert(0usize) += 1;
    }
    let lat: Vec<f64> = ok.iter().map(|o| o.latency).collect();
    let ttft: Vec<f64> = ok.iter().map(|o| o.ttft_ms / 1000.0).collect();
    let tokens: u64 = ok.iter().map(|o| u64::from(o.tokens)).sum();
    println!(
        "{}",
        serde_json::json!({
            "requests": args.requests, "clients": args.clients, "max_tokens": args.max_tokens,
            "finished": results.len(), "lost": args.requests - results.len(), "codes": codes,
            "wall_s": wall, "requests_per_s": results.len() as f64 / wall, "output_tok_s": tokens as f64 / wall,
            "latency_p50_s": percentile(&lat, 0.5), "latency_p99_s": percentile(&lat, 0.99),
            "ttft_p50_s": percentile(&ttft, 0.5), "ttft_p99_s": percentile(&ttft, 0.99),
        })
    );
    if results.len() != args.requests {
        bail!("{} requests were lost", args.requests - results.len());
    }
    Ok(())
}

async fn futures_join(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for t in tasks {
        let _ = t.await;
    }
}
