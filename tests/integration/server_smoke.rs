//! The quick start's setup end to end: the default models (Qwen2.5-Coder-0.5B writing SQL with
//! three prompt formats, the RE_p one through the shipped LoRA adapter, MiniLM retrieving demonstrations from Spider train) served over a
//! loopback socket, answering the `smoke10` questions through `Text2Sql.Generate`.

use quorum_eval::{ScoreOptions, score_execution};
use quorum_proto::v1 as pb;
use quorum_server::config::profile::Profile;
use quorum_sql::dataset::{load_examples, load_slices};
use quorum_tests::spider_dir;

use crate::server_support::TestServer;

/// Answers that execute, of 10: all of them, as the issue asks. Measured with the default
/// configuration by this test (docs/history/2026-11-25.md): 10 of 10 on the AVX-512 VNNI path
/// and on the AVX2 path forced on the same host. Greedy decoding is batch-invariant and the
/// sampled revisions are seeded, so the answers are reproducible on a CPU path.
const MIN_EXECUTING: usize = 10;
/// Correct answers (Spider EX), of 10; measured 8 (VNNI) and 7 (AVX2), one question of slack.
const MIN_CORRECT: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn smoke10_answers_over_grpc_with_the_default_models() {
    let spider = spider_dir();
    let db_dir = spider.join("database");
    // Ten questions at once, as concurrent callers would ask them.
    let server = TestServer::start_shipped(Profile::Default, 10).await;
    // The default RE_p and M-Schema voters run the shipped fine-tuned adapters, and split
    // votes go to the shipped selector adapter.
    let models = server.models().await;
    let coder = models
        .iter()
        .find(|m| m.name == "qwen2.5-coder-0.5b")
        .expect("the default generator");
    let mut adapters = coder.adapters.clone();
    adapters.sort();
    assert_eq!(adapters, ["mschema-s1", "rep-s0", "select-s1"]);
    let dev = load_examples(&spider.join("dev.json")).expect("dev.json");
    let slices = load_slices(&spider.join("slices.json")).expect("slices.json");
    let smoke: Vec<_> = slices
        .get("smoke10")
        .expect("smoke10 slice")
        .iter()
        .map(|&i| dev[i].clone())
        .collect();
    assert_eq!(smoke.len(), 10);

    // All at once, as concurrent callers would: the engine batches them.
    let calls = smoke.iter().map(|example| {
        let mut client = server.text2sql();
        let request = pb::Text2SqlRequest {
            question: example.question.clone(),
            db_id: example.db_id.clone(),
            evidence: None,
            options: None,
        };
        async move { client.generate(request).await }
    });
    let answers = futures_join_all(calls).await;

    let (mut executing, mut correct) = (0, 0);
    for (example, answer) in smoke.iter().zip(answers) {
        let answer = answer.expect("every question gets an answer").into_inner();
        let sql = answer.sql.trim();
        assert!(
            sql.to_ascii_uppercase().starts_with("SELECT")
                || sql.to_ascii_uppercase().starts_with("WITH"),
            "{}: not a query: {sql:?}",
            example.question
        );
        // The evidence: every candidate, the vote over them, the linked tables, timings.
        assert!(answer.candidates.len() >= 2, "PreSQL and FinSQLs");
        let vote = answer.vote.as_ref().expect("a vote");
        assert!(!vote.voters.is_empty());
        let chosen = &answer.candidates[answer.chosen_candidate as usize];
        assert_eq!(chosen.sql, answer.sql);
        assert!(answer.linked_tables.is_some(), "round 2 ran");
        assert!(answer.demos.is_empty(), "no demonstrations by default");
        assert!(answer.timings.as_ref().is_some_and(|t| t.total_ms > 0.0));
        let runs = matches!(chosen.outcome, Some(pb::candidate::Outcome::Ok(_)));
        assert_eq!(runs, answer.preview.is_some());
        let db = db_dir
            .join(&example.db_id)
            .join(format!("{}.sqlite", example.db_id));
        let score = score_execution(&example.query, sql, &db, &ScoreOptions::default())
            .expect("database opens");
        executing += usize::from(score.valid);
        correct += usize::from(score.ex);
        println!(
            "{} {} | {} | {sql}",
            if score.ex { "OK " } else { "BAD" },
            if score.valid { "runs" } else { "fails" },
            example.question
        );
    }
    println!("smoke10: {executing}/10 execute, {correct}/10 correct");

    // Retrieval is one option away: three demos from Spider train for the PreSQL.
    let with_demos = server
        .text2sql()
        .generate(pb::Text2SqlRequest {
            question: smoke[0].question.clone(),
            db_id: smoke[0].db_id.clone(),
            evidence: None,
            options: Some(pb::PipelineOptions {
                round1_shots: Some(3),
                round2: Some(false),
                ..Default::default()
            }),
        })
        .await
        .expect("an answer with demonstrations")
        .into_inner();
    assert_eq!(with_demos.demos.len(), 3, "three demonstrations retrieved");
    assert!(executing >= MIN_EXECUTING, "{executing}/10 execute");
    assert!(correct >= MIN_CORRECT, "{correct}/10 correct");
    server.stop().await;
}

/// Awaits every future, keeping order (no extra dependency for one join).
async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}
