//! The configuration file's format ([`RawConfig`]) and the command line's overrides: every
//! field optional, read as written, with unknown keys refused. [`super::resolved`] turns it
//! into what the server runs with.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use quorum_models::{CpuPath, DeviceSpec};
use quorum_sql::pipeline::{PipelineKnobs, PromptFormat};
use serde::{Deserialize, Serialize};

use super::profile::Profile;

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

/// The `audit_log` that means stdout.
pub const AUDIT_TO_STDOUT: &str = "-";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub listen: Option<String>,
    /// Address of the HTTP face (the OpenAI-compatible API, `/v1/sql`, the playground) and of
    /// `/metrics`; an empty string disables it.
    pub metrics_listen: Option<String>,
    /// An address that serves only `/metrics`, `/live` and `/ready`: for Prometheus and probes,
    /// without the API (unset: none).
    pub scrape_listen: Option<String>,
    /// Web pages on other origins that may call the HTTP API from a browser (CORS): whole
    /// origins like `https://app.example.com`, or `["*"]` for any. Unset: same-origin only.
    pub cors_origins: Option<Vec<String>>,
    /// Clients must send `authorization: Bearer <token>` when set.
    pub auth_token: Option<String>,
    /// Several tokens, each with a name, the databases it reaches, its rights and quotas,
    /// stored hashed (`quorum token new` writes an entry); reloaded when it changes.
    pub tokens_file: Option<PathBuf>,
    /// The audit trail: one JSON line per request, to this file (rotated by size) or to
    /// stdout (`-`). Unset: no trail.
    pub audit_log: Option<PathBuf>,
    /// Size at which the audit file is rotated, in MiB (default 64).
    pub audit_max_mib: Option<u64>,
    /// Rotated audit files kept (default 4).
    pub audit_keep: Option<u32>,
    /// Serve without a token on an address other than loopback, on purpose. Without it such a
    /// configuration is refused at start-up: it would serve every database to anyone who
    /// reaches the port.
    pub allow_unauthenticated: Option<bool>,
    /// PEM certificate chain and private key: serve gRPC over TLS (both or neither).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// How long in-flight requests may run after SIGTERM before they are cancelled.
    pub grace_period_secs: Option<f64>,
    /// Device for models that name none: cpu, cuda or cuda:N.
    pub device: Option<DeviceSpec>,
    /// `Inference.LoadAdapter` reads adapters from under this directory only (default: the
    /// shipped adapters' directory, `QUORUM_ADAPTERS_DIR` or `adapters`).
    pub adapter_dir: Option<PathBuf>,
    /// The shipped configuration to serve when `[[models]]` lists none (default: `default`);
    /// naming one beside models of the configuration's own is an error.
    pub profile: Option<Profile>,
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
    /// The share of each model's KV cache that databases' schema prompts, warmed at
    /// registration, may keep resident (0 to 1; 0 keeps none resident).
    pub pinned_prefix_share: Option<f64>,
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
    pub device: Option<DeviceSpec>,
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
    /// What a decoder's KV cache holds on the CPU: `f32` (the default) or `f16`, at half the
    /// bytes every decode step reads of it (docs/RESULTS.md). On a GPU the cache holds the
    /// model's `dtype`.
    pub kv_dtype: Option<String>,
    /// On a CUDA device: the KV cache takes this share (0 to 1] of the device memory free once
    /// the model is loaded, less a reserve for activations, instead of `limits.kv_cache_mib`.
    /// Models sharing a device load in order, each taking its share of what is left.
    pub gpu_memory_fraction: Option<f64>,
    /// A request's tokens do not change with what else is batched beside it. Always so on the
    /// CPU; on a CUDA device it is a mode of the engine (fixed-order matmuls, attention row by
    /// row) that costs speed and needs dense weights (docs/RESULTS.md). Default false.
    pub batch_invariant: Option<bool>,
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
    /// MySQL and MariaDB databases: id → connection.
    #[serde(default)]
    pub mysql: BTreeMap<String, RawMySql>,
    /// CSV, Parquet and DuckDB files (builds with the `duckdb` feature): id → files.
    #[serde(default)]
    pub duckdb: BTreeMap<String, RawDuckDb>,
    /// Hosts `Databases.Register` may connect to on MySQL; none turns such registration off.
    #[serde(default)]
    pub mysql_hosts: Vec<String>,
    /// Passwords MySQL registrations may name: name → file holding it.
    #[serde(default)]
    pub mysql_passwords: BTreeMap<String, PathBuf>,
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

/// A MySQL or MariaDB database in the configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMySql {
    /// `mysql://user@host:port/database` (TLS with `?root_cert_path=CA.pem`); put the password
    /// in `password_file`, not here.
    pub url: String,
    /// The database holding the tables (default: the URL's).
    pub database: Option<String>,
    /// A file whose first line is the password.
    pub password_file: Option<PathBuf>,
    /// Connections this database may hold at once (default 4).
    pub max_connections: Option<u32>,
}

/// Files served through DuckDB in the configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDuckDb {
    /// A `.csv`, `.tsv`, `.parquet` or `.duckdb` file, or a folder of CSV and Parquet files (one
    /// table each, named by the file).
    pub path: PathBuf,
    /// DuckDB's memory limit for this database in MiB (default 1024).
    pub max_memory_mib: Option<u64>,
    /// Threads one query may use (default 2).
    pub threads: Option<u32>,
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
/// (Serialize only lists its keys in the message that refuses an unknown one.)
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RawPipelineSetup {
    /// Tokens each generator may write per answer (default 256).
    pub max_new_tokens: Option<usize>,
    /// Spider-style train file (and its databases) for few-shot demonstrations.
    pub demos_file: Option<PathBuf>,
    pub demos_database_dir: Option<PathBuf>,
    /// Where the embedded demonstration index is cached (default: `demo-index.bin` beside
    /// the models directory); rebuilt when the train file or the embedder changes.
    pub demos_cache: Option<PathBuf>,
    /// How questions are de-semanticized for retrieval: `lexical` (default; n-gram matching) or
    /// `relevance` (the de-semanticization paper's probe with the embedder model: a pass per
    /// question word, 0.56 s a question on 2 cores, so indexing Spider's 7000 train questions takes
    /// about an hour).
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

impl RawPipelineSetup {
    /// The setup's keys as a config file writes them, from the struct itself.
    pub fn keys() -> Vec<String> {
        match serde_json::to_value(Self::default()) {
            Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
            _ => unreachable!("the setup serializes to a JSON object"),
        }
    }
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
                "unknown pipeline setting `{key}`; the knobs are {} and the other settings {}",
                PipelineKnobs::NAMES.join(", "),
                RawPipelineSetup::keys().join(", ")
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    pub scrape_listen: Option<String>,
    pub auth_token: Option<String>,
    pub tokens_file: Option<PathBuf>,
    pub audit_log: Option<PathBuf>,
    pub allow_unauthenticated: Option<bool>,
    pub device: Option<DeviceSpec>,
    pub database_dir: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub cpu_path: Option<CpuPath>,
    pub profile: Option<Profile>,
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
            &mut server.tokens_file,
        ] {
            rebase_set(p);
        }
        // `-` is stdout, not a file next to the configuration.
        if server.audit_log.as_deref() != Some(Path::new(AUDIT_TO_STDOUT)) {
            rebase_set(&mut server.audit_log);
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
        db.mysql_passwords.values_mut().for_each(rebase);
        for pg in db.postgres.values_mut() {
            rebase_set(&mut pg.password_file);
        }
        for my in db.mysql.values_mut() {
            rebase_set(&mut my.password_file);
        }
        for files in db.duckdb.values_mut() {
            rebase(&mut files.path);
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
        server.scrape_listen = o.scrape_listen.or(server.scrape_listen.take());
        server.auth_token = o.auth_token.or(server.auth_token.take());
        server.tokens_file = o.tokens_file.or(server.tokens_file.take());
        server.audit_log = o.audit_log.or(server.audit_log.take());
        server.allow_unauthenticated = o
            .allow_unauthenticated
            .or(server.allow_unauthenticated.take());
        server.device = o.device.or(server.device.take());
        server.tls_cert = o.tls_cert.or(server.tls_cert.take());
        server.tls_key = o.tls_key.or(server.tls_key.take());
        server.profile = o.profile.or(server.profile.take());
        self.databases.dir = o.database_dir.or(self.databases.dir.take());
        self.cpu_path = o.cpu_path.or(self.cpu_path.take());
    }
}
