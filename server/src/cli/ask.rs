//! `quorum ask`: a small gRPC client for Text2Sql.Generate, used by the quick start. It waits
//! until the server reports SERVING (models loaded and warmed), then asks one question and
//! prints the SQL, its result preview and the evidence.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use quorum_proto::v1 as pb;
use quorum_server::client::{AuthChannel, BearerToken, health_status};
use tonic_health::pb::health_check_response::ServingStatus;

/// Where the client subcommands (`ask`, `link`, `debug`, `optimize`, `explain`) find the
/// server.
#[derive(clap::Args, Debug)]
pub struct ClientArgs {
    /// Server address.
    #[arg(long, default_value = "http://127.0.0.1:50051", env = "QUORUM_SERVER")]
    pub server: String,
    /// PEM certificate to trust for an https:// server (e.g. a self-signed one).
    #[arg(long, env = "QUORUM_CA_CERT")]
    pub ca_cert: Option<std::path::PathBuf>,
    /// How long to wait for the server to become ready (models load at start-up).
    #[arg(long, default_value_t = 600)]
    pub wait_secs: u64,
    /// The server's auth token, sent as `authorization: Bearer <token>` on every request; needed
    /// when the server has one (`auth_token`), as are adapter loads and unloads.
    #[arg(long, env = "QUORUM_AUTH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

impl ClientArgs {
    /// A channel to the server once it reports SERVING, sending the token with every request.
    pub async fn connect(&self) -> Result<AuthChannel> {
        let token = BearerToken::new(self.token.as_deref())?;
        let channel = wait_ready(
            &self.server,
            self.ca_cert.as_deref(),
            Duration::from_secs(self.wait_secs),
        )
        .await?;
        Ok(AuthChannel::new(channel, token))
    }
}

#[derive(clap::Args, Debug)]
pub struct AskArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Database id (see `Databases.List`).
    #[arg(long, default_value = "concert_singer")]
    pub db: String,
    /// The question.
    pub question: String,
}

/// Connects (over TLS for https:// URLs, trusting `ca_cert` when given) and waits until the
/// server reports SERVING.
pub(crate) async fn wait_ready(
    server: &str,
    ca_cert: Option<&std::path::Path>,
    wait: Duration,
) -> Result<tonic::transport::Channel> {
    let endpoint = quorum_server::client::endpoint(server, ca_cert)?;
    let start = Instant::now();
    loop {
        if let Ok(channel) = endpoint.connect().await
            && matches!(
                health_status(&channel, "").await,
                Ok(ServingStatus::Serving)
            )
        {
            return Ok(channel);
        }
        if start.elapsed() > wait {
            bail!("{server} did not become ready within {} s", wait.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub(crate) fn cell(v: &pb::Value) -> String {
    match &v.kind {
        Some(pb::value::Kind::Null(_)) | None => "NULL".into(),
        Some(pb::value::Kind::Integer(i)) => i.to_string(),
        Some(pb::value::Kind::Real(r)) => r.to_string(),
        Some(pb::value::Kind::Text(t)) => t.clone(),
        Some(pb::value::Kind::Blob(b)) => format!("<{} bytes>", b.len()),
    }
}

pub async fn ask(args: AskArgs) -> Result<()> {
    let channel = args.client.connect().await?;
    let mut client = pb::text2_sql_client::Text2SqlClient::new(channel);
    let started = Instant::now();
    let response = client
        .generate(pb::Text2SqlRequest {
            question: args.question.clone(),
            db_id: args.db.clone(),
            evidence: None,
            options: None,
        })
        .await
        .context("Text2Sql.Generate")?
        .into_inner();
    println!("question: {}", args.question);
    println!("database: {}", args.db);
    println!("sql:      {}", response.sql);
    if let Some(p) = &response.preview {
        println!(
            "result:   {} ({} rows)",
            p.columns.join(" | "),
            p.total_rows
        );
        for row in p.rows.iter().take(5) {
            let cells: Vec<String> = row.values.iter().map(cell).collect();
            println!("          {}", cells.join(" | "));
        }
    }
    if let Some(l) = &response.linked_tables {
        println!("linked:   {}", l.tables.join(", "));
    }
    for c in &response.candidates {
        let outcome = match &c.outcome {
            Some(pb::candidate::Outcome::Ok(_)) => "ok".to_string(),
            Some(pb::candidate::Outcome::Error(e)) => format!("error ({})", e.kind),
            None => "?".to_string(),
        };
        println!(
            "candidate {} [{} {:?}] {}: {}",
            c.id,
            c.model,
            c.round(),
            outcome,
            c.sql
        );
    }
    println!(
        "time:     {:.1} s, {} tokens generated",
        started.elapsed().as_secs_f64(),
        response.tokens_generated
    );
    Ok(())
}
