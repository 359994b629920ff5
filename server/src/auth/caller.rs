//! Who is calling, through which surface, with what grant. The authenticator puts one into
//! every request's extensions; handlers ask it before they touch a database or an adapter.

use std::net::IpAddr;
use std::sync::Arc;

use super::grant::Grant;
use super::quota::RunSlot;
use super::right::Right;
use crate::status::ServiceError;

/// The face a request came through, for the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Grpc,
    /// `/v1/sql` and `/v1/databases`.
    Http,
    /// The OpenAI-compatible routes.
    OpenAi,
    /// The playground page (its requests say so).
    Playground,
    /// The Model Context Protocol at `/mcp`.
    Mcp,
}

impl Surface {
    pub fn name(self) -> &'static str {
        match self {
            Self::Grpc => "grpc",
            Self::Http => "http",
            Self::OpenAi => "openai",
            Self::Playground => "playground",
            Self::Mcp => "mcp",
        }
    }
}

/// The name of every caller of a server without tokens.
pub const ANONYMOUS: &str = "anonymous";

#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's name (`default` for `server.auth_token`, `anonymous` without tokens).
    pub name: Arc<str>,
    pub surface: Surface,
    pub peer: Option<IpAddr>,
    pub grant: Arc<Grant>,
}

impl Caller {
    /// The caller of a request that carries none: nothing is allowed. Only a request built
    /// around the authenticator could lack one, and that must fail closed.
    pub fn nobody() -> Self {
        Self {
            name: Arc::from("unauthenticated"),
            surface: Surface::Grpc,
            peer: None,
            grant: Arc::new(Grant {
                scope: super::scope::DatabaseScope::nothing(),
                rights: super::right::Rights::default(),
                limits: super::quota::QuotaLimits::default(),
                usage: Arc::default(),
            }),
        }
    }

    pub fn require(&self, right: Right) -> Result<(), ServiceError> {
        if self.grant.rights.has(right) {
            return Ok(());
        }
        if &*self.name == ANONYMOUS {
            return Err(ServiceError::PermissionDenied {
                reason: format!(
                    "the `{}` right needs a server with an auth token (server.auth_token or \
                     server.tokens_file): without one, anyone could use it",
                    right.name()
                ),
            });
        }
        Err(ServiceError::PermissionDenied {
            reason: format!(
                "token `{}` does not hold the `{}` right (it holds: {})",
                self.name,
                right.name(),
                match self.grant.rights.names() {
                    names if names.is_empty() => "none".to_owned(),
                    names => names.join(", "),
                }
            ),
        })
    }

    /// Whether `db_id` (an id as registered) is in the caller's scope.
    pub fn may_see(&self, db_id: &str) -> bool {
        self.grant.rights.any() && self.grant.scope.allows(db_id)
    }

    /// A database out of scope answers exactly as one that does not exist, so that a caller
    /// cannot learn which ids other teams have.
    pub fn check_database(&self, db_id: &str) -> Result<(), ServiceError> {
        if self.may_see(db_id) {
            Ok(())
        } else {
            Err(ServiceError::NotFound {
                what: "database",
                id: db_id.to_owned(),
            })
        }
    }

    /// Whether the caller may see where databases live (file paths, PostgreSQL hosts and
    /// users): an admin token, or anyone on a server without tokens (the operator's own).
    pub fn sees_locations(&self) -> bool {
        &*self.name == ANONYMOUS || self.grant.rights.has(Right::Admin)
    }

    /// Counts one text-to-SQL run against the token's quota until the slot drops.
    pub fn start_run(&self) -> Result<RunSlot, ServiceError> {
        self.grant.usage.start_run(&self.name, self.grant.limits)
    }
}
