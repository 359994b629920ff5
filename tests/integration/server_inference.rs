//! The Inference and Databases services over a real socket with SmolLM2: every RPC, streaming,
//! errors mapped to their codes, bearer-token auth, health and metrics.

use quorum_proto::v1 as pb;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

use super::server_support::{TOKEN, TestConfig, TestServer, collect, prompt_request};

fn authed<T>(body: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(body);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {TOKEN}").parse().expect("ascii"),
    );
    r
}

fn chat(messages: &[(&str, &str)]) -> pb::ChatMessages {
    pb::ChatMessages {
        messages: messages
            .iter()
            .map(|(role, content)| pb::ChatMessage {
                role: (*role).into(),
                content: (*content).into(),
            })
            .collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inference_rpcs_stream_tokenize_and_list_models() {
    let server = TestServer::start(TestConfig {
        auth: true,
        ..TestConfig::default()
    })
    .await;
    assert_eq!(server.health("liveness").await, ServingStatus::Serving);
    assert_eq!(
        server.health("quorum.v1.Inference").await,
        ServingStatus::Serving
    );
    let mut client = server.inference();

    let denied = client
        .list_models(pb::ListModelsRequest {})
        .await
        .expect_err("no token");
    assert_eq!(denied.code(), Code::Unauthenticated);

    let models = client
        .list_models(authed(pb::ListModelsRequest {}))
        .await
        .expect("list models")
        .into_inner()
        .models;
    assert_eq!(models.len(), 1);
    assert_eq!(models[0].name, "smol");
    assert_eq!(models[0].state, pb::ModelState::Ready as i32);
    assert_eq!(
        models[0].roles,
        vec![
            pb::ModelRole::Generator as i32,
            pb::ModelRole::Selector as i32
        ]
    );
    assert_eq!(models[0].device, "cpu");
    assert_eq!(models[0].cpu_path, quorum_tests::cpu_path().name());
    let blocks = models[0].load.expect("load").kv_blocks_total;
    assert!(blocks > 0);
    // SmolLM2-135M: 30 layers, 3 KV heads of 64; keys and values, f32 on the CPU, 16-token blocks.
    let kv_bytes = blocks * 16 * 2 * 30 * 3 * 64 * 4;
    assert_eq!(
        (models[0].kv_cache_bytes, models[0].kv_dtype.as_str()),
        (kv_bytes, "f32")
    );

    let tokens = client
        .tokenize(authed(pb::TokenizeRequest {
            model: "smol".into(),
            input: Some(pb::tokenize_request::Input::Text(
                "SELECT name FROM singer".into(),
            )),
            add_special_tokens: false,
        }))
        .await
        .expect("tokenize")
        .into_inner();
    assert!(tokens.token_ids.len() >= 4, "{tokens:?}");
    assert_eq!(tokens.tokens.len(), tokens.token_ids.len());
    assert!(tokens.max_model_len > 0);

    // Chat input, two choices, streamed: every choice ends with exactly one final message.
    let request = pb::InferenceRequest {
        model: "smol".into(),
        input: Some(pb::inference_request::Input::Chat(chat(&[(
            "user",
            "Write a SQL query that counts the rows of table singer.",
        )]))),
        sampling: Some(pb::SamplingOptions {
            max_tokens: Some(12),
            n: Some(2),
            logprobs: true,
            ..Default::default()
        }),
        adapter: None,
    };
    let stream = client
        .generate(authed(request))
        .await
        .expect("generate")
        .into_inner();
    let (text, finals, status) = collect(stream).await;
    assert!(status.is_none(), "{status:?}");
    assert!(!text.is_empty());
    let mut indices: Vec<u32> = finals.iter().map(|f| f.index).collect();
    indices.sort_unstable();
    assert_eq!(indices, vec![0, 1]);
    for f in &finals {
        let usage = f.usage.expect("usage on the final message");
        assert!(usage.prompt_tokens > 10);
        assert!(usage.completion_tokens >= 1 && usage.completion_tokens <= 12);
    }
    server.wait_engine_idle().await;

    let metrics = server.metrics().await;
    assert!(
        metrics.contains("quorum_rpc_requests_total{method=\"Inference/Generate\",code=\"OK\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("quorum_engine_kv_blocks_used{model=\"smol\"}"));
    assert!(
        metrics.contains(&format!(
            "quorum_engine_kv_cache_bytes{{model=\"smol\",dtype=\"f32\"}} {kv_bytes}"
        )),
        "{metrics}"
    );
    assert!(metrics.contains(&format!(
        "quorum_engine_cpu_path_info{{model=\"smol\",path=\"{}\"}} 1",
        quorum_tests::cpu_path()
    )));
    assert!(metrics.contains("quorum_engine_time_to_first_token_seconds_count{model=\"smol\"}"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inference_errors_name_the_field_and_code() {
    let server = TestServer::start(TestConfig {
        max_prompt_tokens: 64,
        ..TestConfig::default()
    })
    .await;
    let mut client = server.inference();
    let code_of = |r: Result<
        tonic::Response<tonic::Streaming<pb::InferenceResponse>>,
        tonic::Status,
    >| { r.expect_err("must fail") };

    let mut unknown_model = prompt_request("hi", 4);
    unknown_model.model = "gpt-17".into();
    let e = code_of(client.generate(unknown_model).await);
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("gpt-17"), "{}", e.message());

    let mut unknown_adapter = prompt_request("hi", 4);
    unknown_adapter.adapter = Some("spider-lora".into());
    let e = code_of(client.generate(unknown_adapter).await);
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("spider-lora"));

    let long = "SELECT name FROM singer WHERE age > 30; ".repeat(40);
    let e = code_of(client.generate(prompt_request(&long, 4)).await);
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("`prompt`"), "{}", e.message());

    let mut no_input = prompt_request("x", 4);
    no_input.input = None;
    let e = code_of(client.generate(no_input).await);
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("`input`"));

    let mut bad_temperature = prompt_request("hi", 4);
    bad_temperature.sampling = Some(pb::SamplingOptions {
        temperature: Some(-1.0),
        ..Default::default()
    });
    let e = code_of(client.generate(bad_temperature).await);
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("sampling.temperature"),
        "{}",
        e.message()
    );

    let e = code_of(client.generate(prompt_request("hi", 0)).await);
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("sampling.max_tokens"));

    let mut bad_role = prompt_request("hi", 4);
    bad_role.input = Some(pb::inference_request::Input::Chat(chat(&[("robot", "hi")])));
    let e = code_of(client.generate(bad_role).await);
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("chat.messages[0].role"));

    // No auth token on this server: adapter administration is off.
    let e = client
        .load_adapter(pb::LoadAdapterRequest {
            model: "smol".into(),
            name: "x".into(),
            path: "x".into(),
        })
        .await
        .expect_err("no token, no administration");
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(e.message().contains("auth_token"), "{}", e.message());

    let e = client
        .tokenize(pb::TokenizeRequest {
            model: "nope".into(),
            input: Some(pb::tokenize_request::Input::Text("x".into())),
            add_special_tokens: false,
        })
        .await
        .expect_err("unknown model");
    assert_eq!(e.code(), Code::NotFound);

    let metrics = server.metrics().await;
    assert!(metrics.contains("code=\"INVALID_ARGUMENT\""), "{metrics}");
    assert!(metrics.contains("code=\"NOT_FOUND\""));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn databases_list_describe_and_register() {
    let allowed = tempfile::tempdir().expect("tempdir");
    let source = quorum_tests::spider_dir().join("database/pets_1/pets_1.sqlite");
    std::fs::copy(&source, allowed.path().join("pets_copy.sqlite")).expect("copy database");
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::copy(&source, outside.path().join("elsewhere.sqlite")).expect("copy database");
    let server = TestServer::start(TestConfig {
        allowed_dir: Some(allowed.path().to_path_buf()),
        ..TestConfig::default()
    })
    .await;
    let mut client = server.databases();

    let listed = client
        .list(pb::ListDatabasesRequest {})
        .await
        .expect("list")
        .into_inner()
        .databases;
    let ids: Vec<&str> = listed.iter().map(|d| d.db_id.as_str()).collect();
    assert_eq!(ids, vec!["concert_singer", "pets_1"]);
    assert_eq!(listed[0].origin, pb::DatabaseOrigin::Config as i32);

    let schema = client
        .describe(pb::DescribeDatabaseRequest {
            db_id: "concert_singer".into(),
        })
        .await
        .expect("describe")
        .into_inner();
    let singer = schema
        .tables
        .iter()
        .find(|t| t.name == "singer")
        .expect("singer table");
    assert!(singer.columns.iter().any(|c| c.name == "Name"));
    assert!(!singer.sample_rows.is_empty());
    assert!(!schema.foreign_keys.is_empty());

    let e = client
        .describe(pb::DescribeDatabaseRequest {
            db_id: "no_such_db".into(),
        })
        .await
        .expect_err("unknown database");
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("no_such_db"));

    let register = |db_id: &str, path: &str| pb::RegisterDatabaseRequest {
        db_id: db_id.into(),
        path: path.into(),
        ..Default::default()
    };
    let added = client
        .register(register("pets_copy", "pets_copy.sqlite"))
        .await
        .expect("register")
        .into_inner()
        .database
        .expect("summary");
    assert_eq!(added.origin, pb::DatabaseOrigin::Registered as i32);
    assert!(added.table_count >= 3);
    let again = client
        .register(register("pets_copy", "pets_copy.sqlite"))
        .await
        .expect_err("duplicate id");
    assert_eq!(again.code(), Code::AlreadyExists);
    let escape = outside.path().join("elsewhere.sqlite");
    let e = client
        .register(register("escape", &escape.display().to_string()))
        .await
        .expect_err("outside the allowed directory");
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = client
        .register(register("bad id!", "pets_copy.sqlite"))
        .await
        .expect_err("bad id");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("`db_id`"));
    let e = client
        .register(register("missing", "missing.sqlite"))
        .await
        .expect_err("missing file");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("`path`"));
    // Outside the allowed directory, a file that does not exist gets the same answer as one
    // that does.
    let absent = outside.path().join("absent.sqlite");
    let e = client
        .register(register("absent", &absent.display().to_string()))
        .await
        .expect_err("outside the allowed directory");
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = client
        .register(register("dotdot", "../elsewhere.sqlite"))
        .await
        .expect_err("`..`");
    assert_eq!(e.code(), Code::PermissionDenied);
    // An empty file, an empty database and a WAL-mode database are refused, and nothing is
    // written beside them.
    std::fs::write(allowed.path().join("empty.sqlite"), b"").expect("write");
    let no_tables = allowed.path().join("no_tables.sqlite");
    rusqlite::Connection::open(&no_tables)
        .and_then(|c| c.execute_batch("PRAGMA user_version = 1;"))
        .expect("an empty database");
    let wal = allowed.path().join("wal.sqlite");
    rusqlite::Connection::open(&wal)
        .and_then(|c| c.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER);"))
        .expect("a WAL-mode database");
    for (id, file, reason) in [
        ("empty", "empty.sqlite", "not a SQLite database"),
        ("no_tables", "no_tables.sqlite", "no tables"),
        ("wal", "wal.sqlite", "WAL"),
    ] {
        let e = client
            .register(register(id, file))
            .await
            .expect_err("refused");
        assert_eq!(e.code(), Code::InvalidArgument, "{id}: {e:?}");
        assert!(e.message().contains(reason), "{id}: {}", e.message());
    }
    let mut files: Vec<String> = std::fs::read_dir(allowed.path())
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "empty.sqlite",
            "no_tables.sqlite",
            "pets_copy.sqlite",
            "wal.sqlite"
        ]
    );

    let listed = client
        .list(pb::ListDatabasesRequest {})
        .await
        .expect("list")
        .into_inner()
        .databases;
    assert_eq!(listed.len(), 3);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_follows_the_constraint_or_is_refused() {
    use pb::sampling_options::Constraint;
    let server = TestServer::start(TestConfig::default()).await;
    let mut client = server.inference();
    let constrained = |constraint: Constraint, max_tokens: u32| {
        let mut r = prompt_request("Give me a number and a colour, please.", max_tokens);
        if let Some(s) = r.sampling.as_mut() {
            s.constraint = Some(constraint);
        }
        r
    };

    // A regular expression: the output is exactly one of its sentences.
    let regex = "(red|green|blue) [0-9]{1,3}";
    let stream = client
        .generate(constrained(Constraint::Regex(regex.into()), 16))
        .await
        .expect("regex accepted")
        .into_inner();
    let (text, finals, status) = collect(stream).await;
    assert!(status.is_none(), "{status:?}");
    assert_eq!(finals.len(), 1);
    let (colour, number) = text.split_once(' ').expect("two words");
    assert!(["red", "green", "blue"].contains(&colour), "{text:?}");
    assert!(
        (1..=3).contains(&number.len()) && number.chars().all(|c| c.is_ascii_digit()),
        "{text:?}"
    );

    // A JSON schema: the output parses and has the required fields.
    let schema = r#"{"type":"object","properties":{"colour":{"enum":["red","green"]},"n":{"type":"integer"}},"required":["colour","n"],"additionalProperties":false}"#;
    let stream = client
        .generate(constrained(Constraint::JsonSchema(schema.into()), 48))
        .await
        .expect("schema accepted")
        .into_inner();
    let (text, _, status) = collect(stream).await;
    assert!(status.is_none(), "{status:?}");
    let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert!(["red", "green"].contains(&value["colour"].as_str().unwrap_or("")));
    assert!(value["n"].is_i64(), "{text}");

    // A Lark grammar.
    let lark = "start: \"SELECT \" NAME \" FROM singer\"\nNAME: /[a-z]{1,8}/\n";
    let stream = client
        .generate(constrained(Constraint::LarkGrammar(lark.into()), 24))
        .await
        .expect("grammar accepted")
        .into_inner();
    let (text, _, status) = collect(stream).await;
    assert!(status.is_none(), "{status:?}");
    assert!(
        text.starts_with("SELECT ") && text.ends_with(" FROM singer"),
        "{text:?}"
    );

    // Constraints that cannot compile, and an empty one, are the client's error.
    for bad in [
        Constraint::LarkGrammar("start: (".into()),
        Constraint::Regex("(unclosed".into()),
        Constraint::JsonSchema("{not json".into()),
        Constraint::LarkGrammar(String::new()),
    ] {
        let e = client
            .generate(constrained(bad.clone(), 8))
            .await
            .expect_err("must be refused");
        assert_eq!(e.code(), Code::InvalidArgument, "{bad:?}: {}", e.message());
        assert!(
            e.message().contains("sampling.constraint"),
            "{}",
            e.message()
        );
    }
    server.stop().await;
}

/// Greedy text of `prompt` under `adapter`, or the gRPC error.
async fn complete(
    client: &mut quorum_proto::v1::inference_client::InferenceClient<tonic::transport::Channel>,
    prompt: &str,
    adapter: Option<&str>,
) -> Result<String, tonic::Status> {
    let mut request = prompt_request(prompt, 12);
    request.adapter = adapter.map(str::to_owned);
    request.sampling = Some(pb::SamplingOptions {
        max_tokens: Some(12),
        ignore_eos: true,
        ..Default::default()
    });
    let stream = client.generate(authed(request)).await?.into_inner();
    let (text, _, status) = collect(stream).await;
    match status {
        Some(status) => Err(status),
        None => Ok(text),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adapters_load_and_unload_over_grpc_behind_the_token() {
    let adapters = tempfile::tempdir().unwrap();
    for (dir, seed, zero_b) in [("zero", 2, true), ("rand", 3, false)] {
        let dir = adapters.path().join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        super::lora::write_adapter(&dir, seed, zero_b);
    }
    let broken = adapters.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("adapter_config.json"), "{}").unwrap();
    let server = TestServer::start(TestConfig {
        auth: true,
        adapter_dir: Some(adapters.path().to_path_buf()),
        startup_adapter: Some(("tuned".into(), adapters.path().join("zero"))),
        ..TestConfig::default()
    })
    .await;
    let mut client = server.inference();
    let load = |name: &str, path: &str| pb::LoadAdapterRequest {
        model: "smol".into(),
        name: name.into(),
        path: path.into(),
    };
    let unload = |name: &str| pb::UnloadAdapterRequest {
        model: "smol".into(),
        name: name.into(),
    };

    let e = client
        .load_adapter(load("rand", "rand"))
        .await
        .expect_err("no token");
    assert_eq!(e.code(), Code::Unauthenticated);

    let prompt = "-- The singers of the concert database with their names, countries and ages, \
                  for a report on the season in every stadium, oldest first.\n\
                  SELECT name, country, age FROM singer WHERE";
    let base = complete(&mut client, prompt, None).await.expect("base");
    let e = complete(&mut client, prompt, Some("rand"))
        .await
        .expect_err("not loaded yet");
    assert_eq!(e.code(), Code::NotFound);

    let listed = client
        .load_adapter(authed(load("rand", "rand")))
        .await
        .expect("loads")
        .into_inner();
    assert_eq!(
        (listed.model.as_str(), listed.adapters.as_slice()),
        ("smol", &["tuned".to_owned(), "rand".to_owned()][..])
    );
    let models = client
        .list_models(authed(pb::ListModelsRequest {}))
        .await
        .expect("list")
        .into_inner()
        .models;
    assert_eq!(models[0].adapters, ["tuned", "rand"]);
    let adapted = complete(&mut client, prompt, Some("rand"))
        .await
        .expect("adapted");
    assert_ne!(adapted, base, "the loaded adapter changes the answer");
    // A zero B computes the base model exactly.
    assert_eq!(
        complete(&mut client, prompt, Some("tuned"))
            .await
            .expect("tuned"),
        base
    );

    let cases: [(pb::LoadAdapterRequest, Code, &str); 6] = [
        (load("rand", "rand"), Code::AlreadyExists, "rand"),
        (load("other", "../zero"), Code::InvalidArgument, "`path`"),
        (load("other", "missing"), Code::NotFound, "missing"),
        (load("other", "broken"), Code::InvalidArgument, "`path`"),
        (load("a b", "rand"), Code::InvalidArgument, "`name`"),
        (
            pb::LoadAdapterRequest {
                model: "gpt-17".into(),
                ..load("other", "rand")
            },
            Code::NotFound,
            "gpt-17",
        ),
    ];
    for (request, code, says) in cases {
        let e = client
            .load_adapter(authed(request.clone()))
            .await
            .expect_err("refused");
        assert_eq!(e.code(), code, "{request:?}: {}", e.message());
        assert!(e.message().contains(says), "{request:?}: {}", e.message());
    }

    // A question answered by the adapted generator alone (a subset of the configured voters;
    // the sub-task explainer, `smol`, is not among them).
    let answer = server
        .text2sql()
        .generate(authed(pb::Text2SqlRequest {
            question: "How many singers do we have?".into(),
            db_id: "concert_singer".into(),
            evidence: None,
            options: Some(pb::PipelineOptions {
                generators: vec!["smol-tuned".into()],
                round2: Some(false),
                revision: Some(false),
                ..Default::default()
            }),
        }))
        .await
        .expect("a subset of the generators answers")
        .into_inner();
    assert!(answer.candidates.iter().all(|c| c.model == "smol-tuned"));

    let e = client
        .unload_adapter(authed(unload("tuned")))
        .await
        .expect_err("a pipeline generator and the selector run with it");
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("smol-tuned"), "{}", e.message());
    assert!(e.message().contains("selector"), "{}", e.message());
    let listed = client
        .unload_adapter(authed(unload("rand")))
        .await
        .expect("unloads")
        .into_inner();
    assert_eq!(listed.adapters, ["tuned"]);
    let e = complete(&mut client, prompt, Some("rand"))
        .await
        .expect_err("unloaded");
    assert_eq!(e.code(), Code::NotFound);
    let e = client
        .unload_adapter(authed(unload("rand")))
        .await
        .expect_err("already gone");
    assert_eq!(e.code(), Code::NotFound);

    // The same name again, now the zero adapter, answers as the base model does (that no KV of
    // the first `rand` is served is the engine test `lora::adapters_load_and_unload_…`).
    client
        .load_adapter(authed(load("rand", "zero")))
        .await
        .expect("loads again");
    assert_eq!(
        complete(&mut client, prompt, Some("rand"))
            .await
            .expect("reloaded"),
        base
    );
    server.stop().await;
}

/// A selector adapter the selection model does not have stops the server at start-up, naming
/// the setting and the adapters it has.
#[tokio::test]
async fn a_missing_selector_adapter_is_refused_at_start() {
    let adapters = tempfile::tempdir().unwrap();
    let dir = adapters.path().join("zero");
    std::fs::create_dir_all(&dir).unwrap();
    super::lora::write_adapter(&dir, 2, true);
    let toml = TestConfig {
        startup_adapter: Some(("tuned".into(), dir)),
        ..TestConfig::default()
    }
    .toml()
    .replace(
        "selector_adapter = \"tuned\"",
        "selector_adapter = \"pick\"",
    );
    let mut raw = quorum_server::config::file::RawConfig::from_toml_str(&toml).expect("parses");
    raw.cpu_path = Some(quorum_tests::cpu_path());
    let no_scan = std::path::PathBuf::from("/nonexistent-quorum-test-dir");
    let resolved =
        quorum_server::config::resolved::resolve(raw, &quorum_tests::model_dirs(), &no_scan)
            .expect("resolves");
    let server = quorum_server::start(resolved).await.expect("binds");
    // Models load in the background; the server stops when loading fails.
    let err = tokio::time::timeout(std::time::Duration::from_secs(120), server.wait())
        .await
        .expect("the server stops")
        .expect_err("a selector adapter that is not loaded is refused");
    let err = format!("{err:#}");
    assert!(
        err.contains("pipeline.selector_adapter")
            && err.contains("`pick`")
            && err.contains("tuned"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_databases_says_so_until_one_is_registered() {
    let allowed = tempfile::tempdir().expect("tempdir");
    let source = quorum_tests::spider_dir().join("database/pets_1/pets_1.sqlite");
    std::fs::copy(&source, allowed.path().join("pets_1.sqlite")).expect("copy database");
    let toml = format!(
        r#"
[server]
listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"

[[models]]
name = "smol"
source = {model:?}
roles = ["generator"]

[databases]
allowed_dir = {allowed:?}
"#,
        model = quorum_tests::model_path(quorum_tests::SMOLLM2)
            .display()
            .to_string(),
        allowed = allowed.path().display().to_string(),
    );
    let raw = quorum_server::config::file::RawConfig::from_toml_str(&toml).expect("config parses");
    let no_scan = std::path::Path::new("/nonexistent-quorum-test-dir");
    let server = TestServer::start_raw(raw, no_scan, std::time::Duration::from_secs(120)).await;

    // Ready as a whole (Inference serves), but text-to-SQL has nothing to answer over.
    assert_eq!(server.health("").await, ServingStatus::Serving);
    assert_eq!(
        server.health("quorum.v1.Inference").await,
        ServingStatus::Serving
    );
    assert_eq!(
        server.health("quorum.v1.Text2Sql").await,
        ServingStatus::NotServing
    );
    let mut databases = server.databases();
    let listed = databases
        .list(pb::ListDatabasesRequest {})
        .await
        .expect("list")
        .into_inner();
    assert!(listed.databases.is_empty());
    assert!(listed.note.contains("no database"), "{}", listed.note);
    assert!(
        listed.note.contains("/nonexistent-quorum-test-dir"),
        "{}",
        listed.note
    );
    assert!(server.metrics().await.contains("quorum_databases{} 0\n"));

    databases
        .register(pb::RegisterDatabaseRequest {
            db_id: "pets_1".into(),
            path: "pets_1.sqlite".into(),
            postgres: None,
            mysql: None,
        })
        .await
        .expect("registers");
    assert_eq!(
        server.health("quorum.v1.Text2Sql").await,
        ServingStatus::Serving
    );
    let listed = databases
        .list(pb::ListDatabasesRequest {})
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.databases.len(), 1);
    assert_eq!(listed.note, "");
    assert!(server.metrics().await.contains("quorum_databases{} 1\n"));
    server.stop().await;
}
