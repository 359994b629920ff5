//! Server configuration in two stages: [`RawConfig`] is what the TOML file and the command line
//! say (every field optional, flags win over the file), [`ServerConfig`] is the resolved and
//! validated result the server runs with (model names resolved to files, databases found,
//! limits checked against each other).
//!
//! With no file at all the defaults serve the project's default models over the Spider dev
//! databases, so that `quorum serve` works right after `scripts/fetch-models.sh`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use quorum_models::CpuPath;
use quorum_postgres::PgSource;
use quorum_sql::pipeline::{PipelineKnobs, PromptFormat};
use quorum_weights::Reencode;
use serde::Deserialize;

use crate::model_source::ModelDirs;

/// The TOML file, also filled in by command-line flags.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub server: RawServer,
    #[serde(default)]
    pub limits: RawLimits,
    /// Models in order; the first generator writes the PreSQL and is the default for
    /// `Inference` calls that name no model. Empty means the default models.
    #[serde(default)]
    pub models: Vec<RawModel>,
    #[serde(default)]
    pub databases: RawDatabases,
    #[serde(default)]
    pub pipeline: RawPipeline,
    /// The CPU kernel path; never read from the file: the binary sets it from `--cpu-path` /
    /// `QUORUM_CPU_PATH` before it starts any thread, because candle must be told at the same
    /// time (`quorum_models::align_candle_with`). Unset: the fastest path this CPU supports.
    #[serde(skip)]
    pub cpu_path: Option<CpuPath>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub listen: Option<String>,
    /// Address of the Prometheus endpoint; an empty string disables it.
    pub metrics_listen: Option<String>,
    /// Clients must send `authorization: Bearer <token>` when set.
    pub auth_token: Option<String>,
    /// PEM certificate chain and private key: serve gRPC over TLS (both or neither).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// How long in-flight requests may run after SIGTERM before they are cancelled.
    pub grace_period_secs: Option<f64>,
    /// Device for models that name none: cpu, cuda or cuda:N.
    pub device: Option<String>,
    /// `Inference.LoadAdapter` reads adapters from under this directory only (default: the
    /// shipped adapters' directory, `QUORUM_ADAPTERS_DIR` or `adapters`).
    pub adapter_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub max_prompt_tokens: Option<usize>,
    pub max_new_tokens: Option<u32>,
    pub max_n: Option<u32>,
    pub max_queue: Option<usize>,
    pub max_running: Option<usize>,
    pub max_batched_tokens: Option<usize>,
    pub max_draft_tokens: Option<usize>,
    pub kv_cache_mib: Option<u64>,
    pub request_timeout_secs: Option<f64>,
    pub max_concurrent_text2sql: Option<usize>,
    pub max_waiting_text2sql: Option<usize>,
}

/// A model by role.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// The name requests and pipeline settings use; defaults to `source`.
    pub name: Option<String>,
    /// A path, a hub id (`org/name`, or `org/name:FILE` for one GGUF file of a repository) in
    /// the local hub cache (downloaded first with `--download`), or a default model's short
    /// name.
    pub source: String,
    pub roles: Vec<Role>,
    pub device: Option<String>,
    /// Prompt format when the model writes SQL in the pipeline.
    pub format: Option<PromptFormat>,
    pub max_model_len: Option<usize>,
    /// GGUF tensors re-encoded to Q8_0 at load: `all` (the default on the CPU: K-quants too,
    /// so every layer runs the int8 GEMM; on Qwen2.5-Coder-0.5B, in one back-to-back run, one
    /// stream decoded 1.8x faster and 16 streams 1.2x, see docs/RESULTS.md, for about twice the
    /// weight memory), `slow` (only Q5_0/Q5_1/Q4_1, which candle runs in scalar code; the
    /// default on CUDA, where the int8 GEMM does not run) or `none`.
    pub reencode: Option<String>,
    /// LoRA adapters: name → PEFT directory.
    #[serde(default)]
    pub adapters: BTreeMap<String, PathBuf>,
    /// Weights, activations and KV cache of a decoder: `f32` (the default, the only one on the
    /// CPU), `bf16` or `f16` on a GPU, where each decode step then reads half the bytes.
    pub dtype: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDatabases {
    /// Scanned for `<id>/<id>.sqlite` (Spider's layout) and `<id>.sqlite`.
    pub dir: Option<PathBuf>,
    /// `Databases.Register` accepts files under this directory only; defaults to `dir`.
    pub allowed_dir: Option<PathBuf>,
    /// Explicit databases: id → SQLite file.
    #[serde(default)]
    pub entries: BTreeMap<String, PathBuf>,
    /// PostgreSQL databases: id → connection.
    #[serde(default)]
    pub postgres: BTreeMap<String, RawPostgres>,
    /// Hosts `Databases.Register` may connect to on PostgreSQL; none turns such registration
    /// off (the default: a client must not make the server dial arbitrary hosts).
    #[serde(default)]
    pub postgres_hosts: Vec<String>,
    /// Passwords registrations may name: name → file holding it (a mounted Secret).
    #[serde(default)]
    pub postgres_passwords: BTreeMap<String, PathBuf>,
    /// `Databases.Register` records each registration in this file (JSON lines, created when
    /// missing) and every server configured with the same file answers over it: replicas that
    /// share it (a volume) share their registrations, and a restart keeps them.
    pub registrations_file: Option<PathBuf>,
}

/// A PostgreSQL database in the configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPostgres {
    /// libpq URL or key/value string; put the password in `password_file`, not here.
    pub url: String,
    /// The schema holding the tables (default `public`).
    pub schema: Option<String>,
    /// A file whose first line is the password.
    pub password_file: Option<PathBuf>,
    /// Connections this database may hold at once (default 4).
    pub max_connections: Option<u32>,
}

/// The `[pipeline]` table: every pipeline knob by its name ([`PipelineKnobs`], whose
/// documentation lists them with their defaults and bounds) beside what the server sets up
/// for it ([`RawPipelineSetup`]).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(try_from = "PipelineTable")]
pub struct RawPipeline {
    pub knobs: PipelineKnobs,
    pub setup: RawPipelineSetup,
}

/// What the server sets up for the pipeline: its generators, demonstrations and token budget.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawPipelineSetup {
    /// Tokens each generator may write per answer (default 256).
    pub max_new_tokens: Option<usize>,
    /// Spider-style train file (and its databases) for few-shot demonstrations.
    pub demos_file: Option<PathBuf>,
    pub demos_database_dir: Option<PathBuf>,
    /// Where the embedded demonstration index is cached (default: `demo-index.bin` beside
    /// the models directory); rebuilt when the train file or the embedder changes.
    pub demos_cache: Option<PathBuf>,
    /// How questions are de-semanticized for retrieval: `lexical` (default; n-gram matching)
    /// or `relevance` (seed 1's probe with the embedder model: a pass per question word, 0.56 s
    /// a question on 2 cores, so indexing Spider's 7000 train questions takes about an hour).
    pub masking: Option<quorum_sql::demo_index::MaskingMode>,
    /// The pipeline's generators in order (the first also writes the PreSQL). Empty: one per
    /// model with the `generator` role, in that model's format.
    #[serde(default)]
    pub generators: Vec<RawGenerator>,
    /// One of the selection model's LoRA adapters (`[models.adapters]`), applied when the
    /// pipeline asks it to choose among split votes (the consistency check's judge stays the
    /// base model, whose threshold is calibrated). Default none.
    #[serde(default)]
    pub selector_adapter: Option<String>,
}

/// `[pipeline]` as read: the knobs, the setup, and whatever is neither (refused).
/// Serde cannot refuse unknown fields next to flattened ones, hence the catch-all.
#[derive(Deserialize)]
struct PipelineTable {
    #[serde(flatten)]
    knobs: PipelineKnobs,
    #[serde(flatten)]
    setup: RawPipelineSetup,
    #[serde(flatten)]
    unknown: BTreeMap<String, toml::Value>,
}

impl TryFrom<PipelineTable> for RawPipeline {
    type Error = String;
    fn try_from(table: PipelineTable) -> Result<Self, String> {
        if let Some(key) = table.unknown.keys().next() {
            return Err(format!(
                "unknown pipeline setting `{key}`; the knobs are {} and the other settings \
                 max_new_tokens, demos_file, demos_database_dir, demos_cache, masking, generators",
                PipelineKnobs::NAMES.join(", ")
            ));
        }
        Ok(Self {
            knobs: table.knobs,
            setup: table.setup,
        })
    }
}

/// A generator "with its own preferences" (XiYan): a loaded model, a prompt format and
/// sampling, so that one base model can cast several different votes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGenerator {
    pub name: String,
    /// A model's name from `[[models]]` with the `generator` role.
    pub model: String,
    /// Default: the model's format.
    pub format: Option<PromptFormat>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub seed: Option<u64>,
    /// One of the model's LoRA adapters (`[models.adapters]`), applied to this generator's
    /// calls; default none.
    #[serde(default)]
    pub adapter: Option<String>,
}

/// What a model is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Generator,
    Selector,
    Embedder,
}

impl Role {
    /// The name a configuration file writes it by.
    pub fn name(self) -> &'static str {
        match self {
            Self::Generator => "generator",
            Self::Selector => "selector",
            Self::Embedder => "embedder",
        }
    }
}

/// Command-line and environment overrides (the binary fills these from clap).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub metrics_listen: Option<String>,
    pub auth_token: Option<String>,
    pub device: Option<String>,
    pub database_dir: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub cpu_path: Option<CpuPath>,
}

impl RawConfig {
    pub fn from_toml_str(text: &str) -> anyhow::Result<Self> {
        toml::from_str(text).context("parsing the configuration")
    }

    /// Reads a file; relative paths in it are taken relative to the file's own directory, so
    /// that a configuration means the same files whatever directory the server starts in.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the configuration {}", path.display()))?;
        let mut raw = Self::from_toml_str(&text).with_context(|| path.display().to_string())?;
        let base = crate::model_source::absolute(path);
        raw.rebase_paths(base.parent().unwrap_or(Path::new("/")));
        Ok(raw)
    }

    /// Joins every relative file path of the configuration onto `base`. A model's `source`
    /// is a path only when that path exists there: it may also be a short name or a hub id.
    pub fn rebase_paths(&mut self, base: &Path) {
        let rebase = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        let rebase_set = |p: &mut Option<PathBuf>| {
            if let Some(p) = p {
                rebase(p);
            }
        };
        let server = &mut self.server;
        for p in [
            &mut server.tls_cert,
            &mut server.tls_key,
            &mut server.adapter_dir,
        ] {
            rebase_set(p);
        }
        for model in &mut self.models {
            let local = base.join(&model.source);
            if Path::new(&model.source).is_relative() && local.exists() {
                model.source = local.display().to_string();
            }
            model.adapters.values_mut().for_each(rebase);
        }
        let db = &mut self.databases;
        for p in [&mut db.dir, &mut db.allowed_dir, &mut db.registrations_file] {
            rebase_set(p);
        }
        db.entries.values_mut().for_each(rebase);
        db.postgres_passwords.values_mut().for_each(rebase);
        for pg in db.postgres.values_mut() {
            rebase_set(&mut pg.password_file);
        }
        let setup = &mut self.pipeline.setup;
        for p in [
            &mut setup.demos_file,
            &mut setup.demos_database_dir,
            &mut setup.demos_cache,
        ] {
            rebase_set(p);
        }
    }

    /// Flags and environment win over the file.
    pub fn apply(&mut self, o: Overrides) {
        let server = &mut self.server;
        server.listen = o.listen.or(server.listen.take());
        server.metrics_listen = o.metrics_listen.or(server.metrics_listen.take());
        server.auth_token = o.auth_token.or(server.auth_token.take());
        server.device = o.device.or(server.device.take());
        server.tls_cert = o.tls_cert.or(server.tls_cert.take());
        server.tls_key = o.tls_key.or(server.tls_key.take());
        self.databases.dir = o.database_dir.or(self.databases.dir.take());
        self.cpu_path = o.cpu_path.or(self.cpu_path.take());
    }
}

/// Limits the server enforces per request and per engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_prompt_tokens: usize,
    pub max_new_tokens: u32,
    pub max_n: u32,
    pub max_queue: usize,
    pub max_running: usize,
    pub max_batched_tokens: usize,
    /// Draft tokens a greedy decode checks per step (speculative decoding by prompt lookup;
    /// 0 turns it off). Answers are the same either way.
    pub max_draft_tokens: usize,
    pub kv_cache_bytes: u64,
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
    pub device: String,
    pub format: PromptFormat,
    pub max_model_len: usize,
    pub reencode: Reencode,
    pub adapters: BTreeMap<String, PathBuf>,
    pub dtype: candle_core::DType,
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
}

/// What `Databases.Register` may reach on PostgreSQL.
#[derive(Clone, Default)]
pub struct PostgresPolicy {
    /// Host names or addresses, compared as written in the connection string.
    pub hosts: Vec<String>,
    /// Named passwords, read from their files at start-up.
    pub passwords: BTreeMap<String, String>,
}

impl std::fmt::Debug for PostgresPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresPolicy")
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
    pub auth_token: Option<String>,
    /// PEM certificate chain and key, read at start-up.
    pub tls: Option<TlsPem>,
    pub grace_period: Duration,
    pub limits: Limits,
    pub models: Vec<ModelSpec>,
    pub databases: Vec<DatabaseSpec>,
    /// The directory scanned for SQLite databases (absolute; it may not exist).
    pub database_dir: PathBuf,
    pub allowed_dir: Option<PathBuf>,
    pub postgres_policy: PostgresPolicy,
    pub registrations_file: Option<PathBuf>,
    pub pipeline: PipelineSettings,
    /// Where `Inference.LoadAdapter` may read adapters from.
    pub adapter_dir: PathBuf,
    /// The CPU kernel path every CPU model runs with.
    pub cpu_path: CpuPath,
}

/// The shipped LoRA adapters the default configuration runs, one per prompt format: the
/// format whose default generator runs it, the name the configuration gives it, and its
/// directory under the shipped adapters (`ModelDirs::adapters_dir`). Each has its card in that
/// directory; docs/RESULTS.md has the dev100 figures that made them defaults.
pub const DEFAULT_ADAPTERS: &[(PromptFormat, &str, &str)] = &[
    (PromptFormat::Rep, "rep-s0", "coder-rep-s0"),
    (PromptFormat::MSchema, "mschema-s1", "coder-mschema-s1"),
];

/// The shipped adapter of the default selection model, trained by `quorum train --task
/// selector` to choose among the pipeline's split votes (card in its directory).
pub struct DefaultSelector {
    pub name: &'static str,
    pub dir: &'static str,
    /// The `selector_vote_weight` it serves with: the middle of the weights that did best on
    /// the split votes of the training databases held out of its training (its card).
    pub vote_weight: f32,
}

pub const DEFAULT_SELECTOR: DefaultSelector = DefaultSelector {
    name: "select-s1",
    dir: "coder-selector-s1",
    vote_weight: 1.5,
};

/// The default adapters under `dirs.adapters_dir`, by name. A missing one is an error naming it
/// and every directory searched: without them the default configuration would serve a
/// different, less accurate product than the one documented, and nothing may degrade silently.
fn shipped_default_adapters(dirs: &ModelDirs) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let mut found = BTreeMap::new();
    let generators = DEFAULT_ADAPTERS.iter().map(|&(_, name, dir)| (name, dir));
    for (name, dir) in generators.chain([(DEFAULT_SELECTOR.name, DEFAULT_SELECTOR.dir)]) {
        let path = dirs.adapters_dir.join(dir);
        ensure!(
            path.join("adapter_config.json").is_file(),
            "the default configuration's adapter `{name}` is not at {} (searched for the \
             shipped adapters in: {}); point --adapters-dir (QUORUM_ADAPTERS_DIR) or QUORUM_HOME \
             at the directory holding {dir}/, or give a configuration that names its own models",
            path.display(),
            dirs.adapters_searched
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        found.insert(name.to_owned(), path);
    }
    Ok(found)
}

/// The default models: Qwen2.5-Coder writes SQL and selects among split votes; SmolLM2 is
/// loaded for `Inference` calls and as an optional generator (at 135M it mostly writes SQL that
/// fails, so it is not a default voter); MiniLM embeds questions. `adapters` are the shipped
/// default adapters in place, loaded on Qwen2.5-Coder.
fn default_models(adapters: &BTreeMap<String, PathBuf>) -> Vec<RawModel> {
    let model = |source: &str, roles: Vec<Role>, format: Option<PromptFormat>| RawModel {
        name: None,
        source: source.to_owned(),
        roles,
        device: None,
        format,
        max_model_len: None,
        reencode: None,
        adapters: BTreeMap::new(),
        dtype: None,
    };
    let mut coder = model(
        "qwen2.5-coder-0.5b",
        vec![Role::Generator, Role::Selector],
        Some(PromptFormat::Rep),
    );
    coder.adapters = adapters.clone();
    vec![
        coder,
        model(
            "smollm2-135m",
            vec![Role::Generator],
            Some(PromptFormat::SimpleDdl),
        ),
        model("all-minilm-l6-v2", vec![Role::Embedder], None),
    ]
}

/// The default pipeline's voters: one base model with three prompt formats ("generators with
/// different preferences"), so cross-consistency has diverse votes from the models at hand; a
/// voter runs its format's fine-tuned adapter when that is among `adapters`.
fn default_generators(adapters: &BTreeMap<String, PathBuf>) -> Vec<RawGenerator> {
    let generator = |name: &str, format: PromptFormat| RawGenerator {
        name: name.to_owned(),
        model: "qwen2.5-coder-0.5b".to_owned(),
        format: Some(format),
        temperature: None,
        top_p: None,
        seed: None,
        adapter: DEFAULT_ADAPTERS
            .iter()
            .find(|(f, name, _)| *f == format && adapters.contains_key(*name))
            .map(|(_, name, _)| (*name).to_owned()),
    };
    vec![
        generator("qwen-rep", PromptFormat::Rep),
        generator("qwen-mschema", PromptFormat::MSchema),
        generator("qwen-ddl", PromptFormat::SimpleDdl),
    ]
}

/// With the shipped selector adapter among `adapters`, the default pipeline asks it on split
/// votes, at the vote weight it was validated with (unless the config sets either knob).
/// Without it selection stays off: the untuned base model loses to majority voting.
fn default_selection(pipeline: &mut RawPipeline, adapters: &BTreeMap<String, PathBuf>) {
    if !adapters.contains_key(DEFAULT_SELECTOR.name) {
        return;
    }
    pipeline.setup.selector_adapter = Some(DEFAULT_SELECTOR.name.to_owned());
    pipeline.knobs.selector.get_or_insert(true);
    pipeline
        .knobs
        .selector_vote_weight
        .get_or_insert(DEFAULT_SELECTOR.vote_weight);
}

/// The KV cache of a served model when the config names none, in MiB.
pub const DEFAULT_KV_CACHE_MIB: u64 = 2048;

/// Where Spider's data is when neither a flag nor `QUORUM_SPIDER_DIR` says: beside the checkout
/// this binary was built from (an absolute path, so the working directory does not matter).
pub const DEFAULT_SPIDER_DIR: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/spider");

/// Spider's dev databases beside the checkout, or under `QUORUM_SPIDER_DIR` (read by the
/// binary and passed in: libraries do not read the environment).
pub fn default_database_dir(spider_dir: Option<PathBuf>) -> PathBuf {
    spider_dir
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SPIDER_DIR))
        .join("database")
}

/// Resolves `raw` into a runnable configuration.
pub fn resolve(
    raw: RawConfig,
    dirs: &ModelDirs,
    default_db_dir: &Path,
) -> anyhow::Result<ServerConfig> {
    let limits = resolve_limits(&raw.limits)?;
    let device = raw.server.device.clone().unwrap_or_else(|| "cpu".into());
    let cpu_path = quorum_models::resolve_cpu_path(raw.cpu_path)?;
    let mut raw = raw;
    let raw_models = if raw.models.is_empty() {
        let adapters = shipped_default_adapters(dirs)?;
        for (name, path) in &adapters {
            tracing::info!(adapter = %name, path = %path.display(), "default adapter");
        }
        if raw.pipeline.setup.generators.is_empty() {
            raw.pipeline.setup.generators = default_generators(&adapters);
        }
        if raw.pipeline.setup.selector_adapter.is_none() {
            default_selection(&mut raw.pipeline, &adapters);
        }
        default_models(&adapters)
    } else {
        raw.models.clone()
    };
    let models = resolve_models(raw_models, dirs, &device, cpu_path, &limits)?;
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
        auth_token: server.auth_token.clone().filter(|t| !t.is_empty()),
        tls: read_tls(server.tls_cert.as_deref(), server.tls_key.as_deref())?,
        grace_period: Duration::from_secs_f64(grace),
        limits,
        models,
        databases,
        database_dir: db_dir.clone(),
        allowed_dir,
        postgres_policy: resolve_postgres_policy(&raw.databases)?,
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

fn parse_addr(text: &str, field: &str) -> anyhow::Result<SocketAddr> {
    text.parse()
        .with_context(|| format!("server.{field}: `{text}` is not an address like 127.0.0.1:50051"))
}

fn resolve_limits(raw: &RawLimits) -> anyhow::Result<Limits> {
    // Defaults sized for the 0.5B model on a CPU: a few concurrent sequences of Spider prompts.
    let limits = Limits {
        max_prompt_tokens: raw.max_prompt_tokens.unwrap_or(4096),
        max_new_tokens: raw.max_new_tokens.unwrap_or(1024),
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
        request_timeout: Duration::from_secs_f64(raw.request_timeout_secs.unwrap_or(300.0)),
        max_concurrent_text2sql: raw.max_concurrent_text2sql.unwrap_or(8),
        max_waiting_text2sql: raw.max_waiting_text2sql.unwrap_or(64),
    };
    ensure!(
        limits.max_prompt_tokens > 0,
        "limits.max_prompt_tokens must be > 0"
    );
    ensure!(
        limits.max_new_tokens > 0,
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
        limits.max_concurrent_text2sql > 0,
        "limits.max_concurrent_text2sql must be > 0"
    );
    Ok(limits)
}

fn resolve_models(
    raw: Vec<RawModel>,
    dirs: &ModelDirs,
    device: &str,
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
        let model_device = m.device.unwrap_or_else(|| device.to_owned());
        let reencode = parse_reencode(m.reencode.as_deref(), &model_device, cpu_path)
            .with_context(|| format!("model `{name}`"))?;
        let dtype = parse_model_dtype(m.dtype.as_deref(), &model_device)
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
        let max_model_len = m
            .max_model_len
            .unwrap_or(limits.max_prompt_tokens + limits.max_new_tokens as usize);
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
    Ok(found.into_values().collect())
}

fn resolve_postgres_policy(raw: &RawDatabases) -> anyhow::Result<PostgresPolicy> {
    let mut passwords = BTreeMap::new();
    for (name, file) in &raw.postgres_passwords {
        passwords.insert(
            name.clone(),
            read_password(file).with_context(|| format!("databases.postgres_passwords.{name}"))?,
        );
    }
    Ok(PostgresPolicy {
        hosts: raw.postgres_hosts.clone(),
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

/// A model's `reencode` setting; unset, `all` on a CPU with an int8 GEMM path (Q8_0 is its
/// format) and `slow` elsewhere (on CUDA, or where candle's kernels run every matmul, `all`
/// would only cost memory).
fn parse_reencode(
    value: Option<&str>,
    device: &str,
    cpu_path: CpuPath,
) -> anyhow::Result<Reencode> {
    Ok(match value {
        None if device.trim().eq_ignore_ascii_case("cpu") && cpu_path.has_int8_gemm() => {
            Reencode::All
        }
        None => Reencode::Slow,
        Some("all") => Reencode::All,
        Some("slow") => Reencode::Slow,
        Some("none") => Reencode::None,
        Some(other) => bail!("reencode must be all, slow or none, not `{other}`"),
    })
}

/// A decoder's `dtype`: f32 by default; bf16 or f16 only on a GPU (checked here, so a bad
/// config fails before any model loads).
fn parse_model_dtype(spec: Option<&str>, device: &str) -> anyhow::Result<candle_core::DType> {
    let Some(spec) = spec else {
        return Ok(candle_core::DType::F32);
    };
    let dtype = quorum_models::parse_dtype(spec).context("dtype")?;
    ensure!(
        device.trim() != "cpu" || dtype == candle_core::DType::F32,
        "dtype {spec} needs a GPU device; on the CPU the decoder computes in f32"
    );
    Ok(dtype)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_needs_a_gpu_device() {
        use candle_core::DType;
        assert_eq!(parse_model_dtype(None, "cpu").unwrap(), DType::F32);
        assert_eq!(
            parse_model_dtype(Some("bf16"), "cuda:1").unwrap(),
            DType::BF16
        );
        let err = parse_model_dtype(Some("bf16"), "cpu")
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs a GPU device"), "{err}");
        let err = format!("{:#}", parse_model_dtype(Some("int4"), "cuda").unwrap_err());
        assert!(err.contains("unknown dtype `int4`"), "{err}");
    }

    /// The ConfigMaps of deploy/ are server configs: unknown keys and bad limits fail here
    /// rather than in a crash-looping pod.
    #[test]
    fn deploy_configs_parse() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for file in ["deploy/base/quorum.toml", "deploy/overlays/gpu/quorum.toml"] {
            let raw = RawConfig::from_file(&root.join(file)).expect(file);
            resolve_limits(&raw.limits).expect(file);
            assert!(!raw.models.is_empty(), "{file} names its models");
            assert!(
                raw.server.grace_period_secs.is_some(),
                "{file}: grace period"
            );
            // The adapters it names are the ones the image copies from the checkout.
            for model in &raw.models {
                for path in model.adapters.values() {
                    let shipped = path.strip_prefix("/opt/quorum").unwrap_or_else(|_| {
                        panic!("{file}: {} is not in the image", path.display())
                    });
                    assert!(
                        root.join(shipped).join("adapter_config.json").is_file(),
                        "{file}: {} is not in the checkout",
                        shipped.display()
                    );
                }
            }
        }
    }

    /// The GPU check's server configuration (scripts/gpu/quorum-gpu.toml) parses once its
    /// placeholders are filled, places every model on cuda:0, and names an adapter that ships.
    #[test]
    fn the_gpu_check_config_parses() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(root.join("scripts/gpu/quorum-gpu.toml")).unwrap();
        let text = text
            .replace("@SYN@", "/tmp/synthetic")
            .replace("@REPO@", &root.display().to_string());
        let raw = RawConfig::from_toml_str(&text).unwrap();
        resolve_limits(&raw.limits).unwrap();
        assert_eq!(raw.server.device.as_deref(), Some("cuda:0"));
        assert_eq!(raw.pipeline.setup.generators.len(), 3);
        for model in &raw.models {
            for path in model.adapters.values() {
                assert!(
                    path.join("adapter_config.json").is_file(),
                    "{}",
                    path.display()
                );
            }
        }
    }

    /// The shipped default adapters are in the checkout, and the default configuration puts
    /// each on its format's voter only when it is there.
    #[test]
    fn the_default_voters_run_the_shipped_adapters_when_present() {
        let adapters_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters");
        let shipped = shipped_default_adapters(&dirs_with_adapters(&adapters_dir))
            .expect("the checkout ships the default adapters");
        assert_eq!(
            shipped.len(),
            DEFAULT_ADAPTERS.len() + 1,
            "every default adapter ships, the selector's too"
        );
        let models = default_models(&shipped);
        assert_eq!(models[0].adapters, shipped);
        let generators = default_generators(&shipped);
        let names: Vec<_> = generators.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["qwen-rep", "qwen-mschema", "qwen-ddl"]);
        let adapters: Vec<_> = generators.iter().map(|g| g.adapter.as_deref()).collect();
        assert_eq!(adapters, [Some("rep-s0"), Some("mschema-s1"), None]);
        // None in place: every voter runs the base model.
        let none = BTreeMap::new();
        assert!(default_models(&none)[0].adapters.is_empty());
        assert!(
            default_generators(&none)
                .iter()
                .all(|g| g.adapter.is_none())
        );
        // Only the RE_p adapter in place: the M-Schema voter runs the base model.
        let mut rep = BTreeMap::new();
        rep.insert("rep-s0".to_owned(), adapters_dir.join("coder-rep-s0"));
        let adapters: Vec<_> = default_generators(&rep)
            .iter()
            .map(|g| g.adapter.clone())
            .collect();
        assert_eq!(adapters, [Some("rep-s0".to_owned()), None, None]);
        // Nothing in place: an error that names the adapter and where it was looked for.
        let missing = adapters_dir.join("missing");
        let err = shipped_default_adapters(&dirs_with_adapters(&missing))
            .expect_err("no adapters there")
            .to_string();
        assert!(err.contains("`rep-s0`"), "{err}");
        assert!(err.contains("missing"), "{err}");
        assert!(err.contains("--adapters-dir"), "{err}");
    }

    #[test]
    fn relative_paths_in_a_file_are_taken_from_its_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("model.gguf"), b"x").expect("write");
        let file = dir.path().join("quorum.toml");
        std::fs::write(
            &file,
            r#"
[server]
tls_cert = "certs/cert.pem"
adapter_dir = "/abs/adapters"
[[models]]
source = "model.gguf"
roles = ["generator"]
[models.adapters]
sql = "adapters/sql"
[[models]]
source = "qwen2.5-coder-0.5b"
roles = ["selector"]
[databases]
dir = "dbs"
[databases.entries]
sales = "sales.sqlite"
[pipeline]
demos_file = "train.json"
"#,
        )
        .expect("write");
        let raw = RawConfig::from_file(&file).expect("parses");
        let base = crate::model_source::absolute(dir.path());
        assert_eq!(raw.server.tls_cert, Some(base.join("certs/cert.pem")));
        assert_eq!(raw.server.adapter_dir, Some(PathBuf::from("/abs/adapters")));
        assert_eq!(
            raw.models[0].source,
            base.join("model.gguf").display().to_string()
        );
        assert_eq!(raw.models[0].adapters["sql"], base.join("adapters/sql"));
        // A short name that is no file there stays a name.
        assert_eq!(raw.models[1].source, "qwen2.5-coder-0.5b");
        assert_eq!(raw.databases.dir, Some(base.join("dbs")));
        assert_eq!(raw.databases.entries["sales"], base.join("sales.sqlite"));
        assert_eq!(raw.pipeline.setup.demos_file, Some(base.join("train.json")));
    }

    fn dirs_with_adapters(dir: &Path) -> ModelDirs {
        let mut dirs = ModelDirs::with_adapter_candidates(
            PathBuf::from("/nonexistent/models"),
            quorum_weights::HubCache {
                root: PathBuf::from("/nonexistent/hub"),
            },
            Vec::new(),
        );
        dirs.set_adapters_dir(dir.to_path_buf());
        dirs
    }

    /// The default pipeline asks the shipped selector on split votes at its validated weight;
    /// a config's own knobs win, and without the adapter selection stays off.
    #[test]
    fn the_default_pipeline_selects_with_the_shipped_selector_when_present() {
        let adapters_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters");
        let shipped = shipped_default_adapters(&dirs_with_adapters(&adapters_dir))
            .expect("the checkout ships the default adapters");
        let mut pipeline = RawPipeline::default();
        default_selection(&mut pipeline, &shipped);
        assert_eq!(
            pipeline.setup.selector_adapter.as_deref(),
            Some("select-s1")
        );
        assert_eq!(pipeline.knobs.selector, Some(true));
        assert_eq!(
            pipeline.knobs.selector_vote_weight,
            Some(DEFAULT_SELECTOR.vote_weight)
        );
        let mut own = RawPipeline::default();
        own.knobs.selector = Some(false);
        own.knobs.selector_vote_weight = Some(0.5);
        default_selection(&mut own, &shipped);
        assert_eq!(
            (own.knobs.selector, own.knobs.selector_vote_weight),
            (Some(false), Some(0.5))
        );
        let mut bare = RawPipeline::default();
        default_selection(&mut bare, &BTreeMap::new());
        assert_eq!(bare.setup.selector_adapter, None);
        assert_eq!(bare.knobs.selector, None);
    }

    #[test]
    fn reencode_defaults_by_device_and_rejects_unknown_values() {
        let avx2 = CpuPath::Avx2;
        assert_eq!(parse_reencode(None, "cpu", avx2).unwrap(), Reencode::All);
        assert_eq!(
            parse_reencode(None, "cpu", CpuPath::Candle).unwrap(),
            Reencode::Slow
        );
        assert_eq!(
            parse_reencode(None, "cuda:0", avx2).unwrap(),
            Reencode::Slow
        );
        assert_eq!(
            parse_reencode(Some("none"), "cpu", avx2).unwrap(),
            Reencode::None
        );
        assert_eq!(
            parse_reencode(Some("slow"), "cpu", avx2).unwrap(),
            Reencode::Slow
        );
        let err = parse_reencode(Some("q4"), "cpu", avx2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`q4`"), "{err}");
    }

    #[test]
    fn pipeline_masking_and_generator_adapters_parse() {
        let raw: RawPipeline = toml::from_str(
            r#"
masking = "relevance"
selector_adapter = "pick"
[[generators]]
name = "coder-sql"
model = "coder"
adapter = "sql"
"#,
        )
        .unwrap();
        assert_eq!(
            raw.setup.masking,
            Some(quorum_sql::demo_index::MaskingMode::Relevance)
        );
        assert_eq!(raw.setup.generators[0].adapter.as_deref(), Some("sql"));
        assert_eq!(raw.setup.selector_adapter.as_deref(), Some("pick"));
        assert!(toml::from_str::<RawPipeline>("masking = \"semantic\"").is_err());
    }

    #[test]
    fn pipeline_knobs_parse_beside_the_setup_and_unknown_keys_are_refused() {
        let raw: RawPipeline = toml::from_str(
            r#"
voting = "difficulty_aware"
revision_rounds = 2
revision_temperature = 0.5
round1_format = "m_schema"
max_new_tokens = 64
"#,
        )
        .unwrap();
        assert_eq!(
            raw.knobs.voting,
            Some(quorum_sql::pipeline::VotingMode::DifficultyAware)
        );
        assert_eq!(raw.knobs.revision_rounds, Some(2));
        assert_eq!(raw.knobs.revision_temperature, Some(0.5));
        assert_eq!(raw.knobs.round1_format, Some(PromptFormat::MSchema));
        assert_eq!(raw.setup.max_new_tokens, Some(64));
        let err = toml::from_str::<RawPipeline>("revison_rounds = 2")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown pipeline setting `revison_rounds`"),
            "{err}"
        );
        assert!(toml::from_str::<RawPipeline>("voting = \"loud\"").is_err());
        // A whole number where a real one is meant reads as that number.
        let whole: RawPipeline = toml::from_str("revision_temperature = 1").unwrap();
        assert_eq!(whole.knobs.revision_temperature, Some(1.0));
    }
}
