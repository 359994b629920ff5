//! Starting and stopping the server. `start` binds the ports and answers at once (health
//! NOT_SERVING, Quorum RPCs UNAVAILABLE) while the models load in the background; shutdown is
//! a message: stop admitting, let in-flight requests finish within the grace period, cancel
//! what is left, stop the engines, then close the transport.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use quorum_proto::v1::databases_server::DatabasesServer;
use quorum_proto::v1::inference_server::InferenceServer;
use quorum_proto::v1::text2_sql_server::Text2SqlServer;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::sync::CancellationToken;

use crate::audit::AuditLog;
use crate::auth::Authenticator;
use crate::auth::tokens_file::TokensFile;
use crate::config::resolved::ServerConfig;
use crate::databases::{DatabaseRegistry, RegistrationPolicies};
use crate::http;
use crate::models::ModelRegistry;
use crate::pipeline_runtime::PipelineRuntime;
use crate::services::databases::DatabasesService;
use crate::services::inference::InferenceService;
use crate::services::text2sql::Text2SqlService;
use crate::state::{AppState, Phase};

/// After the grace period, cancelled requests get this long to notice and release.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// A server that is listening.
#[derive(Debug)]
pub struct RunningServer {
    pub addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
    /// The port that serves only metrics and probes, when configured.
    pub scrape_addr: Option<SocketAddr>,
    pub state: Arc<AppState>,
    drain: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
}

impl RunningServer {
    /// Begins a graceful shutdown (what SIGTERM does); `wait` returns when it is complete.
    pub fn shutdown(&self) {
        self.drain.cancel();
    }

    /// A token that begins the shutdown when cancelled, for signal handlers.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.drain.clone()
    }

    /// Resolves when the server has stopped: after a shutdown, or when loading failed.
    pub async fn wait(self) -> anyhow::Result<()> {
        self.task.await.context("server task")?
    }

    /// `wait` without giving up the handle; await it at most once to completion.
    pub async fn stopped(&mut self) -> anyhow::Result<()> {
        (&mut self.task).await.context("server task")?
    }
}

/// Binds the ports and starts serving; models load in the background.
pub async fn start(config: ServerConfig) -> anyhow::Result<RunningServer> {
    let specs = config.databases.clone();
    let allowed = config.allowed_dir.clone();
    let policies = RegistrationPolicies {
        postgres: config.postgres_policy.clone(),
        mysql: config.mysql_policy.clone(),
    };
    let registrations = config.registrations_file.clone();
    let databases = tokio::task::spawn_blocking(move || {
        DatabaseRegistry::open(&specs, allowed, policies, registrations.as_deref())
    })
    .await??;
    let (reporter, health_service) = tonic_health::server::health_reporter();
    let mut state = AppState::new(
        config.models.clone(),
        databases,
        config.pipeline.clone(),
        config.limits,
        (config.auth_token.is_some() || config.tokens_file.is_some())
            .then(|| config.adapter_dir.clone()),
        reporter,
    );
    state.database_dir = config.database_dir.clone();
    state.open_without_token = config.open_without_token.clone();
    state.audit = match &config.audit {
        None => None,
        Some(spec) => Some(Arc::new(match &spec.file {
            None => AuditLog::stdout(),
            Some(path) => AuditLog::file(path, spec.max_bytes, spec.keep)
                .with_context(|| format!("opening the audit trail {}", path.display()))?,
        })),
    };
    state.tokens = match &config.tokens_file {
        None => None,
        Some(path) => Some(Arc::new(TokensFile::open(path)?)),
    };
    if let Some(note) = state.open_access_note() {
        tracing::warn!("{note}");
    }
    let state = Arc::new(state);
    if config.pipeline.raw.knobs.value_retrieval == Some(true) {
        state.databases.warm_value_indexes();
    }
    match state.no_databases_note() {
        Some(note) => tracing::warn!("{note}"),
        None => tracing::info!(
            databases = state.databases.list().len(),
            dir = %config.database_dir.display(),
            "databases"
        ),
    }
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    let stop_transport = CancellationToken::new();
    let auth = Authenticator::new(
        config.auth_token.as_deref(),
        state.tokens.clone(),
        state.audit.clone(),
    );
    if let Some(tokens) = &state.tokens {
        tracing::info!(tokens = tokens.current().len(), "tokens file");
        tokio::spawn(tokens.clone().watch(stop_transport.clone()));
    }
    let metrics_addr = match config.metrics_listen {
        Some(a) => {
            let l = http::bind(a)
                .await
                .with_context(|| format!("binding the HTTP port {a}"))?;
            let bound = l.local_addr()?;
            let face = http::Http {
                state: state.clone(),
                auth: auth.clone(),
                cors: config.cors.clone(),
            };
            tokio::spawn(http::serve(l, face, stop_transport.clone()));
            Some(bound)
        }
        None => None,
    };
    let scrape_addr = match config.scrape_listen {
        Some(a) => {
            let l = http::bind(a)
                .await
                .with_context(|| format!("binding the scrape port {a}"))?;
            let bound = l.local_addr()?;
            let face = http::Http {
                state: state.clone(),
                auth: auth.clone(),
                cors: config.cors.clone(),
            };
            tokio::spawn(http::serve_scrape(l, face, stop_transport.clone()));
            Some(bound)
        }
        None => None,
    };
    state.publish_health().await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(quorum_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .context("building the reflection service")?;
    let mut builder = tonic::transport::Server::builder();
    if let Some(pem) = &config.tls {
        let identity = tonic::transport::Identity::from_pem(&pem.cert, &pem.key);
        builder = builder
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .context("the TLS certificate and key")?;
    }
    let router = builder
        .add_service(health_service)
        .add_service(reflection)
        .add_service(InferenceServer::with_interceptor(
            InferenceService {
                state: state.clone(),
            },
            auth.clone(),
        ))
        .add_service(Text2SqlServer::with_interceptor(
            Text2SqlService {
                state: state.clone(),
            },
            auth.clone(),
        ))
        .add_service(DatabasesServer::with_interceptor(
            DatabasesService {
                state: state.clone(),
            },
            auth,
        ));
    // Replies go out as written: with Nagle's algorithm a small response waits for the
    // client's delayed ACK (40 ms on Linux) whenever its headers and body leave apart.
    let incoming = TcpListenerStream::new(listener).map(|accepted| {
        if let Ok(stream) = &accepted
            && let Err(e) = stream.set_nodelay(true)
        {
            tracing::debug!(error = %e, "TCP_NODELAY");
        }
        accepted
    });
    let serve = tokio::spawn(
        router.serve_with_incoming_shutdown(incoming, stop_transport.clone().cancelled_owned()),
    );
    tracing::info!(%addr, http = ?metrics_addr, scrape = ?scrape_addr, "listening; loading models");
    let drain = CancellationToken::new();
    let lifecycle = Lifecycle {
        state: state.clone(),
        config,
        drain: drain.clone(),
        stop_transport,
    };
    let task = tokio::spawn(lifecycle.run(serve));
    Ok(RunningServer {
        addr,
        metrics_addr,
        scrape_addr,
        state,
        drain,
        task,
    })
}

struct Lifecycle {
    state: Arc<AppState>,
    config: ServerConfig,
    drain: CancellationToken,
    stop_transport: CancellationToken,
}

type ServeHandle = JoinHandle<Result<(), tonic::transport::Error>>;

impl Lifecycle {
    async fn run(self, serve: ServeHandle) -> anyhow::Result<()> {
        let specs = self.config.models.clone();
        let limits = self.config.limits;
        let settings = self.config.pipeline.clone();
        let cpu_path = self.config.cpu_path;
        tracing::info!(%cpu_path, "CPU kernel path");
        let load = tokio::task::spawn_blocking(move || {
            let models = Arc::new(ModelRegistry::load(&specs, &limits, cpu_path)?);
            let pipeline = PipelineRuntime::build(&settings, &models)?;
            anyhow::Ok((models, Arc::new(pipeline)))
        });
        tokio::select! {
            loaded = load => match loaded.context("model loading task").and_then(|r| r) {
                Ok((models, pipeline)) => {
                    self.state.models_ready(models, pipeline);
                    if self.state.phase() == Phase::Serving {
                        self.state.publish_health().await;
                        tracing::info!("ready");
                        let databases = crate::prefix_warming::named_databases(&self.state);
                        crate::prefix_warming::warm_in_background(&self.state, databases);
                    }
                }
                Err(e) => {
                    self.state.set_phase(Phase::Failed);
                    self.stop_transport.cancel();
                    let _ = serve.await;
                    return Err(e.context("loading the models"));
                }
            },
            // A shutdown while loading: the loading thread is abandoned with the process.
            _ = self.drain.cancelled() => {}
        }
        self.drain.cancelled().await;
        self.shut_down(serve).await
    }

    async fn shut_down(self, serve: ServeHandle) -> anyhow::Result<()> {
        self.state.set_phase(Phase::Draining);
        self.state.publish_health().await;
        let grace = self.config.grace_period;
        tracing::info!(in_flight = self.state.in_flight(), ?grace, "draining");
        if tokio::time::timeout(grace, self.state.wait_idle())
            .await
            .is_err()
        {
            tracing::warn!(
                in_flight = self.state.in_flight(),
                "grace period over; cancelling the remaining requests"
            );
            self.state.cancel_all.cancel();
            let _ = tokio::time::timeout(CANCEL_WAIT, self.state.wait_idle()).await;
        }
        if let Some(models) = self.state.loaded_models() {
            models.shutdown();
        }
        self.stop_transport.cancel();
        serve.await.context("server task")??;
        tracing::info!("stopped");
        Ok(())
    }
}
