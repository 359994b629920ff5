//! The sub-task RPCs of Text2Sql (LinkSchema, Debug, Optimize, Explain and the two streams)
//! over a real socket with SmolLM2 as the generator and the consistency judge: each answers
//! with its evidence in the shape it promises, and bad requests get the right status.

use quorum_proto::v1 as pb;
use tonic::Code;

use super::server_support::{TestConfig, TestServer};

const SINGER_COLUMNS_TABLES: [&str; 4] = ["stadium", "singer", "concert", "singer_in_concert"];

const DIAGNOSES: [&str; 13] = [
    "correct",
    "runs",
    "system_error",
    "table_excessive",
    "table_missing",
    "table_incorrect",
    "column_excessive",
    "column_missing",
    "column_incorrect",
    "join_columns",
    "condition_filter",
    "data_processing",
    "unclassified",
];

const VERDICTS: [&str; 5] = [
    "kept",
    "not_faster",
    "unchanged",
    "different_result",
    "failed",
];

fn link(method: pb::LinkMethod, foreign_keys: bool) -> pb::LinkSchemaRequest {
    pb::LinkSchemaRequest {
        question: "What are the names of the singers who sang in a concert in 2014?".into(),
        db_id: "concert_singer".into(),
        evidence: None,
        method: method as i32,
        foreign_keys: Some(foreign_keys),
        generator: None,
    }
}

fn debug(sql: &str, reference: Option<&str>) -> pb::DebugRequest {
    pb::DebugRequest {
        question: "What are the names of all singers?".into(),
        db_id: "concert_singer".into(),
        evidence: None,
        sql: sql.into(),
        reference_sql: reference.map(Into::into),
        error: None,
        strategy: pb::DebugStrategy::WithComments as i32,
        rounds: Some(2),
        generator: None,
    }
}

fn optimize(method: pb::OptimizeMethod) -> pb::OptimizeRequest {
    pb::OptimizeRequest {
        sql: "SELECT count(*) FROM (SELECT DISTINCT country FROM singer)".into(),
        db_id: "concert_singer".into(),
        question: Some("How many different countries are singers from?".into()),
        method: method as i32,
        rewrites: Some(2),
        timing_pairs: Some(5),
        min_speedup: None,
        generator: None,
    }
}

fn check_rounds(answer: &pb::DebugResponse) {
    assert_eq!(answer.initial.as_ref().unwrap().kind, "system_error");
    assert!(
        answer
            .initial
            .as_ref()
            .unwrap()
            .message
            .contains("no such column")
    );
    assert!((1..=2).contains(&answer.rounds.len()), "{answer:?}");
    for (i, round) in answer.rounds.iter().enumerate() {
        assert_eq!(round.round as usize, i + 1);
        let kind = &round.diagnosis.as_ref().unwrap().kind;
        assert!(DIAGNOSES.contains(&kind.as_str()), "{kind}");
        // Only the last round may be correct: debugging stops there.
        if i + 1 < answer.rounds.len() {
            assert_ne!(kind, "correct");
        }
    }
    let last = answer.rounds.last().unwrap();
    assert_eq!(answer.sql, last.sql);
    assert_eq!(
        answer.fixed,
        last.diagnosis.as_ref().unwrap().kind == "correct"
    );
    assert_eq!(answer.generator, "smol");
}

fn check_rewrites(answer: &pb::OptimizeResponse, original: &str) {
    assert_eq!(answer.rewrites.len(), 2);
    for r in &answer.rewrites {
        assert!(VERDICTS.contains(&r.verdict.as_str()), "{r:?}");
        if r.verdict == "kept" {
            assert!(r.speedup.unwrap() >= 1.1, "{r:?}");
        }
        if matches!(r.verdict.as_str(), "kept" | "not_faster") {
            assert_eq!(r.timing_pairs, 5);
            assert!(r.original_ms.is_some() && r.rewrite_ms.is_some());
        }
    }
    match answer.chosen {
        Some(i) => {
            assert_eq!(answer.rewrites[i as usize].verdict, "kept");
            assert_eq!(answer.sql, answer.rewrites[i as usize].sql);
        }
        None => assert_eq!(answer.sql, original),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subtasks_answer_with_evidence_over_grpc() {
    let server = TestServer::start(TestConfig::default()).await;
    let mut client = server.text2sql();

    for method in [
        pb::LinkMethod::ZeroShot,
        pb::LinkMethod::FewShot,
        pb::LinkMethod::PreSql,
        pb::LinkMethod::FewShotPreSql,
    ] {
        let answer = client
            .link_schema(link(method, true))
            .await
            .expect("link")
            .into_inner();
        assert_eq!(answer.method, method as i32);
        assert!(answer.foreign_keys);
        assert_eq!(answer.generator, "smol");
        assert!(answer.tokens_generated > 0);
        for table in &answer.tables {
            assert!(
                SINGER_COLUMNS_TABLES.contains(&table.name.as_str()),
                "{table:?}"
            );
        }
        let lists = method != pb::LinkMethod::PreSql;
        assert_eq!(answer.listed.is_some(), lists, "{answer:?}");
        assert!(answer.listed.iter().all(|l| l.starts_with('[')));
        let writes_sql = matches!(
            method,
            pb::LinkMethod::PreSql | pb::LinkMethod::FewShotPreSql
        );
        assert_eq!(answer.pre_sql.is_some(), writes_sql, "{answer:?}");
    }

    let answer = client
        .debug(debug(
            "SELECT nme FROM singer",
            Some("SELECT name FROM singer"),
        ))
        .await
        .expect("debug")
        .into_inner();
    check_rounds(&answer);
    assert_eq!(answer.strategy, pb::DebugStrategy::WithComments as i32);

    let mut stream = client
        .debug_stream(debug(
            "SELECT nme FROM singer",
            Some("SELECT name FROM singer"),
        ))
        .await
        .expect("debug stream")
        .into_inner();
    let mut streamed = Vec::new();
    let final_answer = loop {
        let event = stream
            .message()
            .await
            .expect("event")
            .expect("ends with the answer");
        match event.event.expect("set") {
            pb::debug_event::Event::Round(r) => streamed.push(r),
            pb::debug_event::Event::Answer(a) => break a,
        }
    };
    assert!(stream.message().await.expect("end").is_none());
    check_rounds(&final_answer);
    assert_eq!(
        streamed, final_answer.rounds,
        "every round was streamed first"
    );

    // Without a reference a SQL that runs is left alone, with no model call.
    let answer = client
        .debug(debug("SELECT name FROM singer", None))
        .await
        .expect("debug without reference")
        .into_inner();
    assert_eq!(answer.initial.unwrap().kind, "runs");
    assert!(answer.rounds.is_empty() && answer.fixed);

    let original = optimize(pb::OptimizeMethod::WithSql).sql;
    let answer = client
        .optimize(optimize(pb::OptimizeMethod::WithSql))
        .await
        .expect("optimize")
        .into_inner();
    check_rewrites(&answer, &original);
    let mut stream = client
        .optimize_stream(optimize(pb::OptimizeMethod::Direct))
        .await
        .expect("optimize stream")
        .into_inner();
    let mut rewrites = Vec::new();
    let final_answer = loop {
        let event = stream
            .message()
            .await
            .expect("event")
            .expect("ends with the answer");
        match event.event.expect("set") {
            pb::optimize_event::Event::Rewrite(r) => rewrites.push(r),
            pb::optimize_event::Event::Answer(a) => break a,
        }
    };
    check_rewrites(&final_answer, &original);
    assert_eq!(rewrites, final_answer.rewrites);
    assert_eq!(final_answer.method, pb::OptimizeMethod::Direct as i32);

    let answer = client
        .explain(pb::ExplainRequest {
            sql: "SELECT count(*) FROM singer".into(),
            db_id: "concert_singer".into(),
            question: Some("How many singers do we have?".into()),
            generator: None,
            threshold: None,
        })
        .await
        .expect("explain")
        .into_inner();
    assert!(!answer.explanation.is_empty());
    assert!(!answer.explanation.contains('\n'));
    let c = answer.consistency.expect("checked against the question");
    assert!((0.0..=1.0).contains(&c.p_same), "{c:?}");
    assert_eq!(c.p_same_by_order.len(), 2);
    assert_eq!(
        c.threshold,
        f64::from(quorum_sql::subtask::explain::DEFAULT_THRESHOLD)
    );
    assert_eq!(c.consistent, c.p_same >= c.threshold);
    let answer = client
        .explain(pb::ExplainRequest {
            sql: "SELECT count(*) FROM singer".into(),
            db_id: "concert_singer".into(),
            question: None,
            generator: Some("smol".into()),
            threshold: None,
        })
        .await
        .expect("explain alone")
        .into_inner();
    assert!(answer.consistency.is_none());

    // The same check as the pipeline's last stage: the answer is flagged, with the evidence.
    let checked = client
        .generate(pb::Text2SqlRequest {
            question: "How many singers do we have?".into(),
            db_id: "concert_singer".into(),
            evidence: None,
            options: Some(pb::PipelineOptions {
                consistency_check: Some(true),
                ..Default::default()
            }),
        })
        .await
        .expect("generate with the check")
        .into_inner();
    let check = checked.consistency.expect("checked");
    match &check.verdict {
        Some(v) => {
            assert!(!check.explanation.is_empty() && (0.0..=1.0).contains(&v.p_same));
            assert!(check.error.is_empty());
        }
        None => assert!(!check.error.is_empty(), "{check:?}"),
    }
    let setting = checked
        .settings
        .iter()
        .find(|s| s.name == "consistency_check");
    assert_eq!(setting.map(|s| s.value.as_str()), Some("true"));

    let metrics = server.metrics().await;
    for method in [
        "LinkSchema",
        "Debug",
        "DebugStream",
        "Optimize",
        "OptimizeStream",
        "Explain",
    ] {
        assert!(
            metrics.contains(&format!("method=\"Text2Sql/{method}\",code=\"OK\"")),
            "{method} recorded: {metrics}"
        );
    }
    server.wait_engine_idle().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subtasks_reject_bad_requests() {
    let server = TestServer::start(TestConfig::default()).await;
    let mut client = server.text2sql();
    let expect = |result: Result<tonic::Response<_>, tonic::Status>, code: Code, words: &str| {
        let e = result.map(|_: tonic::Response<()>| ()).expect_err(words);
        assert_eq!(e.code(), code, "{e:?}");
        assert!(e.message().contains(words), "{words}: {}", e.message());
    };
    let unit = |r: Result<tonic::Response<pb::LinkSchemaResponse>, tonic::Status>| {
        r.map(|_| tonic::Response::new(()))
    };

    let mut unknown_db = link(pb::LinkMethod::PreSql, true);
    unknown_db.db_id = "atlantis".into();
    expect(
        unit(client.link_schema(unknown_db).await),
        Code::NotFound,
        "atlantis",
    );
    let mut empty = link(pb::LinkMethod::PreSql, true);
    empty.question = "  ".into();
    expect(
        unit(client.link_schema(empty).await),
        Code::InvalidArgument,
        "`question`",
    );
    let mut bad_method = link(pb::LinkMethod::PreSql, true);
    bad_method.method = 99;
    expect(
        unit(client.link_schema(bad_method).await),
        Code::InvalidArgument,
        "`method`",
    );
    let mut bad_generator = link(pb::LinkMethod::PreSql, true);
    bad_generator.generator = Some("gpt-9".into());
    expect(
        unit(client.link_schema(bad_generator).await),
        Code::InvalidArgument,
        "gpt-9",
    );

    let unit = |r: Result<tonic::Response<pb::DebugResponse>, tonic::Status>| {
        r.map(|_| tonic::Response::new(()))
    };
    let mut rounds = debug("SELECT nme FROM singer", None);
    rounds.rounds = Some(4);
    expect(
        unit(client.debug(rounds).await),
        Code::InvalidArgument,
        "`rounds`",
    );
    let broken_reference = debug("SELECT nme FROM singer", Some("SELECT nope FROM singer"));
    expect(
        unit(client.debug(broken_reference).await),
        Code::InvalidArgument,
        "`reference_sql`",
    );
    expect(
        unit(client.debug(debug(" ", None)).await),
        Code::InvalidArgument,
        "`sql`",
    );
    let writes = debug("DELETE FROM singer", Some("SELECT name FROM singer"));
    // A write is never run: it is diagnosed as refused, and the fix is asked for.
    let answer = client
        .debug(writes)
        .await
        .expect("a write is a system error")
        .into_inner();
    assert_eq!(answer.initial.unwrap().kind, "system_error");

    let unit = |r: Result<tonic::Response<pb::OptimizeResponse>, tonic::Status>| {
        r.map(|_| tonic::Response::new(()))
    };
    let mut failing = optimize(pb::OptimizeMethod::WithSql);
    failing.sql = "SELECT nope FROM singer".into();
    expect(
        unit(client.optimize(failing).await),
        Code::InvalidArgument,
        "`sql`",
    );
    let mut no_question = optimize(pb::OptimizeMethod::Direct);
    no_question.question = None;
    expect(
        unit(client.optimize(no_question).await),
        Code::InvalidArgument,
        "`question`",
    );
    let mut pairs = optimize(pb::OptimizeMethod::WithSql);
    pairs.timing_pairs = Some(0);
    expect(
        unit(client.optimize(pairs).await),
        Code::InvalidArgument,
        "`timing_pairs`",
    );
    let mut slow = optimize(pb::OptimizeMethod::WithSql);
    slow.min_speedup = Some(0.5);
    expect(
        unit(client.optimize(slow).await),
        Code::InvalidArgument,
        "`min_speedup`",
    );
    let mut many = optimize(pb::OptimizeMethod::WithSql);
    many.rewrites = Some(9);
    expect(
        unit(client.optimize(many.clone()).await),
        Code::InvalidArgument,
        "`rewrites`",
    );
    let e = client
        .optimize_stream(many)
        .await
        .expect_err("streams validate first");
    assert_eq!(e.code(), Code::InvalidArgument);

    let e = client
        .explain(pb::ExplainRequest {
            sql: String::new(),
            db_id: "concert_singer".into(),
            question: None,
            generator: None,
            threshold: None,
        })
        .await
        .expect_err("empty sql");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("`sql`"));
    let e = client
        .explain(pb::ExplainRequest {
            sql: "SELECT 1".into(),
            db_id: "concert_singer".into(),
            question: Some("One?".into()),
            generator: None,
            threshold: Some(1.5),
        })
        .await
        .expect_err("not a probability");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("`threshold`"));
    server.wait_engine_idle().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consistency_check_needs_a_judge() {
    let toml = TestConfig::default().toml().replace(
        r#"roles = ["generator", "selector"]"#,
        r#"roles = ["generator"]"#,
    );
    let raw = quorum_server::config::file::RawConfig::from_toml_str(&toml).expect("parses");
    let no_scan = std::path::Path::new("/nonexistent-quorum-test-dir");
    let server = TestServer::start_raw(raw, no_scan, std::time::Duration::from_secs(120)).await;
    let mut client = server.text2sql();
    let request = |question: Option<&str>| pb::ExplainRequest {
        sql: "SELECT count(*) FROM singer".into(),
        db_id: "concert_singer".into(),
        question: question.map(Into::into),
        generator: None,
        threshold: None,
    };
    let e = client
        .explain(request(Some("How many singers?")))
        .await
        .expect_err("no selector model");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("selector"), "{}", e.message());
    // Explaining alone needs no judge.
    let answer = client
        .explain(request(None))
        .await
        .expect("explains")
        .into_inner();
    assert!(answer.consistency.is_none());
    let e = client
        .generate(pb::Text2SqlRequest {
            question: "How many singers?".into(),
            db_id: "concert_singer".into(),
            evidence: None,
            options: Some(pb::PipelineOptions {
                consistency_check: Some(true),
                ..Default::default()
            }),
        })
        .await
        .expect_err("the stage has no judge");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    server.wait_engine_idle().await;
    server.stop().await;
}
