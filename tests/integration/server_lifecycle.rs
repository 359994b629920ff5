//! Operational behaviour over a real socket with SmolLM2: a client leaving mid-stream frees
//! the engine, deadlines end work with DEADLINE_EXCEEDED, a full engine answers
//! RESOURCE_EXHAUSTED, and shutdown drains (new calls UNAVAILABLE, in-flight ones finish) or
//! cancels what outlives the grace period.

use std::time::{Duration, Instant};

use quorum_proto::v1 as pb;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

use super::server_support::{TestConfig, TestServer, collect, prompt_request, with_timeout};

const PROMPT: &str = "List every table of a database about concerts and singers, one per line:";

/// 500 tokens past the end-of-sequence token: a request that is still generating when these
/// tests act on it (a fast CPU answered `PROMPT` in full within their deadlines).
fn long_generation() -> pb::InferenceRequest {
    let mut request = prompt_request(PROMPT, 500);
    request.sampling = Some(pb::SamplingOptions {
        max_tokens: Some(500),
        ignore_eos: true,
        ..Default::default()
    });
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_leaving_mid_stream_frees_the_engine() {
    let server = TestServer::start(TestConfig::default()).await;
    let mut client = server.inference();
    let mut stream = client
        .generate(long_generation())
        .await
        .expect("generate")
        .into_inner();
    for _ in 0..3 {
        stream.message().await.expect("message").expect("not ended");
    }
    assert!(
        server.load().await.kv_blocks_used > 0,
        "the request holds blocks"
    );
    drop(stream);
    server.wait_engine_idle().await;
    // The RPC counts as cancelled, not as OK.
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = server.metrics().await;
        if metrics.contains("method=\"Inference/Generate\",code=\"CANCELLED\"} 1") {
            break;
        }
        assert!(Instant::now() < until, "{metrics}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_end_streams_and_unary_calls() {
    let server = TestServer::start(TestConfig::default()).await;
    let mut client = server.inference();
    let started = Instant::now();
    let stream = client
        .generate(with_timeout(long_generation(), Duration::from_millis(400)))
        .await
        .expect("stream starts")
        .into_inner();
    let (_, finals, status) = collect(stream).await;
    let status = status.expect("the stream ends with a status");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(finals.is_empty());
    assert!(started.elapsed() < Duration::from_secs(5));
    server.wait_engine_idle().await;

    let mut text2sql = server.text2sql();
    let e = text2sql
        .generate(with_timeout(
            pb::Text2SqlRequest {
                question: "How many singers are there?".into(),
                db_id: "concert_singer".into(),
                evidence: None,
                options: None,
            },
            Duration::from_millis(300),
        ))
        .await
        .expect_err("the pipeline cannot finish in 300 ms");
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e:?}");
    server.wait_engine_idle().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_engine_answers_resource_exhausted() {
    let server = TestServer::start(TestConfig {
        max_running: 1,
        max_queue: 1,
        ..TestConfig::default()
    })
    .await;
    let mut client = server.inference();
    // Two long generations fill the engine: one running, one waiting.
    let mut streams = Vec::new();
    for _ in 0..2 {
        let s = client
            .generate(long_generation())
            .await
            .expect("admitted")
            .into_inner();
        streams.push(s);
    }
    let e = client
        .generate(long_generation())
        .await
        .expect_err("no room left");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    let pushback = e.metadata().get("grpc-retry-pushback-ms");
    assert_eq!(
        pushback.and_then(|v| v.to_str().ok()),
        Some("1000"),
        "{e:?}"
    );
    // The first is generating: the engine has taken both requests.
    streams[0].message().await.expect("message").expect("token");
    drop(streams);
    server.wait_engine_idle().await;
    // Room again once the others are gone (the engine frees them at its next step).
    let until = Instant::now() + Duration::from_secs(10);
    let stream = loop {
        let small = with_timeout(prompt_request(PROMPT, 4), Duration::from_secs(20));
        match client.generate(small).await {
            Ok(s) => break s.into_inner(),
            Err(e) if e.code() == Code::ResourceExhausted && Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("not admitted again: {e:?}"),
        }
    };
    let (_, finals, status) = collect(stream).await;
    let load = server.load().await;
    assert!(status.is_none(), "{status:?}; engine load {load:?}");
    assert_eq!(finals.len(), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_in_flight_requests() {
    // A long grace period: other tests share the CPU, and this request must finish in it.
    let server = TestServer::start(TestConfig {
        grace_secs: 120.0,
        ..TestConfig::default()
    })
    .await;
    let mut client = server.inference();
    let stream = client
        .generate(prompt_request(PROMPT, 16))
        .await
        .expect("generate")
        .into_inner();
    let reader = tokio::spawn(collect(stream));
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.server.shutdown();
    // Readiness drops at once, new work is refused, liveness stays.
    let until = Instant::now() + Duration::from_secs(5);
    while server.health("").await != ServingStatus::NotServing {
        assert!(Instant::now() < until, "readiness did not drop");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.health("liveness").await, ServingStatus::Serving);
    let e = client
        .generate(prompt_request(PROMPT, 4))
        .await
        .expect_err("draining");
    assert_eq!(e.code(), Code::Unavailable);
    let models = client
        .list_models(pb::ListModelsRequest {})
        .await
        .expect("list models while draining")
        .into_inner();
    assert_eq!(models.models[0].state, pb::ModelState::Draining as i32);
    // The in-flight request completes normally.
    let (text, finals, status) = reader.await.expect("reader");
    assert!(status.is_none(), "{status:?}");
    assert_eq!(finals.len(), 1);
    assert!(!text.is_empty());
    server.server.wait().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_what_outlives_the_grace_period() {
    let server = TestServer::start(TestConfig {
        grace_secs: 0.3,
        ..TestConfig::default()
    })
    .await;
    let mut client = server.inference();
    let stream = client
        .generate(long_generation())
        .await
        .expect("generate")
        .into_inner();
    let reader = tokio::spawn(collect(stream));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    server.server.shutdown();
    let (_, finals, status) = reader.await.expect("reader");
    let status = status.expect("cancelled by the shutdown");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(finals.is_empty());
    server.server.wait().await.expect("clean shutdown");
    assert!(started.elapsed() < Duration::from_secs(5));
}
