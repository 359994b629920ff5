//! The resolved configuration ([`ServerConfig`]): model names resolved to files, databases
//! found, limits checked against each other, defaults filled in from [`super::shipped`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use quorum_models::{CpuPath, DeviceSpec};
use quorum_mysql::MySqlSource;
use quorum_postgres::PgSource;
use quorum_sql::pipeline::PromptFormat;
use quorum_weights::Reencode;

use super::file::{RawConfig, RawDatabases, RawLimits, RawModel, RawPipeline, Role};
use super::shipped::{
    profile_generators, profile_models, profile_revision, profile_round1, profile_selection,
    shipped_adapters,
};
use crate::config::cors::CorsPolicy;
use crate::model_source::ModelDirs;

/// Limits the server enforces per request and per engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_prompt_tokens: usize,
    /// The most tokens one request may generate, when the operator caps it; unset, a request
    /// may generate up to the model's context (what `/v1/models` advertises), as OpenAI's
    /// `max_tokens` allows.
    pub max_new_tokens: Option<u32>,
    pub max_n: u32,
    pub max_queue: usize,
    pub max_running: usize,
    pub max_batched_tokens: usize,
    /// Draft tokens a greedy decode checks per step (speculative decoding by prompt lookup;
    /// 0 turns it off). Answers are the same either way.
    pub max_draft_tokens: usize,
    pub kv_cache_bytes: u64,
    /// See `RawLimits::pinned_prefix_share`.
    pub pinned_prefix_share: f64,
    pub request_timeout: Duration,
    /// Text-to-SQL runs each hold a blocking thread and several engine sequences: at most
    /// this many run at once.
    pub max_concurrent_text2sql: usize,
    /// Text-to-SQL requests that may wait for a run slot (in arrival order, each until its
    /// deadline); beyond them callers get RESOURCE_EXHAUSTED.
    pub max_waiting_text2sql: usize,
}

/// A resolved model.
#[derive(Debug, Clone)]
pub struct ModelSpec {
    pub name: String,
    pub source: String,
    pub path: PathBuf,
    pub roles: Vec<Role>,
    pub device: DeviceSpec,
    pub format: PromptFormat,
    pub max_model_len: usize,
    pub reencode: Reencode,
    pub adapters: BTreeMap<String, PathBuf>,
    pub dtype: candle_core::DType,
    /// See `RawModel::kv_dtype`: f32 or f16, checked to be set only for a model on the CPU.
    pub kv_dtype: candle_core::DType,
    /// See `RawModel::gpu_memory_fraction`; checked to be in (0, 1] on a CUDA device.
    pub gpu_memory_fraction: Option<f64>,
    /// See `RawModel::batch_invariant`.
    pub batch_invariant: bool,
}

impl ModelSpec {
    pub fn has_role(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }
}

/// A database found at startup.
#[derive(Debug, Clone)]
pub struct DatabaseSpec {
    pub db_id: String,
    pub location: DatabaseLocation,
    pub from_scan: bool,
}

/// Where a database's rows are.
#[derive(Debug, Clone)]
pub enum DatabaseLocation {
    Sqlite(PathBuf),
    Postgres(PgSource),
    MySql(MySqlSource),
    /// Files read through DuckDB.
    DuckDb(DuckDbFiles),
}

/// Files to serve through DuckDB, as configured. The backend's own source type (and its
/// defaults) lives in the optional `quorum-duckdb` crate, so the configuration keeps what it
/// needs to make one: unset limits take the backend's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuckDbFiles {
    pub path: PathBuf,
    pub max_memory_mib: Option<u64>,
    pub threads: Option<u32>,
}

/// What `Databases.Register` may reach on a database server (PostgreSQL, MySQL).
#[derive(Clone, Default)]
pub struct ServerPolicy {
    /// Host names or addresses, compared as written in the connection string.
    pub hosts: Vec<String>,
    /// Named passwords, read from their files at start-up.
    pub passwords: BTreeMap<String, String>,
}

impl std::fmt::Debug for ServerPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerPolicy")
            .field("hosts", &self.hosts)
            .field("passwords", &self.passwords.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The first line of a password file; the error names the file, never its content.
pub fn read_password(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the password file {}", path.display()))?;
    Ok(text.lines().next().unwrap_or("").to_owned())
}

/// The pipeline settings, before per-request overrides.
#[derive(Debug, Clone)]
pub struct PipelineSettings {
    pub raw: RawPipeline,
    pub demos: Option<(PathBuf, PathBuf)>,
    pub demos_cache: PathBuf,
}

/// The server's TLS identity.
#[derive(Clone)]
pub struct TlsPem {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

impl std::fmt::Debug for TlsPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.write_str("TlsPem { .. }")
    }
}

fn read_tls(cert: Option<&Path>, key: Option<&Path>) -> anyhow::Result<Option<TlsPem>> {
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => {
            let read = |path: &Path, what: &str| {
                std::fs::read(path)
                    .with_context(|| format!("server.{what}: reading {}", path.display()))
            };
            let pem = TlsPem {
                cert: read(cert, "tls_cert")?,
                key: read(key, "tls_key")?,
            };
            ensure!(
                pem.cert.starts_with(b"-----BEGIN"),
                "server.tls_cert: {} is not a PEM file",
                cert.display()
            );
            ensure!(
                pem.key.starts_with(b"-----BEGIN"),
                "server.tls_key: {} is not a PEM file",
                key.display()
            );
            Ok(Some(pem))
        }
        _ => bail!("server.tls_cert and server.tls_key go together"),
    }
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub metrics_listen: Option<SocketAddr>,
    /// `/metrics`, `/live` and `/ready` alone, for scrapers and probes.
    pub scrape_listen: Option<SocketAddr>,
    /// Which other origins' pages may call the HTTP API.
    pub cors: CorsPolicy,
    pub auth_token: Option<String>,
    /// The tokens file, when tokens are kept in one.
    pub tokens_file: Option<PathBuf>,
    pub audit: Option<AuditSpec>,
    /// Set when the server listens beyond loopback without a token because the configuration
    /// says so (`allow_unauthenticated`): the addresses that are open, for the log, `/ready`
    /// and the metrics.
    pub open_without_token: Vec<SocketAddr>,
    /// PEM certificate chain and key, read at start-up.
    pub tls: Option<TlsPem>,
    pub grace_period: Duration,
    pub limits: Limits,
    pub models: Vec<ModelSpec>,
    pub databases: Vec<DatabaseSpec>,
    /// The directory scanned for SQLite databases (absolute; it may not exist).
    pub database_dir: PathBuf,
    pub allowed_dir: Option<PathBuf>,
    pub postgres_policy: ServerPolicy,
    pub mysql_policy: ServerPolicy,
    pub registrations_file: Option<PathBuf>,
    pub pipeline: PipelineSettings,
    /// Where `Inference.LoadAdapter` may read adapters from.
    pub adapter_dir: PathBuf,
    /// The CPU kernel path every CPU model runs with.
    pub cpu_path: CpuPath,
}

/// Where the audit trail goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditSpec {
    /// `None` is stdout.
    pub file: Option<PathBuf>,
    pub max_bytes: u64,
    pub keep: u32,
}

fn resolve_audit(server: &super::file::RawServer) -> anyhow::Result<Option<AuditSpec>> {
    let Some(path) = &server.audit_log else {
        ensure!(
            server.audit_max_mib.is_none() && server.audit_keep.is_none(),
            "server.audit_max_mib and server.audit_keep need server.audit_log"
        );
        return Ok(None);
    };
    let max_mib = server.audit_max_mib.unwrap_or(64);
    let keep = server.audit_keep.unwrap_or(4);
    ensure!(max_mib >= 1, "server.audit_max_mib must be at least 1");
    ensure!(keep >= 1, "server.audit_keep must be at least 1");
    Ok(Some(AuditSpec {
        file: (path.as_path() != Path::new(super::file::AUDIT_TO_STDOUT)).then(|| path.clone()),
        max_bytes: max_mib << 20,
        keep,
    }))
}

/// The KV cache of a served model when the config names none, in MiB.
pub const DEFAULT_KV_CACHE_MIB: u64 = 2048;

/// Resolves `raw` into a runnable configuration.
pub fn resolve(
    raw: RawConfig,
    dirs: &ModelDirs,
    default_db_dir: &Path,
) -> anyhow::Result<ServerConfig> {
    let limits = resolve_limits(&raw.limits)?;
    let device = raw.server.device.unwrap_or_default();
    let cpu_path = quorum_models::resolve_cpu_path(raw.cpu_path)?;
    let mut raw = raw;
    let raw_models = if raw.models.is_empty() {
        let profile = raw.server.profile.unwrap_or_default();
        tracing::info!(%profile, "shipped profile");
        let adapters = shipped_adapters(profile, dirs)?;
        for (name, path) in &adapters {
            tracing::info!(adapter = %name, path = %path.display(), "shipped adapter");
        }
        if raw.pipeline.setup.generators.is_empty() {
            raw.pipeline.setup.generators = profile_generators(profile, &adapters);
            profile_round1(&mut raw.pipeline);
            profile_revision(profile, &mut raw.pipeline);
        }
        if raw.pipeline.setup.selector_adapter.is_none() {
            profile_selection(profile, &mut raw.pipeline, &adapters);
        }
        profile_models(profile, &adapters)
    } else {
        if let Some(profile) = raw.server.profile {
            bail!(
                "the profile `{profile}` is a shipped set of models, and this configuration \
                 lists its own ([[models]]): drop one of the two"
            );
        }
        raw.models.clone()
    };
    let models = resolve_models(raw_models, dirs, device, cpu_path, &limits)?;
    let db_dir =
        crate::model_source::absolute(raw.databases.dir.as_deref().unwrap_or(default_db_dir));
    let databases = resolve_databases(&raw.databases, &db_dir)?;
    let allowed_dir = raw
        .databases
        .allowed_dir
        .clone()
        .or_else(|| db_dir.is_dir().then_some(db_dir.clone()));
    let server = &raw.server;
    let listen = parse_addr(
        server.listen.as_deref().unwrap_or("127.0.0.1:50051"),
        "listen",
    )?;
    let metrics_listen = match server.metrics_listen.as_deref().unwrap_or("127.0.0.1:9464") {
        "" => None,
        addr => Some(parse_addr(addr, "metrics_listen")?),
    };
    let auth_token = server.auth_token.clone().filter(|t| !t.is_empty());
    let tokens_file = server.tokens_file.clone();
    let open_without_token = check_exposure(
        auth_token.is_some() || tokens_file.is_some(),
        server.allow_unauthenticated.unwrap_or(false),
        // The scrape port serves no API: it may face the network without a token.
        [Some(listen), metrics_listen].into_iter().flatten(),
    )?;
    let grace = server.grace_period_secs.unwrap_or(30.0);
    ensure!(
        grace.is_finite() && grace >= 0.0,
        "server.grace_period_secs must be >= 0"
    );
    // The default setup retrieves demonstrations from Spider's train pool when it is there.
    let default_train = db_dir.parent().map(|spider| spider.join("train.json"));
    if raw.models.is_empty()
        && raw.pipeline.setup.demos_file.is_none()
        && let Some(train) = default_train.filter(|t| t.is_file())
    {
        raw.pipeline.setup.demos_file = Some(train);
        raw.pipeline.setup.demos_database_dir = Some(db_dir.clone());
    }
    let demos = match (
        &raw.pipeline.setup.demos_file,
        &raw.pipeline.setup.demos_database_dir,
    ) {
        (Some(file), Some(dir)) => Some((file.clone(), dir.clone())),
        (None, None) => None,
        _ => bail!("pipeline.demos_file and pipeline.demos_database_dir go together"),
    };
    Ok(ServerConfig {
        listen,
        metrics_listen,
        scrape_listen: match server.scrape_listen.as_deref() {
            None | Some("") => None,
            Some(addr) => Some(parse_addr(addr, "scrape_listen")?),
        },
        cors: CorsPolicy::parse(server.cors_origins.as_deref())?,
        auth_token,
        tokens_file,
        audit: resolve_audit(server)?,
        open_without_token,
        tls: read_tls(server.tls_cert.as_deref(), server.tls_key.as_deref())?,
        grace_period: Duration::from_secs_f64(grace),
        limits,
        models,
        databases,
        database_dir: db_dir.clone(),
        allowed_dir,
        postgres_policy: resolve_policy(
            &raw.databases.postgres_hosts,
            &raw.databases.postgres_passwords,
            "databases.postgres_passwords",
        )?,
        mysql_policy: resolve_policy(
            &raw.databases.mysql_hosts,
            &raw.databases.mysql_passwords,
            "databases.mysql_passwords",
        )?,
        registrations_file: raw.databases.registrations_file.clone(),
        adapter_dir: server
            .adapter_dir
            .clone()
            .unwrap_or_else(|| dirs.adapters_dir.clone()),
        pipeline: PipelineSettings {
            demos_cache: raw
                .pipeline
                .setup
                .demos_cache
                .clone()
                .unwrap_or_else(|| dirs.models_dir.with_file_name("demo-index.bin")),
            raw: raw.pipeline,
            demos,
        },
        cpu_path,
    })
}

/// Fails closed: an address other than loopback serves the API (gRPC, and the HTTP port's
/// `/v1/sql` and OpenAI routes) to the network, so without a token it is refused unless the
/// configuration allows it explicitly. Returns the addresses left open on purpose.
pub(crate) fn check_exposure(
    has_token: bool,
    allow_unauthenticated: bool,
    addresses: impl IntoIterator<Item = SocketAddr>,
) -> anyhow::Result<Vec<SocketAddr>> {
    if has_token {
        return Ok(Vec::new());
    }
    let exposed: Vec<SocketAddr> = addresses
        .into_iter()
        .filter(|a| !a.ip().is_loopback())
        .collect();
    if exposed.is_empty() || allow_unauthenticated {
        return Ok(exposed);
    }
    let list: Vec<String> = exposed.iter().map(ToString::to_string).collect();
    bail!(
        "refusing to serve {} without a token: anyone who reaches the port could read every \
         database. Set a token (--auth-token, QUORUM_AUTH_TOKEN or server.auth_token), or tokens \
         with scopes (--tokens-file or server.tokens_file; `quorum token new` writes an entry); \
         clients send `authorization: Bearer <token>`. Or listen on 127.0.0.1, or pass \
         --allow-unauthenticated (server.allow_unauthenticated = true) to serve openly on \
         purpose",
        list.join(" and ")
    )
}

fn parse_addr(text: &str, field: &str) -> anyhow::Result<SocketAddr> {
    text.parse()
        .with_context(|| format!("server.{field}: `{text}` is not an address like 127.0.0.1:50051"))
}

/// The generation room a model's context leaves above the longest prompt, when neither the
/// model's `max_model_len` nor `limits.max_new_tokens` says.
const DEFAULT_GENERATION_ROOM: u32 = 1024;

pub(super) fn resolve_limits(raw: &RawLimits) -> anyhow::Result<Limits> {
    // Defaults sized for the 0.5B model on a CPU: a few concurrent sequences of Spider prompts.
    let limits = Limits {
        max_prompt_tokens: raw.max_prompt_tokens.unwrap_or(4096),
        max_new_tokens: raw.max_new_tokens,
        max_n: raw.max_n.unwrap_or(8),
        max_queue: raw.max_queue.unwrap_or(64),
        max_running: raw.max_running.unwrap_or(16),
        max_batched_tokens: raw.max_batched_tokens.unwrap_or(2048),
        max_draft_tokens: raw
            .max_draft_tokens
            .unwrap_or(quorum_engine::DEFAULT_MAX_DRAFT_TOKENS),
        // Sized by arithmetic, not measured: a text-to-SQL run of the 0.5B model holds several
        // sequences of a few thousand tokens (24 KiB each in f32), so 512 MiB (about 21k
        // tokens) fits only two or three runs at once before the scheduler must preempt.
        kv_cache_bytes: raw.kv_cache_mib.unwrap_or(DEFAULT_KV_CACHE_MIB) << 20,
        pinned_prefix_share: raw
            .pinned_prefix_share
            .unwrap_or(quorum_engine::DEFAULT_PINNED_PREFIX_SHARE),
        request_timeout: Duration::from_secs_f64(raw.request_timeout_secs.unwrap_or(300.0)),
        max_concurrent_text2sql: raw.max_concurrent_text2sql.unwrap_or(8),
        max_waiting_text2sql: raw.max_waiting_text2sql.unwrap_or(64),
    };
    ensure!(
        limits.max_prompt_tokens > 0,
        "limits.max_prompt_tokens must be > 0"
    );
    ensure!(
        limits.max_new_tokens != Some(0),
        "limits.max_new_tokens must be > 0"
    );
    ensure!(
        (1..=quorum_engine::MAX_N).contains(&limits.max_n),
        "limits.max_n must be in 1..={}",
        quorum_engine::MAX_N
    );
    ensure!(limits.max_running > 0, "limits.max_running must be > 0");
    ensure!(
        limits.max_batched_tokens > 0,
        "limits.max_batched_tokens must be > 0"
    );
    ensure!(limits.kv_cache_bytes > 0, "limits.kv_cache_mib must be > 0");
    ensure!(
        (0.0..=1.0).contains(&limits.pinned_prefix_share),
        "limits.pinned_prefix_share must be between 0 and 1, got {}",
        limits.pinned_prefix_share
    );
    ensure!(
        limits.max_concurrent_text2sql > 0,
        "limits.max_concurrent_text2sql must be > 0"
    );
    Ok(limits)
}

fn resolve_models(
    raw: Vec<RawModel>,
    dirs: &ModelDirs,
    device: DeviceSpec,
    cpu_path: CpuPath,
    limits: &Limits,
) -> anyhow::Result<Vec<ModelSpec>> {
    let mut out: Vec<ModelSpec> = Vec::with_capacity(raw.len());
    for m in raw {
        let name = m.name.clone().unwrap_or_else(|| m.source.clone());
        ensure!(
            !out.iter().any(|o| o.name == name),
            "two models are named `{name}`"
        );
        ensure!(!m.roles.is_empty(), "model `{name}` has no roles");
        let embedder = m.roles.contains(&Role::Embedder);
        ensure!(
            !(embedder && m.roles.len() > 1),
            "model `{name}`: an embedder cannot also be a generator or selector"
        );
        let path = crate::model_source::absolute(
            &dirs
                .resolve(&m.source)
                .with_context(|| format!("model `{name}`"))?,
        );
        let model_device = m.device.unwrap_or(device);
        let reencode = parse_reencode(m.reencode.as_deref(), model_device, cpu_path)
            .with_context(|| format!("model `{name}`"))?;
        let dtype = parse_model_dtype(m.dtype.as_deref(), model_device)
            .with_context(|| format!("model `{name}`"))?;
        let kv_dtype = parse_kv_dtype(m.kv_dtype.as_deref(), model_device)
            .with_context(|| format!("model `{name}`"))?;
        check_gpu_memory_fraction(m.gpu_memory_fraction, model_device)
            .with_context(|| format!("model `{name}`"))?;
        let mut adapters = BTreeMap::new();
        for (adapter, dir) in &m.adapters {
            let dir = crate::model_source::absolute(dir);
            ensure!(
                dir.exists(),
                "model `{name}`: adapter `{adapter}` is missing at {}",
                dir.display()
            );
            adapters.insert(adapter.clone(), dir);
        }
        // The prompt limit plus the generation budget must fit the context.
        let max_model_len = m.max_model_len.unwrap_or(
            limits.max_prompt_tokens
                + limits.max_new_tokens.unwrap_or(DEFAULT_GENERATION_ROOM) as usize,
        );
        out.push(ModelSpec {
            name,
            source: m.source,
            path,
            roles: m.roles,
            device: model_device,
            format: m.format.unwrap_or(PromptFormat::SimpleDdl),
            max_model_len,
            reencode,
            adapters,
            dtype,
            kv_dtype,
            gpu_memory_fraction: m.gpu_memory_fraction,
            batch_invariant: m.batch_invariant.unwrap_or(false),
        });
    }
    ensure!(
        out.iter().any(|m| m.has_role(Role::Generator)),
        "at least one model needs the `generator` role"
    );
    ensure!(
        out.iter().filter(|m| m.has_role(Role::Selector)).count() <= 1,
        "at most one model can be the selector"
    );
    ensure!(
        out.iter().filter(|m| m.has_role(Role::Embedder)).count() <= 1,
        "at most one model can be the embedder"
    );
    Ok(out)
}

fn resolve_databases(raw: &RawDatabases, dir: &Path) -> anyhow::Result<Vec<DatabaseSpec>> {
    let mut found: BTreeMap<String, DatabaseSpec> = BTreeMap::new();
    // A missing scan directory is not an error: the default points at Spider's data, which a
    // deployment without it simply does not serve.
    if dir.is_dir() {
        for spec in scan_directory(dir)? {
            found.insert(spec.db_id.clone(), spec);
        }
    }
    for (db_id, path) in &raw.entries {
        crate::db_id::validate_db_id(db_id)
            .map_err(|reason| anyhow::anyhow!("databases.entries.{db_id}: {reason}"))?;
        ensure!(
            path.is_file(),
            "databases.entries.{db_id}: no file at {}",
            path.display()
        );
        found.insert(
            db_id.clone(),
            DatabaseSpec {
                db_id: db_id.clone(),
                location: DatabaseLocation::Sqlite(path.clone()),
                from_scan: false,
            },
        );
    }
    for (db_id, pg) in &raw.postgres {
        crate::db_id::validate_db_id(db_id)
            .map_err(|reason| anyhow::anyhow!("databases.postgres.{db_id}: {reason}"))?;
        let mut source = PgSource::new(pg.url.clone(), pg.schema.as_deref().unwrap_or("public"));
        if let Some(file) = &pg.password_file {
            source.password =
                Some(read_password(file).with_context(|| format!("databases.postgres.{db_id}"))?);
        }
        if let Some(n) = pg.max_connections {
            ensure!(
                n > 0,
                "databases.postgres.{db_id}: max_connections must be at least 1"
            );
            source.max_connections = n;
        }
        source
            .location()
            .map_err(|e| anyhow::anyhow!("databases.postgres.{db_id}: {e}"))?;
        found.insert(
            db_id.clone(),
            DatabaseSpec {
                db_id: db_id.clone(),
                location: DatabaseLocation::Postgres(source),
                from_scan: false,
            },
        );
    }
    for (db_id, my) in &raw.mysql {
        crate::db_id::validate_db_id(db_id)
            .map_err(|reason| anyhow::anyhow!("databases.mysql.{db_id}: {reason}"))?;
        let mut source = MySqlSource::new(my.url.clone(), my.database.clone());
        if let Some(file) = &my.password_file {
            source.password =
                Some(read_password(file).with_context(|| format!("databases.mysql.{db_id}"))?);
        }
        if let Some(n) = my.max_connections {
            ensure!(
                n > 0,
                "databases.mysql.{db_id}: max_connections must be at least 1"
            );
            source.max_connections = n;
        }
        source
            .location()
            .map_err(|e| anyhow::anyhow!("databases.mysql.{db_id}: {e}"))?;
        found.insert(
            db_id.clone(),
            DatabaseSpec {
                db_id: db_id.clone(),
                location: DatabaseLocation::MySql(source),
                from_scan: false,
            },
        );
    }
    for (db_id, files) in &raw.duckdb {
        crate::db_id::validate_db_id(db_id)
            .map_err(|reason| anyhow::anyhow!("databases.duckdb.{db_id}: {reason}"))?;
        ensure!(
            cfg!(feature = "duckdb"),
            "databases.duckdb.{db_id}: this build of quorum reads no files through DuckDB \
             (build it with `--features duckdb`)"
        );
        ensure!(
            files.path.exists(),
            "databases.duckdb.{db_id}: nothing at {}",
            files.path.display()
        );
        ensure!(
            files.threads != Some(0) && files.max_memory_mib.is_none_or(|m| m >= 16),
            "databases.duckdb.{db_id}: threads must be at least 1 and max_memory_mib at least 16"
        );
        found.insert(
            db_id.clone(),
            DatabaseSpec {
                db_id: db_id.clone(),
                location: DatabaseLocation::DuckDb(DuckDbFiles {
                    path: files.path.clone(),
                    max_memory_mib: files.max_memory_mib,
                    threads: files.threads,
                }),
                from_scan: false,
            },
        );
    }
    Ok(found.into_values().collect())
}

fn resolve_policy(
    hosts: &[String],
    password_files: &BTreeMap<String, PathBuf>,
    table: &str,
) -> anyhow::Result<ServerPolicy> {
    let mut passwords = BTreeMap::new();
    for (name, file) in password_files {
        passwords.insert(
            name.clone(),
            read_password(file).with_context(|| format!("{table}.{name}"))?,
        );
    }
    Ok(ServerPolicy {
        hosts: hosts.to_vec(),
        passwords,
    })
}

/// Finds `<id>/<id>.sqlite` and `<id>.sqlite` in `dir`, skipping names that are not valid ids.
pub fn scan_directory(dir: &Path) -> anyhow::Result<Vec<DatabaseSpec>> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("scanning {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        let (db_id, file) = if path.is_dir() {
            let Some(id) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            (id.to_owned(), path.join(format!("{id}.sqlite")))
        } else if path.extension().is_some_and(|e| e == "sqlite") {
            let Some(id) = path.file_stem().and_then(|n| n.to_str()) else {
                continue;
            };
            (id.to_owned(), path.clone())
        } else {
            continue;
        };
        if file.is_file() && crate::db_id::validate_db_id(&db_id).is_ok() {
            out.push(DatabaseSpec {
                db_id,
                location: DatabaseLocation::Sqlite(file),
                from_scan: true,
            });
        }
    }
    out.sort_by(|a, b| a.db_id.cmp(&b.db_id));
    Ok(out)
}

/// A model's `reencode` setting; unset, [`Reencode::default_for`] the model's device and this
/// CPU's path.
pub(super) fn parse_reencode(
    value: Option<&str>,
    device: DeviceSpec,
    cpu_path: CpuPath,
) -> anyhow::Result<Reencode> {
    Ok(match value {
        None => Reencode::default_for(device.is_cpu() && cpu_path.has_int8_gemm()),
        Some(value) => value.parse().map_err(anyhow::Error::msg)?,
    })
}

/// `gpu_memory_fraction` is a share in (0, 1] and only sizes a CUDA device's cache.
pub(super) fn check_gpu_memory_fraction(
    fraction: Option<f64>,
    device: DeviceSpec,
) -> anyhow::Result<()> {
    let Some(f) = fraction else {
        return Ok(());
    };
    quorum_engine::device_memory::check_fraction(f)?;
    ensure!(
        matches!(device, DeviceSpec::Cuda(_)),
        "gpu_memory_fraction sizes the KV cache of a CUDA device; this model is on {device} \
         (use limits.kv_cache_mib)"
    );
    Ok(())
}

/// A decoder's `kv_dtype`: f32 by default, or f16; only for a model on the CPU, whose KV cache
/// is in host memory (a GPU's cache holds the model's `dtype`).
pub(super) fn parse_kv_dtype(
    spec: Option<&str>,
    device: DeviceSpec,
) -> anyhow::Result<candle_core::DType> {
    let Some(spec) = spec else {
        return Ok(candle_core::DType::F32);
    };
    ensure!(
        device.is_cpu(),
        "kv_dtype sets what the CPU's KV cache holds; this model is on {device}, whose cache \
         holds the model's dtype (set `dtype`)"
    );
    match spec {
        "f32" => Ok(candle_core::DType::F32),
        "f16" => Ok(candle_core::DType::F16),
        other => anyhow::bail!("kv_dtype `{other}`: the CPU's KV cache holds `f32` or `f16`"),
    }
}

/// A decoder's `dtype`: f32 by default; bf16 or f16 only on a GPU (checked here, so a bad
/// config fails before any model loads).
pub(super) fn parse_model_dtype(
    spec: Option<&str>,
    device: DeviceSpec,
) -> anyhow::Result<candle_core::DType> {
    let Some(spec) = spec else {
        return Ok(candle_core::DType::F32);
    };
    let dtype = quorum_models::parse_dtype(spec).context("dtype")?;
    quorum_models::check_dtype(device.is_cpu(), dtype)?;
    Ok(dtype)
}
