//! `quorum mcp`: the MCP server over stdio for desktop assistants, answering through a running
//! Quorum server's gRPC API with a token (its scopes and rights apply).

use anyhow::{Context, Result};
use rmcp::ServiceExt;

#[derive(clap::Args, Debug)]
pub struct McpArgs {
    /// The running server (gRPC).
    #[arg(long, default_value = "http://127.0.0.1:50051", env = "QUORUM_SERVER")]
    pub server: String,
    /// The bearer token to send.
    #[arg(long, env = "QUORUM_AUTH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// PEM certificate to trust for an https:// server.
    #[arg(long, env = "QUORUM_CA_CERT")]
    pub ca_cert: Option<std::path::PathBuf>,
}

pub async fn mcp(args: McpArgs) -> Result<()> {
    let endpoint = quorum_server::client::endpoint(&args.server, args.ca_cert.as_deref())?;
    // Connect on first use: an assistant starts this process before the server may be up.
    let channel = endpoint.connect_lazy();
    let server = quorum_server::mcp::QuorumMcp::remote(channel, args.token)
        .serve(rmcp::transport::stdio())
        .await
        .context("starting the MCP session on stdio")?;
    server.waiting().await.context("the MCP session")?;
    Ok(())
}
