//! What the handle and the engine thread share: the commands the handle sends, and the
//! counters both update.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::mpsc::UnboundedSender;

use crate::ids::RequestId;
use crate::logits_constraint::LogitsConstraint;
use crate::request::{EngineEvent, GenerateRequest};
use crate::stats::EngineStats;

pub(crate) enum Command {
    Add {
        id: RequestId,
        choice: u32,
        /// Boxed: a request is much larger than the other commands.
        request: Box<GenerateRequest>,
        /// This choice's own grammar state, when the request has a grammar.
        constraint: Option<Box<dyn LogitsConstraint>>,
        tx: UnboundedSender<EngineEvent>,
    },
    Shutdown,
}

/// State shared by the handle and the engine thread.
pub(crate) struct Shared {
    pub(crate) stats: Mutex<EngineStats>,
    /// Sequences submitted and not yet finished; admission compares it with `limit`.
    pub(crate) pending: AtomicUsize,
    pub(crate) limit: usize,
    pub(crate) shutting_down: AtomicBool,
    pub(crate) next_id: AtomicU64,
}

impl Shared {
    pub(crate) fn stats(&self) -> MutexGuard<'_, EngineStats> {
        // A poisoned lock only means a panic elsewhere mid-update; the numbers are still usable.
        self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn release(&self, n: usize) {
        self.pending.fetch_sub(n, Ordering::AcqRel);
    }
}
