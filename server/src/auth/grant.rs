//! What an authenticated caller holds: the databases it reaches, its rights and its quotas.

use std::sync::Arc;

use super::quota::{QuotaLimits, QuotaState};
use super::right::{Right, Rights};
use super::scope::DatabaseScope;

#[derive(Debug, Clone)]
pub struct Grant {
    pub scope: DatabaseScope,
    pub rights: Rights,
    pub limits: QuotaLimits,
    pub usage: Arc<QuotaState>,
}

impl Grant {
    /// A server without tokens, reachable only where the operator allowed it: every database,
    /// asking and registering as before tokens existed. Adapters stay closed (they change what
    /// the models answer for everyone).
    pub fn open() -> Self {
        Self {
            scope: DatabaseScope::everything(),
            rights: Rights::new([Right::Ask, Right::Register]),
            limits: QuotaLimits::default(),
            usage: Arc::default(),
        }
    }

    /// The single token of `server.auth_token`: everything, as it always had.
    pub fn admin() -> Self {
        Self {
            scope: DatabaseScope::everything(),
            rights: Rights::all(),
            limits: QuotaLimits::default(),
            usage: Arc::default(),
        }
    }
}
