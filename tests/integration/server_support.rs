//! Starting the real server in-process on a loopback port with SmolLM2 in every role, and
//! clients for it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use quorum_proto::v1 as pb;
use quorum_proto::v1::databases_client::DatabasesClient;
use quorum_proto::v1::inference_client::InferenceClient;
use quorum_proto::v1::text2_sql_client::Text2SqlClient;
use quorum_server::RunningServer;
use quorum_server::config::file::{Overrides, RawConfig};
use quorum_server::config::profile::Profile;
use quorum_tests::{SMOLLM2, model_path, spider_dir};
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;

pub const TOKEN: &str = "test-token";

/// Server settings a test may change.
pub struct TestConfig {
    pub max_queue: usize,
    pub max_running: usize,
    pub grace_secs: f64,
    pub max_prompt_tokens: usize,
    /// Text-to-SQL runs at once, and requests that may wait for one.
    pub max_text2sql: usize,
    pub max_waiting_text2sql: usize,
    pub auth: bool,
    /// A directory `Databases.Register` may read from.
    pub allowed_dir: Option<PathBuf>,
    /// The registrations file shared with other servers.
    pub registrations_file: Option<PathBuf>,
    /// Serve over TLS: (PEM certificate for `localhost`, PEM key).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The CA the client trusts for TLS.
    pub tls_ca: Option<PathBuf>,
    /// Where `Inference.LoadAdapter` reads adapters from.
    pub adapter_dir: Option<PathBuf>,
    /// An adapter of the model loaded at start-up (name, PEFT directory), which a second
    /// pipeline generator, `smol-tuned`, runs with.
    pub startup_adapter: Option<(String, PathBuf)>,
    /// Tokens with scopes, rights and quotas (`server.tokens_file`).
    pub tokens_file: Option<PathBuf>,
    /// The audit trail (`server.audit_log`).
    pub audit_log: Option<PathBuf>,
    /// `limits.pinned_prefix_share`: 0 unless a test is about warming, so that no test
    /// shares the engine with the configured databases' warming at start-up.
    pub pinned_prefix_share: f64,
    /// `limits.kv_cache_mib`.
    pub kv_cache_mib: u64,
}

impl Default for TestConfig {
    fn default() -> Self {
        Self {
            max_queue: 8,
            max_running: 4,
            grace_secs: 10.0,
            max_prompt_tokens: 1024,
            max_text2sql: 8,
            max_waiting_text2sql: 64,
            auth: false,
            allowed_dir: None,
            registrations_file: None,
            tls: None,
            tls_ca: None,
            adapter_dir: None,
            startup_adapter: None,
            tokens_file: None,
            audit_log: None,
            pinned_prefix_share: 0.0,
            kv_cache_mib: 64,
        }
    }
}

impl TestConfig {
    pub fn toml(&self) -> String {
        let model = model_path(SMOLLM2);
        let db = |id: &str| spider_dir().join(format!("database/{id}/{id}.sqlite"));
        let mut auth = if self.auth {
            format!("auth_token = \"{TOKEN}\"\n")
        } else {
            String::new()
        };
        for (key, path) in [
            ("tokens_file", &self.tokens_file),
            ("audit_log", &self.audit_log),
        ] {
            if let Some(p) = path {
                auth.push_str(&format!("{key} = {:?}\n", p.display().to_string()));
            }
        }
        let tls = self
            .tls
            .as_ref()
            .map(|(cert, key)| {
                format!(
                    "tls_cert = {:?}\ntls_key = {:?}",
                    cert.display().to_string(),
                    key.display().to_string()
                )
            })
            .unwrap_or_default();
        let mut allowed = self
            .allowed_dir
            .as_ref()
            .map(|d| format!("allowed_dir = {:?}\n", d.display().to_string()))
            .unwrap_or_default();
        let adapter_dir = self
            .adapter_dir
            .as_ref()
            .map(|d| format!("adapter_dir = {:?}", d.display().to_string()))
            .unwrap_or_default();
        let (model_adapters, generators) = match &self.startup_adapter {
            Some((name, dir)) => (
                format!(
                    "[models.adapters]\n{name} = {:?}\n",
                    dir.display().to_string()
                ),
                format!(
                    "selector_adapter = {name:?}\n\
                     [[pipeline.generators]]\nname = \"smol\"\nmodel = \"smol\"\n\
                     [[pipeline.generators]]\nname = \"smol-tuned\"\nmodel = \"smol\"\n\
                     adapter = {name:?}\n"
                ),
            ),
            None => (String::new(), String::new()),
        };
        if let Some(file) = &self.registrations_file {
            allowed.push_str(&format!(
                "registrations_file = {:?}\n",
                file.display().to_string()
            ));
        }
        format!(
            r#"
[server]
listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"
scrape_listen = "127.0.0.1:0"
grace_period_secs = {grace}
{auth}
{tls}
{adapter_dir}

[limits]
max_queue = {queue}
max_running = {running}
kv_cache_mib = {kv_mib}
pinned_prefix_share = {pinned:?}
max_prompt_tokens = {max_prompt}
max_new_tokens = 512
request_timeout_secs = 120
max_concurrent_text2sql = {text2sql}
max_waiting_text2sql = {text2sql_waiting}

[[models]]
name = "smol"
source = {model:?}
roles = ["generator", "selector"]
format = "simple_ddl"
{model_adapters}
[databases]
{allowed}
[databases.entries]
concert_singer = {concert:?}
pets_1 = {pets:?}

[pipeline]
round1_shots = 0
round2_shots = 0
max_new_tokens = 48

{generators}"#,
            grace = self.grace_secs,
            kv_mib = self.kv_cache_mib,
            pinned = self.pinned_prefix_share,
            queue = self.max_queue,
            running = self.max_running,
            max_prompt = self.max_prompt_tokens,
            text2sql = self.max_text2sql,
            text2sql_waiting = self.max_waiting_text2sql,
            model = model.display().to_string(),
            concert = db("concert_singer").display().to_string(),
            pets = db("pets_1").display().to_string(),
        )
    }
}

/// A running server and channels to it.
pub struct TestServer {
    pub server: RunningServer,
    pub channel: Channel,
    auth: bool,
}

impl TestServer {
    /// Starts the server and waits until health says SERVING.
    pub async fn start(config: TestConfig) -> Self {
        let raw = RawConfig::from_toml_str(&config.toml()).expect("test config parses");
        let no_scan = PathBuf::from("/nonexistent-quorum-test-dir");
        let ca = config.tls_ca.clone();
        Self::connect(raw, &no_scan, config.auth, ca, Duration::from_secs(120)).await
    }

    /// The shipped configuration of `profile` over Spider's dev databases on a loopback port,
    /// running up to `text2sql` questions at once. Whole pipelines on 2 cores (beside other
    /// tests) take minutes each: the serving default deadline (300 s) is for one caller's
    /// question, not for a test's burst.
    pub async fn start_shipped(profile: Profile, text2sql: usize) -> Self {
        let mut raw = RawConfig::default();
        raw.apply(Overrides {
            listen: Some("127.0.0.1:0".into()),
            metrics_listen: Some(String::new()),
            profile: Some(profile),
            ..Overrides::default()
        });
        raw.limits.request_timeout_secs = Some(1800.0);
        raw.limits.max_concurrent_text2sql = Some(text2sql);
        let db_dir = spider_dir().join("database");
        Self::start_raw(raw, &db_dir, Duration::from_secs(900)).await
    }

    /// Starts a server from `raw` scanning `db_dir`, waiting up to `ready_within` for it to
    /// load (the default setup builds the demonstration index on its first start).
    pub async fn start_raw(
        raw: RawConfig,
        db_dir: &std::path::Path,
        ready_within: Duration,
    ) -> Self {
        Self::connect(raw, db_dir, false, None, ready_within).await
    }

    /// Starts the server and connects, over TLS trusting `ca` when given.
    async fn connect(
        raw: RawConfig,
        db_dir: &std::path::Path,
        auth: bool,
        ca: Option<PathBuf>,
        ready_within: Duration,
    ) -> Self {
        let mut raw = raw;
        raw.cpu_path = Some(quorum_tests::cpu_path());
        let resolved =
            quorum_server::config::resolved::resolve(raw, &quorum_tests::model_dirs(), db_dir)
                .expect("test config resolves");
        let server = quorum_server::start(resolved).await.expect("server starts");
        let channel = match ca {
            None => Channel::from_shared(format!("http://{}", server.addr))
                .expect("uri")
                .connect()
                .await
                .expect("connects"),
            Some(ca) => {
                let pem = std::fs::read(ca).expect("CA certificate");
                let tls = tonic::transport::ClientTlsConfig::new()
                    .ca_certificate(tonic::transport::Certificate::from_pem(pem))
                    .domain_name("localhost");
                Channel::from_shared(format!("https://localhost:{}", server.addr.port()))
                    .expect("uri")
                    .tls_config(tls)
                    .expect("TLS config")
                    .connect()
                    .await
                    .expect("connects over TLS")
            }
        };
        let this = Self {
            server,
            channel,
            auth,
        };
        this.wait_serving(ready_within).await;
        this
    }

    /// Health as `quorum health` and `quorum ask` read it.
    pub async fn health(&self, service: &str) -> ServingStatus {
        quorum_server::client::health_status(&self.channel, service)
            .await
            .expect("health check answers")
    }

    async fn wait_serving(&self, within: Duration) {
        let until = Instant::now() + within;
        while self.health("").await != ServingStatus::Serving {
            assert!(Instant::now() < until, "server did not become ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn inference(&self) -> InferenceClient<Channel> {
        InferenceClient::new(self.channel.clone())
    }

    /// `Inference.ListModels`' models.
    pub async fn models(&self) -> Vec<pb::ModelInfo> {
        self.inference()
            .list_models(pb::ListModelsRequest {})
            .await
            .expect("models listed")
            .into_inner()
            .models
    }

    /// Checks the models of the default and accurate profiles are served: Qwen2.5-Coder-1.5B
    /// writing the SQL, Qwen2.5-Coder-0.5B with the selector adapter `expected_selector`, MiniLM.
    pub async fn assert_serves_the_bigger_model_and_the_shipped_selector(
        &self,
        expected_selector: &str,
    ) {
        let models = self.models().await;
        let mut names: Vec<_> = models.iter().map(|m| m.name.as_str()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "all-minilm-l6-v2",
                "qwen2.5-coder-0.5b",
                "qwen2.5-coder-1.5b"
            ]
        );
        let selector = models
            .iter()
            .find(|m| m.name == "qwen2.5-coder-0.5b")
            .expect("the selection model");
        assert_eq!(selector.adapters, [expected_selector]);
    }

    pub fn text2sql(&self) -> Text2SqlClient<Channel> {
        Text2SqlClient::new(self.channel.clone())
    }

    pub fn databases(&self) -> DatabasesClient<Channel> {
        DatabasesClient::new(self.channel.clone())
    }

    /// The Prometheus text from the metrics port.
    pub async fn metrics(&self) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.server.metrics_addr.expect("metrics enabled");
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut body = String::new();
        stream.read_to_string(&mut body).await.expect("read");
        assert!(body.starts_with("HTTP/1.1 200"), "{body}");
        body
    }

    /// The engine load of the one model.
    pub async fn load(&self) -> pb::EngineLoad {
        let mut request = tonic::Request::new(pb::ListModelsRequest {});
        if self.auth {
            let bearer = format!("Bearer {TOKEN}").parse().expect("ascii");
            request.metadata_mut().insert("authorization", bearer);
        }
        let models = self
            .inference()
            .list_models(request)
            .await
            .expect("list models")
            .into_inner();
        models.models[0].load.expect("engine load")
    }

    /// Waits until `running` text-to-SQL runs hold a slot and `waiting` wait for one.
    pub async fn wait_text2sql(&self, running: usize, waiting: usize) {
        let queue = &self.server.state.text2sql_queue;
        let until = Instant::now() + Duration::from_secs(20);
        while (queue.running(), queue.waiting()) != (running, waiting) {
            assert!(
                Instant::now() < until,
                "text-to-SQL runs {} and waiting {}, expected {running} and {waiting}",
                queue.running(),
                queue.waiting()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until the engine holds no sequences and no KV blocks.
    pub async fn wait_engine_idle(&self) {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let load = self.load().await;
            if load.running == 0 && load.waiting == 0 && load.kv_blocks_used == 0 {
                return;
            }
            assert!(
                Instant::now() < until,
                "engine did not free its blocks: {load:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn stop(self) {
        self.server.shutdown();
        self.server.wait().await.expect("clean shutdown");
    }
}

/// A generation request for a raw prompt.
pub fn prompt_request(prompt: &str, max_tokens: u32) -> pb::InferenceRequest {
    pb::InferenceRequest {
        model: String::new(),
        input: Some(pb::inference_request::Input::Prompt(prompt.into())),
        sampling: Some(pb::SamplingOptions {
            max_tokens: Some(max_tokens),
            ..Default::default()
        }),
        adapter: None,
    }
}

/// Sets a deadline the way every gRPC client does: the `grpc-timeout` header.
pub fn with_timeout<T>(body: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(body);
    request.set_timeout(timeout);
    request
}

/// Reads a whole generation stream: the text of choice 0, the final messages, or the status
/// that ended it.
pub async fn collect(
    mut stream: tonic::Streaming<pb::InferenceResponse>,
) -> (String, Vec<pb::InferenceResponse>, Option<tonic::Status>) {
    let mut text = String::new();
    let mut finals = Vec::new();
    loop {
        match stream.message().await {
            Ok(Some(m)) => {
                if m.index == 0 {
                    text.push_str(&m.text);
                }
                if m.finish_reason != pb::FinishReason::Unspecified as i32 {
                    finals.push(m);
                }
            }
            Ok(None) => return (text, finals, None),
            Err(status) => return (text, finals, Some(status)),
        }
    }
}

/// What an HTTP request got back: the status, the header block and the body as it came
/// (chunked framing included).
pub struct HttpReply {
    pub status: u16,
    pub headers: String,
    pub body: String,
}

/// One HTTP/1.1 request over a fresh connection, with a JSON content type and `headers`.
pub async fn http_request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpReply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let (headers, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    HttpReply {
        status,
        headers: headers.to_owned(),
        body: body.to_owned(),
    }
}

/// A gRPC request carrying `token` as its bearer token.
pub fn with_token<T>(token: &str, body: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(body);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("ascii"),
    );
    r
}
