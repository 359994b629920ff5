//! The Text2Sql service over a real socket, with SmolLM2 as generator and selector: the unary
//! answer with its evidence, the stage-event stream, and request validation.

use quorum_proto::v1 as pb;
use tonic::Code;

use super::server_support::{TestConfig, TestServer};

fn question(db_id: &str, text: &str) -> pb::Text2SqlRequest {
    pb::Text2SqlRequest {
        question: text.into(),
        db_id: db_id.into(),
        evidence: None,
        options: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text2sql_answers_with_evidence_and_streams_stages() {
    let server = TestServer::start(TestConfig::default()).await;
    let mut client = server.text2sql();

    let answer = client
        .generate(question("concert_singer", "How many singers do we have?"))
        .await
        .expect("generate")
        .into_inner();
    assert!(!answer.sql.is_empty());
    assert!(!answer.candidates.is_empty());
    let first = &answer.candidates[0];
    assert_eq!(first.round, pb::CandidateRound::PreSql as i32);
    assert_eq!(first.model, "smol");
    assert!(first.outcome.is_some());
    assert!((answer.chosen_candidate as usize) < answer.candidates.len());
    let timings = answer.timings.expect("timings");
    assert!(timings.total_ms > 0.0 && timings.round1_ms > 0.0);
    assert!(answer.vote.is_some());
    assert!(answer.tokens_generated > 0);
    // The settings come back by knob name: the test config's `[pipeline]` values and the
    // defaults of the rest.
    let setting = |name: &str| {
        answer
            .settings
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.value.as_str())
    };
    assert_eq!(setting("round1_shots"), Some("0"));
    assert_eq!(setting("voting"), Some("majority"));
    assert_eq!(setting("revision_rounds"), Some("1"));
    // Every knob, then the model and adapter behind each generator and the selector.
    let knobs = quorum_sql::pipeline::PipelineKnobs::NAMES.len();
    assert_eq!(answer.settings.len(), knobs + 2);
    assert_eq!(
        setting("generator.smol"),
        Some("model=smol format=simple_ddl adapter=none")
    );
    assert_eq!(setting("selector_model"), Some("model=smol adapter=none"));

    let mut stream = client
        .generate_stream(question("pets_1", "How many pets are there?"))
        .await
        .expect("stream")
        .into_inner();
    let mut events = Vec::new();
    while let Some(event) = stream.message().await.expect("event") {
        events.push(event.event.expect("event set"));
    }
    use pb::text2_sql_event::Event;
    assert!(
        matches!(events.first(), Some(Event::PreSql(_))),
        "{events:?}"
    );
    assert!(events.iter().any(|e| matches!(e, Event::Vote(_))));
    let Some(Event::Answer(final_answer)) = events.last() else {
        panic!("the stream ends with the answer: {events:?}");
    };
    // Every candidate of the answer was streamed before it.
    let streamed = events
        .iter()
        .filter(|e| matches!(e, Event::PreSql(_) | Event::Candidate(_)))
        .count();
    assert_eq!(streamed, final_answer.candidates.len());
    server.wait_engine_idle().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text2sql_rejects_bad_requests() {
    let server = TestServer::start(TestConfig::default()).await;
    let mut client = server.text2sql();
    let e = client
        .generate(question("atlantis", "How many singers?"))
        .await
        .expect_err("unknown database");
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("atlantis"));

    let e = client
        .generate(question("concert_singer", "   "))
        .await
        .expect_err("empty question");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("`question`"));

    let mut bad_rounds = question("concert_singer", "How many singers?");
    bad_rounds.options = Some(pb::PipelineOptions {
        revision_rounds: Some(9),
        ..Default::default()
    });
    let e = client
        .generate(bad_rounds)
        .await
        .expect_err("too many rounds");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("options.revision_rounds"));

    let mut hot = question("concert_singer", "How many singers?");
    hot.options = Some(pb::PipelineOptions {
        revision_temperature: Some(f32::NAN),
        ..Default::default()
    });
    let e = client.generate(hot).await.expect_err("not a temperature");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("options.revision_temperature"));

    let mut unknown_generator = question("concert_singer", "How many singers?");
    unknown_generator.options = Some(pb::PipelineOptions {
        generators: vec!["gpt-17".into()],
        ..Default::default()
    });
    let e = client
        .generate(unknown_generator)
        .await
        .expect_err("unknown generator");
    assert_eq!(e.code(), Code::NotFound);

    let mut bad_voting = question("concert_singer", "How many singers?");
    bad_voting.options = Some(pb::PipelineOptions {
        voting: 42,
        ..Default::default()
    });
    let e = client.generate(bad_voting).await.expect_err("bad enum");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("options.voting"));

    let mut big_preview = question("concert_singer", "How many singers?");
    big_preview.options = Some(pb::PipelineOptions {
        preview_rows: Some(5000),
        ..Default::default()
    });
    let e = client
        .generate(big_preview)
        .await
        .expect_err("preview too large");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("options.preview_rows"));

    // Demonstrations: the server's format (SimpleDDL) cannot show them, and RE_p needs the
    // embedder this server does not load.
    let mut shots = question("concert_singer", "How many singers?");
    shots.options = Some(pb::PipelineOptions {
        round1_shots: Some(3),
        ..Default::default()
    });
    let e = client
        .generate(shots.clone())
        .await
        .expect_err("no demos in SimpleDDL");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("simple_ddl"), "{}", e.message());
    if let Some(o) = shots.options.as_mut() {
        o.round1_format = Some("rep".into());
    }
    let e = client.generate(shots).await.expect_err("no embedder");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("embedder"), "{}", e.message());

    // A question whose prompt cannot fit the model's context is the caller's to change: not
    // "busy, retry later".
    let long = "How many singers are there in the concerts of every stadium? ".repeat(400);
    let e = client
        .generate(question("concert_singer", &long))
        .await
        .expect_err("beyond the model's context");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("`question`"), "{}", e.message());
    assert!(e.message().contains("limit"), "{}", e.message());
    server.stop().await;
}

/// Options that make a run short: PreSQL only.
fn presql_only(db_id: &str, text: &str) -> pb::Text2SqlRequest {
    let mut request = question(db_id, text);
    request.options = Some(pb::PipelineOptions {
        round2: Some(false),
        revision: Some(false),
        ..Default::default()
    });
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text2sql_queues_a_burst_and_refuses_only_beyond_the_queue() {
    let server = TestServer::start(TestConfig {
        max_text2sql: 1,
        max_waiting_text2sql: 1,
        ..TestConfig::default()
    })
    .await;
    // The first runs (the whole pipeline: seconds, while the next two arrive within
    // milliseconds), the second waits for its slot.
    let mut first = server.text2sql();
    let running = tokio::spawn(async move {
        first
            .generate(question("concert_singer", "How many singers are there?"))
            .await
    });
    server.wait_text2sql(1, 0).await;
    let mut second = server.text2sql();
    let queued = tokio::spawn(async move {
        second
            .generate(presql_only("pets_1", "How many pets are there?"))
            .await
    });
    server.wait_text2sql(1, 1).await;
    // The third finds the queue full.
    let e = server
        .text2sql()
        .generate(presql_only("concert_singer", "Name every singer."))
        .await
        .expect_err("the queue is full");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert_eq!(
        e.metadata()
            .get("grpc-retry-pushback-ms")
            .and_then(|v| v.to_str().ok()),
        Some("1000"),
        "{e:?}"
    );
    let first = running
        .await
        .expect("task")
        .expect("the running request answers");
    let second = queued
        .await
        .expect("task")
        .expect("the queued request answers");
    assert!(!first.get_ref().sql.is_empty());
    assert!(!second.get_ref().sql.is_empty());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text2sql_constrained_answers_stay_in_the_schema_grammar_and_say_so() {
    let server = TestServer::start(TestConfig::default()).await;
    let mut client = server.text2sql();
    let checker = quorum_engine::GrammarCompiler::for_bytes().expect("checker");
    let path = quorum_sql::dataset::database_path(
        &quorum_tests::spider_dir().join("database"),
        "concert_singer",
    );
    let schema = quorum_sql::schema::Schema::from_sqlite(
        &path,
        "concert_singer",
        quorum_sql::schema::IntrospectOptions::default(),
    )
    .expect("schema");
    let grammar = quorum_engine::Grammar::new(quorum_engine::GrammarSpec::Lark(
        quorum_sql::grammar::schema_grammar(&schema, schema.dialect),
    ));
    for (text, constrained) in [
        ("What are the names of singers older than 40?", true),
        ("Which stadium has the largest capacity?", true),
        ("Which stadium has the largest capacity?", false),
    ] {
        let mut request = presql_only("concert_singer", text);
        if let Some(o) = request.options.as_mut() {
            o.constrained = Some(constrained);
        }
        let answer = client
            .generate(request)
            .await
            .expect("generate")
            .into_inner();
        let presql = &answer.candidates[0];
        assert_eq!(presql.constrained, constrained, "{text}");
        if constrained {
            // What the model wrote (before any repair) is a sentence of the schema grammar, or
            // the start of one when the 135M model ran out of tokens.
            let written = presql.repaired_from.as_deref().unwrap_or(&presql.sql);
            match checker.check(&grammar, written) {
                Ok(()) | Err(quorum_engine::GrammarRejection::Unfinished) => {}
                Err(e) => panic!("{written}: {e}"),
            }
        }
    }
    server.wait_engine_idle().await;
    server.stop().await;
}
