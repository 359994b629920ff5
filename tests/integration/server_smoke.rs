//! The quick start's setup end to end: the default profile (Qwen2.5-Coder-1.5B writing the
//! PreSQL in RE_p and a FinSQL in SimpleDDL, the shipped selector adapter on Qwen2.5-Coder-0.5B,
//! MiniLM retrieving demonstrations from Spider train) served over a loopback socket, answering
//! the `smoke10` questions through `Text2Sql.Generate`.

use quorum_eval::{ScoreOptions, score_execution};
use quorum_proto::v1 as pb;
use quorum_server::config::profile::Profile;
use quorum_sql::dataset::{load_examples, load_slices};
use quorum_tests::spider_dir;

use crate::server_support::TestServer;

/// Answers that execute, of 10: all of them. Greedy decoding is batch-invariant and the sampled
/// revisions are seeded, so the answers are reproducible on a CPU path.
const MIN_EXECUTING: usize = 10;
/// Correct answers (Spider EX), of 10: measured 10 on the AVX-512 VNNI path by `quorum eval
/// --slice smoke10` with this profile (docs/RESULTS.md); two questions of slack for the other
/// CPU paths, whose rounding differs.
const MIN_CORRECT: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn smoke10_answers_over_grpc_with_the_default_models() {
    let spider = spider_dir();
    let db_dir = spider.join("database");
    // Ten questions at once, as concurrent callers would ask them.
    let server = TestServer::start_shipped(Profile::Default, 10).await;
    // The 1.5B model writes the SQL; split votes go to the shipped selector adapter on the
    // 0.5B model.
    server
        .assert_serves_the_bigger_model_and_the_shipped_selector("select-s2")
        .await;
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
        assert!(answer.candidates.len() >= 2, "PreSQL and FinSQL");
        assert!(
            answer.candidates.iter().all(|c| c.model == "qwen15-ddl"),
            "every candidate is the 1.5B voter's"
        );
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
