//! Optional bearer-token authentication for the Quorum services, over gRPC and HTTP alike.
//! Health, reflection, metrics, probes and the playground page stay open: probes and tooling
//! (grpcurl, load balancers, Prometheus) do not carry application credentials.

use std::sync::Arc;

use tonic::service::Interceptor;
use tonic::{Request, Status};

#[derive(Debug, Clone)]
pub struct BearerAuth {
    token: Option<Arc<str>>,
}

impl BearerAuth {
    pub fn new(token: Option<String>) -> Self {
        Self {
            token: token.map(Arc::from),
        }
    }
}

/// Compares without an early exit, so that response time does not reveal how much of a
/// guessed token was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The credentials of a `Bearer` authorization value; the scheme name is case-insensitive
/// (RFC 7235, section 2.1), so `bearer` and `BEARER` are accepted too.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}

impl BearerAuth {
    /// Checks an `authorization` header value (gRPC metadata or HTTP header alike).
    pub fn check(&self, authorization: Option<&str>) -> Result<(), Status> {
        let Some(expected) = &self.token else {
            return Ok(());
        };
        match authorization.and_then(bearer_token) {
            Some(token) if same(token.as_bytes(), expected.as_bytes()) => Ok(()),
            _ => Err(Status::unauthenticated(
                "missing or invalid bearer token (send `authorization: Bearer <token>`)",
            )),
        }
    }
}

impl Interceptor for BearerAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        self.check(presented)?;
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_header(value: Option<&str>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(v) = value {
            r.metadata_mut()
                .insert("authorization", v.parse().expect("ascii"));
        }
        r
    }

    #[test]
    fn checks_the_bearer_token_only_when_configured() {
        let mut open = BearerAuth::new(None);
        assert!(open.call(with_header(None)).is_ok());
        let mut closed = BearerAuth::new(Some("s3cret".into()));
        assert!(closed.call(with_header(Some("Bearer s3cret"))).is_ok());
        assert!(closed.call(with_header(Some("bearer s3cret"))).is_ok());
        assert!(closed.call(with_header(Some("BEARER  s3cret"))).is_ok());
        assert!(closed.call(with_header(Some("Basic s3cret"))).is_err());
        let denied = closed
            .call(with_header(Some("Bearer nope")))
            .expect_err("wrong token");
        assert_eq!(denied.code(), tonic::Code::Unauthenticated);
        assert!(closed.call(with_header(None)).is_err());
        assert!(closed.call(with_header(Some("s3cret"))).is_err());
    }
}
