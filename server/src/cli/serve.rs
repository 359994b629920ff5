//! `quorum serve` and `quorum health`: the server's process and its probe.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use quorum_models::{CpuPath, DeviceSpec};
use quorum_server::config::file::{Overrides, RawConfig};
use quorum_server::config::profile::Profile;
use quorum_server::model_source::ModelDirs;
use tonic_health::pb::health_check_response::ServingStatus;

/// `quorum serve` flags; each also reads an environment variable, and both win over the file.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// TOML configuration file (models by role, databases, pipeline, limits).
    #[arg(long, env = "QUORUM_CONFIG")]
    pub config: Option<PathBuf>,
    /// The shipped set of models to serve when the configuration lists none: `default`
    /// (Qwen2.5-Coder-1.5B writing two queries a question), `small` (three voters on
    /// Qwen2.5-Coder-0.5B with the shipped adapters) or `accurate` (three voters on
    /// Qwen2.5-Coder-1.5B); docs/RESULTS.md compares them.
    #[arg(long, env = "QUORUM_PROFILE", value_enum)]
    pub profile: Option<Profile>,
    /// gRPC address (default 127.0.0.1:50051).
    #[arg(long, env = "QUORUM_LISTEN")]
    pub listen: Option<String>,
    /// Prometheus metrics address (default 127.0.0.1:9464; empty disables).
    #[arg(long, env = "QUORUM_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// An address serving only /metrics, /live and /ready (for Prometheus, without the API).
    #[arg(long, env = "QUORUM_SCRAPE_LISTEN")]
    pub scrape_listen: Option<String>,
    /// Require `authorization: Bearer <token>` on the Quorum services.
    #[arg(long, env = "QUORUM_AUTH_TOKEN", hide_env_values = true)]
    pub auth_token: Option<String>,
    /// Tokens with names, database scopes, rights and quotas (a TOML file of hashed tokens,
    /// reloaded on change; `quorum token new` writes an entry).
    #[arg(long, env = "QUORUM_TOKENS_FILE")]
    pub tokens_file: Option<PathBuf>,
    /// Write the audit trail (one JSON line per request) to this file, or `-` for stdout.
    #[arg(long, env = "QUORUM_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,
    /// Serve without a token on an address other than loopback (refused otherwise): anyone
    /// who reaches the ports may ask of every database.
    #[arg(long, env = "QUORUM_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,
    /// Directory scanned for SQLite databases (default: Spider's dev databases).
    #[arg(long, env = "QUORUM_DATABASE_DIR")]
    pub database_dir: Option<PathBuf>,
    /// Serve over TLS with this PEM certificate chain (with --tls-key).
    #[arg(long, env = "QUORUM_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's PEM private key.
    #[arg(long, env = "QUORUM_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct HealthArgs {
    /// Server address.
    #[arg(long, default_value = "http://127.0.0.1:50051", env = "QUORUM_SERVER")]
    pub server: String,
    /// The health entry: "" (default) is readiness, "liveness" is liveness.
    #[arg(long, default_value = "")]
    pub service: String,
    /// PEM certificate to trust for an https:// server.
    #[arg(long, env = "QUORUM_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// Give up (unhealthy) after this long.
    #[arg(long, default_value_t = 3.0)]
    pub timeout_secs: f64,
}

pub fn health(args: HealthArgs) -> Result<()> {
    let endpoint = quorum_server::client::endpoint(&args.server, args.ca_cert.as_deref())?;
    let timeout = Duration::try_from_secs_f64(args.timeout_secs)
        .map_err(|_| anyhow::anyhow!("--timeout-secs must be a positive number of seconds"))?;
    let status = tokio::runtime::Runtime::new()
        .context("starting the async runtime")?
        .block_on(quorum_server::client::check_once(
            endpoint,
            &args.service,
            timeout,
        ))?;
    println!("{}", status.as_str_name());
    if status != ServingStatus::Serving {
        std::process::exit(1);
    }
    Ok(())
}

pub fn serve(
    dirs: &ModelDirs,
    device: Option<DeviceSpec>,
    cpu_path: CpuPath,
    args: ServeArgs,
) -> Result<()> {
    let mut raw = match &args.config {
        Some(path) => RawConfig::from_file(path)?,
        None => RawConfig::default(),
    };
    raw.apply(Overrides {
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        scrape_listen: args.scrape_listen,
        auth_token: args.auth_token,
        tokens_file: args.tokens_file,
        audit_log: args.audit_log,
        allow_unauthenticated: args.allow_unauthenticated.then_some(true),
        device,
        database_dir: args.database_dir,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        cpu_path: Some(cpu_path),
        profile: args.profile,
    });
    let spider = std::env::var_os("QUORUM_SPIDER_DIR").map(PathBuf::from);
    let default_db_dir = quorum_server::config::shipped::default_database_dir(spider);
    let config = quorum_server::config::resolved::resolve(raw, dirs, &default_db_dir)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let mut server = quorum_server::start(config).await?;
        eprintln!("quorum: serving gRPC on {}", server.addr);
        if let Some(m) = server.metrics_addr {
            eprintln!("quorum: metrics on http://{m}/metrics");
        }
        let drain = server.shutdown_token();
        tokio::select! {
            signal = shutdown_signal() => {
                signal?;
                eprintln!("quorum: shutting down (in-flight requests finish first)");
                drain.cancel();
            }
            // The server also stops by itself when loading fails.
            result = server.stopped() => return result,
        }
        server.stopped().await
    })
}

/// SIGTERM (what orchestrators send) or ctrl-c.
async fn shutdown_signal() -> Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => Ok(()),
            r = tokio::signal::ctrl_c() => Ok(r?),
        }
    }
    #[cfg(not(unix))]
    {
        Ok(tokio::signal::ctrl_c().await?)
    }
}
