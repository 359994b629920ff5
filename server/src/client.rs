//! What the `quorum` binary's client subcommands share: connecting to a server (plain or TLS)
//! and asking its standard gRPC health service. `quorum health` is the container
//! `HEALTHCHECK`; `quorum ask` waits on the same check before asking.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

/// An endpoint for `server` (`http://` or `https://`), trusting `ca_cert` for TLS when given.
pub fn endpoint(server: &str, ca_cert: Option<&Path>) -> Result<Endpoint> {
    let mut endpoint = Endpoint::from_shared(server.to_string())
        .with_context(|| format!("'{server}' is not a server address"))?;
    if server.starts_with("https://") {
        let mut tls = ClientTlsConfig::new();
        if let Some(path) = ca_cert {
            let pem = std::fs::read(path)
                .with_context(|| format!("--ca-cert: reading {}", path.display()))?;
            tls = tls.ca_certificate(Certificate::from_pem(pem));
        }
        endpoint = endpoint.tls_config(tls).context("TLS settings")?;
    }
    Ok(endpoint)
}

/// The health of `service` on the server behind `channel`: "" is readiness (models loaded, not
/// draining), [`crate::health::LIVENESS`] is liveness.
pub async fn health_status(channel: &Channel, service: &str) -> Result<ServingStatus> {
    let response = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: service.to_string(),
        })
        .await
        .with_context(|| format!("grpc.health.v1.Health/Check for '{service}'"))?;
    ServingStatus::try_from(response.into_inner().status)
        .context("the server answered an unknown health status")
}

/// Connects and checks once, all within `timeout`.
pub async fn check_once(
    endpoint: Endpoint,
    service: &str,
    timeout: Duration,
) -> Result<ServingStatus> {
    tokio::time::timeout(timeout, async {
        let channel = endpoint.connect().await.context("connecting")?;
        health_status(&channel, service).await
    })
    .await
    .with_context(|| format!("no answer within {} ms", timeout.as_millis()))?
}
