//! What every RPC shares: the lifecycle phase, the loaded models (once loaded), the databases,
//! the limits, the metrics, and the count of requests in flight that shutdown waits for.

use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::config::resolved::{Limits, ModelSpec, PipelineSettings};
use crate::databases::{Database, DatabaseRegistry};
use crate::metrics::Metrics;
use crate::models::ModelRegistry;
use crate::pipeline_runtime::PipelineRuntime;
use crate::run_queue::RunQueue;
use crate::status::ServiceError;

/// The server's lifecycle. Requests are admitted only while `Serving`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Models are loading and warming up.
    Starting = 0,
    Serving = 1,
    /// Shutdown began: in-flight requests finish, new ones get UNAVAILABLE.
    Draining = 2,
    /// Loading failed; the server is on its way out.
    Failed = 3,
}

#[derive(Debug)]
pub struct AppState {
    phase: AtomicU8,
    models: OnceLock<Arc<ModelRegistry>>,
    pipeline_runtime: OnceLock<Arc<PipelineRuntime>>,
    pub model_specs: Vec<ModelSpec>,
    pub databases: DatabaseRegistry,
    /// The directory scanned for SQLite databases, named when there are none.
    pub database_dir: std::path::PathBuf,
    /// Addresses beyond loopback served without a token because the configuration allows it
    /// (`allow_unauthenticated`); said in the log, `/ready` and the metrics.
    pub open_without_token: Vec<std::net::SocketAddr>,
    /// The gRPC health entries, kept in step with the phase and the databases.
    health: tonic_health::server::HealthReporter,
    pub pipeline: PipelineSettings,
    pub limits: Limits,
    pub metrics: Metrics,
    /// The audit trail, when configured.
    pub audit: Option<Arc<crate::audit::AuditLog>>,
    /// The tokens file, when tokens are kept in one (its reload failures are a metric).
    pub tokens: Option<Arc<crate::auth::tokens_file::TokensFile>>,
    /// The directory `Inference.LoadAdapter` reads from; `None` when the server has no auth
    /// token, which turns adapter administration off.
    pub adapter_admin: Option<std::path::PathBuf>,
    in_flight: AtomicUsize,
    idle: Notify,
    /// Cancelled when the grace period ends: every request still running stops.
    pub cancel_all: CancellationToken,
    /// Text-to-SQL requests wait here for a run slot.
    pub text2sql_queue: RunQueue,
    /// Notes' sentence embeddings, for choosing among a database's many notes.
    pub note_embeddings: crate::note_retrieval::NoteEmbeddings,
    next_request: AtomicU64,
    /// Distinguishes request ids across restarts.
    boot_id: u64,
}

/// Holds one unit of the in-flight count; dropping it (the request ended, however) releases it.
#[derive(Debug)]
pub struct Admission {
    state: Arc<AppState>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if self.state.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.state.idle.notify_waiters();
        }
    }
}

impl AppState {
    /// A database by id. With a registrations file shared by replicas, one that another
    /// replica registered is opened on its first request here.
    pub async fn database(self: &Arc<Self>, db_id: &str) -> Result<Database, ServiceError> {
        match self.databases.get(db_id) {
            Err(ServiceError::NotFound { .. }) if self.databases.is_shared() => {
                self.sync_databases().await;
                self.databases.get(db_id)
            }
            found => found,
        }
    }

    /// Opens what other replicas registered since the last look (off the async workers:
    /// it introspects).
    pub async fn sync_databases(self: &Arc<Self>) {
        if self.databases.is_shared() {
            let state = self.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || state.databases.sync()).await {
                tracing::error!(error = %e, "reading the registrations file panicked");
            }
        }
    }

    pub fn new(
        model_specs: Vec<ModelSpec>,
        databases: DatabaseRegistry,
        pipeline: PipelineSettings,
        limits: Limits,
        adapter_admin: Option<std::path::PathBuf>,
        health: tonic_health::server::HealthReporter,
    ) -> Self {
        let boot_id = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            phase: AtomicU8::new(Phase::Starting as u8),
            models: OnceLock::new(),
            pipeline_runtime: OnceLock::new(),
            model_specs,
            databases,
            database_dir: std::path::PathBuf::new(),
            open_without_token: Vec::new(),
            health,
            pipeline,
            text2sql_queue: RunQueue::new(
                limits.max_concurrent_text2sql,
                limits.max_waiting_text2sql,
            ),
            note_embeddings: crate::note_retrieval::NoteEmbeddings::default(),
            limits,
            metrics: Metrics::default(),
            adapter_admin,
            audit: None,
            tokens: None,
            in_flight: AtomicUsize::new(0),
            idle: Notify::new(),
            cancel_all: CancellationToken::new(),
            next_request: AtomicU64::new(1),
            boot_id,
        }
    }

    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Acquire) {
            0 => Phase::Starting,
            1 => Phase::Serving,
            2 => Phase::Draining,
            _ => Phase::Failed,
        }
    }

    pub fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Release);
    }

    /// Publishes the loaded models and starts admitting requests.
    pub fn models_ready(&self, models: Arc<ModelRegistry>, pipeline: Arc<PipelineRuntime>) {
        let _ = self.models.set(models);
        let _ = self.pipeline_runtime.set(pipeline);
        // Shutdown may have begun while loading; it must not be undone.
        let _ = self.phase.compare_exchange(
            Phase::Starting as u8,
            Phase::Serving as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    pub fn loaded_models(&self) -> Option<&Arc<ModelRegistry>> {
        self.models.get()
    }

    pub fn pipeline_runtime(&self) -> Result<&Arc<PipelineRuntime>, ServiceError> {
        self.pipeline_runtime
            .get()
            .ok_or_else(|| ServiceError::Unavailable {
                reason: "the pipeline is not ready".into(),
            })
    }

    pub fn is_ready(&self) -> bool {
        self.phase() == Phase::Serving
    }

    /// Brings the health entries in step with the phase and the databases.
    pub async fn publish_health(&self) {
        let has_databases = !self.databases.list().is_empty();
        let open = !self.open_without_token.is_empty();
        crate::health::publish(&self.health, self.is_ready(), has_databases, open).await;
    }

    /// Why text-to-SQL has nothing to answer over, when the server has no database; `None`
    /// when it has one.
    pub fn no_databases_note(&self) -> Option<String> {
        self.databases.list().is_empty().then(|| {
            format!(
                "the server has no database: none was found in {} and the configuration names \
                 none; start it with --database-dir (or QUORUM_DATABASE_DIR), set \
                 QUORUM_SPIDER_DIR, list databases under [databases], or call Databases.Register",
                self.database_dir.display()
            )
        })
    }

    /// What `/ready` and the log say when the server is open to the network without a token;
    /// `None` when it is not.
    pub fn open_access_note(&self) -> Option<String> {
        (!self.open_without_token.is_empty()).then(|| {
            let list: Vec<String> = self
                .open_without_token
                .iter()
                .map(ToString::to_string)
                .collect();
            format!(
                "UNAUTHENTICATED: {} serve every database to anyone who reaches them \
                 (allow_unauthenticated); set a token to close them",
                list.join(" and ")
            )
        })
    }

    /// Admits a request, or refuses it with UNAVAILABLE while starting or draining.
    pub fn admit(self: &Arc<Self>) -> Result<(Admission, Arc<ModelRegistry>), ServiceError> {
        let reason = match self.phase() {
            Phase::Serving => None,
            Phase::Starting => Some("the server is starting: models are loading"),
            Phase::Draining => Some("the server is shutting down"),
            Phase::Failed => Some("the server failed to start"),
        };
        if let Some(reason) = reason {
            return Err(ServiceError::Unavailable {
                reason: reason.into(),
            });
        }
        let models = self
            .models
            .get()
            .cloned()
            .ok_or(ServiceError::Unavailable {
                reason: "the models are not loaded".into(),
            })?;
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Ok((
            Admission {
                state: self.clone(),
            },
            models,
        ))
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Resolves when no request is in flight.
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.in_flight() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// A fresh request id: boot time and a sequence number, unique per server.
    pub fn new_request_id(&self) -> String {
        let n = self.next_request.fetch_add(1, Ordering::Relaxed);
        format!("{:x}-{n}", self.boot_id)
    }

    /// All metrics in Prometheus text format.
    pub fn render_metrics(&self) -> String {
        let mut out = String::new();
        self.metrics.render_rpc(&mut out);
        self.metrics.render_http(&mut out);
        self.metrics.render_text2sql(&mut out);
        crate::metrics::render_family(
            &mut out,
            "quorum_build_info",
            "gauge",
            "The running build (value 1): its version and whether it was built with CUDA.",
            &[(
                format!(
                    "version=\"{}\",cuda=\"{}\"",
                    env!("CARGO_PKG_VERSION"),
                    cfg!(feature = "cuda")
                ),
                1.0,
            )],
        );
        crate::metrics::render_family(
            &mut out,
            "quorum_ready",
            "gauge",
            "1 when models are loaded and requests are admitted.",
            &[(String::new(), f64::from(u8::from(self.is_ready())))],
        );
        crate::metrics::render_family(
            &mut out,
            "quorum_unauthenticated_open",
            "gauge",
            "1 when the server listens beyond loopback without a token (allow_unauthenticated).",
            &[(
                String::new(),
                f64::from(u8::from(!self.open_without_token.is_empty())),
            )],
        );
        if let Some(tokens) = &self.tokens {
            crate::metrics::render_family(
                &mut out,
                "quorum_tokens_loaded",
                "gauge",
                "Tokens in force from the tokens file.",
                &[(String::new(), tokens.current().len() as f64)],
            );
            crate::metrics::render_family(
                &mut out,
                "quorum_tokens_file_errors_total",
                "counter",
                "Reads of the tokens file that failed (the tokens read before stayed in force).",
                &[(
                    String::new(),
                    tokens
                        .failed_reloads
                        .load(std::sync::atomic::Ordering::Relaxed) as f64,
                )],
            );
        }
        crate::metrics::render_family(
            &mut out,
            "quorum_databases",
            "gauge",
            "Databases the server answers over (0: text-to-SQL has nothing to answer over).",
            &[(String::new(), self.databases.list().len() as f64)],
        );
        crate::metrics::render_family(
            &mut out,
            "quorum_requests_in_flight",
            "gauge",
            "Admitted requests that have not finished.",
            &[(String::new(), self.in_flight() as f64)],
        );
        crate::metrics::render_family(
            &mut out,
            "quorum_text2sql_running",
            "gauge",
            "Text-to-SQL runs holding a run slot.",
            &[(String::new(), self.text2sql_queue.running() as f64)],
        );
        crate::metrics::render_family(
            &mut out,
            "quorum_text2sql_waiting",
            "gauge",
            "Text-to-SQL requests waiting for a run slot.",
            &[(String::new(), self.text2sql_queue.waiting() as f64)],
        );
        if let Some(models) = self.models.get() {
            models.render_metrics(&mut out);
        }
        if let (Some(runtime), Some(models)) = (self.pipeline_runtime.get(), self.models.get()) {
            self.render_pipeline_metrics(runtime, models, &mut out);
        }
        out
    }

    /// Which model and adapter each pipeline generator and the selector run with, as info
    /// gauges (value 1): a dashboard shows at once when a generator runs its base model.
    fn render_pipeline_metrics(
        &self,
        runtime: &PipelineRuntime,
        models: &ModelRegistry,
        out: &mut String,
    ) {
        let label = crate::metrics::label_value;
        let generators: Vec<(String, f64)> = runtime
            .served_generators()
            .iter()
            .map(|g| {
                (
                    format!(
                        "generator=\"{}\",model=\"{}\",format=\"{}\",adapter=\"{}\"",
                        label(&g.name),
                        label(&g.model),
                        label(&g.format),
                        label(g.adapter.as_deref().unwrap_or(""))
                    ),
                    1.0,
                )
            })
            .collect();
        crate::metrics::render_family(
            out,
            "quorum_pipeline_generator_info",
            "gauge",
            "A pipeline generator with its model, prompt format and adapter (empty: the base model).",
            &generators,
        );
        let selector = runtime.served_selector(models);
        crate::metrics::render_family(
            out,
            "quorum_pipeline_selector_info",
            "gauge",
            "The selection model and adapter; enabled=\"true\" when split votes ask it by default.",
            &[(
                format!(
                    "model=\"{}\",adapter=\"{}\",enabled=\"{}\"",
                    label(selector.model.as_deref().unwrap_or("")),
                    label(selector.adapter.as_deref().unwrap_or("")),
                    selector.enabled
                ),
                1.0,
            )],
        );
    }
}
