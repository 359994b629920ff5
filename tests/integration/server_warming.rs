//! Databases' schema prompts warmed before their first question, over real sockets: a server
//! computes the round-1 and revision prompts of the databases it is configured with once its
//! model is loaded, and of each database a client registers, and keeps them resident; the
//! first question over each then reads its schema from the cache. With warming off the same
//! first question computes it.

use std::time::{Duration, Instant};

use quorum_proto::v1 as pb;

use crate::server_support::{TestConfig, TestServer};

/// `quorum_engine_kv_blocks_pinned` summed over models.
async fn pinned_blocks(server: &TestServer) -> f64 {
    server
        .metrics()
        .await
        .lines()
        .filter(|l| l.starts_with("quorum_engine_kv_blocks_pinned"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until the pinned blocks exceed `above`; their count.
async fn pinned_beyond(server: &TestServer, above: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let pinned = pinned_blocks(server).await;
        if pinned > above {
            return pinned;
        }
        assert!(
            Instant::now() < deadline,
            "nothing pinned beyond {above} blocks"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The PreSQL candidate of one question: (prompt tokens, of them cached).
async fn presql_tokens(server: &TestServer, db_id: &str) -> (u32, u32) {
    let answer = server
        .text2sql()
        .generate(pb::Text2SqlRequest {
            db_id: db_id.into(),
            question: "How many singers are there?".into(),
            ..Default::default()
        })
        .await
        .expect("answered")
        .into_inner();
    let presql = answer
        .candidates
        .iter()
        .find(|c| c.round == pb::CandidateRound::PreSql as i32)
        .expect("a PreSQL");
    (presql.prompt_tokens, presql.cached_tokens)
}

fn config(allowed: &std::path::Path, pinned_prefix_share: f64) -> TestConfig {
    TestConfig {
        allowed_dir: Some(allowed.to_path_buf()),
        pinned_prefix_share,
        // Room for both configured databases' prompts within the pinned quarter.
        kv_cache_mib: 256,
        ..TestConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_and_registered_databases_answer_their_first_question_from_the_cache() {
    let allowed = tempfile::tempdir().expect("tempdir");
    let source = quorum_tests::spider_dir().join("database/concert_singer/concert_singer.sqlite");
    std::fs::copy(&source, allowed.path().join("concerts.sqlite")).expect("copy database");

    // Warming off: the first question computes its whole prompt.
    let cold = TestServer::start(config(allowed.path(), 0.0)).await;
    let (prompt, cached) = presql_tokens(&cold, "concert_singer").await;
    assert_eq!(
        cached, 0,
        "nothing cached before the first question ({prompt} tokens)"
    );
    assert_eq!(pinned_blocks(&cold).await, 0.0);
    cold.stop().await;

    // Warming on: the two configured databases are warmed once the model is loaded...
    let warm = TestServer::start(config(allowed.path(), 0.25)).await;
    let configured = pinned_beyond(&warm, 0.0).await;
    let (prompt, cached) = presql_tokens(&warm, "concert_singer").await;
    // ...so the first question's prompt comes from the cache up to its question: all of it
    // but the last block or two (16 tokens each).
    assert!(
        cached > 0 && prompt - cached <= 48,
        "{cached} of {prompt} prompt tokens cached"
    );

    // A registered database is warmed too, under a tag of its own.
    warm.databases()
        .register(pb::RegisterDatabaseRequest {
            db_id: "concerts".into(),
            path: "concerts.sqlite".into(),
            ..Default::default()
        })
        .await
        .expect("registered");
    pinned_beyond(&warm, configured).await;
    let (prompt, cached) = presql_tokens(&warm, "concerts").await;
    assert!(
        cached > 0 && prompt - cached <= 48,
        "{cached} of {prompt} prompt tokens cached"
    );
    warm.stop().await;
}
