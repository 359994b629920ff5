//! What the `quorum` binary's client subcommands share: connecting to a server (plain or TLS),
//! sending its bearer token, and asking its standard gRPC health service. `quorum health` is the container
//! `HEALTHCHECK`; `quorum ask` waits on the same check before asking.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
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

/// Adds `authorization: Bearer <token>` to every request when there is a token: what a server
/// started with `auth_token` asks of callers of its Quorum services.
#[derive(Debug, Clone)]
pub struct BearerToken(Option<MetadataValue<Ascii>>);

impl BearerToken {
    pub fn new(token: Option<&str>) -> Result<Self> {
        let value = token
            .map(|t| {
                format!("Bearer {t}")
                    .parse()
                    .context("the token must be printable ASCII")
            })
            .transpose()?;
        Ok(Self(value))
    }
}

impl Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// A channel whose requests carry the bearer token, if any.
pub type AuthChannel = InterceptedService<Channel, BearerToken>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_goes_on_every_request_only_when_set() {
        let mut with = BearerToken::new(Some("s3cret")).unwrap();
        let request = with.call(tonic::Request::new(())).unwrap();
        assert_eq!(
            request.metadata().get("authorization").unwrap(),
            "Bearer s3cret"
        );
        let mut without = BearerToken::new(None).unwrap();
        let request = without.call(tonic::Request::new(())).unwrap();
        assert!(request.metadata().get("authorization").is_none());
        let err = BearerToken::new(Some("two\nlines"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("printable ASCII"), "{err}");
    }
}
