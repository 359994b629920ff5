//! Authentication for every surface alike (gRPC metadata and HTTP headers carry the same
//! `authorization: Bearer <token>`): a request's token is turned into the [`Caller`] its
//! handlers consult, or refused. Health, reflection, metrics, probes and the playground page
//! stay open: probes and tooling (grpcurl, load balancers, Prometheus) carry no application
//! credentials, and none of them reads a database.

use std::net::IpAddr;
use std::sync::Arc;

use tonic::service::Interceptor;
use tonic::{Request, Status};

use super::caller::{ANONYMOUS, Caller, Surface};
use super::failures::FailedAttempts;
use super::grant::Grant;
use super::tokens_file::{TokensFile, digest_of};
use crate::audit::{AuditLog, AuditRecord};
use crate::status::ServiceError;

/// The name `server.auth_token` is known by in the audit trail.
pub const SINGLE_TOKEN_NAME: &str = "default";

#[derive(Debug, Clone)]
pub struct Authenticator {
    single: Option<([u8; 32], Arc<Grant>)>,
    file: Option<Arc<TokensFile>>,
    open: Arc<Grant>,
    failures: Arc<FailedAttempts>,
    audit: Option<Arc<AuditLog>>,
}

/// The credentials of a `Bearer` authorization value; the scheme name is case-insensitive
/// (RFC 7235, section 2.1), so `bearer` and `BEARER` are accepted too.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}

impl Authenticator {
    pub fn new(
        single: Option<&str>,
        file: Option<Arc<TokensFile>>,
        audit: Option<Arc<AuditLog>>,
    ) -> Self {
        Self {
            single: single.map(|t| (digest_of(t), Arc::new(Grant::admin()))),
            file,
            open: Arc::new(Grant::open()),
            failures: Arc::default(),
            audit,
        }
    }

    /// Whether callers must present a token.
    pub fn closed(&self) -> bool {
        self.single.is_some() || self.file.is_some()
    }

    /// The caller an `authorization` value (gRPC metadata or HTTP header alike) stands for.
    pub fn authenticate(
        &self,
        authorization: Option<&str>,
        peer: Option<IpAddr>,
        surface: Surface,
    ) -> Result<Caller, ServiceError> {
        if !self.closed() {
            return Ok(Caller {
                name: Arc::from(ANONYMOUS),
                surface,
                peer,
                grant: self.open.clone(),
            });
        }
        if let Some(left) = peer.and_then(|p| self.failures.blocked_for(p)) {
            return Err(ServiceError::ResourceExhausted {
                reason: format!(
                    "too many failed authentications from this address; try again in {} s",
                    left.as_secs().max(1)
                ),
            });
        }
        let found = authorization.and_then(bearer_token).and_then(|presented| {
            let digest = digest_of(presented);
            let single = self.single.as_ref().and_then(|(d, grant)| {
                bool::from(subtle::ConstantTimeEq::ct_eq(&d[..], &digest[..]))
                    .then(|| (Arc::<str>::from(SINGLE_TOKEN_NAME), grant.clone()))
            });
            let from_file = self.file.as_ref().and_then(|f| {
                f.current()
                    .find(presented)
                    .map(|t| (t.name.clone(), t.grant.clone()))
            });
            single.or(from_file)
        });
        let Some((name, grant)) = found else {
            if let Some(p) = peer {
                self.failures.record(p);
            }
            if let Some(audit) = &self.audit {
                audit.write(&AuditRecord::refused(surface.name(), peer));
            }
            return Err(ServiceError::Unauthenticated);
        };
        grant.usage.admit_request(&name, grant.limits)?;
        Ok(Caller {
            name,
            surface,
            peer,
            grant,
        })
    }
}

impl Interceptor for Authenticator {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        let peer = request.remote_addr().map(|a| a.ip());
        let caller = self
            .authenticate(presented, peer, Surface::Grpc)
            .map_err(unauthenticated_status)?;
        request.extensions_mut().insert(caller);
        Ok(request)
    }
}

/// The status of a refused authentication, with how to send a token.
pub fn unauthenticated_status(err: ServiceError) -> Status {
    match err {
        ServiceError::Unauthenticated => Status::unauthenticated(
            "missing or invalid bearer token (send `authorization: Bearer <token>`)",
        ),
        other => Status::from(other),
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
        let mut open = Authenticator::new(None, None, None);
        let caller = open.call(with_header(None)).expect("open");
        assert_eq!(
            &*caller.extensions().get::<Caller>().expect("caller").name,
            ANONYMOUS
        );
        let mut closed = Authenticator::new(Some("s3cret"), None, None);
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

    #[test]
    fn repeated_failures_from_one_address_are_refused_before_any_lookup() {
        let auth = Authenticator::new(Some("s3cret"), None, None);
        let peer: IpAddr = "192.0.2.7".parse().expect("ip");
        for _ in 0..super::super::failures::MAX_FAILURES {
            let e = auth
                .authenticate(Some("Bearer guess"), Some(peer), Surface::Http)
                .expect_err("wrong");
            assert!(matches!(e, ServiceError::Unauthenticated));
        }
        let e = auth
            .authenticate(Some("Bearer s3cret"), Some(peer), Surface::Http)
            .expect_err("blocked even with the right token");
        assert!(matches!(e, ServiceError::ResourceExhausted { .. }), "{e}");
        let other: IpAddr = "192.0.2.8".parse().expect("ip");
        assert!(
            auth.authenticate(Some("Bearer s3cret"), Some(other), Surface::Http)
                .is_ok()
        );
    }
}
